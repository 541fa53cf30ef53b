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
#include "app/validation.hpp"
#include "cli/validate_common.hpp"
#include "core/heap.hpp"
#include "core/text.hpp"

namespace archbuild::cli {

namespace {

namespace fs = std::filesystem;

using ValidateArgs = app::ValidateRequest;

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

void run_validate(const ValidateArgs& a, Context& ctx) {
  use_huge_pages_for_heap();  // reads the wheel's binaries as inspect does (cli/inspect.cpp)
  auto v = app::validate_here(a, ctx);
  finish(v.report, v.targets, v.subject, ctx);
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
