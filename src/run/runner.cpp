#include "run/runner.hpp"

#include <thread>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <optional>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <fmt/format.h>

#include "core/path_kind.hpp"
#include "core/text.hpp"
#include "run/interrupt.hpp"
#include "run/session.hpp"

namespace bp = boost::process;

namespace archbuild::run {

std::string CommandResult::describe() const {
  if (!started) return "could not start: " + error;
  if (interrupted) {
    if (signal != 0) return fmt::format("interrupted (stopped with signal {}, {})", signal, strsignal(signal));
    return "interrupted";
  }
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
  return fmt::format("exit status {}", exit_status);
}

std::string quote_argv(const std::vector<std::string>& argv) {
  std::vector<std::string> words;
  for (const auto& a : argv) {
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`;&|<>()*?[]{}~#!") == std::string::npos;
    if (plain) {
      words.push_back(a);
    } else {
      std::string q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      words.push_back(q + "'");
    }
  }
  return text::join(words, " ");
}

namespace {

bool executable_file(const std::filesystem::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // a full disk must not stop the build's own output handling
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

std::filesystem::path find_in_path(const std::string& name, const std::string& path_value,
                                   const std::filesystem::path& cwd) {
  if (name.empty()) return {};
  // A relative name or PATH entry is taken from the working directory, which may be gone (removed
  // under this process): then it names nothing, rather than an exception ("internal error").
  auto from_cwd = [&](const std::filesystem::path& p) -> std::filesystem::path {
    if (!p.is_relative()) return p;
    if (!cwd.empty()) return cwd / p;
    std::error_code ec;
    auto here = std::filesystem::current_path(ec);
    return ec ? std::filesystem::path() : here / p;
  };
  if (name.find('/') != std::string::npos) {
    std::filesystem::path p = from_cwd(name);
    return !p.empty() && executable_file(p) ? p : std::filesystem::path();
  }
  for (const auto& dir : text::split_any(path_value, ":")) {
    std::filesystem::path p = from_cwd(std::filesystem::path(dir) / name);
    if (!p.empty() && executable_file(p)) return p;
  }
  return {};
}

namespace {

// ---- ProcessRunner::run's phases, in the order it runs them

using Clock = std::chrono::steady_clock;

// Where the command runs and what runs: its working directory and argv[0] found on the
// command's own PATH. Set: why it cannot start.
struct Launch {
  std::filesystem::path cwd, exe;
};
std::optional<std::string> locate(const Command& cmd, Launch& launch) {
  if (cmd.argv.empty()) return std::string("empty command");
  launch.cwd = cmd.cwd.empty() ? std::filesystem::current_path() : cmd.cwd;
  std::error_code ec;
  if (!std::filesystem::is_directory(launch.cwd, ec))
    return fmt::format("{}: working directory {} does not exist", cmd.argv[0], launch.cwd.string());
  auto path_it = cmd.env.find("PATH");
  launch.exe = find_in_path(cmd.argv[0], path_it == cmd.env.end() ? std::string() : path_it->second, launch.cwd);
  if (launch.exe.empty())
    return cmd.argv[0].find('/') != std::string::npos
               ? fmt::format("{}: not found or not executable", cmd.argv[0])
               : fmt::format("{}: not found on the command's PATH ({})", cmd.argv[0],
                             path_it == cmd.env.end() ? "PATH not set" : path_it->second);
  return std::nullopt;
}

// The command's log opened, its header written (log_fd -1: the command has none). Set: why not.
std::optional<std::string> open_log(const Command& cmd, const std::filesystem::path& cwd, int& log_fd) {
  log_fd = -1;
  if (cmd.log.empty()) return std::nullopt;
  std::error_code ec;
  std::filesystem::create_directories(cmd.log.parent_path(), ec);
  // The one rule for a path archbuild writes, streamed: a link, FIFO or directory planted at the
  // log is refused, never followed, opened or waited on.
  auto fd = paths::open_writable_file(cmd.log, "log", cmd.append_log);
  if (!fd) return fmt::format("cannot write log: {}", fd.error().message);
  log_fd = *fd;
  write_all(log_fd, fmt::format("# archbuild ran: {}\n# in: {}\n", quote_argv(cmd.argv), cwd.string()));
  return std::nullopt;
}

// The environment as execve wants it, built here and handed to the executor in the child (not
// through bp::environment, whose lookup in Boost 1.74 reads past short entries); with the
// session's token where the command is recorded in a session.
std::vector<std::string> exec_environment(const Command& cmd, const SessionRecord& session) {
  std::vector<std::string> env_strings;
  env_strings.reserve(cmd.env.size() + 1);
  for (const auto& [k, v] : cmd.env) env_strings.push_back(k + "=" + v);
  if (!session.token.empty()) env_strings.push_back(std::string(kSessionTokenVar) + "=" + session.token);
  return env_strings;
}

// Starts the command as the leader of a new session, its stdout and stderr on `out_w`, and
// detaches it (we reap it ourselves with waitpid: the raw status tells signals apart).
pid_t start_child(const Launch& launch, const Command& cmd, int out_w, char** envp, std::error_code& ec) {
  const pid_t parent = ::getpid();
  std::vector<std::string> args(cmd.argv.begin() + 1, cmd.argv.end());
  bp::child child(
      bp::exe = launch.exe.string(), bp::args = args, bp::start_dir = launch.cwd.string(),
      bp::std_in < bp::null,
      bp::extend::on_exec_setup =
          [out_w, parent, envp](auto& exec) {
            // In the forked child, before exec: async-signal-safe calls only.
            exec.env = envp;
            ::setsid();
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(127);  // archbuild died before prctl
            ::dup2(out_w, 1);
            ::dup2(out_w, 2);
            sigset_t none;
            sigemptyset(&none);
            ::sigprocmask(SIG_SETMASK, &none, nullptr);
          },
      ec);
  if (ec) return -1;
  const pid_t pid = child.id();
  child.detach();
  return pid;
}

// The command's output, split into lines for the callback and copied to its log.
class OutputReader {
 public:
  OutputReader(int fd, int log_fd, const LineCallback& on_line) : fd_(fd), log_fd_(log_fd), on_line_(on_line) {
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  }
  int fd() const { return fd_; }

  // Reads what is available; false at end of file.
  bool drain() {
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n > 0) {
        pending_.append(buf, static_cast<std::size_t>(n));
        std::size_t start = 0, nl;
        while ((nl = pending_.find('\n', start)) != std::string::npos) {
          emit(std::string_view(pending_).substr(start, nl - start));
          start = nl + 1;
        }
        pending_.erase(0, start);
        if (pending_.size() > (1u << 20)) {  // a runaway line without newline
          emit(pending_);
          pending_.clear();
        }
        flush_log();
        continue;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      return true;  // EAGAIN: nothing more for now
    }
  }

  // The last line without a newline, the log written, the pipe closed.
  void finish() {
    if (!pending_.empty()) emit(pending_);
    flush_log();
    ::close(fd_);
  }

 private:
  void emit(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (log_fd_ >= 0) {
      log_buf_.append(line);
      log_buf_ += '\n';
    }
    if (on_line_) on_line_(line);
  }
  // Written once per read chunk: the log stays current, with few syscalls.
  void flush_log() {
    if (log_fd_ >= 0 && !log_buf_.empty()) write_all(log_fd_, log_buf_);
    log_buf_.clear();
  }

  int fd_, log_fd_;
  const LineCallback& on_line_;
  std::string pending_, log_buf_;
};

struct Waited {
  int status = 0;         // waitpid's
  bool stopping = false;  // an interrupt was passed on to the command
};

// Until the child exits: its output read, ticks given, and an interrupt passed on (the same
// signal to its process group, SIGKILL after the grace period or a second Ctrl-C).
Waited wait_for(pid_t pid, OutputReader& output, int log_fd, const ProcessRunnerOptions& options,
                const TickCallback& on_tick) {
  Waited w;
  bool pipe_open = true;
  bool killed = false;
  Clock::time_point deadline{};
  auto last_tick = Clock::now();
  const int wake_fd = interrupt_wake_fd();
  while (true) {
    pid_t r = ::waitpid(pid, &w.status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) {
      // Everything the child wrote is in the pipe now. Stop at EAGAIN too: a grandchild that
      // outlives the build (a compiler-cache server) may keep the pipe open forever.
      if (pipe_open) output.drain();
      return w;
    }
    pollfd pfds[2];
    nfds_t n = 0;
    if (pipe_open) pfds[n++] = {output.fd(), POLLIN, 0};
    if (wake_fd >= 0) pfds[n++] = {wake_fd, POLLIN, 0};
    // Once the output is closed the child is exiting: look again soon rather than in 100 ms.
    int pr = ::poll(pfds, n, pipe_open ? 100 : 2);
    if (pr > 0) {
      for (nfds_t i = 0; i < n; ++i) {
        if (pfds[i].fd == output.fd() && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
          if (!output.drain()) pipe_open = false;
        } else if (pfds[i].fd == wake_fd && (pfds[i].revents & POLLIN)) {
          char buf[64];
          while (::read(wake_fd, buf, sizeof buf) > 0) {
          }
        }
      }
    }
    auto now = Clock::now();
    if (interrupt_requested()) {
      if (!w.stopping) {
        w.stopping = true;
        int sig = interrupt_signal() == SIGINT ? SIGINT : SIGTERM;
        ::kill(-pid, sig);
        deadline = now + options.grace;
        if (log_fd >= 0) write_all(log_fd, fmt::format("# archbuild: interrupted, sent signal {} to the command\n", sig));
      }
      if (!killed && (now >= deadline || interrupt_count() >= 2)) {
        ::kill(-pid, SIGKILL);
        killed = true;
      }
    }
    if (on_tick && now - last_tick >= options.tick) {
      last_tick = now;
      on_tick();
    }
  }
}

// After the command: an interrupted one's stragglers ended, and its session record removed once
// nothing of the session is left.
void end_command(const Command& cmd, const SessionRecord& session, pid_t pid, bool stopping) {
  if (stopping) {
    ::kill(-pid, SIGKILL);  // stragglers of the group (the leader is gone)
    if (!session.token.empty()) signal_session(session, SIGKILL);  // and of the session (ninja's compiles)
  }
  if (session.token.empty()) return;
  // Nothing of it left: no record. A straggler keeps it, for the next run to end. SIGKILL is
  // delivered asynchronously: a process just killed may still be running for a moment (seen
  // under load), so the session is given up to 2 s to be gone before that is decided.
  auto left = session_processes(session);
  for (int i = 0; stopping && !left.empty() && i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = session_processes(session);
  }
  std::error_code rm_ec;
  if (left.empty()) std::filesystem::remove(cmd.session_record, rm_ec);
}

}  // namespace

ProcessRunner::ProcessRunner(ProcessRunnerOptions options) : options_(options) {}

CommandResult ProcessRunner::run(const Command& cmd, const LineCallback& on_line, const TickCallback& on_tick) {
  const auto t0 = Clock::now();
  CommandResult result;
  InterruptGuard guard;
  if (interrupt_requested()) {  // asked to stop before we began: start nothing
    result.started = true;
    result.interrupted = true;
    return result;
  }
  Launch launch;
  if (auto why = locate(cmd, launch)) {
    result.error = *why;
    return result;
  }
  int log_fd = -1;
  if (auto why = open_log(cmd, launch.cwd, log_fd)) {
    result.error = *why;
    return result;
  }

  // One pipe for stdout and stderr, so lines keep their order. O_CLOEXEC: only the dup2'ed
  // copies (fds 1 and 2) reach the child.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    result.error = fmt::format("pipe: {}", std::strerror(errno));
    if (log_fd >= 0) ::close(log_fd);
    return result;
  }
  const int out_w = fds[1];

  // Recorded before the start too (with the token only), so that a kill -9 between the fork and
  // the second write still leaves something the next run can find.
  SessionRecord session;
  if (!cmd.session_record.empty()) {
    session.boot_id = current_boot_id();
    session.token = new_session_token();
    if (!write_session_record(cmd.session_record, session)) {
      ::close(fds[0]);
      ::close(out_w);
      if (log_fd >= 0) ::close(log_fd);
      result.error = fmt::format("cannot write {}", cmd.session_record.string());
      return result;
    }
  }

  std::vector<std::string> env_strings = exec_environment(cmd, session);
  std::vector<char*> env_ptrs;
  for (auto& e : env_strings) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);
  std::error_code ec;
  const pid_t pid = start_child(launch, cmd, out_w, env_ptrs.data(), ec);
  ::close(out_w);
  if (ec) {
    ::close(fds[0]);
    result.error = fmt::format("{}: cannot start: {}", cmd.argv[0], ec.message());
    if (log_fd >= 0) {
      write_all(log_fd, "# archbuild: " + result.error + "\n");
      ::close(log_fd);
    }
    return result;
  }
  result.started = true;
  if (!session.token.empty()) {
    session.pid = pid;
    session.start = process_start_time(pid).value_or(0);
    (void)write_session_record(cmd.session_record, session);
  }

  OutputReader output(fds[0], log_fd, on_line);
  const Waited waited = wait_for(pid, output, log_fd, options_, on_tick);
  output.finish();
  end_command(cmd, session, pid, waited.stopping);

  if (WIFEXITED(waited.status)) result.exit_status = WEXITSTATUS(waited.status);
  if (WIFSIGNALED(waited.status)) result.signal = WTERMSIG(waited.status);
  result.interrupted = waited.stopping;
  if (log_fd >= 0) {
    if (!result.ok()) write_all(log_fd, "# archbuild: " + result.describe() + "\n");
    ::close(log_fd);
  }
  result.elapsed = Clock::now() - t0;
  return result;
}

std::vector<std::string> tail(const std::filesystem::path& log, std::size_t n) {
  std::vector<std::string> lines;
  std::ifstream f(log, std::ios::binary);
  if (!f || n == 0) return lines;
  f.seekg(0, std::ios::end);
  std::streamoff size = f.tellg();
  // Read backwards in blocks until n+1 newlines are seen (the last line may lack one).
  std::string data;
  std::streamoff pos = size;
  const std::streamoff block = 16384;
  while (pos > 0) {
    std::streamoff start = std::max<std::streamoff>(0, pos - block);
    std::string chunk(static_cast<std::size_t>(pos - start), '\0');
    f.seekg(start);
    f.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    data.insert(0, chunk);
    pos = start;
    if (static_cast<std::size_t>(std::count(data.begin(), data.end(), '\n')) > n) break;
  }
  if (!data.empty() && data.back() == '\n') data.pop_back();
  std::size_t end = data.size();
  while (lines.size() < n) {
    std::size_t nl = end == 0 ? std::string::npos : data.rfind('\n', end - 1);
    std::size_t begin = nl == std::string::npos ? 0 : nl + 1;
    lines.push_back(data.substr(begin, end - begin));
    if (nl == std::string::npos) break;
    end = nl;
  }
  if (lines.size() == 1 && lines[0].empty() && size == 0) lines.clear();
  std::reverse(lines.begin(), lines.end());
  return lines;
}

}  // namespace archbuild::run
