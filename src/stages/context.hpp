// What every stage of the pipeline works with: the plan, the store, the runner and reporter, the
// key's record, the source tree, and the environment the steps get (decided once per run by
// stages/environment.cpp, changed afterwards only by the build stage's out-of-memory retry).
// Each stage is one function in its own file (stages/stage.hpp); stages/pipeline.cpp sequences
// them, holds the key's lock and decides where a run resumes.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "recipe/stage.hpp"
#include "stages/pipeline.hpp"
#include "store/key_record.hpp"

namespace archbuild::stages {

struct Context {
  Context(const plan::Plan& p, const store::Layout& l, run::Runner& r, run::Reporter& rep, const PipelineOptions& o)
      : plan(p), layout(l), runner(r), reporter(rep), options(o), key(p->key), record(l, p->key),
        slot(p->build_start.slot),
        src(slot.empty() ? l.source_dir(p->key) : l.work_source(slot)),
        admission_dir(slot.empty() ? l.admission_dir(p->key) : l.work_admission(slot)),
        cmake_seed(slot.empty() ? l.cmake_seed(p->key) : l.work_cmake_seed(slot)) {
    if (o.record_writer) record.set_writer(o.record_writer);
  }

  const plan::Plan& plan;
  const store::Layout& layout;
  run::Runner& runner;
  run::Reporter& reporter;
  const PipelineOptions& options;
  std::string key;
  store::KeyRecord record;
  // A local tree's builds share their slot's place (store::Layout::work_dir), so a build tree
  // another key left there names the same paths as this build's; a checkout's are the key's own.
  std::string slot;
  std::filesystem::path src;  // the key's source tree (its build tree inside)
  std::filesystem::path admission_dir;  // the compiles' admission state (in their launcher's argv)
  std::filesystem::path cmake_seed;     // the CMake seed file (CMAKE_TOOLCHAIN_FILE)
  // The build start the fetch stage found (the plan's, or clean where the slot changed since).
  std::optional<plan::BuildStart> build_start;
  std::map<std::string, std::string> env;  // what every step gets
  bool admitting = false;  // every compile through archbuild's launcher, admitted by memory
  std::optional<nlohmann::json> oom_retry;  // the build stage's retry with half the jobs, if any
  recipe::Stage started_at = recipe::Stage::fetch;  // the first stage this run runs (where it resumed)
  PipelineResult result;

  // The compiler launchers of this run (and the CMake seed carrying them, if any), as the
  // configure stamp records them.
  nlohmann::json launchers() const;
  // The build's parallelism now: MAX_JOBS where set (an out-of-memory retry halves it), else the plan's.
  unsigned current_jobs() const;
  source::SourceOptions source_options() const;
  source::MirrorFor mirror_for() const;
};

// Seconds since it was made, for a stage's report line.
class Stopwatch {
 public:
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

 private:
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// A write of the key's record the run goes on without (a stamp cleared, a report or verdict
// kept): when it failed, a warning to the reporter and in the result's notes. A stamp it meant to
// clear is not trusted for that: the next run checks each stamp it would skip against what the
// stamp claims (stages/pipeline.cpp).
void warn_unrecorded(Context& ctx, const Result<Ok>& written, std::string_view what);

// A failed or interrupted step: the log's last lines to the reporter, one error (exit 4).
Error stage_error(const std::string& stage, const run::CommandResult& r, const std::filesystem::path& log,
                  run::Reporter& reporter);

}  // namespace archbuild::stages
