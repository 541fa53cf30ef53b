// archbuild plan --sm LIST [same options as resolve] [--jobs N] [--json]: the resolved recipe,
// source, toolkit and compiler paths, the full build environment, each step's argv, the build
// key, whether that key is already built, and — once its commit is in the mirror — the tree's
// contract (backend, requirements, cmake minimum, version, pins) checked against the plan.
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "cli/resolve_common.hpp"
#include "cli/store_common.hpp"
#include "cli/stack.hpp"
#include "contract/contract.hpp"
#include "core/text.hpp"
#include "source/source.hpp"
#include "stages/pipeline.hpp"
#include "store/key_record.hpp"
#include "store/layout.hpp"
#include "store/wheels.hpp"

namespace archbuild::cli {

namespace {

struct PlanArgs {
  ResolveArgs resolve;
  unsigned jobs = 0;
  bool offline = false;
  bool check = false;  // --check: exit 3 where `wheel` would stop before starting
  std::string out = "dist";  // --out DIR: where `wheel` would put the wheel (checked as it checks it)
  std::vector<std::string> with;  // --with torchvision,torchaudio: the set (cli/stack)
  // Why no build venv is made for this plan (a dependent whose torch is not built yet); empty: made.
  std::string no_venv_because;
  StoreArgs store;  // --store URL: whether the shared build store has the key (docs/store.md)
};

// One plan shown: its document (printed by the caller under --json; humans got their block), and
// the wheel its key already built.
struct Planned {
  nlohmann::json doc;
  std::optional<store::WheelRef> built_wheel;
};

struct Built {
  std::optional<std::filesystem::path> manifest;  // keys/<key>.json, when the cache dir is known
  bool manifest_exists = false;
  std::optional<store::WheelRef> wheel;           // the finished wheel it records, present in the cache
  std::string problem;                            // why it could not be told
};

// Whether the key is built: its manifest (keys/<key>.json) records a finished wheel. Read only;
// store/ decides where the cache is and what its files say.
Built built_state(const Context& ctx, const std::string& key) {
  Built b;
  auto dir = store::choose_cache_dir(ctx.cache_dir);
  if (!dir) {
    b.problem = dir.error().message;
    return b;
  }
  store::Layout layout(dir->dir);
  store::KeyRecord rec(layout, key);
  b.manifest = rec.path();
  b.manifest_exists = rec.exists();
  if (b.manifest_exists) {
    auto w = rec.wheel();
    std::error_code ec;
    if (!w) b.problem = w.error().message;
    else if (*w && std::filesystem::is_regular_file(layout.wheel((*w)->sha256), ec)) b.wheel = *w;
  }
  return b;
}

// The plan of a resolution, shown: the human block on stdout, or its document returned (--json).
// --check's verdict goes to ctx.exit.
Planned plan_resolved(const PlanArgs& args, const plan::Resolution& resolved, const plan::PlanOptions& budget, Context& ctx) {
  // The one answer: what prepare() says would stop `wheel` is what `plan` shows and --check
  // exits with (the first stop's status, as `wheel` would).
  prepare::Request q = prepare_request(args.resolve, budget, args.jobs, args.offline, false);
  q.no_venv_because = args.no_venv_because;
  prepare::Prepared prep = prepare_from_args(resolved, q, args.resolve, ctx).take();
  const plan::Plan& p = prep.plan;
  const plan::Resolution& r = p->resolution;  // the tree's release line may have chosen another recipe
  const prepare::TreeContract& tree = prep.tree;
  const plan::HostCheck& host = prep.host;
  const std::vector<std::string>& fetch_notes = prep.fetch_notes;
  if (!p->venv && prep.venv_note.starts_with("cannot be made")) warn(ctx, "build venv " + prep.venv_note);
  Built built = built_state(ctx, p->key);
  if (!built.problem.empty()) warn(ctx, "cannot tell whether the key is built: " + built.problem);
  // The shared build store: a key it has is pulled by `wheel`, which then stops at nothing.
  std::optional<StoreLookup> in_store;
  std::optional<remote::BuildStore> build_store = open_store(args.store);
  if (build_store) in_store = look_up(*build_store, p->key);
  bool pullable = in_store && in_store->state == StoreLookup::State::present;
  // `wheel` stops first, built key or not, where a required store cannot be read (cli/wheel.cpp),
  // with the same message and status.
  std::vector<prepare::Stop> stops = prep.stops;
  const bool store_stop =
      in_store && in_store->state == StoreLookup::State::unreachable && build_store->config().required;
  if (store_stop)
    stops.insert(stops.begin(), prepare::Stop{"store-required", Error::missing_tool(fmt::format("--store-required: {}", in_store->problem))});
  // Before all of them, built key or not: the cache directory and --out (`wheel` checks them first).
  const std::vector<prepare::Stop> launch = launch_stops(ctx, args.out);
  stops.insert(stops.begin(), launch.begin(), launch.end());
  const bool nothing_to_build = launch.empty() && !store_stop && (built.wheel || pullable);
  std::vector<Error> blockers;
  for (const auto& st : stops) blockers.push_back(st.error);
  Planned shown;
  shown.built_wheel = built.wheel;
  auto finish = [&] {
    if (!args.check || blockers.empty() || nothing_to_build) return;
    for (const auto& b : blockers) error_line(ctx, b.message);
    ctx.exit = blockers.front().exit;  // `wheel` stops at the first, with its status
  };

  if (ctx.json) {
    auto doc = p.to_json();
    doc["built"] = built.wheel.has_value();
    doc["manifest"] = built.manifest ? nlohmann::json(built.manifest->string()) : nlohmann::json(nullptr);
    doc["manifest_exists"] = built.manifest_exists;
    doc["wheel"] = built.wheel ? nlohmann::json{{"sha256", built.wheel->sha256}, {"filename", built.wheel->filename},
                                                {"size", built.wheel->size}}
                               : nlohmann::json(nullptr);
    nlohmann::json c = {{"available", tree.contract.has_value()}};
    if (tree.contract) {
      c.update(contract::to_json(*tree.contract));
      c["commit"] = tree.commit;
      c["checks"] = contract::to_json(tree.findings);
    } else {
      c["note"] = tree.note;
    }
    doc["contract"] = c;
    doc["host_check"] = host.to_json();
    nlohmann::json b = nlohmann::json::array();
    for (const auto& e : blockers) b.push_back(e.message);
    doc["ready"] = blockers.empty();
    doc["blockers"] = b;
    nlohmann::json stops_doc = nlohmann::json::array();
    for (const auto& st : stops)
      stops_doc.push_back({{"rule", st.rule}, {"exit", static_cast<int>(st.error.exit)}, {"message", st.error.message}});
    doc["stops"] = stops_doc;
    doc["would_exit"] = nothing_to_build || stops.empty() ? 0 : static_cast<int>(stops.front().error.exit);
    doc["store"] = in_store ? in_store->to_json(*build_store) : nlohmann::json(nullptr);
    // Before the tree is fetched the key lacks the build venv's versions: `wheel` looks up the final one.
    if (in_store) doc["store"]["key_final"] = p->venv.has_value();
    doc["fetch_notes"] = fetch_notes;
    doc["notes"] = prep.notes;
    if (!p->venv) doc["build_venv_note"] = prep.venv_note;
    shown.doc = std::move(doc);
    finish();
    return shown;
  }
  const auto& rc = r.recipe;
  out(fmt::format("plan       {} {} from {}", rc.package, p->version, rc.name));
  out(fmt::format("recipe     {}", rc.file.string()));
  if (p->local)
    out(fmt::format("source     local tree {} ({} files, content {}){}", p->local->dir.string(), p->local->files,
                    p->local->content_hash.substr(0, 12), p->local->head ? ", in a repository at " + p->local->head->substr(0, 12) : ""));
  else if (p->ref != p->tag)
    out(fmt::format("source     {} @ {} = commit {}", p->url, p->ref, p->commit.value_or(p->tag)));
  else
    out(fmt::format("source     {} @ {}{}{}", p->url, p->tag, p->commit ? " (commit " + *p->commit + ")" : "",
                    p->submodules ? ", submodules recursive" : ""));
  out(fmt::format("toolkit    CUDA {} at {} (nvcc {})", r.toolkit->version.str(), r.toolkit->root.string(),
                  r.toolkit->compiler_version().str()));
  out(fmt::format("compiler   {} at {}", r.compiler->name(), r.compiler->path.string()));
  out(fmt::format("python     {} at {}", r.python->version.str(), r.python->path.string()));
  if (const auto& v = p->venv) {
    out(fmt::format("build venv {} ({}; from {} {})", v->dir.string(), v->reused ? "reused" : "made now", v->interpreter,
                    v->interpreter_version));
    out(fmt::format("  requirements  {}", v->requirements.empty() ? "(none)" : text::join(v->requirements, " ")));
    for (const auto& h : v->from_host) out(fmt::format("  from the host {}", h));
    out(fmt::format("  packages from {}", text::join(v->sources, "; ")));
    out(fmt::format("  cmake         {}", v->cmake.empty() ? fmt::format("the host's ({})", v->cmake_version.value_or("?"))
                                                           : fmt::format("{} {}", v->cmake.string(), v->cmake_version.value_or("?"))));
    std::vector<std::string> shaping;
    for (const auto& n : plan::binary_shaping_packages())
      if (auto it = v->packages.find(n); it != v->packages.end()) shaping.push_back(n + " " + it->second);
    out(fmt::format("  in the key    {}", shaping.empty() ? "(none of numpy, cmake, ninja, setuptools, scikit-build-core, torch)"
                                                          : text::join(shaping, ", ")));
  } else {
    out("build venv " + prep.venv_note);
  }
  out(fmt::format("arch list  {}={}", rc.arch.env, r.arch_list));
  out(fmt::format("jobs       {}", p->jobs.rule()));
  out(fmt::format("admission  {}", p->admission.rule()));
  out("environment:");
  for (const auto& [k, v] : p->env)
    out(fmt::format("  {}={}{}", k, v.value, v.keyed ? "" : fmt::format("    (not in key: {})", v.why)));
  // The allowlist, and what of it this shell would pass now.
  out(fmt::format("  from the caller's environment (allowlist, not in key): {}", text::join(p->passthrough, " ")));
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq);
    if (plan::env_allowed(p->passthrough, name) && !p->env.count(name) && name != "HOME" && name != "USER" &&
        name != "LOGNAME")
      out(fmt::format("    {} (set now; its value passes)", name));
  }
  if (!p->libraries.empty()) {
    out("libraries (* optional):");
    for (const auto& c : p->libraries.choices) out("  " + plan::describe(c));
  }
  out(fmt::format("host       disk: {} free in the cache{}; memory: {:.1f} GiB available{}",
                  host.free_disk_gib ? fmt::format("{:.1f} GiB", *host.free_disk_gib) : std::string("unknown"),
                  host.need_disk_gib > 0 ? fmt::format(", {:g} GiB needed", host.need_disk_gib) : std::string(),
                  host.mem_available_gib,
                  host.job_memory_gib > 0 ? fmt::format(", {} jobs x {:g} GiB needed", host.jobs, host.job_memory_gib)
                                          : std::string()));
  if (in_store)
    out("store      " + in_store->line(*build_store, p->key) +
        (p->venv ? "" : " (this key is provisional until the tree is fetched; `wheel` looks up the final one)"));
  for (const auto& b : blockers) out("would stop " + b.message);
  out("steps (cwd relative to the source tree):");
  for (const auto& s : p->steps) out(fmt::format("  {:<10} [{}] {}", s.stage, s.cwd, text::join(s.argv(), " ")));
  if (!p->fetches.empty()) {
    out("fetches (what the build would download; archbuild fetches them through its mirrors before configure):");
    for (const auto& f : p->fetches) {
      if (!f.active())
        out(fmt::format("  {:<10} not fetched: {} (the build would not download it)", f.name, f.disabled_by));
      else if (f.resolved())
        out(fmt::format("  {:<10} {} @ {} = commit {} -> {}  (pinned by {})", f.name, f.url, f.ref, f.commit, f.path,
                        f.pin_file));
      else
        out(fmt::format("  {:<10} {} -> {}  (pinned by {}; not resolved yet)", f.name, f.url, f.path,
                        text::join(f.pin_files, " or ")));
    }
    for (const auto& n : fetch_notes) note(ctx, "note: " + n);
  }
  out(fmt::format("build dir  {}", p->build_dir));
  out(fmt::format("wheel dir  {}", p->wheel_dir.empty() ? "(none: the cmake driver makes no wheel)" : p->wheel_dir));
  bool unresolved = std::any_of(p->fetches.begin(), p->fetches.end(),
                                [](const plan::FetchPlan& f) { return f.active() && !f.resolved(); });
  out(fmt::format("build key  {}{}", p->key, unresolved ? " (provisional: a fetch's commit is not resolved yet)" : ""));
  if (built.wheel)
    out(fmt::format("built      yes: {} (sha256 {}), recorded in {}", built.wheel->filename, built.wheel->sha256,
                    built.manifest->string()));
  else if (built.manifest)
    out(fmt::format("built      no{} ({})", built.manifest_exists ? " (a run started but left no wheel)" : "",
                    built.manifest->string()));
  else
    out("built      unknown (no cache directory)");
  if (tree.contract) {
    out(tree.commit.empty() ? fmt::format("contract   the local tree {}:", tree.origin)
                            : fmt::format("contract   the tree at {} (read from the mirror):", tree.commit.substr(0, 12)));
    for (const auto& l : contract::describe(*tree.contract)) out("  " + l);
    for (const auto& f : tree.findings)
      out(fmt::format("  check {:<14} {}  {}", f.rule, f.ok ? "ok    " : "REFUSE", f.message));
  } else {
    out("contract   " + tree.note);
  }
  if (ctx.verbosity > 0) print_resolution(r, ctx);
  for (const auto& n : r.notes) note(ctx, "note: " + n);
  for (const auto& n : prep.notes) note(ctx, "note: " + n);
  finish();
  return shown;
}

// `plan --with` (or a dependent's recipe on its own): the set resolved as `wheel` resolves it
// (cli/stack), then each member planned, torch first. A dependent's key holds the torch wheel it
// is built against: when torch's key is built, its wheel in the cache is that wheel; else the
// dependent's build venv is not made (pip would fetch another torch) and its key is provisional.
void plan_set(const PlanArgs& args, const plan::PlanOptions& budget, Context& ctx) {
  std::vector<StackMember> set = resolve_set(args.resolve, args.with, ctx);  // a refused pair throws (exit 2)
  nlohmann::json plans = nlohmann::json::array();
  std::optional<std::filesystem::path> torch_wheel;
  Exit worst = Exit::ok;
  for (const auto& m : set) {
    PlanArgs a = args;
    a.resolve = m.args;
    a.with.clear();
    const recipe::Recipe& rc = m.resolution.recipe;
    std::string pairing = m.role == "dependent" ? pairing_text(m, set.front()) : "";
    if (m.role == "dependent") {
      if (torch_wheel)
        a.resolve.torch_wheel = torch_wheel->string();
      else
        a.no_venv_because = fmt::format("made once {} is built: its wheel is installed into it and its sha256 is in "
                                        "this key (the key shown is provisional until then)",
                                        set.front().resolution.recipe.name);
    }
    if (!ctx.json) {
      if (m.role == "torch") out(fmt::format("== torch      {} {} ({})", rc.package, rc.version.str(), rc.name));
      else out(fmt::format("== dependent  {} {} ({}): {}", rc.package, rc.version.str(), rc.name, pairing));
    }
    Context mctx = ctx;
    mctx.exit = Exit::ok;
    Planned shown = plan_resolved(a, m.resolution, budget, mctx);
    worst = std::max(worst, mctx.exit);
    if (m.role == "torch" && shown.built_wheel) {
      // Under its own name, as pip needs it for the dependents' build venvs.
      auto dir = store::choose_cache_dir(ctx.cache_dir).take();
      auto named = store::named_wheel(store::Layout(dir.dir), shown.built_wheel->sha256, shown.built_wheel->filename);
      if (named) torch_wheel = *named;
      else warn(ctx, "torch's built wheel cannot be named in the cache: " + named.error().message);
    }
    if (!ctx.json) continue;
    nlohmann::json entry = std::move(shown.doc);
    entry["role"] = m.role;
    if (m.role == "dependent") {
      entry["pairs_with"] = pairing_json(m, set.front());
      entry["torch_wheel"] = a.resolve.torch_wheel.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.resolve.torch_wheel);
    }
    plans.push_back(std::move(entry));
  }
  ctx.exit = worst;
  if (ctx.json) print_json({{"ok", worst == Exit::ok}, {"plans", plans}});
}

void run_plan(const PlanArgs& args, Context& ctx) {
  plan::PlanOptions budget;  // bad input first, before anything is resolved
  memory_budget_from_args(args.resolve, budget);
  if (asks_for_set(args.resolve, args.with)) return plan_set(args, budget, ctx);
  plan::Resolution r = resolve_from_args(args.resolve, ctx);
  if (r.status != Exit::ok) {
    if (ctx.json)
      print_json({{"resolution", plan::to_json(r)}, {"error", r.message}, {"exit", static_cast<int>(r.status)}});
    else
      print_resolution(r, ctx);
    error_line(ctx, r.message);
    ctx.exit = r.status;
    return;
  }
  Planned shown = plan_resolved(args, r, budget, ctx);
  if (ctx.json) print_json(shown.doc);
}

}  // namespace

void add_plan_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Resolve, then show the full build: environment, each step's argv, the build key and whether it is built");
  add_resolve_options(*cmd, args->resolve);
  add_plan_options(*cmd, args->resolve);
  add_store_options(*cmd, args->store, false);
  cmd->add_option("--jobs", args->jobs, "Parallel jobs (default: from cores and memory, ~4 GiB per nvcc job)")
      ->check(CLI::Range(1u, 4096u));
  cmd->add_flag("--offline", args->offline, "Resolve --ref with the cache's git mirrors only, and give the build venv's pip no index (--find-links only); never connect");
  cmd->add_option("--out", args->out,
                  "The directory `wheel --out` would put the wheel in (default: dist): checked as `wheel` checks it")
      ->type_name("DIR");
  cmd->add_flag("--check", args->check,
                "Exit with `wheel`'s status where it would stop before starting, at the same first reason: 2 for "
                "bad input (an --out or cache directory it cannot use, a tree of another release line), 3 for what "
                "this host lacks (an expected library, disk or memory, naming the figures)");
  cmd->add_option("--with", args->with, "Plan these too, against the torch of this command: torchvision,torchaudio "
                  "(as `wheel --with`: each paired with the torch by its recipe; one plan per member)");
  add_json_flag(*cmd, ctx);
  cmd->callback([args, &ctx] { run_plan(*args, ctx); });
}

}  // namespace archbuild::cli
