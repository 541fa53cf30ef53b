#include "recipe/driver.hpp"

#include <algorithm>
#include <cstddef>

#include "core/text.hpp"

namespace archbuild::recipe {

namespace {

// CMake's own half-configured tree: CMakeCache.txt is written even when the configure fails,
// the generator's file only when it succeeds.
HalfConfigured cmake_half_configured() { return {"CMakeCache.txt", {"build.ninja", "Makefile"}, {}}; }

// `python -m build` over the tree's backend: one call configures, compiles and packages.
std::vector<StepSpec> pep517_steps() {
  return {{Stage::build, "python", {"-m", "build", "--wheel", "--no-isolation", "--outdir", "{wheel_dir}", "{config_settings}", "."}}};
}

std::map<Stage, std::string> pep517_notes(const std::string& configures) {
  return {{Stage::configure, "the backend configures in the build step (python -m build runs " + configures + ")"},
          {Stage::package, "the build step made the wheel; this stage normalizes and stores it"}};
}

// The table: one entry per driver, by era of the projects it builds, in the order of
// recipe::Driver's enumerators (setup_py, python_build, scikit_build_core, cmake), then the rest.
const std::vector<DriverSpec>& table() {
  static const std::vector<DriverSpec> t = [] {
    std::vector<DriverSpec> v;
    {
      DriverSpec d;  // torch <= 2.8
      d.name = "setup-py";
      d.summary = "setup.py build --cmake-only / bdist_wheel";
      d.python_modules = {"setuptools", "wheel"};
      d.tools = {"cmake"};
      d.steps = {{Stage::configure, "python", {"setup.py", "build", "--cmake-only"}},
                 {Stage::build, "cmake", {"--build", "{build_dir}"}},
                 {Stage::package, "python", {"setup.py", "bdist_wheel"}}};
      d.wheel_stage = Stage::package;
      d.half_configured = cmake_half_configured();
      d.builds.first_for = {"setuptools"};
      d.builds.needs_file = "setup.py";
      d.builds.refusal_by_kind = {{"scikit-build-core", "setup.py's build commands fail in this era"}};
      d.builds.refusal_without_file = "there is no setup.py to run";
      v.push_back(d);
    }
    {
      DriverSpec d;  // torch 2.9 - 2.13, torchvision, torchaudio: any PEP 517 backend
      d.name = "python-build";
      d.summary = "python -m build --wheel";
      d.python_modules = {"build", "setuptools", "wheel"};
      d.steps = pep517_steps();
      d.wheel_stage = Stage::build;
      d.configure_stage = Stage::build;
      d.stage_notes = pep517_notes("CMake");
      d.half_configured = cmake_half_configured();
      d.builds.first_for = {"setuptools", "other"};
      d.builds.also_for = {"scikit-build-core"};
      v.push_back(d);
    }
    {
      DriverSpec d;  // torch >= 2.14
      d.name = "scikit-build-core";
      d.summary = "python -m build --wheel with the scikit-build-core backend";
      d.python_modules = {"build", "scikit_build_core"};
      d.steps = pep517_steps();
      d.wheel_stage = Stage::build;
      d.configure_stage = Stage::build;
      d.stage_notes = pep517_notes("CMake");
      d.skbuild_settings = true;
      d.half_configured = cmake_half_configured();
      d.builds.first_for = {"scikit-build-core"};
      v.push_back(d);
    }
    {
      DriverSpec d;  // plain CMake projects: no Python, no wheel
      d.name = "cmake";
      d.tools = {"cmake", "ninja"};  // -G Ninja
      d.runs_python = false;
      d.steps = {{Stage::configure, "cmake", {"-S", ".", "-B", "{build_dir}", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"}},
                 {Stage::build, "cmake", {"--build", "{build_dir}"}}};
      d.makes_wheel = false;
      d.stage_notes = {{Stage::package, "the cmake driver makes no wheel"}};
      d.half_configured = cmake_half_configured();
      d.builds.first_for = {"cmake"};
      d.builds.refusal_otherwise = "there is no top CMakeLists.txt";
      v.push_back(d);
    }
    {
      DriverSpec d;  // meson-python projects (numpy, scipy): build-backend mesonpy
      d.name = "meson-python";
      d.summary = "python -m build --wheel with the meson-python backend";
      // mesonpy comes into the build venv from the tree's [build-system].requires.
      d.python_modules = {"build"};
      d.tools = {"meson", "ninja"};  // meson-python runs `meson` and finds ninja on PATH
      d.steps = pep517_steps();
      d.wheel_stage = Stage::build;
      d.configure_stage = Stage::build;
      d.stage_notes = pep517_notes("Meson");
      // meson-python builds in a temporary directory unless told (nothing would resume, ccache
      // would see new paths every time); 0.12 (Debian 12) names the setting builddir, later
      // releases build-dir with builddir kept (mesonpy/__init__.py: _project).
      d.config_settings = {
          {"builddir", "{build_dir}", "meson-python builds in a temporary directory otherwise"},
          {"setup-args", "--native-file=$ARCHBUILD_MESON_NATIVE_FILE",
           "archbuild's compiler launchers as Meson's c, cpp and cuda (stages/meson_native.hpp); meson expands the variable"}};
      d.launchers = LauncherRoute::meson_native_file;
      // `meson setup` makes meson-private/ first and build.ninja last (mesonbuild/msetup.py). Its
      // native file in the source tree makes meson-python run `meson setup --reconfigure`, which
      // refuses a build directory without a finished configure: removed with the build tree.
      d.half_configured = {"meson-private", {"build.ninja"}, {".mesonpy-native-file.ini"}};
      d.builds.backends = {"mesonpy"};
      v.push_back(d);
    }
    return v;
  }();
  return t;
}

}  // namespace

const DriverSpec& driver_spec(Driver d) { return table().at(static_cast<std::size_t>(d)); }

const std::vector<Driver>& drivers() {
  static const std::vector<Driver> all = [] {
    std::vector<Driver> v;
    for (std::size_t i = 0; i < table().size(); ++i) v.push_back(static_cast<Driver>(i));
    return v;
  }();
  return all;
}

std::optional<Driver> driver_named(std::string_view name) {
  for (const auto& d : drivers())
    if (driver_spec(d).name == name) return d;
  return std::nullopt;
}

std::string_view to_string(Driver d) { return driver_spec(d).name; }

const std::vector<std::string>& default_python_modules(Driver d) { return driver_spec(d).python_modules; }

std::string drivers_expected_text() {
  std::vector<std::string> each;
  for (const auto& d : drivers()) {
    const auto& s = driver_spec(d);
    each.push_back(s.summary.empty() ? s.name : s.name + " (" + s.summary + ")");
  }
  std::string last = each.back();
  each.pop_back();
  return each.empty() ? last : text::join(each, ", ") + " or " + last;
}

}  // namespace archbuild::recipe
