// Memory admission (issue 17): shares within a budget, a compile over the budget runs alone,
// a killed compile's share is released by the kernel, measured peaks are read back.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
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

TEST_CASE("a killed compile releases its share", "[run][admission]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "adm";
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
  CHECK_FALSE(measured_peak_mb(file, "a.cu"));
  append_record(file, {"a.cu", 2048, 0, 0});
  append_record(file, {"b.cpp", 100, 5, 0});
  append_record(file, {"a.cu", 4097, 10, 0});
  append_record(file, {"a.cu", 1, 0, 1});  // a failed compile's peak is not an expectation
  CHECK(measured_peak_mb(file, "a.cu") == 5);
  CHECK(measured_peak_mb(file, "b.cpp") == 1);
  CHECK(read_records(file).size() == 4);
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
  CHECK(expected_peak(m, "CUDA", "aten/src/ATen/native/transformers/cuda/flash_attn/kernels/f.cu", 1, 700).mb == 700);
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

  const auto peaks = tmp.path() / "peaks" / "recipe.tsv";
  merge_peaks(peaks, r);
  merge_peaks(peaks, {{"csrc/a.cpp", 3072, 0, 0, "a.o", 2, "measured", "CXX"}});
  auto merged = read_records(peaks);
  CHECK(merged.size() == 2);  // the failed compile is not a measurement
  CHECK(measured_peak_mb(peaks, "csrc/a.cpp") == 3);  // the latest wins
  CHECK(measured_peak_mb(peaks, "csrc/k.cu") == 4);
  CHECK(!measured_peak_mb(peaks, "csrc/bad.cu"));
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
