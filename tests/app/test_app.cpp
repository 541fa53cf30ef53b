// app/: the application's operations called as functions, without a process: this host is a
// folder of empty programs answered by a canned probe (app::Session::probe), the build's runner
// a strict run::ScriptedRunner (any command fails the test), notes and warnings a string stream.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "app/build.hpp"
#include "app/facts.hpp"
#include "app/inputs.hpp"
#include "app/matrix.hpp"
#include "app/set.hpp"
#include "prepare/prepare.hpp"
#include "run/scripted_runner.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
namespace fs = std::filesystem;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A build host as files (g++ 13, Python 3.12, cmake, ninja, CUDA 13.0) whose answers come from
// the probe, so discovery starts no process.
struct FakeHost {
  test::TempDir tmp;
  std::ostringstream err;
  run::ScriptedRunner runner;
  app::Session session;
  FakeHost() {
    for (const char* p : {"bin/g++-13", "bin/gcc-13", "bin/python3", "bin/python3.12", "bin/cmake", "bin/ninja",
                          "roots/cuda-13.0/bin/nvcc"}) {
      auto f = tmp.write(p, "");
      fs::permissions(f, fs::perms::owner_all, fs::perm_options::replace);
    }
    ::setenv("PATH", (tmp / "bin").c_str(), 1);
    ::setenv("ARCHBUILD_CUDA_ROOTS", (tmp / "roots").c_str(), 1);
    ::setenv("ARCHBUILD_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    ::setenv("ARCHBUILD_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    for (const char* v : {"CUDA_HOME", "CUDA_PATH", "CUDAHOSTCXX", "ARCHBUILD_CACHE_DIR", "ARCHBUILD_STORE"}) ::unsetenv(v);
    runner.strict();
    session.cache_dir = tmp / "cache";
    session.err = &err;
    session.runner = &runner;
    // The interpreter names itself as it is (a dependent of the set is resolved with its path).
    const std::string python = (tmp / "bin/python3.12").string();
    session.probe = [python](const std::vector<std::string>& argv) -> Result<toolchain::ProbeOutput> {
      const std::string name = fs::path(argv[0]).filename().string();
      if (name == "nvcc") {
        if (argv.size() > 1 && argv[1] == "--version")
          return toolchain::ProbeOutput{0, "Cuda compilation tools, release 13.0, V13.0.88\n", ""};
        std::string archs;
        for (const char* a : {"75", "80", "86", "87", "88", "89", "90", "100", "103", "110", "120", "121"})
          archs += std::string("compute_") + a + "\n";
        return toolchain::ProbeOutput{0, archs, ""};
      }
      if (name == "g++-13") return toolchain::ProbeOutput{0, "g++-13 (Ubuntu 13.2.0-4ubuntu3) 13.2.0\n", ""};
      if (name.starts_with("python3"))
        return toolchain::ProbeOutput{0, python + "\n3.12.3\nsetuptools wheel build pip venv scikit_build_core\n", ""};
      return toolchain::ProbeOutput{0, "", ""};
    };
  }
};

}  // namespace

TEST_CASE("app: --cuda and --sm are each one rule", "[app]") {
  CHECK_FALSE(app::cuda_release("").has_value());
  CHECK(app::cuda_release("12.8")->str() == "12.8");
  for (const char* bad : {"13", "1.2.3", "abc"}) {
    try {
      app::cuda_release(bad);
      FAIL("accepted --cuda " << bad);
    } catch (const Failure& f) {
      CHECK(f.error.exit == Exit::bad_input);
      CHECK(has(f.error.message, "expected a CUDA release X.Y"));
    }
  }
  auto targets = app::sm_targets({"sm_90,120"}, arch::ArchData::shipped());
  REQUIRE(targets.ok());
  CHECK(targets->size() == 2);
  auto bad = app::sm_targets({"banana"}, arch::ArchData::shipped());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.starts_with("--sm: "));  // named once
  CHECK_FALSE(bad.error().message.starts_with("--sm: --sm"));
  CHECK(bad.error().context == std::vector<std::string>{"--sm"});  // the option is the error's context
  CHECK_FALSE(bad.error().reason().starts_with("--sm"));
}

TEST_CASE("app: --source-url file:// naming no folder says what is there, by the path's kind", "[app]") {
  test::TempDir tmp;
  auto file = tmp.write("repo.git", "x");
  fs::create_directory(tmp / "dir.git");
  auto refusal = [&](const fs::path& p) {
    app::ResolveArgs a;
    a.sm = {"90"};
    a.source_url = "file://" + p.string();
    try {
      app::request_from_args(a, app::Session{}.facts());
    } catch (const Failure& f) {
      CHECK(f.error.exit == Exit::bad_input);
      return f.error.message;
    }
    return std::string();
  };
  CHECK(has(refusal(file), "is a regular file, not a git repository's directory;"));
  CHECK(has(refusal(tmp / "none.git"), ": no such file or directory; a file:// URL"));
  fs::create_symlink(tmp / "gone", tmp / "dangling.git");
  CHECK(has(refusal(tmp / "dangling.git"), "is a symbolic link to nothing; a file:// URL"));
  CHECK(refusal(tmp / "dir.git").empty());  // a folder: its fetch says whether it is a repository
}

TEST_CASE("app: the stops before a build come from prepare", "[app]") {
  test::TempDir tmp;
  auto file = tmp.write("a-file", "x");
  CHECK(prepare::launch_stops(tmp / "cache", tmp / "out").empty());
  auto out = prepare::launch_stops(tmp / "cache", file);
  REQUIRE(out.size() == 1);
  CHECK(out.front().rule == rules::Id::out);
  auto store = prepare::store_required_stop("connection refused");
  CHECK(store.rule == rules::Id::store_required);
  CHECK(store.error.exit == Exit::missing_tool);
  CHECK(store.error.message == "--store-required: connection refused");
}

TEST_CASE("app: the matrix expands into typed jobs", "[app]") {
  FakeHost h;
  app::MatrixRequest q;
  q.sm = {"90,87"};
  q.recipe = "torch-2.14";
  app::Matrix m = app::expand_matrix(q, h.session);
  REQUIRE_FALSE(m.include.empty());
  for (const auto& j : m.include) {
    CHECK(j.recipe == "torch-2.14");
    CHECK((j.sm == "9.0" || j.sm == "8.7"));
    // 8.7 (an Orin) is where its newest JetPack puts it, sbsa; a matrix of two platforms names
    // each job's.
    CHECK(j.platform == (j.sm == "8.7" ? "sbsa" : "x86_64"));
    CHECK_FALSE(j.store.has_value());
  }
  CHECK(m.exit() == Exit::ok);
  CHECK(h.runner.calls().empty());
  // The document is the jobs' own fields.
  auto doc = m.to_json();
  REQUIRE(doc["include"].size() == m.include.size());
  CHECK(doc["include"][0]["sm"] == m.include[0].sm);
  CHECK(doc["include"][0]["arch_list"] == m.include[0].arch_list);
  CHECK_FALSE(doc.contains("stored"));
  CHECK(m.github().dump().starts_with("{\"include\":["));
  // Only one CUDA release: the jobs of the others are left out.
  q.cuda = m.include.front().cuda;
  for (const auto& j : app::expand_matrix(q, h.session).include) CHECK(j.cuda == q.cuda);
}

TEST_CASE("app: a refused combination is a typed refusal naming its rule", "[app]") {
  FakeHost h;
  app::MatrixRequest q;
  q.sm = {"120"};
  q.recipe = "torch-2.5";
  app::Matrix m = app::expand_matrix(q, h.session);
  CHECK(m.include.empty());
  REQUIRE_FALSE(m.refused.empty());
  CHECK(m.refused.front().rule == "toolkit-arch");
  CHECK(m.exit() == Exit::not_fine);
}

TEST_CASE("app: the set is resolved torch first, each dependent paired with it", "[app]") {
  FakeHost h;
  app::ResolveArgs a;
  a.sm = {"90"};
  a.recipe = "torch-2.14";
  auto set = app::resolve_set(a, {"torchvision"}, h.session);
  REQUIRE(set.size() == 2);
  CHECK(set[0].role == app::SetMember::Role::torch);
  CHECK(set[0].resolution.recipe.name == "torch-2.14");
  CHECK(set[1].role == app::SetMember::Role::dependent);
  CHECK(set[1].resolution.recipe.package == "torchvision");
  CHECK(set[1].args.cuda == set[0].resolution.toolchain.cuda.str());  // on torch's CUDA
  CHECK(app::pairing_json(set[1], set[0])["torch"]["recipe"] == "torch-2.14");
  CHECK(h.runner.calls().empty());
}

TEST_CASE("app: build_set gives each member's outcome, and a stopped torch leaves its dependents unbuilt", "[app]") {
  FakeHost h;
  app::BuildArgs b;
  b.resolve.sm = {"90"};
  b.resolve.recipe = "torch-2.14";
  b.out = h.tmp.write("out-is-a-file", "x").string();  // --out that cannot take a wheel: a launch stop
  app::Show show;
  app::SetOutcome set = app::build_set(b, {"torchvision"}, h.session, show, nullptr);
  REQUIRE(set.builds.size() == 2);
  REQUIRE(set.builds[0].outcome.has_value());
  REQUIRE(set.builds[0].error.has_value());
  CHECK(set.builds[0].error->exit == Exit::bad_input);  // prepare::launch_stops' "out"
  CHECK(set.builds[0].wheel().empty());
  CHECK_FALSE(set.builds[1].outcome.has_value());
  CHECK(set.builds[1].entry["error"] == "not built: the torch it builds against was not built");
  REQUIRE(set.error.has_value());
  CHECK(set.error->exit == Exit::bad_input);
  CHECK(set.doc["ok"] == false);
  CHECK(h.runner.calls().empty());  // stopped before any process
  CHECK(has(h.err.str(), "the set: torch"));
}

// The shipped facts are read once per session and passed down (app::Facts): a matrix resolves
// every job, a set resolves torch and its dependents, and each data file is still read once.
TEST_CASE("app: a command reads each shipped file once, however many resolutions it makes", "[app]") {
  FakeHost h;
  app::MatrixRequest q;
  q.sm = {"90,87,120"};
  app::Matrix m = app::expand_matrix(q, h.session);
  REQUIRE_FALSE(m.include.empty());
  app::ResolveArgs ra;
  ra.sm = {"90"};
  ra.recipe = "torchvision";
  auto set = app::resolve_set(ra, {}, h.session, nullptr);
  CHECK_FALSE(set.empty());
  const auto& reads = h.session.facts().reads();
  CHECK(reads.arch == 1);
  CHECK(reads.platforms == 1);
  CHECK(reads.jetpacks == 1);
  CHECK(reads.toolchains == 1);
  CHECK(reads.recipes == 1);
  CHECK(reads.library_specs <= 1);
  // Copies of the session share them.
  app::Session copy = h.session;
  CHECK(&copy.facts() == &h.session.facts());
}

// What resolution reads is the session's data root, read there once: a recipe only another root
// holds is a candidate for a session over that root and for no other.
TEST_CASE("app: a session's facts come from its own data root", "[app]") {
  test::TempDir tmp;
  const fs::path src = ARCHBUILD_SOURCE_DIR;
  for (const char* d : {"data", "toolchains", "recipes"}) fs::copy(src / d, tmp / d, fs::copy_options::recursive);
  fs::copy_file(tmp / "recipes" / "torch-2.9.toml", tmp / "recipes" / "mine.toml");
  app::Session other;
  other.shared_facts = std::make_shared<const app::Facts>(tmp.path());
  auto names = [](const std::vector<recipe::Recipe>& rs) {
    std::vector<std::string> out;
    for (const auto& r : rs) out.push_back(r.name);
    return out;
  };
  const auto theirs = names(other.facts().recipes());
  CHECK(std::count(theirs.begin(), theirs.end(), "mine") == 1);
  app::Session shipped;
  const auto ours = names(shipped.facts().recipes());
  CHECK(std::count(ours.begin(), ours.end(), "mine") == 0);
  CHECK(other.facts().search().arch == &other.facts().arch());
  CHECK(other.facts().reads().recipes == 1);
}
