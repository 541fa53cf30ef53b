// A local source tree read with its stat cache (source::TreeStatCache) kept where store/ says
// (trees/<path-hash>.stat): `plan` and `wheel`'s prepare and fetch read only what changed since.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "plan/plan.hpp"
#include "source/local.hpp"
#include "store/layout.hpp"

namespace archbuild::stages {

// source::scan_local_tree with the folder's cache: read (untrusted) before, written atomically
// after unless its bytes are the ones read (nothing changed). Without a layout (no cache
// directory) every file is read. A cache that cannot be written is said through `warn` (the
// next scan reads everything again); it never fails the scan.
Result<source::LocalTree> scan_local_tree_cached(const store::Layout* layout, const std::filesystem::path& dir,
                                                 std::string_view what,
                                                 const std::function<void(const std::string&)>& warn = {},
                                                 source::TreeStatCache* stats = nullptr);

// The tree's shape and configuration files (plan::SourceChoice's shape_hash, config_files): what
// plan::decide_build_start compares with the slot's earlier build.
struct TreeShape {
  std::string hash;  // SHA-256 over every entry's path, kind (file, executable, link) and link target
  std::map<std::string, std::string> config_files;  // plan::is_configuration_file → content digest
};
TreeShape tree_shape(const source::LocalTree& tree);

// work/<slot>/state.json, written by the fetch stage once the slot's tree is the key's copy.
std::string work_state_json(const std::string& key, const TreeShape& shape);
// The slot's earlier build as the cache holds it: the key its state names, whether that key's
// record has a configure stamp, the shape it recorded. None: no state, or one that does not parse.
std::optional<plan::EarlierBuild> earlier_build(const store::Layout& layout, const std::string& slot);

}  // namespace archbuild::stages
