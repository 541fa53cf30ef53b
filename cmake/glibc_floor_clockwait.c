// pthread_cond_clockwait without GLIBC_2.30: only in the bundle build (ARCHBUILD_GLIBC_FLOOR,
// cmake/glibc-floor.cmake), which links bin/archbuild with -Wl,--wrap=pthread_cond_clockwait.
//
// Why: GCC 10's libstdc++ (Debian 11's, linked statically) implements
// std::condition_variable::wait_until/wait_for on steady_clock with pthread_cond_clockwait, new
// in glibc 2.30; that one import kept the bundle off glibc 2.28 hosts (RHEL 8, Debian 10,
// manylinux_2_28). Every other reference to it is renamed by --wrap to this function, which
// waits with pthread_cond_timedwait (the default GLIBC_2.3.2 version on x86_64, GLIBC_2.17 on
// aarch64; both older than 2.28).
//
// The difference: a CLOCK_MONOTONIC deadline becomes the CLOCK_REALTIME deadline that is as far
// away at the moment of the call. If the wall clock is stepped (an administrator, NTP's step mode)
// while a thread waits, the wait ends that much earlier or later than the monotonic deadline
// asked; libstdc++ before GCC 10 behaved the same (it waited on the system clock), and its
// wait_until loops re-check the steady clock after a wake-up, so an early end is only a spurious
// wake-up to them.
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

int __wrap_pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock,
                                  const struct timespec* abstime) {
  // glibc's own checks, in its order.
  if (clock != CLOCK_MONOTONIC && clock != CLOCK_REALTIME) return EINVAL;
  if (abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000L) return EINVAL;
  if (clock == CLOCK_REALTIME) return pthread_cond_timedwait(cond, mutex, abstime);

  struct timespec now_monotonic;
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &now_monotonic);
  clock_gettime(CLOCK_REALTIME, &deadline);
  // deadline = now (realtime) + (abstime - now (monotonic)), saturated: a wait "forever" is given
  // as a time point far in the future, and time_t must not overflow.
  const int64_t max_seconds = sizeof(time_t) == 8 ? INT64_MAX / 2 : INT32_MAX;
  int64_t seconds = (int64_t)abstime->tv_sec - (int64_t)now_monotonic.tv_sec;
  long nanoseconds = abstime->tv_nsec - now_monotonic.tv_nsec + deadline.tv_nsec;
  if (nanoseconds < 0) {
    nanoseconds += 1000000000L;
    seconds -= 1;
  } else if (nanoseconds >= 1000000000L) {
    nanoseconds -= 1000000000L;
    seconds += 1;
  }
  if (seconds > max_seconds - (int64_t)deadline.tv_sec) {
    seconds = max_seconds - (int64_t)deadline.tv_sec;
    nanoseconds = 999999999L;
  }
  deadline.tv_sec = (time_t)((int64_t)deadline.tv_sec + seconds);
  deadline.tv_nsec = nanoseconds;
  // A deadline already passed is passed on as it is: pthread_cond_timedwait then returns
  // ETIMEDOUT at once, as pthread_cond_clockwait would.
  return pthread_cond_timedwait(cond, mutex, &deadline);
}
