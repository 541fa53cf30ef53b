// The build venv's decisions that need no process: which requirements pip gets and which a host
// program satisfies, PEP 440 specifiers for host versions, the cmake choice, provider hints.
#include <catch2/catch.hpp>

#include "stages/venv.hpp"

namespace s = archbuild::stages;
using archbuild::Version;

namespace {

archbuild::contract::Requirement req(const std::string& name, const std::string& spec = "",
                                     const std::string& file = "requirements-build.txt") {
  archbuild::contract::Requirement r;
  r.name = name;
  r.specifier = spec;
  r.where = {file, 1};
  return r;
}

s::VenvRequest base() {
  s::VenvRequest q;
  q.interpreter = "/usr/bin/python3";
  q.interpreter_version = *Version::parse("3.11.2");
  q.host_tools = {{"cmake", "/usr/bin/cmake"}, {"ninja", "/usr/bin/ninja"}};
  q.host_tool_versions = {{"cmake", *Version::parse("3.25.1")}};
  return q;
}

}  // namespace

TEST_CASE("venv: specifiers on host versions", "[venv]") {
  auto v = *Version::parse("3.25.1");
  CHECK(s::specifier_allows(">=3.18", v));
  CHECK(s::specifier_allows(">=3.18,<4", v));
  CHECK_FALSE(s::specifier_allows(">=3.27", v));
  CHECK(s::specifier_allows("==3.25.*", v));
  CHECK_FALSE(s::specifier_allows("!=3.25.*", v));
  CHECK(s::specifier_allows("~=3.20", v));
  CHECK_FALSE(s::specifier_allows("~=3.26.0", v));
  CHECK_FALSE(s::specifier_allows(">=garbage", v));
  CHECK(s::specifier_allows("", v));
}

TEST_CASE("venv: pip gets the tree's build requirements, and the host's cmake and ninja stand in where they fit",
          "[venv]") {
  auto q = base();
  q.requirements = {req("setuptools", ">=61", "pyproject.toml"), req("wheel", "", "pyproject.toml"),
                    req("cmake", ">=3.18"), req("ninja"), req("archbuild_tinydep", ">=1.0"),
                    req("hypothesis", "", "requirements.txt")};
  q.driver_modules = {"setuptools", "wheel"};
  auto p = s::pip_requirements(q);
  CHECK(p.pip == std::vector<std::string>{"archbuild_tinydep>=1.0", "setuptools>=61", "wheel"});
  REQUIRE(p.from_host.size() == 2);
  CHECK(p.from_host[0] == "cmake>=3.18: /usr/bin/cmake 3.25.1");
  CHECK(p.from_host[1] == "ninja: /usr/bin/ninja");
  CHECK_FALSE(p.cmake_problem);
}

TEST_CASE("venv: a host cmake older than the tree's minimum or newer than the recipe's maximum gives way to pip's",
          "[venv]") {
  auto q = base();
  q.requirements = {req("setuptools")};
  q.cmake_min = *Version::parse("3.27");
  q.cmake_min_where = "CMakeLists.txt:1";
  auto p = s::pip_requirements(q);
  REQUIRE(p.cmake_problem);
  CHECK(p.cmake_problem->find("3.27") != std::string::npos);
  CHECK(p.cmake_problem->find("3.25.1") != std::string::npos);
  CHECK(std::find(p.pip.begin(), p.pip.end(), "cmake>=3.27") != p.pip.end());

  auto m = base();
  m.host_tool_versions["cmake"] = *Version::parse("4.1.2");
  m.cmake_max = *Version::parse("3.31");
  m.requirements = {req("cmake", ">=3.18")};
  auto pm = s::pip_requirements(m);
  REQUIRE(pm.cmake_problem);
  CHECK(pm.cmake_problem->find("cmake_max") != std::string::npos);
  // The tree's own cmake requirement goes to pip, within the recipe's maximum.
  CHECK(pm.pip == std::vector<std::string>{"cmake>=3.18,<3.32"});
  CHECK(pm.from_host.empty());

  auto ok = base();
  ok.host_tool_versions["cmake"] = *Version::parse("3.31.6");
  ok.cmake_max = *Version::parse("3.31");
  CHECK_FALSE(s::pip_requirements(ok).cmake_problem);
}

TEST_CASE("venv: a missing requirement is named with what provides it", "[venv]") {
  CHECK(s::provider_hint("numpy", "/usr/bin/python3") ==
        "Debian package python3-numpy, or --find-links a wheelhouse that has it, or --index-url a mirror");
  CHECK(s::provider_hint("numpy", "/opt/py/bin/python3") == "--find-links a wheelhouse that has it, or --index-url a mirror");
  CHECK(s::provider_hint("cmake", "/usr/bin/python3").find("pip package cmake") != std::string::npos);
  CHECK(s::canonical_name("Typing_Extensions") == "typing-extensions");
  CHECK(s::canonical_name("scikit_build.core") == "scikit-build-core");
}

TEST_CASE("venv: a requirement of the tree on the torch wheel given is left to that file and never asked of pip",
          "[venv]") {
  auto q = base();
  q.requirements = {req("setuptools"), req("torch", ">=2.14")};
  q.wheels = {"/out/torch-2.14.0+cu130.sm90-cp311-cp311-manylinux_2_28_x86_64.whl"};
  auto p = s::pip_requirements(q);
  CHECK(p.pip == std::vector<std::string>{"setuptools"});
  REQUIRE(p.from_wheels.size() == 1);
  CHECK(p.from_wheels[0] == "torch>=2.14: torch-2.14.0+cu130.sm90-cp311-cp311-manylinux_2_28_x86_64.whl");
}
