#include "store/lock.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/file.h>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::store {

namespace {

Result<int> open_lock_file(const std::filesystem::path& p) {
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  // O_CLOEXEC: a build's children must not inherit (and so keep) the lock.
  int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    // A folder this user cannot write (permissions, a read-only file system) is the caller's
    // input, said as such (exit 2), not a build stage that failed (4).
    if (err == EACCES || err == EPERM || err == EROFS)
      return Error::bad_input(fmt::format("{}: cannot create the lock file: {}; archbuild needs to write there (give "
                                          "a folder you can write to)",
                                          text::quoted(p.string()), std::strerror(err)));
    return Error::build_failed(fmt::format("{}: cannot open lock file: {}", p.string(), std::strerror(err)));
  }
  return fd;
}

void record_holder(int fd) {
  std::string s = fmt::format("pid {}\n", ::getpid());
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] auto n = ::pwrite(fd, s.data(), s.size(), 0);
  }
}

}  // namespace

std::string lock_holder(const std::filesystem::path& lock_file) {
  std::ifstream f(lock_file);
  std::string line;
  std::getline(f, line);
  return line;
}

Result<FileLock> FileLock::acquire(const std::filesystem::path& lock_file,
                                   const std::function<void(const std::string&)>& on_wait,
                                   const std::function<bool()>& cancelled) {
  auto fd = open_lock_file(lock_file);
  if (!fd) return fd.error();
  bool told = false;
  // Polling with LOCK_NB rather than a blocking flock: a blocking one restarts after Ctrl-C
  // (SA_RESTART), and archbuild must stay interruptible while it waits.
  for (;;) {
    if (::flock(*fd, LOCK_EX | LOCK_NB) == 0) break;
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int err = errno;
      ::close(*fd);
      return Error::build_failed(fmt::format("{}: cannot lock: {}", lock_file.string(), std::strerror(err)));
    }
    if (!told) {
      told = true;
      if (on_wait) on_wait(lock_holder(lock_file));
    }
    if (cancelled && cancelled()) {
      ::close(*fd);
      return Error::build_failed(fmt::format("interrupted while waiting for the lock {}", lock_file.string()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  record_holder(*fd);
  return FileLock(lock_file, *fd);
}

Result<std::optional<FileLock>> FileLock::try_acquire(const std::filesystem::path& lock_file) {
  auto fd = open_lock_file(lock_file);
  if (!fd) return fd.error();
  if (::flock(*fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(*fd);
    if (err == EWOULDBLOCK) return std::optional<FileLock>();
    return Error::build_failed(fmt::format("{}: cannot lock: {}", lock_file.string(), std::strerror(err)));
  }
  record_holder(*fd);
  return std::optional<FileLock>(FileLock(lock_file, *fd));
}

FileLock::FileLock(FileLock&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() { release(); }

void FileLock::release() {
  if (fd_ < 0) return;
  if (::ftruncate(fd_, 0) != 0) {
  }
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
  fd_ = -1;
}

Result<FileLock> lock_key(const Layout& layout, const std::string& key,
                          const std::function<void(const std::string&)>& on_wait,
                          const std::function<bool()>& cancelled) {
  auto path = layout.key_lock(key);
  return FileLock::acquire(
      path,
      [&](const std::string& holder) {
        if (on_wait)
          on_wait(fmt::format("waiting for another archbuild{} building the same key {}",
                              holder.empty() ? "" : " (" + holder + ")", key));
      },
      cancelled);
}

Result<std::optional<FileLock>> try_lock_key(const Layout& layout, const std::string& key) {
  return FileLock::try_acquire(layout.key_lock(key));
}

}  // namespace archbuild::store
