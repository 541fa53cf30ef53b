#include "app/validation.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "app/inputs.hpp"
#include "arch/arch_data.hpp"
#include "core/data_dir.hpp"
#include "core/text.hpp"
#include "recipe/recipe.hpp"
#include "validate/installed.hpp"
#include "core/path_kind.hpp"
#include "doctor/releases.hpp"
#include "run/capture.hpp"
#include "run/interrupt.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::app {

namespace fs = std::filesystem;

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

validate::Gpus host_gpus(const arch::ArchData& data) {
  auto d = detect_host(data);
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

}  // namespace

fs::path smoke_source() { return shipped_file(fs::path("data") / "smoke" / "smoke.cu", "the smoke kernel source"); }

fs::path import_script() {
  return shipped_file(fs::path("data") / "validate" / "import_check.py", "the import test script");
}

Result<validate::SmokeSetup> smoke_setup(const std::vector<arch::Arch>& targets, const std::optional<Version>& cuda,
                                         bool cuda_is_preference, const Session& s) {
  auto env = toolchain::HostEnv::current();
  auto probe = s.probe ? s.probe : tool_probe();
  std::vector<std::string> notes;
  auto toolkits = toolchain::discover_toolkits(env, probe, &notes);
  auto compilers = toolchain::discover_compilers(env, probe, &notes);
  if (s.verbosity > 0)
    for (const auto& n : notes) note(s, "discovery: " + n);
  const auto& toolchains = s.facts().toolchains();
  auto choice = validate::choose_toolkit(toolkits, toolchains, compilers, cuda, cuda_is_preference, targets);
  if (!choice) return choice.error();
  for (const auto& n : choice->notes) note(s, "note: " + n);
  validate::SmokeSetup setup;
  setup.nvcc = choice->toolkit.nvcc;
  if (choice->compiler) setup.host_compiler = choice->compiler->path;
  setup.toolkit = fmt::format("CUDA {} at {}", choice->toolkit.version.str(), choice->toolkit.root.string());
  if (choice->compiler) setup.toolkit += fmt::format(" with {}", choice->compiler->name());
  setup.source = smoke_source();
  setup.release = choice->toolkit.release().str();
  for (const auto& f : toolchains) {
    if (f.cuda != choice->toolkit.release()) continue;
    validate::DriverNeed need{f.min_driver, f.min_driver_text, std::nullopt, "", f.file.filename().string()};
    const auto& releases = s.facts().releases();
    need.floor = releases.minor_compat_driver(f.cuda.major());
    if (need.floor) need.floor_text = releases.minor_compat.at(f.cuda.major());
    setup.driver = need;
  }
  return setup;
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

namespace {

validate::Check skipped(const char* name, std::string why, bool missing) {
  validate::Check c;
  c.name = name;
  c.status = validate::Status::skip;
  c.summary = std::move(why);
  c.missing_tool = missing;
  return c;
}

// The recipe's import name for this distribution, when a shipped recipe builds it.
std::optional<std::string> recipe_module(const std::string& distribution, const Facts& facts) {
  for (const auto& r : facts.recipes())
    if (!r.module.empty() && validate::normalize_name(r.package) == validate::normalize_name(distribution))
      return r.module;
  return std::nullopt;
}

Validated validate_installed_here(const ValidateRequest& a, const std::vector<arch::Arch>& targets, const Session& s) {
  validate::InstalledOptions o;
  o.libraries = &s.facts().wheel_libraries();
  o.host_dirs = s.facts().host_library_dirs();
  auto py = find_python(a.python, std::nullopt);
  if (!py) throw Failure(py.error());
  o.python = *py;
  if (!a.module.empty()) o.module = a.module;
  else o.module = recipe_module(a.installed, s.facts());
  if (!a.no_import) {
    o.script = import_script();
    o.gpus = host_gpus(s.facts().arch());
  }
  if (!a.cuda.empty()) o.cuda = cuda_release(a.cuda)->str();
  auto report = validate::validate_installed(a.installed, targets, o, capture_exec()).take();
  if (a.no_import) {
    validate::Check c = skipped("import", "not run (--no-import)", false);
    report.add(c);
  }
  return {std::move(report), targets, a.installed + " (installed)"};
}

}  // namespace

Validated validate_here(const ValidateRequest& a, const Session& s) {
  auto targets = sm_targets(a.sm, s.facts().arch()).take();
  tmpdir_rule().take();
  if (a.wheel.empty() == a.installed.empty())
    throw Failure(Error::bad_input("give either WHEEL or --installed DIST (not both)"));
  if (!a.installed.empty()) return validate_installed_here(a, targets, s);
  auto cuda = cuda_release(a.cuda);
  fs::path wheel = a.wheel;
  // Said by what the path is (a folder, a FIFO, a device), before anything is opened or run.
  paths::expect_regular_file(wheel, "validate: wheel").take();

  auto parsed = validate::parse_wheel_name(wheel.filename().string());
  std::optional<validate::WheelName> name;
  if (parsed) name = *parsed;

  validate::ValidateOptions opts;
  opts.libraries = &s.facts().wheel_libraries();
  opts.host_dirs = s.facts().host_library_dirs();
  if (!a.module.empty())
    opts.module = a.module;
  else if (name)
    opts.module = recipe_module(name->distribution, s.facts());

  bool need_gpus = !a.no_import || !a.no_smoke;
  validate::Gpus gpus;
  if (need_gpus) gpus = host_gpus(s.facts().arch());

  if (a.no_import) {
    opts.preset.push_back(skipped("import", "not run (--no-import)", false));
  } else if (auto py = find_python(a.python, name ? validate::wheel_python(*name) : std::nullopt); !py) {
    opts.preset.push_back(skipped("import", py.error().message, true));
  } else {
    validate::ImportSetup imp;
    imp.python = *py;
    imp.script = import_script();
    imp.gpus = gpus;
    opts.import_test = imp;
  }

  if (a.no_smoke) {
    opts.preset.push_back(skipped("smoke", "not run (--no-smoke)", false));
  } else {
    // The wheel's own CUDA (its +cuXYZ label) is preferred: the smoke kernel then tests the
    // toolkit the wheel was built with.
    bool preference = !cuda;
    if (!cuda && name) {
      auto label = validate::parse_label(name->local_label());
      if (label.cuda) cuda = Version::parse(*label.cuda);
    }
    auto setup = smoke_setup(targets, cuda, preference, s);
    if (!setup) {
      if (setup.error().exit != Exit::missing_tool) throw Failure(setup.error());
      opts.preset.push_back(skipped("smoke", "no nvcc for the smoke kernel: " + setup.error().message, true));
    } else {
      setup->gpus = gpus;
      opts.smoke = *setup;
    }
  }

  auto report = validate::validate_wheel(wheel, targets, opts, capture_exec()).take();  // unreadable: exit 2
  return {std::move(report), targets, wheel.filename().string()};
}


}  // namespace archbuild::app
