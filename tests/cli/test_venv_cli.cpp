// The build venv end to end: a variant of examples/minitorch whose setup.py imports a package the
// system Python lacks (archbuild-tinydep, listed in requirements-build.txt like PyTorch's pyyaml).
// The test builds that package into a local wheelhouse with /usr/bin/python3 -m pip wheel (no
// network; archbuild's pip gets PIP_NO_INDEX=1 from the test harness), then plans and builds with
// --find-links, with PIP_FIND_LINKS, and without the wheelhouse (exit 3 before configure).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kRecipe = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";
const std::string kPython = "/usr/bin/python3";

std::string why_not() {
  if (!fs::exists(kPython)) return "no " + kPython;
  auto r = t::run(kPython, {"-c", "import setuptools, wheel, venv, pip"});
  if (r.status != 0) return kPython + " lacks setuptools, wheel, venv or pip";
  if (t::which("cmake").empty() || t::which("ninja").empty()) return "cmake or ninja not on PATH";
  return "";
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Fixture {
  t::TempDir dir;
  fs::path project, wheelhouse, cache;
  Fixture() {
    project = dir / "minitorch-reqs";
    wheelhouse = dir / "wheelhouse";
    cache = dir / "cache";
    // The example, its submodule link followed; then the requirement the system Python lacks.
    auto cp = t::run("/bin/cp", {"-rL", std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch", project.string()});
    REQUIRE(cp.status == 0);
    for (const char* out : {"build", "dist"}) fs::remove_all(project / out);
    {
      std::ofstream reqs(project / "requirements-build.txt", std::ios::app);
      reqs << "archbuild-tinydep>=1.0  # like PyTorch's pyyaml: setup.py imports it\n";
    }
    std::string setup = read(project / "setup.py");
    auto at = setup.find("import sys\n");
    REQUIRE(at != std::string::npos);
    setup.insert(at + 11, "import archbuild_tinydep  # a build requirement the system Python lacks\n");
    std::ofstream(project / "setup.py") << setup;
    // The package, built into a wheelhouse by the system's pip and setuptools (no network).
    fs::path src = dir / "tinydep";
    fs::create_directories(src / "archbuild_tinydep");
    std::ofstream(src / "archbuild_tinydep" / "__init__.py") << "VERSION = '1.0'\n";
    std::ofstream(src / "setup.py") << "from setuptools import setup\n"
                                       "setup(name='archbuild-tinydep', version='1.0', packages=['archbuild_tinydep'])\n";
    auto w = t::pip_wheel(kPython, src.string(), wheelhouse.string());
    INFO(w.out << w.err);
    REQUIRE(w.status == 0);
  }
  std::vector<std::string> args(const std::string& command, const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> a = {"--cache-dir", cache.string(), command, "--sm", "90", "--recipe", kRecipe,
                                  "--source", project.string(), "--python", kPython, "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  t::RunOptions opts(std::map<std::string, std::string> env = {}) const {
    t::RunOptions o;
    o.env = std::move(env);
    o.unset_env = {"PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONFIG_FILE"};
    for (const auto& [k, v] : o.env)
      o.unset_env.erase(std::remove(o.unset_env.begin(), o.unset_env.end(), k), o.unset_env.end());
    o.env["PIP_CONFIG_FILE"] = "/dev/null";  // no pip.conf of this machine
    o.timeout = std::chrono::seconds(900);
    return o;
  }
};

fs::file_time_type marker_time(const json& venv) {
  return fs::last_write_time(fs::path(venv["dir"].get<std::string>()) / "archbuild-venv.json");
}

}  // namespace

TEST_CASE("venv: plan with PIP_FIND_LINKS from the environment installs the requirement, and a repeat reuses the venv",
          "[cli][venv]") {
  if (auto why = why_not(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Fixture f;
  auto r = t::archbuild(f.args("plan"), f.opts({{"PIP_FIND_LINKS", f.wheelhouse.string()}}));
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = json::parse(r.out);
  const json& v = j["build_venv"];
  REQUIRE(v.is_object());
  CHECK(v["packages"]["archbuild-tinydep"] == "1.0");
  CHECK(v["reused"] == false);
  CHECK(fs::path(v["python"].get<std::string>()).parent_path().parent_path() == fs::path(v["dir"].get<std::string>()));
  // The steps run the venv's python; its bin/ is first on PATH.
  CHECK(j["steps"][0]["argv"][0] == v["python"]);
  CHECK(j["env"]["PATH"].get<std::string>().rfind(v["dir"].get<std::string>() + "/bin:", 0) == 0);
  // Where packages came from, and the host's cmake standing in for the requirement.
  std::string sources = v["sources"].dump();
  CHECK(sources.find("find-links " + f.wheelhouse.string()) != std::string::npos);
  CHECK(v["from_host"].dump().find("cmake>=3.18") != std::string::npos);
  // The binary-shaping versions are in the key.
  CHECK(j["key_inputs"]["build_venv"]["packages"].contains("setuptools"));
  CHECK(j["key_inputs"]["build_venv"]["interpreter_version"].is_string());

  auto before = marker_time(v);
  auto again = t::archbuild(f.args("plan"), f.opts({{"PIP_FIND_LINKS", f.wheelhouse.string()}}));
  REQUIRE(again.status == 0);
  auto j2 = json::parse(again.out);
  CHECK(j2["build_venv"]["reused"] == true);
  CHECK(j2["build_venv"]["dir"] == v["dir"]);
  CHECK(marker_time(j2["build_venv"]) == before);
  CHECK(j2["key"] == j["key"]);
}

TEST_CASE("venv: plan --offline gives pip no index, only the wheelhouse", "[cli][venv]") {
  if (auto why = why_not(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Fixture f;
  // An index that would answer nothing: with --offline pip never asks it.
  auto r = t::archbuild(f.args("plan", {"--offline", "--find-links", f.wheelhouse.string()}),
                        f.opts({{"PIP_INDEX_URL", "http://127.0.0.1:9/simple"}}));
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = json::parse(r.out);
  const json& v = j["build_venv"];
  REQUIRE(v.is_object());
  CHECK(v["packages"]["archbuild-tinydep"] == "1.0");
  CHECK(v["sources"][0] == "no index (--offline)");
  auto log = read(f.cache / "venvs" / (v["hash"].get<std::string>() + ".log"));
  CHECK(log.find("Looking in indexes") == std::string::npos);
  CHECK(log.find("Retrying") == std::string::npos);
}

TEST_CASE("venv: without the wheelhouse the build stops before configure, exit 3, naming the requirement",
          "[cli][venv]") {
  if (auto why = why_not(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Fixture f;
  auto r = t::archbuild(f.args("wheel", {"--out", (f.dir / "out").string()}), f.opts());
  INFO(r.out << r.err);
  CHECK(r.status == 3);
  CHECK(r.err.find("archbuild-tinydep>=1.0") != std::string::npos);
  CHECK(r.err.find("Debian package python3-archbuild-tinydep, or --find-links") != std::string::npos);
  // Nothing configured, no venv published (only its log), no wheel.
  std::error_code ec;
  CHECK_FALSE((fs::exists(f.cache / "logs", ec) && !fs::is_empty(f.cache / "logs", ec)));
  for (const auto& e : fs::directory_iterator(f.cache / "venvs", ec)) {
    INFO(e.path());
    CHECK((e.path().extension() == ".log" || e.path().extension() == ".lock"));
  }
  CHECK_FALSE(fs::exists(f.dir / "out", ec));
}

TEST_CASE("venv: wheel with --find-links builds, with its versions in the manifest and key, and a repeat keeps the venv",
          "[cli][venv][nvcc]") {
  if (auto why = why_not(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) {
    WARN("##archbuild-skip## " << u);
    return;
  }
  Fixture f;
  auto r = t::archbuild(f.args("wheel", {"--find-links", f.wheelhouse.string(), "--out", (f.dir / "out").string()}),
                        f.opts());
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = json::parse(r.out);
  CHECK(j["ok"] == true);
  auto manifest = json::parse(read(j["manifest"].get<std::string>()));
  const json& v = manifest["manifest"]["build_venv"];
  REQUIRE(v.is_object());
  CHECK(v["packages"]["archbuild-tinydep"] == "1.0");
  CHECK(v["pip_options"]["find_links"] == f.wheelhouse.string());
  CHECK(manifest["plan"]["key_inputs"]["build_venv"]["packages"].contains("setuptools"));
  // The manifest beside the wheel says the same.
  auto beside = json::parse(read(j["wheel"].get<std::string>() + ".manifest.json"));
  CHECK(beside["build_venv"]["packages"]["archbuild-tinydep"] == "1.0");

  // A repeat: the same key (--find-links is not in it), the venv reused, not made again.
  auto before = marker_time(v);
  auto again = t::archbuild(f.args("wheel", {"--find-links", f.wheelhouse.string(), "--out", (f.dir / "out2").string()}),
                            f.opts());
  INFO(again.err);
  REQUIRE(again.status == 0);
  auto j2 = json::parse(again.out);
  CHECK(j2["key"] == j["key"]);
  CHECK(j2["reused"] == true);
  CHECK(marker_time(v) == before);
}

TEST_CASE("venv: a tree whose cmake minimum is above the host's gets the venv's cmake, first on PATH and in the key",
          "[cli][venv]") {
  if (auto why = why_not(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  if (t::which("cmake").empty()) {
    WARN("##archbuild-skip## no cmake on PATH");
    return;
  }
  auto host = t::run(t::which("cmake"), {"--version"});
  if (host.out.find("cmake version 3.2") == std::string::npos) {
    WARN("##archbuild-skip## the host's cmake is not 3.2x (the case needs one below 3.30): " << host.out);
    return;
  }
  Fixture f;
  // Like PyTorch >= 2.10 on Debian 12: cmake_minimum_required(VERSION 3.30) above the host's 3.25.
  std::string cml = read(f.project / "CMakeLists.txt");
  auto at = cml.find("cmake_minimum_required(VERSION 3.18)");
  REQUIRE(at != std::string::npos);
  cml.replace(at, std::string("cmake_minimum_required(VERSION 3.18)").size(), "cmake_minimum_required(VERSION 3.30)");
  std::ofstream(f.project / "CMakeLists.txt") << cml;
  // The pip package cmake stands in as a wheel built here (no cmake wheel exists offline): its
  // `cmake` script reports 3.31.0.
  fs::path src = f.dir / "fake-cmake";
  fs::create_directories(src);
  std::ofstream(src / "cmake") << "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'cmake version 3.31.0'; exit 0; }\n"
                                  "exec /usr/bin/cmake \"$@\"\n";
  std::ofstream(src / "setup.py") << "from setuptools import setup\nsetup(name='cmake', version='3.31.0', scripts=['cmake'])\n";
  auto w = t::pip_wheel(kPython, src.string(), f.wheelhouse.string());
  INFO(w.out << w.err);
  REQUIRE(w.status == 0);

  auto r = t::archbuild(f.args("plan", {"--find-links", f.wheelhouse.string()}), f.opts());
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = json::parse(r.out);
  const json& v = j["build_venv"];
  REQUIRE(v.is_object());
  CHECK(v["packages"]["cmake"] == "3.31.0");
  CHECK(v["cmake"] == v["dir"].get<std::string>() + "/bin/cmake");
  CHECK(v["cmake_version"] == "3.31.0");
  CHECK(j["key_inputs"]["build_venv"]["cmake"] == "3.31.0");
  // Every step finds that one cmake first: the venv's bin/ leads PATH.
  CHECK(j["env"]["PATH"].get<std::string>().rfind(v["dir"].get<std::string>() + "/bin:", 0) == 0);
}
