#include "stages/local_tree.hpp"

#include <fmt/format.h>

#include "store/tree_cache.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;

Result<source::LocalTree> scan_local_tree_cached(const store::Layout* layout, const fs::path& dir, std::string_view what,
                                                 const std::function<void(const std::string&)>& warn,
                                                 source::TreeStatCache* stats) {
  source::TreeStatCache cache;
  std::error_code ec;
  fs::path root = layout ? fs::canonical(dir, ec) : fs::path();
  bool cached = layout && !ec;
  if (cached) cache.previous = store::read_tree_stat_cache(*layout, root);
  auto tree = source::scan_local_tree(dir, what, cached ? &cache : nullptr);
  if (tree && cached && (cache.rehashed > 0 || !cache.previous_valid)) {
    // The scan resolved the same folder; its root is the name the cache is kept under.
    if (auto w = store::write_tree_stat_cache(*layout, tree->root, cache.next); !w && warn)
      warn(fmt::format("the stat cache of {} was not written ({}); the next run reads every file again",
                       tree->root.string(), w.error().message));
  }
  if (stats) *stats = std::move(cache);
  return tree;
}

}  // namespace archbuild::stages
