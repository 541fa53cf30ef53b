// The stages of `archbuild wheel`, one file each. Every stage takes the run's Context (what it
// needs), records its stamp in the key's record when it finishes (what it records: a stage
// without a stamp runs again), and reports through the Context's reporter. How a run resumes is
// the pipeline's (stages/pipeline.cpp): at the first stage without a stamp, provided
// `fetched_tree_matches` says the tree is still the one the fetch stamp describes.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "stages/context.hpp"

namespace archbuild::stages {

// stages/environment.cpp — the steps' environment for this run: the plan's, the launchers
// (build path rewrite, memory admission) and the admission settings they read.
Result<Ok> prepare_environment(Context& ctx);
// After fetch: SOURCE_DATE_EPOCH from the commit's time.
void add_source_date_epoch(Context& ctx);

// stages/fetch.cpp — the source tree (git checkout or a copy of a local tree), the downloads the
// tree's build would make placed from archbuild's mirrors, and the tree's contract checked.
Result<Ok> fetch_stage(Context& ctx, const run::StageInfo& info);
// Whether the tree on disk is the one the fetch stamp describes (a resume trusts nothing else).
bool fetched_tree_matches(Context& ctx);

// stages/steps.cpp — running the plan's steps of one stage into its log, shared by configure,
// build and package. `retry` may run a failed step again (the build's out-of-memory retry);
// `before_failing` runs before a failed step's report. Where this stage configures, the log's
// feature summary is checked against the plan's libraries once the steps have run.
struct StepsRun {
  bool has_steps = false;
  double seconds = 0;
  std::filesystem::path log;
  nlohmann::json features;  // the feature check, where this stage configures
};
using StepRetry = std::function<Result<run::CommandResult>(run::Command&, const run::CommandResult& failed, double& seconds)>;
Result<StepsRun> run_steps(Context& ctx, const run::StageInfo& info, const StepRetry& retry = {},
                           const std::function<void()>& before_failing = {});
// A stage whose steps ran: its stamp (with `extra` and the feature check) and its report line.
Result<Ok> finish_stage(Context& ctx, const run::StageInfo& info, const StepsRun& run, nlohmann::json extra);
// A stage with no step (the backend configures in its build step): stamped, not faked.
Result<Ok> skip_stage(Context& ctx, const run::StageInfo& info, nlohmann::json extra);

// stages/configure.cpp — from a clean build tree when the run starts here (ctx.started_at).
Result<Ok> configure_stage(Context& ctx, const run::StageInfo& info);
// The configure log's feature summary against the plan's libraries (stages/feature_summary.hpp).
Result<nlohmann::json> check_features_in(Context& ctx, const std::filesystem::path& log);
// A build tree whose CMake configure did not finish is removed before the stage that configures.
void remove_half_configured(Context& ctx);

// stages/build.cpp — the build, with one retry at half the jobs when the kernel killed it for
// memory, and the build report (where the hours went) kept.
Result<Ok> build_stage(Context& ctx, const run::StageInfo& info);
void collect_build_report(Context& ctx, bool announce);

// stages/package.cpp — the wheel found, made portable (stages/portable), normalized
// (stages/reproducible) and put in the store; the key is not built until it is validated.
Result<Ok> package_stage(Context& ctx, const run::StageInfo& info);

// stages/validate.cpp — the packaged wheel validated; only then it becomes the key's wheel.
Result<Ok> validate_stage(Context& ctx, const run::StageInfo& info);
// Validation of a stored wheel under its own name (also for a key built with --no-validate before).
Result<nlohmann::json> validate_named(const std::function<Result<nlohmann::json>(const std::filesystem::path&)>& validate,
                                      const std::filesystem::path& stored, const std::string& filename,
                                      const std::filesystem::path& scratch, const nlohmann::json& portability);

// stages/pipeline.cpp — each stage's function, by a switch with no default (a stage without its
// function is -Wswitch's warning, never another stage's run).
using StageFunction = Result<Ok> (*)(Context& ctx, const run::StageInfo& info);
StageFunction stage_function(recipe::Stage stage);
// Where a run starts: the first stage without a stamp in the key's record (nullopt: all done). A
// stamp under a name that is no stage is a damaged record (exit 2), never a stage.
Result<std::optional<recipe::Stage>> resume_point(const store::KeyRecord& record);

// stages/manifest.cpp — the provenance (keys/<key>.json "manifest") and the copy in --out.
Result<Ok> publish(Context& ctx);
// The wheel is built and stored; what failed is the user's --out: exit 2, not a failed stage.
Error out_failure(Error e);

}  // namespace archbuild::stages
