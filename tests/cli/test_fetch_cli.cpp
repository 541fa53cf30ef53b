// Nothing downloaded mid-build, end to end with nvcc: tests/fixtures/minitorch-fetch, whose
// build would clone a dependency pinned by a file of its tree from a github.com URL (as PyTorch
// clones NCCL). Both github.com URLs are served from local repositories through git's
// url.<base>.insteadOf in a test-local git configuration; archbuild fetches the dependency through
// its mirrors before configure, the key holds its commit, and after one online build an --offline
// build works with the origin gone.
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

const fs::path kSource = ARCHBUILD_SOURCE_DIR;
const fs::path kRecipe = kSource / "tests/fixtures/minitorch-fetch/recipe.toml";

std::string cannot_build() {
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) return u;
  if (!fs::exists("/usr/bin/python3")) return "no /usr/bin/python3 (setuptools + wheel)";
  if (t::which("cmake").empty() || t::which("ninja").empty()) return "cmake or ninja not on PATH";
  if (!fs::exists("/usr/bin/git")) return "no /usr/bin/git to make the test repositories";
  return "";
}

// The git CLI makes the test repositories (test tooling only; archbuild talks git via libgit2).
void git(const fs::path& dir, const std::vector<std::string>& args) {
  std::vector<std::string> a = {"-C", dir.string(), "-c", "user.name=archbuild tests", "-c",
                                "user.email=tests@archbuild.invalid", "-c", "tag.gpgsign=false", "-c",
                                "commit.gpgsign=false"};
  a.insert(a.end(), args.begin(), args.end());
  t::RunOptions o;
  o.env = {{"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", dir.string()}, {"GIT_AUTHOR_DATE", "2025-01-01T00:00:00Z"},
           {"GIT_COMMITTER_DATE", "2025-01-01T00:00:00Z"}};
  auto r = t::run("/usr/bin/git", a, o);
  INFO("git " << args.front() << ": " << r.err);
  REQUIRE(r.status == 0);
}

std::string head(const fs::path& dir) {
  auto r = t::run("/usr/bin/git", {"-C", dir.string(), "rev-parse", "HEAD"});
  REQUIRE(r.status == 0);
  return r.out.substr(0, 40);
}

void copy_tree(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (auto it = fs::recursive_directory_iterator(from); it != fs::recursive_directory_iterator(); ++it) {
    fs::path rel = fs::relative(it->path(), from);
    std::string first = rel.begin()->string();
    if (first == "build" || first == "dist" || first == "recipe.toml" || first == "__pycache__" ||
        rel == fs::path("third_party/minidep")) {
      if (it->is_directory() && !it->is_symlink()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink()) continue;
    if (it->is_directory()) fs::create_directories(to / rel);
    else fs::copy_file(it->path(), to / rel, fs::copy_options::overwrite_existing);
  }
}

// repos/minidep (tags v1.0, v1.1) and repos/minitorch-fetch (tag v0.1.0: examples/minitorch with
// tests/fixtures/minitorch-fetch laid over it, no submodule, the pin file saying v1.0).
struct Repos {
  fs::path dir, minidep, project;
  std::string dep_v10, dep_v11;
};

Repos make_repos(const fs::path& dir) {
  Repos r{dir, dir / "minidep", dir / "minitorch-fetch", "", ""};
  copy_tree(kSource / "examples/minitorch-dep", r.minidep);
  git(r.minidep, {"init", "-q", "-b", "main"});
  git(r.minidep, {"add", "-A"});
  git(r.minidep, {"commit", "-qm", "minidep 1.0"});
  git(r.minidep, {"tag", "-a", "v1.0", "-m", "minidep 1.0"});
  r.dep_v10 = head(r.minidep);
  { std::ofstream f(r.minidep / "README.md", std::ios::app); f << "1.1\n"; }
  git(r.minidep, {"commit", "-qam", "minidep 1.1"});
  git(r.minidep, {"tag", "v1.1"});  // a lightweight tag: both kinds resolve
  r.dep_v11 = head(r.minidep);

  copy_tree(kSource / "examples/minitorch", r.project);
  copy_tree(kSource / "tests/fixtures/minitorch-fetch", r.project);
  std::ofstream(r.project / ".ci/docker/ci_commit_pins/minidep.txt") << "v1.0\n";
  git(r.project, {"init", "-q", "-b", "main"});
  git(r.project, {"add", "-A"});
  git(r.project, {"commit", "-qm", "minitorch-fetch 0.1.0"});
  git(r.project, {"tag", "-a", "v0.1.0", "-m", "minitorch-fetch 0.1.0"});
  return r;
}

struct Host {
  t::TempDir tmp;
  Repos repos;
  Host() : repos(make_repos(tmp / "repos")) {
    // Only the test's git configuration: github.com/archbuild-test/ is the local folder.
    tmp.write("home/.gitconfig", "[url \"file://" + (tmp / "repos").string() +
                                     "/\"]\n\tinsteadOf = https://github.com/archbuild-test/\n");
  }
  t::Ran run(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--cache-dir", (tmp / "cache").string()});
    t::RunOptions o;
    o.timeout = std::chrono::seconds(900);
    o.env["HOME"] = (tmp / "home").string();
    o.env["GIT_CONFIG_NOSYSTEM"] = "1";
    o.unset_env = {"GIT_CONFIG_GLOBAL", "XDG_CONFIG_HOME"};
    return t::archbuild(args, o);
  }
  std::vector<std::string> wheel(const std::string& sm, const std::string& out) const {
    return {"wheel", "--sm", sm, "--recipe", kRecipe.string(), "--python", "/usr/bin/python3", "--out",
            (tmp / out).string(), "--no-validate", "--json"};
  }
  std::vector<std::string> plan(const std::string& sm) const {
    return {"plan", "--sm", sm, "--recipe", kRecipe.string(), "--python", "/usr/bin/python3", "--json"};
  }
};

json parse(const t::Ran& r) {
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

}  // namespace

// (No ';' in test names: ctest's discovery splits the name there and runs nothing.)
TEST_CASE("a build-time clone pinned by a file: fetched through the mirrors before configure with its commit in "
          "the key and the manifest - offline after one online build - the build itself downloads nothing",
          "[cli][wheel][fetch][nvcc]") {
  if (auto why = cannot_build(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Host h;

  // Nothing mirrored yet: plan shows the fetch, unresolved, and says why.
  json before = parse(h.run(h.plan("90")));
  REQUIRE(before["fetches"].size() == 1);
  CHECK(before["fetches"][0]["name"] == "minidep");
  CHECK(before["fetches"][0]["commit"].is_null());
  CHECK(before["fetch_notes"].size() == 1);

  // The first build: the tree and the pinned dependency come through insteadOf into the mirrors.
  json built = parse(h.run(h.wheel("90", "out")));
  json record = json::parse(t::read_file(built["manifest"].get<std::string>()));
  json manifest = record["manifest"];
  REQUIRE(manifest["fetches"].size() == 1);
  CHECK(manifest["fetches"][0]["url"] == "https://github.com/archbuild-test/minidep");
  CHECK(manifest["fetches"][0]["ref"] == "v1.0");
  CHECK(manifest["fetches"][0]["pin_file"] == ".ci/docker/ci_commit_pins/minidep.txt");
  CHECK(manifest["fetches"][0]["commit"] == h.repos.dep_v10);
  CHECK(record["plan"]["key_inputs"]["fetches"][0]["commit"] == h.repos.dep_v10);
  // A checkout of its own where the build looks, not a link into the cache.
  fs::path placed = h.tmp / "cache/src" / built["key"].get<std::string>() / "third_party/minidep";
  CHECK(fs::is_directory(placed / ".git"));
  CHECK_FALSE(fs::is_symlink(placed));
  CHECK(fs::exists(placed / "include/minidep/minidep.h"));

  // Now the tree is mirrored: plan resolves the pin without any build and gives the wheel's key.
  json after = parse(h.run(h.plan("90")));
  CHECK(after["key"] == built["key"]);
  CHECK(after["fetches"][0]["commit"] == h.repos.dep_v10);
  auto human = h.run({"plan", "--sm", "90", "--recipe", kRecipe.string(), "--python", "/usr/bin/python3"});
  CHECK(human.out.find("minidep    https://github.com/archbuild-test/minidep @ v1.0 = commit " + h.repos.dep_v10) !=
        std::string::npos);

  // The build downloads nothing itself: with the fetch switched off, configure fails for want of
  // the folder (PyTorch's build would have cloned it).
  auto off_cmd = h.wheel("90", "out-off");
  off_cmd.insert(off_cmd.end(), {"--env", "USE_SYSTEM_MINIDEP=1"});
  auto off = h.run(off_cmd);
  CHECK(off.status == 4);
  CHECK(off.err.find("third_party/minidep is missing: this build downloads nothing") != std::string::npos);

  // A pin moved to another tag: another commit, another key (the tree's commit is new too, so the
  // fetch's own commit is what is checked).
  std::ofstream(h.repos.project / ".ci/docker/ci_commit_pins/minidep.txt") << "v1.1\n";
  git(h.repos.project, {"commit", "-qam", "minidep 1.1"});
  json moved = parse(h.run({"plan", "--sm", "90", "--recipe", kRecipe.string(), "--python", "/usr/bin/python3",
                            "--ref", "main", "--json"}));
  CHECK(moved["key"] != built["key"]);
  CHECK(moved["key_inputs"]["fetches"][0]["ref"] == "v1.1");
  CHECK(moved["key_inputs"]["fetches"][0]["commit"] == h.repos.dep_v11);

  // The origin goes away: an --offline build of another key works from the mirrors alone.
  fs::rename(h.tmp / "repos", h.tmp / "repos-gone");
  auto offline_cmd = h.wheel("80", "out-offline");
  offline_cmd.push_back("--offline");
  json offline = parse(h.run(offline_cmd));
  CHECK(offline["key"] != built["key"]);
  CHECK(offline["stages_run"][0] == "fetch");
  json offline_manifest = json::parse(t::read_file(offline["manifest"].get<std::string>()))["manifest"];
  CHECK(offline_manifest["fetches"][0]["commit"] == h.repos.dep_v10);

  // Offline, a tree whose pin the mirror lacks: exit 3 naming the repository and the pin, before
  // any stage runs.
  fs::path local = h.tmp / "local";
  copy_tree(h.tmp / "repos-gone/minitorch-fetch", local);
  fs::remove_all(local / ".git");
  std::ofstream(local / ".ci/docker/ci_commit_pins/minidep.txt") << "v2.0\n";
  auto trees = [&] { return std::distance(fs::directory_iterator(h.tmp / "cache/src"), fs::directory_iterator()); };
  auto trees_before = trees();
  auto missing_cmd = h.wheel("90", "out-missing");
  missing_cmd.insert(missing_cmd.end(), {"--offline", "--source", local.string()});
  auto missing = h.run(missing_cmd);
  CHECK(missing.status == 3);
  CHECK(missing.err.find("https://github.com/archbuild-test/minidep") != std::string::npos);
  CHECK(missing.err.find("v2.0") != std::string::npos);
  CHECK(missing.err.find(".ci/docker/ci_commit_pins/minidep.txt") != std::string::npos);
  CHECK(trees() == trees_before);  // no stage ran: not even a checkout was made
}
