// Running build commands (ninja's CommandRunner idea): stages hand a Command to a Runner and get
// a CommandResult back. ProcessRunner really runs it (Boost.Process, argv vector, never a shell);
// ScriptedRunner (scripted_runner.hpp) records commands and plays scripted results for tests.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace archbuild::run {

struct Command {
  std::vector<std::string> argv;  // argv[0]: a name searched on env["PATH"], or a path
  // The COMPLETE environment of the child, built explicitly (nothing is inherited, so the same
  // plan gives the same build on any shell).
  std::map<std::string, std::string> env;
  std::filesystem::path cwd;  // empty: archbuild's current directory
  std::filesystem::path log;  // stdout+stderr go here, line by line; empty: no log
  bool append_log = false;    // false: the log starts empty (first command of a stage)
  // Where a command that works in a build tree records its session (run/session.hpp), so that
  // the next run can end what a killed archbuild left running; empty: not recorded.
  std::filesystem::path session_record;
};

struct CommandResult {
  bool started = false;    // false: could not start (not found, bad cwd); see `error`
  int exit_status = -1;    // the exit status when the program exited
  int signal = 0;          // the signal that killed it, 0 if none
  bool interrupted = false;  // archbuild was asked to stop (Ctrl-C, SIGTERM) and stopped it
  std::string error;       // why it could not start
  std::chrono::duration<double> elapsed{0};

  bool ok() const { return started && !interrupted && signal == 0 && exit_status == 0; }
  // "exit status 2", "killed by signal 9 (Killed)", "interrupted (SIGINT)", "could not start: …"
  std::string describe() const;
};

using LineCallback = std::function<void(std::string_view line)>;
using TickCallback = std::function<void()>;  // called a few times a second while it runs

class Runner {
 public:
  virtual ~Runner() = default;
  // Runs `cmd` to completion (or until interrupted). Each output line (stdout and stderr
  // merged, newline stripped) goes to cmd.log and then to on_line.
  virtual CommandResult run(const Command& cmd, const LineCallback& on_line = {},
                            const TickCallback& on_tick = {}) = 0;
};

struct ProcessRunnerOptions {
  // After Ctrl-C/SIGTERM the children get the same signal; those still alive after `grace`
  // get SIGKILL (a second Ctrl-C kills at once).
  std::chrono::milliseconds grace{5000};
  std::chrono::milliseconds tick{200};
};

// Runs the command as the leader of a new session (ninja puts each compile in a process group of
// its own, but all stay in the session), with stdin from /dev/null. The leader dies with
// archbuild (PDEATHSIG); its descendants may not (PDEATHSIG reaches the direct child only): with
// cmd.session_record set, the next run ends them (run/session.hpp). After an interrupt every
// process of the session is killed, not only the leader's group. While run() is
// active an InterruptGuard is held, so SIGINT/SIGTERM reach the runner rather than killing
// archbuild; a result with `interrupted` says the caller should stop as well.
class ProcessRunner : public Runner {
 public:
  explicit ProcessRunner(ProcessRunnerOptions options = {});
  CommandResult run(const Command& cmd, const LineCallback& on_line = {},
                    const TickCallback& on_tick = {}) override;

 private:
  ProcessRunnerOptions options_;
};

// argv as one line for logs and messages (words with spaces or quotes are single-quoted).
std::string quote_argv(const std::vector<std::string>& argv);

// The last `n` lines of a log file (for failure messages); empty when it cannot be read.
std::vector<std::string> tail(const std::filesystem::path& log, std::size_t n = 30);

// Resolves argv[0] the way execvp would, but against the given PATH value (the Command's own
// environment), not archbuild's. Empty when not found.
std::filesystem::path find_in_path(const std::string& name, const std::string& path_value,
                                   const std::filesystem::path& cwd = {});

}  // namespace archbuild::run
