// Every build driver end to end: `archbuild wheel` on the example of each
// era — setup-py (examples/minitorch), python-build (tests/fixtures/minitorch-pep517, the setuptools
// backend reached only through `python -m build`; and examples/minitorch with its recipe switched
// to python-build, the issue's reproduction), scikit-build-core (tests/fixtures/minitorch-skbuild) —
// through fetch, configure, build, package, validate and --out, with real nvcc: the wheel carries
// exactly the target's SASS, a repeat runs nothing, and a run killed mid-build resumes past the
// stages it finished without reusing a build tree whose configure did not finish.
//
// The skbuild example's pyproject.toml is PyTorch's contract (build-backend scikit_build_core.build,
// requires scikit-build-core>=1.0): Debian 12 packages no scikit-build-core and the tests run
// offline, so the test builds tests/support/scikit-build-core-standin into a wheelhouse and passes
// it with --find-links; the build venv installs it as it would the real one.
//
// meson-python (tests/fixtures/minimeson, build-backend mesonpy) is the driver that is not
// CMake-shaped: its C++ and CUDA compiles get archbuild's launchers through a Meson native file,
// so the compiler cache counts them and memory admission records them. The build venv finds
// meson-python among the interpreter's own packages (Debian 12: python3-mesonpy), offline.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "run/admission.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kExamples = fs::path(ARCHBUILD_SOURCE_DIR) / "examples";
const fs::path kFixtures = fs::path(ARCHBUILD_SOURCE_DIR) / "tests" / "fixtures";  // the driver variants
const std::string kPython = "/usr/bin/python3";

struct Case {
  std::string driver;   // the recipe's build.driver
  std::string repo;     // the repository make-example-repos made
  std::string recipe;   // examples/<dir>/recipe.toml or tests/fixtures/<dir>/recipe.toml, or "": the setup.py
                        // example switched to python-build
};

bool can_build(const Case& c, std::string& why) {
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) why = u;
  else if (!fs::exists(kPython)) why = "no " + kPython;
  else if (t::which("cmake").empty() || t::which("ninja").empty()) why = "cmake or ninja not on PATH";
  else if (c.driver != "setup-py" && t::run(kPython, {"-c", "import build"}).status != 0)
    why = kPython + " lacks the `build` module (Debian: python3-build)";
  else if (c.driver == "scikit-build-core" && t::run(kPython, {"-c", "import setuptools, wheel, pip, venv"}).status != 0)
    why = kPython + " lacks setuptools, wheel, pip or venv (the stand-in's wheel is made with them)";
  else if (c.driver == "meson-python" && t::which("meson").empty())
    why = "meson not on PATH (Debian: meson)";
  else if (c.driver == "meson-python" && t::run(kPython, {"-c", "import mesonpy"}).status != 0)
    why = kPython + " lacks mesonpy (Debian: python3-mesonpy)";
  return why.empty();
}

// The wheelhouse with the scikit-build-core stand-in, built from a copy (pip builds in the tree
// it is given).
fs::path standin_wheelhouse(const fs::path& dir) {
  fs::path src = dir / "standin", wheelhouse = dir / "wheelhouse";
  auto cp = t::run("/bin/cp", {"-r", std::string(ARCHBUILD_SOURCE_DIR) + "/tests/support/scikit-build-core-standin",
                               src.string()});
  REQUIRE(cp.status == 0);
  auto w = t::pip_wheel(kPython, src.string(), wheelhouse.string());
  INFO(w.out << w.err);
  REQUIRE(w.status == 0);
  return wheelhouse;
}

struct Workspace {
  t::TempDir dir;
  Case c;
  std::string url;
  std::string recipe;
  fs::path wheelhouse;  // scikit-build-core: the stand-in's
  explicit Workspace(Case cs) : c(std::move(cs)) {
    if (c.driver == "scikit-build-core") wheelhouse = standin_wheelhouse(dir.path());
    auto r = t::run("/bin/bash", {std::string(ARCHBUILD_SOURCE_DIR) + "/tests/support/make-example-repos",
                                  (dir / "repos").string()});
    REQUIRE(r.status == 0);
    url = "file://" + (dir / "repos" / c.repo).string();
    if (!c.recipe.empty()) {
      recipe = (fs::exists(kExamples / c.recipe) ? kExamples / c.recipe : kFixtures / c.recipe).string();
    } else {
      // The issue's reproduction: the setup.py example, its recipe switched to python-build.
      recipe = dir.write("python-build.toml", "extends = \"" + (kExamples / "minitorch" / "recipe.toml").string() +
                                                  "\"\n[build]\ndriver = \"python-build\"\n")
                   .string();
    }
  }
  std::vector<std::string> common(const std::string& command) const {
    std::vector<std::string> a = {"--cache-dir", (dir / "cache").string(), command, "--sm", "90", "--recipe", recipe,
                                  "--source-url", url, "--python", kPython, "--json"};
    if (!wheelhouse.empty()) a.insert(a.end(), {"--find-links", wheelhouse.string()});
    return a;
  }
  std::vector<std::string> wheel_args(const std::string& out = "out") const {
    auto a = common("wheel");
    a.push_back("--out");
    a.push_back((dir / out).string());
    return a;
  }
  json plan() const {
    auto r = t::archbuild(common("plan"));
    INFO(r.err);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  }
  fs::path tree(const std::string& key) const { return dir / "cache" / "src" / key; }
};

t::RunOptions long_run() {
  t::RunOptions o;
  o.timeout = std::chrono::seconds(1200);
  return o;
}

std::vector<std::string> sass_of(const std::string& wheel) {
  auto r = t::archbuild({"inspect", wheel, "--json"});
  INFO("inspect " << wheel << ": " << r.out << r.err);
  REQUIRE(r.status == 0);
  std::vector<std::string> sass;
  const json doc = json::parse(r.out);
  for (const auto& f : doc["files"])
    for (const auto& s : f["sass"]) sass.push_back(s);
  return sass;
}

std::vector<std::string> files_in(const fs::path& d) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d, ec)) out.push_back(e.path().filename().string());
  return out;
}

const std::vector<std::string> kAllStages = {"fetch", "configure", "build", "package", "validate"};

// The CMake build type the skbuild example recorded in its wheel (minitorch/_build_info.json).
std::string build_type_of(const std::string& wheel) {
  auto r = t::run(kPython, {"-c",
                            "import json, sys, zipfile; "
                            "print(json.load(zipfile.ZipFile(sys.argv[1]).open('minitorch/_build_info.json'))['build_type'])",
                            wheel});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  std::string out = r.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// The plan of each driver: its steps, the stage that makes the wheel, the config settings.
void check_plan(const Case& c, const json& p) {
  INFO(p.dump(2));
  std::vector<std::string> stages;
  for (const auto& s : p["steps"]) stages.push_back(s["stage"]);
  if (c.driver == "setup-py") {
    CHECK(stages == std::vector<std::string>{"configure", "build", "package"});
    CHECK(p["wheel_stage"] == "package");
    CHECK(p["configure_stage"] == "configure");
    return;
  }
  // One PEP 517 call: configure, compile and package in the build stage.
  CHECK(stages == std::vector<std::string>{"build"});
  CHECK(p["wheel_stage"] == "build");
  CHECK(p["configure_stage"] == "build");
  CHECK(p["stage_notes"]["configure"].get<std::string>().find("configures in the build step") != std::string::npos);
  std::vector<std::string> argv = p["steps"][0]["argv"];
  std::vector<std::string> head(argv.begin() + 1, argv.begin() + 7);
  CHECK(head == std::vector<std::string>{"-m", "build", "--wheel", "--no-isolation", "--outdir", "dist"});
  if (c.driver == "scikit-build-core") {
    // Before the commit is mirrored the tree's [tool.scikit-build] is unknown: build-dir is passed,
    // the build type never (it would silence the tree's overrides by environment).
    CHECK(p["config_settings"] == json::parse(R"([{"name": "build-dir", "value": "build"}])"));
    const std::vector<std::string> setting{"-C", "build-dir=build"};
    CHECK(std::search(argv.begin(), argv.end(), setting.begin(), setting.end()) != argv.end());
    CHECK(p["key_inputs"]["config_settings"] == p["config_settings"]);
  } else if (c.driver == "meson-python") {
    // meson-python's build dir kept in the tree; the launchers' native file by variable (no path in the key).
    CHECK(p["config_settings"] == json::parse(R"([{"name": "builddir", "value": "build"},
                                                  {"name": "setup-args", "value": "--native-file=$ARCHBUILD_MESON_NATIVE_FILE"}])"));
  } else {
    CHECK(p["config_settings"].empty());
  }
}

void end_to_end(const Case& c) {
  std::string why;
  if (!can_build(c, why)) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Workspace w(c);
  json p = w.plan();
  check_plan(c, p);

  auto first = t::archbuild(w.wheel_args(), long_run());
  INFO(first.err);
  REQUIRE(first.status == 0);
  auto j = json::parse(first.out);
  CHECK(j["ok"] == true);
  // Once the commit is mirrored, `plan` gives the key `wheel` built (the build venv's versions in it).
  std::string key = j["key"];
  CHECK(w.plan()["key"] == key);
  CHECK(j["reused"] == false);
  CHECK(j["stages_run"] == json(kAllStages));
  CHECK(j["version"] == "0.1.0+cu130.sm90");
  std::string wheel = j["wheel"];
  CHECK(fs::equivalent(fs::path(wheel).parent_path(), w.dir / "out"));
  CHECK(fs::path(wheel).filename().string().rfind("minitorch-0.1.0+cu130.sm90-", 0) == 0);
  CHECK(files_in(w.dir / "out").size() == 2);  // the wheel and its manifest
  CHECK(sass_of(wheel) == std::vector<std::string>{"sm_90"});
  CHECK(j["validation"]["valid"] == true);
  // The build tree is the key's own and persistent (scikit-build-core: the tree's build-dir).
  CHECK(fs::exists(w.tree(key) / "build" / "build.ninja"));
  if (c.driver == "scikit-build-core") CHECK(build_type_of(wheel) == "Release");  // the backend's default

  auto again = t::archbuild(w.wheel_args("out2"), long_run());
  INFO(again.err);
  REQUIRE(again.status == 0);
  auto j2 = json::parse(again.out);
  CHECK(j2["reused"] == true);
  CHECK(j2["stages_run"].empty());
  CHECK(j2["sha256"] == j["sha256"]);
}

// The processes a run started (each step leads its own process group) and the run itself, killed
// as a power cut would: nothing gets to clean up.
void kill_all(t::Background& bg) {
  std::vector<int> children;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == bg.pid()) children.push_back(std::stoi(name));
  }
  for (int child : children) ::kill(-child, SIGKILL);
  bg.kill(SIGKILL);
}

void resume_after_kill(const Case& c) {
  std::string why;
  if (!can_build(c, why)) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Workspace w(c);
  // The key is known once `wheel` has mirrored the commit and made the build venv (its versions
  // are in the key; `plan` before the mirror cannot say them): the one tree under src/.
  std::string key;
  fs::path build_dir, build_log;
  {
    t::Background bg(ARCHBUILD_EXE, w.wheel_args());
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(900);
    while (key.empty() && bg.running() && std::chrono::steady_clock::now() < until) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(w.dir / "cache" / "src", ec))
        if (e.is_directory() && e.path().filename().string().size() == 64) key = e.path().filename().string();
      if (key.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    REQUIRE(key.size() == 64);
    build_dir = w.tree(key) / "build";
    build_log = w.dir / "cache" / "logs" / key / "build.log";
    // Mid-build: the build stage runs and CMake has generated the tree (compiling now).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(900);
    while (!(fs::exists(build_log) && fs::exists(build_dir / "build.ninja")) && bg.running() &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(fs::exists(build_dir / "build.ninja"));
    kill_all(bg);
    auto r = bg.wait();
    CHECK(r.status == -SIGKILL);
  }
  CHECK(files_in(w.dir / "out").empty());
  bool configures_in_build = c.driver != "setup-py";
  if (configures_in_build) {
    // What a configure that did not finish leaves: CMakeCache.txt without build.ninja. A marker
    // shows whether the tree is reused.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the killed group is gone
    fs::remove(build_dir / "build.ninja");
    std::ofstream(build_dir / "stale-marker") << "from the killed run\n";
    REQUIRE(fs::exists(build_dir / "CMakeCache.txt"));
  }
  auto rerun = t::archbuild(w.wheel_args(), long_run());
  INFO(rerun.err);
  REQUIRE(rerun.status == 0);
  auto j = json::parse(rerun.out);
  CHECK(j["reused"] == false);
  CHECK(j["stages_resumed_past"] == json({"fetch", "configure"}));
  CHECK(j["stages_run"] == json({"build", "package", "validate"}));
  if (configures_in_build) {
    CHECK_FALSE(fs::exists(build_dir / "stale-marker"));
    CHECK(rerun.err.find("its configure did not finish") != std::string::npos);
  }
  CHECK(files_in(w.dir / "out").size() == 2);
  CHECK(sass_of(j["wheel"]) == std::vector<std::string>{"sm_90"});
  CHECK(j["validation"]["valid"] == true);
}

const Case kSetupPy{"setup-py", "minitorch", "minitorch/recipe.toml"};
const Case kPythonBuild{"python-build", "minitorch-pep517", "minitorch-pep517/recipe.toml"};
const Case kPythonBuildSetupPyTree{"python-build", "minitorch", ""};
const Case kScikitBuildCore{"scikit-build-core", "minitorch-skbuild", "minitorch-skbuild/recipe.toml"};

}  // namespace

TEST_CASE("drivers: setup-py end to end, then a repeat runs nothing", "[cli][drivers][nvcc]") { end_to_end(kSetupPy); }

TEST_CASE("drivers: python-build (setuptools backend) end to end, then a repeat runs nothing", "[cli][drivers][nvcc]") {
  end_to_end(kPythonBuild);
}

// The reproduction: the setup.py example built through `python -m build` kept no wheel.
TEST_CASE("drivers: python-build on the setup.py example keeps the wheel its build stage made", "[cli][drivers][nvcc]") {
  end_to_end(kPythonBuildSetupPyTree);
}

TEST_CASE("drivers: scikit-build-core end to end, then a repeat runs nothing", "[cli][drivers][nvcc]") {
  end_to_end(kScikitBuildCore);
}

// The issue: the driver passed -C cmake.build-type=Release, which wins over the tree's overrides:
// --env DEBUG=1 was keyed, recorded, and made a Release build.
TEST_CASE("drivers: scikit-build-core --env DEBUG=1 reaches the tree's overrides: a Debug build", "[cli][drivers][nvcc]") {
  std::string why;
  if (!can_build(kScikitBuildCore, why)) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Workspace w(kScikitBuildCore);
  auto args = w.wheel_args();
  args.insert(args.end(), {"--env", "DEBUG=1"});
  auto r = t::archbuild(args, long_run());
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = json::parse(r.out);
  CHECK(j["ok"] == true);
  CHECK(build_type_of(j["wheel"]) == "Debug");
  std::ifstream log(w.dir / "cache" / "logs" / j["key"].get<std::string>() / "build.log");
  std::stringstream text;
  text << log.rdbuf();
  CHECK(text.str().find("CMake build type Debug (from override #1 (env DEBUG is true))") != std::string::npos);
  CHECK(sass_of(j["wheel"]) == std::vector<std::string>{"sm_90"});
}

// The driver that is not CMake-shaped: meson-python builds minimeson (a C++ extension module and a
// CUDA kernel) and its compiles still go through archbuild's launchers: the compiler cache counts
// them (misses on the first key, hits on a second key of the same sources) and memory admission
// records each C++ and CUDA compile with its measured peak.
TEST_CASE("drivers: meson-python end to end, its compiles through the compiler cache and admission", "[cli][drivers][nvcc]") {
  const Case c{"meson-python", "minimeson", "minimeson/recipe.toml"};
  std::string why;
  if (!can_build(c, why) || t::which("ccache").empty()) {
    WARN("##archbuild-skip## " << (why.empty() ? "no ccache on PATH" : why));
    return;
  }
  Workspace w(c);
  check_plan(c, w.plan());
  t::RunOptions o = long_run();
  o.unset_env = {"CCACHE_DIR"};  // the cache directory's own ccache/: its counters are this test's
  auto build = [&](const std::string& out, std::vector<std::string> extra) {
    auto args = w.wheel_args(out);
    args.insert(args.end(), {"--memory-budget", "2G"});
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = t::archbuild(args, o);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  };
  json j = build("out", {});
  INFO(j.dump(2));
  CHECK(j["ok"] == true);
  CHECK(j["stages_run"] == json(kAllStages));
  const std::string key = j["key"];
  const std::string wheel = j["wheel"];
  CHECK(fs::path(wheel).filename().string().rfind("minimeson-0.1.0+cu130.sm90-", 0) == 0);
  CHECK(sass_of(wheel) == std::vector<std::string>{"sm_90"});
  CHECK(j["validation"]["valid"] == true);
  CHECK(fs::exists(w.tree(key) / "build" / "build.ninja"));  // meson-python's builddir, in the key's tree
  // The compiler cache saw the compiles.
  REQUIRE(j["compiler_cache"].is_object());
  CHECK(j["compiler_cache"]["misses"].get<long>() >= 2);
  // Admission launched, measured and recorded the C++ and the CUDA compile.
  std::vector<archbuild::run::CompileRecord> records = archbuild::run::read_records(w.dir / "cache" / "logs" / key / "compiles.tsv");
  auto record_of = [&](const std::string& source) -> const archbuild::run::CompileRecord* {
    for (const auto& r : records)
      if (r.source == source) return &r;
    return nullptr;
  };
  const auto* cxx = record_of("csrc/module.cpp");
  const auto* cuda = record_of("csrc/kernels.cu");
  REQUIRE(cxx);
  REQUIRE(cuda);
  CHECK(cxx->lang == "CXX");
  CHECK(cuda->lang == "CUDA");
  CHECK(cxx->peak_kb > 0);
  CHECK(cuda->peak_kb > 0);
  CHECK(cxx->exit_code == 0);
  CHECK(cuda->exit_code == 0);

  // A second key of the same sources: its compiles are the cache's hits.
  json second = build("out2", {"--env", "MINIMESON_SECOND_KEY=1"});
  REQUIRE(second["key"] != key);
  REQUIRE(second["compiler_cache"].is_object());
  CHECK(second["compiler_cache"]["hits"].get<long>() >= 2);
}

TEST_CASE("drivers: setup-py resumes after kill -9 mid-build", "[cli][drivers][nvcc]") { resume_after_kill(kSetupPy); }

TEST_CASE("drivers: python-build resumes after kill -9 mid-build, a half-configured tree is not reused",
          "[cli][drivers][nvcc]") {
  resume_after_kill(kPythonBuild);
}

TEST_CASE("drivers: scikit-build-core resumes after kill -9 mid-build, a half-configured tree is not reused",
          "[cli][drivers][nvcc]") {
  resume_after_kill(kScikitBuildCore);
}
