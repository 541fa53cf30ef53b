// After the stages: the key's manifest (provenance: source, toolchain, environment, libraries,
// validation, where the hours went) in the key record, and the wheel with its manifest copied
// to --out.
#include <fmt/format.h>

#include "core/sha256.hpp"
#include "stages/stage.hpp"
#include "store/atomic_file.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

Result<Ok> publish(Context& ctx) {
  const auto& plan = ctx.plan;
  auto& result = ctx.result;
  auto doc = ctx.record.read();
  if (!doc) return doc.error();
  const auto& res = plan->resolution;
  json m;
  m["archbuild_version"] = ctx.options.archbuild_version;
  m["build_key"] = ctx.key;
  m["recipe"] = {{"name", res.recipe.name}, {"file", res.recipe.file.string()}};
  m["source"] = {{"url", plan->url},
                 {"tag", plan->tag},
                 {"ref", plan->ref},
                 {"commit", doc->value("/stages/fetch/commit"_json_pointer, std::string())},
                 {"submodules", doc->value("/stages/fetch/submodules"_json_pointer, json::array())}};
  m["toolkit"] = res.toolkit ? json{{"version", res.toolkit->version.str()},
                                    {"nvcc_version", res.toolkit->compiler_version().str()},
                                    {"path", res.toolkit->root.string()}}
                             : json(nullptr);
  m["compiler"] = res.compiler ? json{{"name", res.compiler->name()}, {"path", res.compiler->path.string()}}
                               : json(nullptr);
  m["arch_list"] = res.arch_list;
  m["wheel"] = {{"filename", result.filename}, {"sha256", result.stored.sha256}, {"size", result.stored.size}};
  m["source"]["commit_time"] = doc->value("/stages/fetch/commit_time"_json_pointer, json());
  if (plan->local)
    m["source"]["local"] = {{"dir", plan->local->dir.string()},
                            {"content_sha256", plan->local->content_hash},
                            {"files", doc->value("/stages/fetch/files"_json_pointer, json())},
                            {"head", doc->value("/stages/fetch/head"_json_pointer, json())}};
  // Clean, or the earlier key whose build tree this build continued (the same wheel either way).
  m["build_start"] = doc->value("/stages/fetch/build_start"_json_pointer, plan::to_json(plan->build_start));
  if (auto h = sha256_file_hex(res.recipe.file)) m["recipe"]["sha256"] = *h;
  m["validation"] = doc->value("validation", json());
  m["contract"] = doc->value("/stages/fetch/contract"_json_pointer, json());
  m["portability"] = doc->value("/stages/package/portability"_json_pointer, json());
  // What the tree's build would have downloaded, and the commits archbuild placed instead.
  m["fetches"] = doc->value("/stages/fetch/fetches"_json_pointer, json::array());
  // The patches the fetch stage applied (or found contained), in order, by sha256 and origin.
  m["patches"] = doc->value("/stages/fetch/patches"_json_pointer, json::array());
  // The build venv: its exact packages (all it sees), where they came from, the one cmake.
  m["build_venv"] = plan->venv ? plan::venv_json(*plan->venv) : json(nullptr);
  m["environment"] = ctx.env.empty() ? json(plan.environment()) : json(ctx.env);
  m["environment_note"] = "exactly what the build steps got (pass-through and compiler-cache variables included)";
  // The libraries (where each came from, or why it is off: --without is never silent), what the
  // configure log's feature summary showed, the host check and an out-of-memory retry.
  m["libraries"] = plan::to_json(plan->libraries);
  m["features"] = doc->value(json::json_pointer("/stages/" + std::string(recipe::to_string(plan->configure_stage)) + "/features"), json());
  m["host_check"] = ctx.options.host_check;
  m["oom_retry"] = doc->value("/stages/build/oom_retry"_json_pointer, json());
  m["admission"] = {{"on", ctx.admitting},
                    {"budget_mb", ctx.admitting ? json(plan->admission.budget_mb) : json(nullptr)},
                    {"rule", ctx.admitting ? json(plan->admission.rule()) : json(nullptr)}};
  // Where the hours went (`archbuild report KEY` has the rest): nightly CI compares it.
  m["build_report"] = doc->value("build_report", json());
  if (auto r = ctx.record.update([&](json& d) { d["manifest"] = m; }); !r) return r.error();
  auto out = store::copy_to_out(result.stored.path, ctx.options.out_dir, result.filename);
  if (!out) return out_failure(out.error());
  result.out_wheel = *out;
  // The provenance beside the wheel, for mirrors and audits: <wheel>.manifest.json.
  if (auto w = store::write_file_atomic(ctx.options.out_dir / (result.filename + ".manifest.json"), m.dump(2)); !w)
    return out_failure(w.error());
  auto final_doc = ctx.record.read();
  if (final_doc) result.manifest = *final_doc;
  return Ok{};
}

Error out_failure(Error e) {
  e.exit = Exit::bad_input;
  e.message = "--out: " + e.message + " (the wheel is kept in the cache: run again with a writable --out)";
  return e;
}

}  // namespace archbuild::stages
