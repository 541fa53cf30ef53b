// run/: the process runner (real programs, signals, interruption), the scripted runner, the
// reporters and the log tail.
#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "run/capture.hpp"
#include "run/interrupt.hpp"
#include "run/reporter.hpp"
#include "run/runner.hpp"
#include "run/scripted_runner.hpp"
#include "run/session.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::run;
using archbuild::test::TempDir;

namespace {

std::map<std::string, std::string> base_env() { return {{"PATH", "/usr/bin:/bin"}}; }

Command sh(const std::string& script, const std::filesystem::path& log = {}) {
  Command c;
  c.argv = {"sh", "-c", script};
  c.env = base_env();
  c.log = log;
  return c;
}

std::vector<std::string> lines_of(const std::filesystem::path& p) {
  std::vector<std::string> out;
  std::ifstream f(p);
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}

// True when the process is gone (or a zombie nobody has reaped yet).
bool process_gone(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    if (::kill(pid, 0) != 0) return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    std::getline(stat, s);
    auto close = s.rfind(')');
    if (close != std::string::npos && close + 2 < s.size() && s[close + 2] == 'Z') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

struct ResetInterrupt {
  ~ResetInterrupt() { reset_interrupt(); }
};

}  // namespace

TEST_CASE("ProcessRunner: exit status, merged output in order, log file", "[run]") {
  TempDir tmp;
  ProcessRunner runner;
  std::vector<std::string> seen;
  auto log = tmp / "logs/stage.log";
  auto r = runner.run(sh("echo out1; echo err1 >&2; echo out2; exit 3", log),
                      [&](std::string_view l) { seen.emplace_back(l); });
  CHECK(r.started);
  CHECK(r.exit_status == 3);
  CHECK(r.signal == 0);
  CHECK_FALSE(r.interrupted);
  CHECK_FALSE(r.ok());
  CHECK(r.describe() == "exit status 3");
  CHECK(seen == std::vector<std::string>{"out1", "err1", "out2"});
  auto logged = lines_of(log);
  REQUIRE(logged.size() >= 4);
  CHECK(logged[0].rfind("# archbuild ran: sh -c", 0) == 0);
  CHECK(std::find(logged.begin(), logged.end(), "err1") != logged.end());
  CHECK(logged.back() == "# archbuild: exit status 3");
}

TEST_CASE("ProcessRunner: success, CRLF and a last line without newline", "[run]") {
  ProcessRunner runner;
  std::vector<std::string> seen;
  auto r = runner.run(sh("printf 'a\\r\\nb\\n\\nlast'"), [&](std::string_view l) { seen.emplace_back(l); });
  CHECK(r.ok());
  CHECK(r.exit_status == 0);
  CHECK(seen == std::vector<std::string>{"a", "b", "", "last"});
}

TEST_CASE("ProcessRunner: the environment is exactly the Command's", "[run]") {
  REQUIRE(::getenv("PATH") != nullptr);
  ::setenv("ARCHBUILD_TEST_LEAK", "should-not-be-seen", 1);
  ProcessRunner runner;
  Command c;
  c.argv = {"env"};
  c.env = {{"PATH", "/usr/bin:/bin"}, {"FOO", "bar baz"}, {"EMPTY", ""}};
  std::vector<std::string> seen;
  auto r = runner.run(c, [&](std::string_view l) { seen.emplace_back(l); });
  REQUIRE(r.ok());
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<std::string>{"EMPTY=", "FOO=bar baz", "PATH=/usr/bin:/bin"});
  ::unsetenv("ARCHBUILD_TEST_LEAK");
}

TEST_CASE("ProcessRunner: argv[0] is searched on the Command's PATH, cwd is honoured", "[run]") {
  TempDir tmp;
  auto tool = tmp.write("bin/mytool", "#!/bin/sh\necho \"tool in $(pwd) args:$#:$1\"\n");
  std::filesystem::permissions(tool, std::filesystem::perms::owner_all);
  std::filesystem::create_directories(tmp / "work dir");
  ProcessRunner runner;
  Command c;
  c.argv = {"mytool", "one arg; $(not expanded)"};
  c.env = {{"PATH", (tmp / "bin").string() + ":/usr/bin:/bin"}};
  c.cwd = tmp / "work dir";
  std::vector<std::string> seen;
  auto r = runner.run(c, [&](std::string_view l) { seen.emplace_back(l); });
  REQUIRE(r.ok());
  REQUIRE(seen.size() == 1);
  auto cwd_real = std::filesystem::canonical(tmp / "work dir").string();
  CHECK(seen[0] == "tool in " + cwd_real + " args:1:one arg; $(not expanded)");

  // Not on the Command's PATH (even though it is on archbuild's): cannot start, says why.
  Command missing;
  missing.argv = {"mytool"};
  missing.env = {{"PATH", "/nonexistent"}};
  auto m = runner.run(missing);
  CHECK_FALSE(m.started);
  CHECK_FALSE(m.ok());
  CHECK(m.error.find("mytool: not found on the command's PATH (/nonexistent)") != std::string::npos);

  Command bad_cwd = sh("true");
  bad_cwd.cwd = tmp / "nope";
  auto b = runner.run(bad_cwd);
  CHECK_FALSE(b.started);
  CHECK(b.error.find("does not exist") != std::string::npos);
}

TEST_CASE("ProcessRunner: a program killed by a signal", "[run]") {
  TempDir tmp;
  ProcessRunner runner;
  auto log = tmp / "k.log";
  auto r = runner.run(sh("echo before; kill -KILL $$; echo after", log));
  CHECK(r.started);
  CHECK(r.signal == SIGKILL);
  CHECK_FALSE(r.interrupted);
  CHECK_FALSE(r.ok());
  CHECK(r.describe().find("killed by signal 9") == 0);
  auto logged = lines_of(log);
  CHECK(std::find(logged.begin(), logged.end(), "before") != logged.end());
  CHECK(std::find(logged.begin(), logged.end(), "after") == logged.end());
}

TEST_CASE("capture: asked to stop, the program is killed and the result says interrupted", "[run]") {
  ResetInterrupt reset;
  // As a Ctrl-C during `wheel`'s validate stage (the import test's pip, the smoke kernel):
  // without this, the program would run to its end (here: its 600 s timeout).
  request_interrupt(SIGINT);
  CaptureOptions o;
  o.timeout = std::chrono::seconds(600);
  auto r = capture({"/bin/sleep", "600"}, o);
  REQUIRE(r.ok());
  CHECK(r->interrupted);
  CHECK_FALSE(r->timed_out);
  CHECK(r->status == -1);
  reset_interrupt();
  auto plain = capture({"/bin/sh", "-c", "echo ok"});
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->interrupted);
  CHECK(plain->out == "ok\n");
}

TEST_CASE("ProcessRunner: Ctrl-C stops the whole process group and reports interrupted", "[run]") {
  ResetInterrupt reset;
  TempDir tmp;
  ProcessRunner runner(ProcessRunnerOptions{std::chrono::milliseconds(300)});
  auto pidfile = tmp / "grandchild.pid";
  // A background grandchild of a non-interactive shell ignores SIGINT, so this also checks
  // the escalation to SIGKILL of the whole group.
  auto cmd = sh("sleep 60 & echo $! > '" + pidfile.string() + "'; echo ready; wait; echo not-reached",
                tmp / "i.log");
  bool signalled = false;
  auto r = runner.run(cmd, [&](std::string_view l) {
    if (l == "ready" && !signalled) {
      signalled = true;
      ::kill(::getpid(), SIGINT);  // as if the user pressed Ctrl-C
    }
  });
  CHECK(signalled);
  CHECK(r.started);
  CHECK(r.interrupted);
  CHECK_FALSE(r.ok());
  CHECK(interrupt_requested());
  CHECK(interrupt_signal() == SIGINT);
  pid_t grandchild = std::stoi(test::read_file(pidfile));
  CHECK(process_gone(grandchild));
  auto logged = lines_of(tmp / "i.log");
  CHECK(std::find(logged.begin(), logged.end(), "not-reached") == logged.end());
  // archbuild itself survived the SIGINT (the guard was in place) and can go on.
  reset_interrupt();
  CHECK(runner.run(sh("true")).ok());
}

// How a build's descendant leaves the runner's reach: ninja starts each compile in a process
// group of its own (ninja's subprocess-posix.cc), a daemon-like tool in a session of its own.
// Each case: the shell command that starts such a grandchild (sleep 300, pid in $PIDFILE).
const std::vector<std::pair<std::string, std::string>> kEscapes = {
    {"own process group (ninja's compiles)",
     "/usr/bin/python3 -c 'import os; os.setpgid(0, 0); os.execv(\"/bin/sleep\", [\"sleep\", \"300\"])'"},
    {"own session (setsid)", "/usr/bin/python3 -c 'import os; os.setsid(); os.execv(\"/bin/sleep\", [\"sleep\", \"300\"])'"},
    {"same process group", "/bin/sleep 300"},
};

bool running_now(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(stat, s);
  auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && s[close + 2] != 'Z';
}

std::string comm_of(pid_t pid) {
  return archbuild::text::trim(test::read_file("/proc/" + std::to_string(pid) + "/comm"));
}

template <class Pred>
bool wait_for(Pred pred) {
  for (int i = 0; i < 1500 && !pred(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return pred();
}

// The token reaches even a descendant that left the session.
TEST_CASE("ProcessRunner: Ctrl-C ends the whole session, also compiles in their own process group", "[run]") {
  for (const auto& [what, start] : kEscapes) {
    SECTION(what) {
      ResetInterrupt reset;
      TempDir tmp;
      ProcessRunner runner(ProcessRunnerOptions{std::chrono::milliseconds(300)});
      auto pidfile = tmp / "grandchild.pid";
      auto cmd = sh(start + " & echo $! > '" + pidfile.string() + "'; echo ready; wait", tmp / "i.log");
      cmd.session_record = tmp / "session";
      pid_t grandchild = 0;
      auto r = runner.run(cmd, [&](std::string_view l) {
        if (l != "ready" || grandchild) return;
        grandchild = std::stoi(test::read_file(pidfile));
        wait_for([&] { return comm_of(grandchild) == "sleep"; });  // its setpgid is done
        ::kill(::getpid(), SIGINT);
      });
      CHECK(r.interrupted);
      REQUIRE(grandchild > 0);
      CHECK(process_gone(grandchild));
      CHECK_FALSE(std::filesystem::exists(tmp / "session"));  // nothing left: no record
    }
  }
}

// The race: archbuild killed with -9 mid-build left ninja's nvcc running, and the rerun's
// nvcc found its temporary files gone. A child process stands in for archbuild: it runs the
// command through ProcessRunner and is killed with SIGKILL; the next run's end_stale_session must
// leave nothing of it running.
TEST_CASE("end_stale_session: what a kill -9 of archbuild left running is ended by the next run", "[run]") {
  for (const auto& [what, start] : kEscapes) {
    SECTION(what) {
      TempDir tmp;
      auto pidfile = tmp / "grandchild.pid";
      auto record = tmp / "keys" / "k.session";
      pid_t fake_archbuild = ::fork();
      REQUIRE(fake_archbuild >= 0);
      if (fake_archbuild == 0) {
        ProcessRunner runner;
        auto cmd = sh(start + " & echo $! > '" + pidfile.string() + "'; wait");
        cmd.session_record = record;
        runner.run(cmd);
        ::_exit(0);
      }
      pid_t grandchild = 0;
      bool started = wait_for([&] {
        if (!grandchild && std::filesystem::exists(pidfile) && !test::read_file(pidfile).empty())
          grandchild = std::stoi(test::read_file(pidfile));
        auto rec = read_session_record(record);
        return grandchild > 0 && comm_of(grandchild) == "sleep" && rec && rec->pid > 0;
      });
      ::kill(fake_archbuild, SIGKILL);
      ::waitpid(fake_archbuild, nullptr, 0);
      REQUIRE(started);
      // The killed run's leader died with it (PDEATHSIG); its grandchild did not.
      auto rec = read_session_record(record);
      REQUIRE(rec);
      CHECK(process_gone(static_cast<pid_t>(rec->pid)));
      REQUIRE(running_now(grandchild));
      std::vector<std::string> told;
      auto ended = end_stale_session(record, [&](const std::string& m) { told.push_back(m); });
      REQUIRE(ended);
      CHECK(*ended == 1);
      CHECK_FALSE(running_now(grandchild));
      REQUIRE(told.size() == 1);
      CHECK(told[0].find("pid " + std::to_string(grandchild)) != std::string::npos);
      CHECK_FALSE(std::filesystem::exists(record));
      // A second run finds nothing to end.
      auto again = end_stale_session(record);
      REQUIRE(again);
      CHECK(*again == 0);
    }
  }
}

TEST_CASE("end_stale_session: a record naming someone else's process touches nothing", "[run]") {
  TempDir tmp;
  // An unrelated process (no token) whose pid the record names, with another start time: a
  // reused pid.
  pid_t other = ::fork();
  REQUIRE(other >= 0);
  if (other == 0) {
    ::execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  REQUIRE(wait_for([&] { return comm_of(other) == "sleep"; }));
  auto start = process_start_time(other);
  REQUIRE(start);
  auto record = tmp / "k.session";
  for (unsigned long long recorded : {*start - 1, *start + 1}) {
    REQUIRE(write_session_record(record, SessionRecord{other, recorded, current_boot_id(), new_session_token()}));
    auto ended = end_stale_session(record);
    REQUIRE(ended);
    CHECK(*ended == 0);
    CHECK(running_now(other));
  }
  // From before a reboot: names nothing, even with the right pid and start time.
  REQUIRE(write_session_record(record, SessionRecord{other, *start, "another-boot", new_session_token()}));
  CHECK(*end_stale_session(record) == 0);
  CHECK(running_now(other));
  // A record cut short while written: removed, nothing ended.
  { std::ofstream(record) << "{\"pid\": "; }
  CHECK(*end_stale_session(record) == 0);
  CHECK_FALSE(std::filesystem::exists(record));
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
}

TEST_CASE("ProcessRunner: SIGTERM to archbuild, a child ignoring it gets SIGKILL", "[run]") {
  ResetInterrupt reset;
  ProcessRunner runner(ProcessRunnerOptions{std::chrono::milliseconds(200)});
  bool signalled = false;
  auto r = runner.run(sh("trap '' INT TERM; echo ready; while :; do sleep 0.05; done"),
                      [&](std::string_view l) {
                        if (l == "ready" && !signalled) {
                          signalled = true;
                          ::kill(::getpid(), SIGTERM);
                        }
                      });
  CHECK(r.interrupted);
  CHECK(r.signal == SIGKILL);
  CHECK(interrupt_signal() == SIGTERM);
  CHECK(r.describe().find("interrupted") == 0);
}

TEST_CASE("ProcessRunner: an interrupt before the start runs nothing", "[run]") {
  ResetInterrupt reset;
  TempDir tmp;
  request_interrupt(SIGINT);
  ProcessRunner runner;
  auto r = runner.run(sh("touch '" + (tmp / "ran").string() + "'"));
  CHECK(r.interrupted);
  CHECK_FALSE(std::filesystem::exists(tmp / "ran"));
}

TEST_CASE("ProcessRunner: append_log keeps earlier commands of a stage, ticks while running", "[run]") {
  TempDir tmp;
  ProcessRunner runner(ProcessRunnerOptions{std::chrono::milliseconds(5000), std::chrono::milliseconds(20)});
  auto log = tmp / "s.log";
  REQUIRE(runner.run(sh("echo first", log)).ok());
  auto second = sh("echo second; sleep 0.3", log);
  second.append_log = true;
  int ticks = 0;
  REQUIRE(runner.run(second, {}, [&] { ++ticks; }).ok());
  CHECK(ticks > 0);
  auto logged = lines_of(log);
  CHECK(std::find(logged.begin(), logged.end(), "first") != logged.end());
  CHECK(std::find(logged.begin(), logged.end(), "second") != logged.end());
  // A fresh stage truncates.
  REQUIRE(runner.run(sh("echo third", log)).ok());
  logged = lines_of(log);
  CHECK(std::find(logged.begin(), logged.end(), "first") == logged.end());
}

TEST_CASE("tail: the last lines of a log", "[run]") {
  TempDir tmp;
  std::string many;
  for (int i = 1; i <= 5000; ++i) many += "line " + std::to_string(i) + " " + std::string(20, 'x') + "\n";
  auto big = tmp.write("big.log", many);
  auto t = tail(big, 30);
  REQUIRE(t.size() == 30);
  CHECK(t.front() == "line 4971 " + std::string(20, 'x'));
  CHECK(t.back() == "line 5000 " + std::string(20, 'x'));
  CHECK(tail(tmp.write("short.log", "a\nb\nc"), 30) == std::vector<std::string>{"a", "b", "c"});
  CHECK(tail(tmp.write("nl.log", "a\nb\n"), 1) == std::vector<std::string>{"b"});
  CHECK(tail(tmp.write("empty.log", ""), 30).empty());
  CHECK(tail(tmp / "missing.log", 30).empty());
}

TEST_CASE("quote_argv: words with shell characters are single-quoted", "[run]") {
  CHECK(quote_argv({"cmake", "--build", "build"}) == "cmake --build build");
  CHECK(quote_argv({"echo", "a b", "it's", ""}) == "echo 'a b' 'it'\\''s' ''");
}

TEST_CASE("ScriptedRunner: records commands, plays lines/status, creates files", "[run]") {
  TempDir tmp;
  ScriptedRunner runner;
  runner.on({"cmake", "--build"}, {.lines = {"[1/2] cc a", "[2/2] link"}, .files = {{"build/lib.so", "ELF"}}})
      .on({"python", "setup.py", "bdist_wheel"}, {.lines = {"error: boom"}, .exit_status = 1}, 1)
      .strict();
  Command c;
  c.argv = {"/usr/bin/cmake", "--build", "build"};
  c.env = {{"TORCH_CUDA_ARCH_LIST", "9.0"}};
  c.cwd = tmp.path();
  c.log = tmp / "logs/build.log";
  std::vector<std::string> seen;
  auto r = runner.run(c, [&](std::string_view l) { seen.emplace_back(l); });
  CHECK(r.ok());
  CHECK(seen.size() == 2);
  CHECK(test::read_file(tmp / "build/lib.so") == "ELF");
  CHECK(lines_of(c.log).back() == "[2/2] link");

  Command p;
  p.argv = {"python", "setup.py", "bdist_wheel"};
  p.cwd = tmp.path();
  p.log = tmp / "logs/package.log";
  auto f = runner.run(p);
  CHECK(f.exit_status == 1);
  CHECK(tail(p.log, 2) == std::vector<std::string>{"error: boom", "# archbuild: exit status 1"});
  // The rule was for one use only; strict() makes the next unmatched command fail to start.
  auto again = runner.run(p);
  CHECK_FALSE(again.started);
  CHECK(again.error.find("unexpected command: python setup.py bdist_wheel") == 0);

  REQUIRE(runner.calls().size() == 3);
  CHECK(runner.calls()[0].env.at("TORCH_CUDA_ARCH_LIST") == "9.0");
  CHECK(runner.calls_matching({"cmake"}).size() == 1);
  CHECK(runner.calls_matching({"python", "setup.py"}).size() == 2);
}

TEST_CASE("ScriptedRunner: signals, interruption and start errors are scripted too", "[run]") {
  ScriptedRunner runner;
  runner.on({"a"}, {.signal = SIGSEGV}).on({"b"}, {.interrupted = true}).on({"c"}, {.start_error = true});
  Command c;
  c.argv = {"a"};
  CHECK(runner.run(c).signal == SIGSEGV);
  c.argv = {"b"};
  CHECK(runner.run(c).interrupted);
  c.argv = {"c"};
  CHECK_FALSE(runner.run(c).started);
  c.argv = {"d"};
  CHECK(runner.run(c).ok());  // not strict: unmatched commands succeed
}

TEST_CASE("parse_ninja_progress", "[run]") {
  CHECK(parse_ninja_progress("[3/10] Building CUDA object x.o") == std::make_pair(3L, 10L));
  CHECK(parse_ninja_progress("[10/10] Linking") == std::make_pair(10L, 10L));
  CHECK_FALSE(parse_ninja_progress("[3/x] nope"));
  CHECK_FALSE(parse_ninja_progress("-- [3/10]"));
  CHECK_FALSE(parse_ninja_progress("[11/10] bad"));
  CHECK_FALSE(parse_ninja_progress("[0/0] none"));
  CHECK(format_duration(5) == "5s");
  CHECK(format_duration(185) == "3m05s");
  CHECK(format_duration(3720) == "1h02m");
}

namespace {
struct FakeClock {
  double now = 100;
  Clock fn() {
    return [this] { return now; };
  }
};
}  // namespace

TEST_CASE("PlainReporter: start/end lines and periodic progress with an estimate", "[run]") {
  FakeClock clock;
  std::ostringstream os;
  PlainReporter rep(os, 30, clock.fn());
  StageInfo st{"build", 3, 5, "cmake --build build"};
  rep.stage_started(st);
  rep.output("[1/100] cc a");  // first progress at t=0
  clock.now += 10;
  rep.output("[11/100] cc b");  // within the interval: silent
  clock.now += 20;
  rep.output("[31/100] cc c");  // 30 s in: 30 steps in 30 s → 69 s left
  clock.now += 5;
  rep.tick();
  rep.stage_finished(st, {StageStatus::ok, 95, ""});
  rep.message(Level::warning, "ccache: 10 hits");
  std::vector<std::string> lines;
  std::istringstream is(os.str());
  for (std::string l; std::getline(is, l);) lines.push_back(l);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "archbuild: [3/5] build: started: cmake --build build");
  CHECK(lines[1] == "archbuild: build: 31/100 (31%), 30s elapsed, ~1m09s left");
  CHECK(lines[2] == "archbuild: [3/5] build: ok after 1m35s");
  CHECK(lines[3] == "archbuild: warning: ccache: 10 hits");
}

TEST_CASE("TtyReporter: a redrawn bar with counts, elapsed time and an estimate", "[run]") {
  FakeClock clock;
  std::ostringstream os;
  {
    TtyReporter rep(os, 120, clock.fn());
    StageInfo st{"build", 3, 5, ""};
    rep.stage_started(st);
    rep.output("[1/4] a");
    clock.now += 10;
    rep.output("[2/4] b");
    std::string s = os.str();
    CHECK(s.find("\r\033[K") != std::string::npos);
    CHECK(s.find("[3/5] build  [##########----------] 2/4 50%  10s  ~20s left") != std::string::npos);
    clock.now += 10;
    rep.output("[4/4] c");
    rep.stage_finished(st, {StageStatus::failed, 20, "exit status 1"});
  }
  CHECK(os.str().find("[3/5] build  failed  20s  (exit status 1)\n") != std::string::npos);
}

TEST_CASE("JsonReporter: one JSON event per line", "[run]") {
  FakeClock clock;
  std::ostringstream os;
  JsonReporter rep(os, false, clock.fn());
  StageInfo st{"configure", 2, 5, "python setup.py build --cmake-only"};
  rep.stage_started(st);
  rep.output("-- Configuring done");  // lines are off by default
  rep.output("[1/2] x");
  rep.output("[1/2] x again");  // same counts: no second event
  clock.now += 1.5;
  rep.stage_finished(st, {StageStatus::failed, 1.5, "exit status 1", "/c/logs/k/configure.log"});
  rep.message(Level::error, "configure failed");
  std::vector<nlohmann::json> ev;
  std::istringstream is(os.str());
  for (std::string l; std::getline(is, l);) ev.push_back(nlohmann::json::parse(l));
  REQUIRE(ev.size() == 4);
  CHECK(ev[0]["event"] == "stage_started");
  CHECK(ev[0]["index"] == 2);
  CHECK(ev[1]["event"] == "progress");
  CHECK(ev[1]["done"] == 1);
  CHECK(ev[2]["event"] == "stage_finished");
  CHECK(ev[2]["status"] == "failed");
  CHECK(ev[2]["log"] == "/c/logs/k/configure.log");
  CHECK(ev[2]["t"] == 1.5);
  CHECK(ev[3]["level"] == "error");
}

TEST_CASE("run_reported: a real ninja-like command drives the reporter", "[run]") {
  FakeClock clock;
  std::ostringstream os;
  JsonReporter rep(os, true, clock.fn());
  ProcessRunner runner;
  rep.stage_started({"build", 1, 1, ""});
  auto r = run_reported(runner, sh("echo '[1/2] one'; echo '[2/2] two'"), rep);
  CHECK(r.ok());
  auto s = os.str();
  CHECK(s.find("\"event\":\"progress\",\"stage\":\"build\",\"done\":2,\"total\":2") != std::string::npos);
  CHECK(s.find("\"text\":\"[1/2] one\"") != std::string::npos);
}

TEST_CASE("choose_reporter", "[run]") {
  CHECK(choose_reporter(ReporterKind::automatic, true) == ReporterKind::json);
  CHECK(choose_reporter(ReporterKind::plain, true) == ReporterKind::plain);
  auto k = choose_reporter(ReporterKind::automatic, false);
  CHECK(k == (isatty(2) ? ReporterKind::tty : ReporterKind::plain));
}

// ---------------------------------------------------------------------------------------------
// The example project's build contract, driven the way the pytorch driver will drive it: three
// commands through ProcessRunner with an explicit, minimal environment.

namespace {

void copy_example(const std::filesystem::path& to) {
  namespace fs = std::filesystem;
  const fs::path root = ARCHBUILD_SOURCE_DIR;
  fs::copy(root / "examples/minitorch", to, fs::copy_options::recursive);
  // third_party/minidep is a link to ../../minitorch-dep in the repository: the real folder here.
  for (const char* junk : {"build", "dist", "recipe.toml", "third_party/minidep"}) fs::remove_all(to / junk);
  fs::create_directories(to / "third_party");
  fs::copy(root / "examples/minitorch-dep", to / "third_party/minidep", fs::copy_options::recursive);
}

// The arch list recorded in the built wheel (minitorch/_build_info.json), read with Python.
std::string wheel_arch_list(ProcessRunner& runner, const std::filesystem::path& dist) {
  Command c;
  c.argv = {"/usr/bin/python3", "-c",
            "import glob, json, sys, zipfile\n"
            "w = glob.glob(sys.argv[1] + '/*.whl')\n"
            "z = zipfile.ZipFile(w[0])\n"
            "names = z.namelist()\n"
            "assert 'minitorch/libminitorch_kernels.so' in names, names\n"
            "print(w[0].rsplit('/', 1)[1])\n"
            "print(';'.join(json.loads(z.read('minitorch/_build_info.json'))['arch_list']))\n",
            dist.string()};
  c.env = base_env();
  std::string out;
  auto r = runner.run(c, [&](std::string_view l) { out += std::string(l) + "\n"; });
  INFO(out);
  REQUIRE(r.ok());
  return out;
}

}  // namespace

TEST_CASE("example minitorch: setup.py build --cmake-only, cmake --build, bdist_wheel (CPU build)", "[run][example]") {
  if (!std::filesystem::exists("/usr/bin/python3") || !std::filesystem::exists("/usr/bin/cmake")) {
    WARN("##archbuild-skip## /usr/bin/python3 or cmake is missing");
    return;
  }
  TempDir tmp;
  auto src = tmp / "minitorch";
  copy_example(src);
  ProcessRunner runner;
  // Nothing inherited: the environment the plan would build.
  std::map<std::string, std::string> env{{"PATH", "/usr/bin:/bin"}, {"USE_CUDA", "0"},
                                         {"MAX_JOBS", "2"}, {"PYTORCH_BUILD_VERSION", "0.1.0+cpu"}};
  auto step = [&](std::vector<std::string> argv, const std::string& stage) {
    Command c{std::move(argv), env, src, tmp / ("logs/" + stage + ".log")};
    auto r = runner.run(c);
    INFO(stage << ": " << r.describe() << "\n" << text::join(tail(c.log, 30), "\n"));
    REQUIRE(r.ok());
  };
  step({"/usr/bin/python3", "setup.py", "build", "--cmake-only"}, "configure");
  CHECK(std::filesystem::exists(src / "build/CMakeCache.txt"));
  CHECK_FALSE(std::filesystem::exists(src / "build/libminitorch_kernels.so"));  // configure only
  step({"cmake", "--build", "build"}, "build");
  CHECK(std::filesystem::exists(src / "build/libminitorch_kernels.so"));
  step({"/usr/bin/python3", "setup.py", "bdist_wheel"}, "package");
  auto out = wheel_arch_list(runner, src / "dist");
  CHECK(out.find("minitorch-0.1.0+cpu-cp") == 0);
  CHECK(out.find("\n\n") != std::string::npos);  // a CPU build compiles for no architecture
}

TEST_CASE("example minitorch: kernels compiled for exactly TORCH_CUDA_ARCH_LIST (nvcc)", "[run][example][nvcc]") {
  if (auto u = archbuild::test::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) {
    WARN("##archbuild-skip## " << u);
    return;
  }
  TempDir tmp;
  auto src = tmp / "minitorch";
  copy_example(src);
  ProcessRunner runner;
  std::map<std::string, std::string> env{{"PATH", "/usr/local/cuda/bin:/usr/bin:/bin"},
                                         {"CUDA_HOME", "/usr/local/cuda"},
                                         {"TORCH_CUDA_ARCH_LIST", "8.0;9.0+PTX"},
                                         {"MAX_JOBS", "2"},
                                         {"CMAKE_BUILD_PARALLEL_LEVEL", "2"},
                                         {"USE_SOMETHING", "1"}};
  std::vector<std::string> lines;
  auto step = [&](std::vector<std::string> argv, const std::string& stage) {
    Command c{std::move(argv), env, src, tmp / ("logs/" + stage + ".log")};
    auto r = runner.run(c, [&](std::string_view l) { lines.emplace_back(l); });
    INFO(stage << ": " << r.describe() << "\n" << text::join(tail(c.log, 30), "\n"));
    REQUIRE(r.ok());
  };
  step({"/usr/bin/python3", "setup.py", "build", "--cmake-only"}, "configure");
  bool forwarded = false;
  for (const auto& l : lines) forwarded = forwarded || l.find("-DUSE_SOMETHING=1") != std::string::npos;
  CHECK(forwarded);  // USE_* reaches CMake
  lines.clear();
  step({"cmake", "--build", "build"}, "build");
  bool ninja_progress = false;
  for (const auto& l : lines) ninja_progress = ninja_progress || parse_ninja_progress(l).has_value();
  CHECK(ninja_progress);  // what drives the progress bar
  step({"/usr/bin/python3", "setup.py", "bdist_wheel"}, "package");
  auto out = wheel_arch_list(runner, src / "dist");
  CHECK(out.find("\nsm_80;sm_90;compute_90\n") != std::string::npos);

  // A reused build tree keeps its arch list (PyTorch's pitfall, why archbuild keys build trees).
  env["TORCH_CUDA_ARCH_LIST"] = "7.5";
  lines.clear();
  step({"/usr/bin/python3", "setup.py", "build", "--cmake-only"}, "reconfigure");
  bool kept = false;
  for (const auto& l : lines) kept = kept || l.find("not re-running cmake") != std::string::npos;
  CHECK(kept);
}

// A program that cannot be started: the error's kind says so and its context is the program, so
// a caller words its own line from reason() (app/torch.cpp) instead of cutting the message.
TEST_CASE("capture: a program that cannot start is of its kind, with the program as the context", "[run]") {
  auto r = capture({"/nonexistent/archbuild-no-such-program", "-c", "x"});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == Exit::missing_tool);
  CHECK(r.error().kind == ErrorKind::cannot_start);
  CHECK(r.error().message == "/nonexistent/archbuild-no-such-program: not found or not executable");
  CHECK(r.error().context == std::vector<std::string>{"/nonexistent/archbuild-no-such-program"});
  CHECK(r.error().reason() == "not found or not executable");
}
