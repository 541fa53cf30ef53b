#include "source/git_util.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <sys/file.h>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>

namespace archbuild::source::detail {

void init_libgit2() {
  static std::once_flag once;
  std::call_once(once, [] { git_libgit2_init(); });  // never shut down: other threads may still use it
}

std::string last_error() {
  const git_error* e = git_error_last();
  return e && e->message ? std::string(e->message) : std::string("unknown error");
}

std::string oid_hex(const git_oid& oid) {
  char buf[GIT_OID_HEXSZ + 1];
  git_oid_tostr(buf, sizeof buf, &oid);
  return buf;
}

DirLock::~DirLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

Result<DirLock> lock_file(const std::filesystem::path& p, const std::function<bool()>& cancelled) {
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Error::build_failed(fmt::format("{}: cannot open lock file: {}", p.string(), std::strerror(errno)));
  // Polling keeps Ctrl-C working while another archbuild fetches the same repository.
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int err = errno;
      ::close(fd);
      return Error::build_failed(fmt::format("{}: cannot lock: {}", p.string(), std::strerror(err)));
    }
    if (cancelled && cancelled()) {
      ::close(fd);
      return Error::build_failed(fmt::format("interrupted while waiting for the lock {}", p.string()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return DirLock(fd);
}

}  // namespace archbuild::source::detail
