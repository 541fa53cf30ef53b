#include "app/torch.hpp"

#include <fmt/format.h>

#include "app/inputs.hpp"
#include "binary/inspect.hpp"
#include "core/path_kind.hpp"
#include "core/text.hpp"
#include "run/capture.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::app {

namespace fs = std::filesystem;

namespace {

// The one way an interpreter is asked: `exe -c SCRIPT ARGS…`, from "/" unless `here` (a
// relative interpreter path given by the user must stay valid).
Result<run::Captured> ask(const std::string& exe, const std::string& script, std::vector<std::string> args,
                          std::optional<std::chrono::seconds> timeout, bool here = false) {
  std::vector<std::string> argv = {exe, "-c", script};
  argv.insert(argv.end(), args.begin(), args.end());
  run::CaptureOptions o;
  if (!here) o.cwd = "/";
  if (timeout) o.timeout = *timeout;
  return run::capture(argv, o);
}

// The interpreter named (on PATH, or a path), absolute; Failure (exit 3) naming it.
std::string interpreter(const std::string& python, const std::string& prefix, const char* on_path) {
  auto exe = run::find_program(python);
  if (!exe)
    throw Failure(Error::missing_tool(fmt::format("{}{}: no such interpreter{}", prefix, python,
                                                  python.find('/') == std::string::npos ? on_path : "")));
  return fs::absolute(*exe).string();
}

}  // namespace

std::optional<doctor::TorchFacts> probe_torch(const std::string& python) {
  const std::string exe = interpreter(python, "", " on PATH (give --python PY)");
  // Importing torch initialises CUDA: seconds, sometimes more.
  auto ran = ask(exe, doctor::kTorchProbeScript, {}, std::chrono::seconds(180)).take();
  if (doctor::probe_found_no_torch(ran.out)) return std::nullopt;
  auto facts = doctor::parse_torch_probe(ran.out, ran.status, python);
  if (ran.timed_out) {
    // What was read before the import hung still counts; lib/ is read without it.
    if (!facts) throw Failure(Error::missing_tool(fmt::format("{}: the torch probe did not finish in 180 s", python)));
    if (!facts->arch_list) {
      facts->import_error = "`import torch` did not finish in 180 s";
      facts->arch_list_missing = "torch cannot be imported: " + *facts->import_error;
    }
  }
  if (!facts && ran.status != 0) {
    auto lines = text::split_any(text::trim(ran.err), "\n");
    throw Failure(Error::missing_tool(facts.error().message +
                                      (lines.empty() ? "" : ": " + text::trim(lines.back()))));
  }
  return std::move(facts).take();
}

void inspect_torch_lib(doctor::TorchFacts& t) {
  fs::path lib = t.dir / "lib";
  std::error_code ec;
  if (t.dir.empty() || !fs::is_directory(lib, ec)) {
    t.lib_error = fmt::format("{} has no lib/ folder", t.dir.string());
    return;
  }
  auto got = binary::inspect_path(lib);
  if (!got) {
    t.lib_error = got.error().message;
    return;
  }
  t.lib_inspected = true;
  t.lib_files = std::move(got->files);
}

std::optional<extenv::TorchSeen> torch_version_seen(const std::string& python) {
  const std::string exe = interpreter(python, "--python ", " on PATH");
  auto ran = ask(exe, doctor::kTorchProbeScript, {"--no-import"}, std::chrono::seconds(60)).take();
  return extenv::parse_torch_probe(ran.out, python).take();
}

fs::path torch_lib_dir(const std::string& python) {
  static constexpr const char* kScript =
      "import importlib.util as u; s = u.find_spec('torch'); "
      "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')";
  // A path that is there but is no file (a folder, a FIFO, a device, a loop of links) is bad
  // input (exit 2), said before anything runs; an interpreter that is missing or does not run
  // is a missing tool (exit 3).
  if (python.find('/') != std::string::npos) {
    auto kind = paths::classify(python).kind;
    if (kind != paths::Kind::missing && kind != paths::Kind::dangling_link)
      paths::expect_regular_file(python, "--python").take();
  }
  auto started = ask(python, kScript, {}, std::nullopt, true);
  if (!started) {  // cannot start it: exit 3, the path quoted (a newline in it stays on the line)
    // Its own words, without the program capture put in front (the error's context).
    std::string why = started.error().reason();
    throw Failure(Error{started.error().exit, fmt::format("--python {}: {}", text::quoted(python), why)});
  }
  auto ran = std::move(*started);
  if (ran.status != 0) {
    auto lines = text::split_any(text::trim(ran.err), "\n");
    throw Failure(Error::missing_tool(fmt::format("--python {}: could not look for torch (exit {}){}",
                                                  text::quoted(python), ran.status,
                                                  lines.empty() ? "" : ": " + text::trim(lines.back()))));
  }
  std::string dir = text::trim(ran.out);
  if (dir.empty())
    throw Failure(Error::missing_tool(
        fmt::format("no torch is installed for {} (install one, or give a wheel or a directory instead)", python)));
  fs::path lib = fs::path(dir) / "lib";
  if (!fs::is_directory(lib))
    throw Failure(Error::missing_tool(fmt::format("the torch of {} at {} has no lib/ folder", python, dir)));
  return lib;
}

void find_toolkit(doctor::Facts& f) {
  auto env = toolchain::HostEnv::current();
  std::optional<std::pair<fs::path, std::string>> root;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (auto v = env.get(var); v && !root) root = {fs::path(*v), var};
  if (!root)
    if (auto nvcc = env.find_program("nvcc")) root = {nvcc->parent_path().parent_path(), "nvcc on PATH"};
  std::error_code ec;
  if (!root && fs::is_directory("/usr/local/cuda", ec)) root = {fs::path("/usr/local/cuda"), "/usr/local/cuda"};
  if (!root) {
    f.toolkit_missing = "no CUDA toolkit (CUDA_HOME unset, no nvcc on PATH, no /usr/local/cuda): needed only to build "
                        "CUDA extensions";
    return;
  }
  toolchain::HostEnv only;
  only.vars["CUDA_HOME"] = root->first.string();
  only.roots.clear();
  std::vector<std::string> notes;
  auto found = toolchain::discover_toolkits(only, tool_probe(), &notes);
  if (found.empty()) {
    f.toolkit_missing = fmt::format("{} = {}: no working CUDA toolkit there{}", root->second, root->first.string(),
                                    notes.empty() ? "" : " (" + text::join(notes, "; ") + ")");
    return;
  }
  f.toolkit = found.front();
  f.toolkit->found_by = root->second;
}

}  // namespace archbuild::app
