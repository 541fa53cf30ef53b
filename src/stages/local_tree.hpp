// A local source tree read with its stat cache (source::TreeStatCache) kept where store/ says
// (trees/<path-hash>.stat): `plan` and `wheel`'s prepare and fetch read only what changed since.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "source/local.hpp"
#include "store/layout.hpp"

namespace archbuild::stages {

// source::scan_local_tree with the folder's cache: read (untrusted) before, written atomically
// after when the scan read any file or found no usable cache. Without a layout (no cache
// directory) every file is read. A cache that cannot be written is said through `warn` (the
// next scan reads everything again); it never fails the scan.
Result<source::LocalTree> scan_local_tree_cached(const store::Layout* layout, const std::filesystem::path& dir,
                                                 std::string_view what,
                                                 const std::function<void(const std::string&)>& warn = {},
                                                 source::TreeStatCache* stats = nullptr);

}  // namespace archbuild::stages
