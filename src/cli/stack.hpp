// `archbuild wheel --with torchvision,torchaudio` (and `--recipe torchvision-0.29` on its own):
// the set — torch and what builds against it — as one command. The whole set is
// resolved first (torch, then each dependent paired with it by the recipes' `torch` or `torch_also`, on
// torch's CUDA and Python), so a mismatch is refused before any stage runs (exit 2). Then torch
// is built (or its finished key reused) and each dependent is built with `--torch-wheel` set to
// that exact wheel: installed into its build venv, in its key, pinned in its METADATA.
//
// Each member is built by `wheel` itself, as a single recipe (the BuildMember callback), so
// every member has its own plan, stages, logs and manifest; its output is gathered here into
// one document (--json) with the set's wheels. Exit status: the worst of the members; wheels
// already built stay in --out. `plan --with` resolves the same set here (resolve_set) and plans
// each member in cli/plan.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/context.hpp"
#include "cli/resolve_common.hpp"

namespace archbuild::cli {

// One member of the set, resolved before anything is built or planned.
struct StackMember {
  std::string role;  // "torch" or "dependent"
  ResolveArgs args;  // what `wheel` (or `plan`) makes it from
  plan::Resolution resolution;
  // A dependent: how it pairs with the set's torch — "torch" (its `torch` key is torch's release
  // line) or "torch_also" (one of the later lines it also serves). Empty for torch.
  std::string paired_through;
  // A dependent on its own: how its torch was chosen — "torch_recipe" or "torch". Empty under --with.
  std::string torch_from;
};

// True when the command asks for a set: `--with` is given, or the recipe builds against torch
// (a `torch` key) and no --torch-wheel names the torch.
bool asks_for_set(const ResolveArgs& args, const std::vector<std::string>& with);

// The whole set, resolved: torch first, then each dependent paired with it by the recipes (on
// torch's CUDA and interpreter). A refused pair, and a member that cannot be resolved, throw
// Failure before anything is made (a refused pair: exit 2, naming it). `wheel` builds the members
// in this order; `plan` plans them.
std::vector<StackMember> resolve_set(const ResolveArgs& args, const std::vector<std::string>& with,
                                     const Context& ctx);

// The pairing of a dependent member as JSON: {"torch": {recipe, version}, "through", "torch_key",
// "torch_also", "torch_from"} (shared by `wheel` and `plan` documents).
nlohmann::json pairing_json(const StackMember& dependent, const StackMember& torch);
// The same in words, for humans: "pairs with torch-2.14 (torch 2.14.0) through its `torch` key 2.14.0".
std::string pairing_text(const StackMember& dependent, const StackMember& torch);

// Builds one recipe as `wheel` does and prints its result on stdout (one document with --json,
// else the wheel's path last); errors as `wheel` gives them (Failure, or ctx.exit with --json).
using BuildMember = std::function<void(const ResolveArgs& member, Context& ctx)>;

// When asks_for_set: the set is resolved, built and reported here, ctx.exit is the worst of its
// members, and true; false: `wheel` builds it alone.
bool run_stack_if_asked(const ResolveArgs& args, const std::vector<std::string>& with, Context& ctx,
                        const BuildMember& build);

}  // namespace archbuild::cli
