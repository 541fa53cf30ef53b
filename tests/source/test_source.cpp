// source/: libgit2 mirrors, incremental fetch, checkout, submodules, pinned commits, offline,
// unreachable URLs — against file:// repositories made in a TempDir (with the git CLI, which
// only the tests use).
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <unistd.h>

#include "run/runner.hpp"
#include "source/source.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::source;
using archbuild::test::TempDir;
namespace fs = std::filesystem;

namespace {

// Test commands go through run::ProcessRunner (waitpid-based) with the test's environment plus
// a fixed git identity.
std::map<std::string, std::string> test_env() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (auto eq = kv.find('='); eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : std::map<std::string, std::string>{
           {"GIT_AUTHOR_NAME", "t"}, {"GIT_AUTHOR_EMAIL", "t@example.invalid"}, {"GIT_COMMITTER_NAME", "t"},
           {"GIT_COMMITTER_EMAIL", "t@example.invalid"}, {"GIT_CONFIG_NOSYSTEM", "1"},
           {"GIT_AUTHOR_DATE", "2025-01-01T00:00:00Z"}, {"GIT_COMMITTER_DATE", "2025-01-01T00:00:00Z"}})
    env[k] = v;
  return env;
}

struct Ran {
  int status = -1;
  std::string out;
};

Ran run_tool(std::vector<std::string> argv) {
  run::ProcessRunner runner;
  run::Command c;
  c.argv = std::move(argv);
  c.env = test_env();
  Ran r;
  auto res = runner.run(c, [&](std::string_view l) {
    r.out += l;
    r.out += '\n';
  });
  r.status = res.ok() ? 0 : (res.exit_status > 0 ? res.exit_status : -1);
  return r;
}

std::string git(const fs::path& repo, std::vector<std::string> args) {
  args.insert(args.begin(), {"git", "-C", repo.string()});
  auto r = run_tool(args);
  INFO("git " << args[3] << ": " << r.out);
  REQUIRE(r.status == 0);
  auto out = r.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// A repository with the given files committed; returns HEAD.
std::string commit_files(const fs::path& repo, const std::map<std::string, std::string>& files,
                         const std::string& message) {
  if (!fs::exists(repo / ".git")) {
    fs::create_directories(repo);
    git(repo, {"init", "-q", "-b", "main"});
  }
  for (const auto& [rel, content] : files) {
    fs::create_directories((repo / rel).parent_path());
    std::ofstream(repo / rel) << content;
  }
  git(repo, {"add", "-A"});
  git(repo, {"commit", "-q", "-m", message});
  return git(repo, {"rev-parse", "HEAD"});
}

// Records `sub_commit` of `sub_url` at `path` in `repo` (like `git submodule add`, no clone).
std::string add_submodule(const fs::path& repo, const std::string& path, const std::string& sub_url,
                          const std::string& sub_commit) {
  std::ofstream(repo / ".gitmodules", std::ios::app)
      << "[submodule \"" << path << "\"]\n\tpath = " << path << "\n\turl = " << sub_url << "\n";
  git(repo, {"add", ".gitmodules"});
  git(repo, {"update-index", "--add", "--cacheinfo", "160000," + sub_commit + "," + path});
  git(repo, {"commit", "-q", "-m", "add " + path});
  return git(repo, {"rev-parse", "HEAD"});
}

std::string url_of(const fs::path& p) { return "file://" + p.string(); }

struct Cache {
  fs::path root;
  std::set<std::string> asked;
  MirrorFor mirror_for() {
    return [this](const std::string& url) {
      asked.insert(url);
      auto name = std::to_string(std::hash<std::string>{}(url));
      return MirrorSlot{root / "git" / (name + ".git"), root / "git" / (name + ".lock")};
    };
  }
};

SourceOptions fast(std::vector<std::string>* notes = nullptr) {
  SourceOptions o;
  o.retry = {3, std::chrono::milliseconds(1), 2.0};
  if (notes) o.note = [notes](const std::string& n) { notes->push_back(n); };
  return o;
}

std::vector<std::string> refs_of(const fs::path& mirror) {
  auto out = git(mirror, {"for-each-ref", "--format=%(refname)"});
  std::vector<std::string> refs;
  std::istringstream is(out);
  for (std::string l; std::getline(is, l);)
    if (!l.empty()) refs.push_back(l);
  return refs;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool have_git() { return !test::which("git").empty(); }

}  // namespace

TEST_CASE("resolve_submodule_url: git's relative URL rules", "[source]") {
  CHECK(resolve_submodule_url("file:///tmp/x/minitorch", "../minidep") == "file:///tmp/x/minidep");
  CHECK(resolve_submodule_url("https://git.example.org/pytorch/pytorch.git", "../cpuinfo.git") ==
        "https://git.example.org/pytorch/cpuinfo.git");
  CHECK(resolve_submodule_url("https://git.example.org/pytorch/pytorch/", "../../google/benchmark") ==
        "https://git.example.org/google/benchmark");
  CHECK(resolve_submodule_url("file:///a/b", "./sub") == "file:///a/b/sub");
  CHECK(resolve_submodule_url("git@github.com:pytorch/pytorch", "../dep") == "git@github.com:pytorch/dep");
  CHECK(resolve_submodule_url("git@host:repo", "../dep") == "git@host:dep");
  CHECK(resolve_submodule_url("/srv/git/a", "../b") == "/srv/git/b");
  CHECK(resolve_submodule_url("file:///a/b", "https://x/y") == "https://x/y");
  CHECK(is_full_commit("0123456789abcdef0123456789abcdef01234567"));
  CHECK_FALSE(is_full_commit("v2.7.1"));
}

TEST_CASE("fetch_source: mirror, only the wanted tag, checkout at a detached HEAD", "[source]") {
  if (!have_git()) {
    WARN("##archbuild-skip## the git CLI (used to make test repositories) is not installed");
    return;
  }
  TempDir tmp;
  auto up = tmp / "upstream";
  auto c1 = commit_files(up, {{"README", "one\n"}, {"bin/run.sh", "#!/bin/sh\n"}}, "one");
  git(up, {"tag", "-a", "v1", "-m", "v1"});
  auto c2 = commit_files(up, {{"README", "two\n"}}, "two");
  git(up, {"tag", "v2"});  // lightweight
  Cache cache{tmp / "cache"};
  std::vector<std::string> notes;
  auto target = tmp / "cache/src/key1";
  auto r = fetch_source({url_of(up), "v1", ""}, target, cache.mirror_for(), fast(&notes));
  REQUIRE(r);
  CHECK(r->commit == c1);
  CHECK(r->url == url_of(up));
  CHECK(r->submodules.empty());
  CHECK(test::read_file(target / "README") == "one\n");
  CHECK(*checkout_commit(target) == c1);
  CHECK(git(target, {"status", "--porcelain"}).empty());       // a clean git work tree
  CHECK(git(target, {"describe", "--tags"}) == "v1");           // the tag came along
  CHECK(fs::exists(target / ".git/objects/info/alternates"));  // objects borrowed from the mirror
  auto mirror = cache.mirror_for()(url_of(up)).dir;
  CHECK(refs_of(mirror) == std::vector<std::string>{"refs/tags/v1"});  // nothing else fetched
  // Nothing half-made is left beside the checkout.
  CHECK(names_in(tmp / "cache/src") == std::vector<std::string>{"key1"});

  // A tag the mirror has is not fetched again: works even with the upstream gone.
  fs::rename(up, tmp / "moved");
  auto again = fetch_source({url_of(up), "v1", ""}, tmp / "cache/src/key2", cache.mirror_for(), fast());
  REQUIRE(again);
  CHECK(again->commit == c1);
  fs::rename(tmp / "moved", up);
  // A new tag is fetched incrementally into the same mirror.
  auto v2 = fetch_source({url_of(up), "v2", ""}, tmp / "cache/src/key3", cache.mirror_for(), fast());
  REQUIRE(v2);
  CHECK(v2->commit == c2);
  CHECK(refs_of(mirror) == std::vector<std::string>{"refs/tags/v1", "refs/tags/v2"});
}

TEST_CASE("fetch_source: a reused target is replaced whole, stale temp dirs are removed", "[source]") {
  if (!have_git()) {
    WARN("##archbuild-skip## no git CLI");
    return;
  }
  TempDir tmp;
  auto up = tmp / "upstream";
  commit_files(up, {{"a.txt", "a"}}, "one");
  git(up, {"tag", "v1"});
  Cache cache{tmp / "cache"};
  auto target = tmp / "cache/src/k";
  tmp.write("cache/src/k/junk-from-a-failed-build", "x");
  tmp.write("cache/src/.k.tmp-123456/half-written", "x");
  auto r = fetch_source({url_of(up), "v1", ""}, target, cache.mirror_for(), fast());
  REQUIRE(r);
  CHECK_FALSE(fs::exists(target / "junk-from-a-failed-build"));
  CHECK(fs::exists(target / "a.txt"));
  CHECK(names_in(tmp / "cache/src") == std::vector<std::string>{"k"});
}

TEST_CASE("fetch_source: pinned commit verified, a mismatch names both hashes", "[source]") {
  if (!have_git()) {
    WARN("##archbuild-skip## no git CLI");
    return;
  }
  TempDir tmp;
  auto up = tmp / "upstream";
  auto c1 = commit_files(up, {{"a.txt", "a"}}, "one");
  git(up, {"tag", "v1"});
  Cache cache{tmp / "cache"};
  auto ok = fetch_source({url_of(up), "v1", c1.substr(0, 10)}, tmp / "cache/src/ok", cache.mirror_for(), fast());
  REQUIRE(ok);
  const std::string wrong = "1111111111111111111111111111111111111111";
  auto bad = fetch_source({url_of(up), "v1", wrong}, tmp / "cache/src/bad", cache.mirror_for(), fast());
  REQUIRE_FALSE(bad);
  CHECK(bad.error().exit == Exit::build_failed);
  CHECK(bad.error().message.find(c1) != std::string::npos);
  CHECK(bad.error().message.find(wrong) != std::string::npos);
  CHECK(bad.error().message.find(url_of(up)) != std::string::npos);
  CHECK(bad.error().message.find("--ref v1") != std::string::npos);  // how to build this repository's tag anyway
  CHECK_FALSE(fs::exists(tmp / "cache/src/bad"));
  auto nonsense = fetch_source({url_of(up), "v1", "xyz"}, tmp / "cache/src/n", cache.mirror_for(), fast());
  REQUIRE_FALSE(nonsense);
  CHECK(nonsense.error().exit == Exit::bad_input);
}

TEST_CASE("fetch_source: offline uses only the mirror", "[source]") {
  if (!have_git()) {
    WARN("##archbuild-skip## no git CLI");
    return;
  }
  TempDir tmp;
  auto up = tmp / "upstream";
  auto c1 = commit_files(up, {{"a.txt", "a"}}, "one");
  git(up, {"tag", "v1"});
  commit_files(up, {{"a.txt", "b"}}, "two");
  git(up, {"tag", "v2"});
  Cache cache{tmp / "cache"};
  auto offline = fast();
  offline.offline = true;
  auto none = fetch_source({url_of(up), "v1", ""}, tmp / "cache/src/a", cache.mirror_for(), offline);
  REQUIRE_FALSE(none);
  CHECK(none.error().message.find("offline: there is no mirror of " + url_of(up)) != std::string::npos);
  REQUIRE(fetch_source({url_of(up), "v1", ""}, tmp / "cache/src/a", cache.mirror_for(), fast()));
  auto hit = fetch_source({url_of(up), "v1", ""}, tmp / "cache/src/b", cache.mirror_for(), offline);
  REQUIRE(hit);
  CHECK(hit->commit == c1);
  auto miss = fetch_source({url_of(up), "v2", ""}, tmp / "cache/src/c", cache.mirror_for(), offline);
  REQUIRE_FALSE(miss);
  CHECK(miss.error().message.find("offline") != std::string::npos);
  CHECK(miss.error().message.find("'v2'") != std::string::npos);
  CHECK(miss.error().message.find(url_of(up)) != std::string::npos);
  CHECK_FALSE(fs::exists(tmp / "cache/src/c"));
}

TEST_CASE("fetch_source: unreachable URL — retried with back-off, then an error naming it", "[source]") {
  TempDir tmp;
  Cache cache{tmp / "cache"};
  std::vector<std::string> notes;
  const std::string url = "file://" + (tmp / "no/such/repo").string();
  auto r = fetch_source({url, "v1", ""}, tmp / "cache/src/k", cache.mirror_for(), fast(&notes));
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == Exit::build_failed);
  CHECK(r.error().message.find(url) != std::string::npos);
  CHECK(r.error().message.find("after 3 attempts") != std::string::npos);
  int retries = 0;
  for (const auto& n : notes)
    if (n.find("retrying") != std::string::npos) ++retries;
  CHECK(retries == 2);
  CHECK_FALSE(fs::exists(tmp / "cache/src/k"));
  if (fs::exists(tmp / "cache/src")) CHECK(names_in(tmp / "cache/src").empty());
}

TEST_CASE("fetch_source: an unknown tag is named, with the nearest existing ones", "[source]") {
  if (!have_git()) {
    WARN("##archbuild-skip## no git CLI");
    return;
  }
  TempDir tmp;
  auto up = tmp / "upstream";
  commit_files(up, {{"a.txt", "a"}}, "one");
  git(up, {"tag", "v2.7.1"});
  Cache cache{tmp / "cache"};
  std::vector<std::string> notes;
  auto r = fetch_source({url_of(up), "v2.7.2", ""}, tmp / "cache/src/k", cache.mirror_for(), fast(&notes));
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find(url_of(up) + " has no tag or branch 'v2.7.2' (did you mean v2.7.1?)") !=
        std::string::npos);
  for (const auto& n : notes) CHECK(n.find("retrying") == std::string::npos);  // not a network error
}

TEST_CASE("fetch_source: an object the remote lacks fails at once, not retried", "[source]") {
  if (!have_git()) {
    WARN("##archbuild-skip## no git CLI");
    return;
  }
  TempDir tmp;
  auto up = tmp / "upstream";
  commit_files(up, {{"a.txt", "content the mirror will never get"}}, "one");
  git(up, {"tag", "v1"});
  // The blob's loose object removed: the remote advertises v1 but cannot send it, every time.
  auto blob = git(up, {"rev-parse", "HEAD:a.txt"});
  fs::path object = up / ".git" / "objects" / blob.substr(0, 2) / blob.substr(2);
  REQUIRE(fs::exists(object));
  fs::permissions(object, fs::perms::owner_write, fs::perm_options::add);
  fs::remove(object);
  Cache cache{tmp / "cache"};
  std::vector<std::string> notes;
  auto r = fetch_source({url_of(up), "v1", ""}, tmp / "cache/src/k", cache.mirror_for(), fast(&notes));
  REQUIRE_FALSE(r);
  INFO(r.error().message);
  CHECK(r.error().message.find(url_of(up)) != std::string::npos);
  CHECK(r.error().message.find("attempts") == std::string::npos);
  for (const auto& n : notes) CHECK(n.find("retrying") == std::string::npos);
  CHECK_FALSE(fs::exists(tmp / "cache/src/k"));
}

TEST_CASE("fetch_source: a commit, a branch that moves, and cancellation", "[source]") {
  if (!have_git()) {
    WARN("##archbuild-skip## no git CLI");
    return;
  }
  TempDir tmp;
  auto up = tmp / "upstream";
  auto c1 = commit_files(up, {{"a.txt", "1"}}, "one");
  auto c2 = commit_files(up, {{"a.txt", "2"}}, "two");
  Cache cache{tmp / "cache"};
  // A commit that is no branch's tip: the branches are fetched to find it.
  auto byc = fetch_source({url_of(up), c1, ""}, tmp / "cache/src/c", cache.mirror_for(), fast());
  REQUIRE(byc);
  CHECK(byc->commit == c1);
  CHECK(test::read_file(tmp / "cache/src/c/a.txt") == "1");
  // A commit an annotated tag points at: only that tag is fetched.
  auto up2 = tmp / "upstream2";
  auto t1 = commit_files(up2, {{"b.txt", "1"}}, "one");
  git(up2, {"tag", "-a", "rel-1", "-m", "release 1"});
  commit_files(up2, {{"b.txt", "2"}}, "two");
  auto byt = fetch_source({url_of(up2), t1, ""}, tmp / "cache/src/t", cache.mirror_for(), fast());
  REQUIRE(byt);
  CHECK(byt->commit == t1);
  CHECK(refs_of(cache.mirror_for()(url_of(up2)).dir) == std::vector<std::string>{"refs/tags/rel-1"});
  auto br = fetch_source({url_of(up), "main", ""}, tmp / "cache/src/b", cache.mirror_for(), fast());
  REQUIRE(br);
  CHECK(br->commit == c2);
  auto c3 = commit_files(up, {{"a.txt", "3"}}, "three");
  auto br2 = fetch_source({url_of(up), "main", ""}, tmp / "cache/src/b", cache.mirror_for(), fast());
  REQUIRE(br2);
  CHECK(br2->commit == c3);  // a branch is fetched again (a tag is not)
  auto stop = fast();
  stop.cancelled = [] { return true; };
  git(up, {"tag", "v9"});
  auto cancelled = fetch_source({url_of(up), "v9", ""}, tmp / "cache/src/x", cache.mirror_for(), stop);
  REQUIRE_FALSE(cancelled);
  CHECK(cancelled.error().message.find("interrupted") != std::string::npos);
}

TEST_CASE("fetch_source: submodules recursively, each from its own mirror, at the recorded commits",
          "[source]") {
  if (!have_git()) {
    WARN("##archbuild-skip## no git CLI");
    return;
  }
  TempDir tmp;
  // leaf <- mid (relative URL ../leaf) <- top (file:// URL to mid at deps/mid)
  auto leaf = tmp / "repos/leaf";
  auto leaf_c1 = commit_files(leaf, {{"leaf.h", "leaf v1\n"}}, "leaf 1");
  auto mid = tmp / "repos/mid";
  commit_files(mid, {{"mid.txt", "mid\n"}}, "mid 1");
  auto mid_c = add_submodule(mid, "third/leaf", "../leaf", leaf_c1);
  commit_files(leaf, {{"leaf.h", "leaf v2 (not recorded)\n"}}, "leaf 2");  // the tip moves on
  auto top = tmp / "repos/top";
  commit_files(top, {{"top.txt", "top\n"}}, "top 1");
  auto top_c = add_submodule(top, "deps/mid", url_of(mid), mid_c);
  git(top, {"tag", "-a", "v1", "-m", "v1"});

  Cache cache{tmp / "cache"};
  auto target = tmp / "cache/src/k";
  auto r = fetch_source({url_of(top), "v1", ""}, target, cache.mirror_for(), fast());
  REQUIRE(r);
  CHECK(r->commit == top_c);
  REQUIRE(r->submodules.size() == 2);
  CHECK(r->submodules[0].path == "deps/mid");
  CHECK(r->submodules[0].url == url_of(mid));
  CHECK(r->submodules[0].commit == mid_c);
  CHECK(r->submodules[1].path == "deps/mid/third/leaf");
  CHECK(r->submodules[1].url == url_of(leaf));
  CHECK(r->submodules[1].commit == leaf_c1);
  CHECK(test::read_file(target / "deps/mid/mid.txt") == "mid\n");
  CHECK(test::read_file(target / "deps/mid/third/leaf/leaf.h") == "leaf v1\n");
  CHECK(*checkout_commit(target / "deps/mid/third/leaf") == leaf_c1);
  CHECK(cache.asked == std::set<std::string>{url_of(top), url_of(mid), url_of(leaf)});
  CHECK(git(target, {"submodule", "status", "--recursive"}).find("-") != 0);  // initialised, not missing

  // Offline, everything comes from the three mirrors.
  auto offline = fast();
  offline.offline = true;
  auto again = fetch_source({url_of(top), "v1", ""}, tmp / "cache/src/k2", cache.mirror_for(), offline);
  REQUIRE(again);
  CHECK(again->submodules.size() == 2);

  // A submodule whose repository is gone: the error says which submodule and which URL.
  fs::remove_all(leaf);
  Cache fresh{tmp / "cache2"};
  auto broken = fetch_source({url_of(top), "v1", ""}, tmp / "cache2/src/k", fresh.mirror_for(), fast());
  REQUIRE_FALSE(broken);
  CHECK(broken.error().message.find("submodule deps/mid/third/leaf") != std::string::npos);
  CHECK(broken.error().message.find(url_of(leaf)) != std::string::npos);
  CHECK_FALSE(fs::exists(tmp / "cache2/src/k"));
  CHECK(names_in(tmp / "cache2/src").empty());
}

TEST_CASE("fetch_source: a damaged mirror is recreated", "[source]") {
  if (!have_git()) {
    WARN("##archbuild-skip## no git CLI");
    return;
  }
  TempDir tmp;
  auto up = tmp / "upstream";
  auto c1 = commit_files(up, {{"a.txt", "a"}}, "one");
  git(up, {"tag", "v1"});
  Cache cache{tmp / "cache"};
  auto slot = cache.mirror_for()(url_of(up));
  fs::create_directories(slot.dir);
  std::ofstream(slot.dir / "garbage") << "not a repository";
  std::vector<std::string> notes;
  auto r = fetch_source({url_of(up), "v1", ""}, tmp / "cache/src/k", cache.mirror_for(), fast(&notes));
  REQUIRE(r);
  CHECK(r->commit == c1);
  bool told = false;
  for (const auto& n : notes) told = told || n.find("damaged") != std::string::npos;
  CHECK(told);
}

TEST_CASE("fetch_source: the example project (minitorch + minidep submodule) via file://", "[source]") {
  if (!have_git()) {
    WARN("##archbuild-skip## no git CLI");
    return;
  }
  for (bool relative : {false, true}) {
    TempDir tmp;
    std::vector<std::string> args{std::string(ARCHBUILD_SOURCE_DIR) + "/tests/support/make-example-repos",
                                  (tmp / "repos").string()};
    if (relative) args.push_back("--relative-submodule-url");
    auto made = run_tool(args);
    INFO(made.out);
    REQUIRE(made.status == 0);
    std::map<std::string, std::string> kv;
    std::istringstream is(made.out);
    for (std::string l; std::getline(is, l);)
      if (auto eq = l.find('='); eq != std::string::npos) kv[l.substr(0, eq)] = l.substr(eq + 1);
    Cache cache{tmp / "cache"};
    auto target = tmp / "cache/src/key";
    auto r = fetch_source({kv["minitorch_url"], kv["tag"], kv["minitorch_commit"]}, target, cache.mirror_for(), fast());
    REQUIRE(r);
    CHECK(r->commit == kv["minitorch_commit"]);
    REQUIRE(r->submodules.size() == 1);
    CHECK(r->submodules[0].path == "third_party/minidep");
    CHECK(r->submodules[0].url == kv["minidep_url"]);
    CHECK(r->submodules[0].commit == kv["minidep_commit"]);
    CHECK(fs::exists(target / "setup.py"));
    CHECK(fs::exists(target / "csrc/kernels.cu"));
    CHECK(fs::exists(target / "third_party/minidep/include/minidep/minidep.h"));
    CHECK_FALSE(fs::exists(target / "recipe.toml"));
  }
}
