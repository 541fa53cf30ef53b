#include "stages/pipeline.hpp"

#include <cstdlib>

#include <algorithm>
#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "core/sha256.hpp"
#include "run/interrupt.hpp"
#include "source/local.hpp"
#include "core/text.hpp"
#include "stages/build_path.hpp"
#include "stages/portable.hpp"
#include "stages/feature_summary.hpp"
#include "stages/build_report.hpp"
#include "run/admission.hpp"
#include "stages/reproducible.hpp"
#include "store/atomic_file.hpp"
#include "store/key_record.hpp"
#include "run/session.hpp"
#include "store/lock.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string>& stage_names() {
  static const std::vector<std::string> names = {"fetch", "configure", "build", "package", "validate"};
  return names;
}

std::map<std::string, std::string> step_environment(const plan::Plan& plan, const PipelineOptions& options) {
  std::map<std::string, std::string> env = plan.environment();
  if (options.getenv) {
    // The plan's own values win: the allowlist reaches only what the plan leaves open.
    auto pass = [&](const std::string& name) {
      if (env.count(name)) return;
      if (auto v = options.getenv(name)) env[name] = *v;
    };
    for (const auto& name : plan->passthrough)
      if (name.empty() || name.back() != '*') pass(name);
    if (options.env_names)
      for (const auto& name : options.env_names())
        if (plan::env_allowed(plan->passthrough, name)) pass(name);
  }
  const CompilerCache& cc = options.compiler_cache;
  if (cc.kind != "none" && !cc.program.empty()) {
    for (const auto& [name, value] : cc.settings) env[name] = value;
    for (const char* lang : {"C", "CXX", "CUDA"})
      env[fmt::format("CMAKE_{}_COMPILER_LAUNCHER", lang)] = cc.program.string();
    if (cc.kind == "ccache") {
      env["CCACHE_DIR"] = cc.dir.string();
      // Hits across source trees: each build key has its own checkout path.
      env["CCACHE_BASEDIR"] = "/";
      env["CCACHE_NOHASHDIR"] = "1";
      env["CCACHE_COMPILERCHECK"] = "content";
      // The CUDA launcher's prefix map names this host's build tree; it maps every tree to the
      // same name, so it cannot change the object and must not split the cache between hosts.
      env["CCACHE_IGNOREOPTIONS"] = "-Xcompiler=-ffile-prefix-map=*";
      if (!cc.remote.empty()) env["CCACHE_REMOTE_STORAGE"] = cc.remote;
    } else if (cc.kind == "sccache") {
      env["SCCACHE_DIR"] = cc.dir.string();
      if (!cc.remote.empty()) env["SCCACHE_REDIS_ENDPOINT"] = cc.remote;
    }
  }
  return env;
}

contract::Expectation contract_expectation(const plan::Plan& plan) {
  const auto& res = plan->resolution;
  contract::Expectation e;
  e.driver = res.recipe.driver;
  e.recipe_file = res.recipe.file.string();
  // The release the plan builds: the recipe's, or for --ref / a local tree the one the plan took
  // from the tree's version.txt (the version label says which).
  e.version = res.recipe.version;
  if (auto v = contract::release_part(plan->version.substr(0, plan->version.find('+')))) e.version = *v;
  if (auto v = res.tool_versions.find("cmake"); v != res.tool_versions.end()) e.cmake = v->second;
  if (auto p = res.tools.find("cmake"); p != res.tools.end()) e.cmake_path = p->second.string();
  // The build venv's cmake, where the plan chose it over the host's.
  if (plan->venv && !plan->venv->cmake.empty()) {
    e.cmake_path = plan->venv->cmake.string();
    e.cmake = plan->venv->cmake_version ? Version::parse(*plan->venv->cmake_version) : std::nullopt;
  }
  return e;
}

namespace {

// Counts from `ccache --print-stats` (tab-separated "name\tvalue" lines).
std::optional<CacheCounts> read_ccache_counts(run::Runner& runner, const CompilerCache& cc,
                                              const std::map<std::string, std::string>& env) {
  if (cc.kind != "ccache" || cc.program.empty()) return std::nullopt;
  run::Command cmd;
  cmd.argv = {cc.program.string(), "--print-stats"};
  cmd.env = env;
  CacheCounts counts;
  bool any = false;
  auto result = runner.run(cmd, [&](std::string_view line) {
    auto tab = line.find('\t');
    if (tab == std::string_view::npos) return;
    std::string name(line.substr(0, tab));
    long value = std::atol(std::string(line.substr(tab + 1)).c_str());
    if (name == "direct_cache_hit" || name == "preprocessed_cache_hit") counts.hits += value, any = true;
    if (name == "cache_miss") counts.misses += value, any = true;
    if (name == "remote_storage_hit") counts.remote_hits += value;
    if (name == "remote_storage_miss") counts.remote_misses += value;
  });
  if (!result.ok() || !any) return std::nullopt;
  return counts;
}

Error stage_error(const std::string& stage, const run::CommandResult& r, const fs::path& log, run::Reporter& reporter) {
  if (r.interrupted)
    return Error::build_failed(fmt::format("{} stage interrupted ({}); run the same command again to resume at {}",
                                           stage, r.describe(), stage));
  auto lines = run::tail(log, 30);
  if (!lines.empty()) {
    reporter.message(run::Level::error, fmt::format("last {} lines of {}:", lines.size(), log.string()));
    for (const auto& l : lines) reporter.message(run::Level::error, "  " + l);
  }
  return Error::build_failed(fmt::format("{} stage failed: {}; full log: {}", stage, r.describe(), log.string()));
}

// The single wheel `stage` left in dir.
Result<fs::path> find_wheel(const fs::path& dir, const std::string& stage) {
  std::vector<fs::path> wheels;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".whl") wheels.push_back(e.path());
  if (wheels.size() == 1) return wheels.front();
  if (wheels.empty())
    return Error::build_failed(fmt::format("the {} stage made no wheel in {}", stage.empty() ? "package" : stage, dir.string()));
  return Error::build_failed(fmt::format("the {} stage left {} wheels in {}; expected one", stage.empty() ? "package" : stage,
                                         wheels.size(), dir.string()));
}

// Validation needs the wheel under its own name (PEP 427: the name carries the version and
// tags; pip refuses anything else), not the store's <sha256>.whl: a copy in the key's log area.
// The package stage's `portability` goes beside it as <wheel>.manifest.json, where validate
// looks for it (a host-bound wheel is a named finding there, not an unexplained failure).
Result<json> validate_named(const std::function<Result<json>(const fs::path&)>& validate, const fs::path& stored,
                            const std::string& filename, const fs::path& scratch, const json& portability) {
  std::error_code ec;
  fs::remove_all(scratch, ec);
  fs::create_directories(scratch, ec);
  fs::path named = scratch / filename;
  fs::copy_file(stored, named, fs::copy_options::overwrite_existing, ec);
  if (ec) return Error::bad_input(fmt::format("cannot copy {} for validation: {}", stored.string(), ec.message()));
  if (portability.is_object())
    if (auto w = store::write_file_atomic(scratch / (filename + ".manifest.json"), json{{"portability", portability}}.dump(2)); !w)
      return w.error();
  auto r = validate(named);
  fs::remove_all(scratch, ec);
  return r;
}

class Pipeline {
 public:
  Pipeline(const plan::Plan& plan, const store::Layout& layout, run::Runner& runner, run::Reporter& reporter,
           const PipelineOptions& options)
      : plan_(plan), layout_(layout), runner_(runner), reporter_(reporter), options_(options),
        key_(plan->key), record_(layout, plan->key), src_(layout.source_dir(plan->key)) {}

  Result<PipelineResult> run() {
    // Before hours of building: an --out that cannot take the wheel is bad input.
    if (!options_.out_dir.empty())
      if (auto c = store::check_out_dir(options_.out_dir); !c) return c.error();
    if (auto e = layout_.create(); !e) return e.error();
    // A finished key is a copy: no lock, no process.
    if (auto reused = try_reuse()) return *reused;
    if (failed_) return *failed_;

    auto lock = store::lock_key(
        layout_, key_, [&](const std::string& m) { reporter_.message(run::Level::info, m); },
        [] { return run::interrupt_requested(); });
    if (!lock) return lock.error();
    // A killed run's compilers may still write into the tree (ninja's compiles outlive it):
    // ended, and waited for, before anything here touches it.
    auto stale = run::end_stale_session(layout_.session_record(key_), [&](const std::string& m) {
      reporter_.message(run::Level::warning, m);
    });
    if (!stale) return stale.error();
    // Another archbuild may have finished this key while we waited.
    if (auto reused = try_reuse()) return *reused;
    if (failed_) return *failed_;

    if (auto r = record_.update([&](json& doc) { doc["plan"] = plan_.to_json(); }); !r) return r.error();
    auto resume = record_.resume_point(stage_names());
    if (!resume) return resume.error();
    std::string start = resume->value_or("validate");
    // A stamp is only as good as the tree it describes.
    if (start != "fetch" && !source_matches()) {
      if (auto r = record_.clear_stages(); !r) return r.error();
      start = "fetch";
    }
    env_ = step_environment(plan_, options_);
    add_build_path_env();
    if (auto r = write_admission_config(); !r) return r.error();
    // CMake reads the compiler launchers only when it first configures: a tree configured with
    // others (archbuild moved, ccache added or gone) would keep running those, so it is
    // configured again.
    if (start == "build" || start == "package") {
      auto doc = record_.read();
      json was = doc ? doc->value("/stages/configure/launchers"_json_pointer, json()) : json();
      if (was != launchers()) {
        reporter_.message(run::Level::info, "the compiler launchers changed since this tree was configured: configuring again");
        if (auto r = record_.clear_stage("configure"); !r) return r.error();
        start = "configure";
      }
    }
    auto before = read_ccache_counts(runner_, options_.compiler_cache, env_);

    const auto& names = stage_names();
    auto first = std::find(names.begin(), names.end(), start);
    for (auto it = names.begin(); it != first; ++it) result_.resumed_past.push_back(*it);
    int index = 0;
    for (auto it = names.begin(); it != names.end(); ++it) {
      ++index;
      run::StageInfo info{*it, index, static_cast<int>(names.size()), ""};
      if (it < first) {
        reporter_.stage_finished(info, {run::StageStatus::skipped, 0, "done by an earlier run", {}});
        continue;
      }
      if (auto r = run_stage(info, it == first); !r) return r.error();
      result_.ran.push_back(*it);
    }

    auto after = read_ccache_counts(runner_, options_.compiler_cache, env_);
    if (before && after)
      result_.compiler_cache = CacheCounts{after->hits - before->hits, after->misses - before->misses,
                                           after->remote_hits - before->remote_hits,
                                           after->remote_misses - before->remote_misses};
    if (auto r = publish(); !r) return r.error();
    return result_;
  }

 private:
  std::optional<PipelineResult> try_reuse() {
    auto ref = record_.wheel();
    if (!ref) {
      failed_ = ref.error();
      return std::nullopt;
    }
    if (!*ref) {
      // A manifest whose wheel entry is damaged names no wheel: said, since for real torch the
      // rebuild that follows takes hours.
      if (auto damage = record_.wheel_damage()) {
        std::string m = fmt::format("the manifest of key {} does not name a usable wheel ({}): building the key again "
                                    "(its build tree is kept)", key_, *damage);
        result_.notes.push_back(m);
        reporter_.message(run::Level::warning, m);
        (void)record_.clear_wheel();
        (void)record_.clear_stage("package");
      }
      return std::nullopt;
    }
    auto check = store::get_wheel(layout_, (*ref)->sha256);
    if (check.state != store::WheelState::ok) {
      // Corrupted or gone: forget it and rebuild the package (the build tree is kept).
      result_.notes.push_back(check.message);
      reporter_.message(run::Level::warning, check.message);
      (void)record_.clear_wheel();
      (void)record_.clear_stage("package");
      return std::nullopt;
    }
    if (options_.validate) {
      auto doc = record_.read();
      if (doc && !doc->value("validation", json()).is_object()) {
        // Built with --no-validate before: validate now, before anything reaches --out.
        auto v = validate_named(options_.validate, check.path, (*ref)->filename, layout_.log_dir(key_) / "validate",
                                doc->value("/stages/package/portability"_json_pointer, json()));
        if (!v) {
          failed_ = v.error();
          return std::nullopt;
        }
        (void)record_.update([&](json& d) { d["validation"] = *v; });
      }
    }
    auto out = store::copy_to_out(check.path, options_.out_dir, (*ref)->filename);
    if (!out) {
      failed_ = out_failure(out.error());
      return std::nullopt;
    }
    PipelineResult r = result_;
    r.reused = true;
    r.out_wheel = *out;
    r.stored = {(*ref)->sha256, check.path, check.size};
    r.filename = (*ref)->filename;
    auto doc = record_.read();
    if (doc) {
      r.manifest = *doc;
      if (doc->contains("manifest"))
        (void)store::write_file_atomic(options_.out_dir / ((*ref)->filename + ".manifest.json"), (*doc)["manifest"].dump(2));
    }
    return r;
  }

  // What makes two builds of one plan byte-identical (not part of the key: it follows from the
  // source and the cache location): no build path in the binaries (stages/build_path.hpp: a
  // prefix map for C and C++, archbuild's CUDA launcher) and SOURCE_DATE_EPOCH from the commit.
  void add_build_path_env() {
    // As the build sees it: setup.py and cmake take their paths from getcwd(), which has no symlinks.
    std::error_code ec;
    fs::path tree = fs::weakly_canonical(fs::absolute(src_), ec);
    if (ec) tree = fs::absolute(src_).lexically_normal();
    std::string map = prefix_map_flag(tree);
    auto append = [&](const char* var, const std::string& flag) {
      auto it = env_.find(var);
      env_[var] = (it == env_.end() || it->second.empty()) ? flag : it->second + " " + flag;
    };
    append("CFLAGS", map);
    append("CXXFLAGS", map);
    // With admission archbuild launches every C, C++ and CUDA compile (in front of ccache or
    // sccache); without, only CUDA's (for the path rewrite).
    admitting_ = plan_->admission.on && !options_.archbuild_exe.empty();
    std::map<std::string, std::string> chains;
    for (const char* lang : {"C", "CXX", "CUDA"}) {
      if (!admitting_ && std::string_view(lang) != "CUDA") continue;
      const std::string var = fmt::format("CMAKE_{}_COMPILER_LAUNCHER", lang);
      auto existing = env_.count(var) ? env_[var] : std::string();
      auto chain = compile_launcher(options_.archbuild_exe, tree, lang,
                                    admitting_ ? layout_.admission_dir(key_) : fs::path(), existing);
      if (!chain) break;
      chains[var] = *chain;
    }
    if (admitting_ && chains.size() != 3) {
      // No launcher, no admission: the static rule bounds memory again.
      admitting_ = false;
      for (const char* var : {"MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL"})
        if (env_.count(var)) env_[var] = std::to_string(plan_->jobs.static_jobs);
      chains.clear();
      if (auto chain = cuda_launcher(options_.archbuild_exe, tree, env_.count("CMAKE_CUDA_COMPILER_LAUNCHER") ? env_["CMAKE_CUDA_COMPILER_LAUNCHER"] : ""))
        chains["CMAKE_CUDA_COMPILER_LAUNCHER"] = *chain;
      reporter_.message(run::Level::warning,
                        fmt::format("the cache path {} holds ';' or ',': compiles cannot be admitted by memory; {} jobs "
                                    "by the static rule", layout_.root().string(), plan_->jobs.static_jobs));
    }
    for (const auto& [var, chain] : chains) env_[var] = chain;
    if (!chains.count("CMAKE_CUDA_COMPILER_LAUNCHER") && !options_.archbuild_exe.empty())
      reporter_.message(run::Level::warning,
                        fmt::format("the cache path {} holds ';' or ',': CUDA objects will carry it (not reproducible "
                                    "across cache directories)", tree.string()));
  }

  // The build's admission settings for its launchers (run/admission.hpp), rewritten each run:
  // a changed --memory-budget needs no new launcher, so no new configure.
  Result<Ok> write_admission_config() {
    if (!admitting_) return Ok{};
    run::AdmissionConfig c;
    c.budget_mb = plan_->admission.budget_mb;
    c.figures = plan_->admission.figures;
    const auto& recipe = plan_->resolution.recipe;
    c.peaks = layout_.peaks_file(recipe.package, recipe.name);
    c.records = layout_.compiles_file(key_);
    return run::write_config(layout_.admission_dir(key_), c);
  }

  // The .ninja_log the build wrote: in the plan's build dir, else the newest in the tree (a
  // backend's own build dir), at most three levels down.
  std::optional<fs::path> find_ninja_log() {
    std::error_code ec;
    fs::path direct = src_ / plan_->build_dir / ".ninja_log";
    if (fs::is_regular_file(direct, ec)) return direct;
    std::optional<fs::path> best;
    fs::file_time_type best_time{};
    for (auto it = fs::recursive_directory_iterator(src_, fs::directory_options::skip_permission_denied, ec);
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

  // Where the hours went: the ninja log and graph kept beside the logs, the launcher's
  // measurements folded into the recipe's peaks, the summary in the key record (and so the
  // manifest). Best effort: a build is never failed for its report.
  void collect_build_report(bool announce) {
    std::error_code ec;
    if (admitting_) {
      const auto& recipe = plan_->resolution.recipe;
      run::merge_peaks(layout_.peaks_file(recipe.package, recipe.name), run::read_records(layout_.compiles_file(key_)));
    }
    if (auto log = find_ninja_log()) {
      fs::copy_file(*log, layout_.ninja_log_copy(key_), fs::copy_options::overwrite_existing, ec);
      fs::path ninja = run::find_in_path("ninja", env_.count("PATH") ? env_["PATH"] : std::string());
      if (!ninja.empty()) {
        run::Command cmd;
        cmd.argv = {ninja.string(), "-C", log->parent_path().string(), "-t", "graph"};
        cmd.env = env_;
        cmd.cwd = log->parent_path();
        cmd.log = layout_.ninja_graph(key_);
        cmd.session_record = layout_.session_record(key_);
        if (!runner_.run(cmd, {}).ok()) fs::remove(layout_.ninja_graph(key_), ec);
      }
    }
    auto report = load_build_report(layout_, key_, jobs_now());
    if (!report) return;
    (void)record_.update([&](json& d) { d["build_report"] = *report; });
    if (announce && admitting_) reporter_.message(run::Level::info, "memory admission: " + waits_line(*report));
  }

  unsigned jobs_now() const {
    auto it = env_.find("MAX_JOBS");
    return it == env_.end() ? plan_->jobs.jobs : static_cast<unsigned>(std::max(1, std::atoi(it->second.c_str())));
  }

  // After fetch: the commit's time.
  void add_source_date_epoch() {
    if (env_.count("SOURCE_DATE_EPOCH")) return;
    auto doc = record_.read();
    if (!doc) return;
    auto t = doc->value("/stages/fetch/commit_time"_json_pointer, json());
    if (t.is_number_integer()) env_["SOURCE_DATE_EPOCH"] = std::to_string(t.get<std::int64_t>());
  }

  // The compiler launchers of this run, as the configure stamp records them.
  json launchers() const {
    json l = json::object();
    for (const char* lang : {"C", "CXX", "CUDA"}) {
      auto it = env_.find(fmt::format("CMAKE_{}_COMPILER_LAUNCHER", lang));
      l[lang] = it == env_.end() ? "" : it->second;
    }
    return l;
  }

  bool source_matches() {
    std::error_code ec;
    if (!fs::is_directory(src_, ec)) return false;
    auto doc = record_.read();
    if (!doc) return false;
    if (plan_->local)  // archbuild's copy; nothing else writes there
      return doc->value("/stages/fetch/local_content"_json_pointer, std::string()) == plan_->local->content_hash;
    auto recorded = doc->value("/stages/fetch/commit"_json_pointer, std::string());
    auto head = source::checkout_commit(src_);
    return head && !recorded.empty() && *head == recorded;
  }

  Result<Ok> run_stage(const run::StageInfo& info, bool first_of_run) {
    const std::string& stage = info.name;
    if (stage == "fetch") return fetch(info);
    if (stage == "validate") return validate(info);
    fs::path log = layout_.log(key_, stage);
    std::error_code ec;
    fs::create_directories(log.parent_path(), ec);
    if (stage == "configure" && first_of_run) {
      // A configure that failed half-way leaves a CMakeCache that setup.py would trust.
      fs::remove_all(src_ / plan_->build_dir, ec);
    }
    // Where the backend configures inside the build step, a finished configure is kept (the
    // build resumes incrementally) and an unfinished one is not reused.
    if (stage == plan_->configure_stage && stage != "configure") remove_half_configured();
    // The stage that writes the wheel starts from an empty wheel_dir; later stages keep it.
    if (stage == plan_->wheel_stage && !plan_->wheel_dir.empty()) fs::remove_all(src_ / plan_->wheel_dir, ec);

    add_source_date_epoch();
    if (stage == "build") {
      // This run's compiles only (a resumed build records what it compiles now).
      for (const auto& f : {layout_.compiles_file(key_), layout_.ninja_log_copy(key_), layout_.ninja_graph(key_)})
        fs::remove(f, ec);
    }
    bool has_steps = std::any_of(plan_->steps.begin(), plan_->steps.end(),
                                 [&](const plan::Step& s) { return s.stage == stage; });
    auto note = plan_->stage_notes.find(stage);
    if (!has_steps && stage != "package") {
      // Nothing to run (the backend configures in the build step): stamped, not faked.
      json extra = stage == "configure" ? json{{"launchers", launchers()}} : json::object();
      if (auto r = record_.mark_done(stage, extra); !r) return r.error();
      reporter_.stage_finished(info, {run::StageStatus::skipped, 0,
                                      note == plan_->stage_notes.end() ? "no step" : note->second, {}});
      return Ok{};
    }
    reporter_.stage_started(info);
    double seconds = 0;
    bool append = false;
    for (const auto& step : plan_->steps) {
      if (step.stage != stage) continue;
      run::Command cmd;
      cmd.argv = step.argv();
      cmd.env = env_;
      cmd.cwd = src_ / step.cwd;
      cmd.log = log;
      cmd.session_record = layout_.session_record(key_);
      cmd.append_log = append;
      append = true;
      auto r = run::run_reported(runner_, cmd, reporter_);
      seconds += r.elapsed.count();
      if (!r.ok() && stage == "build" && killed_for_memory(r, log)) {
        unsigned jobs = current_jobs();
        if (jobs > 1) {
          // Once, with half the jobs: the OOM killer took a compile (nvcc/cicc need GiBs each).
          unsigned half = jobs / 2;
          reporter_.message(run::Level::warning,
                            fmt::format("the build step was killed ({}), most likely out of memory with {} jobs: "
                                        "retrying once with {} jobs", r.describe(), jobs, half));
          env_["MAX_JOBS"] = env_["CMAKE_BUILD_PARALLEL_LEVEL"] = std::to_string(half);
          oom_retry_ = json{{"killed", r.describe()}, {"jobs", jobs}, {"retried_with_jobs", half}};
          cmd.env = env_;
          cmd.append_log = true;
          r = run::run_reported(runner_, cmd, reporter_);
          seconds += r.elapsed.count();
          if (!r.ok() && killed_for_memory(r, log)) {
            (*oom_retry_)["killed_again"] = r.describe();
            reporter_.stage_finished(info, {run::StageStatus::failed, seconds, r.describe(), log});
            return oom_advice(r, half, log);
          }
        } else {
          reporter_.stage_finished(info, {run::StageStatus::failed, seconds, r.describe(), log});
          return oom_advice(r, jobs, log);
        }
      }
      if (!r.ok() && (stage == "build" || stage == "package")) collect_build_report(false);
      if (!r.ok()) {
        reporter_.stage_finished(info, {r.interrupted ? run::StageStatus::interrupted : run::StageStatus::failed,
                                        seconds, r.describe(), log});
        return stage_error(stage, r, log, reporter_);
      }
    }
    json extra = json::object();
    if (stage == "configure") extra = {{"launchers", launchers()}};
    if (stage == "build" && oom_retry_) extra["oom_retry"] = *oom_retry_;
    if (stage == plan_->configure_stage && !plan_->libraries.empty()) {
      auto features = check_features_in(log);
      if (!features) {
        reporter_.stage_finished(info, {run::StageStatus::failed, seconds, features.error().message, log});
        return features.error();
      }
      extra["features"] = *features;
    }
    if (stage == "build" || stage == "package") collect_build_report(stage == "build");
    if (stage == "package") {
      auto built = find_wheel(src_ / plan_->wheel_dir, plan_->wheel_stage);
      if (!built) {
        // The wheel came from an earlier stage and is gone: that stage must run again.
        if (!plan_->wheel_stage.empty() && plan_->wheel_stage != stage) {
          (void)record_.clear_stage(plan_->wheel_stage);
          built = Error::build_failed(built.error().message + "; run again to rerun the " + plan_->wheel_stage + " stage");
        }
        reporter_.stage_finished(info, {run::StageStatus::failed, seconds, built.error().message, log});
        return built.error();
      }
      // Depends on what it links (Requires-Dist, $ORIGIN RUNPATH, a true platform tag).
      auto portable = make_wheel_portable(*built, log);
      if (!portable) {
        reporter_.stage_finished(info, {run::StageStatus::failed, seconds, portable.error().message, log});
        return portable.error();
      }
      built = portable->wheel;
      // Deterministic zip: sorted members, SOURCE_DATE_EPOCH times, fixed modes, fresh RECORD.
      std::int64_t epoch = 0;
      if (auto it = env_.find("SOURCE_DATE_EPOCH"); it != env_.end()) epoch = std::atoll(it->second.c_str());
      if (auto n = normalize_wheel(*built, *built, epoch); !n) {
        reporter_.stage_finished(info, {run::StageStatus::failed, seconds, n.error().message, log});
        return n.error();
      }
      auto stored = store::put_wheel(layout_, *built);
      if (!stored) return stored.error();
      // The key counts as built only once the wheel is validated (validate stage).
      extra = {{"wheel_sha256", stored->sha256}, {"filename", built->filename().string()},
               {"portability", portable->portability}};
    }
    if (auto r = record_.mark_done(stage, extra); !r) return r.error();
    reporter_.stage_finished(info, {run::StageStatus::ok, seconds,
                                    has_steps || note == plan_->stage_notes.end() ? "" : note->second, log});
    return Ok{};
  }

  // The recipe's [wheel] layout, the toolkit's CUDA for the package versions.
  Result<PortableResult> make_wheel_portable(const fs::path& wheel, const fs::path& log) {
    if (!options_.libraries) {
      auto facts = validate::load_library_facts(validate::shipped_library_facts());
      if (!facts) return facts.error();
      options_libraries_ = std::move(*facts);
    }
    const auto& res = plan_->resolution;
    PortableOptions o;
    o.layout = res.recipe.wheel_layout;
    o.triton = res.recipe.wheel_triton;
    // A dependent pins the exact torch wheel it was compiled against (the build venv's).
    if (plan_->venv)
      for (const auto& w : plan_->venv->wheels) o.pins.push_back(w.name + "==" + w.version);
    if (res.toolkit) o.cuda = res.toolkit->version;
    if (plan_->venv) o.built_against = plan_->venv->packages;
    o.patchelf = options_.patchelf;
    o.scratch = layout_.log_dir(key_) / "portable";
    o.log = log;
    return make_portable(wheel, options_.libraries ? *options_.libraries : *options_libraries_, o, runner_);
  }

  // Killed by the kernel (signal 9 / exit 137, the status of a shell-less child killed the same
  // way), or a compile of the step killed and reported by ninja/nvcc in the log.
  static bool killed_for_memory(const run::CommandResult& r, const fs::path& log) {
    if (r.interrupted || !r.started) return false;
    if (r.signal == 9 || r.exit_status == 137) return true;
    for (const auto& l : run::tail(log, 200))
      if (l.find("Killed signal terminated program") != std::string::npos ||
          l.find("died due to signal 9") != std::string::npos || l.find("killed by signal 9") != std::string::npos)
        return true;
    return false;
  }

  unsigned current_jobs() const {
    if (auto it = env_.find("MAX_JOBS"); it != env_.end()) {
      int n = std::atoi(it->second.c_str());
      if (n > 0) return static_cast<unsigned>(n);
    }
    return plan_->jobs.jobs;
  }

  Error oom_advice(const run::CommandResult& r, unsigned jobs, const fs::path& log) const {
    return Error::build_failed(fmt::format(
        "build stage killed {}({}) with {} job{}: out of memory; give fewer jobs (--jobs {} or MAX_JOBS), or let "
        "compiles wait for memory (cuda-launch --admission --memory-budget-mb); full log: {}",
        oom_retry_ ? "again after a retry with half the jobs " : "", r.describe(), jobs, jobs == 1 ? "" : "s",
        std::max(1u, jobs / 2), log.string()));
  }

  // The feature summary of the configure log against the plan's libraries: each the plan found
  // must show on. Only the "-- " lines are kept (a build log is large).
  Result<json> check_features_in(const fs::path& log) {
    std::ifstream in(log);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);)
      if (l.starts_with("--")) lines.push_back(l);
    auto summary = parse_feature_summary(lines);
    if (!summary.found) {
      reporter_.message(run::Level::warning,
                        fmt::format("no feature summary (\"-- USE_… : ON\") in {}: the libraries the plan found were "
                                    "not checked against what the build used", log.string()));
      return json{{"checked", false}, {"note", "no feature summary in the configure log"}};
    }
    auto findings = check_features(plan_->libraries, summary);
    for (const auto& f : findings) {
      if (f.ok) continue;
      const auto& c = *std::find_if(plan_->libraries.choices.begin(), plan_->libraries.choices.end(),
                                    [&](const plan::LibraryChoice& x) { return x.name == f.library; });
      std::string shown = f.line.empty() ? fmt::format("no line \"{}\"", f.feature) : fmt::format("\"{}\"", text::trim(f.line));
      return Error::build_failed(fmt::format(
          "{} stage: {} was found for the plan ({} in {}) but the build switched it off: {}; fix what the build "
          "finds (its log says why), or build --without {}; full log: {}",
          plan_->configure_stage, c.title, c.from && c.from->version ? *c.from->version : "version unknown",
          c.from ? c.from->lib_dir.string() : "?", shown, c.name, log.string()));
    }
    return json{{"checked", true}, {"findings", to_json(findings)}};
  }

  // A local tree: archbuild's own copy of it, as it is now (the plan's content hash checked).
  Result<Ok> fetch_local(const run::StageInfo& info) {
    reporter_.stage_started(info);
    auto t0 = std::chrono::steady_clock::now();
    auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    const auto& local = *plan_->local;
    auto fail = [&](const Error& e) {
      reporter_.stage_finished(info, {run::StageStatus::failed, seconds(), e.message, {}});
      return e;
    };
    auto tree = source::scan_local_tree(local.dir);
    if (!tree) return fail(tree.error());
    if (tree->content_hash != local.content_hash)
      return fail(Error::bad_input(fmt::format("{} changed since it was planned (content {} → {}); run again to plan "
                                               "the tree as it is now", local.dir.string(),
                                               local.content_hash.substr(0, 12), tree->content_hash.substr(0, 12))));
    auto copied = source::copy_local_tree(*tree, src_, [] { return run::interrupt_requested(); });
    if (!copied) return fail(copied.error());
    json stamp = {{"local", local.dir.string()}, {"local_content", tree->content_hash}, {"files", tree->entries.size()},
                  {"bytes", tree->bytes}, {"head", tree->head ? json(*tree->head) : json(nullptr)}};
    if (tree->commit_time) stamp["commit_time"] = *tree->commit_time;
    auto placed = place_fetches();
    if (!placed) return fail(placed.error());
    stamp["fetches"] = *placed;
    if (auto r = record_.mark_done("fetch", stamp); !r) return r.error();
    reporter_.stage_finished(info, {run::StageStatus::ok, seconds(),
                                    fmt::format("{} files copied from {}", tree->entries.size(), local.dir.string()), {}});
    return Ok{};
  }

  source::SourceOptions source_options() const {
    source::SourceOptions so;
    so.offline = options_.offline;
    so.retry = options_.retry;
    so.note = [this](const std::string& n) { reporter_.message(run::Level::info, n); };
    so.cancelled = [] { return run::interrupt_requested(); };
    return so;
  }

  source::MirrorFor mirror_for() const {
    return [this](const std::string& url) { return source::MirrorSlot{layout_.git_mirror(url), layout_.git_mirror_lock(url)}; };
  }

  // What the tree's build would download, placed where it looks before anything runs: a checkout
  // of the planned commit from archbuild's mirror (its objects borrowed, as the tree's are), so the
  // build finds it and fetches nothing, and `--offline` needs only the mirrors.
  Result<json> place_fetches() {
    json placed = json::array();
    for (const auto& f : plan_->fetches) {
      if (!f.active()) continue;
      if (!f.resolved())
        return Error::bad_input(fmt::format("fetch {}: the commit {} names was not resolved before planning; run "
                                            "`archbuild wheel` (it resolves it)", f.name, f.pin_file));
      fs::path target = src_ / f.path;
      std::error_code ec;
      if (fs::exists(target, ec) || fs::is_symlink(target, ec)) {
        if (!fs::is_directory(fs::symlink_status(target, ec)) || !fs::is_empty(target, ec))
          return Error::bad_input(fmt::format(
              "{}: the tree already has {}, where [[fetch]] {} would go; the build would not download it: drop that "
              "[[fetch]] from {} for this tree", src_.string(), f.path, f.name, plan_->resolution.recipe.file.string()));
        fs::remove(target, ec);
      }
      fs::create_directories(target.parent_path(), ec);
      source::SourceOptions so = source_options();
      so.submodules = f.submodules;
      reporter_.message(run::Level::info, fmt::format("fetch {}: {} @ {} ({}) into {}", f.name, f.url, f.ref,
                                                      f.commit.substr(0, 12), f.path));
      auto co = source::fetch_source({f.url, f.commit, f.commit}, target, mirror_for(), so);
      if (!co) {
        std::string msg = fmt::format("fetch {} ({} @ {}, pinned by {}): {}", f.name, f.url, f.ref, f.pin_file,
                                      co.error().message);
        return options_.offline ? Error::missing_tool(msg) : Error{co.error().exit, msg};
      }
      json subs = json::array();
      for (const auto& s : co->submodules) subs.push_back({{"path", s.path}, {"url", s.url}, {"commit", s.commit}});
      placed.push_back({{"name", f.name}, {"path", f.path}, {"url", f.url}, {"pin_file", f.pin_file},
                        {"ref", f.ref}, {"commit", co->commit}, {"submodules", subs}});
    }
    return placed;
  }

  // A build tree whose CMake configure did not finish: CMakeCache.txt is written even when the
  // configure fails, the generator's file only when it succeeds. Removed, since a backend that
  // finds CMakeCache.txt may skip configuring (setup.py does) and build a broken tree.
  void remove_half_configured() {
    std::error_code ec;
    fs::path dir = src_ / plan_->build_dir;
    if (!fs::exists(dir / "CMakeCache.txt", ec)) return;
    for (const char* generated : {"build.ninja", "Makefile"})
      if (fs::exists(dir / generated, ec)) return;
    reporter_.message(run::Level::info,
                      fmt::format("{}: CMakeCache.txt without build.ninja (its configure did not finish): removing it "
                                  "so the build configures afresh", dir.string()));
    fs::remove_all(dir, ec);
  }

  Result<Ok> fetch(const run::StageInfo& info) {
    if (plan_->local) return fetch_local(info);
    reporter_.stage_started(info);
    auto t0 = std::chrono::steady_clock::now();
    source::SourceSpec spec{plan_->url, plan_->tag, plan_->commit.value_or("")};
    source::SourceOptions so = source_options();
    so.submodules = plan_->submodules;
    auto checkout = source::fetch_source(spec, src_, mirror_for(), so);
    auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    if (!checkout) {
      reporter_.stage_finished(info, {run::StageStatus::failed, seconds(), checkout.error().message, {}});
      return checkout.error();
    }
    json subs = json::array();
    for (const auto& s : checkout->submodules) subs.push_back({{"path", s.path}, {"url", s.url}, {"commit", s.commit}});
    json stamp = {{"commit", checkout->commit}, {"submodules", subs}};
    if (auto t = source::checkout_commit_time(src_)) stamp["commit_time"] = *t;
    auto placed = place_fetches();
    if (!placed) {
      reporter_.stage_finished(info, {run::StageStatus::failed, seconds(), placed.error().message, {}});
      return placed.error();
    }
    stamp["fetches"] = *placed;
    auto contract = tree_contract();
    if (!contract) {
      // Fetch stays unstamped: the rerun reads and checks the tree again.
      reporter_.stage_finished(info, {run::StageStatus::failed, seconds(), contract.error().message, {}});
      return contract.error();
    }
    stamp["contract"] = *contract;
    if (auto r = record_.mark_done("fetch", stamp); !r) return r.error();
    reporter_.stage_finished(info, {run::StageStatus::ok, seconds(), checkout->commit.substr(0, 12), {}});
    return Ok{};
  }

  // The tree's contract, read once after fetch and checked against the plan before configure:
  // a contradiction (exit 2/3) stops the build; it never changes the plan.
  Result<json> tree_contract() {
    auto c = contract::read_contract(contract::directory_access(src_));
    if (!c) return c.error();
    auto findings = contract::check(*c, contract_expectation(plan_));
    if (auto e = contract::first_contradiction(findings, src_.string())) return *e;
    json j = contract::to_json(*c);
    j["checks"] = contract::to_json(findings);
    return j;
  }

  // Validates the packaged wheel; only a validated wheel becomes the key's wheel.
  Result<Ok> validate(const run::StageInfo& info) {
    auto doc = record_.read();
    if (!doc) return doc.error();
    std::string sha = doc->value("/stages/package/wheel_sha256"_json_pointer, std::string());
    std::string filename = doc->value("/stages/package/filename"_json_pointer, std::string());
    auto check = store::get_wheel(layout_, sha);
    if (sha.empty() || check.state != store::WheelState::ok) {
      (void)record_.clear_stage("package");
      return Error::build_failed(fmt::format("the packaged wheel is gone from the cache ({}); run again to repackage",
                                             check.message));
    }
    reporter_.stage_started(info);
    auto t0 = std::chrono::steady_clock::now();
    json report = "skipped (--no-validate)";
    if (options_.validate) {
      auto r = validate_named(options_.validate, check.path, filename, layout_.log_dir(key_) / "validate",
                              doc->value("/stages/package/portability"_json_pointer, json()));
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!r) {
        reporter_.stage_finished(info, {run::StageStatus::failed, seconds, r.error().message, {}});
        (void)record_.update([&](json& d) { d["validation"] = {{"ok", false}, {"error", r.error().message}}; });
        return r.error();
      }
      report = *r;
    }
    store::StoredWheel stored{sha, check.path, check.size};
    if (auto r = record_.update([&](json& d) { d["validation"] = report; }); !r) return r.error();
    if (auto r = record_.set_wheel(stored, filename); !r) return r.error();
    if (auto r = record_.mark_done("validate"); !r) return r.error();
    result_.stored = stored;
    result_.filename = filename;
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    reporter_.stage_finished(info, {run::StageStatus::ok, seconds, options_.validate ? "" : "skipped (--no-validate)", {}});
    return Ok{};
  }

  // The manifest (provenance) and the copy in --out.
  Result<Ok> publish() {
    auto doc = record_.read();
    if (!doc) return doc.error();
    const auto& res = plan_->resolution;
    json m;
    m["archbuild_version"] = options_.archbuild_version;
    m["build_key"] = key_;
    m["recipe"] = {{"name", res.recipe.name}, {"file", res.recipe.file.string()}};
    m["source"] = {{"url", plan_->url},
                   {"tag", plan_->tag},
                   {"ref", plan_->ref},
                   {"commit", doc->value("/stages/fetch/commit"_json_pointer, std::string())},
                   {"submodules", doc->value("/stages/fetch/submodules"_json_pointer, json::array())}};
    m["toolkit"] = res.toolkit ? json{{"version", res.toolkit->version.str()},
                                      {"nvcc_version", res.toolkit->compiler_version().str()},
                                      {"path", res.toolkit->root.string()}}
                               : json(nullptr);
    m["compiler"] = res.compiler ? json{{"name", res.compiler->name()}, {"path", res.compiler->path.string()}}
                                 : json(nullptr);
    m["arch_list"] = res.arch_list;
    m["wheel"] = {{"filename", result_.filename}, {"sha256", result_.stored.sha256}, {"size", result_.stored.size}};
    m["source"]["commit_time"] = doc->value("/stages/fetch/commit_time"_json_pointer, json());
    if (plan_->local)
      m["source"]["local"] = {{"dir", plan_->local->dir.string()},
                              {"content_sha256", plan_->local->content_hash},
                              {"files", doc->value("/stages/fetch/files"_json_pointer, json())},
                              {"head", doc->value("/stages/fetch/head"_json_pointer, json())}};
    if (auto h = sha256_file_hex(res.recipe.file)) m["recipe"]["sha256"] = *h;
    m["validation"] = doc->value("validation", json());
    m["contract"] = doc->value("/stages/fetch/contract"_json_pointer, json());
    m["portability"] = doc->value("/stages/package/portability"_json_pointer, json());
    // What the tree's build would have downloaded, and the commits archbuild placed instead.
    m["fetches"] = doc->value("/stages/fetch/fetches"_json_pointer, json::array());
    // The build venv: its exact packages (all it sees), where they came from, the one cmake.
    m["build_venv"] = plan_->venv ? plan::venv_json(*plan_->venv) : json(nullptr);
    m["environment"] = env_.empty() ? json(plan_.environment()) : json(env_);
    m["environment_note"] = "exactly what the build steps got (pass-through and compiler-cache variables included)";
    // The libraries (where each came from, or why it is off: --without is never silent), what the
    // configure log's feature summary showed, the host check and an out-of-memory retry.
    m["libraries"] = plan::to_json(plan_->libraries);
    m["features"] = doc->value(json::json_pointer("/stages/" + plan_->configure_stage + "/features"), json());
    m["host_check"] = options_.host_check;
    m["oom_retry"] = doc->value("/stages/build/oom_retry"_json_pointer, json());
    m["admission"] = {{"on", admitting_},
                      {"budget_mb", admitting_ ? json(plan_->admission.budget_mb) : json(nullptr)},
                      {"rule", admitting_ ? json(plan_->admission.rule()) : json(nullptr)}};
    // Where the hours went (`archbuild report KEY` has the rest): nightly CI compares it.
    m["build_report"] = doc->value("build_report", json());
    if (auto r = record_.update([&](json& d) { d["manifest"] = m; }); !r) return r.error();
    auto out = store::copy_to_out(result_.stored.path, options_.out_dir, result_.filename);
    if (!out) return out_failure(out.error());
    result_.out_wheel = *out;
    // The provenance beside the wheel, for mirrors and audits: <wheel>.manifest.json.
    if (auto w = store::write_file_atomic(options_.out_dir / (result_.filename + ".manifest.json"), m.dump(2)); !w)
      return out_failure(w.error());
    auto final_doc = record_.read();
    if (final_doc) result_.manifest = *final_doc;
    return Ok{};
  }

  // The wheel is built and stored (a rerun reuses it); what failed is the user's --out (full,
  // made read-only meanwhile): bad input, exit 2, not a failed build stage.
  static Error out_failure(Error e) {
    e.exit = Exit::bad_input;
    e.message = "--out: " + e.message + " (the wheel is kept in the cache: run again with a writable --out)";
    return e;
  }

  const plan::Plan& plan_;
  const store::Layout& layout_;
  run::Runner& runner_;
  run::Reporter& reporter_;
  const PipelineOptions& options_;
  std::string key_;
  store::KeyRecord record_;
  fs::path src_;
  std::map<std::string, std::string> env_;
  bool admitting_ = false;  // every compile through archbuild's launcher, admitted by memory
  PipelineResult result_;
  std::optional<Error> failed_;
  std::optional<validate::LibraryFacts> options_libraries_;  // loaded once when the options have none
  std::optional<json> oom_retry_;
};

}  // namespace

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

Result<PipelineResult> run_pipeline(const plan::Plan& plan, const store::Layout& layout, run::Runner& runner,
                                    run::Reporter& reporter, const PipelineOptions& options) {
  Pipeline p(plan, layout, runner, reporter, options);
  return p.run();
}

}  // namespace archbuild::stages
