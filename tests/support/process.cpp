#include "support/process.hpp"

#include <future>
#include <stdexcept>

#include <boost/process.hpp>

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
  std::thread runner([&] { io.run(); });
  bool finished = child.wait_for(opts.timeout);
  if (!finished) child.terminate();
  runner.join();
  Ran r;
  r.status = finished ? child.exit_code() : -1;
  r.out = out_f.get();
  r.err = err_f.get();
  if (!finished) r.err += "\n[test harness: timed out]";
  return r;
}

Ran archbuild(const std::vector<std::string>& args, const RunOptions& opts) {
  return run(ARCHBUILD_EXE, args, opts);
}

std::string which(const std::string& tool) {
  auto p = bp::search_path(tool);
  return p.empty() ? std::string() : p.string();
}

}  // namespace archbuild::test
