#include "run/capture.hpp"

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <unistd.h>

#include <boost/process.hpp>
#include <fmt/format.h>

#include "run/interrupt.hpp"

namespace bp = boost::process;

namespace archbuild::run {

std::optional<std::filesystem::path> find_program(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) == 0) return std::filesystem::path(name);
    return std::nullopt;
  }
  auto p = bp::search_path(name);
  if (p.empty()) return std::nullopt;
  return std::filesystem::path(p.string());
}

Result<Captured> capture(const std::vector<std::string>& argv, const CaptureOptions& options) {
  if (argv.empty()) return Error::bad_input("capture: empty command");
  auto exe = find_program(argv[0]);
  if (!exe)
    return Error::missing_tool("not found or not executable").with_context(argv[0]).with_kind(ErrorKind::cannot_start);

  bp::environment env;
  if (!options.clean_env) {
    for (const auto& e : boost::this_process::environment()) env[e.get_name()] = e.to_string();
  }
  for (const auto& [k, v] : options.env) env[k] = v;

  boost::asio::io_context io;
  std::future<std::string> out_f, err_f;
  std::vector<std::string> args(argv.begin() + 1, argv.end());
  std::error_code ec;
  // The working directory may be gone (removed under this process): a question asked of a tool
  // (nvcc --version) is then asked from '/', not turned into an exception.
  std::string start_dir = options.cwd ? options.cwd->string() : std::filesystem::current_path(ec).string();
  if (ec || start_dir.empty()) start_dir = "/";
  ec.clear();
  // stdin: the caller's input (a credential helper reads the registry host there), else nothing.
  bp::child child = options.input
                        ? bp::child(bp::exe = exe->string(), bp::args = args, bp::env = env, bp::start_dir = start_dir,
                                    bp::std_out > out_f, bp::std_err > err_f,
                                    bp::std_in < boost::asio::buffer(*options.input), io, ec)
                        : bp::child(bp::exe = exe->string(), bp::args = args, bp::env = env, bp::start_dir = start_dir,
                                    bp::std_out > out_f, bp::std_err > err_f, bp::std_in < bp::null, io, ec);
  if (ec)
    return Error::missing_tool("cannot start: " + ec.message()).with_context(argv[0]).with_kind(ErrorKind::cannot_start);
  // Boost 1.74's wait_for() races with asio's SIGCHLD handling: a watchdog thread enforces
  // the timeout, and io.run() returns once the output pipes close.
  Captured c;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  // It also stops the program when archbuild is asked to stop (looked at every 100 ms, as the
  // ProcessRunner does), so a Ctrl-C reaches a long pip install too.
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(m);
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    while (!cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return done; })) {
      bool interrupted = interrupt_requested();
      if (!interrupted && std::chrono::steady_clock::now() < deadline) continue;
      (interrupted ? c.interrupted : c.timed_out) = true;
      std::error_code kill_ec;
      child.terminate(kill_ec);
      break;
    }
  });
  io.run();
  child.wait(ec);
  {
    std::lock_guard<std::mutex> lock(m);
    done = true;
  }
  cv.notify_all();
  watchdog.join();
  c.out = out_f.get();
  c.err = err_f.get();
  if (!c.timed_out && !c.interrupted) {
    int native = child.native_exit_code();
    c.status = WIFEXITED(native) ? WEXITSTATUS(native) : -1;
  }
  return c;
}

}  // namespace archbuild::run
