#include "core/spread_thread.hpp"

#include <deque>
#include <exception>
#include <system_error>

namespace archbuild {

void* SpreadThread::run(void* p) {
  auto* self = static_cast<SpreadThread*>(p);
  self->started_on_ = ::sched_getcpu();
  if (self->restore_) ::sched_setaffinity(0, sizeof self->allowed_, &self->allowed_);
  try {
    self->fn_();
  } catch (...) {
    std::terminate();
  }
  return nullptr;
}

SpreadThread::SpreadThread(std::function<void()> fn) : fn_(std::move(fn)) {
  pthread_attr_t attr;
  ::pthread_attr_init(&attr);
  const int here = creator_cpu_ = ::sched_getcpu();
  if (here >= 0 && here < CPU_SETSIZE && ::sched_getaffinity(0, sizeof allowed_, &allowed_) == 0) {
    cpu_set_t elsewhere = allowed_;
    CPU_CLR(here, &elsewhere);
    if (CPU_COUNT(&elsewhere) > 0 && ::pthread_attr_setaffinity_np(&attr, sizeof elsewhere, &elsewhere) == 0)
      restore_ = true;
  }
  int rc = ::pthread_create(&id_, &attr, &SpreadThread::run, this);
  if (rc != 0 && restore_) {  // an affinity the kernel refuses (a cpuset changed meanwhile)
    restore_ = false;
    ::pthread_attr_destroy(&attr);
    ::pthread_attr_init(&attr);
    rc = ::pthread_create(&id_, &attr, &SpreadThread::run, this);
  }
  ::pthread_attr_destroy(&attr);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "cannot start a thread");
  started_ = true;
}

void SpreadThread::join() {
  if (started_) ::pthread_join(id_, nullptr);
  started_ = false;
}

SpreadThread::~SpreadThread() { join(); }

void run_spread(std::size_t n, const std::function<void(std::size_t)>& work) {
  if (n == 0) return;
  std::deque<SpreadThread> others;  // joined when it goes out of scope
  for (std::size_t k = 1; k < n; ++k) others.emplace_back([&work, k] { work(k); });
  work(0);
}

}  // namespace archbuild
