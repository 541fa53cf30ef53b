// The shipped data as tests read it: the recipes of data_root()/recipes read once per test
// process, and recipe selection over them as app::Facts gives it to the application.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/resolve.hpp"
#include "recipe/recipe.hpp"
#include "toolchain/jetpack.hpp"
#include "toolchain/platform.hpp"

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

}  // namespace archbuild::test
