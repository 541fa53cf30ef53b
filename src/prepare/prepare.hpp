// prepare/: from a resolution and the user's request to a complete plan, and the one answer to
// "would `wheel` stop before its first stage, and why". `plan` (its text, `--json` blockers and
// `--check` exit status) and `wheel` both call prepare(); neither decides a stop of its own.
//
// What happens here, in the order `wheel` meets it: the source is chosen (a local tree scanned,
// --ref resolved through the mirror), the tree's contract read and checked against the recipe
// (before any venv is made), the build venv made or reused from the tree's requirements, the
// libraries probed, the downloads the tree's own build would make found and their pins
// resolved, the plan made, the host measured. Processes start only through the Runner given
// (the build venv's pip); git is source/'s, paths are store/'s.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "contract/contract.hpp"
#include "core/error.hpp"
#include "core/rules.hpp"
#include "plan/host_check.hpp"
#include "plan/plan.hpp"
#include "recipe/library_spec.hpp"
#include "plan/resolve.hpp"
#include "run/reporter.hpp"
#include "run/runner.hpp"
#include "source/local.hpp"
#include "store/layout.hpp"

namespace archbuild::prepare {

// What the command line asked for beyond the resolution, typed.
struct Request {
  std::string ref;                          // --ref BRANCH|TAG|COMMIT
  std::map<std::string, std::string> env;   // --env K=V
  std::vector<std::string> without;         // --without cudnn,…
  std::string index_url;                    // --index-url (pip)
  std::string find_links;                   // --find-links (pip)
  std::filesystem::path torch_wheel;        // --torch-wheel FILE
  std::vector<recipe::Patch> patches;       // --patch FILE (after the recipe's own)
  std::optional<unsigned> jobs;             // --jobs
  std::optional<std::uint64_t> memory_budget_mb;
  std::string memory_budget_text;
  bool offline = false;
  // wheel: the tree is mirrored and every fetch pin resolved (fetching what is missing unless
  // offline), since the build follows. plan: only what the cache already holds is read; what
  // is not there yet is said, not fetched.
  bool for_build = false;
  std::string no_venv_because;              // a dependent whose torch is not built yet
  // --allow-release-mismatch: a tree of another release line than the recipe's is built on
  // purpose (shown, not a stop).
  bool allow_release_mismatch = false;
  // --clean: a local tree's build starts from a clean build tree (plan::decide_build_start).
  bool clean = false;
  // The release lines the package has recipes for: a tree newer than all of them (a main
  // branch ahead of the recipes) takes the newest with a note, not a stop.
  std::vector<Version> recipe_lines;
  // data/build-libraries.toml as the caller loaded it (app::Facts): the libraries probed.
  // Required: none is an internal error.
  const std::vector<recipe::LibrarySpec>* library_specs = nullptr;
};

// Where the cache is, or why there is none (plan still plans; wheel needs one).
struct Cache {
  std::optional<store::Layout> layout;
  std::string missing_because;
};

// What prepare needs from outside: the runner for the build venv's pip (a fake in tests), where
// progress goes, and who hears notes.
struct Services {
  run::Runner& runner;
  run::Reporter& reporter;
  std::function<void(const std::string&)> note = [](const std::string&) {};
  bool verbose = false;
};

// One reason `wheel` stops before its first stage.
struct Stop {
  rules::Id rule;  // cache-dir, out, release-line, the contract's, patch, build-venv, tree-download, fetch-pin, libraries, host
  Error error;
};

// The tree's contract as read before the build (a local tree, or the commit in the mirror).
struct TreeContract {
  std::optional<contract::Contract> contract;
  std::vector<contract::Finding> findings;
  std::string commit;  // the commit read (empty for a local tree)
  std::string origin;  // the folder, or "<url>@<commit12>"
  std::string note;    // why there is none: not in the cache yet, or the tree's own error
  bool awaits_fetch = false;  // none because the tree is not here yet (not the tree's own error)
};

struct Prepared {
  plan::Plan plan;
  std::string venv_note;                 // why there is no build venv, when there is none
  bool venv_failed = false;              // the venv was tried and could not be made (a stop)
  std::vector<std::string> fetch_notes;  // pins not resolved yet, and why
  std::vector<std::string> notes;        // what the user should know (a tree ahead of the recipes)
  // Each of the plan's patches against the mirrored commit (or a local tree's files), in the
  // plan's order ("applies", "contained", "fails", "unchecked": a part of it is in a submodule
  // not mirrored yet); empty: not checked (no patch, or the commit is not mirrored yet).
  std::vector<std::string> patch_states;
  TreeContract tree;
  plan::HostCheck host;
  // Every reason `wheel` would stop, in the order it meets them; empty: it starts.
  std::vector<Stop> stops;
  // The first stop, as `wheel` reports it (and `plan --check` exits with its status).
  std::optional<Error> first_stop() const;
};

// What `wheel` checks before it prepares anything, in its order: the cache directory (one a build
// can use: store::choose_cache_dir) and the --out directory (store::check_out_dir). `plan` shows
// them first among its stops and --check exits with the first, a built key or not, so both
// commands stop at the same first reason with the same message and status.
std::vector<Stop> launch_stops(const std::optional<std::filesystem::path>& cache_dir, const std::filesystem::path& out);

// A shared build store the command must read (--store-required) that cannot be read: `wheel`
// stops there before anything else of the key (`plan`, `matrix` say the same), built key or not.
Stop store_required_stop(const std::string& problem);

// --ref without --recipe or --torch: the tree's release line differs from the recipe's (the
// release-line stop) and recipes of the tree's line exist (request.recipe_lines), so that line's
// recipe is the one to resolve and prepare again. nullopt: the plan's recipe stands (it fits,
// the mismatch is allowed, or no recipe of that line exists and the stop says what to do).
std::optional<Version> recipe_line_of_tree(const Prepared& prepared, const Request& request);

// The whole preparation. Errors are what no plan can be shown for (bad input such as an --env
// item without '=', a recipe pin file the tree lacks, a --ref that does not exist).
Result<Prepared> prepare(const plan::Resolution& resolution, const Request& request, const Cache& cache,
                         Services& services);

// The parts, for `env`, `matrix` and tests.

// The source of the plan: a local tree scanned and hashed, or --ref resolved to a commit through
// the cache's mirror (fetched unless offline) with its version.txt; else the recipe's tag.
// `scanned`: the local tree's scan, kept for the rules that must see what the copy will hold.
Result<plan::SourceChoice> choose_source(const plan::Resolution& r, const std::string& ref, const store::Layout* layout,
                                         bool offline, const Services& services,
                                         std::optional<source::LocalTree>* scanned = nullptr);
// The libraries on this host as the build would see them: the caller's allowlisted variables
// plus --env, the resolution's toolkit, the system folders, the build venv's site-packages.
Result<plan::LibraryFacts> gather_libraries(const plan::Resolution& r, const std::vector<recipe::LibrarySpec>& specs,
                                            const std::map<std::string, std::string>& env,
                                            const std::vector<std::filesystem::path>& site_packages = {});
// Free space where the cache lives and the memory available now, for plan::check_host.
plan::HostFigures host_figures(const std::filesystem::path& cache_dir);
// The site-packages folder of the build venv (none without one): where nvidia-* pip packages are.
std::vector<std::filesystem::path> venv_site_packages(const std::optional<plan::BuildVenv>& venv);
// The environment the build will get (the plan's, with the libraries' switches), for deciding
// which fetches are active; the options' own env when no plan can be made yet.
std::map<std::string, std::string> planned_env(const plan::Resolution& r, const plan::PlanOptions& po);

// The files a tree's own build reads to clone something during configure or build
// (data/tree-downloads.toml): each one the tree has, with no [[fetch]] of the recipe standing for
// it and no switch in the build's environment turning that download off, is a stop naming the
// file.
struct TreeDownload {
  std::string name;                    // "eigen"
  std::vector<std::string> pin_files;  // relative to the tree; "{cuda_major}{cuda_minor}" as in [[fetch]]
  std::string fetch;                   // the [[fetch]] name that stands for it
  std::map<std::string, std::vector<std::string>> unless_env;  // the build downloads nothing then
  std::string why;                     // which code of the tree clones it (an upstream citation)
};
Result<std::vector<TreeDownload>> load_tree_downloads(const std::filesystem::path& file);
// The first file of the tree matching a pin_files pattern, or nullopt.
using TreeHas = std::function<std::optional<std::string>(const std::string& pattern)>;
TreeHas tree_has(const contract::FileAccess& files);
// `cuda`: the plan's CUDA release, for pin_files with "{cuda_major}"/"{cuda_minor}".
std::vector<Stop> unfetched_downloads(const std::vector<TreeDownload>& downloads, const recipe::Recipe& recipe,
                                      const std::map<std::string, std::string>& build_env, const TreeHas& has,
                                      const std::optional<Version>& cuda = std::nullopt);

// The rule "the recipe fits the tree's release line" (2.11.0a0 is line 2.11): a stop (exit 2)
// naming both and the way out, a note where the tree is ahead of every recipe, nothing when
// they agree or the tree says no version.
struct ReleaseLine {
  std::optional<Stop> stop;
  std::string note;
  bool older_than_every_recipe = false;  // the stop says no recipe covers the tree's line
};
ReleaseLine release_line_rule(const std::optional<std::string>& tree_version, const std::string& where,
                              const recipe::Recipe& recipe, const Request& request);

// The release line a tree declares in its version.txt ("2.11.0a0" → 2.11), for choosing the
// recipe that fits it. nullopt: no version.txt, or none readable.
std::optional<Version> tree_release_line(const std::filesystem::path& dir);

}  // namespace archbuild::prepare
