// Memory admission: shares within a budget, a compile over the budget runs alone,
// a killed compile's share is released by the kernel, measured peaks are read back.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <future>
#include <memory>
#include <thread>

#include "run/admission.hpp"
#include "run/exec.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::run;

TEST_CASE("admission takes shares within the budget and releases them", "[run][admission]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "adm";
  {
    auto a = admit({dir, 1000, 400});
    REQUIRE(a);
    auto b = admit({dir, 1000, 600});
    REQUIRE(b);
    CHECK(admitted_mb(dir) == 1000);
  }
  CHECK(admitted_mb(dir) == 0);
}

TEST_CASE("a compile that alone exceeds the budget runs when nothing else is admitted", "[run][admission]") {
  test::TempDir tmp;
  auto big = admit({tmp.path() / "adm", 100, 5000});
  REQUIRE(big);
  CHECK(big->share_mb() == 5000);
}

TEST_CASE("a compile waits until its share fits", "[run][admission]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "adm";
  auto first = admit({dir, 100, 60});
  REQUIRE(first);
  std::atomic<bool> admitted{false};
  std::thread second([&] {
    auto b = admit({dir, 100, 60, std::chrono::milliseconds(5)});
    admitted = static_cast<bool>(b);
  });
  // Not a timing check: whenever the flag is read, 60 + 60 > 100 must have kept it out.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(admitted.load());
  first = Admission();  // release
  second.join();
  CHECK(admitted.load());
}

// A child process admitted for 100 MB of `dir`'s budget of 100, holding it until killed; returns
// once it holds the share.
static pid_t fork_holder(const std::filesystem::path& dir) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto a = admit({dir, 100, 100});
    char c = a ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    ::pause();  // holds the share until killed
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  REQUIRE(c == 'y');
  return pid;
}

TEST_CASE("a killed compile releases its share", "[run][admission]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "adm";
  pid_t pid = fork_holder(dir);
  CHECK(admitted_mb(dir) == 100);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  // The holder is gone without cleaning up: its slot file is still there but unlocked.
  CHECK(admitted_mb(dir) == 0);
  auto again = admit({dir, 100, 100});
  REQUIRE(again);
}

TEST_CASE("measured peaks are recorded and read back per source", "[run][admission]") {
  test::TempDir tmp;
  const auto file = tmp.path() / "peaks.tsv";
  CHECK_FALSE(measured(file, "a.cu"));
  append_record(file, {"a.cu", 2048, 0, 0});
  append_record(file, {"b.cpp", 100, 5, 0});
  append_record(file, {"a.cu", 4097, 10, 0});
  append_record(file, {"a.cu", 1, 0, 1});  // a failed compile's peak is not an expectation
  CHECK(measured(file, "a.cu")->mb == 5);
  CHECK(measured(file, "b.cpp")->mb == 1);
  CHECK(read_records(file).size() == 4);
  // Only a whole source at the start of a line matches: not the end of a longer path, not the
  // start of another name; a damaged line is skipped, not half read.
  append_record(file, {"x/a.cu", 900 << 10, 0, 0});
  append_record(file, {"a.cu.bak", 800 << 10, 0, 0});
  { std::ofstream(file, std::ios::app) << "a.cu\t77x\t0\t0\n" << "b.cpp\t7000\t0"; }
  CHECK(measured(file, "a.cu")->mb == 5);
  CHECK(measured(file, "x/a.cu")->mb == 900);
  CHECK(measured(file, "a.cu.bak")->mb == 800);
  CHECK(measured(file, "b.cpp")->mb == 1);
  CHECK_FALSE(measured(file, "x/"));
  CHECK(read_records(file).size() == 6);
}

TEST_CASE("measured peaks: a file larger than the read buffer gives what parsing every record gives",
          "[run][admission]") {
  // ~400 KB of records (several 64 KiB blocks, lines across their ends), sources measured again
  // later with other peaks, one path of 100 KB (longer than the buffer); each source's answer
  // against the last successful record written for it, and every record read back.
  test::TempDir tmp;
  const auto file = tmp.path() / "peaks.tsv";
  const auto name = [](int i) { return "aten/src/ATen/native/cuda/k" + std::to_string(i) + ".cu"; };
  std::map<std::string, std::uint64_t> expected;
  for (int i = 0; i < 4000; ++i) {
    CompileRecord r{name(i % 3000), static_cast<std::uint64_t>(i + 1) << 10, 0, i % 13 == 0 ? 1 : 0};
    r.output = "o.o";
    r.wall_ms = static_cast<std::uint64_t>(i);
    append_record(file, r);
    if (r.exit_code == 0) expected[r.source] = static_cast<std::uint64_t>(i + 1);
  }
  const std::string long_path(100000, 'p');
  append_record(file, {long_path, 7 << 10, 0, 0});
  append_record(file, {name(5), 9 << 10, 0, 0});
  expected[name(5)] = 9;
  REQUIRE(expected.size() > 2800);  // some only ever failed
  const auto all = read_records(file);
  REQUIRE(all.size() == 4002);
  CHECK(all[3999].source == name(999));
  CHECK(all[4000].source == long_path);
  for (int i = 0; i < 3000; ++i) {
    INFO(name(i));
    auto m = measured(file, name(i));
    if (expected.count(name(i)))
      CHECK((m && m->mb == expected[name(i)]));
    else
      CHECK_FALSE(m);
  }
  CHECK(measured(file, long_path)->mb == 7);
  CHECK(measured(file, name(5))->mb == 9);
}

TEST_CASE("run_measured reports the exit status and the peak memory", "[run][admission]") {
  auto ok = run_measured({"sh", "-c", "exit 3"});
  REQUIRE(ok);
  CHECK(ok->exit_code == 3);
  CHECK(ok->max_rss_kb > 0);
  auto missing = run_measured({"archbuild-no-such-program"});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().exit == Exit::missing_tool);
}

TEST_CASE("a waiting compile's share is reserved ahead of younger requests", "[run][admission]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "adm";
  auto held = admit({dir, 100, 60});
  REQUIRE(held);
  std::atomic<bool> big_in{false}, small_in{false};
  std::thread big([&] { big_in = static_cast<bool>(admit({dir, 100, 60, std::chrono::milliseconds(5)})); });
  // Until the big request is waiting (its wait file exists).
  auto waiting = [&] {
    for (const auto& de : std::filesystem::directory_iterator(dir))
      if (de.path().filename().string().rfind("wait-", 0) == 0) return true;
    return false;
  };
  while (!waiting()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // 60 held + 30 would fit, but not with the older waiter's 60 reserved.
  std::thread small([&] { small_in = static_cast<bool>(admit({dir, 100, 30, std::chrono::milliseconds(5)})); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(small_in.load());
  CHECK_FALSE(big_in.load());
  held = Admission();
  big.join();
  small.join();
  CHECK(big_in.load());
  CHECK(small_in.load());
}

// Until `n` compiles wait in `dir` (their wait files exist).
static void until_waiting(const std::filesystem::path& dir, std::size_t n) {
  for (;;) {
    std::size_t w = 0;
    for (const auto& de : std::filesystem::directory_iterator(dir))
      if (de.path().filename().string().rfind("wait-", 0) == 0) ++w;
    if (w >= n) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST_CASE("admission packs the waiters largest first: a large one goes before smaller ones that came first",
          "[run][admission]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "adm";
  auto held = admit({dir, 100, 90});
  REQUIRE(held);
  // Two small compiles start waiting first, then a large one (ninja's order).
  std::atomic<int> in{0};
  std::atomic<bool> small1_in{false}, small2_in{false}, large_in{false}, done{false};
  auto hold = [&](std::uint64_t mb, std::atomic<bool>& flag) {
    return std::thread([&, mb] {
      auto a = admit({dir, 100, mb, std::chrono::milliseconds(2)});
      if (!a) return;
      flag = true;
      ++in;
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  };
  std::thread s1 = hold(30, small1_in);
  until_waiting(dir, 1);
  std::thread s2 = hold(30, small2_in);
  until_waiting(dir, 2);
  std::thread large = hold(60, large_in);
  until_waiting(dir, 3);
  held = Admission();
  // In ninja's order the two small ones (30 + 30) would go first and the large one wait; packed,
  // the large one (60) and the older small one (30) fit, the younger small one waits.
  while (in < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(large_in.load());
  CHECK(small1_in.load());
  CHECK_FALSE(small2_in.load());  // not a timing check: 60 + 30 + 30 > 100 whenever it is read
  CHECK(admitted_mb(dir) == 90);
  done = true;
  s1.join();
  s2.join();
  large.join();
  CHECK(small2_in.load());
}

TEST_CASE("admission: of equal peaks, the longer measured compile goes first", "[run][admission]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "adm";
  auto held = admit({dir, 100, 100});
  REQUIRE(held);
  std::atomic<bool> short_in{false}, long_in{false}, done{false};
  auto hold = [&](std::uint64_t ms, std::atomic<bool>& flag) {
    return std::thread([&, ms] {
      AdmissionRequest r{dir, 100, 60, std::chrono::milliseconds(2)};
      r.expect_ms = ms;
      auto a = admit(r);
      if (!a) return;
      flag = true;
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  };
  std::thread quick = hold(1000, short_in);
  until_waiting(dir, 1);
  std::thread slow = hold(90000, long_in);
  until_waiting(dir, 2);
  held = Admission();
  while (!short_in && !long_in) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(long_in.load());
  CHECK_FALSE(short_in.load());  // 60 + 60 > 100
  done = true;
  quick.join();
  slow.join();
  CHECK(short_in.load());
}

TEST_CASE("admission: the expected peak is the measured one, else a pattern, else the kind's figure", "[run][admission]") {
  recipe::CompileMemory m;
  m.c_mb = 100;
  m.cxx_mb = 200;
  m.cuda_mb = 1000;
  m.cuda_thread_mb = 300;
  m.patterns = {{"aten/*/flash_attn/kernels/*.cu", 5000}};
  CHECK(expected_peak(m, "CXX", "a.cpp", 1, std::nullopt).mb == 200);
  CHECK(expected_peak(m, "C", "a.c", 1, std::nullopt).basis == "C");
  CHECK(expected_peak(m, "CUDA", "k.cu", 1, std::nullopt).mb == 1000);
  auto threaded = expected_peak(m, "CUDA", "k.cu", 4, std::nullopt);  // NVCC_THREADS=4
  CHECK(threaded.mb == 1900);
  CHECK(threaded.basis == "CUDA x4 threads");
  // '*' crosses '/' (fnmatch without FNM_PATHNAME).
  auto flash = expected_peak(m, "CUDA", "aten/src/ATen/native/transformers/cuda/flash_attn/kernels/f.cu", 1, std::nullopt);
  CHECK(flash.mb == 5000);
  CHECK(flash.basis == "pattern aten/*/flash_attn/kernels/*.cu");
  CHECK(expected_peak(m, "CUDA", "aten/src/ATen/native/transformers/cuda/flash_attn/kernels/f.cu", 1, Measurement{700, 0, 1}).mb == 700);
}

TEST_CASE("admission: a peak measured at other nvcc threads is rescaled by the figures' proportion", "[run][admission]") {
  recipe::CompileMemory m;
  m.cuda_mb = 2048;
  m.cuda_thread_mb = 1024;
  // Figures: 2048 MB at 1 thread, 5120 at 4: a source measured at 5000 MB with 4 threads
  // predicts 5000 x 2048 / 5120 = 2000 MB with 1 thread, and 5000 x 3072 / 5120 = 3000 with 2.
  CHECK(rescale_peak_mb(m, 5000, 4, 1) == 2000);
  CHECK(rescale_peak_mb(m, 5000, 4, 2) == 3000);
  CHECK(rescale_peak_mb(m, 2000, 1, 4) == 5000);
  CHECK(rescale_peak_mb(m, 777, 3, 3) == 777);
  auto e = expected_peak(m, "CUDA", "k.cu", 2, Measurement{5000, 900, 4});
  CHECK(e.mb == 3000);
  CHECK(e.basis == "measured at 4 nvcc threads, rescaled to 2");
  CHECK(expected_peak(m, "CUDA", "k.cu", 4, Measurement{5000, 900, 4}).basis == "measured");
  // C++ compiles have no nvcc threads: never rescaled.
  CHECK(expected_peak(m, "CXX", "a.cpp", 2, Measurement{900, 10, 1}).mb == 900);
}

TEST_CASE("admission: nvcc threads from --threads, -t and NVCC_APPEND_FLAGS", "[run][admission]") {
  CHECK(nvcc_threads({"nvcc", "-c", "a.cu"}, "", 8) == 1);
  CHECK(nvcc_threads({"nvcc", "--threads", "4", "-c", "a.cu"}, "", 8) == 4);
  CHECK(nvcc_threads({"nvcc", "-t", "2"}, "", 8) == 2);
  CHECK(nvcc_threads({"nvcc", "--threads=3"}, "", 8) == 3);
  CHECK(nvcc_threads({"nvcc"}, " --threads 6", 8) == 6);
  CHECK(nvcc_threads({"nvcc", "--threads", "0"}, "", 8) == 8);  // 0: one per CPU
}

TEST_CASE("admission: records keep output, expectation and language, the older form still reads, peaks merge per source",
          "[run][admission]") {
  test::TempDir tmp;
  const auto records = tmp.path() / "compiles.tsv";
  append_record(records, {"csrc/a.cpp", 2048, 10, 0, "CMakeFiles/x.dir/csrc/a.cpp.o", 256, "C++", "CXX"});
  { std::ofstream(records, std::ios::app) << "csrc/k.cu\t4096\t0\t0\n"; }
  append_record(records, {"csrc/bad.cu", 9999, 0, 1, "k.o", 512, "CUDA", "CUDA"});
  auto r = read_records(records);
  REQUIRE(r.size() == 3);
  CHECK(r[0].output == "CMakeFiles/x.dir/csrc/a.cpp.o");
  CHECK(r[0].expect_mb == 256);
  CHECK(r[0].basis == "C++");
  CHECK(r[0].lang == "CXX");
  CHECK(r[1].source == "csrc/k.cu");
  CHECK(r[1].output.empty());

  append_record(records, {"csrc/t.cu", 5 << 20, 0, 0, "t.o", 5000, "CUDA x4 threads", "CUDA", 81234, 4});
  auto t = read_records(records);
  REQUIRE(t.size() == 4);
  CHECK(t[3].wall_ms == 81234);
  CHECK(t[3].threads == 4);
  CHECK(r[0].threads == 1);
  CHECK(measured(records, "csrc/t.cu")->threads == 4);
  CHECK(measured(records, "csrc/t.cu")->wall_ms == 81234);
  CHECK(measured(records, "csrc/t.cu")->mb == 5120);

  const auto peaks = tmp.path() / "peaks" / "recipe.tsv";
  merge_peaks(peaks, r);
  merge_peaks(peaks, {{"csrc/a.cpp", 3072, 0, 0, "a.o", 2, "measured", "CXX"}});
  auto merged = read_records(peaks);
  CHECK(merged.size() == 2);  // the failed compile is not a measurement
  CHECK(measured(peaks, "csrc/a.cpp")->mb == 3);  // the latest wins
  CHECK(measured(peaks, "csrc/k.cu")->mb == 4);
  CHECK(!measured(peaks, "csrc/bad.cu"));
}

TEST_CASE("admission: the build's settings round-trip through config.json", "[run][admission]") {
  test::TempDir tmp;
  AdmissionConfig c;
  c.budget_mb = 12345;
  c.figures.cxx_mb = 777;
  c.figures.patterns = {{"x/*.cu", 4000}};
  c.peaks = "/cache/peaks/p.tsv";
  c.records = "/cache/logs/k/compiles.tsv";
  REQUIRE(write_config(tmp.path() / "adm", c));
  auto back = read_config(tmp.path() / "adm");
  REQUIRE(back);
  CHECK(back->budget_mb == 12345);
  CHECK(back->figures.cxx_mb == 777);
  REQUIRE(back->figures.patterns.size() == 1);
  CHECK(back->figures.patterns[0].glob == "x/*.cu");
  CHECK(back->records == c.records);
  auto missing = read_config(tmp.path() / "none");
  REQUIRE(!missing);
  CHECK(missing.error().exit == Exit::bad_input);
}

// Until the compile waiting in `dir` has looked once and found no room: its wait file exists
// (made under admission.lock), and taking the lock after it means that look is over, so it is
// asleep (or about to be) with its inotify watch already set.
static void until_waiter_looked(const std::filesystem::path& dir) {
  until_waiting(dir, 1);
  const auto lock = dir / "admission.lock";
  int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  ::close(fd);
}

// A waiter that polls only once an hour, in a thread of its own (detached: if no wake came, the
// test fails at its deadline instead of hanging; the process ends it).
static std::future<bool> sleepy_waiter(const std::filesystem::path& dir, std::uint64_t budget, std::uint64_t need) {
  auto done = std::make_shared<std::promise<bool>>();
  auto result = done->get_future();
  AdmissionRequest r{dir, budget, need, std::chrono::hours(1)};
  std::thread([r, done] {
    const bool admitted = static_cast<bool>(admit(r));  // released before the test hears of it
    done->set_value(admitted);
  }).detach();
  return result;
}

// The deadline only turns a hang into a failure; it is no timing check.
constexpr auto kWakeDeadline = std::chrono::seconds(60);

TEST_CASE("admission: a release wakes a waiter through inotify, not its poll", "[run][admission]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "adm";
  auto held = admit({dir, 100, 60});
  REQUIRE(held);
  auto waiter = sleepy_waiter(dir, 100, 60);
  until_waiter_looked(dir);
  held = Admission();  // release: its slot file removed (IN_DELETE)
  if (waiter.wait_for(kWakeDeadline) != std::future_status::ready)
    FAIL("the waiter was not woken by the release (its poll is 1 h)");
  CHECK(waiter.get());
}

TEST_CASE("admission: a holder killed while a compile waits releases its share to the waiter", "[run][admission]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "adm";
  pid_t pid = fork_holder(dir);  // before any thread of this test
  auto waiter = sleepy_waiter(dir, 100, 50);
  until_waiter_looked(dir);
  // Killed without cleaning up: the kernel closes its slot file (IN_CLOSE_WRITE), the waiter
  // wakes, finds the slot unlocked and removes it.
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (waiter.wait_for(kWakeDeadline) != std::future_status::ready)
    FAIL("the waiter was not woken when the holder died (its poll is 1 h)");
  CHECK(waiter.get());
  CHECK(admitted_mb(dir) == 0);  // the waiter's thread has released its share again
}
