#include "run/session.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/path_kind.hpp"
#include "core/text.hpp"

namespace archbuild::run {

namespace fs = std::filesystem;

namespace {

std::string read_whole(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return f ? std::string(std::istreambuf_iterator<char>(f), {}) : std::string();
}

struct ProcStat {
  char state = '?';
  long session = 0;
  unsigned long long start = 0;
};

// /proc/<pid>/stat: "pid (comm) state ppid pgrp session … starttime(22) …"; comm may hold
// spaces and parentheses, so the fields are counted from the last ')'.
std::optional<ProcStat> proc_stat(long pid) {
  std::string line = read_whole(fs::path("/proc") / std::to_string(pid) / "stat");
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  std::istringstream rest(line.substr(close + 2));
  ProcStat s;
  std::string field;
  for (int i = 3; rest >> field; ++i) {
    if (i == 3) s.state = field.empty() ? '?' : field[0];
    else if (i == 6) s.session = std::strtol(field.c_str(), nullptr, 10);
    else if (i == 22) {
      s.start = std::strtoull(field.c_str(), nullptr, 10);
      return s;
    }
  }
  return std::nullopt;
}

bool has_token(long pid, const std::string& entry) {
  std::string env = read_whole(fs::path("/proc") / std::to_string(pid) / "environ");
  for (std::size_t at = 0; at < env.size();) {
    std::size_t end = env.find('\0', at);
    if (end == std::string::npos) end = env.size();
    if (std::string_view(env).substr(at, end - at) == entry) return true;
    at = end + 1;
  }
  return false;
}

}  // namespace

std::string new_session_token() {
  std::random_device rd;  // /dev/urandom on Linux
  std::string t;
  for (int i = 0; i < 4; ++i) t += fmt::format("{:08x}", rd());
  return t;
}

std::string current_boot_id() { return text::trim(read_whole("/proc/sys/kernel/random/boot_id")); }

std::optional<unsigned long long> process_start_time(long pid) {
  auto s = proc_stat(pid);
  if (!s) return std::nullopt;
  return s->start;
}

bool write_session_record(const fs::path& file, const SessionRecord& record) {
  nlohmann::json j = {{"pid", record.pid}, {"start", record.start}, {"boot_id", record.boot_id}, {"token", record.token}};
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  // Named as store/atomic_file names its temps (".<name>.tmp-…"), so gc removes a leftover.
  fs::path tmp = file.parent_path() / fmt::format(".{}.tmp-{}", file.filename().string(), ::getpid());
  fs::remove(tmp, ec);  // whatever a killed run (or anyone) left under this name: never opened
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!(f << j.dump() << "\n")) return false;
  }
  fs::rename(tmp, file, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

std::optional<SessionRecord> read_session_record(const fs::path& file) {
  // The cache's record is read as an input path is: a FIFO there must not block the next run.
  auto fd = paths::open_regular_file(file, "session record");
  if (!fd) return std::nullopt;
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(*fd, buf, sizeof buf)) > 0 && text.size() < (1u << 16);) text.append(buf, static_cast<std::size_t>(n));
  ::close(*fd);
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  SessionRecord r;
  r.pid = j.value("pid", 0L);
  r.start = j.value("start", 0ULL);
  r.boot_id = j.value("boot_id", std::string());
  r.token = j.value("token", std::string());
  if (r.token.size() < 16) return std::nullopt;  // without its token a record identifies nothing safely
  return r;
}

std::vector<pid_t> session_processes(const SessionRecord& record) {
  std::vector<pid_t> found;
  if (record.boot_id != current_boot_id()) return found;  // rebooted since: nothing of it runs
  const std::string entry = std::string(kSessionTokenVar) + "=" + record.token;
  // The recorded leader counts only when it is ours: the same pid and start time, and the token in
  // its environment (the runner starts it with it). A record made by hand that names someone
  // else's live session leader, with any token, names no session then.
  bool leader_alive = false;
  if (record.pid > 0) {
    auto leader = proc_stat(record.pid);
    leader_alive = leader && leader->start == record.start && leader->state != 'Z' && has_token(record.pid, entry);
  }
  const long self = ::getpid();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isdigit(c); }))
      continue;
    long pid = std::strtol(name.c_str(), nullptr, 10);
    if (pid == self) continue;
    auto s = proc_stat(pid);
    if (!s || s->state == 'Z' || s->state == 'X') continue;
    if (record.pid > 0 && s->start < record.start) continue;  // older than the session: not of it
    bool in_session = leader_alive && s->session == record.pid;
    if (in_session || has_token(pid, entry)) found.push_back(static_cast<pid_t>(pid));
  }
  return found;
}

std::size_t signal_session(const SessionRecord& record, int sig) {
  std::size_t n = 0;
  for (pid_t pid : session_processes(record))
    if (::kill(pid, sig) == 0) ++n;
  return n;
}

Result<std::size_t> end_stale_session(const fs::path& file,
                                      const std::function<void(const std::string& message)>& on_ending,
                                      std::chrono::milliseconds timeout) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::size_t{0};
  auto record = read_session_record(file);
  if (!record) {
    // Cut short while it was written (the run was killed then): its command had not started.
    fs::remove(file, ec);
    return std::size_t{0};
  }
  auto pids = session_processes(*record);
  if (!pids.empty() && on_ending) {
    std::vector<std::string> names;
    for (pid_t p : pids) names.push_back(std::to_string(p));
    on_ending(fmt::format("ending {} process{} (pid {}) left running in this build tree by an archbuild that was "
                          "killed",
                          pids.size(), pids.size() == 1 ? "" : "es", text::join(names, ", ")));
  }
  const std::size_t ended = pids.size();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pids.empty()) {
    for (pid_t p : pids) ::kill(p, SIGKILL);
    if (std::chrono::steady_clock::now() >= deadline) {
      std::vector<std::string> names;
      for (pid_t p : pids) names.push_back(std::to_string(p));
      return Error::build_failed(fmt::format(
          "process{} {} of a killed archbuild still run{} in this build tree after {} s of SIGKILL; the tree is "
          "not touched until {} gone (see `ps -o pid,stat,cmd -p {}`)",
          pids.size() == 1 ? "" : "es", text::join(names, ", "), pids.size() == 1 ? "s" : "",
          std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), pids.size() == 1 ? "it is" : "they are",
          text::join(names, ",")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pids = session_processes(*record);
  }
  fs::remove(file, ec);
  return ended;
}

}  // namespace archbuild::run
