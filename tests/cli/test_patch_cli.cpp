// Patches end to end on the example project (a git repository with tag v0.1.0,
// tests/support/make-example-repos): a patch that changes a kernel is applied and keyed, one whose
// context does not match stops before any venv (plan --check and wheel alike), one already in the
// tree is said, a recipe's patch whose sha256 differs is refused, and --patch takes only a file.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/sha256.hpp"
#include "support/process.hpp"
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
