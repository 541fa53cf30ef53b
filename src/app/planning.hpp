// `plan`: what `wheel` would build and whether it would start, without building — the prepared
// plan (prepare()), whether its key is built in the cache, whether the build store has it, and
// every stop in the order `wheel` meets them (the launch stops, a required store, prepare()'s).
// For a set (`plan --with`), each member planned, torch first.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/inputs.hpp"
#include "app/session.hpp"
#include "app/set.hpp"
#include "app/store.hpp"
#include "store/key_record.hpp"
#include "store/wheels.hpp"

namespace archbuild::app {

struct PlanArgs {
  ResolveArgs resolve;
  unsigned jobs = 0;
  bool offline = false;
  std::string out = "dist";  // --out DIR: where `wheel` would put the wheel (checked as it checks it)
  StoreArgs store;           // --store URL: whether the shared build store has the key (docs/store.md)
  // Why no build venv is made for this plan (a dependent whose torch is not built yet); empty: made.
  std::string no_venv_because;
};

// Whether the key is built: its manifest (keys/<key>.json) records a finished wheel.
struct BuiltState {
  std::optional<std::filesystem::path> manifest;  // keys/<key>.json, when the cache dir is known
  bool manifest_exists = false;
  std::optional<store::WheelRef> wheel;           // the finished wheel it records, present in the cache
  std::string problem;                            // why it could not be told
};

struct PlanView {
  prepare::Prepared prep;
  BuiltState built;
  std::optional<remote::BuildStore> store;  // configured
  std::optional<StoreLookup> in_store;      // its answer for the key
  // Every reason `wheel` would stop, in its order: the launch stops, a required store that cannot
  // be read, prepare()'s.
  std::vector<prepare::Stop> stops;
  // The key is built here or pullable, and nothing stops `wheel` before it looks: no stage runs.
  bool nothing_to_build = false;
  // `plan --check`: the first stop `wheel` would meet (nullopt: it starts, or has nothing to build).
  std::optional<Error> check() const;
  // The plan document (`plan --json`).
  nlohmann::json to_json() const;
};

// Bad input (options, the store's settings) throws Failure.
PlanView plan_one(const PlanArgs& args, const plan::Resolution& resolved, const plan::PlanOptions& budget,
                  const Session& s);

// A dependent's key holds the torch wheel it is built against: when torch's key is built, its
// wheel in the cache is that wheel; else the dependent's build venv is not made (pip would fetch
// another torch) and its key is provisional. `shown` hears each member's plan as it is made.
struct MemberPlan {
  const SetMember& member;
  const SetMember& torch;  // the set's torch (the first member)
  const PlanArgs& args;  // what it was planned with (the torch wheel it got)
  const PlanView& view;
};
void plan_set(const PlanArgs& args, const std::vector<std::string>& with, const plan::PlanOptions& budget,
              const Session& s, const ShowRefusal& refused, const std::function<void(const MemberPlan&)>& shown);

}  // namespace archbuild::app
