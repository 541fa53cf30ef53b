// Hostile input, records read back from the cache (issue 47): a session record is proven ours
// before anything it names is signalled, and a record that is not a regular file is not read.
#include <catch2/catch.hpp>

#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "run/runner.hpp"
#include "run/session.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::run;

namespace {

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(stat, s);
  auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && s[close + 2] != 'Z';
}

}  // namespace

TEST_CASE("hostile/cache records: a hand-made session record never ends someone else's session", "[run]") {
  test::TempDir tmp;
  // `setsid sleep 1000`: a live session leader of the user's, not started by archbuild.
  pid_t other = ::fork();
  REQUIRE(other >= 0);
  if (other == 0) {
    ::setsid();
    ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::optional<unsigned long long> start;
  for (int i = 0; i < 500 && !(start = process_start_time(other)); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(start);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // setsid done, sleep exec'd
  // Its pid, start time and boot id are all right; the token is any 16+ characters.
  auto record = tmp / "k.session";
  REQUIRE(write_session_record(record, SessionRecord{other, *start, current_boot_id(), new_session_token()}));
  CHECK(session_processes(*read_session_record(record)).empty());
  auto ended = end_stale_session(record, {}, std::chrono::seconds(2));
  REQUIRE(ended);
  CHECK(*ended == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(alive(other));
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
}

TEST_CASE("hostile/cache records: a session record that is a FIFO is not opened", "[run]") {
  test::TempDir tmp;
  auto record = tmp / "k.session";
  REQUIRE(::mkfifo(record.c_str(), 0644) == 0);
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(read_session_record(record));
  auto ended = end_stale_session(record);  // removed as a record cut short: nothing to end
  REQUIRE(ended);
  CHECK(*ended == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("hostile/paths written: a stage log that is a link, FIFO or directory is refused, never followed", "[run]") {
  test::TempDir tmp;
  ProcessRunner runner;
  Command cmd;
  cmd.argv = {"/bin/echo", "hello"};
  cmd.env = {{"PATH", "/usr/bin:/bin"}};
  cmd.cwd = tmp.path();
  // A regular log works, truncated or appended to.
  cmd.log = tmp / "logs/build.log";
  REQUIRE(runner.run(cmd).ok());
  cmd.append_log = true;
  REQUIRE(runner.run(cmd).ok());
  CHECK(test::read_file(cmd.log).find("hello\n# archbuild ran") != std::string::npos);
  cmd.append_log = false;
  // A link planted at the log: open() followed it and truncated what it names.
  tmp.write("outside", "kept");
  std::filesystem::create_symlink(tmp / "outside", tmp / "logs/link.log");
  cmd.log = tmp / "logs/link.log";
  auto l = runner.run(cmd);
  CHECK_FALSE(l.started);
  CHECK(l.error.find("symbolic link") != std::string::npos);
  CHECK(test::read_file(tmp / "outside") == "kept");
  // A FIFO with a reader (without one, open() waited forever): refused, nothing written into it.
  auto fifo = tmp / "logs/fifo.log";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  cmd.log = fifo;
  auto f = runner.run(cmd);
  CHECK_FALSE(f.started);
  CHECK(f.error.find("FIFO") != std::string::npos);
  char c;
  CHECK(::read(reader, &c, 1) <= 0);
  ::close(reader);
  // Without a reader it is refused at once too.
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(runner.run(cmd).started);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  // A directory.
  std::filesystem::create_directories(tmp / "logs/dir.log");
  cmd.log = tmp / "logs/dir.log";
  CHECK_FALSE(runner.run(cmd).started);
}
