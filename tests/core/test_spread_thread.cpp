// core/spread_thread: a thread started on another CPU than its creator's, then free to run anywhere.
#include <catch2/catch.hpp>

#include <sched.h>

#include <atomic>
#include <deque>
#include <vector>

#include "core/spread_thread.hpp"

using namespace archbuild;

TEST_CASE("a spread thread begins on another CPU than its creator's and then may use every CPU", "[spread]") {
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  if (CPU_COUNT(&allowed) < 2) {
    WARN("##archbuild-skip## this process may use one CPU only");
    return;
  }
  for (int round = 0; round < 20; ++round) {
    cpu_set_t inside;
    CPU_ZERO(&inside);
    bool ran = false;
    SpreadThread t([&] {
      sched_getaffinity(0, sizeof inside, &inside);
      ran = true;
    });
    t.join();
    INFO("round " << round << ": created on CPU " << t.creator_cpu() << ", began on CPU " << t.started_on());
    REQUIRE(ran);
    REQUIRE(t.creator_cpu() >= 0);
    CHECK(t.started_on() != t.creator_cpu());
    CHECK(CPU_EQUAL(&inside, &allowed));
  }
}

TEST_CASE("spread threads: more threads than CPUs all run and are joined", "[spread]") {
  std::atomic<int> done{0};
  {
    std::deque<SpreadThread> pool;
    for (int i = 0; i < 8; ++i) pool.emplace_back([&] { ++done; });
  }
  CHECK(done == 8);
}

TEST_CASE("run_spread runs every index once, the first on the calling thread", "[spread]") {
  std::vector<std::atomic<int>> runs(6);
  std::atomic<bool> zero_here{false};
  const auto caller = pthread_self();
  run_spread(runs.size(), [&](std::size_t k) {
    ++runs[k];
    if (k == 0) zero_here = pthread_equal(pthread_self(), caller) != 0;
  });
  for (auto& r : runs) CHECK(r == 1);
  CHECK(zero_here);
  run_spread(0, [](std::size_t) { FAIL("nothing to run"); });
}
