// Where a local source folder's stat cache is kept, and its bytes read and written
// (source::TreeStatCache decides what they mean; they are untrusted here and there).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "store/layout.hpp"

namespace archbuild::store {

// The bytes of trees/<hash>.stat for `canonical_root`; none when there is none, when it is not a
// regular file (opened without waiting: a FIFO there is refused at once), cannot be read, or is
// larger than any cache of a real tree (64 MiB: PyTorch with its submodules is ~30k files, ~6 MB).
std::optional<std::string> read_tree_stat_cache(const Layout& layout, const std::filesystem::path& canonical_root);

// Writes them atomically (store::AtomicFile): a reader sees the old cache or the new one. Not
// fsync'ed (after a crash the file may be cut short: its checksum then makes it no cache).
Result<Ok> write_tree_stat_cache(const Layout& layout, const std::filesystem::path& canonical_root,
                                 std::string_view bytes);

// The slot (or, in an older cache, the key) recorded in trees/<hash>.last for `canonical_root`:
// none when there is none, or what is there is not a key's name (Layout::valid_name) or not a regular file.
std::optional<std::string> read_last_checkout(const Layout& layout, const std::filesystem::path& canonical_root);
// The same, read from one trees/<hash>.last file (gc reads them without knowing their folders).
std::optional<std::string> read_last_checkout_file(const std::filesystem::path& file);
Result<Ok> write_last_checkout(const Layout& layout, const std::filesystem::path& canonical_root, std::string_view key);

// work/<slot>/state.json's bytes (what stages/ wrote after the slot's last copy), untrusted; none
// when absent, not a regular file or larger than 16 MiB. Written atomically.
std::optional<std::string> read_work_state(const Layout& layout, std::string_view slot);
Result<Ok> write_work_state(const Layout& layout, std::string_view slot, std::string_view bytes);

}  // namespace archbuild::store
