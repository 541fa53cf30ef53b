// app/: the application's operations called as functions, without a process: this host is a
// folder of empty programs answered by a canned probe (app::Session::probe), the build's runner
// a strict run::ScriptedRunner (any command fails the test), notes and warnings a string stream.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/build.hpp"
#include "app/facts.hpp"
#include "app/inputs.hpp"
#include "app/matrix.hpp"
#include "app/set.hpp"
#include "mirror/make_wheel.hpp"
#include "prepare/prepare.hpp"
#include "run/scripted_runner.hpp"
#include "support/process.hpp"
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

namespace {

// The example set as tests/cli/test_stack_cli.cpp writes it: minitorch from the git repository
// make-example-repos made (a file:// URL, fetched by libgit2: no process), minivision from
// examples/ with its torch_recipe naming that minitorch.
struct ExampleSet {
  fs::path torch, dependent;
};

ExampleSet write_example_set(const test::TempDir& dir) {
  const fs::path examples = fs::path(ARCHBUILD_SOURCE_DIR) / "examples";
  // The repositories are test tooling (the git CLI): its PATH is the host's, not the FakeHost's.
  test::RunOptions o;
  o.env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  auto made = test::run("/bin/bash", {(fs::path(ARCHBUILD_SOURCE_DIR) / "tests/support/make-example-repos").string(),
                                      (dir / "repos").string()}, o);
  INFO(made.err);
  REQUIRE(made.status == 0);
  std::string torch = test::read_file(examples / "minitorch" / "recipe.toml");
  torch = std::regex_replace(torch, std::regex("\npath = \"\\.\"\n"),
                             "\nurl = \"file://" + (dir / "repos" / "minitorch").string() + "\"\n");
  std::string dep = test::read_file(examples / "minivision" / "recipe.toml");
  dep = std::regex_replace(dep, std::regex("\npath = \"\\.\"\n"), "\npath = \"" + (examples / "minivision").string() + "\"\n");
  dep = std::regex_replace(dep, std::regex("torch_recipe = \"[^\"]*\""), "torch_recipe = \"minitorch.toml\"");
  ExampleSet r{dir / "recipes" / "minitorch.toml", dir / "recipes" / "minivision.toml"};
  fs::create_directories(r.torch.parent_path());
  std::ofstream(r.torch) << torch;
  std::ofstream(r.dependent) << dep;
  return r;
}

// The build venv's probe (stages/venv.cpp: kProbe) answered as a venv holding `packages`.
run::ScriptedResponse venv_probe(const nlohmann::json& packages) {
  nlohmann::json doc = {{"python", "3.12.3"}, {"packages", packages}, {"where", nlohmann::json::object()},
                        {"requirements", nlohmann::json::array()}, {"path", nlohmann::json::array()}};
  return {{"ARCHBUILD-VENV-PROBE " + doc.dump()}};
}

// Every process archbuild starts to build the example set, answered without running anything:
// each member's build venv (python -m venv, pip, the probe of what it holds), then minitorch's
// setup.py steps and minivision's `python -m build`, each making a real tiny wheel where the
// real one would.
run::ScriptedRunner example_set_runner() {
  run::ScriptedRunner r;
  r.strict();  // a command not scripted here fails the build, naming it
  auto is_c = [](const std::string& code_part) {
    return [code_part](const run::Command& c) {
      return c.argv.size() > 2 && c.argv[1] == "-c" && c.argv[2].find(code_part) != std::string::npos;
    };
  };
  // The interpreter has pip: it installs into each venv with --python (no ensurepip copy).
  r.on(is_c("import pip"), {});
  // python -m venv WORK: the venv's python must exist (a reused venv without it is made again).
  run::ScriptedResponse venv;
  venv.effect = [](const run::Command& c) {
    fs::path python = fs::path(c.argv.back()) / "bin" / "python";
    fs::create_directories(python.parent_path());
    std::ofstream(python) << "";
    fs::permissions(python, fs::perms::owner_all, fs::perm_options::replace);
  };
  r.on({"python3.12", "-m", "venv"}, venv);
  // pip install of the requirements, and of minitorch's wheel into minivision's venv.
  r.on({"python3.12", "-m", "pip"}, {});
  // Probed once per venv, in build order: torch's holds its build tools, the dependent's also
  // the minitorch wheel installed into it.
  const nlohmann::json tools = {{"setuptools", "75.8.0"}, {"wheel", "0.45.1"}, {"build", "1.2.2"}};
  nlohmann::json with_torch = tools;
  with_torch["minitorch"] = "0.1.0+cu130.sm90";
  r.on(is_c("ARCHBUILD-VENV-PROBE"), venv_probe(tools), 1);
  r.on(is_c("ARCHBUILD-VENV-PROBE"), venv_probe(with_torch), 1);
  // minitorch (setup-py driver): configure, build, then bdist_wheel makes dist/*.whl with the
  // version archbuild gave it.
  r.on({"python", "setup.py", "build", "--cmake-only"}, {});
  r.on({"cmake", "--build"}, {{"[1/1] Linking"}});
  run::ScriptedResponse bdist;
  bdist.effect = [](const run::Command& c) {
    test::make_wheel(c.cwd / "dist", "minitorch", c.env.at("PYTORCH_BUILD_VERSION"), "minitorch");
  };
  r.on({"python", "setup.py", "bdist_wheel"}, bdist);
  // minivision (python-build driver): one call makes the wheel in --outdir.
  run::ScriptedResponse build;
  build.effect = [](const run::Command& c) {
    auto at = std::find(c.argv.begin(), c.argv.end(), "--outdir");
    REQUIRE(at + 1 < c.argv.end());
    fs::path outdir = *(at + 1);
    test::make_wheel(outdir.is_absolute() ? outdir : c.cwd / outdir, "minivision", c.env.at("BUILD_VERSION"), "minivision");
  };
  r.on({"python", "-m", "build"}, build);
  return r;
}

}  // namespace

// The set built as `wheel --with` builds it, as a function: torch's wheel first, the dependent
// against exactly that wheel; every process archbuild starts goes through the session's runner.
TEST_CASE("app: build_set builds torch then its dependent against that wheel, and a repeat runs nothing", "[app]") {
  test::TempDir dir;
  const ExampleSet recipes = write_example_set(dir);
  FakeHost h;
  h.runner = example_set_runner();
  app::BuildArgs b;
  b.resolve.sm = {"90"};
  b.resolve.recipe = recipes.torch.string();
  b.out = (dir / "out").string();
  b.compiler_cache = "none";
  b.no_validate = true;  // validation runs its own processes (run::capture), outside the runner
  b.progress = "plain";
  app::Show show;
  app::SetOutcome set = app::build_set(b, {recipes.dependent.string()}, h.session, show, nullptr);
  INFO(h.err.str() << set.doc.dump(2));
  REQUIRE_FALSE(set.error.has_value());
  REQUIRE(set.builds.size() == 2);
  for (const auto& m : set.builds) {
    REQUIRE(m.outcome.has_value());
    CHECK(m.outcome->ok());
    CHECK(m.outcome->from == app::BuildOutcome::From::built);
    CHECK(fs::exists(m.wheel()));
    CHECK(m.wheel().parent_path() == dir / "out");
  }
  const app::BuildOutcome& torch = *set.builds[0].outcome;
  const app::BuildOutcome& dep = *set.builds[1].outcome;
  CHECK(torch.wheel.filename() == "minitorch-0.1.0+cu130.sm90-py3-none-any.whl");
  CHECK(dep.wheel.filename().string().starts_with("minivision-0.1.0+src"));
  // The dependent's key holds the sha256 of the very torch wheel built first (its build venv's).
  std::ifstream manifest_file(dep.doc["manifest"].get<std::string>());
  auto manifest = nlohmann::json::parse(manifest_file);
  CHECK(manifest["plan"]["key_inputs"]["build_venv"]["wheels"][0]["sha256"] == torch.sha256);
  CHECK(manifest["manifest"]["build_venv"]["wheels"][0]["sha256"] == torch.sha256);
  // That wheel was installed into its build venv, from the file alone.
  auto installed = h.runner.calls_matching({"python3.12", "-m", "pip"});
  CHECK(std::any_of(installed.begin(), installed.end(), [&](const run::Command& c) {
    return std::find(c.argv.begin(), c.argv.end(), "--no-deps") != c.argv.end() && c.argv.back() == torch.wheel.string();
  }));
  // The document: both wheels, in build order.
  CHECK(set.doc["ok"] == true);
  REQUIRE(set.doc["wheels"].size() == 2);
  CHECK(set.doc["wheels"][0]["role"] == "torch");
  CHECK(set.doc["wheels"][0]["key"] == torch.key);
  CHECK(set.doc["wheels"][1]["role"] == "dependent");
  CHECK(set.doc["wheels"][1]["key"] == dep.key);

  // The same set again: both keys are finished, so nothing runs, not even pip.
  h.runner.clear_calls();
  app::SetOutcome again = app::build_set(b, {recipes.dependent.string()}, h.session, show, nullptr);
  REQUIRE_FALSE(again.error.has_value());
  REQUIRE(again.builds.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    REQUIRE(again.builds[i].outcome.has_value());
    CHECK(again.builds[i].outcome->from == app::BuildOutcome::From::reused);
    CHECK(again.builds[i].outcome->key == set.builds[i].outcome->key);
    CHECK(again.builds[i].outcome->sha256 == set.builds[i].outcome->sha256);
  }
  CHECK(h.runner.calls().empty());
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
