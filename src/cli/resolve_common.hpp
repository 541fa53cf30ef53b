// What `resolve`, `plan` (and `wheel`, `matrix` …) share: the resolution options, loading the
// recipes and toolchains, discovering this host through run::capture, and printing.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/context.hpp"
#include "plan/host_check.hpp"
#include "plan/plan.hpp"
#include "plan/resolve.hpp"
#include "prepare/prepare.hpp"
#include "store/layout.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::cli {

struct ResolveArgs {
  std::vector<std::string> sm;  // --sm LIST (repeatable)
  std::string recipe;           // --recipe NAME|FILE|PACKAGE
  std::string torch;            // --torch X.Y
  std::string cuda;             // --cuda X.Y
  std::string python;           // --python X.Y
  bool ptx = false;             // --ptx
  std::string source_url;       // --source-url URL
  std::string source_dir;       // --source DIR
  std::string ref;              // --ref BRANCH|TAG|COMMIT (plan, wheel)
  std::vector<std::string> env; // --env K=V, repeatable (plan, wheel)
  std::vector<std::string> without;  // --without cudnn,nccl (plan, wheel)
  std::string index_url;        // --index-url URL: PIP_INDEX_URL of the build venv's pip (plan, wheel)
  std::string find_links;       // --find-links DIR|URL: PIP_FIND_LINKS of the build venv's pip (plan, wheel)
  std::string memory_budget;    // --memory-budget SIZE|N%|off (plan, wheel); "" = default
  std::string torch_wheel;      // --torch-wheel FILE: installed into the build venv (plan, wheel; --with sets it)
  bool allow_release_mismatch = false;  // --allow-release-mismatch (plan, wheel)
  std::string platform;         // --platform x86_64|sbsa|jetson (toolchains/platforms.toml); "": this machine's
};

// Adds --sm (required), --recipe, --torch, --cuda, --python, --ptx, --source-url and --platform.
void add_resolve_options(CLI::App& cmd, ResolveArgs& args);

// Adds --ref and --env (plan and wheel: what the plan fixes beyond the resolution).
void add_plan_options(CLI::App& cmd, ResolveArgs& args);
// --env K=V items as a map (throws Failure, exit 2, on an item without '=').
std::map<std::string, std::string> env_from_args(const ResolveArgs& args);

// --memory-budget into the plan options (admission on unless "off"; throws Failure, exit 2, on
// a value that is not a size).
void memory_budget_from_args(const ResolveArgs& args, plan::PlanOptions& opts);

// The cache directory (--cache-dir, $ARCHBUILD_CACHE_DIR, XDG), or why there is none.
prepare::Cache cache_of(const Context& ctx);
// What `wheel` checks before it prepares anything, in its order: the cache directory (one a
// build can use: store::choose_cache_dir) and --out (store::check_out_dir). `plan` shows them
// first among its stops and --check exits with the first, a built key or not, so both commands
// stop at the same first reason with the same message and status.
std::vector<prepare::Stop> launch_stops(const Context& ctx, const std::string& out);
// The options as prepare's typed request (throws Failure, exit 2, on a bad --env), with the
// memory budget already read (memory_budget_from_args) and --jobs (0: the plan's rule).
// for_build: `wheel` (the tree mirrored, every pin resolved).
prepare::Request prepare_request(const ResolveArgs& args, const plan::PlanOptions& budget, unsigned jobs, bool offline,
                                 bool for_build);
// prepare::prepare with this process's runner (the build venv's pip), progress on stderr and
// notes through ctx. For --ref without --recipe/--torch, the tree's release line may choose
// another recipe: the prepared plan's resolution (plan->resolution) is the one to use.
Result<prepare::Prepared> prepare_from_args(const plan::Resolution& r, const prepare::Request& q, const ResolveArgs& a,
                                            const Context& ctx);

// Parses the options, loads recipes and toolchains, discovers this host and resolves. Bad
// options or data throw Failure (exit 2); refusals and missing tools come back in the result.
plan::Resolution resolve_from_args(const ResolveArgs& args, const Context& ctx);

// The two halves of resolve_from_args, for commands that resolve many requests against one
// host (`matrix`): the parsed request (throws Failure on bad options), and the candidate
// recipes, toolchain data and this host as discovered (run::capture probes).
plan::Request request_from_args(const ResolveArgs& args);
plan::Inputs inputs_from_args(const ResolveArgs& args, const plan::Request& request, const Context& ctx);

// Wraps a probe so its successful answers are kept in the cache (store: probes/<hash>.json) and
// reused while the program and, for an interpreter, its sys.path folders are unchanged: a repeat
// of `archbuild wheel` then starts no process at all.
toolchain::Probe cached_probe(toolchain::Probe inner, store::Layout layout);

// Human output: the choice and the rules checked (all of them with -v).
void print_resolution(const plan::Resolution& r, const Context& ctx);

}  // namespace archbuild::cli
