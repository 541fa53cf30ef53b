// source/patch.hpp: patches checked against a mirrored commit (nothing written to the mirror) and
// applied to a checkout before it is moved into place — a failing hunk named, a patch already
// contained said, a tree never half-patched — against file:// repositories made with the git CLI.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "run/runner.hpp"
#include "source/local.hpp"
#include "source/patch.hpp"
#include "source/source.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::source;
using archbuild::test::TempDir;
namespace fs = std::filesystem;
namespace t = archbuild::test;

namespace {

std::string git(const fs::path& dir, std::vector<std::string> args) {
  std::vector<std::string> a = {"-C", dir.string(), "-c", "user.name=t", "-c", "user.email=t@t.invalid"};
  a.insert(a.end(), args.begin(), args.end());
  t::RunOptions o;
  o.env = {{"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", dir.string()}};
  auto r = t::run("/usr/bin/git", a, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::string out = r.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// An upstream with kernel.cu and two tags: v1, and v2 where the fix is merged.
struct Upstream {
  fs::path repo;
  std::string v1, v2;
};

const char* kV1 = "int scale() {\n  return 2;\n}\n\nint offset() {\n  return 0;\n}\n";
const char* kV2 = "int scale() {\n  return 3;\n}\n\nint offset() {\n  return 0;\n}\n";

Upstream make_upstream(const fs::path& dir) {
  Upstream u{dir / "up", "", ""};
  fs::create_directories(u.repo);
  git(u.repo, {"init", "-q", "-b", "main"});
  std::ofstream(u.repo / "kernel.cu") << kV1;
  git(u.repo, {"add", "-A"});
  git(u.repo, {"commit", "-qm", "v1"});
  git(u.repo, {"tag", "v1"});
  u.v1 = git(u.repo, {"rev-parse", "HEAD"});
  std::ofstream(u.repo / "kernel.cu") << kV2;
  git(u.repo, {"commit", "-qam", "v2: the fix"});
  git(u.repo, {"tag", "v2"});
  u.v2 = git(u.repo, {"rev-parse", "HEAD"});
  return u;
}

// The fix, as `git diff` writes it (v1 → v2).
const char* kFix =
    "diff --git a/kernel.cu b/kernel.cu\n"
    "index 0000000..1111111 100644\n"
    "--- a/kernel.cu\n"
    "+++ b/kernel.cu\n"
    "@@ -1,3 +1,3 @@\n"
    " int scale() {\n"
    "-  return 2;\n"
    "+  return 3;\n"
    " }\n";

// A second patch on top of the fix (its context is the fixed line).
const char* kOnTop =
    "--- a/kernel.cu\n"
    "+++ b/kernel.cu\n"
    "@@ -1,4 +1,5 @@\n"
    " int scale() {\n"
    "   return 3;\n"
    " }\n"
    "+// patched twice\n"
    " \n";

// Context the tree does not have.
const char* kStale =
    "--- a/kernel.cu\n"
    "+++ b/kernel.cu\n"
    "@@ -5,3 +5,3 @@\n"
    " int offset() {\n"
    "-  return 7;\n"
    "+  return 8;\n"
    " }\n";

struct Mirror {
  fs::path root;
  MirrorFor mirror_for() {
    return [this](const std::string& url) {
      auto name = std::to_string(std::hash<std::string>{}(url));
      return MirrorSlot{root / (name + ".git"), root / (name + ".lock")};
    };
  }
};

SourceOptions quick(std::vector<std::string>* notes = nullptr) {
  SourceOptions o;
  o.retry = {1, std::chrono::milliseconds(1), 1.0};
  if (notes) o.note = [notes](const std::string& n) { notes->push_back(n); };
  return o;
}

std::size_t loose_objects(const fs::path& mirror) {
  std::size_t n = 0;
  for (auto it = fs::recursive_directory_iterator(mirror / "objects"); it != fs::recursive_directory_iterator(); ++it)
    if (it->is_regular_file() && it->path().parent_path().filename().string().size() == 2) ++n;
  return n;
}

}  // namespace

TEST_CASE("normalized_patch: git's names at any strip level, and the reverse that undoes a patch", "[source][patch]") {
  std::string plain = "--- src/kernel.cu\t2025-01-01\n+++ src/kernel.cu\t2025-01-02\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
  std::string n = detail::normalized_patch(plain, 0, false);
  CHECK(n.find("diff --git a/src/kernel.cu b/src/kernel.cu\n--- a/src/kernel.cu\n+++ b/src/kernel.cu\n") == 0);
  CHECK(detail::normalized_patch("--- x/y/k.cu\n+++ z/y/k.cu\n@@ -1 +1 @@\n-a\n+b\n", 2, false).find("--- a/k.cu\n+++ b/k.cu") !=
        std::string::npos);
  std::string r = detail::normalized_patch(kFix, 1, true);
  CHECK(r.find("index 1111111..0000000 100644") != std::string::npos);
  CHECK(r.find("+  return 2;\n-  return 3;\n") != std::string::npos);  // the order kept, the signs swapped
  // A removed line that looks like a header stays a body line (the hunk's counts say so).
  std::string tricky = "--- a/f\n+++ b/f\n@@ -1,2 +1,1 @@\n--- a/g\n +++ b/g\n";
  CHECK(detail::normalized_patch(tricky, 1, true).find("+-- a/g\n") != std::string::npos);
  // A new file's reverse deletes it.
  std::string added = "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+x\n";
  std::string back = detail::normalized_patch(added, 1, true);
  CHECK(back.find("deleted file mode 100644\n--- a/new.txt\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-x\n") != std::string::npos);
}

TEST_CASE("check_patches: against the mirrored commit, in order, nothing written to the mirror", "[source][patch]") {
  if (t::which("git").empty()) {
    WARN("##archbuild-skip## the git CLI (used to make test repositories) is not installed");
    return;
  }
  TempDir tmp;
  auto up = make_upstream(tmp / "u");
  Mirror m{tmp / "git"};
  std::string url = "file://" + up.repo.string();
  auto slot = m.mirror_for()(url);
  REQUIRE(update_mirror(url, "v2", slot, quick()));
  REQUIRE(update_mirror(url, "v1", slot, quick()));
  std::size_t before = loose_objects(slot.dir);

  auto at_v1 = check_patches(slot.dir, up.v1, {{"fix.patch", kFix, 1}, {"on-top.patch", kOnTop, 1}});
  REQUIRE(at_v1);
  REQUIRE(at_v1->size() == 2);
  CHECK((*at_v1)[0].fit == PatchOutcome::Fit::applies);
  CHECK((*at_v1)[1].fit == PatchOutcome::Fit::applies);  // onto the first one's result
  // Merged upstream: the fix is contained in v2, the next one still applies.
  auto at_v2 = check_patches(slot.dir, up.v2, {{"fix.patch", kFix, 1}, {"on-top.patch", kOnTop, 1}});
  REQUIRE(at_v2);
  CHECK((*at_v2)[0].fit == PatchOutcome::Fit::contained);
  CHECK((*at_v2)[1].fit == PatchOutcome::Fit::applies);
  // Context the tree lacks: the file and the hunk named.
  auto stale = check_patches(slot.dir, up.v1, {{"stale.patch", kStale, 1}});
  REQUIRE(stale);
  CHECK((*stale)[0].fit == PatchOutcome::Fit::fails);
  CHECK((*stale)[0].file == "kernel.cu");
  CHECK((*stale)[0].hunk.find("@@ -5,3 +5,3 @@") == 0);
  std::string msg = describe_failure({"stale.patch", kStale, 1}, (*stale)[0], url + " at " + up.v1.substr(0, 12));
  CHECK(msg.find("patch stale.patch does not apply to") == 0);
  CHECK(msg.find("kernel.cu, hunk @@ -5,3 +5,3 @@") != std::string::npos);
  // Not a patch at all.
  auto junk = check_patches(slot.dir, up.v1, {{"junk.patch", "hello\n", 1}});
  REQUIRE(junk);
  CHECK((*junk)[0].fit == PatchOutcome::Fit::fails);
  CHECK(loose_objects(slot.dir) == before);
}

TEST_CASE("fetch_source with patches: applied before the checkout is in place, all or nothing", "[source][patch]") {
  if (t::which("git").empty()) {
    WARN("##archbuild-skip## the git CLI (used to make test repositories) is not installed");
    return;
  }
  TempDir tmp;
  auto up = make_upstream(tmp / "u");
  Mirror m{tmp / "git"};
  std::string url = "file://" + up.repo.string();
  std::vector<std::string> notes;
  SourceSpec spec{url, "v1", "", {{"fix.patch", kFix, 1}, {"on-top.patch", kOnTop, 1}}};
  auto co = fetch_source(spec, tmp / "src", m.mirror_for(), quick(&notes));
  REQUIRE(co);
  REQUIRE(co->patches.size() == 2);
  CHECK(t::read_file(tmp / "src" / "kernel.cu").find("return 3;\n}\n// patched twice\n") != std::string::npos);
  CHECK(checkout_commit(tmp / "src").value() == up.v1);  // HEAD stays the commit; the work tree is patched
  CHECK(std::count_if(notes.begin(), notes.end(), [](const std::string& n) { return n.rfind("patch ", 0) == 0; }) == 2);

  // The second patch fails: nothing at the target, nothing beside it.
  SourceSpec bad{url, "v1", "", {{"fix.patch", kFix, 1}, {"stale.patch", kStale, 1}}};
  auto failed = fetch_source(bad, tmp / "src2", m.mirror_for(), quick());
  REQUIRE_FALSE(failed);
  CHECK(failed.error().exit == Exit::bad_input);
  CHECK(failed.error().message.find("patch stale.patch does not apply") != std::string::npos);
  CHECK(failed.error().message.find("hunk @@ -5,3 +5,3 @@") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp / "src2"));
  for (const auto& e : fs::directory_iterator(tmp.path())) CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);

  // At v2 the fix is contained: skipped, said, the tree is v2's.
  SourceSpec merged{url, "v2", "", {{"fix.patch", kFix, 1}}};
  auto co2 = fetch_source(merged, tmp / "src3", m.mirror_for(), quick());
  REQUIRE(co2);
  CHECK(co2->patches.at(0).fit == PatchOutcome::Fit::contained);
  CHECK(t::read_file(tmp / "src3" / "kernel.cu") == kV2);
}

TEST_CASE("check_patches: a `git format-patch` file (a GitHub PR's .patch), mail headers and trailer included", "[source][patch]") {
  if (t::which("git").empty()) {
    WARN("##archbuild-skip## the git CLI (used to make test repositories) is not installed");
    return;
  }
  TempDir tmp;
  auto up = make_upstream(tmp / "u");
  std::string mail = git(up.repo, {"format-patch", "-1", "v2", "--stdout"}) + "\n";
  REQUIRE(mail.rfind("From ", 0) == 0);
  Mirror m{tmp / "git"};
  std::string url = "file://" + up.repo.string();
  auto slot = m.mirror_for()(url);
  REQUIRE(update_mirror(url, "v2", slot, quick()));
  REQUIRE(update_mirror(url, "v1", slot, quick()));
  auto at_v1 = check_patches(slot.dir, up.v1, {{"pr.patch", mail, 1}});
  REQUIRE(at_v1);
  CHECK(at_v1->at(0).fit == PatchOutcome::Fit::applies);
  auto at_v2 = check_patches(slot.dir, up.v2, {{"pr.patch", mail, 1}});
  REQUIRE(at_v2);
  CHECK(at_v2->at(0).fit == PatchOutcome::Fit::contained);
}

namespace {

// A commit of `files` in `repo` (made if new); returns it.
std::string commit_files(const fs::path& repo, const std::map<std::string, std::string>& files, const std::string& msg) {
  if (!fs::exists(repo / ".git")) {
    fs::create_directories(repo);
    git(repo, {"init", "-q", "-b", "main"});
  }
  for (const auto& [rel, content] : files) {
    fs::create_directories((repo / rel).parent_path());
    std::ofstream(repo / rel) << content;
  }
  git(repo, {"add", "-A"});
  git(repo, {"commit", "-qm", msg});
  return git(repo, {"rev-parse", "HEAD"});
}

// Records `commit` of `url` at `path` (a gitlink and its .gitmodules section, as `git submodule
// add` would, without a clone); returns the new commit.
std::string record_submodule(const fs::path& repo, const std::string& path, const std::string& url, const std::string& commit,
                             bool first = true) {
  if (first)
    std::ofstream(repo / ".gitmodules", std::ios::app) << "[submodule \"" << path << "\"]\n\tpath = " << path
                                                        << "\n\turl = " << url << "\n";
  git(repo, {"add", ".gitmodules"});
  git(repo, {"update-index", "--add", "--cacheinfo", "160000," + commit + "," + path});
  git(repo, {"commit", "-qm", "record " + path});
  return git(repo, {"rev-parse", "HEAD"});
}

// top (kernel.cu) ─ deps/mid (src/x.c) ─ third/leaf (leaf.c). top's v1 records mid's m1, its v2
// mid's m2, where the submodule's fix is merged.
struct Superproject {
  fs::path top, mid, leaf;
  std::string url, v1, v2, m1, m2;
};

const char* kX1 = "int x() {\n  return 2;\n}\n";
const char* kX2 = "int x() {\n  return 3;\n}\n";
const char* kLeaf = "int leaf() {\n  return 1;\n}\n";

Superproject make_superproject(const fs::path& dir) {
  Superproject s{dir / "top", dir / "mid", dir / "leaf", "", "", "", "", ""};
  std::string leaf_c = commit_files(s.leaf, {{"leaf.c", kLeaf}}, "leaf");
  commit_files(s.mid, {{"src/x.c", kX1}}, "m1");
  s.m1 = record_submodule(s.mid, "third/leaf", "../leaf", leaf_c);  // relative: against mid's URL
  s.m2 = commit_files(s.mid, {{"src/x.c", kX2}}, "m2: the fix");
  commit_files(s.top, {{"kernel.cu", kV1}}, "top");
  s.v1 = record_submodule(s.top, "deps/mid", "file://" + s.mid.string(), s.m1);
  git(s.top, {"tag", "v1"});
  s.v2 = record_submodule(s.top, "deps/mid", "file://" + s.mid.string(), s.m2, false);
  git(s.top, {"tag", "v2"});
  s.url = "file://" + s.top.string();
  return s;
}

// Made in the superproject (`git diff --submodule=diff`): full paths into the submodule.
const char* kSubFix =
    "diff --git a/deps/mid/src/x.c b/deps/mid/src/x.c\n"
    "index 0000000..1111111 100644\n"
    "--- a/deps/mid/src/x.c\n"
    "+++ b/deps/mid/src/x.c\n"
    "@@ -1,3 +1,3 @@\n"
    " int x() {\n"
    "-  return 2;\n"
    "+  return 3;\n"
    " }\n";

const char* kSubStale =
    "--- a/deps/mid/src/x.c\n"
    "+++ b/deps/mid/src/x.c\n"
    "@@ -1,3 +1,3 @@\n"
    " int x() {\n"
    "-  return 9;\n"
    "+  return 10;\n"
    " }\n";

// A submodule of the submodule.
const char* kLeafFix =
    "--- a/deps/mid/third/leaf/leaf.c\n"
    "+++ b/deps/mid/third/leaf/leaf.c\n"
    "@@ -1,3 +1,3 @@\n"
    " int leaf() {\n"
    "-  return 1;\n"
    "+  return 5;\n"
    " }\n";

// A submodule moved to another commit: what a patch cannot do.
std::string gitlink_bump(const std::string& from, const std::string& to) {
  return "diff --git a/deps/mid b/deps/mid\nindex " + from.substr(0, 7) + ".." + to.substr(0, 7) +
         " 160000\n--- a/deps/mid\n+++ b/deps/mid\n@@ -1 +1 @@\n-Subproject commit " + from + "\n+Subproject commit " + to + "\n";
}

}  // namespace

TEST_CASE("check_patches: files inside submodules, each part on the submodule's commit in its own mirror",
          "[source][patch]") {
  if (t::which("git").empty()) {
    WARN("##archbuild-skip## the git CLI (used to make test repositories) is not installed");
    return;
  }
  TempDir tmp;
  auto s = make_superproject(tmp / "u");
  Mirror m{tmp / "git"};
  auto top = m.mirror_for()(s.url);
  REQUIRE(update_mirror(s.url, "v1", top, quick()));
  REQUIRE(update_mirror(s.url, "v2", top, quick()));
  SubmoduleMirror mirrors = [&](const std::string& url, const std::string&) -> std::optional<fs::path> {
    auto slot = m.mirror_for()(url);
    if (!fs::exists(slot.dir)) return std::nullopt;
    return slot.dir;
  };
  const Patch both{"both.patch", std::string(kFix) + kSubFix, 1};

  // The submodules are not mirrored yet: their parts are said unchecked, the top's part checked.
  auto early = check_patches(top.dir, s.v1, {both}, s.url, mirrors);
  REQUIRE(early);
  CHECK(early->at(0).fit == PatchOutcome::Fit::applies);
  REQUIRE(early->at(0).unchecked.size() == 1);
  CHECK(early->at(0).unchecked[0].path == "deps/mid");
  CHECK(early->at(0).unchecked[0].url == "file://" + s.mid.string());
  CHECK(early->at(0).unchecked[0].commit == s.m1);

  // A checkout mirrors them (each from its own mirror).
  REQUIRE(fetch_source({s.url, "v2", "", {}}, tmp / "plain", m.mirror_for(), quick()));
  REQUIRE(fetch_source({s.url, "v1", "", {}}, tmp / "plain1", m.mirror_for(), quick()));
  auto mid_mirror = m.mirror_for()("file://" + s.mid.string()).dir;
  std::size_t before = loose_objects(mid_mirror);

  auto at_v1 = check_patches(top.dir, s.v1, {{"sub.patch", kSubFix, 1}, both, {"leaf.patch", kLeafFix, 1}}, s.url, mirrors);
  REQUIRE(at_v1);
  CHECK(at_v1->at(0).fit == PatchOutcome::Fit::applies);
  CHECK(at_v1->at(0).unchecked.empty());
  // The second patch's submodule part lands on the first's result: x.c is fixed already, so the
  // patch as a whole fails (its top part would apply): one outcome, naming the file in full.
  CHECK(at_v1->at(1).fit == PatchOutcome::Fit::fails);
  CHECK(at_v1->at(1).file == "deps/mid/src/x.c");
  CHECK(at_v1->at(1).hunk.find("@@ -1,3 +1,3 @@") == 0);
  CHECK(at_v1->at(2).fit == PatchOutcome::Fit::applies);  // a submodule of a submodule

  // At v2 the submodule's commit has the fix: contained.
  auto at_v2 = check_patches(top.dir, s.v2, {{"sub.patch", kSubFix, 1}}, s.url, mirrors);
  REQUIRE(at_v2);
  CHECK(at_v2->at(0).fit == PatchOutcome::Fit::contained);
  // Both parts: the top and the submodule, one outcome.
  auto both_v1 = check_patches(top.dir, s.v1, {both}, s.url, mirrors);
  REQUIRE(both_v1);
  CHECK(both_v1->at(0).fit == PatchOutcome::Fit::applies);

  // Context the submodule lacks: the file named with its superproject path, and the hunk.
  auto stale = check_patches(top.dir, s.v1, {{"stale.patch", kSubStale, 1}}, s.url, mirrors);
  REQUIRE(stale);
  CHECK(stale->at(0).fit == PatchOutcome::Fit::fails);
  CHECK(stale->at(0).file == "deps/mid/src/x.c");
  CHECK(stale->at(0).hunk.find("@@ -1,3 +1,3 @@") == 0);
  std::string msg = describe_failure({"stale.patch", kSubStale, 1}, stale->at(0), s.url + " at " + s.v1.substr(0, 12));
  CHECK(msg.find("deps/mid/src/x.c, hunk @@ -1,3 +1,3 @@") != std::string::npos);

  // A submodule's commit changed by a patch: refused, one line saying why.
  auto bump = check_patches(top.dir, s.v1, {{"bump.patch", gitlink_bump(s.m1, s.m2), 1}}, s.url, mirrors);
  REQUIRE(bump);
  CHECK(bump->at(0).fit == PatchOutcome::Fit::fails);
  CHECK(bump->at(0).file == "deps/mid");
  CHECK(bump->at(0).reason.find("a patch cannot move a submodule") != std::string::npos);
  CHECK(loose_objects(mid_mirror) == before);  // nothing written to a submodule's mirror
}

TEST_CASE("fetch_source with patches into submodules: each part applied in its submodule's work tree",
          "[source][patch]") {
  if (t::which("git").empty()) {
    WARN("##archbuild-skip## the git CLI (used to make test repositories) is not installed");
    return;
  }
  TempDir tmp;
  auto s = make_superproject(tmp / "u");
  Mirror m{tmp / "git"};
  const Patch both{"both.patch", std::string(kFix) + kSubFix, 1};
  SourceSpec spec{s.url, "v1", "", {both, {"leaf.patch", kLeafFix, 1}}};
  auto co = fetch_source(spec, tmp / "src", m.mirror_for(), quick());
  INFO((co ? "" : co.error().message));
  REQUIRE(co);
  REQUIRE(co->patches.size() == 2);
  CHECK(co->patches[0].fit == PatchOutcome::Fit::applies);
  CHECK(t::read_file(tmp / "src/kernel.cu").find("return 3;") != std::string::npos);
  CHECK(t::read_file(tmp / "src/deps/mid/src/x.c") == kX2);
  CHECK(t::read_file(tmp / "src/deps/mid/third/leaf/leaf.c").find("return 5;") != std::string::npos);
  CHECK(co->submodules.size() == 2);

  // At v2 the submodule's part is contained.
  auto co2 = fetch_source({s.url, "v2", "", {{"sub.patch", kSubFix, 1}}}, tmp / "src2", m.mirror_for(), quick());
  REQUIRE(co2);
  CHECK(co2->patches.at(0).fit == PatchOutcome::Fit::contained);
  CHECK(t::read_file(tmp / "src2/deps/mid/src/x.c") == kX2);

  // A part that does not apply: nothing in place, the file named with its full path. The top's
  // part (which would apply) was not applied alone: the patch is one outcome.
  auto bad = fetch_source({s.url, "v1", "", {{"stale.patch", std::string(kFix) + kSubStale, 1}}}, tmp / "src3",
                          m.mirror_for(), quick());
  REQUIRE_FALSE(bad);
  CHECK(bad.error().exit == Exit::bad_input);
  CHECK(bad.error().message.find("deps/mid/src/x.c, hunk @@ -1,3 +1,3 @@") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp / "src3"));

  // A submodule's commit moved by a patch: refused.
  auto bump = fetch_source({s.url, "v1", "", {{"bump.patch", gitlink_bump(s.m1, s.m2), 1}}}, tmp / "src4",
                           m.mirror_for(), quick());
  REQUIRE_FALSE(bump);
  CHECK(bump.error().message.find("a patch cannot move a submodule") != std::string::npos);

  // Without submodules checked out, a part in one cannot apply: said, nothing in place.
  SourceOptions flat = quick();
  flat.submodules = false;
  auto none = fetch_source({s.url, "v1", "", {{"sub.patch", kSubFix, 1}}}, tmp / "src5", m.mirror_for(), flat);
  REQUIRE_FALSE(none);
  CHECK(none.error().message.find("deps/mid/src/x.c") != std::string::npos);
  CHECK(none.error().message.find("not checked out") != std::string::npos);
}

namespace {

// Every file under `dir`: its bytes and its whole stat (the user's tree, byte for byte).
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    struct stat st {};
    REQUIRE(::lstat(it->path().c_str(), &st) == 0);
    std::string rel = fs::relative(it->path(), dir).string();
    out[rel] = fmt::format("{} {} {} {}.{} {}.{}", st.st_ino, st.st_mode, st.st_size, st.st_mtim.tv_sec,
                           st.st_mtim.tv_nsec, st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
    if (it->is_regular_file()) out[rel] += "\n" + t::read_file(it->path());
  }
  return out;
}

const char* kAddsFile = "--- /dev/null\n+++ b/tools/new.sh\n@@ -0,0 +1 @@\n+echo new\n";

}  // namespace

TEST_CASE("patches on a plain folder (a local tree): checked in memory, applied to a copy, the tree untouched",
          "[source][patch]") {
  TempDir tmp;
  tmp.write("tree/kernel.cu", kV1);
  tmp.write("tree/other.txt", "unchanged\n");
  fs::path tree = tmp / "tree";
  auto before = snapshot(tree);
  const std::vector<Patch> patches = {{"fix.patch", kFix, 1}, {"on-top.patch", kOnTop, 1}, {"adds.patch", kAddsFile, 1}};

  auto checked = check_patches_in_folder(tree, patches);
  REQUIRE(checked);
  REQUIRE(checked->size() == 3);
  for (const auto& o : *checked) CHECK(o.fit == PatchOutcome::Fit::applies);
  CHECK(snapshot(tree) == before);

  fs::copy(tree, tmp / "copy", fs::copy_options::recursive);
  auto applied = apply_patches_to_folder(tmp / "copy", patches);
  REQUIRE(applied);
  REQUIRE(applied->size() == 3);
  CHECK(t::read_file(tmp / "copy/kernel.cu").find("return 3;\n}\n// patched twice\n") != std::string::npos);
  CHECK(t::read_file(tmp / "copy/tools/new.sh") == "echo new\n");
  CHECK(t::read_file(tmp / "copy/other.txt") == "unchanged\n");
  CHECK(snapshot(tree) == before);

  // Contained: the copy has the fix already; nothing is written.
  auto copied = snapshot(tmp / "copy");
  auto again = apply_patches_to_folder(tmp / "copy", {{"fix.patch", kFix, 1}});
  REQUIRE(again);
  CHECK(again->at(0).fit == PatchOutcome::Fit::contained);
  CHECK(snapshot(tmp / "copy") == copied);
  auto contained = check_patches_in_folder(tmp / "copy", {{"fix.patch", kFix, 1}});
  REQUIRE(contained);
  CHECK(contained->at(0).fit == PatchOutcome::Fit::contained);

  // The second fails: its file and hunk named, and nothing written (not even the first's change).
  fs::copy(tree, tmp / "copy2", fs::copy_options::recursive);
  auto fresh = snapshot(tmp / "copy2");
  auto failed = apply_patches_to_folder(tmp / "copy2", {{"fix.patch", kFix, 1}, {"stale.patch", kStale, 1}});
  REQUIRE(failed);
  REQUIRE(failed->size() == 2);
  CHECK(failed->at(1).fit == PatchOutcome::Fit::fails);
  CHECK(failed->at(1).file == "kernel.cu");
  CHECK(failed->at(1).hunk.find("@@ -5,3 +5,3 @@") == 0);
  CHECK(snapshot(tmp / "copy2") == fresh);
  auto stale = check_patches_in_folder(tree, {{"stale.patch", kStale, 1}});
  REQUIRE(stale);
  CHECK(stale->at(0).fit == PatchOutcome::Fit::fails);
  CHECK(stale->at(0).hunk.find("@@ -5,3 +5,3 @@") == 0);
  // A link leaving the folder stands for its target's file (the copy holds that file); the
  // target is not written by a check.
  tmp.write("outside/shared.cu", kV1);
  fs::create_symlink(tmp / "outside/shared.cu", tree / "shared.cu");
  auto outside_before = snapshot(tmp / "outside");
  std::string linked = std::string(kFix);
  for (auto at = linked.find("kernel.cu"); at != std::string::npos; at = linked.find("kernel.cu", at)) linked.replace(at, 9, "shared.cu");
  auto through = check_patches_in_folder(tree, {{"linked.patch", linked, 1}});
  REQUIRE(through);
  CHECK(through->at(0).fit == PatchOutcome::Fit::applies);
  CHECK(snapshot(tmp / "outside") == outside_before);
  fs::remove(tree / "shared.cu");
  // A file the folder lacks, and .git never read.
  auto missing = check_patches_in_folder(tree, {{"missing.patch", kSubFix, 1}});
  REQUIRE(missing);
  CHECK(missing->at(0).fit == PatchOutcome::Fit::fails);
  CHECK(missing->at(0).file == "deps/mid/src/x.c");
  CHECK(snapshot(tree) == before);
}

TEST_CASE("patches on a local tree's copy: the next copy from it writes the tree's file back", "[source][patch]") {
  TempDir tmp;
  tmp.write("tree/kernel.cu", kV1);
  tmp.write("tree/other.txt", "unchanged\n");
  fs::path tree = tmp / "tree";
  auto scanned = scan_local_tree(tree);
  REQUIRE(scanned);
  CopyReuse first;
  REQUIRE(copy_local_tree(*scanned, tmp / "slot/one", {}, &first));
  // A second generation, later: its files keep the first's stat, so its records are trusted.
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  CopyReuse second;
  second.previous = tmp / "slot/one";
  second.cache.previous = first.cache.next;
  REQUIRE(copy_local_tree(*scanned, tmp / "slot/two", {}, &second));
  CHECK(second.kept == 2);
  // Patched after its cache was recorded (as the fetch stage does), same size: a new file.
  auto applied = apply_patches_to_folder(tmp / "slot/two", {{"fix.patch", kFix, 1}});
  REQUIRE(applied);
  REQUIRE(applied->at(0).fit == PatchOutcome::Fit::applies);
  REQUIRE(t::read_file(tmp / "slot/two/kernel.cu") == kV2);  // same size as kV1
  // The next copy (a rerun after a kill, or another key) starts from the tree's content.
  CopyReuse third;
  third.previous = tmp / "slot/two";
  third.cache.previous = second.cache.next;
  REQUIRE(copy_local_tree(*scanned, tmp / "slot/three", {}, &third));
  CHECK(third.cache.previous_valid);
  CHECK(third.kept == 1);
  CHECK(third.written == 1);
  CHECK(t::read_file(tmp / "slot/three/kernel.cu") == kV1);
  // Patched again from the tree's content: once.
  auto again = apply_patches_to_folder(tmp / "slot/three", {{"fix.patch", kFix, 1}});
  REQUIRE(again);
  CHECK(again->at(0).fit == PatchOutcome::Fit::applies);
  CHECK(t::read_file(tmp / "slot/three/kernel.cu") == kV2);
}

TEST_CASE("check_patches: a submodule part the checkout will not have (update = none, submodules off) fails as "
          "fetch would, mirrored or not", "[source][patch]") {
  if (t::which("git").empty()) {
    WARN("##archbuild-skip## the git CLI (used to make test repositories) is not installed");
    return;
  }
  TempDir tmp;
  auto s = make_superproject(tmp / "u");
  // v3: deps/mid marked `update = none` (the checkout skips it).
  std::ofstream(s.top / ".gitmodules", std::ios::app) << "\tupdate = none\n";
  git(s.top, {"add", ".gitmodules"});
  git(s.top, {"commit", "-qm", "mid: update = none"});
  git(s.top, {"tag", "v3"});
  std::string v3 = git(s.top, {"rev-parse", "HEAD"});
  Mirror m{tmp / "git"};
  auto top = m.mirror_for()(s.url);
  REQUIRE(update_mirror(s.url, "v3", top, quick()));
  REQUIRE(update_mirror(s.url, "v1", top, quick()));
  REQUIRE(update_mirror("file://" + s.mid.string(), s.m1, m.mirror_for()("file://" + s.mid.string()), quick()));
  SubmoduleMirror mirrors = [&](const std::string& url, const std::string&) -> std::optional<fs::path> {
    return m.mirror_for()(url).dir;  // mirrored
  };
  auto none = check_patches(top.dir, v3, {{"sub.patch", kSubFix, 1}}, s.url, mirrors);
  REQUIRE(none);
  CHECK(none->at(0).fit == PatchOutcome::Fit::fails);
  CHECK(none->at(0).file == "deps/mid/src/x.c");
  CHECK(none->at(0).reason == "submodule deps/mid: it is not checked out (submodules off, or update = none)");
  CHECK(none->at(0).unchecked.empty());
  // The fetch stage says the same.
  auto fetched = fetch_source({s.url, "v3", "", {{"sub.patch", kSubFix, 1}}}, tmp / "co", m.mirror_for(), quick());
  REQUIRE_FALSE(fetched);
  CHECK(fetched.error().message.find("it is not checked out (submodules off, or update = none)") != std::string::npos);
  // Submodules off: the same at v1, where the submodule is an ordinary one.
  auto off = check_patches(top.dir, s.v1, {{"sub.patch", kSubFix, 1}}, s.url, mirrors, false);
  REQUIRE(off);
  CHECK(off->at(0).fit == PatchOutcome::Fit::fails);
  CHECK(off->at(0).reason.find("not checked out") != std::string::npos);
  auto on = check_patches(top.dir, s.v1, {{"sub.patch", kSubFix, 1}}, s.url, mirrors, true);
  REQUIRE(on);
  CHECK(on->at(0).fit == PatchOutcome::Fit::applies);
  // A patch on the top's files only is unaffected.
  auto top_only = check_patches(top.dir, v3, {{"fix.patch", kFix, 1}}, s.url, mirrors);
  REQUIRE(top_only);
  CHECK(top_only->at(0).fit == PatchOutcome::Fit::applies);
}

TEST_CASE("check_patches_in_tree: a file the tree's ignore rules leave out of the copy is not there", "[source][patch]") {
  if (t::which("git").empty()) {
    WARN("##archbuild-skip## the git CLI (used to make test repositories) is not installed");
    return;
  }
  TempDir tmp;
  fs::path tree = tmp / "tree";
  tmp.write("tree/kernel.cu", kV1);
  tmp.write("tree/.gitignore", "gen/\n");
  tmp.write("tree/gen/kernel.cu", kV1);  // generated, ignored: the copy does not hold it
  git(tree, {"init", "-q", "-b", "main"});
  auto scanned = scan_local_tree(tree);
  REQUIRE(scanned);
  std::string in_gen = kFix;
  for (auto at = in_gen.find("kernel.cu"); at != std::string::npos; at = in_gen.find("kernel.cu", at + 13))
    in_gen.replace(at, 9, "gen/kernel.cu");
  // On the folder, it is read; on the scan (the copy's files), it is not there, and said why.
  auto folder = check_patches_in_folder(tree, {{"gen.patch", in_gen, 1}});
  REQUIRE(folder);
  CHECK(folder->at(0).fit == PatchOutcome::Fit::applies);
  auto checked = check_patches_in_tree(*scanned, {{"fix.patch", kFix, 1}, {"gen.patch", in_gen, 1}});
  REQUIRE(checked);
  CHECK(checked->at(0).fit == PatchOutcome::Fit::applies);
  REQUIRE(checked->at(1).fit == PatchOutcome::Fit::fails);
  CHECK(checked->at(1).file == "gen/kernel.cu");
  CHECK(checked->at(1).reason.find("ignore rules") != std::string::npos);
  std::string msg = describe_failure({"gen.patch", in_gen, 1}, checked->at(1), "the local tree " + tree.string());
  CHECK(msg.find('\n') == std::string::npos);
  CHECK(msg.find("gen/kernel.cu") != std::string::npos);
  // A patch creating a file where an ignored one lies applies (the copy has none there).
  auto creates = check_patches_in_tree(*scanned, {{"new.patch", "--- /dev/null\n+++ b/gen/new.cu\n@@ -0,0 +1 @@\n+x\n", 1}});
  REQUIRE(creates);
  CHECK(creates->at(0).fit == PatchOutcome::Fit::applies);
  // A file created where the tree has a folder, or under a file: as the copy would refuse it.
  auto folder_there = check_patches_in_tree(*scanned, {{"dir.patch", "--- /dev/null\n+++ b/gen\n@@ -0,0 +1 @@\n+x\n", 1},
                                                      {"under.patch", "--- /dev/null\n+++ b/kernel.cu/x\n@@ -0,0 +1 @@\n+x\n", 1}});
  REQUIRE(folder_there);
  CHECK(folder_there->at(0).fit == PatchOutcome::Fit::applies);  // gen/ holds only ignored files: the copy has no folder
  CHECK(folder_there->at(1).fit == PatchOutcome::Fit::fails);
  CHECK(folder_there->at(1).reason == "kernel.cu is a file, not a folder");

  // A nested repository (a submodule checked out in the tree): its files are the tree's, patched
  // by their path from the top, in the copy as plain files.
  tmp.write("tree/deps/mid/src/x.c", kX1);
  git(tree / "deps/mid", {"init", "-q"});
  git(tree / "deps/mid", {"add", "-A"});
  git(tree / "deps/mid", {"commit", "-qm", "mid"});
  git(tree, {"add", "kernel.cu", ".gitignore", "deps/mid"});
  git(tree, {"commit", "-qm", "top"});
  auto nested = scan_local_tree(tree);
  REQUIRE(nested);
  auto sub = check_patches_in_tree(*nested, {{"sub.patch", kSubFix, 1}});
  REQUIRE(sub);
  CHECK(sub->at(0).fit == PatchOutcome::Fit::applies);
  REQUIRE(copy_local_tree(*nested, tmp / "copy"));
  auto applied = apply_patches_to_folder(tmp / "copy", {{"sub.patch", kSubFix, 1}});
  REQUIRE(applied);
  CHECK(applied->at(0).fit == PatchOutcome::Fit::applies);
  CHECK(t::read_file(tmp / "copy/deps/mid/src/x.c") == kX2);
  CHECK(t::read_file(tree / "deps/mid/src/x.c") == kX1);
}

namespace {
// A patch of one new file `name` holding "x\n".
std::string creates(const std::string& name) { return "--- /dev/null\n+++ b/" + name + "\n@@ -0,0 +1 @@\n+x\n"; }
// kFix on another file name.
std::string fix_of(const std::string& name) {
  std::string p = kFix;
  for (auto at = p.find("kernel.cu"); at != std::string::npos; at = p.find("kernel.cu", at + name.size())) p.replace(at, 9, name);
  return p;
}
}  // namespace

TEST_CASE("apply_patches_to_folder: hostile patches apply cleanly or fail in one line, never writing outside the "
          "copy or half of it", "[source][patch]") {
  TempDir tmp;
  fs::path copy = tmp / "copy";
  tmp.write("copy/kernel.cu", kV1);
  tmp.write("copy/sub/inner.c", "inner\n");
  tmp.write("outside/kernel.cu", kV1);
  auto outside = snapshot(tmp / "outside");
  auto fresh = [&] { return snapshot(copy); };
  auto one_line_failure = [](const Result<std::vector<PatchOutcome>>& r, const std::string& name, const std::string& text) {
    REQUIRE(r);
    REQUIRE_FALSE(r->empty());
    REQUIRE(r->back().fit == PatchOutcome::Fit::fails);
    std::string msg = describe_failure({name, text, 1}, r->back(), "the copy");
    INFO(msg);
    CHECK(msg.find('\n') == std::string::npos);
    return msg;
  };

  SECTION("names leaving the copy (.., absolute at strip 0, through a link)") {
    auto before = fresh();
    for (const std::string& name : {"../outside/kernel.cu", "sub/../../outside/kernel.cu"}) {
      auto r = apply_patches_to_folder(copy, {{"up.patch", fix_of(name), 1}});
      one_line_failure(r, "up.patch", fix_of(name));
    }
    std::string abs = "--- " + (tmp / "outside/kernel.cu").string() + "\n+++ " + (tmp / "outside/kernel.cu").string() +
                      "\n@@ -1,3 +1,3 @@\n int scale() {\n-  return 2;\n+  return 3;\n }\n";
    auto r = apply_patches_to_folder(copy, {{"abs.patch", abs, 0}});
    one_line_failure(r, "abs.patch", abs);
    for (const std::string& name : {".git/hooks/post-checkout", "sub/.git/config", "./x.c", "/etc/x.c", "a//b.c"}) {
      INFO(name);
      auto made = apply_patches_to_folder(copy, {{"odd.patch", creates(name), 1}});
      CHECK(one_line_failure(made, "odd.patch", creates(name)).find("not a path inside the tree") != std::string::npos);
    }
    // A link made by a patch: inside the tree it is made; one leaving it is refused.
    auto link_to = [](const std::string& name, const std::string& target) {
      return "diff --git a/" + name + " b/" + name + "\nnew file mode 120000\n--- /dev/null\n+++ b/" + name +
             "\n@@ -0,0 +1 @@\n+" + target + "\n\\ No newline at end of file\n";
    };
    for (const std::string& target : {"../../outside", "/etc", "../sub/../../outside"}) {
      INFO(target);
      auto made = apply_patches_to_folder(copy, {{"link.patch", link_to("sub/out", target), 1}});
      CHECK(one_line_failure(made, "link.patch", "").find("a link leaving the tree") != std::string::npos);
    }
    CHECK(fresh() == before);
    auto inner = apply_patches_to_folder(copy, {{"link.patch", link_to("sub/k.cu", "../kernel.cu"), 1}});
    REQUIRE(inner);
    CHECK(inner->back().fit == PatchOutcome::Fit::applies);
    CHECK(fs::read_symlink(copy / "sub/k.cu") == "../kernel.cu");
    fs::remove(copy / "sub/k.cu");
    before = fresh();  // sub/'s own times moved
    CHECK(snapshot(tmp / "outside") == outside);
    // A link in the copy to a folder outside it: a patch through it is refused, the outside untouched.
    fs::create_directory_symlink(tmp / "outside", copy / "out");
    auto through = apply_patches_to_folder(copy, {{"fix.patch", kFix, 1}, {"out.patch", fix_of("out/kernel.cu"), 1}});
    auto msg = one_line_failure(through, "out.patch", fix_of("out/kernel.cu"));
    CHECK(msg.find("out/kernel.cu") != std::string::npos);
    CHECK(snapshot(tmp / "outside") == outside);
    CHECK(t::read_file(copy / "kernel.cu") == kV1);  // nothing written, not even the first patch
    auto created = apply_patches_to_folder(copy, {{"new.patch", creates("out/new.c"), 1}});
    one_line_failure(created, "new.patch", creates("out/new.c"));
    CHECK_FALSE(fs::exists(tmp / "outside/new.c"));
  }

  SECTION("a file created where the copy has a folder, or under a file") {
    auto before = fresh();
    auto r = apply_patches_to_folder(copy, {{"fix.patch", kFix, 1}, {"dir.patch", creates("sub"), 1}});
    one_line_failure(r, "dir.patch", creates("sub"));
    CHECK(fresh() == before);
    auto under = apply_patches_to_folder(copy, {{"fix.patch", kFix, 1}, {"under.patch", creates("kernel.cu/x"), 1}});
    one_line_failure(under, "under.patch", creates("kernel.cu/x"));
    CHECK(fresh() == before);
  }

  SECTION("deleting, renaming, a new executable bit") {
    const std::string del = "diff --git a/sub/inner.c b/sub/inner.c\ndeleted file mode 100644\n--- a/sub/inner.c\n+++ /dev/null\n"
                            "@@ -1 +0,0 @@\n-inner\n";
    const std::string ren = "diff --git a/kernel.cu b/renamed.cu\nsimilarity index 100%\nrename from kernel.cu\nrename to renamed.cu\n";
    const std::string mode = "diff --git a/tool.sh b/tool.sh\nold mode 100644\nnew mode 100755\n";
    tmp.write("copy/tool.sh", "echo\n");
    auto r = apply_patches_to_folder(copy, {{"del.patch", del, 1}, {"ren.patch", ren, 1}, {"mode.patch", mode, 1}});
    REQUIRE(r);
    REQUIRE(r->size() == 3);
    for (const auto& o : *r) CHECK(o.fit == PatchOutcome::Fit::applies);
    CHECK_FALSE(fs::exists(copy / "sub/inner.c"));
    CHECK_FALSE(fs::exists(copy / "kernel.cu"));
    CHECK(t::read_file(copy / "renamed.cu") == kV1);
    CHECK((fs::status(copy / "tool.sh").permissions() & fs::perms::owner_exec) != fs::perms::none);
  }

  SECTION("a write that fails leaves the copy as it was (no file half-patched, nothing left beside)") {
    tmp.write("copy/z/b.cu", kV1);
    tmp.write("copy/z/b.cu.archbuild-patch/in-the-way", "x\n");  // where b.cu's new content would go
    auto before = fresh();
    auto r = apply_patches_to_folder(copy, {{"two.patch", kFix + fix_of("z/b.cu"), 1}});
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find('\n') == std::string::npos);
    CHECK(fresh() == before);
  }

  SECTION("CRLF lines, an empty patch, a binary patch, a link's file") {
    auto before = fresh();
    std::string crlf;
    for (char c : std::string(kFix)) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    auto r = apply_patches_to_folder(copy, {{"crlf.patch", crlf, 1}});
    REQUIRE(r);
    // On a file of LF lines, as `git apply`: a failure, saying the patch's lines end in CRLF.
    CHECK(one_line_failure(r, "crlf.patch", crlf).find("CRLF") != std::string::npos);
    auto empty = apply_patches_to_folder(copy, {{"empty.patch", "", 1}});
    one_line_failure(empty, "empty.patch", "");
    const std::string garbage = "diff --git a/blob.bin b/blob.bin\nnew file mode 100644\nindex 0000000..5b6ef14\n"
                                "GIT binary patch\nliteral 4\nLcmZo*U|;|M022WL\n\nliteral 0\nHcmV?d00001\n\n";
    one_line_failure(apply_patches_to_folder(copy, {{"garbage.patch", garbage, 1}}), "garbage.patch", garbage);
    CHECK(fresh() == before);
    if (!t::which("git").empty()) {  // a real binary patch (`git diff --binary`) applies, byte for byte
      const std::string v1("\x00\x01zero\xff", 7), v2("\x00\x02two\xfe\x00", 7);
      tmp.write("repo/blob.bin", v1);
      git(tmp / "repo", {"init", "-q"});
      git(tmp / "repo", {"add", "-A"});
      git(tmp / "repo", {"commit", "-qm", "v1"});
      tmp.write("repo/blob.bin", v2);
      std::string bin = git(tmp / "repo", {"diff", "--binary"}) + "\n\n";  // as git writes it (the helper trims)
      tmp.write("copy/blob.bin", v1);
      auto b = apply_patches_to_folder(copy, {{"bin.patch", bin, 1}});
      REQUIRE(b);
      CHECK(b->back().fit == PatchOutcome::Fit::applies);
      CHECK(t::read_file(copy / "blob.bin") == v2);
      auto again = apply_patches_to_folder(copy, {{"bin.patch", bin, 1}});  // already in: contained
      REQUIRE(again);
      INFO(again->back().reason);
      CHECK(again->back().fit == PatchOutcome::Fit::contained);
      CHECK(t::read_file(copy / "blob.bin") == v2);
      fs::remove(copy / "blob.bin");
    }
    fs::create_directory_symlink("sub", copy / "via");  // a folder's link inside the copy
    auto via = apply_patches_to_folder(copy, {{"via.patch", "--- a/via/inner.c\n+++ b/via/inner.c\n@@ -1 +1 @@\n-inner\n+outer\n", 1}});
    CHECK(one_line_failure(via, "via.patch", "").find("via, a link in the tree") != std::string::npos);
    CHECK(t::read_file(copy / "sub/inner.c") == "inner\n");
    auto scanned = scan_local_tree(copy);
    REQUIRE(scanned);
    auto via_scan = check_patches_in_tree(*scanned, {{"via.patch", "--- a/via/inner.c\n+++ b/via/inner.c\n@@ -1 +1 @@\n-inner\n+outer\n", 1}});
    REQUIRE(via_scan);
    CHECK(via_scan->at(0).reason.find("via, a link in the tree") != std::string::npos);
    fs::remove(copy / "via");
    fs::create_symlink("kernel.cu", copy / "alias.cu");
    auto linked = apply_patches_to_folder(copy, {{"alias.patch", fix_of("alias.cu"), 1}});
    one_line_failure(linked, "alias.patch", fix_of("alias.cu"));
    CHECK(t::read_file(copy / "kernel.cu") == kV1);
  }
}
