// One answer to "would it stop?": for each reason `wheel` stops before its first stage, `plan
// --check` exits with the same status, `plan --json` names it among its stops (ready: false),
// and `wheel` ran no stage. The trees are written here as PyTorch's files behave at their tags
// (version.txt "2.11.0a0"; third_party/eigen_pin.txt, which checkout_eigen() in
// tools/optional_submodules.py clones from; a scikit-build-core pyproject); none is downloaded.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <sys/stat.h>
#include <regex>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string cannot_plan() {
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) return u;
  if (!fs::exists("/usr/bin/python3")) return "no /usr/bin/python3";
  if (t::which("cmake").empty() || t::which("ninja").empty()) return "cmake or ninja not on PATH";
  return "";
}

// A tree with the setup.py-era contract and a recipe (setup-py driver) that names it.
struct Case {
  t::TempDir dir;
  std::string recipe_extra;    // more TOML for the recipe
  std::string recipe_version = "2.11.0";
  std::optional<std::string> out;    // --out for plan and wheel (default: wheel's dir/out only)
  std::optional<std::string> cache;  // --cache-dir (default: dir/cache)
  Case() {
    dir.write("tree/version.txt", "2.11.0a0\n");
    dir.write("tree/pyproject.toml", "[build-system]\nrequires = [\"setuptools\", \"wheel\"]\n"
                                     "build-backend = \"setuptools.build_meta\"\n");
    dir.write("tree/setup.py", "from setuptools import setup\nsetup()\n");
    dir.write("tree/CMakeLists.txt", "cmake_minimum_required(VERSION 3.18)\nproject(minitorch)\n");
    fs::create_directories(dir / "wheelhouse");
  }
  fs::path recipe() const {
    return dir.write("recipe.toml",
                     "description = \"a torch-like tree\"\npackage = \"minitorch\"\nmodule = \"minitorch\"\nversion = \"" +
                         recipe_version + "\"\ncuda = [\"13.0\"]\npython = [\"3.9\", \"3.10\", \"3.11\", \"3.12\", \"3.13\"]\n"
                         "[source]\npath = \"tree\"\ntag = \"v" + recipe_version + "\"\n[build]\ndriver = \"setup-py\"\n"
                         "tools = [\"cmake\", \"ninja\"]\nwheel_dir = \"dist\"\n[arch]\nenv = \"TORCH_CUDA_ARCH_LIST\"\n"
                         "format = \"torch\"\ngrammar = \"build\"\naccepts = [\"two-digit-major\", \"a\", \"f\"]\n" +
                         recipe_extra);
  }
  std::vector<std::string> args(const std::string& cmd, std::vector<std::string> extra = {}) const {
    std::vector<std::string> a = {"--cache-dir", cache.value_or((dir / "cache").string()), cmd, "--sm", "90", "--recipe",
                                  recipe().string(), "--python", "/usr/bin/python3", "--offline",
                                  "--find-links", (dir / "wheelhouse").string()};
    if (out) a.insert(a.end(), {"--out", *out});
    else if (cmd == "wheel") a.insert(a.end(), {"--out", (dir / "out").string()});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

t::RunOptions no_index() {
  t::RunOptions o;
  o.env = {{"PIP_NO_INDEX", "1"}, {"PIP_DISABLE_PIP_VERSION_CHECK", "1"}};
  o.timeout = std::chrono::seconds(300);
  return o;
}

// plan --check, plan --json and wheel --json agree on the stop; returns plan's stops.
json same_answer(const Case& c, const std::string& rule, int status, std::vector<std::string> extra = {}) {
  auto check = t::archbuild(c.args("plan", [&] { auto e = extra; e.push_back("--check"); return e; }()), no_index());
  auto plan = t::archbuild(c.args("plan", [&] { auto e = extra; e.push_back("--json"); return e; }()), no_index());
  auto wheel = t::archbuild(c.args("wheel", [&] { auto e = extra; e.push_back("--json"); return e; }()), no_index());
  INFO("plan --check: " << check.status << "\n" << check.err << "\nplan --json: " << plan.out << plan.err
                        << "\nwheel: " << wheel.out << wheel.err);
  REQUIRE(plan.status == 0);
  json p = json::parse(plan.out);
  CHECK(p["ready"] == false);
  REQUIRE_FALSE(p["stops"].empty());
  CHECK(p["stops"][0]["rule"] == rule);
  CHECK(p["would_exit"] == status);
  CHECK(check.status == status);
  CHECK(wheel.status == status);
  json w = json::parse(wheel.out);
  CHECK(w["ok"] == false);
  CHECK(w["exit"] == status);
  // The same message, but for figures measured live in each run (free disk space moves between
  // the two commands while other processes write).
  auto steady = [](const json& m) {
    static const std::regex live(R"([0-9]+(\.[0-9]+)? GiB free)");
    return std::regex_replace(m.get<std::string>(), live, "N GiB free");
  };
  CHECK(steady(w["error"]) == steady(p["stops"][0]["message"]));
  CHECK_FALSE(w.contains("stages_run"));
  CHECK_FALSE(fs::exists(c.dir / "out"));  // --out untouched
  return p["stops"];
}

}  // namespace

TEST_CASE("one answer: a tree of another release line than the recipe (exit 2 from plan --check and wheel)",
          "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Case c;
  c.recipe_version = "2.15.0";
  auto stops = same_answer(c, "release-line", 2);
  CHECK(stops[0]["message"].get<std::string>().find("2.11.0a0") != std::string::npos);
  // On purpose: no longer a stop for this reason.
  auto plan = t::archbuild(c.args("plan", {"--json", "--allow-release-mismatch"}), no_index());
  REQUIRE(plan.status == 0);
  for (const auto& s : json::parse(plan.out)["stops"]) CHECK(s["rule"] != "release-line");
}

TEST_CASE("one answer: a tree the recipe's driver cannot build (exit 2)", "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Case c;
  c.dir.write("tree/pyproject.toml", "[build-system]\nrequires = [\"scikit-build-core\"]\n"
                                     "build-backend = \"scikit_build_core.build\"\n[tool.scikit-build]\n");
  same_answer(c, "driver-backend", 2);
}

TEST_CASE("one answer: a pin file the tree's build clones from, without a [[fetch]] (exit 3)", "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Case c;
  c.dir.write("tree/third_party/eigen_pin.txt", "3.4.0\n");
  auto stops = same_answer(c, "tree-download", 3);
  CHECK(stops[0]["message"].get<std::string>().find("third_party/eigen_pin.txt") != std::string::npos);
}

TEST_CASE("one answer: a fetch pin the mirror lacks, offline (exit 3, as the README says)", "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Case c;
  c.dir.write("tree/third_party/eigen_pin.txt", "3.4.0\n");
  c.recipe_extra = "[[fetch]]\nname = \"eigen\"\npath = \"third_party/eigen\"\n"
                   "url = \"https://gitlab.com/libeigen/eigen\"\npin_file = \"third_party/eigen_pin.txt\"\n";
  // The venv is made first (wheel meets it first): the tree's requirements are the host's.
  auto stops = same_answer(c, "fetch-pin", 3);
  CHECK(stops[0]["message"].get<std::string>().find("offline: the tree pins eigen at 3.4.0") != std::string::npos);
}

TEST_CASE("one answer: a build venv that cannot be made (exit 3)", "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Case c;
  c.dir.write("tree/requirements-build.txt", "archbuild-no-such-package>=1.0\n");
  auto stops = same_answer(c, "build-venv", 3);
  CHECK(stops[0]["message"].get<std::string>().find("archbuild-no-such-package") != std::string::npos);
}

TEST_CASE("one answer: the host too small for the recipe's [host] figures (exit 3)", "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Case c;
  c.recipe_extra = "[host]\ndisk_gib = 1000000\n";
  same_answer(c, "host", 3);
}

TEST_CASE("one answer: an expected library this host lacks (exit 3)", "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Case c;
  c.recipe_extra = "[libraries]\nexpected = [\"cusparselt\"]\n";
  // Only where this host has no cuSPARSELt (the build machines have none beside CUDA 13.0).
  auto probe = t::archbuild(c.args("plan", {"--json"}), no_index());
  REQUIRE(probe.status == 0);
  json p = json::parse(probe.out);
  if (p["stops"].empty() || p["stops"][0]["rule"] != "libraries") {
    WARN("##archbuild-skip## this host has cuSPARSELt: no library is missing to stop on");
    return;
  }
  auto stops = same_answer(c, "libraries", 3);
  CHECK(stops[0]["message"].get<std::string>().find("--without cusparselt") != std::string::npos);
}

TEST_CASE("the tree chooses its recipe: --source of a 2.11.0a0 tree without --recipe takes torch-2.11",
          "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Case c;
  auto plan = t::archbuild({"--cache-dir", (c.dir / "cache").string(), "plan", "--sm", "90", "--source",
                            (c.dir / "tree").string(), "--python", "/usr/bin/python3", "--offline", "--find-links",
                            (c.dir / "wheelhouse").string(), "--json"},
                           no_index());
  INFO(plan.out << plan.err);
  REQUIRE(plan.status == 0);
  json p = json::parse(plan.out);
  CHECK(p["resolution"]["recipe"]["name"] == "torch-2.11");
  for (const auto& s : p["stops"]) CHECK(s["rule"] != "release-line");
  // The local tree's contract is read and shown, not "fetch to see".
  CHECK(p["contract"]["available"] == true);
  CHECK(p["contract"]["version"]["value"] == "2.11.0a0");
  // --recipe of another line on the same tree: a stop naming both.
  auto other = t::archbuild({"--cache-dir", (c.dir / "cache").string(), "plan", "--sm", "90", "--source",
                             (c.dir / "tree").string(), "--recipe", "torch-2.15", "--python", "/usr/bin/python3",
                             "--offline", "--find-links", (c.dir / "wheelhouse").string(), "--check"},
                            no_index());
  INFO(other.err);
  CHECK(other.status == 2);
  CHECK(other.err.find("torch-2.15") != std::string::npos);
  CHECK(other.err.find("2.11.0a0") != std::string::npos);
}

TEST_CASE("the tree chooses its recipe: --ref of a 2.11.0a0 commit without --recipe takes torch-2.11", "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  if (!fs::exists("/usr/bin/git")) {
    WARN("##archbuild-skip## no /usr/bin/git to make the test repository");
    return;
  }
  Case c;
  fs::path repo = c.dir / "tree";
  t::RunOptions g;
  g.env = {{"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", c.dir.path().string()}};
  for (std::vector<std::string> args : {std::vector<std::string>{"init", "-q", "-b", "main"},
                                        {"add", "-A"},
                                        {"-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "2.11.0a0"}}) {
    std::vector<std::string> a = {"-C", repo.string()};
    a.insert(a.end(), args.begin(), args.end());
    REQUIRE(t::run("/usr/bin/git", a, g).status == 0);
  }
  auto plan = t::archbuild({"--cache-dir", (c.dir / "cache").string(), "plan", "--sm", "90", "--source-url",
                            "file://" + repo.string(), "--ref", "main", "--python", "/usr/bin/python3", "--find-links", (c.dir / "wheelhouse").string(), "--json"},
                           no_index());
  INFO(plan.out << plan.err);
  REQUIRE(plan.status == 0);
  json p = json::parse(plan.out);
  CHECK(p["resolution"]["recipe"]["name"] == "torch-2.11");
  for (const auto& s : p["stops"]) CHECK(s["rule"] != "release-line");
}

TEST_CASE("one answer: a required build store that cannot be read stops first (exit 3)", "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Case c;
  c.recipe_extra = "[host]\ndisk_gib = 1000000\n";  // a later stop: the store's comes before it, as in `wheel`
  // Port 1 on the loopback: nothing listens, the connection is refused at once.
  auto stops = same_answer(c, "store-required", 3, {"--store", "oci+http://127.0.0.1:1/builds/minitorch", "--store-required"});
  CHECK(stops[0]["message"].get<std::string>().starts_with("--store-required: "));
  REQUIRE(stops.size() >= 2);
  CHECK(stops[1]["rule"] == "host");
  // Not required: a warning in `wheel`, no stop in `plan`.
  auto plan = t::archbuild(c.args("plan", {"--json", "--store", "oci+http://127.0.0.1:1/builds/minitorch"}), no_index());
  REQUIRE(plan.status == 0);
  CHECK(json::parse(plan.out)["stops"][0]["rule"] == "host");
}

// What `wheel` checks before it prepares anything is the first stop `plan --check` names, with the
// same message and status, built key or not: an --out the wheel cannot be put in (found before
// the build, not after it, as docs/commands.md says) and a cache directory too long for a build.
TEST_CASE("one answer: an --out that cannot take the wheel stops plan --check and wheel before anything (exit 2)",
          "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  struct Kind {
    std::string name;
    std::function<fs::path(const fs::path&)> make;
    std::string says;
  };
  const std::vector<Kind> kinds = {
      {"a link to nothing", [](const fs::path& d) { fs::create_symlink("/nonexistent/zzz", d / "dangling"); return d / "dangling"; },
       "link to nothing"},
      {"a loop of links",
       [](const fs::path& d) {
         fs::create_symlink(d / "loop-b", d / "loop-a");
         fs::create_symlink(d / "loop-a", d / "loop-b");
         return d / "loop-a";
       },
       "loop of symbolic links"},
      {"a name too long", [](const fs::path& d) { return d / "x" / std::string(300, 'y'); }, "too long"},
      {"a FIFO",
       [](const fs::path& d) {
         REQUIRE(::mkfifo((d / "fifo").c_str(), 0644) == 0);
         return d / "fifo";
       },
       "FIFO"},
  };
  for (const auto& k : kinds) {
    DYNAMIC_SECTION(k.name) {
      Case c;
      c.out = k.make(c.dir.path()).string();
      auto stops = same_answer(c, "out", 2);
      CHECK(stops[0]["message"].get<std::string>().find(k.says) != std::string::npos);
      auto wheel = t::archbuild(c.args("wheel"), no_index());
      CHECK(wheel.status == 2);
      CHECK(wheel.err.find("[1/") == std::string::npos);  // no stage ran
      CHECK(wheel.err.find(k.says) != std::string::npos);
    }
  }
}

TEST_CASE("one answer: a cache directory too long for a build (exit 2 from plan --check and wheel)", "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Case c;
  fs::path cache = c.dir.path();
  while (cache.string().size() <= 3100) cache /= std::string(250, 'c');
  fs::create_directories(cache);
  c.cache = cache.string();
  auto stops = same_answer(c, "cache-dir", 2);
  CHECK(stops[0]["message"].get<std::string>().find("bytes long") != std::string::npos);
}

// A file:// --source-url names a repository on this machine: one that is not there is bad input
// for plan and wheel alike, before any stage (a remote URL cannot be checked offline).
TEST_CASE("a file:// --source-url that is not there: exit 2 from plan --check and wheel, the same line", "[cli][prepare]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Case c;
  const std::string url = "file://" + (c.dir / "missing.git").string();
  auto check = t::archbuild(c.args("plan", {"--check", "--source-url", url}), no_index());
  auto wheel = t::archbuild(c.args("wheel", {"--source-url", url}), no_index());
  INFO("plan --check: " << check.err << "\nwheel: " << wheel.err);
  CHECK(check.status == 2);
  CHECK(wheel.status == 2);
  CHECK(check.err.find("missing.git") != std::string::npos);
  CHECK(check.err.find("no such file") != std::string::npos);
  CHECK(wheel.err.find(check.err.substr(0, check.err.find('\n'))) != std::string::npos);
  CHECK(wheel.err.find("[1/") == std::string::npos);
}
