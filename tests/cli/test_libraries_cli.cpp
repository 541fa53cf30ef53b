// "Libraries the wheel must not silently lack" and "A host checked before hours are
// spent", end to end with `archbuild wheel` / `plan`: a copy of examples/minitorch whose CMake
// looks for an optional library "minidnn" the way PyTorch looks for cuDNN and prints PyTorch's
// feature summary (tests/data/libraries/minidnn.cmake), and a recipe expecting it
// (minidnn-recipe.toml). The library (a header with version macros and a library file, made here)
// is reachable only through CMAKE_PREFIX_PATH, one of the allowlisted variables: found → built
// with USE_MINIDNN ON; absent → exit 3 before anything runs, saying how to provide it; --without
// minidnn → built OFF and recorded; found by the plan but not by the build's CMake → exit 4
// quoting the summary line. Then `plan --check` with an impossible disk requirement.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Whether any stage ran: a stage log anywhere in the cache (`plan` and the build venv may write
// other files there before a build is refused).
bool stage_ran(const fs::path& cache) {
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(cache, ec)) {
    std::string name = e.path().filename().string();
    if (name == "fetch.log" || name == "configure.log" || name == "build.log" || name == "package.log") return true;
  }
  return false;
}

const fs::path kSource = ARCHBUILD_SOURCE_DIR;
const fs::path kData = ARCHBUILD_TEST_DATA;

std::string unavailable() {
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) return u;
  if (!fs::exists("/usr/bin/python3")) return "no /usr/bin/python3";
  if (t::which("cmake").empty() || t::which("ninja").empty()) return "cmake or ninja not on PATH";
  if (t::run("/usr/bin/python3", {"-c", "import setuptools, wheel"}).status != 0) return "/usr/bin/python3 lacks setuptools or wheel";
  return "";
}

struct Project {
  t::TempDir dir;
  fs::path tree = dir / "examples/minitorch";
  fs::path recipe = tree / "minidnn.toml";
  fs::path prefix = dir / "minidnn";

  Project() {
    // The example and the submodule its link points at, side by side as in the repository.
    fs::create_directories(dir / "examples");
    for (const char* d : {"minitorch", "minitorch-dep"})
      fs::copy(kSource / "examples" / d, dir / "examples" / d,
               fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    fs::copy_file(kData / "libraries/minidnn.cmake", tree / "minidnn.cmake");
    std::ofstream(tree / "CMakeLists.txt", std::ios::app) << "\ninclude(${CMAKE_CURRENT_SOURCE_DIR}/minidnn.cmake)\n";
    fs::copy_file(kData / "libraries/minidnn-recipe.toml", recipe);
    dir.write("minidnn/include/minidnn.h",
              "#pragma once\n#define MINIDNN_MAJOR 1\n#define MINIDNN_MINOR 4\n#define MINIDNN_PATCH 2\n");
    dir.write("minidnn/lib/libminidnn.so", "a stand-in: found by name, never linked\n");
  }

  std::vector<std::string> wheel(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> a = {"--cache-dir", (dir / "cache").string(), "wheel", "--sm", "90", "--recipe",
                                  recipe.string(), "--python", "/usr/bin/python3", "--out", (dir / "out").string(),
                                  "--no-validate", "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  t::RunOptions with_prefix(const fs::path& p) const {
    t::RunOptions o;
    o.env["CMAKE_PREFIX_PATH"] = p.string();
    o.unset_env = {"MINIDNN_ROOT"};
    return o;
  }
  t::RunOptions without_prefix() const {
    t::RunOptions o;
    o.unset_env = {"CMAKE_PREFIX_PATH", "MINIDNN_ROOT"};
    return o;
  }
  json manifest(const json& result) const {
    std::ifstream in(result["wheel"].get<std::string>() + ".manifest.json");
    return json::parse(in);
  }
};

const json& library(const json& libs, const std::string& name) {
  for (const auto& l : libs["libraries"])
    if (l["name"] == name) return l;
  FAIL("no library " << name);
  static json none;
  return none;
}

}  // namespace

TEST_CASE("libraries: an optional library found only through CMAKE_PREFIX_PATH is built ON - absent is exit 3 - "
          "--without builds it OFF / recorded", "[cli][wheel][libraries][nvcc]") {
  if (auto why = unavailable(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Project p;

  // Absent: exit 3 before anything runs, with how to provide it.
  auto missing = t::archbuild(p.wheel(), p.without_prefix());
  INFO(missing.err);
  CHECK(missing.status == 3);
  CHECK(missing.err.find("the recipe expects a library but this host lacks minidnn: minidnn (minidnn): put minidnn's "
                         "prefix on CMAKE_PREFIX_PATH; or build without (recorded in the manifest): --without minidnn") !=
        std::string::npos);
  auto mj = json::parse(missing.out);
  CHECK(library(mj["libraries"], "minidnn")["state"] == "missing");
  CHECK_FALSE(stage_ran(p.dir / "cache"));

  // Found through the allowlisted CMAKE_PREFIX_PATH: the plan says so, the build's CMake finds it.
  auto found = t::archbuild(p.wheel(), p.with_prefix(p.prefix));
  INFO(found.err);
  REQUIRE(found.status == 0);
  auto fj = json::parse(found.out);
  const auto& lib = library(fj["libraries"], "minidnn");
  CHECK(lib["state"] == "found");
  CHECK(lib["from"]["origin"] == "cmake-prefix-path");
  CHECK(lib["from"]["version"] == "1.4.2");
  auto m = p.manifest(fj);
  CHECK(m["environment"]["USE_MINIDNN"] == "1");
  CHECK(m["environment"]["CMAKE_PREFIX_PATH"] == p.prefix.string());  // passed through, not keyed
  CHECK(m["features"]["checked"] == true);
  CHECK(m["features"]["findings"][0]["feature"] == "USE_MINIDNN");
  CHECK(m["features"]["findings"][0]["on"] == true);
  CHECK(m["host_check"]["ok"] == true);

  // --without: another key, USE_MINIDNN=0 reaches CMake, the manifest says why it is off.
  auto without = t::archbuild(p.wheel({"--without", "minidnn"}), p.without_prefix());
  INFO(without.err);
  REQUIRE(without.status == 0);
  auto wj = json::parse(without.out);
  CHECK(wj["key"] != fj["key"]);
  auto wm = p.manifest(wj);
  CHECK(wm["environment"]["USE_MINIDNN"] == "0");
  CHECK(library(wm["libraries"], "minidnn")["state"] == "without");
  CHECK(library(wm["libraries"], "minidnn")["reason"] == "--without minidnn");
  CHECK(wm["libraries"]["without"] == json::array({"minidnn"}));
}

TEST_CASE("libraries: found by the plan but not by the build's CMake: the configure stage fails (exit 4) quoting "
          "the summary line", "[cli][wheel][libraries][nvcc]") {
  if (auto why = unavailable(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Project p;
  // Only the versioned file: archbuild's data accepts libminidnn.so.1, CMake's find_library wants
  // libminidnn.so — the build turns the option off with a warning, as PyTorch does.
  std::string text = t::read_file(p.recipe);
  text.replace(text.find("libs = [\"libminidnn.so\"]"), std::string("libs = [\"libminidnn.so\"]").size(),
               "libs = [\"libminidnn.so.1\"]");
  p.dir.write("examples/minitorch/minidnn.toml", text);
  fs::rename(p.prefix / "lib/libminidnn.so", p.prefix / "lib/libminidnn.so.1");
  auto r = t::archbuild(p.wheel(), p.with_prefix(p.prefix));
  INFO(r.err);
  CHECK(r.status == 4);
  CHECK(r.err.find("configure stage: minidnn was found for the plan (1.4.2 in " + (p.prefix / "lib").string() +
                   ") but the build switched it off: \"--   USE_MINIDNN           : OFF\"") != std::string::npos);
}

TEST_CASE("libraries: plan shows each library and the host check - plan --check with an impossible disk figure is "
          "exit 3 naming the figures", "[cli][plan][libraries]") {
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) {
    WARN("##archbuild-skip## " << u << " (the plan resolves a toolkit)");
    return;
  }
  Project p;
  std::ofstream(p.recipe, std::ios::app) << "\n[host]\ndisk_gib = 100000000\n";
  std::vector<std::string> args = {"--cache-dir", (p.dir / "cache").string(), "plan", "--sm", "90", "--recipe",
                                   p.recipe.string(), "--json"};
  auto shown = t::archbuild(args, p.with_prefix(p.prefix));
  INFO(shown.err);
  REQUIRE(shown.status == 0);  // plan describes; --check enforces
  auto j = json::parse(shown.out);
  CHECK(j["ready"] == false);
  CHECK(j["host_check"]["ok"] == false);
  CHECK(j["host_check"]["disk"]["need_gib"] == 100000000.0);
  CHECK(library(j["libraries"], "minidnn")["state"] == "found");
  args.push_back("--check");
  auto checked = t::archbuild(args, p.with_prefix(p.prefix));
  CHECK(checked.status == 3);
  CHECK(checked.err.find("host check: ") != std::string::npos);
  CHECK(checked.err.find("GiB free in " + (p.dir / "cache").string()) != std::string::npos);
  CHECK(checked.err.find("needs 1e+08 GiB there (recipe [host] disk_gib)") != std::string::npos);
  // The same for wheel, before anything runs.
  auto w = t::archbuild(p.wheel(), p.with_prefix(p.prefix));
  CHECK(w.status == 3);
  CHECK(json::parse(w.out)["host_check"]["ok"] == false);
  CHECK_FALSE(stage_ran(p.dir / "cache"));
}
