#include "app/build.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "app/inputs.hpp"
#include "app/validation.hpp"
#include "core/data_dir.hpp"
#include "core/path_kind.hpp"
#include "core/text.hpp"
#include "store/atomic_file.hpp"
#include "remote/into_cache.hpp"
#include "run/capture.hpp"
#include "run/interrupt.hpp"
#include "run/reporter.hpp"
#include "run/runner.hpp"
#include "stages/build_report.hpp"
#include "stages/pipeline.hpp"
#include "stages/reproducible.hpp"
#include "store/key_record.hpp"
#include "store/layout.hpp"
#include "store/wheels.hpp"
#include "validate/validate.hpp"

namespace archbuild::app {

namespace {

std::optional<std::string> env_of(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

// The validate stage: `archbuild validate` with the plan's own toolkit, host compiler and
// interpreter (so a broken toolkit or driver is found before the wheel is published): coverage,
// metadata, RECORD, the local label, the import test in a fresh venv, the smoke kernel.
// `pulled`: the wheel came from the build store, where its builder ran the checks that need no
// GPU; the smoke kernel is then compiled only where a GPU here can run it.
Result<nlohmann::json> validate_built(const std::filesystem::path& wheel, const plan::Plan& plan, const Session& s,
                                      const Show& show, bool pulled = false) {
  const auto& res = plan->resolution;
  validate::ValidateOptions o;
  o.libraries = &s.facts().wheel_libraries();
  o.host_dirs = s.facts().host_library_dirs();
  o.module = res.recipe.module;
  auto plus = plan->version.find('+');
  if (plus != std::string::npos) o.expected_label = plan->version.substr(plus + 1);
  validate::Gpus gpus = host_gpus(s.facts().arch());
  if (res.python) {
    validate::ImportSetup imp;
    imp.python = res.python->path;
    imp.module = res.recipe.module;
    imp.script = import_script();
    imp.gpus = gpus;
    import_beside_torch(plan, imp);
    o.import_test = imp;
  }
  if (res.toolkit) {
    validate::SmokeSetup smoke;
    smoke.nvcc = res.toolkit->nvcc;
    if (res.compiler) smoke.host_compiler = res.compiler->path;
    smoke.toolkit = fmt::format("CUDA {} at {}", res.toolkit->version.str(), res.toolkit->root.string());
    smoke.source = smoke_source();
    smoke.gpus = gpus;
    smoke.only_where_a_gpu_runs_it = pulled;
    o.smoke = smoke;
  }
  auto report = validate::validate_wheel(wheel, res.archs, o, capture_exec());
  // Ctrl-C while it ran: no verdict to print (the validate stage reports the interrupt).
  if (run::interrupt_requested()) return Error::build_failed("interrupted");
  if (!report) return report.error();
  if (!s.json && show.report) show.report(*report);
  if (report->exit() != Exit::ok) {
    std::vector<std::string> failed;
    for (const auto& c : report->checks)
      if (c.status == validate::Status::fail) failed.push_back(c.name + ": " + c.summary);
    return Error{report->exit(), fmt::format("validation of {} failed: {}", wheel.filename().string(),
                                             failed.empty() ? "a needed tool is missing" : text::join(failed, "; "))};
  }
  return report->to_json();
}

// A build that ends with `e` once a result document exists: the document gets "error" and
// "exit" (--json prints one document, never a second one).
BuildOutcome failed_with(nlohmann::json doc, const Error& e) {
  doc["error"] = e.message;
  doc["exit"] = static_cast<int>(e.exit);
  BuildOutcome o;
  o.doc = std::move(doc);
  o.error = e;
  if (o.doc.contains("key") && o.doc["key"].is_string()) o.key = o.doc["key"];
  return o;
}

stages::CompilerCache compiler_cache(const std::string& kind, const store::Layout& layout) {
  stages::CompilerCache cc;
  cc.kind = kind;
  if (kind == "none") return cc;
  if (auto p = run::find_program(kind)) cc.program = *p;
  // Configured by the user (CCACHE_DIR / SCCACHE_DIR) or archbuild's own under the cache.
  std::string var = kind == "ccache" ? "CCACHE_DIR" : "SCCACHE_DIR";
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string name(entry.substr(0, eq));
    for (const auto& prefix : stages::compiler_cache_env_prefixes)
      if (name.starts_with(prefix)) cc.settings[name] = std::string(entry.substr(eq + 1));
  }
  if (auto d = env_of(var)) cc.dir = *d;
  else cc.dir = layout.ccache_dir();
  return cc;
}

// The manifest's summary of where the build's hours went (stages/build_report), as nightly CI
// reads it; a reused key's from its manifest, null when that has none (built before it was kept).
nlohmann::json manifest_build_report(const nlohmann::json& key_record) {
  const nlohmann::json::json_pointer summary("/manifest/build_report");
  return key_record.contains(summary) ? key_record.at(summary) : nlohmann::json(nullptr);
}

// After a validated result (built now, or finished here before and missing from the store): the
// key pushed. A failure leaves the local result as it is and says what to retry.
void push_to_store(remote::BuildStore& store, const std::string& key, const stages::PipelineResult& res,
                   nlohmann::json& store_doc, const Session& s) {
  if (!res.manifest.value("validation", nlohmann::json()).is_object()) {
    store_doc["pushed"] = false;
    note(s, fmt::format("not pushed to {}: the wheel was not validated (--no-validate)", store.url().text()));
    return;
  }
  auto pushed = store.push(key, res.stored.path, res.filename, res.manifest.value("manifest", nlohmann::json()),
                           res.manifest["validation"], manifest_build_report(res.manifest));
  if (!pushed) {
    store_doc["pushed"] = false;
    store_doc["push_error"] = pushed.error().message;
    warn(s, fmt::format("pushing key {} to the build store failed: {}; the wheel is in --out and in the cache: run the "
                        "same `archbuild wheel` again to push it (the finished key is not rebuilt)",
                        key.substr(0, 16), pushed.error().message));
    return;
  }
  store_doc["pushed"] = pushed->pushed;
  store_doc["digest"] = pushed->digest;
  store_doc["signed"] = pushed->signed_;
  if (pushed->pushed)
    note(s, fmt::format("pushed key {} to {} ({}{})", key.substr(0, 16), store.url().text(), pushed->digest.substr(0, 19),
                        pushed->signed_ ? ", signed" : ""));
  else
    note(s, fmt::format("{} has key {} already (another host pushed it): kept", store.url().text(), key.substr(0, 16)));
}

run::ReporterKind reporter_kind(const std::string& progress) {
  if (progress == "tty") return run::ReporterKind::tty;
  if (progress == "plain") return run::ReporterKind::plain;
  if (progress == "json") return run::ReporterKind::json;
  return run::ReporterKind::automatic;
}

}  // namespace

Result<Ok> write_build_trace(const store::Layout& layout, const std::string& key, unsigned jobs,
                             const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    return Error::bad_input(fmt::format("--trace {}: is a directory; name the file to write, e.g. {}",
                                        text::quoted(file.string()), text::quoted((file / "trace.json").string())));
  // A FIFO, a device or a link there is refused, not replaced by the atomic write's rename.
  if (auto writable = paths::expect_writable_file(file, "--trace"); !writable) return writable.error();
  auto input = stages::load_report_input(layout, key, jobs);
  if (!input) return input.error();
  auto trace = stages::chrome_trace(*input, fmt::format("archbuild build {}", key.substr(0, 16)));
  auto written = store::write_file_atomic(std::filesystem::absolute(file), trace.dump());
  // Where the user asked it written is theirs: a file that cannot be written there is bad input.
  if (!written) return Error::bad_input(fmt::format("--trace {}: {}", text::quoted(file.string()), written.error().message));
  return written;
}

BuildOutcome build(const BuildArgs& args, const plan::Resolution& resolved, const plan::PlanOptions& budget,
                   std::optional<remote::BuildStore>& build_store, const Session& s, const Show& show) {
  // A cache directory a build cannot use, or an --out that cannot take the wheel, is bad input
  // now, not after the venv and the build (exit 2); `plan --check` stops at the same ones.
  if (auto stops = prepare::launch_stops(s.cache_dir, args.out); !stops.empty())
    return failed_with({{"ok", false}, {"key", nullptr}}, stops.front().error);
  if (auto tmp = tmpdir_rule(); !tmp) return failed_with({{"ok", false}, {"key", nullptr}}, tmp.error());
  // The --trace path too, before the build rather than after it (a FIFO, a device, a link).
  if (!args.trace.empty())
    if (auto writable = paths::expect_writable_file(args.trace, "--trace"); !writable)
      return failed_with({{"ok", false}, {"key", nullptr}}, writable.error());
  auto dir = store::choose_cache_dir(s.cache_dir).take();
  store::Layout layout(dir.dir);
  // The one answer (prepare/): the stops `plan` shows are the ones this build stops at, with
  // the same status; a finished key is only a copy, so it is not held to them.
  prepare::Request q = prepare_request(args.resolve, budget, args.jobs, args.offline, true, s.facts());
  prepare::Prepared prep = prepare_from_args(resolved, q, args.resolve, s).take();
  const plan::Plan& plan = prep.plan;
  const plan::Resolution& r = plan->resolution;  // the tree's release line may have chosen another recipe
  const plan::HostCheck& host = prep.host;
  for (const auto& n : prep.notes) note(s, "note: " + n);
  auto finished = store::KeyRecord(layout, plan->key).wheel();
  bool built_here = finished && *finished;
  // The shared build store, before the first stage: a key another host built is pulled, checked
  // and validated here, and no stage runs; a store that cannot be read is a warning (docs/store.md).
  nlohmann::json store_doc = nullptr;
  bool pulled = false, push_after = false;
  if (build_store) {
    StoreLookup l = look_up(*build_store, plan->key);
    store_doc = l.to_json(*build_store);
    store_doc["pulled"] = false;
    if (l.stops(*build_store))
      return failed_with({{"ok", false}, {"key", plan->key}, {"store", store_doc}},
                         prepare::store_required_stop(l.problem).error);
    if (l.state == StoreLookup::State::unreachable) {
      warn(s, fmt::format("the build store cannot be read ({}): building locally, nothing will be pushed", l.problem));
    } else if (l.state == StoreLookup::State::absent) {
      push_after = true;
    } else if (!built_here) {
      remote::ValidateFn check_here;
      if (!args.no_validate)
        check_here = [&prep, &s, &show](const std::filesystem::path& w) { return validate_built(w, prep.plan, s, show, true); };
      auto from = remote::pull_into_cache(*build_store, *l.manifest, plan->key, layout, check_here);
      if (from) {
        pulled = true;
        store_doc["pulled"] = true;
        store_doc["signed_by"] = (*from)["signed_by"];
      } else {
        store_doc["refused"] = from.error().message;
        warn(s, from.error().message + "; building locally");
      }
    }
  }
  if (!built_here && !pulled) {
    if (auto stop = prep.first_stop())
      return failed_with({{"ok", false}, {"key", plan->key}, {"libraries", plan::to_json(plan->libraries)},
                          {"host_check", host.to_json()}}, *stop);
  }
  for (const auto& c : plan->libraries.choices)
    if (c.state != plan::LibraryState::found && s.verbosity >= 0 && !s.json)
      note(s, "library " + plan::describe(c));

  stages::PipelineOptions opts;
  opts.libraries = &s.facts().wheel_libraries();
  opts.out_dir = std::filesystem::absolute(args.out);
  opts.offline = args.offline;
  opts.compiler_cache = compiler_cache(args.compiler_cache, layout);
  // CLI > environment: the shared compiler cache every build host points at.
  opts.compiler_cache.remote = !args.remote_cache.empty() ? args.remote_cache : env_of("ARCHBUILD_REMOTE_CACHE").value_or("");
  opts.getenv = env_of;
  opts.env_names = [] {
    std::vector<std::string> names;
    for (char** e = environ; e && *e; ++e) {
      std::string_view entry(*e);
      names.emplace_back(entry.substr(0, entry.find('=')));
    }
    return names;
  };
  opts.archbuild_version = ARCHBUILD_VERSION;
  opts.host_check = host.to_json();
  opts.archbuild_exe = self_executable();
  // The package stage rewrites RUNPATHs with it (stages/portable); absent: an error only then.
  opts.patchelf = run::find_program("patchelf").value_or(std::filesystem::path());
  if (!args.no_validate)
    opts.validate = [&plan, &s, &show](const std::filesystem::path& wheel) { return validate_built(wheel, plan, s, show); };
  if (args.compiler_cache != "none" && opts.compiler_cache.program.empty())
    warn(s, fmt::format("{} not found on PATH: building without a compiler cache", args.compiler_cache));

  auto reporter = run::make_reporter(run::choose_reporter(reporter_kind(args.progress), s.json), *s.err);
  if (s.verbosity >= 0 && !pulled)
    reporter->message(run::Level::info, fmt::format("building {} {} for {} (key {})", plan->resolution.recipe.package,
                                                    plan->version, plan->resolution.arch_list, plan->key.substr(0, 16)));

  run::InterruptGuard guard;
  run::ProcessRunner own;
  run::Runner& runner = s.runner ? *s.runner : own;
  auto result = stages::run_pipeline(plan, layout, runner, *reporter, opts);
  if (!result) return failed_with({{"ok", false}, {"key", plan->key}, {"store", store_doc}}, result.error());
  const auto& res = *result;
  if (push_after) push_to_store(*build_store, plan->key, res, store_doc, s);
  nlohmann::json trace = nullptr;  // --json: the file written, or null
  if (!args.trace.empty()) {  // the wheel is built: a trace that cannot be written is a warning
    if (auto t = write_build_trace(layout, plan->key, plan->jobs.jobs, args.trace); !t) warn(s, "--trace: " + t.error().message);
    else trace = std::filesystem::absolute(args.trace).string();
  }
  // --check-reproducible: the same plan again in a second cache directory, without compiler
  // cache or validation; any difference is named member by member, never hidden.
  nlohmann::json repro = nullptr;
  if (args.check_reproducible) {
    std::error_code ec;
    store::Layout other(layout.reproducibility_check_dir());
    std::filesystem::remove_all(other.root(), ec);
    stages::PipelineOptions o2 = opts;
    o2.out_dir = other.root() / "out";
    o2.compiler_cache.kind = "none";
    o2.validate = nullptr;
    reporter->message(run::Level::info, fmt::format("--check-reproducible: building the same plan again in {}", other.root().string()));
    auto again = stages::run_pipeline(plan, other, runner, *reporter, o2);
    if (!again) {
      std::filesystem::remove_all(other.root(), ec);
      return failed_with({{"ok", false}, {"wheel", res.out_wheel.string()}, {"key", plan->key}}, again.error());
    }
    bool same = again->stored.sha256 == res.stored.sha256;
    std::vector<std::string> differ;
    if (!same) differ = stages::differing_members(res.out_wheel, again->out_wheel);
    repro = {{"reproducible", same}, {"sha256", {res.stored.sha256, again->stored.sha256}}, {"differing_members", differ}};
    std::filesystem::remove_all(other.root(), ec);
    if (!same) {
      return failed_with({{"ok", false}, {"wheel", res.out_wheel.string()}, {"key", plan->key}, {"reproducibility", repro}},
                         Error::not_fine(fmt::format("not reproducible: two builds of key {} differ (sha256 {} vs {}) in {}",
                                                     plan->key.substr(0, 16), res.stored.sha256.substr(0, 16),
                                                     again->stored.sha256.substr(0, 16), text::join(differ, ", "))));
    }
    note(s, fmt::format("reproducible: a second build in another cache directory gave the same sha256 {}", res.stored.sha256));
  }
  nlohmann::json cc = nullptr;
  if (res.compiler_cache)
    cc = {{"hits", res.compiler_cache->hits},
          {"misses", res.compiler_cache->misses},
          {"remote_hits", res.compiler_cache->remote_hits},
          {"remote_misses", res.compiler_cache->remote_misses},
          {"remote", opts.compiler_cache.remote.empty() ? nlohmann::json(nullptr) : nlohmann::json(opts.compiler_cache.remote)}};
  BuildOutcome o;
  o.key = plan->key;
  o.wheel = res.out_wheel;
  o.sha256 = res.stored.sha256;
  o.from = pulled ? BuildOutcome::From::pulled : res.reused ? BuildOutcome::From::reused : BuildOutcome::From::built;
  o.build_report = manifest_build_report(res.manifest);
  o.doc = {{"ok", true},
           {"wheel", res.out_wheel.string()},
           {"sha256", res.stored.sha256},
           {"size", res.stored.size},
           {"key", plan->key},
           {"version", plan->version},
           {"arch_list", plan->resolution.arch_list},
           {"python", r.python ? nlohmann::json(r.python->version.str()) : nlohmann::json(nullptr)},
           {"reused", res.reused},
           {"build_start", res.manifest.value("/stages/fetch/build_start"_json_pointer, nlohmann::json())},
           {"stages_run", res.ran},
           {"stages_resumed_past", res.resumed_past},
           {"compiler_cache", cc},
           {"manifest", layout.manifest(plan->key).string()},
           {"validation", res.manifest.value("validation", nlohmann::json())},
           {"build_report", o.build_report},
           {"trace", trace},
           {"reproducibility", repro},
           {"libraries", plan::to_json(plan->libraries)},
           {"host_check", host.to_json()},
           {"store", store_doc}};
  if (s.json) return o;
  if (show.built) show.built(o);
  if (pulled)
    note(s, fmt::format("pulled key {} from {} ({}{}), validated here; no stage ran", plan->key.substr(0, 16),
                        build_store->url().text(), store_doc["digest"].get<std::string>().substr(0, 19),
                        store_doc["signed_by"].is_string() ? ", signed by " + store_doc["signed_by"].get<std::string>() : ""));
  else if (res.reused)
    note(s, fmt::format("reused the wheel built earlier for key {} (sha256 {})", plan->key.substr(0, 16),
                        res.stored.sha256.substr(0, 16)));
  else
    note(s, fmt::format("built {} (sha256 {}); manifest {}", res.filename, res.stored.sha256.substr(0, 16),
                        layout.manifest(plan->key).string()));
  if (res.compiler_cache)
    note(s, fmt::format("compiler cache: {} hits ({} from the shared storage), {} misses", res.compiler_cache->hits,
                        res.compiler_cache->remote_hits, res.compiler_cache->misses));
  return o;
}

std::vector<Interpreter> resolve_pythons(const BuildArgs& args, const Session& s, const ShowRefusal& refused) {
  std::vector<Interpreter> out;
  std::set<std::filesystem::path> seen;
  // "3.11,,3.12" or ",": an item left out is a typo, not "the default interpreter".
  if (!args.resolve.python.empty()) {
    const auto items = text::split_any(args.resolve.python, ",");
    std::size_t given = 0;
    for (const auto& item : items) given += !text::trim(item).empty();
    if (given == 0 || given != static_cast<std::size_t>(std::count(args.resolve.python.begin(), args.resolve.python.end(), ',')) + 1)
      throw Failure(Error::bad_input(fmt::format("--python {}: an empty item; give versions or paths separated by "
                                                 "commas, e.g. --python 3.11,3.12",
                                                 text::quoted(args.resolve.python))));
  }
  for (const auto& item : text::split_any(args.resolve.python, ",")) {
    ResolveArgs one = args.resolve;
    one.python = text::trim(item);
    if (one.python.empty()) continue;
    plan::Resolution r = resolve_from_args(one, s);
    if (r.status != Exit::ok) {
      if (!s.json && refused) refused(r);  // --json: the one document on stdout says it
      throw Failure({r.status, args.resolve.python.find(',') == std::string::npos
                                   ? r.message
                                   : fmt::format("--python {}: {} (nothing was built)", one.python, r.message)});
    }
    std::error_code ec;
    auto real = r.python ? std::filesystem::weakly_canonical(r.python->path, ec) : std::filesystem::path();
    if (!seen.insert(real).second) {
      note(s, fmt::format("--python {}: {} is already in the list, built once", one.python, real.string()));
      continue;
    }
    out.push_back({one.python, std::move(r)});
  }
  if (out.empty()) {
    // No --python: the default interpreter.
    ResolveArgs one = args.resolve;
    one.python.clear();
    plan::Resolution r = resolve_from_args(one, s);
    if (r.status != Exit::ok) {
      if (!s.json && refused) refused(r);
      throw Failure({r.status, r.message});
    }
    out.push_back({"", std::move(r)});
  }
  return out;
}

WheelsOutcome build_wheels(const BuildArgs& args, const Session& s, const Show& show, const ShowRefusal& refused) {
  plan::PlanOptions budget;  // bad input first, before anything is resolved
  memory_budget_from_args(args.resolve, budget);
  std::optional<remote::BuildStore> build_store = open_store(args.store);  // bad input before resolving
  auto pythons = resolve_pythons(args, s, refused);
  WheelsOutcome w;
  if (pythons.size() == 1) {
    w.builds.push_back(build(args, pythons.front().resolution, budget, build_store, s, show));
    w.doc = w.builds.front().doc;
    w.error = w.builds.front().error;
    return w;
  }
  // One wheel per interpreter, one after another: the native code does not depend on the
  // interpreter, so each later build's compiles are hits in the compiler cache the first filled
  // (CCACHE_BASEDIR maps the key trees' paths). The wheels built stay in --out and the exit
  // status is the worst.
  w.several = true;
  nlohmann::json wheels = nlohmann::json::array();
  std::vector<std::string> failed;
  Exit worst = Exit::ok;
  for (auto& [asked, r] : pythons) {
    if (s.verbosity >= 0 && !s.json)
      note(s, fmt::format("--python {}: Python {} at {}", asked, r.python->version.str(), r.python->path.string()));
    BuildOutcome o;
    try {
      o = build(args, r, budget, build_store, s, show);
    } catch (const Failure& f) {
      o = failed_with({{"ok", false}, {"python", r.python->version.str()}}, f.error);
    }
    o.doc["python_requested"] = asked;
    if (o.error) {
      error_line(s, fmt::format("--python {}: {}", asked, o.error->message));
      failed.push_back(asked);
      worst = std::max(worst, o.error->exit);
    }
    wheels.push_back(o.doc);
    w.builds.push_back(std::move(o));
    if (run::interrupt_requested()) break;  // Ctrl-C stops the list, not only the build under way
  }
  w.doc = {{"ok", failed.empty()}, {"wheels", wheels}};
  if (!failed.empty()) {
    w.error = Error{worst, fmt::format("no wheel for --python {}", text::join(failed, ", "))};
    w.doc["error"] = w.error->message;
    w.doc["exit"] = static_cast<int>(worst);
    if (!s.json)
      error_line(s, fmt::format("no wheel for --python {}; {} of {} built", text::join(failed, ", "),
                                wheels.size() - failed.size(), pythons.size()));
  }
  return w;
}

}  // namespace archbuild::app
