// The configure stage: the plan's configure steps (cmake, or the backend's own configure) from
// a clean build directory. Stamp: the compiler launchers it configured with (a later run with
// other launchers configures again: CMake reads them only when it first configures) and, where
// the plan has libraries, the configure log's feature summary checked against them.
#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "core/text.hpp"
#include "recipe/driver.hpp"
#include "stages/feature_summary.hpp"
#include "stages/stage.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The build tree and what the backend keeps in the source tree about it (the driver's
// half_configured.state_files: meson-python's native file, which makes it reconfigure a tree).
void remove_build_tree(Context& ctx) {
  std::error_code ec;
  fs::remove_all(ctx.src / ctx.plan->build_dir, ec);
  for (const auto& f : recipe::driver_spec(ctx.plan->resolution.recipe.driver).half_configured.state_files)
    fs::remove(ctx.src / f, ec);
}

}  // namespace

Result<Ok> configure_stage(Context& ctx, const run::StageInfo& info) {
  // A configure that failed half-way leaves a CMakeCache that setup.py would trust.
  if (ctx.started_at == recipe::Stage::configure) remove_build_tree(ctx);
  auto run = run_steps(ctx, info);
  if (!run) return run.error();
  json extra = {{"launchers", ctx.launchers()}};
  // Nothing to run (the backend configures in the build step).
  if (!run->has_steps) return skip_stage(ctx, info, extra);
  return finish_stage(ctx, info, *run, extra);
}

// A build tree whose configure did not finish (the driver's half_configured): CMake writes
// CMakeCache.txt even when the configure fails, the generator's file only when it succeeds.
// Removed, since a backend that finds the marker may skip configuring (setup.py does) and build
// a broken tree.
void remove_half_configured(Context& ctx) {
  std::error_code ec;
  const auto& half = recipe::driver_spec(ctx.plan->resolution.recipe.driver).half_configured;
  fs::path dir = ctx.src / ctx.plan->build_dir;
  if (half.marker.empty() || !fs::exists(dir / half.marker, ec)) return;
  for (const auto& generated : half.finished)
    if (fs::exists(dir / generated, ec)) return;
  ctx.reporter.message(run::Level::info,
                       fmt::format("{}: {} without {} (its configure did not finish): removing it "
                                   "so the build configures afresh",
                                   dir.string(), half.marker, half.finished.empty() ? "its generator's file" : half.finished.front()));
  remove_build_tree(ctx);
}

// The feature summary of the configure log against the plan's libraries: each the plan found
// must show on. Only the "-- " lines are kept (a build log is large).
Result<json> check_features_in(Context& ctx, const fs::path& log) {
  const auto& plan = ctx.plan;
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (l.starts_with("--")) lines.push_back(l);
  auto summary = parse_feature_summary(lines);
  if (!summary.found) {
    ctx.reporter.message(run::Level::warning,
                         fmt::format("no feature summary (\"-- USE_… : ON\") in {}: the libraries the plan found were "
                                     "not checked against what the build used", log.string()));
    return json{{"checked", false}, {"note", "no feature summary in the configure log"}};
  }
  auto findings = check_features(plan->libraries, summary);
  for (const auto& f : findings) {
    if (f.ok) continue;
    const auto& c = *std::find_if(plan->libraries.choices.begin(), plan->libraries.choices.end(),
                                  [&](const plan::LibraryChoice& x) { return x.name == f.library; });
    std::string shown = f.line.empty() ? fmt::format("no line \"{}\"", f.feature) : fmt::format("\"{}\"", text::trim(f.line));
    return Error::build_failed(fmt::format(
        "{} stage: {} was found for the plan ({} in {}) but the build switched it off: {}; fix what the build "
        "finds (its log says why), or build --without {}; full log: {}",
        recipe::to_string(plan->configure_stage), c.title, c.from && c.from->version ? *c.from->version : "version unknown",
        c.from ? c.from->lib_dir.string() : "?", shown, c.name, log.string()));
  }
  return json{{"checked", true}, {"findings", to_json(findings)}};
}

}  // namespace archbuild::stages
