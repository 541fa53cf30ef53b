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
};

// Adds --sm (required), --recipe, --torch, --cuda, --python, --ptx and --source-url.
void add_resolve_options(CLI::App& cmd, ResolveArgs& args);

// Adds --ref and --env (plan and wheel: what the plan fixes beyond the resolution).
void add_plan_options(CLI::App& cmd, ResolveArgs& args);
// --env K=V items as a map (throws Failure, exit 2, on an item without '=').
std::map<std::string, std::string> env_from_args(const ResolveArgs& args);

// The build venv of the plan, made or reused before it (stages/venv.hpp) from the tree's build
// requirements: read from a local tree, or from the commit in the cache's mirror. None for the
// cmake driver (no Python runs), or when the commit is not mirrored yet (`note` says so; `wheel`
// mirrors it first). A requirement still missing after the fallback throws Failure (exit 3).
struct VenvChoice {
  std::optional<plan::BuildVenv> venv;
  std::string note;
};
// offline (--offline): pip gets no index, --find-links only.
VenvChoice choose_build_venv(const plan::Resolution& r, const plan::SourceChoice& source, const ResolveArgs& args,
                             const store::Layout& layout, const Context& ctx, bool offline = false);
// The recipe's tag (or pinned commit) fetched into the cache's mirror unless it is there (the
// plan reads the tree's requirements from it). Nothing for a local tree or --ref (already done).
void ensure_mirrored(const plan::Resolution& r, const plan::SourceChoice& source, const store::Layout& layout,
                     bool offline);
// The libraries on this host (plan/library_probe.hpp) as the build would see them: the caller's
// allowlisted variables plus --env, the resolution's toolkit, the system folders. The build
// environment's site-packages are an input (the build venv's: venv_site_packages).
plan::LibraryFacts gather_libraries(const plan::Resolution& r, const std::map<std::string, std::string>& env_args,
                                    const std::vector<std::filesystem::path>& site_packages = {});
// Free space where the cache lives and the memory available now, for plan::check_host.
plan::HostFigures host_figures(const std::filesystem::path& cache_dir);
// The site-packages folder of the build venv (none without one): where nvidia-* pip packages are.
std::vector<std::filesystem::path> venv_site_packages(const std::optional<plan::BuildVenv>& venv);
// --memory-budget into the plan options (admission on unless "off"; throws Failure, exit 2, on
// a value that is not a size).
void memory_budget_from_args(const ResolveArgs& args, plan::PlanOptions& opts);

// The source of the plan, decided before it (plan::SourceChoice): a local tree scanned and hashed
// (--source DIR / source.path), or --ref resolved to a commit through the cache's mirror (fetching
// it unless offline) with its version.txt; else the recipe's tag. Errors throw Failure.
plan::SourceChoice choose_source(const plan::Resolution& r, const ResolveArgs& args, const store::Layout& layout,
                                 bool offline, const Context& ctx);

// The pins of what the tree's build would fetch (the recipe's active [[fetch]]es), resolved
// before the plan as --ref is: the pin file read from the tree at its commit (a local tree: from
// the folder), the tag or commit it names looked up in that repository's mirror, fetched unless
// offline. `required` (wheel): the tree is fetched for it when not mirrored yet, and what cannot
// be resolved throws Failure — offline with a pin the mirror lacks: exit 3 naming the repository
// and the pin. Otherwise (plan) nothing is fetched for the tree, and an unresolved fetch is left
// out with a note saying why (the plan shows it unresolved).
struct FetchResolution {
  std::map<std::string, plan::ResolvedFetch> resolved;
  std::vector<std::string> notes;
};
FetchResolution resolve_fetches(const plan::Resolution& r, const plan::SourceChoice& sc,
                                const std::map<std::string, std::string>& env, const store::Layout& layout,
                                bool offline, bool required, const Context& ctx);
// The environment the build will get (the plan's, with the libraries' switches: a system NCCL
// sets USE_SYSTEM_NCCL=1, which switches the NCCL fetch off), for deciding which fetches to
// resolve; the options' own env when no plan can be made yet.
std::map<std::string, std::string> planned_env(const plan::Resolution& r, const plan::PlanOptions& po);

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
