// source/patch.hpp: patches checked against a mirrored commit (nothing written to the mirror) and
// applied to a checkout before it is moved into place — a failing hunk named, a patch already
// contained said, a tree never half-patched — against file:// repositories made with the git CLI.
#include <catch2/catch.hpp>

#include <fstream>

#include "run/runner.hpp"
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
