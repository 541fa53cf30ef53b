// Second contact with real trees (issue 46): PyTorch trees as a user's checkout has them
// (tests/fixtures/pytorch-real, its README names the upstream commit of each file), built with
// `--source` and no recipe. For each case `plan --check`, `plan --json` and `wheel --json` give
// the same status and message, before any venv where the cause is known by then. Last, the
// one-answer promise as a property of every fixture tree of tests/: `plan --check` and `wheel`
// up to its first stage agree.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kFixtures = fs::path(ARCHBUILD_SOURCE_DIR) / "tests" / "fixtures";
const fs::path kReal = kFixtures / "pytorch-real";

std::string cannot_plan() {
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) return u;
  if (!fs::exists("/usr/bin/python3")) return "no /usr/bin/python3";
  if (t::which("cmake").empty() || t::which("ninja").empty()) return "cmake or ninja not on PATH";
  return "";
}

t::RunOptions no_index() {
  t::RunOptions o;
  o.env = {{"PIP_NO_INDEX", "1"}, {"PIP_DISABLE_PIP_VERSION_CHECK", "1"}, {"PIP_CONFIG_FILE", "/dev/null"}};
  o.timeout = std::chrono::seconds(300);
  return o;
}

// One build request, as `plan` and `wheel` take it: the cache, --out and a wheelhouse of its own.
struct Ask {
  t::TempDir dir;
  std::vector<std::string> common;  // everything but the command and its --json/--check
  Ask() { fs::create_directories(dir / "wheelhouse"); }
  std::vector<std::string> args(const std::string& cmd, const std::string& mode) const {
    std::vector<std::string> a = {"--cache-dir", (dir / "cache").string(), cmd, "--sm", "90", "--python",
                                  "/usr/bin/python3", "--find-links", (dir / "wheelhouse").string()};
    a.insert(a.end(), common.begin(), common.end());
    if (cmd == "wheel") a.insert(a.end(), {"--out", (dir / "out").string()});
    a.push_back(mode);
    return a;
  }
  bool made_a_venv() const {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir / "cache" / "venvs", ec))
      if (e.path().extension() != ".log" && e.path().extension() != ".lock") return true;
    return false;
  }
};

std::string steady(const std::string& m) {
  static const std::regex live(R"([0-9]+(\.[0-9]+)? GiB free)");
  return std::regex_replace(m, live, "N GiB free");
}

// plan --check, plan --json and wheel --json agree on the first stop; returns plan's stops.
json same_answer(const Ask& a, const std::string& rule, int status) {
  auto check = t::archbuild(a.args("plan", "--check"), no_index());
  auto plan = t::archbuild(a.args("plan", "--json"), no_index());
  auto wheel = t::archbuild(a.args("wheel", "--json"), no_index());
  INFO("plan --check: " << check.status << "\n" << check.err << "\nplan --json: " << plan.out << plan.err
                        << "\nwheel: " << wheel.out << wheel.err);
  REQUIRE(plan.status == 0);
  json p = json::parse(plan.out);
  REQUIRE_FALSE(p["stops"].empty());
  CHECK(p["stops"][0]["rule"] == rule);
  CHECK(p["would_exit"] == status);
  CHECK(check.status == status);
  CHECK(wheel.status == status);
  json w = json::parse(wheel.out);
  CHECK(w["ok"] == false);
  CHECK(steady(w["error"]) == steady(p["stops"][0]["message"]));
  CHECK_FALSE(w.contains("stages_run"));
  CHECK_FALSE(fs::exists(a.dir / "out"));
  return p["stops"];
}

void copy_tree(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  fs::copy(from, to, fs::copy_options::recursive);
}

void git(const fs::path& repo, std::vector<std::string> args) {
  std::vector<std::string> a = {"-C", repo.string(), "-c", "user.name=t", "-c", "user.email=t@t.invalid"};
  a.insert(a.end(), args.begin(), args.end());
  t::RunOptions o;
  o.env = {{"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", repo.string()}};
  auto r = t::run("/usr/bin/git", a, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
}

}  // namespace

TEST_CASE("real trees: a checkout without --recursive stops before any venv, naming each submodule (exit 2)",
          "[cli][real-trees]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  if (!fs::exists("/usr/bin/git")) {
    WARN("##archbuild-skip## no /usr/bin/git to make the test repository");
    return;
  }
  // .gitmodules paths with no folder (a tarball-like tree: no gitlinks to name).
  {
    Ask a;
    a.common = {"--offline", "--source", (kReal / "unrecursive-2.11").string()};
    auto stops = same_answer(a, "submodules", 2);
    std::string m = stops[0]["message"];
    CHECK(m.find("third_party/pybind11 (no gitlink, https://github.com/pybind/pybind11.git)") != std::string::npos);
    CHECK(m.find("third_party/cpuinfo") != std::string::npos);
    CHECK_FALSE(a.made_a_venv());
  }
  // A git checkout: the gitlink recorded, its folder empty as `git clone` leaves it.
  Ask a;
  fs::path tree = a.dir / "pytorch";
  copy_tree(kReal / "unrecursive-2.11", tree);
  git(tree, {"init", "-q"});
  git(tree, {"add", "-A"});
  git(tree, {"update-index", "--add", "--cacheinfo", "160000,3e9dfa2866941655c56877882565e7577de6fc7b,third_party/pybind11"});
  git(tree, {"commit", "-qm", "2.11.0a0"});
  fs::create_directories(tree / "third_party/pybind11");
  fs::create_directories(tree / "third_party/cpuinfo/include");
  a.dir.write("pytorch/third_party/cpuinfo/CMakeLists.txt", "# checked out\n");
  a.common = {"--offline", "--source", tree.string()};
  auto stops = same_answer(a, "submodules", 2);
  std::string m = stops[0]["message"];
  CHECK(m.find("third_party/pybind11 (gitlink 3e9dfa286694, https://github.com/pybind/pybind11.git)") != std::string::npos);
  CHECK(m.find("cpuinfo") == std::string::npos);
  CHECK(m.find("git submodule update --init --recursive") != std::string::npos);
  CHECK_FALSE(a.made_a_venv());
}

TEST_CASE("real trees: requirements-build.txt's `pip` line is the venv's own, never a missing package",
          "[cli][real-trees]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Ask a;
  a.common = {"--offline", "--source", (kReal / "setuptools-2.11").string()};
  // An empty wheelhouse: the rest of PyTorch's build requirements are missing, pip is not.
  auto stops = same_answer(a, "build-venv", 3);
  std::string m = stops[0]["message"];
  CHECK(m.find("No matching distribution found for pip") == std::string::npos);
  CHECK(m.find("\n  pip") == std::string::npos);
  CHECK(m.find("\n  setuptools") != std::string::npos);
}

TEST_CASE("real trees: a tag that names another commit than the recipe pins is decided from the cached mirror (exit 4)",
          "[cli][real-trees]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  if (!fs::exists("/usr/bin/git")) {
    WARN("##archbuild-skip## no /usr/bin/git to make the test repository");
    return;
  }
  Ask a;
  fs::path repo = a.dir / "fork";
  copy_tree(kReal / "setuptools-2.11", repo);
  a.dir.write("fork/version.txt", "2.10.0\n");
  // No pin files: resolving them would ask github.com for NCCL and Eigen (tests never touch the
  // network); their absence is a later stop of its own.
  fs::remove_all(repo / ".ci");
  fs::remove(repo / "third_party/eigen_pin.txt");
  git(repo, {"init", "-q", "-b", "main"});
  git(repo, {"add", "-A"});
  git(repo, {"commit", "-qm", "a fork at 2.10.0"});
  git(repo, {"tag", "v2.10.0"});
  a.common = {"--offline", "--torch", "2.10", "--source-url", "file://" + repo.string()};
  // Not mirrored yet: one `wheel` (file://, no network) fetches the tag, only the tag, and refuses it.
  std::vector<std::string> online = a.args("wheel", "--json");
  online.erase(std::find(online.begin(), online.end(), "--offline"));
  auto first = t::archbuild(online, no_index());
  INFO(first.out << first.err);
  CHECK(first.status == 4);
  CHECK_FALSE(a.made_a_venv());
  auto stops = same_answer(a, "source-pin", 4);
  std::string m = stops[0]["message"];
  CHECK(m.find("449b1768410104d3ed79d3bcfe4ba1d65c7f22c0") != std::string::npos);
  CHECK(m.find("'v2.10.0' is commit ") != std::string::npos);
  CHECK(m.find("--ref v2.10.0") != std::string::npos);
  CHECK_FALSE(a.made_a_venv());
  CHECK(json::parse(first.out)["error"] == stops[0]["message"]);

  // --ref v2.10.0 of this repository: its own tree, and a wheel name that says whose.
  auto ref = t::archbuild({"--cache-dir", (a.dir / "cache").string(), "plan", "--sm", "90", "--torch", "2.10",
                           "--source-url", "file://" + repo.string(), "--ref", "v2.10.0", "--python",
                           "/usr/bin/python3", "--offline", "--json"},
                          no_index());
  INFO(ref.out << ref.err);
  REQUIRE(ref.status == 0);
  json r = json::parse(ref.out);
  std::string version = r["version"];
  CHECK(version.rfind("2.10.0+git", 0) == 0);
}

TEST_CASE("real trees: a tree older than every recipe says no recipe covers its line, and only that (exit 2)",
          "[cli][real-trees]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Ask a;
  a.common = {"--offline", "--source", (kReal / "older-2.3").string()};
  auto stops = same_answer(a, "release-line", 2);
  for (const auto& st : stops) CHECK(st["rule"] != "driver-backend");  // no noise from a recipe of no line of the tree's
  std::string m = stops[0]["message"];
  CHECK(m.find("no recipe covers line 2.3") != std::string::npos);
  CHECK(m.find("--torch 2.3") == std::string::npos);
  CHECK_FALSE(a.made_a_venv());
}

TEST_CASE("real trees: resolve --source names the local tree", "[cli][real-trees]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  auto r = t::archbuild({"resolve", "--sm", "90", "--source", (kReal / "setuptools-2.11").string(), "--python",
                         "/usr/bin/python3"});
  INFO(r.out << r.err);
  CHECK(r.out.find("source     local tree ") != std::string::npos);
  CHECK(r.out.find("setuptools-2.11") != std::string::npos);
  CHECK(r.out.find("give --source-url") == std::string::npos);
}

namespace {

// Every source tree among the fixtures of tests/: a folder with a recipe.toml or a version.txt
// (tests/fixtures/env-forwarding is a CMake script fixture, no tree to build).
std::vector<fs::path> fixture_trees() {
  std::vector<fs::path> out;
  auto add = [&](const fs::path& dir) {
    std::error_code ec;
    if (fs::exists(dir / "recipe.toml", ec) || fs::exists(dir / "version.txt", ec)) out.push_back(dir);
  };
  for (const auto& e : fs::directory_iterator(kFixtures)) add(e.path());
  for (const auto& e : fs::directory_iterator(kReal)) add(e.path());
  add(fs::path(ARCHBUILD_SOURCE_DIR) / "tests" / "data" / "contract" / "pytorch");
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("real trees: every fixture tree gets one answer from plan --check and from wheel up to its first stage",
          "[cli][real-trees]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  auto trees = fixture_trees();
  REQUIRE(trees.size() >= 8);
  for (const auto& tree : trees) {
    INFO("tree " << tree.string());
    Ask a;
    a.common = {"--offline", "--source", tree.string()};
    if (fs::exists(tree / "recipe.toml")) a.common.insert(a.common.end(), {"--recipe", (tree / "recipe.toml").string()});
    auto plan = t::archbuild(a.args("plan", "--json"), no_index());
    auto check = t::archbuild(a.args("plan", "--check"), no_index());
    INFO("plan --json: " << plan.status << " " << plan.err << "\nplan --check: " << check.status << " " << check.err);
    if (plan.status != 0) {
      // No plan at all (a resolution refusal): `wheel` refuses the same way.
      auto wheel = t::archbuild(a.args("wheel", "--json"), no_index());
      INFO("wheel: " << wheel.out << wheel.err);
      CHECK(check.status == plan.status);
      CHECK(wheel.status == plan.status);
      continue;
    }
    json p = json::parse(plan.out);
    int would = p["would_exit"];
    CHECK(check.status == would);
    if (would != 0) {
      auto wheel = t::archbuild(a.args("wheel", "--json"), no_index());
      INFO("wheel: " << wheel.out << wheel.err);
      CHECK(wheel.status == would);
      json w = json::parse(wheel.out);
      CHECK(steady(w["error"]) == steady(p["stops"][0]["message"]));
      CHECK_FALSE(w.contains("stages_run"));
      continue;
    }
    // Ready: `wheel` starts its first stage (then it is interrupted; the build itself is not
    // this test's).
    auto args = a.args("wheel", "--json");
    args.insert(args.end() - 1, {"--progress", "json"});
    auto env = no_index();
    t::Background wheel(ARCHBUILD_EXE, args, env);
    bool started = false;
    for (int i = 0; i < 1200 && wheel.running() && !started; ++i) {
      started = wheel.err_so_far().find("\"stage_started\"") != std::string::npos;
      if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (wheel.running()) wheel.kill(SIGINT);
    auto done = wheel.wait();
    INFO("wheel: " << done.status << " " << done.out << done.err);
    CHECK((started || done.err.find("\"stage_started\"") != std::string::npos));
  }
}
