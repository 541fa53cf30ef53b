// contract: reading a tree's build contract (pyproject.toml with each backend, requirement files,
// cmake_minimum_required, version.txt, pins) over in-memory files and over a fixture in PyTorch's
// formats, and the checks against the plan with their exit statuses.
#include <catch2/catch.hpp>

#include <map>

#include "contract/contract.hpp"
#include "recipe/driver.hpp"

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
  REQUIRE(rules::from_name(rule));  // a registered rule (core/rules.hpp), not a typo
  for (const auto& f : fs)
    if (f.rule == *rules::from_name(rule)) return f;
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
  REQUIRE(c.skbuild);
  CHECK(c.skbuild->where.line == 5);
  CHECK(c.skbuild->build_dir == std::optional<std::string>("build/{wheel_tag}"));
  CHECK(c.skbuild->build_dir_where.str() == "pyproject.toml:6");
  CHECK(c.skbuild->defines.at("USE_CUDA") == "ON");
  CHECK(c.skbuild->defines.at("BUILD_TEST") == "OFF");
  CHECK_FALSE(c.skbuild->build_type);
  CHECK(c.skbuild->build_type_overrides.empty());

  auto in_tree = read({{"pyproject.toml",
                        "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\"_build\"]\n"
                        "[tool.scikit-build]\nwheel.packages = [\"mini\"]\n"}});
  CHECK(in_tree.kind == Backend::scikit_build_core);
  CHECK(in_tree.backend_path == std::vector<std::string>{"_build"});
  // Without the table an in-tree backend is one archbuild has no driver for.
  CHECK(read({{"pyproject.toml", "[build-system]\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n"}}).kind ==
        Backend::other);
}

// PyTorch's tables after the switch (cyyever/pytorch@0011014f:pyproject.toml, a fork of
// pytorch/pytorch): build-dir set, cmake.build-type unset, DEBUG / REL_WITH_DEB_INFO by overrides.
const char* const kTorchSkbuild =
    "[build-system]\nrequires = [\"scikit-build-core>=1.0\"]\nbuild-backend = \"scikit_build_core.build\"\n"  // 1-3
    "[tool.scikit-build]\nminimum-version = \"build-system.requires\"\nbuild-dir = \"build\"\n"               // 4-6
    "[[tool.scikit-build.overrides]]\nif.env.DEBUG = true\ncmake.build-type = \"Debug\"\n"                    // 7-9
    "[[tool.scikit-build.overrides]]\nif.env.REL_WITH_DEB_INFO = true\ncmake.build-type = \"RelWithDebInfo\"\n"  // 10-12
    "[[tool.scikit-build.overrides]]\nif.platform-system = \"win32\"\nif.env.CI = \"^1$\"\n"                  // 13-15
    "cmake.define.CMAKE_GENERATOR = \"Ninja\"\n"                                                                 // 16
    "[[tool.dynamic-metadata]]\nprovider = { path = \"tools/metadata\", module = \"version\" }\n";              // 17-18

TEST_CASE("[tool.scikit-build] as PyTorch has it: build-dir, the build type by overrides, dynamic metadata", "[contract]") {
  auto c = read({{"pyproject.toml", kTorchSkbuild}});
  REQUIRE(c.skbuild);
  const ScikitBuild& b = *c.skbuild;
  CHECK(b.build_dir == std::optional<std::string>("build"));
  CHECK(b.build_dir_where.str() == "pyproject.toml:6");
  CHECK_FALSE(b.build_type);  // left unset on purpose
  REQUIRE(b.build_type_overrides.size() == 2);  // the third sets no build type
  CHECK(b.build_type_overrides[0].if_env == std::map<std::string, std::string>{{"DEBUG", "true"}});
  CHECK(b.build_type_overrides[0].build_type == "Debug");
  CHECK(b.build_type_overrides[0].where.str() == "pyproject.toml:7");
  CHECK(b.build_type_overrides[1].if_env == std::map<std::string, std::string>{{"REL_WITH_DEB_INFO", "true"}});
  CHECK(b.build_type_overrides[1].build_type == "RelWithDebInfo");
  CHECK(b.override_env == std::vector<std::string>{"CI", "DEBUG", "REL_WITH_DEB_INFO"});
  CHECK_FALSE(b.legacy_metadata);
  CHECK(c.dynamic_metadata_where.str() == "pyproject.toml:17");
  CHECK(build_type_rule(b) == "Debug if DEBUG (pyproject.toml:7); RelWithDebInfo if REL_WITH_DEB_INFO "
                              "(pyproject.toml:10); else $CMAKE_BUILD_TYPE, else Release");
  auto j = to_json(c);
  CHECK(j["scikit_build"]["build_dir"] == "build");
  CHECK(j["scikit_build"]["build_type"].is_null());
  CHECK(j["scikit_build"]["build_type_overrides"].size() == 2);
  CHECK(j["dynamic_metadata"] == "pyproject.toml:17");

  auto fixed = read({{"pyproject.toml", "[tool.scikit-build]\ncmake.build-type = \"RelWithDebInfo\"\n"}});
  REQUIRE(fixed.skbuild);
  CHECK(fixed.skbuild->build_type == std::optional<std::string>("RelWithDebInfo"));
  CHECK(build_type_rule(*fixed.skbuild) == "RelWithDebInfo (pyproject.toml:2)");

  auto bad = read_contract(memory({{"pyproject.toml", "[tool.scikit-build]\noverrides = 3\n"}}));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().exit == Exit::bad_input);
  CHECK_THAT(bad.error().message, Catch::StartsWith("pyproject.toml:2:") && Catch::Contains("array of tables"));
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
  // requirements.txt's own lines are read and shown, and said not to be installed (issue 46).
  CHECK(installed_for_build(c.requirements[0]));
  CHECK_FALSE(installed_for_build(c.requirements[6]));
  CHECK(to_json(c)["requirements"][6]["installed"] == false);
  int said = 0;
  for (const auto& line : describe(c)) said += line.find("(not installed: runtime and test set)") != std::string::npos;
  CHECK(said == 3);

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

  // A backend a driver's entry names (recipe/driver.cpp): that driver first, then python-build,
  // which builds any PEP 517 backend.
  auto meson = read({{"pyproject.toml", "[build-system]\nbuild-backend = \"mesonpy\"\nrequires = [\"meson-python\"]\n"},
                     {"meson.build", "project('x', 'cpp')\n"}});
  CHECK(to_json(meson)["backend"]["drivers"] == nlohmann::json{"meson-python", "python-build"});
  CHECK(finding(check(meson, expect(*recipe::driver_named("meson-python"))), "driver-backend").ok);
  auto refused = finding(check(setuptools, expect(*recipe::driver_named("meson-python"))), "driver-backend");
  CHECK_FALSE(refused.ok);
  CHECK_THAT(refused.message, Catch::Contains("the meson-python driver cannot build a setuptools tree"));
}

TEST_CASE("checks: a provisional metadata provider of the tree's own without experimental (exit 2)", "[contract]") {
  const std::string head = "[build-system]\nbuild-backend = \"scikit_build_core.build\"\n[tool.scikit-build]\n";
  const std::string legacy = "[tool.scikit-build.metadata.version]\nprovider = \"version\"\nprovider-path = \"tools/metadata\"\n";
  auto skb = expect(recipe::Driver::scikit_build_core);
  auto refused = read({{"pyproject.toml", head + legacy}});
  auto findings = check(refused, skb);
  const auto& f = finding(findings, "skbuild-metadata");
  CHECK_FALSE(f.ok);
  CHECK(f.exit == Exit::bad_input);
  CHECK_THAT(f.message, Catch::StartsWith("pyproject.toml:4: [tool.scikit-build.metadata.version]") &&
                            Catch::Contains("experimental = true") && Catch::Contains("[[tool.dynamic-metadata]]"));
  CHECK(finding(check(read({{"pyproject.toml", head + "experimental = true\n" + legacy}}), skb), "skbuild-metadata").ok);
  // scikit-build-core's own providers need no experimental.
  CHECK(finding(check(read({{"pyproject.toml", head + "metadata.version.provider = \"scikit_build_core.metadata.regex\"\n"}}),
                      skb),
                "skbuild-metadata")
            .ok);
  auto both = read({{"pyproject.toml", head + "experimental = true\n" + legacy +
                                           "[[tool.dynamic-metadata]]\nprovider = { path = \"m\", module = \"v\" }\n"}});
  auto both_findings = check(both, skb);
  const auto& twice = finding(both_findings, "skbuild-metadata");
  CHECK_FALSE(twice.ok);
  CHECK_THAT(twice.message, Catch::Contains("next to [[tool.dynamic-metadata]] (pyproject.toml:8)"));
  CHECK(finding(check(read({{"pyproject.toml", kTorchSkbuild}}), skb), "skbuild-metadata").ok);
  // Only the scikit-build-core driver runs scikit-build-core's settings reader.
  CHECK(finding(check(refused, expect(recipe::Driver::python_build)), "skbuild-metadata").ok);
}

TEST_CASE("checks: the example minitorch-skbuild follows PyTorch's contract", "[contract]") {
  auto c = read_contract(directory_access(std::string(ARCHBUILD_SOURCE_DIR) + "/tests/fixtures/minitorch-skbuild"));
  REQUIRE(c.ok());
  CHECK(c->backend == std::optional<std::string>("scikit_build_core.build"));
  CHECK(c->backend_path.empty());
  REQUIRE(c->requirements.size() == 1);
  CHECK(c->requirements[0].name == "scikit-build-core");
  CHECK(c->requirements[0].specifier == ">=1.0");
  REQUIRE(c->skbuild);
  CHECK(c->skbuild->build_dir == std::optional<std::string>("build"));
  CHECK_FALSE(c->skbuild->build_type);
  std::vector<std::string> overrides;
  for (const auto& o : c->skbuild->build_type_overrides)
    for (const auto& [name, want] : o.if_env) overrides.push_back(name + "=" + want + "->" + o.build_type);
  CHECK(overrides == std::vector<std::string>{"DEBUG=true->Debug", "REL_WITH_DEB_INFO=true->RelWithDebInfo"});
  CHECK(c->dynamic_metadata_where.line > 0);
  for (const auto& f : check(*c, expect(recipe::Driver::scikit_build_core, "0.1.0")))
    CHECK((f.ok || f.rule == rules::Id::cmake_minimum));
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
