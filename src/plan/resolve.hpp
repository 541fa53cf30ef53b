// Resolution: from target archs and the user's constraints to one recipe, one CUDA toolkit, one
// host compiler, one Python and the arch list in the syntax the recipe's parser reads — or a
// refusal naming the rule that failed and the way out (exit 2), or the one missing tool (exit 3).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "core/error.hpp"
#include "core/rules.hpp"
#include "core/version.hpp"
#include "recipe/recipe.hpp"
#include "toolchain/platform.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::plan {

struct Request {
  std::vector<arch::Arch> targets;        // parsed --sm (SASS wishes; PTX when written +PTX)
  std::optional<Version> torch;           // --torch 2.7 (prefix match on the torch release)
  std::optional<Version> cuda;            // --cuda 12.8
  std::optional<Version> python;          // --python 3.11
  bool ptx = false;                       // --ptx: PTX for the newest target too
  std::optional<std::string> source_url;  // --source-url: overrides the recipe's source.url/path
  std::optional<std::filesystem::path> source_dir;  // --source DIR: a local tree, over both
  std::string recipe_label;               // how the recipes were chosen, for messages
  std::optional<std::string> platform;    // --platform sbsa (toolchains/platforms.toml); unset: this machine's
};

// One rule checked, for printing: "toolkit-arch  ok  CUDA 13.0 compiles sm_90".
struct Rule {
  rules::Id id;         // toolkit-arch, arch-syntax, host-compiler, … (core/rules.hpp)
  std::string subject;  // "torch-2.9 + CUDA 13.0", or "" for the request itself
  bool ok = true;
  std::string detail;
};

struct Resolution {
  // ok; bad_input (refused: `message` names the rule and the way out); missing_tool (the
  // choice below stands, but something must be installed: `message` says what and how).
  Exit status = Exit::ok;
  std::string message;
  // A refusal in its parts: `message` is `reason`, then ". Way out: " and `way_out` where the
  // refusal names one (a caller that words its own way out takes `reason`).
  std::string reason;
  std::string way_out;
  std::vector<Rule> rules;
  std::vector<std::string> notes;

  // The choice (valid unless status == bad_input).
  recipe::Recipe recipe;
  toolchain::Toolchain toolchain;             // facts of the chosen CUDA release
  std::optional<toolchain::Toolkit> toolkit;  // the installed one, when there is
  std::optional<toolchain::Compiler> compiler;
  std::optional<toolchain::Python> python;
  std::map<std::string, std::filesystem::path> tools;  // the recipe's tools found on PATH
  std::map<std::string, Version> tool_versions;         // of those, where probed (cmake)
  std::vector<arch::Arch> archs;              // what will be built (SASS + PTX wishes)
  std::string arch_list;                      // in the recipe's syntax: "9.0" / "90-real"
  std::optional<std::string> source_url;      // --source-url, when given
  std::optional<std::filesystem::path> source_dir;  // --source DIR, when given
  // The platform built for (--platform, else this machine's) and what chose it. Its recipe facts
  // ([platform.NAME] env) are merged into `recipe.env`; a platform whose CUDA is the host's
  // (Jetson) makes `recipe.wheel_layout` host.
  toolchain::Platform platform;
  std::string platform_why;

  bool ok() const { return status == Exit::ok; }
  // The repository to fetch; empty when a local tree is built (local_dir()).
  std::string url() const { return source_dir ? "" : source_url ? *source_url : recipe.source.url; }
  // The local tree to build: --source DIR, else the recipe's source.path unless --source-url.
  std::optional<std::filesystem::path> local_dir() const {
    if (source_dir) return source_dir;
    if (!source_url && !recipe.source.path.empty()) return recipe.source.path;
    return std::nullopt;
  }
};

struct Inputs {
  std::vector<recipe::Recipe> recipes;        // the candidates (abstract ones are skipped)
  std::vector<toolchain::Toolchain> toolchains;
  toolchain::Platforms platforms;             // toolchains/platforms.toml, as the caller loaded it
  toolchain::JetPacks jetpacks;               // toolchains/jetpack.toml: where this Jetson's L4T sits
  toolchain::Host host;
  std::optional<toolchain::Machine> machine;  // unset: this machine (uname, /etc/nv_tegra_release)
};

Resolution resolve(const Request& request, const Inputs& inputs);

// The programs a recipe's build runs: build.tools plus what its driver itself calls.
std::vector<std::string> required_tools(const recipe::Recipe& r);

// The pairing of a dependent with the torch it builds against (torchvision 0.N ↔ torch 2.M): the
// candidate (one package's recipes, `--with torchvision`) whose `torch` is on the release line of
// `torch` (2.14.x), the newest when several are. None: bad input naming the pairs there are and
// the way out. A candidate that is no dependent (no `torch` key) is bad input too. `asked` begins
// the messages ("--with torchvision").
Result<recipe::Recipe> pair_with_torch(const std::vector<recipe::Recipe>& candidates, const recipe::Recipe& torch,
                                       const std::string& asked);

// The candidates `--recipe NAME|FILE` and `--torch` start from: a recipe file or name → that
// recipe; a package name ("torchvision") → every recipe of it; nothing → every torch recipe.
// `library` is every recipe of `search`'s folders, read once by the caller (app::Facts); only a
// recipe named by its path is read here.
Result<std::vector<recipe::Recipe>> select_recipes(const std::optional<std::string>& recipe_arg,
                                                   const std::vector<recipe::Recipe>& library,
                                                   const recipe::Search& search);

}  // namespace archbuild::plan
