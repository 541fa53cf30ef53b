// The stages of `archbuild wheel`, run from a Plan (nothing here decides what to build):
// fetch (source/, libgit2) → configure → build → package (the plan's steps through a Runner)
// → validate → the wheel stored content-addressed and copied to --out. A finished key is a copy; a failed
// run resumes at the failed stage (store/ stamps); one process per key at a time (store/ lock).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/contract.hpp"
#include "core/error.hpp"
#include "plan/plan.hpp"
#include "run/reporter.hpp"
#include "run/runner.hpp"
#include "source/patch.hpp"
#include "source/source.hpp"
#include "stages/build_report.hpp"
#include "store/key_record.hpp"
#include "store/layout.hpp"
#include "store/wheels.hpp"
#include "validate/closure.hpp"

namespace archbuild::stages {

// The stages, in order (the names of their logs and stamps).
const std::vector<std::string>& stage_names();

// A compiler launcher in front of every C, C++ and CUDA compile.
struct CompilerCache {
  std::string kind = "ccache";  // "ccache", "sccache" or "none"
  std::filesystem::path program;  // resolved path of the launcher (empty: not found → not used)
  std::filesystem::path dir;      // CCACHE_DIR / SCCACHE_DIR
  // Shared storage all build hosts use (ccache remote_storage, e.g. redis://cache.internal:6379;
  // sccache: SCCACHE_REDIS_ENDPOINT). Empty: local only.
  std::string remote;
  // The caller's own settings for the cache and what it hands compiles to (CCACHE_PREFIX=distcc,
  // SCCACHE_SERVER_PORT, DISTCC_HOSTS, …: names starting with compiler_cache_env_prefixes),
  // passed to the build; archbuild's own settings above win where they overlap.
  std::map<std::string, std::string> settings;
};

inline const std::vector<std::string> compiler_cache_env_prefixes = {"CCACHE_", "SCCACHE_", "DISTCC_", "ICECC_"};

struct CacheCounts {
  long hits = 0;
  long misses = 0;
  long remote_hits = 0;    // hits served by the shared storage (another host compiled it)
  long remote_misses = 0;
};

struct PipelineOptions {
  std::filesystem::path out_dir;      // where the finished wheel is copied
  bool offline = false;               // mirrors only
  CompilerCache compiler_cache;
  source::RetryPolicy retry;
  // The caller's environment for the plan's pass-through names (HOME, LANG, …).
  std::function<std::optional<std::string>(const std::string&)> getenv;
  // Every name in the caller's environment, for the allowlist's prefixes (CUDNN_*); unset: none.
  std::function<std::vector<std::string>()> env_names;
  std::string archbuild_version;
  // archbuild's own executable: the CUDA compiler launcher that keeps the build path out of CUDA
  // objects (stages/build_path.hpp). Empty: no launcher (CUDA objects name the cache path).
  std::filesystem::path archbuild_exe;
  // The validate stage: checks the packaged wheel (coverage, metadata, smoke …) and returns its
  // report for the manifest, or an error (exit 1) that keeps the wheel out of --out and out of
  // the key. Unset (--no-validate): the stage records "skipped".
  std::function<Result<nlohmann::json>(const std::filesystem::path& wheel)> validate;
  // The package stage's repair (stages/portable): patchelf (empty: not found; an error only
  // when a RUNPATH must change) and where libraries come from (the session's
  // data/validate/libraries.toml; required by the package stage: none is an internal error).
  std::filesystem::path patchelf;
  const validate::LibraryFacts* libraries = nullptr;
  // The host check made before the run (plan/host_check.hpp), for the manifest.
  nlohmann::json host_check = nullptr;
  // How the key's record is written (unset: atomically, store/atomic_file); tests make it fail.
  store::KeyRecord::Writer record_writer;
};

struct PipelineResult {
  bool reused = false;                 // the key was built before: nothing ran
  std::filesystem::path out_wheel;     // the copy in out_dir
  store::StoredWheel stored;
  std::string filename;
  std::vector<std::string> ran;        // stages run now
  std::vector<std::string> resumed_past;  // stages an earlier run had finished
  std::optional<CacheCounts> compiler_cache;  // hits/misses of this run's compiles
  std::vector<std::string> notes;      // e.g. a corrupted cached wheel was discarded
  nlohmann::json manifest;             // keys/<key>.json after the run
};

// Runs the pipeline for `plan`. Errors: exit 4 for a failed stage (the reporter got the log's
// last lines and its path), exit 2/3 for what the stages cannot work with.
Result<PipelineResult> run_pipeline(const plan::Plan& plan, const store::Layout& layout, run::Runner& runner,
                                    run::Reporter& reporter, const PipelineOptions& options);

// A finished or failed build's report from the files the pipeline kept for `key` (store/
// layout: ninja_log, ninja.dot, compiles.tsv); `jobs` is the build's full parallelism. Error
// (exit 2): nothing was kept, or the ninja log is malformed.
Result<ReportInput> load_report_input(const store::Layout& layout, const std::string& key, unsigned jobs);
Result<nlohmann::json> load_build_report(const store::Layout& layout, const std::string& key, unsigned jobs);

// The environment every step of the plan gets: the plan's, the pass-through names from the
// caller, and the compiler launcher (not part of the key: it does not change the output).
std::map<std::string, std::string> step_environment(const plan::Plan& plan, const PipelineOptions& options);

// What the plan expects of the tree's contract: the recipe's driver and release, the cmake it runs.
contract::Expectation contract_expectation(const plan::Plan& plan);

// The plan's patches as source/ applies them, each read now and checked against its sha256 (a
// file changed since it was planned is refused, exit 2). prepare's check and the fetch stage read
// them alike.
Result<std::vector<source::Patch>> patches_to_apply(const std::vector<plan::PatchPlan>& patches);

}  // namespace archbuild::stages
