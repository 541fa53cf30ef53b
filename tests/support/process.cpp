#include "support/process.hpp"

#include <algorithm>
#include <fstream>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <stdexcept>

#include <boost/process.hpp>

#include <sys/utsname.h>

namespace bp = boost::process;

namespace archbuild::test {

Ran run(const std::string& program, const std::vector<std::string>& args, const RunOptions& opts) {
  bp::environment env = boost::this_process::environment();
  for (const auto& name : opts.unset_env) env.erase(name);
  for (const auto& [k, v] : opts.env) env[k] = v;
  bp::ipstream out_stream, err_stream;
  bp::opstream in_stream;
  std::future<std::string> out_text, err_text;
  boost::asio::io_context io;
  std::future<std::string> out_f, err_f;
  bp::child child(bp::exe = program, bp::args = args, bp::env = env,
                  bp::start_dir = opts.cwd ? opts.cwd->string() : std::filesystem::current_path().string(),
                  bp::std_out > out_f, bp::std_err > err_f, bp::std_in < in_stream, io);
  in_stream << opts.stdin_text;
  in_stream.flush();
  in_stream.pipe().close();
  // Boost 1.74's wait_for() races with asio's SIGCHLD handling; a watchdog thread enforces
  // the timeout instead, and io.run() returns when the output pipes close.
  std::mutex m;
  std::condition_variable cv;
  bool done = false, timed_out = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_for(lock, opts.timeout, [&] { return done; })) {
      timed_out = true;
      std::error_code ec;
      child.terminate(ec);
    }
  });
  io.run();
  std::error_code ec;
  child.wait(ec);
  {
    std::lock_guard<std::mutex> lock(m);
    done = true;
  }
  cv.notify_all();
  watchdog.join();
  Ran r;
  r.status = timed_out ? -1 : child.exit_code();
  r.out = out_f.get();
  r.err = err_f.get();
  if (timed_out) r.err += "\n[test harness: timed out]";
  return r;
}

Ran archbuild(const std::vector<std::string>& args, const RunOptions& opts) {
  // Tests never reach a package index: the build venv's pip looks at wheelhouses only (and
  // fails at once where pip would retry an unreachable index), unless a test says otherwise.
  RunOptions o = opts;
  bool said = o.env.count("PIP_NO_INDEX") ||
              std::find(o.unset_env.begin(), o.unset_env.end(), "PIP_NO_INDEX") != o.unset_env.end();
  if (!said) o.env["PIP_NO_INDEX"] = "1";
  return run(ARCHBUILD_EXE, args, o);
}

std::string which(const std::string& tool) {
  auto p = bp::search_path(tool);
  return p.empty() ? std::string() : p.string();
}

Ran pip_wheel(const std::string& python, const std::filesystem::path& project, const std::filesystem::path& wheelhouse) {
  RunOptions o;
  o.env["PIP_NO_INDEX"] = "1";
  o.timeout = std::chrono::seconds(300);
  return run(python, {"-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", wheelhouse.string(), project.string()}, o);
}

namespace {
// ELF e_machine values (the ELF gABI): the ones these tests are built for, named.
std::string machine_name(unsigned m) {
  if (m == 62) return "x86_64";
  if (m == 183) return "aarch64";
  return "ELF machine " + std::to_string(m);
}
#if defined(__x86_64__)
constexpr unsigned kOwnMachine = 62;
#elif defined(__aarch64__)
constexpr unsigned kOwnMachine = 183;
#else
constexpr unsigned kOwnMachine = 0;  // unknown: no program is called foreign
#endif
}  // namespace

std::string unusable(const std::string& program) {
  std::error_code ec;
  if (!std::filesystem::exists(program, ec)) return "no " + program;
  std::ifstream in(program, std::ios::binary);
  unsigned char h[20] = {};
  // Not an ELF file (a script), or little-endian ELF only: both machines named here are.
  if (!in.read(reinterpret_cast<char*>(h), sizeof h) || h[0] != 0x7f || h[1] != 'E' || h[2] != 'L' || h[3] != 'F' ||
      h[5] != 1 || kOwnMachine == 0)
    return "";
  unsigned machine = h[18] | (h[19] << 8);
  if (machine == kOwnMachine) return "";
  return program + " is an " + machine_name(machine) + " program and these tests are " + machine_name(kOwnMachine) +
         " (an " + machine_name(kOwnMachine) + " host has its own)";
}

std::string machine() {
  struct utsname u {};
  return uname(&u) == 0 ? u.machine : "";
}

}  // namespace archbuild::test

#include <csignal>
#include <sys/wait.h>

#include "support/tempdir.hpp"

namespace archbuild::test {

struct Background::Impl {
  TempDir dir;
  bp::child child;
  bool waited = false;
  Ran result;
};

Background::Background(const std::string& program, const std::vector<std::string>& args, const RunOptions& opts)
    : impl_(new Impl) {
  bp::environment env = boost::this_process::environment();
  for (const auto& name : opts.unset_env) env.erase(name);
  for (const auto& [k, v] : opts.env) env[k] = v;
  // As archbuild(): no package index for the build venv's pip unless the test says so.
  if (program == ARCHBUILD_EXE && !opts.env.count("PIP_NO_INDEX") &&
      std::find(opts.unset_env.begin(), opts.unset_env.end(), "PIP_NO_INDEX") == opts.unset_env.end())
    env["PIP_NO_INDEX"] = "1";
  impl_->child = bp::child(bp::exe = program, bp::args = args, bp::env = env,
                           bp::start_dir = opts.cwd ? opts.cwd->string() : std::filesystem::current_path().string(),
                           bp::std_out > (impl_->dir / "out").string(), bp::std_err > (impl_->dir / "err").string(),
                           bp::std_in < bp::null);
}

Background::~Background() {
  if (!impl_->waited && impl_->child.running()) {
    ::kill(impl_->child.id(), SIGKILL);
    std::error_code ec;
    impl_->child.wait(ec);
  }
  delete impl_;
}

int Background::pid() const { return impl_->child.id(); }
bool Background::running() { return !impl_->waited && impl_->child.running(); }
void Background::kill(int sig) { ::kill(impl_->child.id(), sig); }

std::string Background::err_so_far() const { return read_file(impl_->dir / "err"); }

Ran Background::wait() {
  if (!impl_->waited) {
    std::error_code ec;
    impl_->child.wait(ec);
    int native = impl_->child.native_exit_code();
    impl_->result.status = WIFEXITED(native) ? WEXITSTATUS(native) : -WTERMSIG(native);
    impl_->result.out = read_file(impl_->dir / "out");
    impl_->result.err = read_file(impl_->dir / "err");
    impl_->waited = true;
  }
  return impl_->result;
}

}  // namespace archbuild::test
