#include "app/planning.hpp"

#include <fmt/format.h>

#include "contract/contract.hpp"
#include "store/key_record.hpp"
#include "store/layout.hpp"

namespace archbuild::app {

namespace {

// Read only; store/ decides where the cache is and what its files say.
BuiltState built_state(const Session& s, const std::string& key) {
  BuiltState b;
  auto dir = store::choose_cache_dir(s.cache_dir);
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

}  // namespace

std::optional<Error> PlanView::check() const {
  if (stops.empty() || nothing_to_build) return std::nullopt;
  return stops.front().error;  // `wheel` stops at the first, with its status
}

PlanView plan_one(const PlanArgs& args, const plan::Resolution& resolved, const plan::PlanOptions& budget,
                  const Session& s) {
  // The one answer: what prepare() says would stop `wheel` is what `plan` shows and --check
  // exits with (the first stop's status, as `wheel` would).
  prepare::Request q = prepare_request(args.resolve, budget, args.jobs, args.offline, false, s.facts());
  q.no_venv_because = args.no_venv_because;
  PlanView v{prepare_from_args(resolved, q, args.resolve, s).take()};
  const plan::Plan& p = v.prep.plan;
  if (!p->venv && v.prep.venv_failed) warn(s, "build venv " + v.prep.venv_note);
  v.built = built_state(s, p->key);
  if (!v.built.problem.empty()) warn(s, "cannot tell whether the key is built: " + v.built.problem);
  // The shared build store: a key it has is pulled by `wheel`, which then stops at nothing.
  v.store = open_store(args.store);
  if (v.store) v.in_store = look_up(*v.store, p->key);
  const bool pullable = v.in_store && v.in_store->state == StoreLookup::State::present;
  // `wheel` stops first, built key or not, where a required store cannot be read (app::build),
  // with the same message and status; before all, the cache directory and --out.
  v.stops = prepare::launch_stops(s.cache_dir, args.out);
  const bool launch_clear = v.stops.empty();
  const bool store_stop = v.in_store && v.in_store->stops(*v.store);
  if (store_stop) v.stops.push_back(prepare::store_required_stop(v.in_store->problem));
  v.stops.insert(v.stops.end(), v.prep.stops.begin(), v.prep.stops.end());
  v.nothing_to_build = launch_clear && !store_stop && (v.built.wheel || pullable);
  return v;
}

nlohmann::json PlanView::to_json() const {
  const plan::Plan& p = prep.plan;
  const prepare::TreeContract& tree = prep.tree;
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
  doc["host_check"] = prep.host.to_json();
  nlohmann::json b = nlohmann::json::array();
  for (const auto& st : stops) b.push_back(st.error.message);
  doc["ready"] = stops.empty();
  doc["blockers"] = b;
  nlohmann::json stops_doc = nlohmann::json::array();
  for (const auto& st : stops)
    stops_doc.push_back({{"rule", rules::str(st.rule)}, {"exit", static_cast<int>(st.error.exit)}, {"message", st.error.message}});
  doc["stops"] = stops_doc;
  doc["would_exit"] = nothing_to_build || stops.empty() ? 0 : static_cast<int>(stops.front().error.exit);
  doc["store"] = in_store ? in_store->to_json(*store) : nlohmann::json(nullptr);
  // Before the tree is fetched the key lacks the build venv's versions: `wheel` looks up the final one.
  if (in_store) doc["store"]["key_final"] = p->venv.has_value();
  doc["fetch_notes"] = prep.fetch_notes;
  // Each patch's fit to the mirrored commit, in the plan's order; null: not checked yet.
  for (std::size_t i = 0; i < doc["patches"].size(); ++i)
    doc["patches"][i]["state"] = i < prep.patch_states.size() ? nlohmann::json(prep.patch_states[i]) : nlohmann::json(nullptr);
  doc["notes"] = prep.notes;
  if (!p->venv) doc["build_venv_note"] = prep.venv_note;
  return doc;
}

void plan_set(const PlanArgs& args, const std::vector<std::string>& with, const plan::PlanOptions& budget,
              const Session& s, const ShowRefusal& refused, const std::function<void(const MemberPlan&)>& shown) {
  std::vector<SetMember> set = resolve_set(args.resolve, with, s, refused);  // a refused pair throws (exit 2)
  std::optional<std::filesystem::path> torch_wheel;
  for (const auto& m : set) {
    PlanArgs a = args;
    a.resolve = m.args;
    const bool dependent = m.role == SetMember::Role::dependent;
    if (dependent) {
      if (torch_wheel)
        a.resolve.torch_wheel = torch_wheel->string();
      else
        a.no_venv_because = fmt::format("made once {} is built: its wheel is installed into it and its sha256 is in "
                                        "this key (the key shown is provisional until then)",
                                        set.front().resolution.recipe.name);
    }
    const PlanView view = plan_one(a, m.resolution, budget, s);
    shown({m, set.front(), a, view});
    if (!dependent && view.built.wheel) {
      // Under its own name, as pip needs it for the dependents' build venvs.
      auto dir = store::choose_cache_dir(s.cache_dir).take();
      auto named = store::named_wheel(store::Layout(dir.dir), view.built.wheel->sha256, view.built.wheel->filename);
      if (named) torch_wheel = *named;
      else warn(s, "torch's built wheel cannot be named in the cache: " + named.error().message);
    }
  }
}

}  // namespace archbuild::app
