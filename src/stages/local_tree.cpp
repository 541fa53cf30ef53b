#include "stages/local_tree.hpp"

#include <fmt/format.h>

#include "core/sha256.hpp"
#include "store/key_record.hpp"
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
  // Not written again when it would be the same bytes (a repeat with nothing changed).
  if (tree && cached && !cache.unchanged) {
    // The scan resolved the same folder; its root is the name the cache is kept under.
    if (auto w = store::write_tree_stat_cache(*layout, tree->root, cache.next); !w && warn)
      warn(fmt::format("the stat cache of {} was not written ({}); the next run reads every file again",
                       tree->root.string(), w.error().message));
  }
  if (stats) *stats = std::move(cache);
  return tree;
}

TreeShape tree_shape(const source::LocalTree& tree) {
  TreeShape out;
  Sha256 all;
  all.update("archbuild tree shape v1\n");
  for (const auto& e : tree.entries) {
    const char* kind = e.kind == source::LocalEntry::Kind::symlink    ? "link"
                       : e.kind == source::LocalEntry::Kind::executable ? "exec"
                                                                        : "file";
    all.update(fmt::format("{} {} {} {} {}\n", e.path.size(), e.path, kind, e.link_target.size(), e.link_target));
    if (e.kind != source::LocalEntry::Kind::symlink && plan::is_configuration_file(e.path))
      out.config_files[e.path] = e.digest;
  }
  out.hash = all.hex();
  return out;
}

std::string work_state_json(const std::string& key, const TreeShape& shape) {
  nlohmann::json j = {{"key", key}, {"shape_hash", shape.hash}, {"config_files", shape.config_files}};
  return j.dump(1);
}

std::optional<plan::EarlierBuild> earlier_build(const store::Layout& layout, const std::string& slot) {
  auto bytes = store::read_work_state(layout, slot);
  if (!bytes) return std::nullopt;
  auto j = nlohmann::json::parse(*bytes, nullptr, false);
  if (!j.is_object() || !j["key"].is_string() || !j["shape_hash"].is_string() || !j["config_files"].is_object())
    return std::nullopt;
  plan::EarlierBuild e;
  e.key = j["key"].get<std::string>();
  if (!store::Layout::valid_name(e.key)) return std::nullopt;
  e.shape_hash = j["shape_hash"].get<std::string>();
  for (const auto& [path, digest] : j["config_files"].items())
    if (digest.is_string()) e.config_files[path] = digest.get<std::string>();
  store::KeyRecord record(layout, e.key);
  auto doc = record.read();
  e.configured = doc && doc->contains("stages") && (*doc)["stages"].is_object() && (*doc)["stages"].contains("configure");
  return e;
}

}  // namespace archbuild::stages
