// Ctrl-C / SIGTERM handling for long runs. While an InterruptGuard lives, SIGINT, SIGTERM and
// SIGHUP do not kill archbuild: they set a flag that the ProcessRunner (and libgit2 callbacks,
// through a `cancelled` function) poll, so children are stopped and nothing is left half-published.
#pragma once

namespace archbuild::run {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers (nested guards share them)
  ~InterruptGuard();  // the last guard restores the previous handlers
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// True once a signal arrived (or request_interrupt() was called) and until reset_interrupt().
bool interrupt_requested();
// The signal that asked (SIGINT, SIGTERM, SIGHUP), 0 when none.
int interrupt_signal();
// How many signals arrived: a second Ctrl-C makes the runner kill at once.
int interrupt_count();
// As if `sig` had arrived (tests; a thread that decides to stop everything).
void request_interrupt(int sig);
void reset_interrupt();
// Read end of a self-pipe that becomes readable when a signal arrives (for poll()).
int interrupt_wake_fd();

}  // namespace archbuild::run
