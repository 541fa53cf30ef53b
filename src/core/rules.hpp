// The rules archbuild checks before a build, as one registry: each rule's id (what `resolve`
// prints, `plan --json` "stops" and `matrix` "refused" name), what it checks and the exit status
// it stops with. Rule sites name an `rules::Id`, never a string; docs/commands.md ("Rules")
// lists the same table, and a test holds the two together.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace archbuild::rules {

enum class Id : std::uint8_t {
  // resolution (plan/resolve.cpp): the request, then every (recipe, CUDA) pair, then the chosen
  // pair's installed tools
  targets,
  platform,
  torch_version,
  torch_pairing,
  recipe_cuda,
  toolchain_data,
  toolkit_arch,
  platform_cuda,
  arch_syntax,
  python_version,
  source_url,
  nvcc_arch_list,
  platform_host,
  toolkit_installed,
  host_compiler,
  python_default,
  python_installed,
  python_modules,
  tool_installed,
  arch_list,
  // the tree's contract against the plan (contract/contract.cpp)
  driver_backend,
  version,
  cmake_minimum,
  skbuild_metadata,
  // the stops before the first stage (prepare/)
  cache_dir,
  out,
  store_required,
  release_line,
  source_pin,
  submodules,
  patch,
  build_venv,
  tree_download,
  fetch_pin,
  libraries,
  host,
};

// Where a rule is checked: what groups the documentation's table.
enum class Step : std::uint8_t { resolve, contract, prepare };

struct Spec {
  Id id;
  std::string_view name;    // "toolkit-arch": the id as printed and in every JSON document
  Step step;
  std::string_view checks;  // one line: what the rule checks
  // The status a failure of this rule ends with (Exit::ok: it never stops anything, it only
  // steers a choice or reports one); `also` a second status some of its failures end with.
  Exit exit = Exit::ok;
  std::optional<Exit> also;
};

// Every rule, in the order of Id.
std::span<const Spec> all();
const Spec& spec(Id id);
std::string_view name(Id id);
inline std::string str(Id id) { return std::string(name(id)); }
std::optional<Id> from_name(std::string_view name);
std::string_view to_string(Step s);  // "resolve", "contract", "prepare"

}  // namespace archbuild::rules
