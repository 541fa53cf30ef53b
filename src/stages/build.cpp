// The build stage: the plan's build steps, with one retry at half the jobs when the kernel
// killed the build for memory, and the build report kept (the ninja log and graph, the
// launcher's per-compile measurements folded into the recipe's peaks). Stamp: the retry, if any.
#include <cstdlib>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "run/admission.hpp"
#include "stages/stage.hpp"
#include "store/atomic_file.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Killed by the kernel (signal 9 / exit 137, the status of a shell-less child killed the same
// way), or a compile of the step killed and reported by ninja/nvcc in the log.
bool killed_for_memory(const run::CommandResult& r, const fs::path& log) {
  if (r.interrupted || !r.started) return false;
  if (r.signal == 9 || r.exit_status == 137) return true;
  for (const auto& l : run::tail(log, 200))
    if (l.find("Killed signal terminated program") != std::string::npos ||
        l.find("died due to signal 9") != std::string::npos || l.find("killed by signal 9") != std::string::npos)
      return true;
  return false;
}

Error oom_advice(const Context& ctx, const run::CommandResult& r, unsigned jobs, const fs::path& log) {
  return Error::build_failed(fmt::format(
      "build stage killed {}({}) with {} job{}: out of memory; give fewer jobs (--jobs {} or MAX_JOBS), or let "
      "compiles wait for memory (cuda-launch --admission --memory-budget-mb); full log: {}",
      ctx.oom_retry ? "again after a retry with half the jobs " : "", r.describe(), jobs, jobs == 1 ? "" : "s",
      std::max(1u, jobs / 2), log.string()));
}

// The .ninja_log the build wrote: in the plan's build dir, else the newest in the tree (a
// backend's own build dir), at most three levels down.
std::optional<fs::path> find_ninja_log(const Context& ctx) {
  std::error_code ec;
  fs::path direct = ctx.src / ctx.plan->build_dir / ".ninja_log";
  if (fs::is_regular_file(direct, ec)) return direct;
  std::optional<fs::path> best;
  fs::file_time_type best_time{};
  for (auto it = fs::recursive_directory_iterator(ctx.src, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 3) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->path().filename() != ".ninja_log") continue;
    auto t = fs::last_write_time(it->path(), ec);
    if (!best || t > best_time) best = it->path(), best_time = t;
  }
  return best;
}

}  // namespace

Result<Ok> build_stage(Context& ctx, const run::StageInfo& info) {
  std::error_code ec;
  // This run's compiles only (a resumed build records what it compiles now).
  for (const auto& f : {ctx.layout.compiles_file(ctx.key), ctx.layout.ninja_log_copy(ctx.key), ctx.layout.ninja_graph(ctx.key)})
    fs::remove(f, ec);
  const fs::path log = ctx.layout.log(ctx.key, info.name);
  auto retry = [&](run::Command& cmd, const run::CommandResult& failed, double& seconds) -> Result<run::CommandResult> {
    if (!killed_for_memory(failed, log)) return failed;
    unsigned jobs = ctx.current_jobs();
    if (jobs <= 1) {
      ctx.reporter.stage_finished(info, {run::StageStatus::failed, seconds, failed.describe(), log});
      return oom_advice(ctx, failed, jobs, log);
    }
    // Once, with half the jobs: the OOM killer took a compile (nvcc/cicc need GiBs each).
    unsigned half = jobs / 2;
    ctx.reporter.message(run::Level::warning,
                         fmt::format("the build step was killed ({}), most likely out of memory with {} jobs: "
                                     "retrying once with {} jobs", failed.describe(), jobs, half));
    ctx.env["MAX_JOBS"] = ctx.env["CMAKE_BUILD_PARALLEL_LEVEL"] = std::to_string(half);
    ctx.oom_retry = json{{"killed", failed.describe()}, {"jobs", jobs}, {"retried_with_jobs", half}};
    cmd.env = ctx.env;
    cmd.append_log = true;
    auto r = run::run_reported(ctx.runner, cmd, ctx.reporter);
    seconds += r.elapsed.count();
    if (!r.ok() && killed_for_memory(r, log)) {
      (*ctx.oom_retry)["killed_again"] = r.describe();
      ctx.reporter.stage_finished(info, {run::StageStatus::failed, seconds, r.describe(), log});
      return oom_advice(ctx, r, half, log);
    }
    return r;
  };
  auto run = run_steps(ctx, info, retry, [&] { collect_build_report(ctx, false); });
  if (!run) return run.error();
  if (!run->has_steps) return skip_stage(ctx, info, json::object());
  json extra = json::object();
  if (ctx.oom_retry) extra["oom_retry"] = *ctx.oom_retry;
  collect_build_report(ctx, true);
  return finish_stage(ctx, info, *run, extra);
}

// Where the hours went: the ninja log and graph kept beside the logs, the launcher's
// measurements folded into the recipe's peaks, the summary in the key record (and so the
// manifest). Best effort: a build is never failed for its report.
void collect_build_report(Context& ctx, bool announce) {
  std::error_code ec;
  if (ctx.admitting) {
    const auto& recipe = ctx.plan->resolution.recipe;
    run::merge_peaks(ctx.layout.peaks_file(recipe.package, recipe.name), run::read_records(ctx.layout.compiles_file(ctx.key)));
  }
  if (auto log = find_ninja_log(ctx)) {
    // Best effort, as the whole report is; but never through a link or into a FIFO planted there.
    if (auto copied = store::copy_file_atomic(*log, ctx.layout.ninja_log_copy(ctx.key)); !copied)
      ctx.reporter.message(run::Level::warning, "the build report has no ninja log: " + copied.error().message);
    fs::path ninja = run::find_in_path("ninja", ctx.env.count("PATH") ? ctx.env["PATH"] : std::string());
    if (!ninja.empty()) {
      run::Command cmd;
      cmd.argv = {ninja.string(), "-C", log->parent_path().string(), "-t", "graph"};
      cmd.env = ctx.env;
      cmd.cwd = log->parent_path();
      cmd.log = ctx.layout.ninja_graph(ctx.key);
      cmd.session_record = ctx.layout.session_record(ctx.key);
      if (!ctx.runner.run(cmd, {}).ok()) fs::remove(ctx.layout.ninja_graph(ctx.key), ec);
    }
  }
  auto report = load_build_report(ctx.layout, ctx.key, ctx.current_jobs());
  if (!report) return;
  warn_unrecorded(ctx, ctx.record.update([&](json& d) { d["build_report"] = *report; }), "the build report");
  if (announce && ctx.admitting) ctx.reporter.message(run::Level::info, "memory admission: " + waits_line(*report));
}

Result<ReportInput> load_report_input(const store::Layout& layout, const std::string& key, unsigned jobs) {
  ReportInput in;
  in.jobs = std::max(1u, jobs);
  std::error_code ec;
  const fs::path log = layout.ninja_log_copy(key);
  if (fs::exists(log, ec)) {
    std::ifstream f(log);
    auto entries = parse_ninja_log(f, log.string());
    if (!entries) return entries.error();
    in.entries = std::move(*entries);
  }
  const fs::path graph = layout.ninja_graph(key);
  if (fs::exists(graph, ec)) {
    std::ifstream f(graph);
    in.graph = parse_ninja_graph(f);
  }
  in.compiles = run::read_records(layout.compiles_file(key));
  if (in.entries.empty() && in.compiles.empty())
    return Error::bad_input(fmt::format("no build of key {} left a ninja log or compile records in {}", key,
                                        layout.log_dir(key).string()));
  return in;
}

Result<json> load_build_report(const store::Layout& layout, const std::string& key, unsigned jobs) {
  auto in = load_report_input(layout, key, jobs);
  if (!in) return in.error();
  return build_report(*in);
}

}  // namespace archbuild::stages
