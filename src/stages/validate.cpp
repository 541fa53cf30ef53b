// The validate stage: the packaged wheel checked (coverage, metadata, smoke …: the caller's
// validate function) under its own name; only a validated wheel becomes the key's wheel. Stamp:
// the validation report in the key record (and so the manifest).
#include <fmt/format.h>

#include <cstring>

#include "run/interrupt.hpp"
#include "stages/stage.hpp"
#include "store/atomic_file.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

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
  if (auto copied = store::copy_file_atomic(stored, named); !copied)
    return Error::bad_input(fmt::format("cannot copy {} for validation: {}", stored.string(), copied.error().message));
  if (portability.is_object())
    if (auto w = store::write_file_atomic(scratch / (filename + ".manifest.json"), json{{"portability", portability}}.dump(2)); !w)
      return w.error();
  auto r = validate(named);
  fs::remove_all(scratch, ec);
  return r;
}

Result<Ok> validate_stage(Context& ctx, const run::StageInfo& info) {
  auto doc = ctx.record.read();
  if (!doc) return doc.error();
  std::string sha = doc->value("/stages/package/wheel_sha256"_json_pointer, std::string());
  std::string filename = doc->value("/stages/package/filename"_json_pointer, std::string());
  auto check = store::get_wheel(ctx.layout, sha);
  if (sha.empty() || check.state != store::WheelState::ok) {
    warn_unrecorded(ctx, ctx.record.clear_stage("package"), "that the package stage must run again");
    return Error::build_failed(fmt::format("the packaged wheel is gone from the cache ({}); run again to repackage",
                                           check.message));
  }
  ctx.reporter.stage_started(info);
  Stopwatch clock;
  const auto& validate = ctx.options.validate;
  json report = "skipped (--no-validate)";
  if (validate) {
    auto r = validate_named(validate, check.path, filename, ctx.layout.log_dir(ctx.key) / "validate",
                            doc->value("/stages/package/portability"_json_pointer, json()));
    // Ctrl-C or SIGTERM while it ran (the import test's pip and the smoke kernel are stopped,
    // or died of the signal themselves): an interrupt, as in configure or build, never a verdict
    // on the wheel; nothing is recorded, and the same command resumes here.
    if (run::interrupt_requested()) {
      std::string why = fmt::format("signal {}, {}", run::interrupt_signal(), ::strsignal(run::interrupt_signal()));
      ctx.reporter.stage_finished(info, {run::StageStatus::interrupted, clock.seconds(), why, {}});
      return Error::build_failed(
          fmt::format("validate stage interrupted ({}); run the same command again to resume at validate", why));
    }
    if (!r) {
      ctx.reporter.stage_finished(info, {run::StageStatus::failed, clock.seconds(), r.error().message, {}});
      warn_unrecorded(ctx, ctx.record.update([&](json& d) { d["validation"] = {{"ok", false}, {"error", r.error().message}}; }),
                      "the failed validation");
      return r.error();
    }
    report = *r;
  }
  store::StoredWheel stored{sha, check.path, check.size};
  if (auto r = ctx.record.update([&](json& d) { d["validation"] = report; }); !r) return r.error();
  if (auto r = ctx.record.set_wheel(stored, filename); !r) return r.error();
  if (auto r = ctx.record.mark_done("validate"); !r) return r.error();
  ctx.result.stored = stored;
  ctx.result.filename = filename;
  ctx.reporter.stage_finished(info, {run::StageStatus::ok, clock.seconds(), validate ? "" : "skipped (--no-validate)", {}});
  return Ok{};
}

}  // namespace archbuild::stages
