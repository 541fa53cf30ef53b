// contract: reading a tree's build contract (pyproject.toml with each backend, requirement files,
// cmake_minimum_required, version.txt, pins) over in-memory files and over a fixture in PyTorch's
// formats, and the checks against the plan with their exit statuses.
#include <catch2/catch.hpp>

#include <map>

#include "contract/contract.hpp"

using namespace archbuild;
using namespace archbuild::contract;

namespace {

Version V(const char* s) { return *Version::parse(s); }

// A tree held in memory: path -> content.
FileAccess memory(std::map<std::string, std::string> files) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(files));
  FileAccess a;
  a.read = [shared](const std::string& p) -> std::optional<std::string> {
    auto it = shared->find(p);
    if (it == shared->end()) return std::nullopt;
    return it->second;
  };
  a.list = [shared](const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& [p, _] : *shared)
      if (p.rfind(dir + "/", 0) == 0 && p.find('/', dir.size() + 1) == std::string::npos)
        names.push_back(p.substr(dir.size() + 1));
    return names;
  };
  return a;
}

Contract read(std::map<std::string, std::string> files) {
  auto c = read_contract(memory(std::move(files)));
  INFO((c ? "" : c.error().message));
  REQUIRE(c.ok());
  return *c;
}

Expectation expect(recipe::Driver d, const char* version = "2.15.0", std::optional<Version> cmake = std::nullopt) {
  Expectation e;
  e.driver = d;
  e.recipe_file = "recipes/torch-2.15.toml";
  e.version = V(version);
  e.cmake = cmake;
  e.cmake_path = "/usr/bin/cmake";
  return e;
}

const Finding& finding(const std::vector<Finding>& fs, const std::string& rule) {
  for (const auto& f : fs)
    if (f.rule == rule) return f;
  FAIL("no finding " << rule);
  return fs.front();
}

}  // namespace

TEST_CASE("pyproject with the setuptools backend: backend, line and requirements", "[contract]") {
  auto c = read({{"pyproject.toml",
                  "[build-system]\nrequires = [\n  \"setuptools>=70.1\",  # why\n  \"wheel\",\n]\n"
                  "build-backend = \"setuptools.build_meta\"\n"},
                 {"setup.py", "from setuptools import setup\n"}});
  REQUIRE(c.backend);
  CHECK(*c.backend == "setuptools.build_meta");
  CHECK(c.backend_where.str() == "pyproject.toml:6");
  CHECK(c.kind == Backend::setuptools);
  REQUIRE(c.requirements.size() == 2);
  CHECK(c.requirements[0].name == "setuptools");
  CHECK(c.requirements[0].specifier == ">=70.1");
  CHECK(c.requirements[0].where.str() == "pyproject.toml:3");
  CHECK(c.requirements[1].name == "wheel");
  auto j = to_json(c);
  CHECK(j["backend"]["drivers"] == nlohmann::json{"setup-py", "python-build"});
}

TEST_CASE("pyproject with scikit-build-core, and an in-tree backend that defers to it", "[contract]") {
  auto c = read({{"pyproject.toml",
                  "[build-system]\nrequires = [\"scikit-build-core>=1.0\", \"cmake>=3.27\"]\n"
                  "build-backend = \"scikit_build_core.build\"\n\n"
                  "[tool.scikit-build]\nbuild-dir = \"build/{wheel_tag}\"\n"
                  "cmake.define.USE_CUDA = \"ON\"\ncmake.define.BUILD_TEST = false\n"}});
  CHECK(c.kind == Backend::scikit_build_core);
  CHECK(c.scikit_build);
  CHECK(c.scikit_build_where.line == 5);
  CHECK(c.skbuild_build_dir == std::optional<std::string>("build/{wheel_tag}"));
  CHECK(c.skbuild_defines.at("USE_CUDA") == "ON");
  CHECK(c.skbuild_defines.at("BUILD_TEST") == "OFF");

  auto in_tree = read({{"pyproject.toml",
                        "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\"_build\"]\n"
                        "[tool.scikit-build]\nwheel.packages = [\"mini\"]\n"}});
  CHECK(in_tree.kind == Backend::scikit_build_core);
  CHECK(in_tree.backend_path == std::vector<std::string>{"_build"});
  // Without the table an in-tree backend is one archbuild has no driver for.
  CHECK(read({{"pyproject.toml", "[build-system]\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n"}}).kind ==
        Backend::other);
}

TEST_CASE("no pyproject: setup.py means setuptools, CMakeLists alone means cmake", "[contract]") {
  CHECK(read({{"setup.py", ""}, {"CMakeLists.txt", "cmake_minimum_required(VERSION 3.18)\n"}}).kind == Backend::setuptools);
  CHECK(read({{"CMakeLists.txt", "cmake_minimum_required(VERSION 3.18)\n"}}).kind == Backend::cmake_only);
  CHECK(read({}).kind == Backend::none);
}

TEST_CASE("bad TOML is file:line:column, exit 2, a non-string requirement names its place", "[contract]") {
  auto bad = read_contract(memory({{"pyproject.toml", "[build-system]\nrequires = [\"a\",\n  oops\n"}}));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().exit == Exit::bad_input);
  CHECK_THAT(bad.error().message, Catch::StartsWith("pyproject.toml:3:"));

  auto wrong = read_contract(memory({{"pyproject.toml", "[build-system]\nrequires = [\"a\", 3]\n"}}));
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(wrong.error().message, Catch::StartsWith("pyproject.toml:2:") && Catch::Contains("non-string"));
}

TEST_CASE("requirement files: comments, markers, extras, -r includes, continuation", "[contract]") {
  auto c = read({{"requirements-build.txt", "# Build System requirements\nsetuptools>=77.0.0,<80.0\n"
                                            "six  # dependency chain\ncmake >= 3.27, < 4\n"},
                 {"requirements.txt", "-r requirements-build.txt\n\nbuild[uv]  # for sdist\n"
                                      "lintrunner ; platform_machine != \"s390x\"\n"
                                      "numpy \\\n  >=1.26\n--index-url https://example.org/simple\n"}});
  std::vector<std::string> names;
  for (const auto& r : c.requirements) names.push_back(r.name + "|" + r.specifier + "|" + r.where.str());
  // requirements-build.txt once directly, then again through requirements.txt's -r.
  CHECK(names == std::vector<std::string>{
                     "setuptools|>=77.0.0,<80.0|requirements-build.txt:2", "six||requirements-build.txt:3",
                     "cmake|>=3.27,<4|requirements-build.txt:4",
                     "setuptools|>=77.0.0,<80.0|requirements-build.txt:2", "six||requirements-build.txt:3",
                     "cmake|>=3.27,<4|requirements-build.txt:4", "build||requirements.txt:3",
                     "lintrunner||requirements.txt:4", "numpy|>=1.26|requirements.txt:5"});
  CHECK(c.requirements[6].extras == "uv");
  CHECK(c.requirements[7].marker == "platform_machine != \"s390x\"");
  REQUIRE(c.notes.size() == 1);
  CHECK_THAT(c.notes[0], Catch::Contains("requirements.txt:7") && Catch::Contains("--index-url"));

  auto cycle = read_contract(memory({{"requirements.txt", "-r requirements.txt\n"}}));
  REQUIRE_FALSE(cycle.ok());
  CHECK_THAT(cycle.error().message, Catch::Contains("requirements.txt:1") && Catch::Contains("cycle"));
  auto missing = read_contract(memory({{"requirements.txt", "a\n-r nope.txt\n"}}));
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("requirements.txt:2") && Catch::Contains("nope.txt"));
  auto garbage = read_contract(memory({{"requirements-build.txt", "ok\nthis is not one\n"}}));
  REQUIRE_FALSE(garbage.ok());
  CHECK(garbage.error().exit == Exit::bad_input);
  CHECK_THAT(garbage.error().message, Catch::Contains("requirements-build.txt:2"));
}

TEST_CASE("cmake_minimum_required: forms, ranges, case, comments, line", "[contract]") {
  auto cm = [](const std::string& text) {
    auto r = parse_cmake_minimum(text, "CMakeLists.txt");
    INFO((r ? "" : r.error().message));
    REQUIRE(r.ok());
    return *r;
  };
  auto a = cm("cmake_minimum_required(VERSION 3.27 FATAL_ERROR)\n");
  REQUIRE(a);
  CHECK(a->min == V("3.27"));
  CHECK_FALSE(a->max);
  CHECK(a->where.str() == "CMakeLists.txt:1");

  auto b = cm("# cmake_minimum_required(VERSION 9.9)\n#[[ cmake_minimum_required(VERSION 8.8) ]]\n\n"
              "CMAKE_MINIMUM_REQUIRED( VERSION 3.18...3.30 )\n");
  REQUIRE(b);
  CHECK(b->min == V("3.18"));
  CHECK(b->max == V("3.30"));
  CHECK(b->where.line == 4);

  auto c = cm("project(x)\nCmake_Minimum_Required(\n  VERSION\n  3.5.1)\n");
  REQUIRE(c);
  CHECK(c->min == V("3.5.1"));
  CHECK(c->where.line == 2);

  CHECK_FALSE(cm("project(x)\n"));
  auto bad = parse_cmake_minimum("cmake_minimum_required(VERSION three)\n", "CMakeLists.txt");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::StartsWith("CMakeLists.txt:1:") && Catch::Contains("3.18...3.30"));
  auto none = parse_cmake_minimum("\ncmake_minimum_required(FATAL_ERROR)\n", "CMakeLists.txt");
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.error().message, Catch::StartsWith("CMakeLists.txt:2:"));
}

TEST_CASE("the PyTorch-format fixture: backend, requirements, cmake 3.27, version, pins", "[contract]") {
  auto r = read_contract(directory_access(std::string(ARCHBUILD_TEST_DATA) + "/contract/pytorch"));
  INFO((r ? "" : r.error().message));
  REQUIRE(r.ok());
  const Contract& c = *r;
  CHECK(c.backend == std::optional<std::string>("setuptools.build_meta"));
  CHECK(c.backend_where.str() == "pyproject.toml:12");
  CHECK(c.kind == Backend::setuptools);
  CHECK_FALSE(c.has_setup_py);  // the fixture has none: python-build only
  REQUIRE(c.cmake_minimum);
  CHECK(c.cmake_minimum->min == V("3.27"));
  CHECK(c.version == std::optional<std::string>("2.15.0a0"));
  CHECK(release_part(*c.version) == V("2.15.0"));
  // [build-system].requires first (its lines), then the two requirement files.
  REQUIRE(c.requirements.size() >= 6);
  CHECK(c.requirements[0].name == "setuptools");
  CHECK(c.requirements[0].specifier == ">=77.0.0,<82");
  CHECK(c.requirements[0].where.str() == "pyproject.toml:5");
  bool lintrunner = false;
  for (const auto& q : c.requirements)
    if (q.name == "lintrunner") lintrunner = q.marker == "platform_machine != \"s390x\"" && q.where.file == "requirements.txt";
  CHECK(lintrunner);
  std::map<std::string, std::string> pins;
  for (const auto& p : c.pins) pins[p.name] = p.ref;
  CHECK(pins == std::map<std::string, std::string>{{"eigen", "5.0.1"},
                                                   {"nccl-cu13", "v2.27.7-1"},
                                                   {"triton", "5f40dc89506d67ab8e7aa2b7c8cf1351f8b22f31"}});
  // The requirement list that lives among the pins is not read as one.
  REQUIRE(c.notes.size() == 1);
  CHECK_THAT(c.notes[0], Catch::Contains("huggingface-requirements.txt"));

  auto lines = describe(c);
  CHECK_THAT(lines[0], Catch::Contains("setuptools.build_meta (pyproject.toml:12)"));
}

TEST_CASE("checks: the recipe's driver against the tree's backend (exit 2)", "[contract]") {
  auto skb = read({{"pyproject.toml", "[build-system]\nbuild-backend = \"scikit_build_core.build\"\n"},
                   {"setup.py", "raise SystemExit('use pip')\n"}});
  auto f = check(skb, expect(recipe::Driver::setup_py));
  const auto& d = finding(f, "driver-backend");
  CHECK_FALSE(d.ok);
  CHECK(d.exit == Exit::bad_input);
  CHECK_THAT(d.message, Catch::StartsWith("pyproject.toml:2: the build backend is scikit_build_core.build") &&
                            Catch::Contains("setup.py's build commands fail in this era") &&
                            Catch::Contains("\"scikit-build-core\""));
  auto e = first_contradiction(f, "/cache/src/k");
  REQUIRE(e);
  CHECK(e->exit == Exit::bad_input);
  CHECK_THAT(e->message, Catch::EndsWith("(tree: /cache/src/k)"));
  CHECK(finding(check(skb, expect(recipe::Driver::scikit_build_core)), "driver-backend").ok);

  auto setuptools = read({{"pyproject.toml", "[build-system]\nbuild-backend = \"setuptools.build_meta\"\n"},
                          {"setup.py", ""}});
  CHECK(finding(check(setuptools, expect(recipe::Driver::setup_py)), "driver-backend").ok);
  CHECK(finding(check(setuptools, expect(recipe::Driver::python_build)), "driver-backend").ok);
  CHECK_FALSE(finding(check(setuptools, expect(recipe::Driver::scikit_build_core)), "driver-backend").ok);
  CHECK_FALSE(finding(check(read({{"setup.py", ""}}), expect(recipe::Driver::cmake)), "driver-backend").ok);
}

TEST_CASE("checks: version.txt's release against the recipe's (exit 2)", "[contract]") {
  auto c = read({{"version.txt", "2.15.0a0\n"}});
  CHECK(finding(check(c, expect(recipe::Driver::python_build, "2.15.0")), "version").ok);
  CHECK(finding(check(c, expect(recipe::Driver::python_build, "2.15")), "version").ok);
  auto findings = check(c, expect(recipe::Driver::python_build, "2.14.0"));
  const auto& bad = finding(findings, "version");
  CHECK_FALSE(bad.ok);
  CHECK(bad.exit == Exit::bad_input);
  CHECK_THAT(bad.message, Catch::StartsWith("version.txt:1: the tree is version 2.15.0a0") && Catch::Contains("2.14.0"));
  CHECK(finding(check(read({}), expect(recipe::Driver::python_build)), "version").ok);  // nothing to compare
}

TEST_CASE("checks: cmake_minimum_required above the plan's cmake is exit 3 naming both", "[contract]") {
  auto c = read({{"CMakeLists.txt", "\ncmake_minimum_required(VERSION 3.27)\n"}, {"setup.py", ""}});
  auto findings = check(c, expect(recipe::Driver::setup_py, "2.15.0", V("3.25.1")));
  const auto& low = finding(findings, "cmake-minimum");
  CHECK_FALSE(low.ok);
  CHECK(low.exit == Exit::missing_tool);
  CHECK_THAT(low.message, Catch::StartsWith("CMakeLists.txt:2: cmake_minimum_required(VERSION 3.27)") &&
                              Catch::Contains("3.25.1 at /usr/bin/cmake") && Catch::Contains("cmake >= 3.27"));
  CHECK(finding(check(c, expect(recipe::Driver::setup_py, "2.15.0", V("3.27"))), "cmake-minimum").ok);
  CHECK(finding(check(c, expect(recipe::Driver::setup_py, "2.15.0", std::nullopt)), "cmake-minimum").ok);
}
