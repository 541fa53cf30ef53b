// The shipped data as tests read it: the recipes of data_root()/recipes read once per test
// process, and recipe selection over them as app::Facts gives it to the application.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "plan/resolve.hpp"
#include "recipe/library_spec.hpp"
#include "recipe/recipe.hpp"
#include "toolchain/jetpack.hpp"
#include "toolchain/platform.hpp"
#include "validate/closure.hpp"

namespace archbuild::test {

inline const std::vector<recipe::Recipe>& shipped_recipes() {
  static const std::vector<recipe::Recipe> all = recipe::load_shipped().take();
  return all;
}

inline Result<std::vector<recipe::Recipe>> select_shipped(const std::optional<std::string>& arg) {
  return plan::select_recipes(arg, shipped_recipes(), recipe::Search::shipped());
}

// plan::Inputs' data (platforms, JetPacks) as shipped.
inline void shipped_data(plan::Inputs& in) {
  in.platforms = toolchain::Platforms::shipped();
  in.jetpacks = toolchain::JetPacks::shipped();
}

// data/build-libraries.toml and data/validate/libraries.toml as shipped, read once per process:
// what app::Facts hands plan/prepare and validate/the package stage.
inline const std::vector<recipe::LibrarySpec>& shipped_library_specs() {
  static const std::vector<recipe::LibrarySpec> specs = recipe::load_shipped_library_specs().take();
  return specs;
}
inline const validate::LibraryFacts& shipped_library_facts() {
  static const validate::LibraryFacts facts = validate::load_library_facts(validate::shipped_library_facts()).take();
  return facts;
}

// Plan options as app::Facts completes them: the shipped library specs where none are given.
inline plan::PlanOptions with_shipped_specs(plan::PlanOptions o = {}) {
  if (!o.library_specs) o.library_specs = &shipped_library_specs();
  return o;
}

}  // namespace archbuild::test
