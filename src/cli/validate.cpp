// archbuild validate WHEEL --sm LIST [--python PY] [--module NAME] [--cuda X.Y] [--no-import]
// [--no-smoke] — proves a wheel (any wheel, official ones included): coverage of each target,
// metadata and RECORD, the local label, the link closure and platform tag, an import test in a
// fresh venv (requirements first) and the smoke kernel.
// archbuild validate --installed DIST --python PY --sm LIST — the same checks that need no .whl
// on a distribution already installed in PY's site-packages.
#include <fmt/format.h>

#include <memory>

#include "arch/arch_data.hpp"
#include "cli/context.hpp"
#include "app/inputs.hpp"
#include "cli/validate_common.hpp"
#include "core/heap.hpp"
#include "core/path_kind.hpp"
#include "core/text.hpp"
#include "recipe/recipe.hpp"
#include "validate/installed.hpp"

namespace archbuild::cli {

namespace {

namespace fs = std::filesystem;

struct ValidateArgs {
  std::string wheel;
  std::string installed;
  std::vector<std::string> sm;
  std::string python;
  std::string module;
  std::string cuda;
  bool no_import = false;
  bool no_smoke = false;
};

validate::Check skipped(const char* name, std::string why, bool missing) {
  validate::Check c;
  c.name = name;
  c.status = validate::Status::skip;
  c.summary = std::move(why);
  c.missing_tool = missing;
  return c;
}

// The recipe's import name for this distribution, when a shipped recipe builds it.
std::optional<std::string> recipe_module(const std::string& distribution, const app::Facts& facts) {
  for (const auto& r : facts.recipes())
    if (!r.module.empty() && validate::normalize_name(r.package) == validate::normalize_name(distribution))
      return r.module;
  return std::nullopt;
}

void finish(const validate::Report& report, const std::vector<arch::Arch>& targets, const std::string& what,
            Context& ctx) {
  ctx.exit = report.exit();
  if (ctx.json) {
    auto doc = report.to_json();
    doc["targets"] = nlohmann::json::array();
    for (const auto& t : targets) doc["targets"].push_back(t.cc_name());
    print_json(doc);
  } else {
    out(fmt::format("validate {} for {}", what, validate::targets_text(targets)));
    print_report(report, ctx);
  }
  if (report.failed()) {
    std::vector<std::string> fails;
    for (const auto& c : report.checks)
      if (c.status == validate::Status::fail) fails.push_back(fmt::format("{}: {}", c.name, c.summary));
    error_line(ctx, "not valid: " + text::join(fails, "; "));
  } else if (report.incomplete()) {
    std::vector<std::string> missing;
    for (const auto& c : report.checks)
      if (c.missing_tool) missing.push_back(fmt::format("{}: {}", c.name, c.summary));
    error_line(ctx, "could not check everything: " + text::join(missing, "; "));
  }
}

void run_installed(const ValidateArgs& a, const std::vector<arch::Arch>& targets, Context& ctx) {
  validate::InstalledOptions o;
  o.libraries = ctx.facts().wheel_libraries();
  auto py = find_python(a.python, std::nullopt);
  if (!py) throw Failure(py.error());
  o.python = *py;
  if (!a.module.empty()) o.module = a.module;
  else o.module = recipe_module(a.installed, ctx.facts());
  if (!a.no_import) {
    o.script = import_script();
    o.gpus = host_gpus(ctx.facts().arch());
  }
  if (!a.cuda.empty()) o.cuda = app::cuda_release(a.cuda)->str();
  auto report = validate::validate_installed(a.installed, targets, o, capture_exec()).take();
  if (a.no_import) {
    validate::Check c = skipped("import", "not run (--no-import)", false);
    report.add(c);
  }
  finish(report, targets, a.installed + " (installed)", ctx);
}

void run_validate(const ValidateArgs& a, Context& ctx) {
  use_huge_pages_for_heap();  // reads the wheel's binaries as inspect does (cli/inspect.cpp)
  auto targets = app::sm_targets(a.sm, ctx.facts().arch()).take();
  app::tmpdir_rule().take();
  if (a.wheel.empty() == a.installed.empty())
    throw Failure(Error::bad_input("give either WHEEL or --installed DIST (not both)"));
  if (!a.installed.empty()) return run_installed(a, targets, ctx);
  auto cuda = app::cuda_release(a.cuda);
  fs::path wheel = a.wheel;
  // Said by what the path is (a folder, a FIFO, a device), before anything is opened or run.
  paths::expect_regular_file(wheel, "validate: wheel").take();

  auto parsed = validate::parse_wheel_name(wheel.filename().string());
  std::optional<validate::WheelName> name;
  if (parsed) name = *parsed;

  validate::ValidateOptions opts;
  opts.libraries = ctx.facts().wheel_libraries();
  if (!a.module.empty())
    opts.module = a.module;
  else if (name)
    opts.module = recipe_module(name->distribution, ctx.facts());

  bool need_gpus = !a.no_import || !a.no_smoke;
  validate::Gpus gpus;
  if (need_gpus) gpus = host_gpus(ctx.facts().arch());

  if (a.no_import) {
    opts.preset.push_back(skipped("import", "not run (--no-import)", false));
  } else if (auto py = find_python(a.python, name ? validate::wheel_python(*name) : std::nullopt); !py) {
    opts.preset.push_back(skipped("import", py.error().message, true));
  } else {
    validate::ImportSetup s;
    s.python = *py;
    s.script = import_script();
    s.gpus = gpus;
    opts.import_test = s;
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
    auto setup = smoke_setup(targets, cuda, preference, ctx);
    if (!setup) {
      if (setup.error().exit != Exit::missing_tool) throw Failure(setup.error());
      opts.preset.push_back(skipped("smoke", "no nvcc for the smoke kernel: " + setup.error().message, true));
    } else {
      setup->gpus = gpus;
      opts.smoke = *setup;
    }
  }

  auto report = validate::validate_wheel(wheel, targets, opts, capture_exec()).take();  // unreadable: exit 2
  finish(report, targets, wheel.filename().string(), ctx);
}

}  // namespace

void add_validate_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand(
      "validate", "Prove a wheel: coverage of each target, metadata and RECORD, an import test, the smoke kernel");
  cmd->add_option("WHEEL", args->wheel, "The wheel (.whl) to check");
  cmd->add_option("--installed", args->installed,
                  "Check a distribution installed in --python's site-packages instead of a wheel file (e.g. torch)")
      ->type_name("DIST");
  // One value per --sm (a comma list, repeatable): `--sm 90 x.whl` leaves x.whl the WHEEL.
  cmd->add_option("--sm", args->sm, "Target compute capabilities: 90, 9.0, sm_90, 90a, lists 80,90, native")
      ->required()
      ->allow_extra_args(false)
      ->type_name("LIST");
  cmd->add_option("--python", args->python,
                  "Interpreter for the import test: a path, a name, or X.Y (default: pythonX.Y for the wheel's tag, "
                  "else python3)")
      ->type_name("PY");
  cmd->add_option("--module", args->module, "Module the import test imports (default: the recipe's, else top_level.txt)");
  cmd->add_option("--cuda", args->cuda, "CUDA release whose nvcc builds the smoke kernel (default: the wheel's)")
      ->type_name("X.Y");
  cmd->add_flag("--no-import", args->no_import, "Skip the import test (reported as skipped)");
  cmd->add_flag("--no-smoke", args->no_smoke, "Skip the smoke kernel (reported as skipped)");
  add_json_flag(*cmd, ctx);
  cmd->footer(
      "Exit status: 0 valid; 1 a check failed (each failure named); 2 unreadable input or bad options; "
      "3 incomplete: a needed tool is missing (python with venv, nvcc), or the wheel's requirements cannot be had "
      "(no index or wheelhouse: the import test is skipped, never passed). pip's own configuration (PIP_INDEX_URL, "
      "PIP_FIND_LINKS, PIP_NO_INDEX, pip.conf) reaches the import test. Without a GPU the GPU parts are reported as "
      "skipped.");
  cmd->callback([args, &ctx] { run_validate(*args, ctx); });
}

}  // namespace archbuild::cli
