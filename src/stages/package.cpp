// The package stage: the plan's package steps (if any; a backend may write the wheel in its
// build step), then the one wheel found, made portable (stages/portable: Requires-Dist, $ORIGIN
// RUNPATH, a true platform tag), normalized (stages/reproducible: a deterministic zip) and put
// in the content-addressed store. Stamp: the stored wheel's sha256, its name and its
// portability report. The key counts as built only once the validate stage accepts the wheel.
#include <cstdlib>

#include <fmt/format.h>

#include "stages/portable.hpp"
#include "stages/reproducible.hpp"
#include "stages/stage.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The single wheel `stage` left in dir.
Result<fs::path> find_wheel(const fs::path& dir, std::optional<recipe::Stage> wheel_stage) {
  const std::string stage(recipe::to_string(wheel_stage.value_or(recipe::Stage::package)));
  std::vector<fs::path> wheels;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".whl") wheels.push_back(e.path());
  if (wheels.size() == 1) return wheels.front();
  if (wheels.empty())
    return Error::build_failed(fmt::format("the {} stage made no wheel in {}", stage, dir.string()));
  return Error::build_failed(fmt::format("the {} stage left {} wheels in {}; expected one", stage,
                                         wheels.size(), dir.string()));
}

// The recipe's [wheel] layout, the toolkit's CUDA for the package versions.
Result<PortableResult> make_wheel_portable(const Context& ctx, const fs::path& wheel, const fs::path& log) {
  const auto& plan = ctx.plan;
  if (!ctx.options.libraries)
    return Error{Exit::internal, "stages::PipelineOptions without library facts (libraries)"};
  const auto& res = plan->resolution;
  PortableOptions o;
  o.layout = res.recipe.wheel_layout;
  o.triton = res.recipe.wheel_triton;
  // A dependent pins the exact torch wheel it was compiled against (the build venv's).
  if (plan->venv)
    for (const auto& w : plan->venv->wheels) o.pins.push_back(w.name + "==" + w.version);
  if (res.toolkit) o.cuda = res.toolkit->version;
  if (plan->venv) o.built_against = plan->venv->packages;
  o.patchelf = ctx.options.patchelf;
  o.scratch = ctx.layout.log_dir(ctx.key) / "portable";
  o.log = log;
  return make_portable(wheel, *ctx.options.libraries, o, ctx.runner);
}

}  // namespace

Result<Ok> package_stage(Context& ctx, const run::StageInfo& info) {
  const auto& plan = ctx.plan;
  auto run = run_steps(ctx, info, {}, [&] { collect_build_report(ctx, false); });
  if (!run) return run.error();
  collect_build_report(ctx, false);
  auto fail = [&](const Error& e) {
    ctx.reporter.stage_finished(info, {run::StageStatus::failed, run->seconds, e.message, run->log});
    return e;
  };
  auto built = find_wheel(ctx.src / plan->wheel_dir, plan->wheel_stage);
  if (!built) {
    // The wheel came from an earlier stage and is gone: that stage must run again.
    if (plan->wheel_stage && recipe::to_string(*plan->wheel_stage) != info.name) {
      const std::string earlier(recipe::to_string(*plan->wheel_stage));
      warn_unrecorded(ctx, ctx.record.clear_stage(earlier), "that the " + earlier + " stage must run again");
      built = Error::build_failed(built.error().message + "; run again to rerun the " + earlier + " stage");
    }
    return fail(built.error());
  }
  auto portable = make_wheel_portable(ctx, *built, run->log);
  if (!portable) return fail(portable.error());
  built = portable->wheel;
  // Deterministic zip: sorted members, SOURCE_DATE_EPOCH times, fixed modes, fresh RECORD.
  std::int64_t epoch = 0;
  if (auto it = ctx.env.find("SOURCE_DATE_EPOCH"); it != ctx.env.end()) epoch = std::atoll(it->second.c_str());
  if (auto n = normalize_wheel(*built, *built, epoch); !n) return fail(n.error());
  auto stored = store::put_wheel(ctx.layout, *built);
  if (!stored) return stored.error();
  return finish_stage(ctx, info, *run,
                      {{"wheel_sha256", stored->sha256}, {"filename", built->filename().string()},
                       {"portability", portable->portability}});
}

}  // namespace archbuild::stages
