#include "run/interrupt.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <mutex>
#include <unistd.h>

namespace archbuild::run {
namespace {

std::atomic<int> g_signal{0};
std::atomic<int> g_count{0};
int g_pipe[2] = {-1, -1};
std::once_flag g_pipe_once;

std::mutex g_mutex;
int g_guards = 0;
struct sigaction g_old_int, g_old_term, g_old_hup;

void make_pipe() {
  if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_pipe[0] = g_pipe[1] = -1;
}

extern "C" void on_signal(int sig) {
  int saved = errno;
  g_signal.store(sig);
  g_count.fetch_add(1);
  if (g_pipe[1] >= 0) {
    char c = 1;
    [[maybe_unused]] auto n = write(g_pipe[1], &c, 1);
  }
  errno = saved;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  std::call_once(g_pipe_once, make_pipe);
  std::lock_guard lock(g_mutex);
  if (g_guards++ > 0) return;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGHUP, &sa, &g_old_hup);
}

InterruptGuard::~InterruptGuard() {
  std::lock_guard lock(g_mutex);
  if (--g_guards > 0) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGHUP, &g_old_hup, nullptr);
}

bool interrupt_requested() { return g_signal.load() != 0; }
int interrupt_signal() { return g_signal.load(); }
int interrupt_count() { return g_count.load(); }

void request_interrupt(int sig) {
  std::call_once(g_pipe_once, make_pipe);
  on_signal(sig);
}

void reset_interrupt() {
  g_signal.store(0);
  g_count.store(0);
  if (g_pipe[0] >= 0) {
    char buf[64];
    while (read(g_pipe[0], buf, sizeof buf) > 0) {
    }
  }
}

int interrupt_wake_fd() {
  std::call_once(g_pipe_once, make_pipe);
  return g_pipe[0];
}

}  // namespace archbuild::run
