// archbuild smoke --sm LIST [--cuda X.Y] [--require-gpu] [--keep DIR] — compiles the bundled
// smoke kernel with the resolved toolkit for exactly the targets (SASS only), inspects it, and
// runs it where a GPU of a target CC is present.
#include <fmt/format.h>

#include <memory>

#include "arch/arch_data.hpp"
#include "cli/context.hpp"
#include "app/inputs.hpp"
#include "cli/validate_common.hpp"
#include "core/text.hpp"

namespace archbuild::cli {

namespace {

struct SmokeArgs {
  std::vector<std::string> sm;
  std::string cuda;
  bool require_gpu = false;
  bool no_run = false;
  std::string keep;
};

void run_smoke(const SmokeArgs& a, Context& ctx) {
  auto targets = app::sm_targets(a.sm, ctx.facts().arch()).take();
  app::tmpdir_rule().take();
  auto cuda = app::cuda_release(a.cuda);
  auto setup = smoke_setup(targets, cuda, false, ctx).take();  // no toolkit: exit 3; none can: exit 2
  setup.require_gpu = a.require_gpu;
  setup.run = !a.no_run;
  if (!a.keep.empty()) setup.work_dir = std::filesystem::absolute(a.keep);
  if (setup.run) setup.gpus = host_gpus(ctx.facts().arch());

  auto report = validate::smoke(targets, setup, capture_exec());
  ctx.exit = report.exit();
  std::string error;  // why the exit status is not 0
  if (report.failed()) {
    std::vector<std::string> what;
    for (const auto& c : report.checks)
      if (c.status == validate::Status::fail) what.push_back(fmt::format("{}: {}", c.name, c.summary));
    error = "smoke test failed: " + text::join(what, "; ");
  } else if (report.incomplete()) {
    const auto* run = report.find("smoke-run");
    error = fmt::format("--require-gpu: {}", run ? run->summary : "the kernel did not run");
  }
  if (ctx.json) {
    auto doc = report.to_json();
    doc["toolkit"] = setup.toolkit;
    doc["targets"] = nlohmann::json::array();
    for (const auto& t : targets) doc["targets"].push_back(t.cc_name());
    // A check that could not run (no GPU with --require-gpu) is no success either.
    doc["valid"] = ctx.exit == Exit::ok;
    if (!error.empty()) doc["error"] = error;
    print_json(doc);
  } else {
    out(fmt::format("smoke kernel for {} with {}", validate::targets_text(targets), setup.toolkit));
    print_report(report, ctx);
  }
  if (!error.empty()) error_line(ctx, error);
}

}  // namespace

void add_smoke_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<SmokeArgs>();
  auto* cmd = app.add_subcommand(
      "smoke", "Build the bundled smoke kernel for exactly the targets (SASS only), inspect it, run it on a GPU");
  cmd->add_option("--sm", args->sm, "Target compute capabilities: 90, 9.0, sm_90, 90a, lists 80,90, native")
      ->required()
      ->type_name("LIST");
  cmd->add_option("--cuda", args->cuda, "CUDA release whose nvcc compiles it (default: the first installed one "
                                        "that compiles every target)")
      ->type_name("X.Y");
  cmd->add_flag("--require-gpu", args->require_gpu, "Exit 3 when no GPU of a target CC can run it");
  cmd->add_flag("--no-run", args->no_run, "Compile and inspect only");
  cmd->add_option("--keep", args->keep, "Write the smoke binary to this folder and keep it")->type_name("DIR");
  add_json_flag(*cmd, ctx);
  cmd->footer(
      "Exit status: 0 compiled with the right SASS and, where a GPU of a target CC is present, every kernel "
      "passed (otherwise \"run skipped: …\"); 1 a check failed; 2 bad options; 3 no nvcc, or no GPU with "
      "--require-gpu.");
  cmd->callback([args, &ctx] { run_smoke(*args, ctx); });
}

}  // namespace archbuild::cli
