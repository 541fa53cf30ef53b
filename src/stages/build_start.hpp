// The build start a run of a local tree takes (docs/build.md "Incremental builds"): the plan's,
// unless what the plan saw of the slot is no longer so when the run starts — another key built
// there since, the earlier key's record is gone or never configured, or the compiler launchers
// differ from those its build tree was configured with (CMake reads them only on its first
// configure, so a continued tree would keep running the old ones). Then the build is clean and
// says why: a plan's "incremental from K" is a decision the run re-checks, never trusts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "plan/plan.hpp"
#include "store/layout.hpp"

namespace archbuild::stages {

// `launchers`: Context::launchers() of this run. Returns `planned` unchanged unless it is
// incremental and one of the conditions above holds; then a clean start whose `why` says which.
plan::BuildStart effective_build_start(const plan::BuildStart& planned, const store::Layout& layout,
                                       const std::string& slot, const std::string& key,
                                       const nlohmann::json& launchers);

}  // namespace archbuild::stages
