// Running the plan's steps of one stage (configure, build or package) into the stage's log, and
// the stamp that ends such a stage. What differs per stage is in its own file.
#include <algorithm>

#include <fmt/format.h>

#include "stages/stage.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string stage_note(const Context& ctx, const std::string& name) {
  auto stage = recipe::stage_named(name);
  auto note = stage ? ctx.plan->stage_notes.find(*stage) : ctx.plan->stage_notes.end();
  return note == ctx.plan->stage_notes.end() ? std::string() : note->second;
}

}  // namespace

Result<StepsRun> run_steps(Context& ctx, const run::StageInfo& info, const StepRetry& retry,
                           const std::function<void()>& before_failing) {
  const auto& plan = ctx.plan;
  const std::string& stage = info.name;
  const auto id = recipe::stage_read(stage, "the stage run");
  if (!id) return id.error();
  StepsRun out;
  out.log = ctx.layout.log(ctx.key, stage);
  std::error_code ec;
  fs::create_directories(out.log.parent_path(), ec);
  // Where the backend configures inside the build step, a finished configure is kept (the
  // build resumes incrementally) and an unfinished one is not reused.
  if (*id == plan->configure_stage && *id != recipe::Stage::configure) remove_half_configured(ctx);
  // The stage that writes the wheel starts from an empty wheel_dir; later stages keep it.
  if (plan->wheel_stage == *id && !plan->wheel_dir.empty()) fs::remove_all(ctx.src / plan->wheel_dir, ec);
  add_source_date_epoch(ctx);
  out.has_steps = std::any_of(plan->steps.begin(), plan->steps.end(), [&](const plan::Step& s) { return s.stage == *id; });
  if (!out.has_steps) return out;

  ctx.reporter.stage_started(info);
  bool append = false;
  for (const auto& step : plan->steps) {
    if (step.stage != *id) continue;
    run::Command cmd;
    cmd.argv = step.argv();
    cmd.env = ctx.env;
    cmd.cwd = ctx.src / step.cwd;
    cmd.log = out.log;
    cmd.session_record = ctx.layout.session_record(ctx.key);
    cmd.append_log = append;
    append = true;
    auto r = run::run_reported(ctx.runner, cmd, ctx.reporter);
    out.seconds += r.elapsed.count();
    if (!r.ok() && retry) {
      auto again = retry(cmd, r, out.seconds);
      if (!again) return again.error();
      r = *again;
    }
    if (!r.ok()) {
      if (before_failing) before_failing();
      ctx.reporter.stage_finished(info, {r.interrupted ? run::StageStatus::interrupted : run::StageStatus::failed,
                                         out.seconds, r.describe(), out.log});
      return stage_error(stage, r, out.log, ctx.reporter);
    }
  }
  if (*id == plan->configure_stage && !plan->libraries.empty()) {
    auto features = check_features_in(ctx, out.log);
    if (!features) {
      ctx.reporter.stage_finished(info, {run::StageStatus::failed, out.seconds, features.error().message, out.log});
      return features.error();
    }
    out.features = *features;
  }
  return out;
}

Result<Ok> finish_stage(Context& ctx, const run::StageInfo& info, const StepsRun& run, json extra) {
  const std::string& stage = info.name;
  if (!run.features.is_null()) extra["features"] = run.features;
  if (auto r = ctx.record.mark_done(stage, extra); !r) return r.error();
  ctx.reporter.stage_finished(info, {run::StageStatus::ok, run.seconds, run.has_steps ? "" : stage_note(ctx, stage), run.log});
  return Ok{};
}

Result<Ok> skip_stage(Context& ctx, const run::StageInfo& info, json extra) {
  if (auto r = ctx.record.mark_done(info.name, extra); !r) return r.error();
  std::string note = stage_note(ctx, info.name);
  ctx.reporter.stage_finished(info, {run::StageStatus::skipped, 0, note.empty() ? "no step" : note, {}});
  return Ok{};
}

}  // namespace archbuild::stages
