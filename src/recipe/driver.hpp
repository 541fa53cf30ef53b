// Build drivers: how a tree is built, one description each (DriverSpec), looked up in one table
// (driver.cpp). Everything that differs between drivers is a field here — the steps and the
// stages they run in, the programs and Python modules they need, how archbuild's compiler
// launchers (the compiler cache, the build-path rewrite, memory admission) reach the compiles,
// what a half-configured build tree looks like, and which trees' contracts the driver builds — so
// plan/, stages/ and contract/ look fields up instead of switching on the driver. A new driver is
// one entry in the table (its launcher route and half-configured marker among the existing ones).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/recipe.hpp"
#include "recipe/stage.hpp"

namespace archbuild::recipe {

// How archbuild's launchers (each a chain: `archbuild cuda-launch …` and/or ccache/sccache, built
// by stages/environment.cpp for C, CXX and CUDA) reach the driver's compiles.
enum class LauncherRoute {
  // CMAKE_<LANG>_COMPILER_LAUNCHER in the environment, which CMake reads on its first configure
  // (setup.py, python -m build over setuptools or scikit-build-core, plain cmake).
  cmake_env,
  // A Meson native file whose c, cpp and cuda entries are lists [launcher…, compiler] (Meson takes
  // a compiler given as a list and runs the whole list, as it does for ccache), written per build
  // and named by $ARCHBUILD_MESON_NATIVE_FILE, which the driver's config settings pass to
  // `meson setup --native-file` (Meson expands variables in that path, so the key holds none).
  meson_native_file,
};

// One step: argv after the program. "{build_dir}" and "{wheel_dir}" are the plan's;
// "{config_settings}" is "-C NAME=VALUE" for each of the plan's config settings.
struct StepSpec {
  Stage stage;        // configure, build or package
  std::string tool;   // "python" (the build's interpreter) or a program the build needs (cmake)
  std::vector<std::string> args;
};

// A PEP 517 config setting the driver always passes; "{build_dir}" in the value is the plan's.
struct ConfigSetting {
  std::string name, value;
  std::string why;  // the plan's note: "NAME: passed: WHY"
};

// A build tree whose configure did not finish, which the backend would trust on the next run.
struct HalfConfigured {
  std::string marker;                 // written early in a configure ("CMakeCache.txt")
  std::vector<std::string> finished;  // any of these: the configure finished ("build.ninja")
  // Files the backend keeps in the source tree about the build tree, removed with it (a backend
  // that finds them would reconfigure a tree that is gone).
  std::vector<std::string> state_files;
};

// Which trees the driver builds, by what the tree's contract shows (contract::Contract): a
// backend kind is contract::to_string(Backend) ("setuptools", "scikit-build-core", "cmake",
// "other"). The drivers that build a tree are listed first those whose `backends` name its
// [build-system].build-backend, then those `first_for` its kind, then those `also_for` it.
struct Builds {
  std::vector<std::string> backends;  // build-backend values as written ("mesonpy")
  std::vector<std::string> first_for;
  std::vector<std::string> also_for;
  std::string needs_file;  // a file the tree must have to be built by it ("setup.py"); "" none
  // Why it cannot build a tree it does not list (the driver-backend refusal): by kind, else
  // for a missing needs_file, else `otherwise`, else "the DRIVER driver cannot build a KIND tree".
  std::map<std::string, std::string> refusal_by_kind;
  std::string refusal_without_file;
  std::string refusal_otherwise;
};

struct DriverSpec {
  std::string name;     // the recipe's build.driver value: "setup-py"
  std::string summary;  // what it runs, for the refusal of an unknown name; "" none
  // The modules its steps import when the recipe does not say ([build] python_modules).
  std::vector<std::string> python_modules;
  std::vector<std::string> tools;  // programs its steps call besides python (resolution finds them)
  bool runs_python = true;         // false: no build venv, no Python at all (cmake)
  std::vector<StepSpec> steps;
  bool makes_wheel = true;                    // false: the plan's wheel_dir is empty
  std::optional<Stage> wheel_stage;           // the stage whose steps write the wheel; none: no wheel
  Stage configure_stage = Stage::configure;   // build: the backend configures in its build step
  std::map<Stage, std::string> stage_notes;  // why a stage has no step of its own
  std::vector<ConfigSetting> config_settings;      // always passed
  // The driver is scikit-build-core's own: it passes config settings only where the tree's
  // [tool.scikit-build] leaves them open (plan.cpp), and the contract checks that table's rules.
  bool skbuild_settings = false;
  LauncherRoute launchers = LauncherRoute::cmake_env;
  HalfConfigured half_configured;
  Builds builds;
};

// A driver's entry. recipe::Driver is the table's index: its enumerators name the first
// entries, which code and tests name directly; every later entry (meson-python) is a value of
// the enum found by name (driver_named), so a new driver changes no header.
const DriverSpec& driver_spec(Driver d);
// Every driver, in the table's order (the order of messages and `contract` listings).
const std::vector<Driver>& drivers();
std::optional<Driver> driver_named(std::string_view name);
// The refusal of an unknown build.driver: "setup-py (setup.py …), … or cmake".
std::string drivers_expected_text();

}  // namespace archbuild::recipe
