// `archbuild wheel --with torchvision,torchaudio` (and `--recipe torchvision-0.29` on its own):
// the set — torch and what builds against it — as one command (issue 15). The whole set is
// resolved first (torch, then each dependent paired with it by the recipes' `torch` key, on
// torch's CUDA and Python), so a mismatch is refused before any stage runs (exit 2). Then torch
// is built (or its finished key reused) and each dependent is built with `--torch-wheel` set to
// that exact wheel: installed into its build venv, in its key, pinned in its METADATA.
//
// Each member is built by `wheel` itself, as a single recipe (the BuildMember callback), so
// every member has its own plan, stages, logs and manifest; its output is gathered here into
// one document (--json) with the set's wheels. Exit status: the worst of the members; wheels
// already built stay in --out.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/context.hpp"
#include "cli/resolve_common.hpp"

namespace archbuild::cli {

// Builds one recipe as `wheel` does and prints its result on stdout (one document with --json,
// else the wheel's path last); errors as `wheel` gives them (Failure, or ctx.exit with --json).
using BuildMember = std::function<void(const ResolveArgs& member, Context& ctx)>;

// True when the command asks for a set: `--with` is given, or the recipe builds against torch
// (a `torch` key) and no --torch-wheel names the torch. Then the set is resolved, built and
// reported here and ctx.exit is the worst of its members; false: `wheel` builds it alone.
bool run_stack_if_asked(const ResolveArgs& args, const std::vector<std::string>& with, Context& ctx,
                        const BuildMember& build);

}  // namespace archbuild::cli
