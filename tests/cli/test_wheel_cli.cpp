// `archbuild wheel` end to end on examples/minitorch, really built with nvcc through libgit2,
// cmake, ninja and setup.py: the wheel carries exactly the target's SASS, a repeat builds nothing,
// another arch is another key, and faults (kill -9, a concurrent run, a failing build, an
// unreachable repository) leave the cache and --out whole.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "run/admission.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kRecipe = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";

bool can_build(std::string& why) {
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) why = u;
  else if (!fs::exists("/usr/bin/python3")) why = "no /usr/bin/python3 (setuptools + wheel)";
  else if (t::which("cmake").empty() || t::which("ninja").empty()) why = "cmake or ninja not on PATH";
  return why.empty();
}

// A build of the example after the test changed it with git.
bool can_build_edited(std::string& why) {
  if (!can_build(why)) return false;
  if (t::which("git").empty()) why = "git is not on PATH (the test edits the example repository with it)";
  return why.empty();
}

struct Workspace {
  t::TempDir dir;
  std::string url;
  Workspace() {
    auto r = t::run("/bin/bash", {std::string(ARCHBUILD_SOURCE_DIR) + "/tests/support/make-example-repos",
                                  (dir / "repos").string()});
    REQUIRE(r.status == 0);
    url = "file://" + (dir / "repos" / "minitorch").string();
  }
  std::vector<std::string> wheel_args(const std::string& sm, const std::string& out = "out") const {
    return {"--cache-dir", (dir / "cache").string(), "wheel", "--sm", sm, "--recipe", kRecipe,
            "--source-url", url, "--out", (dir / out).string(), "--python", "/usr/bin/python3", "--json"};
  }
  // A whole build with its validate stage (import test, smoke kernel) on a shared, loaded host:
  // the harness limit only stops a hang, it is no timing check.
  static t::RunOptions build_limit() {
    t::RunOptions o;
    o.timeout = std::chrono::seconds(600);
    return o;
  }
  fs::path example_repo() const { return dir / "repos" / "minitorch"; }
  // Commits `files` of the example repository and moves its tag v0.1.0 onto that commit (the git
  // CLI, in test tooling only).
  void commit_example(const std::vector<std::string>& files, const std::string& message) const {
    t::RunOptions git_env;
    git_env.env = {{"GIT_AUTHOR_NAME", "t"}, {"GIT_AUTHOR_EMAIL", "t@t.invalid"}, {"GIT_COMMITTER_NAME", "t"},
                   {"GIT_COMMITTER_EMAIL", "t@t.invalid"}, {"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", dir.path().string()}};
    std::vector<std::string> add = {"-C", example_repo().string(), "add", "--"};
    add.insert(add.end(), files.begin(), files.end());
    for (const auto& args : std::vector<std::vector<std::string>>{
             add, {"-C", example_repo().string(), "commit", "-q", "-m", message},
             {"-C", example_repo().string(), "tag", "-f", "-a", "v0.1.0", "-m", "v0.1.0"}}) {
      auto r = t::run(t::which("git"), args, git_env);
      INFO(r.err);
      REQUIRE(r.status == 0);
    }
  }
  std::string key(const std::string& sm) const {
    auto r = t::archbuild({"--cache-dir", (dir / "cache").string(), "plan", "--sm", sm, "--recipe", kRecipe,
                           "--source-url", url, "--python", "/usr/bin/python3", "--json"});
    REQUIRE(r.status == 0);
    return json::parse(r.out)["key"];
  }
};

std::vector<std::string> sass_of(const std::string& wheel) {
  auto r = t::archbuild({"inspect", wheel, "--json"});
  INFO("inspect " << wheel << ": " << r.out << r.err);
  REQUIRE(r.status == 0);
  std::vector<std::string> sass;
  const json doc = json::parse(r.out);  // a named value: iterating a temporary's member dangles
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

}  // namespace

TEST_CASE("wheel: builds the example for exactly the target, then reuses it", "[cli][wheel][nvcc]") {
  std::string why;
  if (!can_build(why)) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Workspace w;
  auto first = t::archbuild(w.wheel_args("90"), Workspace::build_limit());
  INFO(first.err);
  REQUIRE(first.status == 0);
  auto j = json::parse(first.out);
  CHECK(j["ok"] == true);
  CHECK(j["reused"] == false);
  CHECK(j["version"] == "0.1.0+cu130.sm90");
  std::string wheel = j["wheel"];
  CHECK(fs::exists(wheel));
  CHECK(fs::path(wheel).filename().string().rfind("minitorch-0.1.0+cu130.sm90-", 0) == 0);
  CHECK(sass_of(wheel) == std::vector<std::string>{"sm_90"});
  CHECK(j["validation"]["valid"] == true);  // the validate stage ran: coverage, RECORD, import, smoke
  // The repeat: nothing runs, the same bytes.
  auto again = t::archbuild(w.wheel_args("90", "out2"), Workspace::build_limit());
  REQUIRE(again.status == 0);
  auto j2 = json::parse(again.out);
  CHECK(j2["reused"] == true);
  CHECK(j2["stages_run"].empty());
  CHECK(j2["sha256"] == j["sha256"]);
  // A read-only cache (a shared, read-only mount) still reuses the built key: nothing is written
  // there. A private mount namespace makes it read-only for this one run (root, unshare -m).
  {
    std::string cache = (w.dir / "cache").string();
    std::vector<std::string> a = {"-m", "/bin/sh", "-c",
                                  "{ mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\"; } || exit 98; "
                                  "touch \"$0/probe\" 2>/dev/null && exit 97; exec \"$@\"",
                                  cache, ARCHBUILD_EXE};
    auto args = w.wheel_args("90", "out-ro");
    a.insert(a.end(), args.begin(), args.end());
    // unshare or mount refused (1, 98), or the mount still writable (97): this part cannot run here.
    auto ro = fs::exists("/usr/bin/unshare") ? t::run("/usr/bin/unshare", a, Workspace::build_limit()) : t::Ran{};
    if (ro.status != -1 && ro.status != 1 && ro.status != 97 && ro.status != 98) {
      INFO("read-only cache: " << ro.out << ro.err);
      REQUIRE(ro.status == 0);
      auto j4 = json::parse(ro.out);
      CHECK(j4["reused"] == true);
      CHECK(j4["sha256"] == j["sha256"]);
    } else {
      WARN("##archbuild-skip## (this part) no private read-only mount here: " << ro.err);
    }
  }
  // Another arch: another key, its own tree, its own SASS.
  auto other = t::archbuild(w.wheel_args("8.0", "out3"), Workspace::build_limit());
  REQUIRE(other.status == 0);
  auto j3 = json::parse(other.out);
  CHECK(j3["key"] != j["key"]);
  CHECK(j3["reused"] == false);
  CHECK(sass_of(j3["wheel"]) == std::vector<std::string>{"sm_80"});
  CHECK(fs::exists(w.dir / "cache" / "src" / j["key"].get<std::string>()));
  CHECK(fs::exists(w.dir / "cache" / "src" / j3["key"].get<std::string>()));
}

TEST_CASE("wheel: kill -9 during the build, then a rerun completes, --out never holds a partial wheel",
          "[cli][wheel][nvcc]") {
  std::string why;
  if (!can_build(why)) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Workspace w;
  // The key's build log, once there is one: the key holds the build venv's versions, known only
  // once the commit is mirrored and the venv made (a `plan` before the first fetch cannot say it).
  auto find_build_log = [&]() -> fs::path {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(w.dir / "cache" / "logs", ec))
      if (fs::exists(e.path() / "build.log", ec)) return e.path() / "build.log";
    return {};
  };
  fs::path build_log;
  {
    t::Background bg(ARCHBUILD_EXE, w.wheel_args("90"));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
    while ((build_log = find_build_log()).empty() && bg.running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(fs::exists(build_log));
    bg.kill(SIGKILL);
    auto r = bg.wait();
    CHECK(r.status == -SIGKILL);
  }
  CHECK(files_in(w.dir / "out").empty());
  auto rerun = t::archbuild(w.wheel_args("90"), Workspace::build_limit());
  INFO(rerun.err);
  REQUIRE(rerun.status == 0);
  auto j = json::parse(rerun.out);
  CHECK(j["stages_resumed_past"].size() >= 1);  // fetch was done before the kill
  // The whole wheel and the manifest beside it, nothing partial.
  std::string wheel_name = fs::path(j["wheel"].get<std::string>()).filename().string();
  auto out_files = files_in(w.dir / "out");
  std::sort(out_files.begin(), out_files.end());
  CHECK(out_files == std::vector<std::string>{wheel_name, wheel_name + ".manifest.json"});
  CHECK(sass_of(j["wheel"]) == std::vector<std::string>{"sm_90"});
}

TEST_CASE("wheel: two concurrent runs of one key build once and agree", "[cli][wheel][nvcc]") {
  std::string why;
  if (!can_build(why)) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Workspace w;
  t::Background a(ARCHBUILD_EXE, w.wheel_args("90", "out-a"));
  t::Background b(ARCHBUILD_EXE, w.wheel_args("90", "out-b"));
  auto ra = a.wait();
  auto rb = b.wait();
  INFO(ra.err << "\n---\n" << rb.err);
  REQUIRE(ra.status == 0);
  REQUIRE(rb.status == 0);
  auto ja = json::parse(ra.out), jb = json::parse(rb.out);
  CHECK(ja["sha256"] == jb["sha256"]);
  // Exactly one of them built it.
  CHECK((ja["reused"].get<bool>() != jb["reused"].get<bool>()));
}

TEST_CASE("wheel: a failing build is exit 4 with the log's tail and path", "[cli][wheel][nvcc]") {
  std::string why;
  if (!can_build(why)) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Workspace w;
  // A recipe of the user's: the example with a compiler flag nvcc rejects.
  auto recipe = w.dir.write("broken.toml", "extends = \"" + kRecipe + "\"\n[build.env]\nCMAKE_CUDA_FLAGS = \"--no-such-nvcc-flag\"\n");
  auto args = w.wheel_args("90");
  args[6] = recipe.string();
  auto r = t::archbuild(args);
  CHECK(r.status == 4);
  CHECK(r.err.find("stage failed") != std::string::npos);
  CHECK(r.err.find(".log") != std::string::npos);
  CHECK(r.err.find("last ") != std::string::npos);
  CHECK(files_in(w.dir / "out").empty());
}

TEST_CASE("wheel: an unreachable repository is a clear error and leaves no checkout", "[cli][wheel]") {
  t::TempDir dir;
  // A folder that is no repository (one that is not there at all is bad input before the fetch:
  // test_prepare_cli): the fetch stage fails.
  fs::create_directories(dir / "missing.git");
  auto r = t::archbuild({"--cache-dir", (dir / "cache").string(), "wheel", "--sm", "90", "--recipe", kRecipe,
                         "--source-url", "file://" + (dir / "missing.git").string(), "--out",
                         (dir / "out").string(), "--python", "/usr/bin/python3"});
  if (r.status == 3) {
    WARN("##archbuild-skip## this host lacks a tool the example needs: " << r.err);
    return;
  }
  CHECK(r.status == 4);
  CHECK(r.err.find("missing.git") != std::string::npos);
  CHECK(files_in(dir / "cache" / "src").empty());
  CHECK(files_in(dir / "out").empty());
}

TEST_CASE("wheel: bad input is exit 2 before anything runs", "[cli][wheel]") {
  t::TempDir dir;
  auto r = t::archbuild({"--cache-dir", (dir / "cache").string(), "wheel", "--sm", "9.5"});
  CHECK(r.status == 2);
  CHECK(r.err.find("9.5") != std::string::npos);
  r = t::archbuild({"--cache-dir", (dir / "cache").string(), "wheel", "--sm", "90", "--recipe", (dir / "nope.toml").string()});
  CHECK(r.status == 2);
  r = t::archbuild({"wheel", "--sm", "90", "--jobs", "0"});
  CHECK(r.status == 2);
}

// The same plan built in two cache directories (two hosts), at different times, in
// another time zone, without a compiler cache (so nothing is shared but the source) gives one
// wheel byte for byte; --check-reproducible says so too.
TEST_CASE("wheel: two cache directories at different times give a byte-identical wheel", "[cli][wheel][nvcc]") {
  std::string why;
  if (!can_build(why)) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Workspace w;
  auto build_in = [&](const fs::path& cache, const std::string& out, const std::string& tz) {
    auto args = w.wheel_args("90", out);
    args.at(1) = cache.string();
    for (const char* a : {"--compiler-cache", "none", "--no-validate"}) args.push_back(a);
    t::RunOptions o;
    o.env["TZ"] = tz;
    o.timeout = std::chrono::seconds(600);
    auto r = t::archbuild(args, o);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  };
  auto a = build_in(w.dir / "cache", "out-a", "UTC");
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the zip's time resolution
  auto b = build_in(w.dir / "elsewhere" / "a-longer-cache-path", "out-b", "Asia/Kolkata");
  CHECK(a["key"] == b["key"]);
  CHECK(a["sha256"] == b["sha256"]);
  WARN("reproducibility: host A sha256 " << a["sha256"] << ", host B sha256 " << b["sha256"]);
  // Neither cache path is in the wheel's CUDA library.
  // (The wheel is deflated: look in the build tree's library.)
  std::string so = t::read_file(w.dir / "elsewhere" / "a-longer-cache-path" / "src" / b["key"].get<std::string>() /
                                "build" / "libminitorch_kernels.so");
  REQUIRE_FALSE(so.empty());
  CHECK(so.find("a-longer-cache-path") == std::string::npos);
  CHECK(so.find(w.dir.path().string()) == std::string::npos);

  auto check = t::archbuild([&] {
    auto args = w.wheel_args("90", "out-c");
    args.push_back("--check-reproducible");
    return args;
  }(), Workspace::build_limit());
  INFO(check.err);
  REQUIRE(check.status == 0);
  auto c = json::parse(check.out);
  CHECK(c["reproducibility"]["reproducible"] == true);
  CHECK(c["reproducibility"]["sha256"][0] == c["reproducibility"]["sha256"][1]);
  CHECK(c["reproducibility"]["differing_members"].empty());
  CHECK_FALSE(fs::exists(w.dir / "cache" / "repro-check"));  // the second build is cleaned up
}

// The check is not a formality: a project that writes the build time into the wheel is caught,
// and the member that differs is named (exit 1).
TEST_CASE("wheel: --check-reproducible names the members that differ", "[cli][wheel][nvcc]") {
  std::string why;
  if (!can_build_edited(why)) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Workspace w;
  // The example, changed to stamp the build time into the package, committed and re-tagged.
  fs::path repo = w.example_repo();
  std::string setup = t::read_file(repo / "setup.py");
  std::string anchor = "\"_build_info.json\"))\n";
  auto at = setup.find(anchor);
  REQUIRE(at != std::string::npos);
  setup.insert(at + anchor.size(),
               "        with open(os.path.join(dest, \"_built_at.txt\"), \"w\") as f:\n"
               "            f.write(str(__import__(\"time\").time_ns()))\n");
  std::ofstream(repo / "setup.py") << setup;
  w.commit_example({"setup.py"}, "stamp the build time");
  auto args = w.wheel_args("90");
  for (const char* a : {"--check-reproducible", "--no-validate"}) args.push_back(a);
  t::RunOptions o;
  o.timeout = std::chrono::seconds(600);
  auto r = t::archbuild(args, o);
  INFO(r.err);
  CHECK(r.status == 1);
  auto j = json::parse(r.out);
  CHECK(j["ok"] == false);
  CHECK(j["reproducibility"]["reproducible"] == false);
  auto members = j["reproducibility"]["differing_members"];
  CHECK(std::find(members.begin(), members.end(), "minitorch/_built_at.txt") != members.end());
  CHECK(std::find(members.begin(), members.end(), "minitorch/libminitorch_kernels.so") == members.end());
  CHECK(r.err.find("minitorch/_built_at.txt") != std::string::npos);
}

namespace {

// The launcher's records as the report reads them (run::read_records), as JSON for the checks.
std::vector<json> compile_records(const fs::path& file) {
  std::vector<json> out;
  for (const auto& r : archbuild::run::read_records(file))
    out.push_back({{"source", r.source}, {"peak_kb", r.peak_kb}, {"exit", r.exit_code}, {"output", r.output},
                   {"expect_mb", r.expect_mb}, {"basis", r.basis}, {"lang", r.lang}, {"wall_ms", r.wall_ms},
                   {"threads", r.threads}});
  return out;
}

const json* record_of(const std::vector<json>& records, const std::string& source) {
  for (const auto& r : records)
    if (r["source"] == source) return &r;
  return nullptr;
}

}  // namespace

// PyTorch 2.12.0 - 2.13.0 read the environment as one CMake list and cut archbuild's launcher lists
// at their first ';' (tests/fixtures/env-forwarding/forward-env.cmake models it). The example,
// changed to forward its environment that way, builds with a recipe that says so (the CMake seed)
// and fails without it.
TEST_CASE("wheel: a tree that reads its environment as one CMake list builds through the CMake seed",
          "[cli][wheel][nvcc]") {
  std::string why;
  if (!can_build_edited(why)) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Workspace w;
  fs::path repo = w.example_repo();
  fs::copy_file(fs::path(ARCHBUILD_SOURCE_DIR) / "tests/fixtures/env-forwarding/forward-env.cmake",
                repo / "forward-env.cmake");
  std::string lists = t::read_file(repo / "CMakeLists.txt");
  std::string anchor = "cmake_minimum_required(VERSION 3.18)\n";
  auto at = lists.find(anchor);
  REQUIRE(at != std::string::npos);
  lists.insert(at + anchor.size(), "include(${CMAKE_CURRENT_SOURCE_DIR}/forward-env.cmake)\n");
  std::ofstream(repo / "CMakeLists.txt") << lists;
  // …and setup.py no longer passes USE_*/BUILD_*/CMAKE_* as -D (2.12's tools/setup_helpers/cmake.py).
  std::string setup = t::read_file(repo / "setup.py");
  std::string forwarding = "        if key.startswith((\"USE_\", \"BUILD_\", \"CMAKE_\")):\n";
  at = setup.find(forwarding);
  REQUIRE(at != std::string::npos);
  setup.replace(at, forwarding.size(), "        if False:  # forwarded by the tree's CMake (forward-env.cmake)\n");
  std::ofstream(repo / "setup.py") << setup;
  w.commit_example({"forward-env.cmake", "CMakeLists.txt", "setup.py"}, "forward the environment as one list");
  std::string recipe = t::read_file(kRecipe);
  at = recipe.find("[build]\n");
  REQUIRE(at != std::string::npos);
  recipe.insert(at + 8, "forwards_env_as_list = true\n");
  fs::path flagged = w.dir.write("lists/recipe.toml", recipe);

  // Without the seed the CUDA (and, admitted, C/C++) compiles run `archbuild <compiler> …`: exit 4.
  auto plain = t::archbuild(w.wheel_args("90", "out-plain"), Workspace::build_limit());
  INFO(plain.err);
  CHECK(plain.status == 4);

  auto args = w.wheel_args("90");
  std::replace(args.begin(), args.end(), kRecipe, flagged.string());
  // The same key (the flag does not change what is built): the failed build resumes, and its tree,
  // configured with cut launchers, is configured again with the seed.
  auto r = t::archbuild(args, Workspace::build_limit());
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("configuring again") != std::string::npos);
  auto j = json::parse(r.out);
  CHECK(j["ok"] == true);
  // Every compile went through archbuild's launcher, so each one has its record.
  auto plan = t::archbuild({"--cache-dir", (w.dir / "cache").string(), "plan", "--sm", "90", "--recipe", flagged.string(),
                            "--source-url", w.url, "--python", "/usr/bin/python3", "--json"});
  REQUIRE(plan.status == 0);
  std::string key = json::parse(plan.out)["key"];
  auto records = compile_records(w.dir / "cache/logs" / key / "compiles.tsv");
  CHECK(std::any_of(records.begin(), records.end(), [](const json& c) { return c["lang"] == "CUDA" && c["exit"] == 0; }));
  CHECK(fs::exists(w.dir / "cache/build" / key / "cmake-seed.cmake"));
}


// With admission (the default) archbuild launches every C++ and CUDA compile of the
// example, measures its peak and records it; a second build of the recipe (another key)
// expects those measured peaks; `archbuild report` reads the build back.
TEST_CASE("wheel: admission launches C++ and CUDA compiles, records peaks, the next build uses them, report and trace",
          "[cli][wheel][admission][report][nvcc]") {
  std::string why;
  if (!can_build(why)) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Workspace w;
  auto args = w.wheel_args("90");
  for (const char* a : {"--memory-budget", "2G", "--no-validate"}) args.push_back(a);
  auto first = t::archbuild(args);
  INFO(first.err);
  REQUIRE(first.status == 0);
  const std::string key = json::parse(first.out)["key"];
  CHECK(first.err.find("memory admission: ") != std::string::npos);  // the build stage says how many waited

  const fs::path cache = w.dir / "cache";
  auto records = compile_records(cache / "logs" / key / "compiles.tsv");
  const json* cxx = record_of(records, "csrc/abi.cpp");
  const json* cuda = record_of(records, "csrc/kernels.cu");
  REQUIRE(cxx);
  REQUIRE(cuda);
  CHECK((*cxx)["lang"] == "CXX");
  CHECK((*cuda)["lang"] == "CUDA");
  CHECK((*cxx)["basis"] == "C++");  // the example recipe's figure: nothing measured yet
  CHECK((*cxx)["expect_mb"] == 256);
  CHECK((*cuda)["basis"] == "CUDA");
  CHECK((*cuda)["expect_mb"] == 512);
  CHECK((*cxx)["peak_kb"].get<std::uint64_t>() > 0);
  CHECK((*cuda)["peak_kb"].get<std::uint64_t>() > 0);
  CHECK((*cuda)["output"].get<std::string>().find("kernels.cu.o") != std::string::npos);

  // The manifest: admission on, jobs = cores, the report's summary.
  std::ifstream mf(cache / "keys" / (key + ".json"));
  json doc = json::parse(mf);
  CHECK(doc["plan"]["admission"]["on"] == true);
  CHECK(doc["plan"]["admission"]["budget_mb"] == 2048);
  CHECK(doc["plan"]["jobs"]["admitted"] == true);
  CHECK(doc["manifest"]["admission"]["on"] == true);
  const json& summary = doc["manifest"]["build_report"];
  REQUIRE(summary.is_object());
  CHECK(summary["compiles"]["count"].get<int>() >= 2);
  CHECK(summary["targets"].get<int>() >= 2);
  CHECK(summary["critical_path"].is_object());
  // wheel --json carries the same summary; no --trace, no trace.
  const json first_doc = json::parse(first.out);
  CHECK(first_doc["build_report"] == summary);
  CHECK(first_doc["trace"].is_null());
  // The launchers CMake recorded: archbuild in front of ccache for C, C++ and CUDA.
  for (const char* lang : {"C", "CXX", "CUDA"}) {
    std::string l = doc["stages"]["configure"]["launchers"][lang];
    CHECK(l.find(";cuda-launch;") != std::string::npos);
    CHECK(l.find(";--admission;") != std::string::npos);
  }

  // Another key of the same recipe: the compiles expect what the first build measured; with
  // --trace, the build's Chrome trace is written after it.
  const fs::path wheel_trace = w.dir / "wheel-trace.json";
  auto second_args = w.wheel_args("90", "out2");
  for (const char* a : {"--memory-budget", "2G", "--no-validate", "--env", "MINITORCH_ADMISSION_TEST=1", "--trace"})
    second_args.push_back(a);
  second_args.push_back(wheel_trace.string());
  auto second = t::archbuild(second_args);
  INFO(second.err);
  REQUIRE(second.status == 0);
  const std::string key2 = json::parse(second.out)["key"];
  REQUIRE(key2 != key);
  auto records2 = compile_records(cache / "logs" / key2 / "compiles.tsv");
  for (const char* source : {"csrc/abi.cpp", "csrc/kernels.cu"}) {
    const json* r = record_of(records2, source);
    REQUIRE(r);
    CHECK((*r)["basis"] == "measured");
    const json* before = record_of(records, source);
    CHECK((*r)["expect_mb"].get<std::uint64_t>() == ((*before)["peak_kb"].get<std::uint64_t>() + 1023) / 1024);
  }
  {
    std::ifstream in(wheel_trace);
    REQUIRE(in);
    json tr = json::parse(in);  // nlohmann: the file is one JSON document
    REQUIRE(tr["traceEvents"].is_array());
    std::set<std::string> names;
    for (const auto& e : tr["traceEvents"])
      if (e["ph"] == "X") names.insert(e["name"].get<std::string>());
    CHECK(std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.find("kernels.cu.o") != std::string::npos; }));
    CHECK(second.err.find("--trace") == std::string::npos);  // no warning: it was written
    const json second_doc = json::parse(second.out);
    CHECK(second_doc["trace"] == fs::absolute(wheel_trace).string());
    REQUIRE(second_doc["build_report"].is_object());
    CHECK(second_doc["build_report"]["compiles"]["count"].get<int>() >= 2);
  }

  // A reused key: the summary from its manifest; one whose manifest has none (kept before
  // admission) gives null.
  auto again_args = args;
  auto out_at = std::find(again_args.begin(), again_args.end(), "--out");
  REQUIRE(out_at + 1 < again_args.end());
  *(out_at + 1) = (w.dir / "out3").string();
  auto again = t::archbuild(again_args);
  INFO(again.err);
  REQUIRE(again.status == 0);
  const json again_doc = json::parse(again.out);
  CHECK(again_doc["reused"] == true);
  CHECK(again_doc["build_report"] == summary);
  CHECK(again_doc["trace"].is_null());
  {
    std::ifstream in(cache / "keys" / (key + ".json"));
    json older = json::parse(in);
    older["manifest"].erase("build_report");
    std::ofstream(cache / "keys" / (key + ".json")) << older.dump(2);
  }
  auto older_run = t::archbuild(again_args);
  INFO(older_run.err);
  REQUIRE(older_run.status == 0);
  const json older_doc = json::parse(older_run.out);
  CHECK(older_doc["reused"] == true);
  CHECK(older_doc["build_report"].is_null());

  // report --trace naming a directory is bad input (exit 2, one document with the error), not a
  // failed stage; nothing is written into the directory.
  {
    fs::create_directories(w.dir / "trace-dir");
    auto bad = t::archbuild({"--cache-dir", cache.string(), "report", key.substr(0, 12), "--trace",
                             (w.dir / "trace-dir").string(), "--json"});
    INFO(bad.out << bad.err);
    CHECK(bad.status == 2);
    CHECK(json::parse(bad.out)["exit"] == 2);
    CHECK(bad.err.find("is a directory") != std::string::npos);
    CHECK(fs::is_empty(w.dir / "trace-dir"));
  }
  // archbuild report KEY (a prefix will do): the summary and a trace Perfetto can open.
  const fs::path trace = w.dir / "trace.json";
  auto rep = t::archbuild({"--cache-dir", cache.string(), "report", key.substr(0, 12), "--trace", trace.string(), "--json"});
  INFO(rep.err);
  REQUIRE(rep.status == 0);
  json r = json::parse(rep.out);
  CHECK(r["key"] == key);
  CHECK(r["compiles"]["count"].get<int>() >= 2);
  CHECK(r["critical_path"]["targets"].size() >= 1);
  std::ifstream tf(trace);
  json tr = json::parse(tf);
  int complete = 0;
  for (const auto& e : tr["traceEvents"])
    if (e["ph"] == "X") ++complete;
  CHECK(complete == r["targets"].get<int>());
  auto human = t::archbuild({"--cache-dir", cache.string(), "report", key});
  CHECK(human.status == 0);
  CHECK(human.out.find("critical path") != std::string::npos);
  CHECK(human.out.find("largest peak memory per compile") != std::string::npos);
}

TEST_CASE("wheel: --memory-budget that is not a size is exit 2 with one line, before anything runs", "[cli][wheel][admission]") {
  t::TempDir dir;
  for (const char* bad : {"12", "lots", "3Q", "200%"}) {
    for (const char* command : {"wheel", "plan"}) {
      auto r = t::archbuild({"--cache-dir", (dir / "cache").string(), command, "--sm", "90", "--recipe", kRecipe,
                             "--memory-budget", bad});
      INFO(command << " --memory-budget " << bad << ": " << r.err);
      CHECK(r.status == 2);
      CHECK(r.err.find(std::string("--memory-budget '") + bad + "'") != std::string::npos);
      CHECK(r.err.find("expected a size like 48G") != std::string::npos);
    }
  }
  CHECK(!fs::exists(dir / "cache" / "src"));
}

TEST_CASE("report: an unknown key or a cache without the build is exit 2", "[cli][report]") {
  t::TempDir dir;
  auto r = t::archbuild({"--cache-dir", (dir / "cache").string(), "report", "abc123"});
  CHECK(r.status == 2);
  CHECK(r.err.find("no build of key abc123") != std::string::npos);
  r = t::archbuild({"--cache-dir", (dir / "cache").string(), "report", "not-a-key"});
  CHECK(r.status == 2);
}
