// --store and its companions on `wheel`, `plan` and `matrix` (docs/store.md); what they mean is
// app/store.hpp's.
#pragma once

#include <CLI/CLI.hpp>

#include "app/store.hpp"

namespace archbuild::cli {

using app::StoreArgs;

void add_store_options(CLI::App& cmd, StoreArgs& args, bool pushes);

}  // namespace archbuild::cli
