// The resolution options of `resolve`, `plan`, `wheel` (and the set), and printing a resolution.
// What they mean is the app's (app/inputs.hpp): the options fill an app::ResolveArgs.
#pragma once

#include <CLI/CLI.hpp>

#include "app/inputs.hpp"
#include "cli/context.hpp"

namespace archbuild::cli {

using app::ResolveArgs;

// Adds --sm (required), --recipe, --torch, --cuda, --python, --ptx, --source-url and --platform.
void add_resolve_options(CLI::App& cmd, ResolveArgs& args);

// Adds --ref, --env and the other options of what the plan fixes beyond the resolution (plan, wheel).
void add_plan_options(CLI::App& cmd, ResolveArgs& args);

// Human output: the choice and the rules checked (all of them with -v).
void print_resolution(const plan::Resolution& r, const Context& ctx);

}  // namespace archbuild::cli
