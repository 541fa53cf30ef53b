// The set — torch and what builds against it (`wheel --with torchvision,torchaudio`, or
// `--recipe torchvision-0.29` on its own) — as one operation. The whole set is resolved first
// (torch, then each dependent paired with it by the recipes' `torch` or `torch_also`, on torch's
// CUDA and Python), so a mismatch is refused before any stage runs (exit 2). Then torch is built
// (or its finished key reused) and each dependent is built with `--torch-wheel` set to that
// exact wheel: installed into its build venv, in its key, pinned in its METADATA. Each member is
// one app::build with its own plan, stages, logs and manifest. `plan --with` resolves the same
// set (resolve_set) and plans each member.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/build.hpp"
#include "app/inputs.hpp"
#include "app/session.hpp"

namespace archbuild::app {

// One member of the set, resolved before anything is built or planned.
struct SetMember {
  enum class Role { torch, dependent };
  Role role = Role::torch;
  ResolveArgs args;  // what its build (or plan) is made from
  plan::Resolution resolution;
  // A dependent: how it pairs with the set's torch — "torch" (its `torch` key is torch's release
  // line) or "torch_also" (one of the later lines it also serves). Empty for torch.
  std::string paired_through;
  // A dependent on its own: how its torch was chosen — "torch_recipe" or "torch". Empty under --with.
  std::string torch_from;
  const char* role_name() const { return role == Role::torch ? "torch" : "dependent"; }
};

// True when the command asks for a set: `--with` is given, or the recipe builds against torch
// (a `torch` key) and no --torch-wheel names the torch.
bool asks_for_set(const ResolveArgs& args, const std::vector<std::string>& with, const Facts& facts);

// The whole set, resolved: torch first, then each dependent paired with it by the recipes (on
// torch's CUDA and interpreter). A refused pair, and a member that cannot be resolved, throw
// Failure before anything is made (a refused pair: exit 2, naming it; a refused resolution is
// shown through `refused` first, as `wheel` shows it).
std::vector<SetMember> resolve_set(const ResolveArgs& args, const std::vector<std::string>& with, const Session& s,
                                   const ShowRefusal& refused = nullptr);

// The pairing of a dependent member as JSON: {"torch": {recipe, version}, "through", "torch_key",
// "torch_also", "torch_from"} (shared by `wheel` and `plan` documents).
nlohmann::json pairing_json(const SetMember& dependent, const SetMember& torch);
// The same in words, for humans: "pairs with torch-2.14 (torch 2.14.0) through its `torch` key 2.14.0".
std::string pairing_text(const SetMember& dependent, const SetMember& torch);

// One member's build.
struct MemberBuild {
  std::size_t member = 0;               // index in SetOutcome::members
  std::optional<BuildOutcome> outcome;  // nullopt: not built (its torch was not), or failed before a build
  std::optional<Error> error;           // why it has no wheel
  nlohmann::json entry;                 // its object in the set's document
  std::filesystem::path wheel() const { return outcome && outcome->ok() ? outcome->wheel : std::filesystem::path(); }
};

struct SetOutcome {
  std::vector<SetMember> members;
  std::vector<MemberBuild> builds;  // one per member, in order
  nlohmann::json doc;               // --json: {"ok", "wheels"[, "error", "exit"]}
  std::optional<Error> error;       // the worst status, with the first member's failure
};

// The set resolved and built (args.resolve and `with` as `wheel` takes them); each wheel path in
// builds[i].wheel(). Failures of members are in the outcome; bad input before any build throws.
SetOutcome build_set(const BuildArgs& args, const std::vector<std::string>& with, const Session& s, const Show& show,
                     const ShowRefusal& refused);

}  // namespace archbuild::app
