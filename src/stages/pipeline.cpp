// The pipeline: sequencing, the key's lock, reuse of a finished key and resume of a failed run.
// What each stage does is in its own file (stages/stage.hpp lists them).
#include "stages/pipeline.hpp"

#include <cstdlib>

#include <algorithm>

#include <fmt/format.h>

#include "run/interrupt.hpp"
#include "recipe/stage.hpp"
#include "run/session.hpp"
#include "stages/local_tree.hpp"
#include "stages/stage.hpp"
#include "store/atomic_file.hpp"
#include "store/lock.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;
using recipe::Stage;

const std::vector<std::string>& stage_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (recipe::Stage s : recipe::kStages) v.emplace_back(recipe::to_string(s));
    return v;
  }();
  return names;
}

StageFunction stage_function(recipe::Stage stage) {
  // No default: a stage without its function is a compile warning (-Wswitch), not validate.
  switch (stage) {
    case recipe::Stage::fetch: return &fetch_stage;
    case recipe::Stage::configure: return &configure_stage;
    case recipe::Stage::build: return &build_stage;
    case recipe::Stage::package: return &package_stage;
    case recipe::Stage::validate: return &validate_stage;
  }
  return nullptr;
}

Result<std::optional<recipe::Stage>> resume_point(const store::KeyRecord& record) {
  auto doc = record.read();
  if (!doc) return doc.error();
  if (auto stamps = doc->find("stages"); stamps != doc->end() && stamps->is_object())
    for (const auto& item : stamps->items())
      if (auto s = recipe::stage_read(item.key(), record.path().string()); !s)
        return Error::bad_input(s.error().message + ": the record is damaged or another archbuild's; remove it to "
                                                    "build the key again");
  auto first = record.resume_point(stage_names());
  if (!first) return first.error();
  if (!*first) return std::optional<recipe::Stage>();
  auto s = recipe::stage_read(**first, record.path().string());
  if (!s) return s.error();
  return std::optional<recipe::Stage>(*s);
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

class Pipeline {
 public:
  Pipeline(const plan::Plan& plan, const store::Layout& layout, run::Runner& runner, run::Reporter& reporter,
           const PipelineOptions& options)
      : ctx_(plan, layout, runner, reporter, options) {}

  Result<PipelineResult> run() {
    const auto& options = ctx_.options;
    const auto& layout = ctx_.layout;
    auto& reporter = ctx_.reporter;
    auto& record = ctx_.record;
    // Before hours of building: an --out that cannot take the wheel is bad input.
    if (!options.out_dir.empty())
      if (auto c = store::check_out_dir(options.out_dir); !c) return c.error();
    if (auto e = layout.create(); !e) return e.error();
    // A finished key is a copy: no lock, no process.
    if (auto reused = try_reuse()) return *reused;
    if (failed_) return *failed_;

    auto lock = store::lock_key(
        layout, ctx_.key, [&](const std::string& m) { reporter.message(run::Level::info, m); },
        [] { return run::interrupt_requested(); });
    if (!lock) return lock.error();
    // A killed run's compilers may still write into the tree (ninja's compiles outlive it):
    // ended, and waited for, before anything here touches it.
    auto stale = run::end_stale_session(layout.session_record(ctx_.key), [&](const std::string& m) {
      reporter.message(run::Level::warning, m);
    });
    if (!stale) return stale.error();
    // A local tree's keys of one folder and configuration build in one place, one at a time; a
    // killed run of the key last built there may have left compilers writing in it.
    std::optional<store::FileLock> slot_lock;
    if (!ctx_.slot.empty()) {
      auto l = store::FileLock::acquire(
          layout.work_lock(ctx_.slot),
          [&](const std::string& holder) {
            reporter.message(run::Level::info, fmt::format("waiting for another archbuild{} building from the same "
                                                           "folder with the same configuration",
                                                           holder.empty() ? "" : " (" + holder + ")"));
          },
          [] { return run::interrupt_requested(); });
      if (!l) return l.error();
      slot_lock = std::move(*l);
      if (auto earlier = earlier_build(layout, ctx_.slot); earlier && earlier->key != ctx_.key)
        if (auto other = store::try_lock_key(layout, earlier->key); other && *other) {
          auto ended = run::end_stale_session(layout.session_record(earlier->key), [&](const std::string& m) {
            reporter.message(run::Level::warning, m);
          });
          if (!ended) return ended.error();
        }
    }
    // Another archbuild may have finished this key while we waited.
    if (auto reused = try_reuse()) return *reused;
    if (failed_) return *failed_;

    if (auto r = record.update([&](json& doc) { doc["plan"] = ctx_.plan.to_json(); }); !r) return r.error();
    auto resume = resume_point(record);
    if (!resume) return resume.error();
    Stage start = resume->value_or(Stage::validate);
    // A stamp is only as good as the tree it describes.
    if (start != Stage::fetch && !fetched_tree_matches(ctx_)) {
      if (auto r = record.clear_stages(); !r) return r.error();
      start = Stage::fetch;
    }
    if (start != Stage::fetch) start = verified_start(start);
    if (auto r = prepare_environment(ctx_); !r) return r.error();
    // CMake reads the compiler launchers only when it first configures: a tree configured with
    // others (archbuild moved, ccache added or gone) would keep running those, so it is
    // configured again.
    if (start == Stage::build || start == Stage::package) {
      auto doc = record.read();
      json was = doc ? doc->value("/stages/configure/launchers"_json_pointer, json()) : json();
      if (was != ctx_.launchers()) {
        reporter.message(run::Level::info, "the compiler launchers (or the CMake seed that carries them) changed since this tree was configured: "
                                                   "configuring again");
        if (auto r = record.clear_stage(recipe::to_string(Stage::configure)); !r) return r.error();
        start = Stage::configure;
      }
    }
    auto before = read_ccache_counts(ctx_.runner, options.compiler_cache, ctx_.env);

    ctx_.started_at = start;
    int index = 0;
    for (Stage stage : recipe::kStages) {
      ++index;
      const std::string name(recipe::to_string(stage));
      run::StageInfo info{name, index, static_cast<int>(recipe::kStages.size()), ""};
      if (stage < start) {
        ctx_.result.resumed_past.push_back(name);
        reporter.stage_finished(info, {run::StageStatus::skipped, 0, "done by an earlier run", {}});
        continue;
      }
      if (auto r = stage_function(stage)(ctx_, info); !r) return r.error();
      ctx_.result.ran.push_back(name);
    }

    auto after = read_ccache_counts(ctx_.runner, options.compiler_cache, ctx_.env);
    if (before && after)
      ctx_.result.compiler_cache = CacheCounts{after->hits - before->hits, after->misses - before->misses,
                                               after->remote_hits - before->remote_hits,
                                               after->remote_misses - before->remote_misses};
    if (auto r = publish(ctx_); !r) return r.error();
    return ctx_.result;
  }

 private:
  std::optional<PipelineResult> try_reuse() {
    auto ref = ctx_.record.wheel();
    if (!ref) {
      failed_ = ref.error();
      return std::nullopt;
    }
    if (!*ref) {
      // A manifest whose wheel entry is damaged names no wheel: said, since for real torch the
      // rebuild that follows takes hours.
      if (auto damage = ctx_.record.wheel_damage()) {
        std::string m = fmt::format("the manifest of key {} does not name a usable wheel ({}): building the key again "
                                    "(its build tree is kept)", ctx_.key, *damage);
        ctx_.result.notes.push_back(m);
        ctx_.reporter.message(run::Level::warning, m);
        forget_wheel();
      }
      return std::nullopt;
    }
    auto check = store::get_wheel(ctx_.layout, (*ref)->sha256);
    if (check.state != store::WheelState::ok) {
      // Corrupted or gone: forget it and rebuild the package (the build tree is kept).
      ctx_.result.notes.push_back(check.message);
      ctx_.reporter.message(run::Level::warning, check.message);
      forget_wheel();
      return std::nullopt;
    }
    if (ctx_.options.validate) {
      auto doc = ctx_.record.read();
      if (doc && !doc->value("validation", json()).is_object()) {
        // Built with --no-validate before: validate now, before anything reaches --out.
        auto v = validate_named(ctx_.options.validate, check.path, (*ref)->filename, ctx_.layout.log_dir(ctx_.key) / "validate",
                                doc->value("/stages/package/portability"_json_pointer, json()));
        if (!v) {
          failed_ = v.error();
          return std::nullopt;
        }
        warn_unrecorded(ctx_, ctx_.record.update([&](json& d) { d["validation"] = *v; }), "the validation");
      }
    }
    auto out = store::copy_to_out(check.path, ctx_.options.out_dir, (*ref)->filename);
    if (!out) {
      failed_ = out_failure(out.error());
      return std::nullopt;
    }
    PipelineResult r = ctx_.result;
    r.reused = true;
    r.out_wheel = *out;
    r.stored = {(*ref)->sha256, check.path, check.size};
    r.filename = (*ref)->filename;
    auto doc = ctx_.record.read();
    if (doc) {
      r.manifest = *doc;
      if (doc->contains("manifest")) {
        fs::path copy = ctx_.options.out_dir / ((*ref)->filename + ".manifest.json");
        if (auto w = store::write_file_atomic(copy, (*doc)["manifest"].dump(2)); !w) {
          std::string m = fmt::format("could not write {}: {}", copy.string(), w.error().message);
          r.notes.push_back(m);
          ctx_.reporter.message(run::Level::warning, m);
        }
      }
    }
    return r;
  }

  // The key's wheel is unusable: the package stage runs again. Where these writes fail, the
  // package stamp stays, and the next run's check of it (verified_start) runs package instead.
  void forget_wheel() {
    warn_unrecorded(ctx_, ctx_.record.clear_wheel(), "that the key's wheel is unusable");
    warn_unrecorded(ctx_, ctx_.record.clear_stage("package"), "that the package stage must run again");
  }

  // Where the run starts once each stamp it would skip is checked against what it claims: a stamp
  // whose claim no longer holds (its clear could not be written, or the cache was changed
  // underneath) is not trusted, and its stage runs again. The fetch stamp is checked by
  // fetched_tree_matches, the configure stamp by its launchers (run()).
  Stage verified_start(Stage start) {
    auto past = [&](Stage stage) { return start > stage; };  // the enum is in run order
    auto distrust = [&](Stage stage, const std::string& why) {
      std::string name(recipe::to_string(stage));
      ctx_.reporter.message(run::Level::info, fmt::format("the {} stamp is not trusted ({}): running {} again", name, why, name));
      warn_unrecorded(ctx_, ctx_.record.clear_stage(name), "that the " + name + " stage must run again");
      start = stage;
    };
    // The package stamp names the stored wheel the validate stage reads.
    if (past(Stage::package)) {
      auto doc = ctx_.record.read();
      std::string sha = doc ? doc->value("/stages/package/wheel_sha256"_json_pointer, std::string()) : std::string();
      if (sha.empty()) distrust(Stage::package, "it names no wheel");
      else if (auto check = store::get_wheel(ctx_.layout, sha); check.state != store::WheelState::ok)
        distrust(Stage::package, check.message);
    }
    // Then, a backend whose build step writes the wheel: the package stage takes it from wheel_dir.
    const auto wheel_stage = ctx_.plan->wheel_stage;
    if (wheel_stage && *wheel_stage != Stage::package && past(*wheel_stage) && !past(Stage::package) &&
        !has_wheel(ctx_.src / ctx_.plan->wheel_dir))
      distrust(*wheel_stage, fmt::format("no wheel in {}", (ctx_.src / ctx_.plan->wheel_dir).string()));
    return start;
  }

  static bool has_wheel(const fs::path& dir) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".whl") return true;
    return false;
  }

  Context ctx_;
  std::optional<Error> failed_;
};

}  // namespace

Result<PipelineResult> run_pipeline(const plan::Plan& plan, const store::Layout& layout, run::Runner& runner,
                                    run::Reporter& reporter, const PipelineOptions& options) {
  Pipeline p(plan, layout, runner, reporter, options);
  return p.run();
}

}  // namespace archbuild::stages
