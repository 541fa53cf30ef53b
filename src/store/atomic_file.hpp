// Writing a file that other processes may read (ccache's AtomicFile): the data goes to a temp
// file in the same directory, is fsync'ed, then renamed over the target, so readers see the old
// file or the new one, never a partial one. A temp left by a killed process is named
// ".<name>.tmp-XXXXXX" (gc removes old ones).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace archbuild::store {

class AtomicFile {
 public:
  // Opens the temp file (creating the target's directory).
  static Result<AtomicFile> open(const std::filesystem::path& target);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // not committed: the temp file is removed

  Result<Ok> write(std::string_view data);
  Result<Ok> write(const void* data, std::size_t size);
  // fsync, rename onto the target, fsync the directory. Durability::rename_only: the rename
  // alone, for a file whose reader verifies it and loses nothing but time without it (a local
  // tree's stat cache: an fsync of its megabytes cost more than the scan it saves, and stalls
  // behind other writes to the disk).
  enum class Durability { synced, rename_only };
  Result<Ok> commit(Durability durability = Durability::synced);
  // Changes the target before commit (same directory; for names known only after writing,
  // like a content hash).
  void retarget(const std::filesystem::path& target) { target_ = target; }

  const std::filesystem::path& target() const { return target_; }
  const std::filesystem::path& temp_path() const { return temp_; }

 private:
  AtomicFile() = default;
  void discard();
  std::filesystem::path target_, temp_;
  int fd_ = -1;
};

Result<Ok> write_file_atomic(const std::filesystem::path& target, std::string_view content,
                             AtomicFile::Durability durability = AtomicFile::Durability::synced);

// A copy of `from` (opened with paths::open_regular_file: a FIFO there is refused, not waited on)
// written to `target` as AtomicFile writes: where `target` is a link, FIFO, device or directory
// it is refused and left as it is (std::filesystem::copy_file follows a link and writes through it).
Result<Ok> copy_file_atomic(const std::filesystem::path& from, const std::filesystem::path& target);

// The temp-name prefix used for `target` (".<name>.tmp-"), for gc and for the checkout's temp dir.
std::string temp_prefix(const std::filesystem::path& target);
// A fresh temp directory next to `target` (same file system, so it can be renamed onto it).
Result<std::filesystem::path> make_temp_dir_beside(const std::filesystem::path& target);
// fsync a directory (after a rename in it).
void sync_dir(const std::filesystem::path& dir);

}  // namespace archbuild::store
