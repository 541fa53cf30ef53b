#include "cli/validate_common.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "arch/arch_data.hpp"
#include "cli/host.hpp"
#include "core/data_dir.hpp"
#include "core/text.hpp"
#include "doctor/releases.hpp"
#include "run/capture.hpp"
#include "run/interrupt.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::cli {

namespace fs = std::filesystem;

std::vector<arch::Arch> sm_option(const std::vector<std::string>& sm) {
  auto targets = parse_targets(sm, arch::ArchData::shipped());
  if (!targets) {
    auto e = targets.error();
    if (e.exit == Exit::bad_input) e.message = "--sm: " + e.message;
    throw Failure(e);
  }
  return *targets;
}

std::optional<Version> cuda_option(const std::string& cuda) {
  if (cuda.empty()) return std::nullopt;
  auto v = Version::parse(cuda);
  if (!v || v->size() != 2)
    throw Failure(Error::bad_input(fmt::format("--cuda '{}': expected MAJOR.MINOR like 12.8", cuda)));
  return v;
}

validate::Exec capture_exec() {
  return [](const validate::Command& c) -> Result<validate::Outcome> {
    run::CaptureOptions o;
    o.env = c.env;
    o.cwd = c.cwd;
    o.timeout = c.timeout;
    // Asked to stop (Ctrl-C in `wheel`'s validate stage): nothing more is started, and what ran
    // is not judged (pip's KeyboardInterrupt is no finding); the stage reports the interrupt.
    if (run::interrupt_requested()) return Error::build_failed("interrupted");
    auto r = run::capture(c.argv, o);
    if (!r) return r.error();
    if (r->interrupted || run::interrupt_requested()) return Error::build_failed("interrupted");
    return validate::Outcome{r->timed_out ? -1 : r->status, r->timed_out, std::move(r->out), std::move(r->err)};
  };
}

validate::Gpus host_gpus() {
  auto d = detect_host(arch::ArchData::shipped());
  validate::Gpus g;
  g.driver_version = d.driver_version;
  std::vector<std::string> unusable;
  for (const auto& x : d.gpus) {
    if (x.cuda_select.empty()) {
      unusable.push_back(fmt::format("{} (GPU {}) has MIG enabled and no MIG device, so CUDA cannot use it", x.name,
                                     x.index));
      continue;
    }
    g.gpus.push_back({x.index, x.name, x.cc, x.cuda_select, x.pci_order});
  }
  if (g.gpus.empty()) {
    auto why = unusable.empty() ? d.tried : unusable;
    g.why_none = why.empty() ? "no detection source answered" : text::join(why, "; ");
  }
  return g;
}

namespace {

fs::path shipped_file(const fs::path& rel, const char* what) {
  fs::path p = data_root() / rel;
  std::error_code ec;
  if (!fs::is_regular_file(p, ec))
    throw Failure(Error::missing_tool(fmt::format(
        "{} is missing at {} (a broken installation? ARCHBUILD_DATA_DIR points elsewhere?)", what, p.string())));
  return p;
}

toolchain::Probe capture_probe() {
  return [](const std::vector<std::string>& argv) -> Result<toolchain::ProbeOutput> {
    run::CaptureOptions opts;
    opts.timeout = std::chrono::seconds(30);
    auto c = run::capture(argv, opts);
    if (!c) return c.error();
    return toolchain::ProbeOutput{c->timed_out ? -1 : c->status, c->out, c->err};
  };
}

}  // namespace

fs::path smoke_source() { return shipped_file(fs::path("data") / "smoke" / "smoke.cu", "the smoke kernel source"); }

fs::path import_script() {
  return shipped_file(fs::path("data") / "validate" / "import_check.py", "the import test script");
}

Result<validate::SmokeSetup> smoke_setup(const std::vector<arch::Arch>& targets, const std::optional<Version>& cuda,
                                         bool cuda_is_preference, const Context& ctx) {
  auto env = toolchain::HostEnv::current();
  auto probe = capture_probe();
  std::vector<std::string> notes;
  auto toolkits = toolchain::discover_toolkits(env, probe, &notes);
  auto compilers = toolchain::discover_compilers(env, probe, &notes);
  if (ctx.verbosity > 0)
    for (const auto& n : notes) note(ctx, "discovery: " + n);
  auto facts = toolchain::load_shipped();
  if (!facts) return facts.error();
  auto choice = validate::choose_toolkit(toolkits, *facts, compilers, cuda, cuda_is_preference, targets);
  if (!choice) return choice.error();
  for (const auto& n : choice->notes) note(ctx, "note: " + n);
  validate::SmokeSetup s;
  s.nvcc = choice->toolkit.nvcc;
  if (choice->compiler) s.host_compiler = choice->compiler->path;
  s.toolkit = fmt::format("CUDA {} at {}", choice->toolkit.version.str(), choice->toolkit.root.string());
  if (choice->compiler) s.toolkit += fmt::format(" with {}", choice->compiler->name());
  s.source = smoke_source();
  s.release = choice->toolkit.release().str();
  for (const auto& f : *facts) {
    if (f.cuda != choice->toolkit.release()) continue;
    validate::DriverNeed need{f.min_driver, f.min_driver_text, std::nullopt, "", f.file.filename().string()};
    if (auto releases = doctor::Releases::load_shipped()) {
      need.floor = releases->minor_compat_driver(f.cuda.major());
      if (need.floor) need.floor_text = releases->minor_compat.at(f.cuda.major());
    }
    s.driver = need;
  }
  return s;
}

Result<fs::path> find_python(const std::string& python, const std::optional<Version>& wheel_python) {
  if (!python.empty()) {
    std::string name = python;
    if (auto v = Version::parse(python); v && v->size() == 2) name = "python" + v->str();
    if (auto p = run::find_program(name)) return *p;
    return Error::missing_tool(fmt::format("--python {}: not found or not executable", python));
  }
  if (wheel_python) {
    if (auto p = run::find_program("python" + wheel_python->str())) return *p;
  }
  if (auto p = run::find_program("python3")) return *p;
  return Error::missing_tool(
      fmt::format("no {}python3 on PATH for the import test: install Python{} or give --python",
                  wheel_python ? "python" + wheel_python->str() + " or " : "",
                  wheel_python ? " " + wheel_python->str() : ""));
}

void print_report(const validate::Report& r, const Context& ctx) {
  std::size_t width = 0;
  for (const auto& c : r.checks) width = std::max(width, c.name.size());
  std::size_t counts[4] = {0, 0, 0, 0};
  for (const auto& c : r.checks) {
    ++counts[static_cast<int>(c.status)];
    out(fmt::format("  {:<4}  {:<{}}  {}", validate::to_string(c.status), c.name, width, c.summary));
    bool show = ctx.verbosity > 0 || c.status == validate::Status::fail || c.status == validate::Status::warn;
    if (show)
      for (const auto& d : c.details)
        if (d != c.summary) out(fmt::format("  {:<4}  {:<{}}    {}", "", "", width, d));
  }
  std::vector<std::string> tally;
  auto count = [&](validate::Status s, const char* word) {
    if (auto n = counts[static_cast<int>(s)]) tally.push_back(fmt::format("{} {}", n, word));
  };
  count(validate::Status::pass, "passed");
  count(validate::Status::warn, "warned");
  count(validate::Status::skip, "skipped");
  count(validate::Status::fail, "failed");
  out(fmt::format("{}: {}", r.failed() ? "NOT VALID" : r.incomplete() ? "incomplete" : "valid",
                  text::join(tally, ", ")));
}

void import_beside_torch(const plan::Plan& plan, validate::ImportSetup& imp) {
  if (plan->venv && !plan->venv->wheels.empty()) {
    for (const auto& w : plan->venv->wheels) imp.local_wheels.push_back(w.file);
    // The distribution's module: torch for torch, minitorch for minitorch.
    std::string module = plan->venv->wheels.front().name;
    std::replace(module.begin(), module.end(), '-', '_');
    imp.script_args.insert(imp.script_args.end(), {"--also", module});
  }
  const auto& rc = plan->resolution.recipe;
  if (!rc.cuda_op.empty()) imp.script_args.insert(imp.script_args.end(), {"--op-what", rc.cuda_op_what, "--op", rc.cuda_op});
}

}  // namespace archbuild::cli
