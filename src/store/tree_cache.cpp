#include "store/tree_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "core/path_kind.hpp"
#include "store/atomic_file.hpp"

namespace archbuild::store {

namespace {

constexpr std::uint64_t kMaxCacheBytes = 64ull << 20;

// A small file of the cache as bytes, untrusted; none when absent, not a regular file, unreadable
// or above `limit`.
std::optional<std::string> read_bounded(const std::filesystem::path& file, std::uint64_t limit) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(file, ec))) return std::nullopt;
  auto fd = paths::open_regular_file(file, "stat cache");
  if (!fd) return std::nullopt;
  struct stat st {};
  std::optional<std::string> out;
  if (::fstat(*fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) <= limit) {
    std::string bytes;
    bytes.resize(static_cast<std::size_t>(st.st_size));
    std::size_t have = 0;
    bool ok = true;
    while (have < bytes.size()) {
      ssize_t n = ::read(*fd, bytes.data() + have, bytes.size() - have);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok = false;  // shrank or failed under us: no cache
        break;
      }
      have += static_cast<std::size_t>(n);
    }
    if (ok) out = std::move(bytes);
  }
  ::close(*fd);
  return out;
}

}  // namespace

std::optional<std::string> read_tree_stat_cache(const Layout& layout, const std::filesystem::path& canonical_root) {
  return read_bounded(layout.tree_stat_cache(canonical_root), kMaxCacheBytes);
}

std::optional<std::string> read_last_checkout(const Layout& layout, const std::filesystem::path& canonical_root) {
  return read_last_checkout_file(layout.tree_last_checkout(canonical_root));
}

std::optional<std::string> read_last_checkout_file(const std::filesystem::path& file) {
  auto bytes = read_bounded(file, 256);
  if (!bytes) return std::nullopt;
  while (!bytes->empty() && bytes->back() == '\n') bytes->pop_back();
  if (!Layout::valid_name(*bytes)) return std::nullopt;
  return bytes;
}

Result<Ok> write_last_checkout(const Layout& layout, const std::filesystem::path& canonical_root, std::string_view key) {
  return write_file_atomic(layout.tree_last_checkout(canonical_root), std::string(key) + "\n");
}

Result<Ok> write_tree_stat_cache(const Layout& layout, const std::filesystem::path& canonical_root,
                                 std::string_view bytes) {
  // Not fsync'ed: a cache cut short by a crash fails its checksum and is read as none.
  return write_file_atomic(layout.tree_stat_cache(canonical_root), bytes, AtomicFile::Durability::rename_only);
}

std::optional<std::string> read_work_state(const Layout& layout, std::string_view slot) {
  return read_bounded(layout.work_state(slot), 16ull << 20);
}

Result<Ok> write_work_state(const Layout& layout, std::string_view slot, std::string_view bytes) {
  std::error_code ec;
  std::filesystem::create_directories(layout.work_dir(slot), ec);
  return write_file_atomic(layout.work_state(slot), bytes);
}

}  // namespace archbuild::store
