// archbuild plan --sm LIST [same options as resolve] [--jobs N] [--json]: the resolved recipe,
// source, toolkit and compiler paths, the full build environment, each step's argv, the build
// key, whether that key is already built, and — once its commit is in the mirror — the tree's
// contract (backend, requirements, cmake minimum, version, pins) checked against the plan.
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "cli/resolve_common.hpp"
#include "cli/store_common.hpp"
#include "app/planning.hpp"
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
  app::PlanArgs plan;
  bool check = false;             // --check: exit 3 where `wheel` would stop before starting
  std::vector<std::string> with;  // --with torchvision,torchaudio: the set (app/set)
};

// --check's verdict: every reason `wheel` would stop, as error lines, and the first one's status.
void check_verdict(const app::PlanView& v, Context& ctx) {
  if (!v.check()) return;
  for (const auto& st : v.stops) error_line(ctx, st.error.message);
  ctx.exit = v.check()->exit;
}

// The human block of one plan on stdout.
void print_plan(const app::PlanView& v, Context& ctx) {
  const plan::Plan& p = v.prep.plan;
  const plan::Resolution& r = p->resolution;  // the tree's release line may have chosen another recipe
  const prepare::TreeContract& tree = v.prep.tree;
  const plan::HostCheck& host = v.prep.host;
  const std::vector<std::string>& fetch_notes = v.prep.fetch_notes;
  const app::BuiltState& built = v.built;
  const std::string& venv_note = v.prep.venv_note;
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
    for (const auto& h : v->from_venv) out(fmt::format("  by the venv   {}", h));
    for (const auto& h : v->from_system) out(fmt::format("  NOT from pip  {}", h));
    out(fmt::format("  packages from {}", text::join(v->sources, "; ")));
    out(fmt::format("  cmake         {}", v->cmake.empty() ? fmt::format("the host's ({})", v->cmake_version.value_or("?"))
                                                           : fmt::format("{} {}", v->cmake.string(), v->cmake_version.value_or("?"))));
    std::vector<std::string> shaping;
    for (const auto& n : plan::binary_shaping_packages())
      if (auto it = v->packages.find(n); it != v->packages.end()) shaping.push_back(n + " " + it->second);
    out(fmt::format("  in the key    {}", shaping.empty() ? "(none of numpy, cmake, ninja, setuptools, scikit-build-core, torch)"
                                                          : text::join(shaping, ", ")));
  } else {
    out("build venv " + venv_note);
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
  if (v.in_store)
    out("store      " + v.in_store->line(*v.store, p->key) +
        (p->venv ? "" : " (this key is provisional until the tree is fetched; `wheel` looks up the final one)"));
  for (const auto& st : v.stops) out("would stop " + st.error.message);
  out("steps (cwd relative to the source tree):");
  for (const auto& s : p->steps) out(fmt::format("  {:<10} [{}] {}", recipe::to_string(s.stage), s.cwd, text::join(s.argv(), " ")));
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
  if (!p->patches.empty())
    out(fmt::format("patches (applied in this order to {}, before configure; in the key):",
                    p->local ? "archbuild's copy of the local tree (never the tree itself)" : "the checkout after fetch"));
  for (std::size_t i = 0; i < p->patches.size(); ++i) {
    const auto& pp = p->patches[i];
    const auto& states = v.prep.patch_states;
    out(fmt::format("  {}. {} sha256 {} -p{} from {} ({}; {}): {}", i + 1, pp.patch.name(), pp.patch.sha256, pp.patch.strip,
                    pp.patch.from.empty() ? "(not said)" : pp.patch.from, pp.patch.origin, pp.why,
                    i < states.size() ? states[i] : std::string("not checked yet (the tree is not mirrored)")));
  }
  out(fmt::format("build dir  {}", p->build_dir));
  const auto& start = p->build_start;
  if (start.mode == plan::BuildStart::Mode::incremental)
    out(fmt::format("build tree incremental from key {}{}", start.from_key,
                    start.from_key == p->key ? " (this key's own build tree)" : " (its build tree: ninja rebuilds what changed)"));
  else
    out(fmt::format("build tree clean: {}", start.why));
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
      out(fmt::format("  check {:<14} {}  {}", rules::name(f.rule), f.ok ? "ok    " : "REFUSE", f.message));
  } else {
    out("contract   " + tree.note);
  }
  if (ctx.verbosity > 0) print_resolution(r, ctx);
  for (const auto& n : r.notes) note(ctx, "note: " + n);
  for (const auto& n : v.prep.notes) note(ctx, "note: " + n);
}

// `plan --with` (or a dependent's recipe on its own): each member of the set planned (app::plan_set).
void plan_set(const PlanArgs& args, const plan::PlanOptions& budget, Context& ctx) {
  nlohmann::json plans = nlohmann::json::array();
  Exit worst = Exit::ok;
  app::plan_set(
      args.plan, args.with, budget, ctx, [&ctx](const plan::Resolution& r) { print_resolution(r, ctx); },
      [&](const app::MemberPlan& mp) {
        const app::SetMember& m = mp.member;
        const recipe::Recipe& rc = m.resolution.recipe;
        const bool dependent = m.role == app::SetMember::Role::dependent;
        Context mctx = ctx;
        mctx.exit = Exit::ok;
        if (!ctx.json) {
          if (!dependent) out(fmt::format("== torch      {} {} ({})", rc.package, rc.version.str(), rc.name));
          else out(fmt::format("== dependent  {} {} ({}): {}", rc.package, rc.version.str(), rc.name, app::pairing_text(m, mp.torch)));
          print_plan(mp.view, mctx);
        }
        if (args.check) check_verdict(mp.view, mctx);
        worst = std::max(worst, mctx.exit);
        if (!ctx.json) return;
        nlohmann::json entry = mp.view.to_json();
        entry["role"] = m.role_name();
        if (dependent) {
          entry["pairs_with"] = app::pairing_json(m, mp.torch);
          entry["torch_wheel"] = mp.args.resolve.torch_wheel.empty() ? nlohmann::json(nullptr)
                                                                      : nlohmann::json(mp.args.resolve.torch_wheel);
        }
        plans.push_back(std::move(entry));
      });
  ctx.exit = worst;
  if (ctx.json) print_json({{"ok", worst == Exit::ok}, {"plans", plans}});
}

void run_plan(const PlanArgs& args, Context& ctx) {
  plan::PlanOptions budget;  // bad input first, before anything is resolved
  app::memory_budget_from_args(args.plan.resolve, budget);
  if (app::asks_for_set(args.plan.resolve, args.with, ctx.facts())) return plan_set(args, budget, ctx);
  plan::Resolution r = app::resolve_from_args(args.plan.resolve, ctx);
  if (r.status != Exit::ok) {
    if (ctx.json)
      print_json({{"resolution", plan::to_json(r)}, {"error", r.message}, {"exit", static_cast<int>(r.status)}});
    else
      print_resolution(r, ctx);
    error_line(ctx, r.message);
    ctx.exit = r.status;
    return;
  }
  const app::PlanView v = app::plan_one(args.plan, r, budget, ctx);
  if (ctx.json) print_json(v.to_json());
  else print_plan(v, ctx);
  if (args.check) check_verdict(v, ctx);
}

}  // namespace

void add_plan_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Resolve, then show the full build: environment, each step's argv, the build key and whether it is built");
  add_resolve_options(*cmd, args->plan.resolve);
  add_plan_options(*cmd, args->plan.resolve);
  add_store_options(*cmd, args->plan.store, false);
  cmd->add_option("--jobs", args->plan.jobs, "Parallel jobs (default: from cores and memory, ~4 GiB per nvcc job)")
      ->check(CLI::Range(1u, 4096u));
  cmd->add_flag("--offline", args->plan.offline, "Resolve --ref with the cache's git mirrors only, and give the build venv's pip no index (--find-links only); never connect");
  cmd->add_option("--out", args->plan.out,
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
