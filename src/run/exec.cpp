#include "run/exec.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace archbuild::run {

Error exec_replace(const std::vector<std::string>& argv) {
  if (argv.empty()) return Error::bad_input("no command to run");
  std::vector<char*> raw;
  raw.reserve(argv.size() + 1);
  for (const auto& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
  raw.push_back(nullptr);
  ::execvp(raw[0], raw.data());
  int err = errno;
  std::string what = fmt::format("cannot run {}: {}", argv[0], std::strerror(err));
  return err == ENOENT ? Error::missing_tool(what) : Error::bad_input(what);
}

Result<Measured> run_measured(const std::vector<std::string>& argv) {
  if (argv.empty()) return Error::bad_input("no command to run");
  std::vector<char*> raw;
  raw.reserve(argv.size() + 1);
  for (const auto& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
  raw.push_back(nullptr);
  // A pipe with O_CLOEXEC reports a failed exec (its errno) to the parent.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Error::bad_input(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Error::bad_input(fmt::format("cannot start {}: {}", argv[0], std::strerror(err)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::execvp(raw[0], raw.data());
    int err = errno;
    (void)!::write(fds[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(fds[1]);
  int exec_errno = 0;
  ssize_t n;
  do n = ::read(fds[0], &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  ::close(fds[0]);
  int status = 0;
  struct rusage ru {};
  while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    std::string what = fmt::format("cannot run {}: {}", argv[0], std::strerror(exec_errno));
    return exec_errno == ENOENT ? Error::missing_tool(what) : Error::bad_input(what);
  }
  Measured m;
  m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  m.max_rss_kb = static_cast<std::uint64_t>(ru.ru_maxrss);
  return m;
}

}  // namespace archbuild::run
