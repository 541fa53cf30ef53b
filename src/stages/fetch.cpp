// The fetch stage: the source tree (a checkout of the planned commit through archbuild's git
// mirrors, or archbuild's own copy of a local tree), the downloads the tree's build would make
// placed from the mirrors, and the tree's contract checked against the plan. Stamp: the commit
// (or the local tree's content hash), its time, submodules, placed fetches, the contract.
#include <chrono>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "run/interrupt.hpp"
#include "source/local.hpp"
#include "stages/build_start.hpp"
#include "stages/local_tree.hpp"
#include "recipe/driver.hpp"
#include "store/key_record.hpp"
#include "store/lock.hpp"
#include "store/tree_cache.hpp"
#include "stages/stage.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

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

Result<std::vector<source::Patch>> patches_to_apply(const std::vector<plan::PatchPlan>& patches) {
  std::vector<source::Patch> out;
  for (const auto& pp : patches) {
    auto text = recipe::read_patch(pp.patch);
    if (!text) return text.error();
    out.push_back({pp.patch.name(), std::move(*text), pp.patch.strip});
  }
  return out;
}

namespace {

// What the tree's build would download, placed where it looks before anything runs: a checkout
// of the planned commit from archbuild's mirror (its objects borrowed, as the tree's are), so the
// build finds it and fetches nothing, and `--offline` needs only the mirrors.
Result<json> place_fetches(Context& ctx) {
  const auto& plan = ctx.plan;
  json placed = json::array();
  for (const auto& f : plan->fetches) {
    if (!f.active()) continue;
    if (!f.resolved())
      return Error::bad_input(fmt::format("fetch {}: the commit {} names was not resolved before planning; run "
                                          "`archbuild wheel` (it resolves it)", f.name, f.pin_file));
    fs::path target = ctx.src / f.path;
    std::error_code ec;
    if (fs::exists(target, ec) || fs::is_symlink(target, ec)) {
      if (!fs::is_directory(fs::symlink_status(target, ec)) || !fs::is_empty(target, ec))
        return Error::bad_input(fmt::format(
            "{}: the tree already has {}, where [[fetch]] {} would go; the build would not download it: drop that "
            "[[fetch]] from {} for this tree", ctx.src.string(), f.path, f.name, plan->resolution.recipe.file.string()));
      fs::remove(target, ec);
    }
    fs::create_directories(target.parent_path(), ec);
    source::SourceOptions so = ctx.source_options();
    so.submodules = f.submodules;
    ctx.reporter.message(run::Level::info, fmt::format("fetch {}: {} @ {} ({}) into {}", f.name, f.url, f.ref,
                                                       f.commit.substr(0, 12), f.path));
    auto co = source::fetch_source({f.url, f.commit, f.commit}, target, ctx.mirror_for(), so);
    if (!co) {
      std::string msg = fmt::format("fetch {} ({} @ {}, pinned by {}): {}", f.name, f.url, f.ref, f.pin_file,
                                    co.error().message);
      return ctx.options.offline ? Error::missing_tool(msg) : Error{co.error().exit, msg};
    }
    json subs = json::array();
    for (const auto& s : co->submodules) subs.push_back({{"path", s.path}, {"url", s.url}, {"commit", s.commit}});
    placed.push_back({{"name", f.name}, {"path", f.path}, {"url", f.url}, {"pin_file", f.pin_file},
                      {"ref", f.ref}, {"commit", co->commit}, {"submodules", subs}});
  }
  return placed;
}

// The tree's contract, read once after fetch and checked against the plan before configure:
// a contradiction (exit 2/3) stops the build; it never changes the plan.
Result<json> tree_contract(const Context& ctx) {
  auto c = contract::read_contract(contract::directory_access(ctx.src));
  if (!c) return c.error();
  auto findings = contract::check(*c, contract_expectation(ctx.plan));
  if (auto e = contract::first_contradiction(findings, ctx.src.string())) return *e;
  json j = contract::to_json(*c);
  j["checks"] = contract::to_json(findings);
  return j;
}

// A test's window between two patches, where it kills the run (tests/cli/test_patch_cli.cpp).
std::function<void(const std::string&)> with_test_pause(std::function<void(const std::string&)> note) {
  const char* f = std::getenv("ARCHBUILD_TEST_FAULT");
  if (!f || std::string_view(f) != "pause-between-patches") return note;
  return [inner = std::move(note)](const std::string& n) {
    if (inner) inner(n);
    if (n.starts_with("patch 2/")) std::this_thread::sleep_for(std::chrono::seconds(60));
  };
}

// The patches as the fetch stamp records them (applied or contained), each contained one said.
json patch_stamp(Context& ctx, const std::vector<source::PatchOutcome>& outcomes) {
  json applied = json::array();
  for (std::size_t i = 0; i < outcomes.size() && i < ctx.plan->patches.size(); ++i) {
    const auto& pp = ctx.plan->patches[i];
    bool contained = outcomes[i].fit == source::PatchOutcome::Fit::contained;
    if (contained)
      ctx.reporter.message(run::Level::info, fmt::format("patch {}: already contained in the tree; not applied", pp.patch.name()));
    applied.push_back({{"name", pp.patch.name()}, {"sha256", pp.patch.sha256}, {"strip", pp.patch.strip},
                       {"from", pp.patch.from}, {"state", contained ? "contained" : "applied"}});
  }
  return applied;
}

struct LocalCopy {
  std::string from_key;  // the key whose copy it started from; empty: a fresh copy
  std::size_t kept = 0, written = 0, removed = 0;
  plan::BuildStart start;  // what the build tree is: clean, or the earlier key's it continues
  std::vector<source::PatchOutcome> patches;  // one per plan patch: applied or contained
};

// The key's copy of a local tree in its slot (work/<slot>/src, docs/architecture.md "A local
// tree"): it starts from the copy the slot holds (the last key built there), writes only what
// differs and, for an incremental build, leaves the build tree as that key's build left it (its
// unchanged sources keep their mtimes, so ninja rebuilds what changed). The slot's lock is held.
Result<LocalCopy> copy_into_slot(Context& ctx, const source::LocalTree& tree, const std::vector<source::Patch>& patches) {
  if (ctx.slot.empty()) return Error::bad_input("a local tree's plan without its work place (plan::incremental_slot)");
  LocalCopy out;
  source::CopyReuse reuse;
  std::error_code ec;
  const bool own = fs::is_directory(fs::symlink_status(ctx.src, ec));
  out.start = effective_build_start(ctx.plan->build_start, ctx.layout, ctx.slot, ctx.key, ctx.launchers());
  if (out.start.mode != ctx.plan->build_start.mode)
    ctx.reporter.message(run::Level::info, "a clean build tree: " + out.start.why);
  if (out.start.mode == plan::BuildStart::Mode::incremental && !own) {
    out.start = {plan::BuildStart::Mode::clean, "", "the work place holds no tree", ctx.slot};
  }
  // The copy to start from: the slot's own; else, for a slot's first key, the place of the slot
  // last copied from this folder (trees/<hash>.last; another configuration's), taken whole when
  // no build holds it: its build tree is removed with what the tree lacks, as another key's.
  std::optional<store::FileLock> other_lock;
  std::string other_slot;
  fs::path previous = ctx.src;
  std::optional<plan::EarlierBuild> earlier = earlier_build(ctx.layout, ctx.slot);
  if (!own) {
    previous.clear();
    if (auto last = store::read_last_checkout(ctx.layout, tree.root); last && *last != ctx.slot) {
      fs::path dir = ctx.layout.work_source(*last);
      auto lock = store::FileLock::try_acquire(ctx.layout.work_lock(*last));
      if (lock && *lock && fs::is_directory(fs::symlink_status(dir, ec))) {
        other_lock = std::move(**lock);
        other_slot = *last;
        previous = dir;
        earlier = earlier_build(ctx.layout, other_slot);
      }
    }
  }
  fs::path previous_root;
  if (!previous.empty()) {
    previous_root = fs::canonical(previous, ec);
    if (!ec) {
      reuse.previous = previous;
      reuse.cache.previous = store::read_tree_stat_cache(ctx.layout, previous_root);
      reuse.cache.recorded_root = previous_root;
      if (earlier) out.from_key = earlier->key;
    }
  }
  if (out.start.mode == plan::BuildStart::Mode::incremental) {
    reuse.keep.push_back(ctx.plan->build_dir);
    for (const auto& f : recipe::driver_spec(ctx.plan->resolution.recipe.driver).half_configured.state_files)
      reuse.keep.push_back(f);
  }
  // A slot names no key while its tree is neither that key's nor this one's.
  std::error_code rec;
  fs::remove(ctx.layout.work_state(ctx.slot), rec);
  if (!other_slot.empty()) fs::remove(ctx.layout.work_state(other_slot), rec);
  auto copied = source::copy_local_tree(tree, ctx.src, [] { return run::interrupt_requested(); }, &reuse);
  other_lock.reset();
  if (!copied) return copied.error();
  if (!reuse.reused) out.from_key.clear();
  out.kept = reuse.kept;
  out.written = reuse.written;
  out.removed = reuse.removed;
  auto warn = [&](const Result<Ok>& r, const char* next) {
    if (!r) ctx.reporter.message(run::Level::warning, fmt::format("{} ({})", r.error().message, next));
  };
  if (reuse.reused && !other_slot.empty()) fs::remove(ctx.layout.tree_stat_cache(previous_root), rec);  // moved here
  fs::path src_root = fs::canonical(ctx.src, ec);
  if (!ec && !reuse.cache.next.empty())
    warn(store::write_tree_stat_cache(ctx.layout, src_root, reuse.cache.next), "the next key's copy reads every file");
  warn(store::write_last_checkout(ctx.layout, tree.root, ctx.slot), "another configuration's first copy starts from nothing");
  // Patched after the copy's stat cache was recorded (a patched file is a new file: the next copy
  // from this one reads it and writes the tree's back) and before the slot names this key: a run
  // killed between them leaves a copy no key owns, which the next run copies the tree over again.
  if (!patches.empty()) {
    auto note = with_test_pause(ctx.source_options().note);
    auto applied = source::apply_patches_to_folder(ctx.src, patches, [&](std::size_t i) {
      note(fmt::format("patch {}/{}: {}", i + 1, patches.size(), patches[i].name));
    });
    if (!applied) return applied.error();
    if (applied->size() < patches.size() || applied->back().fit == source::PatchOutcome::Fit::fails)
      return Error::bad_input(source::describe_failure(patches[applied->size() - 1], applied->back(),
                                               fmt::format("the copy of {}", tree.root.string())));
    out.patches = std::move(*applied);
  }
  if (auto w = store::write_work_state(ctx.layout, ctx.slot, work_state_json(ctx.key, tree_shape(tree))); !w)
    return w.error();  // without it the next run could not tell whose tree this is
  return out;
}

// A local tree: archbuild's own copy of it, as it is now (the plan's content hash checked).
Result<Ok> fetch_local(Context& ctx, const run::StageInfo& info) {
  ctx.reporter.stage_started(info);
  Stopwatch clock;
  const auto& local = *ctx.plan->local;
  auto fail = [&](const Error& e) {
    ctx.reporter.stage_finished(info, {run::StageStatus::failed, clock.seconds(), e.message, {}});
    return e;
  };
  auto patches = patches_to_apply(ctx.plan->patches);
  if (!patches) return fail(patches.error());
  auto tree = scan_local_tree_cached(&ctx.layout, local.dir, "--source", [&](const std::string& w) {
    ctx.reporter.message(run::Level::warning, w);
  });
  if (!tree) return fail(tree.error());
  if (tree->content_hash != local.content_hash)
    return fail(Error::bad_input(fmt::format("{} changed since it was planned (content {} → {}); run again to plan "
                                             "the tree as it is now", local.dir.string(),
                                             local.content_hash.substr(0, 12), tree->content_hash.substr(0, 12))));
  auto copy = copy_into_slot(ctx, *tree, *patches);
  if (!copy) return fail(copy.error());
  ctx.build_start = copy->start;
  json stamp = {{"local", local.dir.string()}, {"local_content", tree->content_hash}, {"files", tree->entries.size()},
                {"bytes", tree->bytes}, {"head", tree->head ? json(*tree->head) : json(nullptr)}};
  stamp["copy"] = {{"from_key", copy->from_key.empty() ? json(nullptr) : json(copy->from_key)},
                   {"kept", copy->kept}, {"written", copy->written}, {"removed", copy->removed}};
  stamp["build_start"] = plan::to_json(copy->start);
  if (auto applied = patch_stamp(ctx, copy->patches); !applied.empty()) stamp["patches"] = applied;
  if (tree->commit_time) stamp["commit_time"] = *tree->commit_time;
  auto placed = place_fetches(ctx);
  if (!placed) return fail(placed.error());
  stamp["fetches"] = *placed;
  if (auto r = ctx.record.mark_done("fetch", stamp); !r) return r.error();
  std::string summary = copy->from_key.empty()
                            ? fmt::format("{} files copied from {}", tree->entries.size(), local.dir.string())
                            : fmt::format("{} files from {}: {} kept from key {}'s copy, {} written, {} removed",
                                          tree->entries.size(), local.dir.string(), copy->kept,
                                          copy->from_key.substr(0, 12), copy->written, copy->removed);
  summary += copy->start.mode == plan::BuildStart::Mode::incremental
                 ? fmt::format("; build tree: key {}'s, continued", copy->start.from_key.substr(0, 12))
                 : fmt::format("; build tree: clean ({})", copy->start.why);
  ctx.reporter.stage_finished(info, {run::StageStatus::ok, clock.seconds(), summary, {}});
  return Ok{};
}

}  // namespace

Result<Ok> fetch_stage(Context& ctx, const run::StageInfo& info) {
  const auto& plan = ctx.plan;
  if (plan->local) return fetch_local(ctx, info);
  ctx.reporter.stage_started(info);
  Stopwatch clock;
  source::SourceSpec spec{plan->url, plan->tag, plan->commit.value_or(""), {}};
  source::SourceOptions so = ctx.source_options();
  so.submodules = plan->submodules;
  auto fail = [&](const Error& e) {
    ctx.reporter.stage_finished(info, {run::StageStatus::failed, clock.seconds(), e.message, {}});
    return e;
  };
  auto patches = patches_to_apply(plan->patches);
  if (!patches) return fail(patches.error());
  spec.patches = std::move(*patches);
  so.note = with_test_pause(so.note);
  auto checkout = source::fetch_source(spec, ctx.src, ctx.mirror_for(), so);
  if (!checkout) return fail(checkout.error());
  json subs = json::array();
  for (const auto& s : checkout->submodules) subs.push_back({{"path", s.path}, {"url", s.url}, {"commit", s.commit}});
  json stamp = {{"commit", checkout->commit}, {"submodules", subs}};
  // Written once every patch applied (a tree in place with this stamp is wholly patched): a
  // resume trusts it and never applies them again.
  if (auto applied = patch_stamp(ctx, checkout->patches); !applied.empty()) stamp["patches"] = applied;
  if (auto t = source::checkout_commit_time(ctx.src)) stamp["commit_time"] = *t;
  auto placed = place_fetches(ctx);
  if (!placed) return fail(placed.error());
  stamp["fetches"] = *placed;
  // Fetch stays unstamped when the contract fails: the rerun reads and checks the tree again.
  auto contract = tree_contract(ctx);
  if (!contract) return fail(contract.error());
  stamp["contract"] = *contract;
  if (auto r = ctx.record.mark_done("fetch", stamp); !r) return r.error();
  ctx.reporter.stage_finished(info, {run::StageStatus::ok, clock.seconds(), checkout->commit.substr(0, 12), {}});
  return Ok{};
}

bool fetched_tree_matches(Context& ctx) {
  std::error_code ec;
  if (!fs::is_directory(ctx.src, ec)) return false;
  auto doc = ctx.record.read();
  if (!doc) return false;
  if (ctx.plan->local) {  // archbuild's copy in the slot: this key's while the slot's state names it
    auto now = ctx.slot.empty() ? std::nullopt : earlier_build(ctx.layout, ctx.slot);
    return now && now->key == ctx.key &&
           doc->value("/stages/fetch/local_content"_json_pointer, std::string()) == ctx.plan->local->content_hash;
  }
  auto recorded = doc->value("/stages/fetch/commit"_json_pointer, std::string());
  auto head = source::checkout_commit(ctx.src);
  return head && !recorded.empty() && *head == recorded;
}

}  // namespace archbuild::stages
