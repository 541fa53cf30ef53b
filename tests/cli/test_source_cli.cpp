// Sources other than the recipe's tag, end to end with nvcc: a local tree built as it
// is (--source DIR, a recipe's source.path — the README's one command), and --ref BRANCH resolved
// to a commit before the plan.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/examples.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kSource = ARCHBUILD_SOURCE_DIR;

std::string cannot_build() {
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) return u;
  if (!fs::exists("/usr/bin/python3")) return "no /usr/bin/python3 (setuptools + wheel)";
  if (t::which("cmake").empty() || t::which("ninja").empty()) return "cmake or ninja not on PATH";
  return "";
}

// Every file under `dir` with its content: to show a tree was not touched.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> m;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it)
    if (it->is_regular_file() && !it->is_symlink()) m[fs::relative(it->path(), dir).string()] = t::read_file(it->path());
  return m;
}

void git(const fs::path& dir, const std::vector<std::string>& args) {
  std::vector<std::string> a = {"-C", dir.string(), "-c", "user.name=t", "-c", "user.email=t@t.invalid"};
  a.insert(a.end(), args.begin(), args.end());
  t::RunOptions o;
  o.env = {{"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", dir.string()}};
  auto r = t::run("/usr/bin/git", a, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
}

t::RunOptions long_run() {
  t::RunOptions o;
  o.timeout = std::chrono::seconds(900);
  return o;
}

}  // namespace

TEST_CASE("wheel --source DIR: the tree as it is, untouched, a repeat runs nothing, an edit is a new key",
          "[cli][wheel][source][nvcc]") {
  if (auto why = cannot_build(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  fs::path tree = t::copy_examples(dir, kSource);
  // An uncommitted-style edit the build must see: a marker the wheel carries.
  {
    std::ofstream f(tree / "minitorch" / "local_marker.py");
    f << "MARK = 'built from the local tree'\n";
  }
  auto before = snapshot(dir / "examples");
  std::string cache = (dir / "cache").string();
  std::vector<std::string> args = {"--cache-dir", cache, "wheel", "--sm", "90", "--recipe",
                                   (tree / "recipe.toml").string(), "--source", tree.string(),
                                   "--python", "/usr/bin/python3", "--out", (dir / "out").string(), "--json"};
  auto r = t::archbuild(args, long_run());
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  json doc = json::parse(r.out);
  CHECK(doc["ok"] == true);
  std::string version = doc["version"];
  CHECK(version.find("0.1.0+src") == 0);
  CHECK(version.find(".cu130.sm90") != std::string::npos);
  // The wheel holds the local edit; the tree was not written to (no build/, no dist/).
  auto listing = t::archbuild({"inspect", doc["wheel"].get<std::string>(), "--json"});
  CHECK(listing.status == 0);
  auto zip = t::run("/usr/bin/python3", {"-c", "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))",
                                         doc["wheel"].get<std::string>()});
  CHECK(zip.out.find("minitorch/local_marker.py") != std::string::npos);
  CHECK(snapshot(dir / "examples") == before);
  CHECK_FALSE(fs::exists(tree / "build"));
  // The manifest names the tree and its content.
  json manifest = json::parse(t::read_file(doc["manifest"].get<std::string>()))["manifest"];
  CHECK(manifest["source"]["local"]["dir"] == fs::canonical(tree).string());
  CHECK(manifest["source"]["local"]["content_sha256"].get<std::string>().size() == 64);

  auto again = t::archbuild(args, long_run());
  REQUIRE(again.status == 0);
  CHECK(json::parse(again.out)["reused"] == true);

  auto plan_key = [&] {
    auto p = t::archbuild({"--cache-dir", cache, "plan", "--sm", "90", "--recipe", (tree / "recipe.toml").string(),
                           "--source", tree.string(), "--python", "/usr/bin/python3", "--json"});
    INFO(p.err);
    REQUIRE(p.status == 0);
    return json::parse(p.out)["key"].get<std::string>();
  };
  std::string key = plan_key();
  CHECK(key == doc["key"]);
  { std::ofstream f(tree / "csrc" / "kernels.cu", std::ios::app); f << "// an edit\n"; }
  std::string edited_key = plan_key();
  CHECK(edited_key != key);
  // The edited tree's checkout starts from the first key's (issue 48): moved, only the kernel written.
  auto edited = t::archbuild(args, long_run());
  INFO(edited.out << edited.err);
  REQUIRE(edited.status == 0);
  CHECK(json::parse(edited.out)["key"] == edited_key);
  json record = json::parse(t::read_file(dir / "cache" / "keys" / (edited_key + ".json")));
  json copy = record["stages"]["fetch"]["copy"];
  INFO(copy.dump());
  CHECK(copy["from_key"] == key);
  CHECK(copy["written"].get<int>() >= 1);
  CHECK(copy["kept"].get<int>() > 0);
  CHECK_FALSE(fs::exists(dir / "cache" / "src" / key));
  CHECK(snapshot(dir / "examples").size() == before.size());
}

TEST_CASE("the README's one command: the example recipe names its own folder", "[cli][wheel][source][nvcc]") {
  if (auto why = cannot_build(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  fs::path dist = kSource / "dist";
  std::error_code ec;
  auto wheels_in_dist = [&] {
    std::vector<fs::path> w;
    for (const auto& e : fs::directory_iterator(dist, ec))
      if (e.path().extension() == ".whl" && e.path().filename().string().rfind("minitorch-", 0) == 0) w.push_back(e.path());
    return w;
  };
  for (const auto& w : wheels_in_dist()) fs::remove(w, ec);
  t::RunOptions o = long_run();
  o.cwd = kSource;
  o.env["XDG_CACHE_HOME"] = (dir / "xdg").string();
  // scripts/run builds into the same build folder as these tests.
  o.env["ARCHBUILD_BUILD_DIR"] = fs::path(ARCHBUILD_EXE).parent_path().parent_path().string();
  auto r = t::run("scripts/run", {"wheel", "--sm", "90", "--recipe", "examples/minitorch/recipe.toml", "--out", "dist/"}, o);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  auto built = wheels_in_dist();
  REQUIRE(built.size() == 1);
  CHECK(built[0].filename().string().find("+src") != std::string::npos);
  auto inspect = t::archbuild({"inspect", built[0].string(), "--sm", "90", "--json"});
  CHECK(inspect.status == 0);
  for (const auto& w : built) {
    fs::remove(w, ec);
    fs::remove(fs::path(w.string() + ".manifest.json"), ec);
  }
}

TEST_CASE("wheel --ref BRANCH: planned at its commit, a moved branch is a new key, --offline from the mirror",
          "[cli][wheel][source][nvcc]") {
  if (auto why = cannot_build(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  auto made = t::run("/bin/bash", {(kSource / "tests/support/make-example-repos").string(), (dir / "repos").string()});
  REQUIRE(made.status == 0);
  fs::path repo = dir / "repos" / "minitorch";
  git(repo, {"checkout", "-q", "-b", "dev"});
  { std::ofstream f(repo / "version.txt"); f << "0.2.0a0\n"; }
  git(repo, {"commit", "-qm", "dev: 0.2.0a0", "version.txt"});
  auto head = t::run("/usr/bin/git", {"-C", repo.string(), "rev-parse", "HEAD"});
  std::string commit = head.out.substr(0, 40);
  std::string url = "file://" + repo.string();
  std::string cache = (dir / "cache").string();
  std::string recipe = (kSource / "examples/minitorch/recipe.toml").string();
  auto plan = [&](std::vector<std::string> extra) {
    // The dev branch is release line 0.2, the recipe 0.1: built with it on purpose.
    std::vector<std::string> a = {"--cache-dir", cache, "plan", "--sm", "90", "--recipe", recipe, "--source-url", url,
                                  "--ref", "dev", "--python", "/usr/bin/python3", "--allow-release-mismatch", "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    auto p = t::archbuild(a);
    INFO(p.out << p.err);
    REQUIRE(p.status == 0);
    return json::parse(p.out);
  };
  json p = plan({});
  CHECK(p["version"] == "0.2.0a0+git" + commit.substr(0, 7) + ".cu130.sm90");
  CHECK(p["source"]["ref"] == "dev");
  CHECK(p["key_inputs"]["source"]["commit"] == commit);

  // Without the flag, plan and wheel give the same answer: a stop naming both lines (exit 2).
  auto check = t::archbuild({"--cache-dir", cache, "plan", "--sm", "90", "--recipe", recipe, "--source-url", url, "--ref",
                             "dev", "--python", "/usr/bin/python3", "--check"});
  CHECK(check.status == 2);
  CHECK(check.err.find("release line 0.2") != std::string::npos);
  auto r = t::archbuild({"--cache-dir", cache, "wheel", "--sm", "90", "--recipe", recipe, "--source-url", url, "--ref",
                         "dev", "--python", "/usr/bin/python3", "--allow-release-mismatch", "--out",
                         (dir / "out").string(), "--json"},
                        long_run());
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  json doc = json::parse(r.out);
  CHECK(doc["key"] == p["key"]);
  json manifest = json::parse(t::read_file(doc["manifest"].get<std::string>()))["manifest"];
  CHECK(manifest["source"]["ref"] == "dev");
  CHECK(manifest["source"]["commit"] == commit);
  CHECK(doc["version"] == p["version"]);
  CHECK(fs::path(doc["wheel"].get<std::string>()).filename().string().rfind("minitorch-0.2.0a0+git" + commit.substr(0, 7), 0) == 0);

  // Offline: the mirror knows the branch.
  CHECK(plan({"--offline"})["key"] == p["key"]);
  // The branch moves: a new commit, a new key.
  { std::ofstream f(repo / "README.md", std::ios::app); f << "more\n"; }
  git(repo, {"commit", "-qm", "dev: more", "README.md"});
  json moved = plan({});
  CHECK(moved["key"] != p["key"]);
  CHECK(moved["key_inputs"]["source"]["commit"] != commit);
}

TEST_CASE("git's url.<base>.insteadOf reaches every fetch: github.com URLs served by local repositories",
          "[cli][wheel][source][nvcc]") {
  if (auto why = cannot_build(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  // The submodule URL is relative ("../minidep"), so it resolves against the github.com URL and
  // must be rewritten too.
  auto made = t::run("/bin/bash", {(kSource / "tests/support/make-example-repos").string(), (dir / "repos").string(),
                                   "--relative-submodule-url"});
  REQUIRE(made.status == 0);
  dir.write("home/.gitconfig", "[url \"file://" + (dir / "repos").string() + "/\"]\n\tinsteadOf = https://github.com/archbuild-test/\n");
  t::RunOptions o = long_run();
  o.env["HOME"] = (dir / "home").string();
  o.env["GIT_CONFIG_NOSYSTEM"] = "1";
  auto r = t::archbuild({"--cache-dir", (dir / "cache").string(), "wheel", "--sm", "90", "--recipe",
                         (kSource / "examples/minitorch/recipe.toml").string(), "--source-url",
                         "https://github.com/archbuild-test/minitorch", "--python", "/usr/bin/python3", "--out",
                         (dir / "out").string(), "--no-validate", "--json"},
                        o);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  json doc = json::parse(r.out);
  json manifest = json::parse(t::read_file(doc["manifest"].get<std::string>()))["manifest"];
  // The manifest keeps the URL as written; the submodule came through the rewrite.
  CHECK(manifest["source"]["url"] == "https://github.com/archbuild-test/minitorch");
  REQUIRE(manifest["source"]["submodules"].size() == 1);
  CHECK(manifest["source"]["submodules"][0]["url"] == "https://github.com/archbuild-test/minidep");
}
