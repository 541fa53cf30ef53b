// The inputs of resolution and preparation, gathered once from the options of a command: the
// typed request (--sm, --torch, --cuda …), the candidate recipes, the toolchain data and this host
// as discovered (its tools asked once each through run::capture, the answers kept in the cache),
// and prepare()'s request. `resolve`, `plan`, `wheel`, `matrix` and the set all start here.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app/session.hpp"
#include "arch/arch.hpp"
#include "arch/arch_data.hpp"
#include "arch/parse.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "detect/detect.hpp"
#include "plan/plan.hpp"
#include "plan/resolve.hpp"
#include "prepare/prepare.hpp"
#include "store/layout.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::app {

// The resolution options of a command as typed (cli/ fills it from its flags).
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
  std::vector<std::string> patches;  // --patch FILE, repeatable: applied after the recipe's [[patch]]es (plan, wheel)
  bool allow_release_mismatch = false;  // --allow-release-mismatch (plan, wheel)
  bool clean = false;           // --clean: a clean build tree, not an earlier key's (plan, wheel)
  std::string platform;         // --platform x86_64|sbsa|jetson (toolchains/platforms.toml); "": this machine's
};

// --- the options, each checked by one rule ---

// --cuda X.Y (nullopt when empty): a CUDA release has two numbers; anything else throws Failure
// (exit 2). The one rule of every command that takes --cuda.
std::optional<Version> cuda_release(const std::string& value);

// $TMPDIR, when set, is where every tool archbuild starts (nvcc, pip, python) puts its temporary
// files: one that is not a directory this process can write into is bad input (exit 2) before
// anything starts, not a compile or an import test that fails later (a "wheel defect", exit 1).
Result<Ok> tmpdir_rule();

// --sm values as targets (`native`: the GPUs detect_host finds, an error when there are none);
// `cuda` refuses names PyTorch knows only from a newer CUDA. The error names --sm once.
Result<std::vector<arch::Arch>> sm_targets(const std::vector<std::string>& values, const arch::ArchData& data,
                                           arch::Grammar grammar = arch::Grammar::build,
                                           std::optional<Version> cuda = std::nullopt);

// --env K=V items as a map (throws Failure, exit 2, on an item without '=').
std::map<std::string, std::string> env_from_args(const ResolveArgs& args);

// --memory-budget into the plan options (admission on unless "off"; throws Failure, exit 2, on
// a value that is not a size).
void memory_budget_from_args(const ResolveArgs& args, plan::PlanOptions& opts);

// --- this host ---

// Detection with nvidia-smi run through run::capture. ARCHBUILD_NVML_LIBRARY and
// ARCHBUILD_CUDA_LIBRARY override the library names (tests point them at nothing).
detect::Detection detect_host(const arch::ArchData& data, const std::string& only_source = "");

// Toolchain discovery's questions (nvcc --version, g++ --version …), asked through run::capture:
// the one capture probe of the application.
toolchain::Probe tool_probe();

// Wraps a probe so its successful answers are kept in the cache (store: probes/<hash>.json) and
// reused while the program and, for an interpreter, its sys.path folders are unchanged: a repeat
// of `archbuild wheel` then starts no process at all.
toolchain::Probe cached_probe(toolchain::Probe inner, store::Layout layout);

// The cache directory (--cache-dir, $ARCHBUILD_CACHE_DIR, XDG), or why there is none.
prepare::Cache cache_of(const Session& s);

// --- resolution ---

// The parsed request (throws Failure, exit 2, on bad options).
plan::Request request_from_args(const ResolveArgs& args, const Facts& facts);
// The candidate recipes, toolchain data and this host as discovered, once for every request of
// the command (`matrix` resolves many against them).
plan::Inputs inputs_from_args(const ResolveArgs& args, const plan::Request& request, const Session& s);
// This host as resolution sees it for these recipes: each tool they need looked for once through
// `probe`, the interpreter (`python` X.Y or its path) and the toolkits. The one assembly of
// plan::Inputs: resolution here and the build advisor of install-command/doctor.
// The toolchains, platforms and JetPacks are `facts`'.
plan::Inputs discover_inputs(const Facts& facts, std::vector<recipe::Recipe> recipes, const toolchain::Probe& probe,
                             std::optional<Version> python,
                             std::optional<std::filesystem::path> python_path = std::nullopt);
// Both, then plan::resolve. Bad options or data throw Failure (exit 2); refusals and missing
// tools come back in the result.
plan::Resolution resolve_from_args(const ResolveArgs& args, const Session& s);

// --- preparation ---

// The options as prepare's typed request (throws Failure, exit 2, on a bad --env), with the
// memory budget already read (memory_budget_from_args) and --jobs (0: the plan's rule).
// for_build: `wheel` (the tree mirrored, every pin resolved).
prepare::Request prepare_request(const ResolveArgs& args, const plan::PlanOptions& budget, unsigned jobs, bool offline,
                                 bool for_build, const Facts& facts);
// prepare::prepare with this process's runner (the build venv's pip), progress on stderr and
// notes through the session. For --ref without --recipe/--torch, the tree's release line may
// choose another recipe (prepare::recipe_line_of_tree): the prepared plan's resolution
// (plan->resolution) is the one to use.
Result<prepare::Prepared> prepare_from_args(const plan::Resolution& r, const prepare::Request& q, const ResolveArgs& a,
                                            const Session& s);

}  // namespace archbuild::app
