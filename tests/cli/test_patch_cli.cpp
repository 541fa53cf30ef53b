// Patches end to end on the example project (a git repository with tag v0.1.0,
// tests/support/make-example-repos): a patch that changes a kernel is applied and keyed, one whose
// context does not match stops before any venv (plan --check and wheel alike), one already in the
// tree is said, a recipe's patch whose sha256 differs is refused, and --patch takes only a file.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/sha256.hpp"
#include "support/process.hpp"
#include "support/examples.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kSource = ARCHBUILD_SOURCE_DIR;
const std::string kRecipe = (kSource / "examples/minitorch/recipe.toml").string();

std::string cannot_plan() {
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) return u;
  if (!fs::exists("/usr/bin/python3")) return "no /usr/bin/python3";
  if (t::which("cmake").empty() || t::which("ninja").empty() || t::which("git").empty()) return "cmake, ninja or git not on PATH";
  return "";
}

// The kernel's addition made a different one: the wheel's code is not the tag's.
const char* kKernelFix =
    "diff --git a/csrc/kernels.cu b/csrc/kernels.cu\n"
    "--- a/csrc/kernels.cu\n"
    "+++ b/csrc/kernels.cu\n"
    "@@ -12,5 +12,5 @@ constexpr int kThreads = 256;\n"
    " \n"
    " __global__ void vector_add_kernel(const float* a, const float* b, float* c, int n) {\n"
    "-  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) c[i] = a[i] + b[i];\n"
    "+  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) c[i] = a[i] + b[i] + 1.f;\n"
    " }\n"
    " \n";

// Context the tag does not have.
const char* kStale =
    "--- a/csrc/kernels.cu\n"
    "+++ b/csrc/kernels.cu\n"
    "@@ -3,3 +3,3 @@\n"
    " #include <cuda_runtime.h>\n"
    "-#include <minidep/old.h>\n"
    "+#include <minidep/new.h>\n"
    " \n";

// A fix the tag already has: version.txt is 0.1.0.
const char* kMerged =
    "--- a/version.txt\n"
    "+++ b/version.txt\n"
    "@@ -1 +1 @@\n"
    "-0.0.9\n"
    "+0.1.0\n";

struct Repos {
  t::TempDir dir;
  std::string url, cache;
  Repos() {
    auto made = t::run("/bin/bash", {(kSource / "tests/support/make-example-repos").string(), (dir / "repos").string()});
    REQUIRE(made.status == 0);
    url = "file://" + (dir / "repos" / "minitorch").string();
    cache = (dir / "cache").string();
  }
  std::vector<std::string> args(const std::string& command, std::vector<std::string> extra) const {
    std::vector<std::string> a = {"--cache-dir", cache, command, "--sm", "90", "--recipe", kRecipe, "--source-url", url,
                                  "--python", "/usr/bin/python3"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  fs::path patch(const std::string& name, const std::string& text) const { return dir.write(name, text); }
};

bool has_venv(const std::string& cache) {
  std::error_code ec;
  return fs::exists(fs::path(cache) / "venvs", ec) && !fs::is_empty(fs::path(cache) / "venvs", ec);
}

}  // namespace

TEST_CASE("patch: context that does not match stops before any venv, exit 2, plan --check and wheel alike", "[cli][patch]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Repos r;
  std::string stale = r.patch("stale.patch", kStale).string();
  auto wheel = t::archbuild(r.args("wheel", {"--patch", stale, "--out", (r.dir / "out").string()}));
  INFO(wheel.out << wheel.err);
  CHECK(wheel.status == 2);
  CHECK(wheel.err.find("patch stale.patch does not apply to " + r.url) != std::string::npos);
  CHECK(wheel.err.find("csrc/kernels.cu, hunk @@ -3,3 +3,3 @@") != std::string::npos);
  CHECK_FALSE(has_venv(r.cache));
  CHECK_FALSE(fs::exists(r.dir / "out"));
  // The tag is mirrored now: plan --check says the same, with the same status.
  auto check = t::archbuild(r.args("plan", {"--patch", stale, "--check"}));
  INFO(check.out << check.err);
  CHECK(check.status == 2);
  CHECK(check.err.find("csrc/kernels.cu, hunk @@ -3,3 +3,3 @@") != std::string::npos);
  CHECK_FALSE(has_venv(r.cache));
  auto doc = t::archbuild(r.args("plan", {"--patch", stale, "--json"}));
  json p = json::parse(doc.out);
  CHECK(p["patches"][0]["state"] == "fails");
  CHECK(p["stops"][0]["rule"] == "patch");
}

TEST_CASE("patch: one already in the tree is said, not applied, and a recipe's patch whose sha256 differs is refused", "[cli][patch]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Repos r;
  std::string merged = r.patch("merged.patch", kMerged).string();
  // Mirror the tag first (plan reads only what the cache holds).
  auto first = t::archbuild(r.args("plan", {"--ref", "v0.1.0", "--json"}));
  INFO(first.err);
  REQUIRE(first.status == 0);
  auto plan = t::archbuild(r.args("plan", {"--patch", merged, "--json"}));
  INFO(plan.out << plan.err);
  REQUIRE(plan.status == 0);
  json p = json::parse(plan.out);
  CHECK(p["patches"][0]["state"] == "contained");
  CHECK(p["patches"][0]["sha256"] == archbuild::sha256_hex(kMerged));
  auto text = t::archbuild(r.args("plan", {"--patch", merged}));
  CHECK(text.err.find("patch merged.patch (--patch) is already contained in " + r.url) != std::string::npos);
  CHECK(text.out.find("1. merged.patch sha256 " + archbuild::sha256_hex(kMerged)) != std::string::npos);

  // A recipe whose [[patch]] is not the file it names: refused when loaded, exit 2, its line.
  r.patch("fix.patch", kKernelFix);
  auto recipe = r.dir.write("patched.toml", "extends = \"" + kRecipe + "\"\n\n[[patch]]\nfile = \"fix.patch\"\nsha256 = \"" +
                                                archbuild::sha256_hex("another file") + "\"\nfrom = \"upstream#1\"\n");
  auto bad = t::archbuild({"--cache-dir", r.cache, "plan", "--sm", "90", "--recipe", recipe.string(), "--source-url", r.url,
                           "--python", "/usr/bin/python3"});
  INFO(bad.err);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("patched.toml:5:") != std::string::npos);
  CHECK(bad.err.find("the file's sha256 is " + archbuild::sha256_hex(kKernelFix)) != std::string::npos);
}

TEST_CASE("patch option: a FIFO, a directory or a missing path is one line, exit 2", "[cli][patch]") {
  t::TempDir dir;
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  for (const auto& [path, words] : std::vector<std::pair<std::string, std::string>>{
           {(dir / "fifo").string(), "FIFO"}, {dir.path().string(), "directory"}, {(dir / "none.patch").string(), "no such file"}}) {
    auto r = t::archbuild({"--cache-dir", (dir / "cache").string(), "plan", "--sm", "90", "--recipe", kRecipe, "--patch", path});
    INFO(r.out << r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find(words) != std::string::npos);
    // One error line (CLI11 adds its "Run with --help" hint under it, as for every option).
    CHECK(r.err.find("error: --patch: patch \"") != std::string::npos);
    CHECK(r.err.find("error:", r.err.find("error:") + 1) == std::string::npos);
  }
}

TEST_CASE("patch: a patch that changes a kernel is applied, keyed, listed in the manifest and by report",
          "[cli][patch][wheel][nvcc]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Repos r;
  std::string fix = r.patch("fix.patch", kKernelFix).string();
  auto plain = t::archbuild(r.args("plan", {"--json"}));
  REQUIRE(plain.status == 0);
  t::RunOptions slow;
  slow.timeout = std::chrono::seconds(900);
  auto w = t::archbuild(r.args("wheel", {"--patch", fix, "--out", (r.dir / "out").string(), "--json"}), slow);
  INFO(w.out << w.err);
  REQUIRE(w.status == 0);
  json doc = json::parse(w.out);
  CHECK(doc["key"] != json::parse(plain.out)["key"]);
  json manifest = json::parse(t::read_file(doc["manifest"].get<std::string>()))["manifest"];
  REQUIRE(manifest["patches"].size() == 1);
  CHECK(manifest["patches"][0]["sha256"] == archbuild::sha256_hex(kKernelFix));
  CHECK(manifest["patches"][0]["state"] == "applied");
  // The tree the wheel was built from holds the change.
  fs::path tree = fs::path(r.cache) / "src" / doc["key"].get<std::string>() / "csrc" / "kernels.cu";
  CHECK(t::read_file(tree).find("a[i] + b[i] + 1.f") != std::string::npos);
  json beside = json::parse(t::read_file((r.dir / "out" / (fs::path(doc["wheel"].get<std::string>()).filename().string() + ".manifest.json")).string()));
  CHECK(beside["patches"] == manifest["patches"]);
  auto report = t::archbuild({"--cache-dir", r.cache, "report", doc["key"].get<std::string>()});
  CHECK(report.out.find("patch fix.patch sha256 " + archbuild::sha256_hex(kKernelFix) + " (applied") != std::string::npos);
  // A rerun is the finished key: nothing applied again.
  auto again = t::archbuild(r.args("wheel", {"--patch", fix, "--out", (r.dir / "out").string(), "--json"}), slow);
  REQUIRE(again.status == 0);
  CHECK(json::parse(again.out)["key"] == doc["key"]);
}

TEST_CASE("patch: kill -9 between two patches, then a rerun checks out afresh and patches once", "[cli][patch][wheel][nvcc]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Repos r;
  std::string fix = r.patch("fix.patch", kKernelFix).string();
  // On top of the first: its context is the patched line.
  std::string on_top = r.patch("on-top.patch",
                               "--- a/csrc/kernels.cu\n+++ b/csrc/kernels.cu\n@@ -14,2 +14,3 @@\n"
                               "   for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) c[i] = a[i] + b[i] + 1.f;\n"
                               "+  // patched twice\n"
                               " }\n").string();
  auto args = r.args("wheel", {"--patch", fix, "--patch", on_top, "--out", (r.dir / "out").string(), "--json"});
  t::RunOptions paused;
  paused.env = {{"ARCHBUILD_TEST_FAULT", "pause-between-patches"}};
  {
    t::Background bg(ARCHBUILD_EXE, args, paused);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
    while (bg.err_so_far().find("patch 2/2") == std::string::npos && bg.running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(bg.err_so_far().find("patch 2/2") != std::string::npos);
    bg.kill(SIGKILL);
    CHECK(bg.wait().status == -SIGKILL);
  }
  // Only a temporary folder was patched half-way: no tree of any key is in place.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(r.cache) / "src", ec))
    CHECK(e.path().filename().string().front() == '.');
  t::RunOptions slow;
  slow.timeout = std::chrono::seconds(900);
  auto rerun = t::archbuild(args, slow);
  INFO(rerun.out << rerun.err);
  REQUIRE(rerun.status == 0);
  json doc = json::parse(rerun.out);
  std::string kernels = t::read_file(fs::path(r.cache) / "src" / doc["key"].get<std::string>() / "csrc" / "kernels.cu");
  CHECK(kernels.find("a[i] + b[i] + 1.f;\n  // patched twice\n}") != std::string::npos);
  CHECK(kernels.find("1.f + 1.f") == std::string::npos);
  for (const auto& e : fs::directory_iterator(fs::path(r.cache) / "src", ec))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
}

// In the example's submodule (third_party/minidep, from its own mirror), as the superproject names it.
const char* kMinidepFix =
    "diff --git a/third_party/minidep/include/minidep/minidep.h b/third_party/minidep/include/minidep/minidep.h\n"
    "--- a/third_party/minidep/include/minidep/minidep.h\n"
    "+++ b/third_party/minidep/include/minidep/minidep.h\n"
    "@@ -2,3 +2,3 @@\n"
    " #pragma once\n"
    " \n"
    "-#define MINIDEP_VERSION \"1.0\"\n"
    "+#define MINIDEP_VERSION \"1.0+patched\"\n";

TEST_CASE("patch: a file of a submodule is checked on the submodule's commit, once it is mirrored", "[cli][patch]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Repos r;
  std::string fix = r.patch("minidep.patch", kMinidepFix).string();
  std::string stale = r.patch("minidep-stale.patch", std::string(kMinidepFix).replace(std::string(kMinidepFix).find("\"1.0\""), 5, "\"0.9\"")).string();
  // wheel mirrors the submodule before any venv: the stale part stops there, named with its full path.
  auto wheel = t::archbuild(r.args("wheel", {"--patch", stale, "--out", (r.dir / "out").string()}));
  INFO(wheel.out << wheel.err);
  CHECK(wheel.status == 2);
  CHECK(wheel.err.find("third_party/minidep/include/minidep/minidep.h, hunk @@ -2,3 +2,3 @@") != std::string::npos);
  CHECK_FALSE(has_venv(r.cache));
  auto checked = t::archbuild(r.args("plan", {"--patch", fix, "--json"}));
  INFO(checked.err);
  REQUIRE(checked.status == 0);
  CHECK(json::parse(checked.out)["patches"][0]["state"] == "applies");

  // Only the superproject mirrored: the submodule's part waits for its mirror, and plan says so.
  Repos early;
  auto first = t::archbuild(early.args("plan", {"--ref", "v0.1.0", "--json"}));
  REQUIRE(first.status == 0);
  auto said = t::archbuild(early.args("plan", {"--patch", early.patch("minidep.patch", kMinidepFix).string(), "--json"}));
  INFO(said.out << said.err);
  REQUIRE(said.status == 0);
  json doc = json::parse(said.out);
  CHECK(doc["patches"][0]["state"] == "unchecked");
  CHECK(doc["notes"].dump().find("its files in submodule third_party/minidep are checked against the tree once it is in "
                                 "the cache") != std::string::npos);
}

namespace {

// Every file's bytes and stat under `dir`.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    struct stat st {};
    REQUIRE(::lstat(it->path().c_str(), &st) == 0);
    std::string rel = fs::relative(it->path(), dir).string();
    out[rel] = std::to_string(st.st_ino) + " " + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    if (it->is_regular_file()) out[rel] += "\n" + t::read_file(it->path());
  }
  return out;
}

// The bytes of the wheel's native extensions (what nvcc and the compiler made), read with Python's zipfile.
std::string native_code(const json& built) {
  auto r = t::run("/usr/bin/python3", {"-c",
                                       "import sys, zipfile, hashlib\n"
                                       "z = zipfile.ZipFile(sys.argv[1])\n"
                                       "for n in sorted(z.namelist()):\n"
                                       "    if n.endswith('.so'): print(n, hashlib.sha256(z.read(n)).hexdigest())\n",
                                       built["wheel"].get<std::string>()});
  REQUIRE(r.status == 0);
  REQUIRE(r.out.find(".so ") != std::string::npos);
  return r.out;
}

}  // namespace

TEST_CASE("patch: a local tree's copy is patched, never the tree, and after a kill between patches a rerun patches once",
          "[cli][patch][wheel][source][nvcc]") {
  if (auto why = cannot_plan(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  fs::path tree = t::copy_examples(dir, kSource);
  auto before = snapshot(tree);
  const std::string cache = (dir / "cache").string();
  auto args = [&](const std::string& command, std::vector<std::string> extra, const std::string& in = "") {
    std::vector<std::string> a = {"--cache-dir", in.empty() ? cache : in, command, "--sm", "90", "--recipe", (tree / "recipe.toml").string(),
                                  "--source", tree.string(), "--python", "/usr/bin/python3"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  std::string fix = dir.write("fix.patch", kKernelFix).string();
  std::string on_top = dir.write("on-top.patch",
                                 "--- a/csrc/kernels.cu\n+++ b/csrc/kernels.cu\n@@ -14,2 +14,3 @@\n"
                                 "   for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) c[i] = a[i] + b[i] + 1.f;\n"
                                 "+  // patched twice\n"
                                 " }\n").string();
  std::string stale = dir.write("stale.patch", kStale).string();
  std::string merged = dir.write("merged.patch", kMerged).string();

  // A patch that does not fit the tree's files: the stop, before any venv.
  auto bad = t::archbuild(args("plan", {"--patch", stale, "--check"}));
  INFO(bad.err);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("patch stale.patch does not apply to the local tree " + fs::canonical(tree).string() +
                     ": csrc/kernels.cu, hunk @@ -3,3 +3,3 @@") != std::string::npos);
  CHECK_FALSE(has_venv(cache));
  // plan: the patches listed, checked on the tree's files, another key.
  auto plain = t::archbuild(args("plan", {"--json"}));
  REQUIRE(plain.status == 0);
  auto patched = t::archbuild(args("plan", {"--patch", fix, "--patch", merged, "--json"}));
  INFO(patched.err);
  REQUIRE(patched.status == 0);
  json pp = json::parse(patched.out);
  CHECK(pp["key"] != json::parse(plain.out)["key"]);
  REQUIRE(pp["patches"].size() == 2);
  CHECK(pp["patches"][0]["sha256"] == archbuild::sha256_hex(kKernelFix));
  CHECK(pp["patches"][0]["state"] == "applies");
  CHECK(pp["patches"][1]["state"] == "contained");

  t::RunOptions slow;
  slow.timeout = std::chrono::seconds(900);
  slow.env = {{"CCACHE_DIR", (dir / "ccache").string()}};
  auto unpatched = t::archbuild(args("wheel", {"--out", (dir / "out0").string(), "--no-validate", "--json"}), slow);
  INFO(unpatched.out << unpatched.err);
  REQUIRE(unpatched.status == 0);
  json w0 = json::parse(unpatched.out);

  // Killed between the two patches (the copy, taken over from the unpatched build's, not yet
  // written), then run again: patched once, from the tree's content.
  auto wheel = args("wheel", {"--patch", fix, "--patch", on_top, "--out", (dir / "out1").string(), "--no-validate", "--json"});
  t::RunOptions paused = slow;
  paused.env["ARCHBUILD_TEST_FAULT"] = "pause-between-patches";
  {
    t::Background bg(ARCHBUILD_EXE, wheel, paused);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
    while (bg.err_so_far().find("patch 2/2") == std::string::npos && bg.running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(bg.err_so_far().find("patch 2/2") != std::string::npos);
    bg.kill(SIGKILL);
    CHECK(bg.wait().status == -SIGKILL);
  }
  auto rerun = t::archbuild(wheel, slow);
  INFO(rerun.out << rerun.err);
  REQUIRE(rerun.status == 0);
  json w1 = json::parse(rerun.out);
  CHECK(w1["key"] != w0["key"]);
  CHECK(native_code(w1) != native_code(w0));  // the wheel's code is the patched kernel's
  fs::path copy = fs::path(cache) / "work" / w1["build_start"]["slot"].get<std::string>() / "src" / "csrc" / "kernels.cu";
  std::string kernels = t::read_file(copy);
  CHECK(kernels.find("a[i] + b[i] + 1.f;\n  // patched twice\n}") != std::string::npos);
  CHECK(kernels.find("1.f + 1.f") == std::string::npos);
  json manifest = json::parse(t::read_file(w1["manifest"].get<std::string>()))["manifest"];
  REQUIRE(manifest["patches"].size() == 2);
  CHECK(manifest["patches"][0]["state"] == "applied");
  CHECK(snapshot(tree) == before);  // the user's tree: untouched, byte for byte

  // The tree edited, the same patches: the build continues key w1's build tree; the copy's patched
  // kernels.cu is written from the tree and patched again (once), ninja rebuilds it, and the
  // wheel is what a clean build of the same content and patches gives in another cache.
  const std::string original = t::read_file(tree / "csrc" / "kernels.cu");
  std::ofstream(tree / "csrc" / "kernels.cu", std::ios::app) << "\n__global__ void minitorch_patch_probe(float* x) { x[0] = 2.0f; }\n";
  auto patched_args = [&](const std::string& out, const std::string& in = "") {
    return args("wheel", {"--patch", fix, "--patch", on_top, "--out", (dir / out).string(), "--no-validate", "--json"}, in);
  };
  auto inc = t::archbuild(patched_args("out1b"), slow);
  INFO(inc.out << inc.err);
  REQUIRE(inc.status == 0);
  json w1b = json::parse(inc.out);
  CHECK(w1b["build_start"]["mode"] == "incremental");
  CHECK(w1b["build_start"]["from_key"] == w1["key"]);
  std::string edited = t::read_file(copy);
  CHECK(edited.find("a[i] + b[i] + 1.f;\n  // patched twice\n}") != std::string::npos);
  CHECK(edited.find("minitorch_patch_probe") != std::string::npos);
  CHECK(edited.find("1.f + 1.f") == std::string::npos);
  auto clean = t::archbuild(patched_args("out1c", (dir / "cache-clean").string()), slow);
  INFO(clean.out << clean.err);
  REQUIRE(clean.status == 0);
  json w1c = json::parse(clean.out);
  CHECK(w1c["build_start"]["mode"] == "clean");
  CHECK(w1c["key"] == w1b["key"]);
  CHECK(w1c["sha256"] == w1b["sha256"]);
  std::ofstream(tree / "csrc" / "kernels.cu", std::ios::trunc) << original;
  before = snapshot(tree);

  // A patch the tree contains (another key and slot): its copy starts from the patched build's,
  // whose patched file is written back from the tree; the wheel's code is the unpatched one's.
  auto again = t::archbuild(args("wheel", {"--patch", merged, "--out", (dir / "out2").string(), "--no-validate", "--json"}), slow);
  INFO(again.out << again.err);
  REQUIRE(again.status == 0);
  json w2 = json::parse(again.out);
  CHECK(w2["key"] != w0["key"]);
  fs::path copy2 = fs::path(cache) / "work" / w2["build_start"]["slot"].get<std::string>() / "src" / "csrc" / "kernels.cu";
  CHECK(t::read_file(copy2) == t::read_file(tree / "csrc" / "kernels.cu"));
  CHECK(native_code(w2) == native_code(w0));
  CHECK(snapshot(tree) == before);
}
