// Advisory locks between archbuild processes (flock): one per build key (keys/<key>.lock), so
// two runs of the same key never build into the same tree — the second waits, then finds the
// wheel and reuses it. The lock dies with the process (kill -9 included). Lock files are never
// deleted (deleting one while another process opens it would let two processes "hold" it).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "store/layout.hpp"

namespace archbuild::store {

class FileLock {
 public:
  // Blocks until the lock is ours. When another process holds it, on_wait(holder) is called
  // once first ("pid 1234", from the lock file; empty if unknown). While waiting, `cancelled`
  // is polled (Ctrl-C): when it returns true the wait ends with an error.
  static Result<FileLock> acquire(const std::filesystem::path& lock_file,
                                  const std::function<void(const std::string& holder)>& on_wait = {},
                                  const std::function<bool()>& cancelled = {});
  // The lock if free now, nullopt if another process holds it.
  static Result<std::optional<FileLock>> try_acquire(const std::filesystem::path& lock_file);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();
  void release();
  bool held() const { return fd_ >= 0; }
  const std::filesystem::path& path() const { return path_; }

 private:
  FileLock(std::filesystem::path p, int fd) : path_(std::move(p)), fd_(fd) {}
  std::filesystem::path path_;
  int fd_ = -1;
};

// The lock of a build key (keys/<key>.lock). on_wait gets a ready-made sentence:
// "waiting for another archbuild (pid 1234) building the same key <key>".
Result<FileLock> lock_key(const Layout& layout, const std::string& key,
                          const std::function<void(const std::string& message)>& on_wait = {},
                          const std::function<bool()>& cancelled = {});
Result<std::optional<FileLock>> try_lock_key(const Layout& layout, const std::string& key);

// The holder recorded in a lock file ("pid 1234"), or empty.
std::string lock_holder(const std::filesystem::path& lock_file);

}  // namespace archbuild::store
