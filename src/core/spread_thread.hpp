// A thread started on another CPU than its creator's.
//
// Why: on the VMs measured (bench/inspect), the first thread a busy process creates waited
// 1.7-4 ms before it ran at all: it is queued on its creator's CPU, and the idle one takes it
// only at the next load balance (a 4 ms tick). inspect's second reader thread started that late
// while the first was already scanning. Allowed only the other CPUs at its start, it runs
// within ~0.4 ms; its first act is to take back every CPU the process may use, so after that
// it is scheduled like any thread.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <cstddef>
#include <functional>

namespace archbuild {

class SpreadThread {
 public:
  // Runs fn on a new thread. Where the process may use only the calling thread's CPU (or the
  // affinity cannot be read), an ordinary thread. fn must not throw (std::terminate, as for
  // std::thread).
  explicit SpreadThread(std::function<void()> fn);
  ~SpreadThread();  // joins, unless join() did
  void join();
  // The CPU it began on (before taking back the others), and the caller's CPU then; -1 unknown.
  int started_on() const { return started_on_; }
  int creator_cpu() const { return creator_cpu_; }
  SpreadThread(const SpreadThread&) = delete;
  SpreadThread& operator=(const SpreadThread&) = delete;

 private:
  static void* run(void* self);
  std::function<void()> fn_;
  cpu_set_t allowed_{};     // every CPU the process may use, restored first thing
  bool restore_ = false;
  int creator_cpu_ = -1;
  int started_on_ = -1;
  pthread_t id_{};
  bool started_ = false;
};

// Runs work(k) for every k in [0, n): k = 0 on the calling thread, the others each on a
// SpreadThread. Returns when all have returned.
void run_spread(std::size_t n, const std::function<void(std::size_t)>& work);

}  // namespace archbuild
