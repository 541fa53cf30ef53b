// stages: the wheel pipeline over a real file:// repository (libgit2) with a ScriptedRunner in
// place of cmake/ninja/setup.py: order, environment, stamps and resume, reuse, corruption,
// failure and validation — without building anything.
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "arch/arch_data.hpp"
#include "arch/parse.hpp"
#include "core/version.hpp"
#include "plan/plan.hpp"
#include "plan/resolve.hpp"
#include "run/interrupt.hpp"
#include "run/reporter.hpp"
#include "run/scripted_runner.hpp"
#include "stages/pipeline.hpp"
#include "stages/reproducible.hpp"
#include "stages/stage.hpp"
#include "binary/elf.hpp"
#include "store/atomic_file.hpp"
#include "store/key_record.hpp"
#include "store/launch_files.hpp"
#include "store/layout.hpp"
#include "mirror/make_wheel.hpp"
#include "support/shipped.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"
#include "toolchain/toolchain.hpp"

using namespace archbuild;
namespace fs = std::filesystem;

namespace {

Version V(const char* s) { return *Version::parse(s); }

// The example repositories (tests/support/make-example-repos), made once per test process.
std::string example_url(const std::string& project = "minitorch") {
  static test::TempDir dir;
  static bool made = false;
  if (!made) {
    auto r = test::run("/bin/bash", {std::string(ARCHBUILD_SOURCE_DIR) + "/tests/support/make-example-repos",
                                     (dir / "repos").string()});
    REQUIRE(r.status == 0);
    made = true;
  }
  return "file://" + (dir / "repos" / project).string();
}

plan::Plan plan_for(const std::string& targets, const std::string& url, const std::string& example = "minitorch",
                    std::optional<Version> cmake = std::nullopt, const std::string& recipe_file = "",
                    const plan::PlanOptions& options = {}) {
  toolchain::Host h;
  toolchain::Toolkit t;
  t.root = "/usr/local/cuda-13.0";
  t.nvcc = "/usr/local/cuda-13.0/bin/nvcc";
  t.version = V("13.0");
  t.nvcc_version = V("13.0.88");
  t.found_by = "test";
  h.toolkits = {t};
  toolchain::Compiler c;
  c.kind = toolchain::CompilerKind::gcc;
  c.version = V("12.2.0");
  c.path = "/usr/bin/g++-12";
  c.found_by = "test";
  h.compilers = {c};
  h.pythons = {toolchain::Python{"/usr/bin/python3", V("3.11.2"), "test"}};
  h.tools = {{"cmake", "/usr/bin/cmake"}, {"ninja", "/usr/bin/ninja"}, {"meson", "/usr/bin/meson"}};
  if (cmake) h.tool_versions["cmake"] = *cmake;
  plan::Inputs in;
  in.recipes = test::select_shipped(!recipe_file.empty() ? recipe_file
                                                          : std::string(ARCHBUILD_SOURCE_DIR) +
                                                                (example == "minitorch" ? "/examples/" : "/tests/fixtures/") +
                                                                example + "/recipe.toml")
                   .take();
  in.toolchains = toolchain::load_shipped().take();
  test::shipped_data(in);
  in.host = h;
  plan::Request req;
  req.targets = arch::parse_arch_list(targets, arch::ArchData::shipped()).take();
  req.source_url = url;
  auto r = plan::resolve(req, in);
  INFO(r.message);
  REQUIRE(r.ok());
  return plan::make_plan(r, test::with_shipped_specs(options)).take();
}

plan::Plan example_plan(const std::string& targets) { return plan_for(targets, example_url()); }

// A copy of the example repositories with one file of minitorch replaced and its tag v0.1.0
// moved onto that commit (the git CLI, in test tooling only).
std::string variant_url(const test::TempDir& dir, const std::string& file, const std::string& content) {
  auto r = test::run("/bin/bash", {std::string(ARCHBUILD_SOURCE_DIR) + "/tests/support/make-example-repos",
                                   (dir / "repos").string()});
  REQUIRE(r.status == 0);
  fs::path repo = dir / "repos/minitorch";
  dir.write("repos/minitorch/" + file, content);
  test::RunOptions o;
  o.env = {{"GIT_AUTHOR_NAME", "t"}, {"GIT_AUTHOR_EMAIL", "t@archbuild.invalid"}, {"GIT_COMMITTER_NAME", "t"},
           {"GIT_COMMITTER_EMAIL", "t@archbuild.invalid"}, {"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", dir.path().string()}};
  for (std::vector<std::string> args : {std::vector<std::string>{"add", "-A"},
                                        std::vector<std::string>{"commit", "-q", "-m", "variant"},
                                        std::vector<std::string>{"tag", "-f", "-a", "v0.1.0", "-m", "variant"}}) {
    args.insert(args.begin(), {"-C", repo.string()});
    auto g = test::run(test::which("git"), args, o);
    INFO(g.err);
    REQUIRE(g.status == 0);
  }
  return "file://" + repo.string();
}

// A scripted build: each step succeeds; the package step leaves dist/<wheel>.
run::ScriptedRunner happy_runner(const std::string& wheel_name = "minitorch-0.1.0+cu130.sm90-py3-none-any.whl",
                                 std::function<void(const run::Command&)> build_effect = {}) {
  run::ScriptedRunner r;
  run::ScriptedResponse package;
  package.lines = {"creating wheel"};
  // A real (tiny) wheel: the package stage rewrites it deterministically.
  std::string version = wheel_name.substr(std::string("minitorch-").size());
  version = version.substr(0, version.find('-'));
  package.effect = [version](const run::Command& c) { test::make_wheel(c.cwd / "dist", "minitorch", version, "minitorch"); };
  r.on([](const run::Command& c) { return c.argv.size() > 1 && c.argv[1] == "setup.py" && c.argv[2] == "bdist_wheel"; },
       package);
  run::ScriptedResponse build;
  build.lines = {"[1/3] Building CUDA object a.o", "[2/3] Building CUDA object b.o", "[3/3] Linking"};
  build.effect = std::move(build_effect);
  r.on({"/usr/bin/cmake", "--build"}, build);
  return r;
}

struct Env {
  test::TempDir dir;
  store::Layout layout{dir / "cache"};
  std::ostringstream progress;
  std::unique_ptr<run::Reporter> reporter = run::make_reporter(run::ReporterKind::plain, progress);
  stages::PipelineOptions options;
  Env() {
    options.out_dir = dir / "out";
    options.compiler_cache.kind = "none";
    options.retry.attempts = 1;
    options.libraries = &test::shipped_library_facts();
    options.getenv = [](const std::string& n) -> std::optional<std::string> {
      if (n == "HOME") return std::string("/home/test");
      return std::nullopt;
    };
  }
};

// What a validation that did not pass leaves: no wheel in --out, none in the key.
void check_nothing_delivered(const Env& e, const plan::Plan& plan) {
  CHECK_FALSE(fs::exists(e.options.out_dir / "minitorch-0.1.0+cu130.sm90-py3-none-any.whl"));
  store::KeyRecord rec(e.layout, plan->key);
  CHECK_FALSE(rec.wheel().take().has_value());
}

// The same command again, with a validation that passes.
auto run_with_passing_validation(Env& e, const plan::Plan& plan) {
  e.options.validate = [](const fs::path&) -> Result<nlohmann::json> { return nlohmann::json{{"ok", true}}; };
  auto runner = happy_runner();
  return stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
}

std::vector<std::string> stages_of(const run::ScriptedRunner& r) {
  std::vector<std::string> out;
  for (const auto& c : r.calls()) out.push_back(c.log.stem().string());
  return out;
}

}  // namespace

TEST_CASE("the pipeline runs the plan's steps in order, with the plan's environment", "[stages]") {
  Env e;
  auto plan = example_plan("9.0");
  auto runner = happy_runner();
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((r ? "" : r.error().message) << e.progress.str());
  REQUIRE(r.ok());
  CHECK_FALSE(r->reused);
  CHECK(r->ran == std::vector<std::string>{"fetch", "configure", "build", "package", "validate"});
  CHECK(stages_of(runner) == std::vector<std::string>{"configure", "build", "package"});
  const auto& configure = runner.calls().front();
  CHECK(configure.argv == std::vector<std::string>{"/usr/bin/python3", "setup.py", "build", "--cmake-only"});
  CHECK(configure.env.at("TORCH_CUDA_ARCH_LIST") == "9.0");
  CHECK(configure.env.at("CUDA_HOME") == "/usr/local/cuda-13.0");
  CHECK(configure.env.at("PYTORCH_BUILD_VERSION") == "0.1.0+cu130.sm90");
  CHECK(configure.env.at("HOME") == "/home/test");         // pass-through from the caller
  CHECK(configure.env.count("CMAKE_CUDA_COMPILER_LAUNCHER") == 0);  // --compiler-cache none
  fs::path src = e.layout.source_dir(plan->key);
  CHECK(fs::weakly_canonical(configure.cwd) == fs::weakly_canonical(src));
  // A real checkout, with its submodule.
  CHECK(fs::exists(src / "setup.py"));
  CHECK(fs::exists(src / "third_party" / "minidep" / "include" / "minidep" / "minidep.h"));
  // The wheel: in the store by hash and copied to --out; logs per stage.
  CHECK(fs::exists(r->out_wheel));
  CHECK(r->out_wheel.parent_path() == e.options.out_dir);
  CHECK(fs::exists(e.layout.wheel(r->stored.sha256)));
  CHECK(fs::exists(e.layout.log(plan->key, "build")));
  CHECK(test::read_file(e.layout.log(plan->key, "build")).find("[3/3] Linking") != std::string::npos);
  CHECK(r->manifest["manifest"]["source"]["commit"].get<std::string>().size() == 40);
  CHECK(r->manifest["manifest"]["arch_list"] == "9.0");
  CHECK(r->manifest["manifest"]["wheel"]["sha256"] == r->stored.sha256);
  CHECK(r->manifest["manifest"]["source"]["submodules"].size() == 1);
  // The provenance beside the wheel: recipe hash, commit and its time, the environment.
  auto beside = nlohmann::json::parse(test::read_file(r->out_wheel.string() + ".manifest.json"));
  CHECK(beside["wheel"]["sha256"] == r->stored.sha256);
  CHECK(beside["recipe"]["sha256"].get<std::string>().size() == 64);
  CHECK(beside["source"]["commit_time"] == 1735689600);  // make-example-repos' fixed date
  CHECK(beside["environment"]["SOURCE_DATE_EPOCH"] == "1735689600");
  CHECK(beside["environment"]["CFLAGS"].get<std::string>().find("-ffile-prefix-map=") == 0);
  CHECK(beside["build_key"] == plan->key);
  CHECK(beside["toolkit"]["nvcc_version"] == "13.0.88");  // the exact compiler, not only the release
}

TEST_CASE("a repeat of a built key runs nothing", "[stages]") {
  Env e;
  auto plan = example_plan("9.0");
  auto runner = happy_runner();
  REQUIRE(stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options).ok());
  fs::remove_all(e.options.out_dir);
  run::ScriptedRunner strict;
  strict.strict();
  auto again = stages::run_pipeline(plan, e.layout, strict, *e.reporter, e.options);
  REQUIRE(again.ok());
  CHECK(again->reused);
  CHECK(strict.calls().empty());
  CHECK(fs::exists(again->out_wheel));
}

TEST_CASE("a changed arch list is a new key with its own source and build tree", "[stages]") {
  Env e;
  auto p90 = example_plan("9.0");
  auto p80 = example_plan("8.0");
  CHECK(p90->key != p80->key);
  auto r1 = happy_runner();
  REQUIRE(stages::run_pipeline(p90, e.layout, r1, *e.reporter, e.options).ok());
  auto r2 = happy_runner("minitorch-0.1.0+cu130.sm80-py3-none-any.whl");
  auto second = stages::run_pipeline(p80, e.layout, r2, *e.reporter, e.options);
  REQUIRE(second.ok());
  CHECK_FALSE(second->reused);
  CHECK(r2.calls().front().env.at("TORCH_CUDA_ARCH_LIST") == "8.0");
  CHECK(fs::exists(e.layout.source_dir(p80->key)));
  CHECK(e.layout.source_dir(p80->key) != e.layout.source_dir(p90->key));
}

TEST_CASE("a failed stage is exit 4 with the log tail, the rerun resumes there", "[stages]") {
  Env e;
  auto plan = example_plan("9.0");
  run::ScriptedRunner failing;
  run::ScriptedResponse broken;
  broken.lines = {"[1/2] Building CUDA object a.o", "a.cu(3): error: identifier \"oops\" is undefined"};
  broken.exit_status = 1;
  failing.on({"/usr/bin/cmake", "--build"}, broken);
  auto r = stages::run_pipeline(plan, e.layout, failing, *e.reporter, e.options);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == Exit::build_failed);
  CHECK(r.error().message.find("build stage failed") != std::string::npos);
  CHECK(r.error().message.find("build.log") != std::string::npos);
  CHECK(e.progress.str().find("identifier \"oops\"") != std::string::npos);  // the tail was shown
  CHECK_FALSE(fs::exists(e.options.out_dir));
  // The rerun starts at build: no fetch, no configure.
  auto runner = happy_runner();
  auto again = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE(again.ok());
  CHECK(again->resumed_past == std::vector<std::string>{"fetch", "configure"});
  CHECK(stages_of(runner) == std::vector<std::string>{"build", "package"});
}

// recipe::Stage: the dispatch is a switch over the enum, one function per stage; a stamp the
// record holds under a name that is no stage stops the run instead of being taken for validate.
TEST_CASE("each stage dispatches to its own function", "[stages]") {
  CHECK(stages::stage_function(recipe::Stage::fetch) == &stages::fetch_stage);
  CHECK(stages::stage_function(recipe::Stage::configure) == &stages::configure_stage);
  CHECK(stages::stage_function(recipe::Stage::build) == &stages::build_stage);
  CHECK(stages::stage_function(recipe::Stage::package) == &stages::package_stage);
  CHECK(stages::stage_function(recipe::Stage::validate) == &stages::validate_stage);
  CHECK(stages::stage_names() == std::vector<std::string>{"fetch", "configure", "build", "package", "validate"});
}

TEST_CASE("a stage name in the key record that is no stage is refused, never run as validate", "[stages]") {
  Env e;
  auto plan = example_plan("9.0");
  run::ScriptedRunner failing;
  run::ScriptedResponse broken;
  broken.exit_status = 1;
  failing.on({"/usr/bin/cmake", "--build"}, broken);
  REQUIRE_FALSE(stages::run_pipeline(plan, e.layout, failing, *e.reporter, e.options).ok());
  store::KeyRecord rec(e.layout, plan->key);
  auto where = stages::resume_point(rec);
  REQUIRE(where.ok());
  CHECK(*where == recipe::Stage::build);
  REQUIRE(rec.mark_done("install").ok());
  auto refused = stages::resume_point(rec);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().exit == Exit::bad_input);
  CHECK(refused.error().message.find("names the stage \"install\", which archbuild does not have") != std::string::npos);
  CHECK(refused.error().message.find(rec.path().string()) != std::string::npos);
  auto runner = happy_runner();
  auto again = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().exit == Exit::bad_input);
  CHECK(runner.calls().empty());  // nothing ran: not the build, not validate
}

TEST_CASE("a stamp without its source tree does not count", "[stages]") {
  Env e;
  auto plan = example_plan("9.0");
  run::ScriptedRunner failing;
  run::ScriptedResponse broken;
  broken.exit_status = 2;
  failing.on({"/usr/bin/cmake", "--build"}, broken);
  REQUIRE_FALSE(stages::run_pipeline(plan, e.layout, failing, *e.reporter, e.options).ok());
  fs::remove_all(e.layout.source_dir(plan->key));
  auto runner = happy_runner();
  auto again = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE(again.ok());
  CHECK(again->ran.front() == "fetch");
  CHECK(stages_of(runner) == std::vector<std::string>{"configure", "build", "package"});
}

TEST_CASE("a corrupted cached wheel is discarded and repackaged", "[stages]") {
  Env e;
  auto plan = example_plan("9.0");
  auto runner = happy_runner();
  auto first = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE(first.ok());
  {
    std::ofstream f(e.layout.wheel(first->stored.sha256), std::ios::app);
    f << "bit rot";
  }
  auto again_runner = happy_runner();
  auto again = stages::run_pipeline(plan, e.layout, again_runner, *e.reporter, e.options);
  REQUIRE(again.ok());
  CHECK_FALSE(again->reused);
  CHECK_FALSE(again->notes.empty());
  CHECK(stages_of(again_runner) == std::vector<std::string>{"package"});
  CHECK(again->stored.sha256 == first->stored.sha256);  // the same bytes, rebuilt
}

TEST_CASE("a failed validation keeps the wheel out of --out and out of the key", "[stages]") {
  Env e;
  auto plan = example_plan("9.0");
  auto runner = happy_runner();
  e.options.validate = [](const fs::path&) -> Result<nlohmann::json> {
    return Error::not_fine("validation: no kernel image for 9.0");
  };
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == Exit::not_fine);
  check_nothing_delivered(e, plan);
  // Passing validation afterwards publishes it, with the report in the manifest.
  auto again = run_with_passing_validation(e, plan);
  REQUIRE(again.ok());
  CHECK(again->manifest["validation"]["ok"] == true);
  CHECK(fs::exists(again->out_wheel));
}

TEST_CASE("an interrupted stage stops the pipeline and says how to resume", "[stages]") {
  Env e;
  auto plan = example_plan("9.0");
  run::ScriptedRunner r;
  run::ScriptedResponse stop;
  stop.interrupted = true;
  r.on({"/usr/bin/cmake", "--build"}, stop);
  auto res = stages::run_pipeline(plan, e.layout, r, *e.reporter, e.options);
  REQUIRE_FALSE(res.ok());
  CHECK(res.error().message.find("interrupted") != std::string::npos);
  CHECK_FALSE(fs::exists(e.options.out_dir));
}

TEST_CASE("Ctrl-C during validation is an interrupt, not a verdict, and the next run resumes at validate",
          "[stages]") {
  struct Reset {
    ~Reset() { run::reset_interrupt(); }
  } reset;
  Env e;
  auto plan = example_plan("9.0");
  // Signalled with its process group, pip dies of KeyboardInterrupt (a failed import); signalled
  // alone, archbuild lets the check finish and it passes. Either way: interrupted, exit 4.
  std::vector<std::function<Result<nlohmann::json>()>> outcomes = {
      [] { return Result<nlohmann::json>(Error::not_fine("validation failed: import: pip install failed: KeyboardInterrupt")); },
      [] { return Result<nlohmann::json>(nlohmann::json{{"ok", true}}); }};
  for (const auto& outcome : outcomes) {
    e.options.validate = [&](const fs::path&) -> Result<nlohmann::json> {
      run::request_interrupt(SIGINT);
      return outcome();
    };
    auto runner = happy_runner();
    auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
    run::reset_interrupt();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit == Exit::build_failed);
    CHECK_THAT(r.error().message, Catch::Contains("validate stage interrupted") &&
                                      Catch::Contains("run the same command again to resume at validate"));
    check_nothing_delivered(e, plan);
  }
  // The same command again: only validate runs.
  auto again = run_with_passing_validation(e, plan);
  REQUIRE(again.ok());
  CHECK(again->ran == std::vector<std::string>{"validate"});
  CHECK(fs::exists(again->out_wheel));
}

TEST_CASE("an unreachable repository fails the fetch, naming the URL, leaving nothing", "[stages]") {
  Env e;
  auto missing = plan_for("9.0", "file://" + (e.dir / "no-such-repo").string());
  run::ScriptedRunner r;
  r.strict();
  auto res = stages::run_pipeline(missing, e.layout, r, *e.reporter, e.options);
  REQUIRE_FALSE(res.ok());
  CHECK(res.error().message.find("no-such-repo") != std::string::npos);
  CHECK(r.calls().empty());
  CHECK_FALSE(fs::exists(e.layout.source_dir(missing->key)));
  CHECK_FALSE(fs::exists(e.options.out_dir));
}

TEST_CASE("archbuild's CUDA launcher goes in front of ccache, for this key's source tree", "[stages]") {
  Env e;
  e.options.archbuild_exe = "/opt/archbuild/bin/archbuild";
  e.options.compiler_cache.kind = "ccache";
  e.options.compiler_cache.program = "/usr/bin/ccache";
  e.options.compiler_cache.dir = e.dir / "ccache";
  // The caller's own settings pass through; archbuild's own win where they overlap.
  e.options.compiler_cache.settings = {{"CCACHE_PREFIX", "distcc"}, {"DISTCC_HOSTS", "localhost/2"},
                                       {"CCACHE_BASEDIR", "/home/me"}};
  auto plan = example_plan("9.0");
  auto runner = happy_runner();
  REQUIRE(stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options).ok());
  auto calls = runner.calls();
  auto it = std::find_if(calls.begin(), calls.end(), [](const run::Command& c) { return c.log.stem() == "build"; });
  REQUIRE(it != calls.end());
  const run::Command& build = *it;
  fs::path tree = fs::weakly_canonical(e.layout.source_dir(plan->key));
  CHECK(build.env.at("CMAKE_CUDA_COMPILER_LAUNCHER") ==
        "/opt/archbuild/bin/archbuild;cuda-launch;--tree;" + tree.string() + ";--;/usr/bin/ccache");
  CHECK(build.env.at("CMAKE_CXX_COMPILER_LAUNCHER") == "/usr/bin/ccache");
  CHECK(build.env.at("CXXFLAGS") == "-ffile-prefix-map=" + tree.string() + "=/archbuild/src");
  CHECK(build.env.at("CCACHE_IGNOREOPTIONS") == "-Xcompiler=-ffile-prefix-map=*");
  CHECK(build.env.at("CCACHE_PREFIX") == "distcc");
  CHECK(build.env.at("DISTCC_HOSTS") == "localhost/2");
  CHECK(build.env.at("CCACHE_BASEDIR") == "/");
}

TEST_CASE("a tree that forwards its environment as one CMake list gets archbuild's launchers through the CMake seed",
          "[stages]") {
  test::TempDir tmp;
  // The example's recipe with [build] forwards_env_as_list (as torch-2.12 and torch-2.13 have it).
  std::string text = test::read_file(std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml");
  auto at = text.find("[build]\n");
  REQUIRE(at != std::string::npos);
  text.insert(at + 8, "forwards_env_as_list = true\n");
  fs::path recipe = tmp.write("lists/recipe.toml", text);
  for (bool forwards : {true, false}) {
    INFO("forwards_env_as_list " << forwards);
    Env e;  // a cache of its own: the flag is not part of the key (it does not change the build's output)
    e.options.archbuild_exe = "/opt/archbuild/bin/archbuild";
    e.options.compiler_cache.kind = "ccache";
    e.options.compiler_cache.program = "/usr/bin/ccache";
    e.options.compiler_cache.dir = e.dir / "ccache";
    auto plan = forwards ? plan_for("9.0", example_url(), "minitorch", std::nullopt, recipe.string()) : example_plan("9.0");
    auto runner = happy_runner();
    REQUIRE(stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options).ok());
    auto calls = runner.calls();
    auto it = std::find_if(calls.begin(), calls.end(), [](const run::Command& c) { return c.log.stem() == "configure"; });
    REQUIRE(it != calls.end());
    fs::path seed = e.layout.cmake_seed(plan->key);
    if (!forwards) {
      CHECK(it->env.count("CMAKE_TOOLCHAIN_FILE") == 0);
      CHECK_FALSE(fs::exists(seed));
      continue;
    }
    REQUIRE(it->env.count("CMAKE_TOOLCHAIN_FILE") == 1);
    CHECK(it->env.at("CMAKE_TOOLCHAIN_FILE") == seed.string());
    REQUIRE(fs::exists(seed));
    const std::string seeded = test::read_file(seed);
    CHECK(seeded.find("set(CMAKE_CUDA_COMPILER_LAUNCHER \"" + it->env.at("CMAKE_CUDA_COMPILER_LAUNCHER") +
                            "\" CACHE STRING") != std::string::npos);
    CHECK(seeded.find("CMAKE_CXX_COMPILER_LAUNCHER") == std::string::npos);  // one path: no list to cut
  }
}

TEST_CASE("a rerun whose compiler launchers changed configures again", "[stages]") {
  Env e;
  e.options.archbuild_exe = "/opt/archbuild-1/bin/archbuild";
  auto plan = example_plan("9.0");
  run::ScriptedRunner failing;
  run::ScriptedResponse broken;
  broken.exit_status = 1;
  failing.on({"/usr/bin/cmake", "--build"}, broken);
  REQUIRE_FALSE(stages::run_pipeline(plan, e.layout, failing, *e.reporter, e.options).ok());
  // The same launchers: the rerun resumes at build.
  run::ScriptedRunner failing_again;
  failing_again.on({"/usr/bin/cmake", "--build"}, broken);
  REQUIRE_FALSE(stages::run_pipeline(plan, e.layout, failing_again, *e.reporter, e.options).ok());
  CHECK(stages_of(failing_again) == std::vector<std::string>{"build"});
  // archbuild moved (an upgrade): CMake would keep running the old path, so configure again.
  e.options.archbuild_exe = "/opt/archbuild-2/bin/archbuild";
  auto runner = happy_runner();
  auto again = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE(again.ok());
  CHECK(again->resumed_past == std::vector<std::string>{"fetch"});
  CHECK(stages_of(runner) == std::vector<std::string>{"configure", "build", "package"});
  CHECK(e.progress.str().find("changed since this tree was configured: configuring again") != std::string::npos);
}

TEST_CASE("the caller's environment: the allowlist passes (prefixes too), the plan's own values win", "[stages]") {
  Env e;
  auto plan = example_plan("9.0");
  std::map<std::string, std::string> caller = {{"HOME", "/home/test"},          {"CUDNN_ROOT", "/opt/cudnn"},
                                               {"https_proxy", "http://p:3128"}, {"PIP_INDEX_URL", "http://mirror/simple"},
                                               {"SECRET_TOKEN", "x"},           {"TORCH_CUDA_ARCH_LIST", "8.0"},
                                               {"CMAKE_PREFIX_PATH", "/opt/magma"}};
  e.options.getenv = [caller](const std::string& n) -> std::optional<std::string> {
    auto it = caller.find(n);
    if (it == caller.end()) return std::nullopt;
    return it->second;
  };
  e.options.env_names = [caller] {
    std::vector<std::string> names;
    for (const auto& [k, v] : caller) names.push_back(k);
    return names;
  };
  auto env = stages::step_environment(plan, e.options);
  CHECK(env.at("CUDNN_ROOT") == "/opt/cudnn");
  CHECK(env.at("https_proxy") == "http://p:3128");
  CHECK(env.at("PIP_INDEX_URL") == "http://mirror/simple");
  CHECK(env.at("CMAKE_PREFIX_PATH") == "/opt/magma");
  CHECK(env.count("SECRET_TOKEN") == 0);                  // not on the allowlist
  CHECK(env.at("TORCH_CUDA_ARCH_LIST") == "9.0");         // the plan's, not the shell's
}

// ---- the PEP 517 drivers: one `python -m build` step compiles and makes the wheel.

namespace {

bool is_pep517_build(const run::Command& c) { return c.argv.size() > 2 && c.argv[1] == "-m" && c.argv[2] == "build"; }

// `python -m build` as the backend would run it: configures build/ (CMakeCache.txt, then
// build.ninja when the configure finishes) and writes the wheel into dist/.
run::ScriptedResponse pep517_build(bool configure_finishes = true, bool wheel = true, int exit_status = 0) {
  run::ScriptedResponse r;
  r.lines = {"* Building wheel...", "[1/2] Building CUDA object a.o", "[2/2] Linking"};
  r.exit_status = exit_status;
  r.effect = [=](const run::Command& c) {
    fs::create_directories(c.cwd / "build");
    std::ofstream(c.cwd / "build" / "CMakeCache.txt") << "CMAKE_GENERATOR:INTERNAL=Ninja\n";
    if (configure_finishes) std::ofstream(c.cwd / "build" / "build.ninja") << "# generated\n";
    if (wheel) test::make_wheel(c.cwd / "dist", "minitorch", "0.1.0+cu130.sm90", "minitorch");
  };
  return r;
}

}  // namespace

TEST_CASE("python-build: the wheel of the build step is the one the package stage stores", "[stages][drivers]") {
  Env e;
  auto plan = plan_for("9.0", example_url("minitorch-pep517"), "minitorch-pep517");
  CHECK(plan->wheel_stage == recipe::Stage::build);
  run::ScriptedRunner runner;
  runner.on(is_pep517_build, pep517_build()).strict();
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((r ? "" : r.error().message) << e.progress.str());
  REQUIRE(r.ok());
  CHECK(r->ran == std::vector<std::string>{"fetch", "configure", "build", "package", "validate"});
  CHECK(stages_of(runner) == std::vector<std::string>{"build"});  // nothing faked for configure or package
  CHECK(r->filename == "minitorch-0.1.0+cu130.sm90-py3-none-any.whl");
  CHECK(fs::exists(e.options.out_dir / r->filename));
  CHECK(e.progress.str().find("the backend configures in the build step") != std::string::npos);
}

TEST_CASE("scikit-build-core: the step passes the plan's config settings, the build tree persists", "[stages][drivers]") {
  Env e;
  auto plan = plan_for("9.0", example_url("minitorch-skbuild"), "minitorch-skbuild");
  run::ScriptedRunner runner;
  runner.on(is_pep517_build, pep517_build()).strict();
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((r ? "" : r.error().message) << e.progress.str());
  REQUIRE(r.ok());
  REQUIRE(runner.calls().size() == 1);
  CHECK(runner.calls()[0].argv ==
        std::vector<std::string>{"/usr/bin/python3", "-m", "build", "--wheel", "--no-isolation", "--outdir", "dist", "-C",
                                 "build-dir=build", "."});
  CHECK(fs::exists(e.layout.source_dir(plan->key) / "build" / "build.ninja"));
}

TEST_CASE("PEP 517 drivers: a half-configured tree is removed before the build step, a configured one kept",
          "[stages][drivers]") {
  auto configured_at_call = [](run::ScriptedRunner& runner) {
    auto seen = std::make_shared<std::vector<bool>>();
    run::ScriptedResponse probe = pep517_build();
    auto inner = probe.effect;
    probe.effect = [seen, inner](const run::Command& c) {
      seen->push_back(fs::exists(c.cwd / "build" / "CMakeCache.txt"));
      inner(c);
    };
    runner.on(is_pep517_build, probe);
    return seen;
  };
  for (bool finished : {false, true}) {
    DYNAMIC_SECTION((finished ? "configure finished, build failed" : "configure failed")) {
      Env e;
      auto plan = plan_for("9.0", example_url("minitorch-skbuild"), "minitorch-skbuild");
      run::ScriptedRunner failing;
      failing.on(is_pep517_build, pep517_build(finished, false, 1));
      auto r = stages::run_pipeline(plan, e.layout, failing, *e.reporter, e.options);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().exit == Exit::build_failed);
      run::ScriptedRunner runner;
      auto seen = configured_at_call(runner);
      auto again = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
      INFO((again ? "" : again.error().message) << e.progress.str());
      REQUIRE(again.ok());
      CHECK(again->resumed_past == std::vector<std::string>{"fetch", "configure"});
      REQUIRE(seen->size() == 1);
      CHECK(seen->front() == finished);  // kept only when its configure had finished
      CHECK((e.progress.str().find("its configure did not finish") != std::string::npos) == !finished);
    }
  }
}

namespace {

// `python -m build` over meson-python as it would run: `meson setup` makes build/meson-private
// first and build/build.ninja when it finishes, meson-python keeps its native file in the tree.
run::ScriptedResponse meson_build(bool configure_finishes = true, bool wheel = true, int exit_status = 0) {
  run::ScriptedResponse r;
  r.lines = {"+ meson setup", "[1/3] Compiling C++ object m.o", "[2/3] Compiling Cuda object k.o", "[3/3] Linking"};
  r.exit_status = exit_status;
  r.effect = [=](const run::Command& c) {
    fs::create_directories(c.cwd / "build" / "meson-private");
    std::ofstream(c.cwd / ".mesonpy-native-file.ini") << "[binaries]\npython = '/usr/bin/python3'\n";
    if (configure_finishes) std::ofstream(c.cwd / "build" / "build.ninja") << "# generated\n";
    if (wheel) test::make_wheel(c.cwd / "dist", "minimeson", "0.1.0+cu130.sm90", "minimeson");
  };
  return r;
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("meson-python: archbuild's launchers reach Meson through the native file its config setting names",
          "[stages][drivers]") {
  Env e;
  e.options.archbuild_exe = "/opt/archbuild/bin/archbuild";
  e.options.compiler_cache.kind = "ccache";
  e.options.compiler_cache.program = "/usr/bin/ccache";
  e.options.compiler_cache.dir = e.dir / "ccache";
  auto plan = plan_for("9.0", example_url("minimeson"), "minimeson");
  run::ScriptedRunner runner;
  runner.on(is_pep517_build, meson_build()).strict();
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((r ? "" : r.error().message) << e.progress.str());
  REQUIRE(r.ok());
  auto calls = runner.calls();  // and ccache --print-stats, before and after
  auto it = std::find_if(calls.begin(), calls.end(), is_pep517_build);
  REQUIRE(it != calls.end());
  const run::Command& build = *it;
  CHECK(build.argv == std::vector<std::string>{"/usr/bin/python3", "-m", "build", "--wheel", "--no-isolation", "--outdir",
                                               "dist", "-C", "builddir=build", "-C",
                                               "setup-args=--native-file=$ARCHBUILD_MESON_NATIVE_FILE", "."});
  REQUIRE(build.env.count("ARCHBUILD_MESON_NATIVE_FILE"));
  const fs::path native = build.env.at("ARCHBUILD_MESON_NATIVE_FILE");
  CHECK(native == store::meson_native_file(e.layout, plan->key));
  // The chains CMake would get, each followed by the compiler.
  fs::path tree = fs::weakly_canonical(e.layout.source_dir(plan->key));
  const std::string text = file_text(native);
  INFO(text);
  CHECK(text.find("\ncuda = ['/opt/archbuild/bin/archbuild', 'cuda-launch', '--tree', '" + tree.string() +
                  "', '--', '/usr/bin/ccache', '/usr/local/cuda-13.0/bin/nvcc']\n") != std::string::npos);
  CHECK(text.find("\ncpp = ['/usr/bin/ccache', '/usr/bin/g++-12']\n") != std::string::npos);
  CHECK(r->filename == "minimeson-0.1.0+cu130.sm90-py3-none-any.whl");
}

TEST_CASE("meson-python: a half-configured Meson tree and meson-python's native file are removed before the build step",
          "[stages][drivers]") {
  for (bool finished : {false, true}) {
    DYNAMIC_SECTION((finished ? "configure finished, build failed" : "configure failed")) {
      Env e;
      auto plan = plan_for("9.0", example_url("minimeson"), "minimeson");
      run::ScriptedRunner failing;
      failing.on(is_pep517_build, meson_build(finished, false, 1));
      REQUIRE_FALSE(stages::run_pipeline(plan, e.layout, failing, *e.reporter, e.options).ok());
      auto seen = std::make_shared<std::vector<bool>>();
      run::ScriptedResponse probe = meson_build();
      auto inner = probe.effect;
      probe.effect = [seen, inner](const run::Command& c) {
        seen->push_back(fs::exists(c.cwd / "build" / "meson-private"));
        seen->push_back(fs::exists(c.cwd / ".mesonpy-native-file.ini"));
        inner(c);
      };
      run::ScriptedRunner runner;
      runner.on(is_pep517_build, probe);
      auto again = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
      INFO((again ? "" : again.error().message) << e.progress.str());
      REQUIRE(again.ok());
      CHECK(*seen == std::vector<bool>{finished, finished});  // kept only when its configure had finished
      CHECK((e.progress.str().find("meson-private without build.ninja (its configure did not finish)") !=
             std::string::npos) == !finished);
    }
  }
}

TEST_CASE("PEP 517 drivers: a wheel gone before the package stage reruns the build stage", "[stages][drivers]") {
  Env e;
  auto plan = plan_for("9.0", example_url("minitorch-pep517"), "minitorch-pep517");
  run::ScriptedRunner no_wheel;
  no_wheel.on(is_pep517_build, pep517_build(true, false));
  auto r = stages::run_pipeline(plan, e.layout, no_wheel, *e.reporter, e.options);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("the build stage made no wheel") != std::string::npos);
  run::ScriptedRunner runner;
  runner.on(is_pep517_build, pep517_build());
  auto again = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((again ? "" : again.error().message) << e.progress.str());
  REQUIRE(again.ok());
  CHECK(stages_of(runner) == std::vector<std::string>{"build"});
}

// A record that takes writes until the build stamp is written, and none after: the package
// stage's clear of that stamp (its wheel is gone) and its build report cannot be recorded.
struct FailingAfterBuildStamp {
  bool failing = false;
  store::KeyRecord::Writer writer() {
    return [this](const fs::path& path, std::string_view text) -> Result<Ok> {
      if (failing) return Error::bad_input(path.string() + ": no space left on device (the test's writer)");
      auto doc = nlohmann::json::parse(text);
      if (auto w = store::write_file_atomic(path, text); !w) return w;
      failing = doc.contains("stages") && doc["stages"].contains("build");
      return Ok{};
    };
  }
};

TEST_CASE("a stamp whose clear could not be written is not trusted by the next run, and the failed write is a warning",
          "[stages][drivers]") {
  Env e;
  auto plan = plan_for("9.0", example_url("minitorch-pep517"), "minitorch-pep517");
  FailingAfterBuildStamp disk;
  e.options.record_writer = disk.writer();
  run::ScriptedRunner no_wheel;
  no_wheel.on(is_pep517_build, pep517_build(true, false));
  auto r = stages::run_pipeline(plan, e.layout, no_wheel, *e.reporter, e.options);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("the build stage made no wheel") != std::string::npos);
  REQUIRE(disk.failing);
  const std::string said = e.progress.str();
  CHECK(said.find("warning: could not record that the build stage must run again in " +
                  e.layout.manifest(plan->key).string() + ": ") != std::string::npos);
  // The build stamp the clear meant to remove is still there ...
  store::KeyRecord rec(e.layout, plan->key);
  REQUIRE(rec.done("build").take());
  // ... and the next run, which can write again, checks it: no wheel in dist/, so build runs again.
  e.options.record_writer = {};
  run::ScriptedRunner runner;
  runner.on(is_pep517_build, pep517_build());
  auto again = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((again ? "" : again.error().message) << e.progress.str());
  REQUIRE(again.ok());
  CHECK(stages_of(runner) == std::vector<std::string>{"build"});
  CHECK(again->ran == std::vector<std::string>{"build", "package", "validate"});
  CHECK(e.progress.str().find("the build stamp is not trusted (no wheel in ") != std::string::npos);
}

TEST_CASE("a package stamp whose stored wheel is gone is not trusted: the next run packages again", "[stages]") {
  Env e;
  auto plan = example_plan("9.0");
  auto runner = happy_runner();
  e.options.validate = [](const fs::path&) -> Result<nlohmann::json> { return Error::not_fine("validation: no"); };
  auto first = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE_FALSE(first.ok());
  // The stored wheel the package stamp names goes (gc, a hand, a failed clear before).
  store::KeyRecord rec(e.layout, plan->key);
  auto sha = rec.read().take().value("/stages/package/wheel_sha256"_json_pointer, std::string());
  REQUIRE_FALSE(sha.empty());
  fs::remove(e.layout.wheel(sha));
  auto again = run_with_passing_validation(e, plan);
  INFO((again ? "" : again.error().message) << e.progress.str());
  REQUIRE(again.ok());
  CHECK(again->ran == std::vector<std::string>{"package", "validate"});
  CHECK(again->stored.sha256 == sha);
  CHECK(e.progress.str().find("the package stamp is not trusted (") != std::string::npos);
}

TEST_CASE("the tree's contract is read after fetch, kept in the fetch stamp and the manifest", "[stages][contract]") {
  Env e;
  auto plan = plan_for("9.0", example_url(), "minitorch", V("3.25.1"));
  auto runner = happy_runner();
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((r ? "" : r.error().message) << e.progress.str());
  REQUIRE(r.ok());
  auto doc = store::KeyRecord(e.layout, plan->key).read();
  REQUIRE(doc.ok());
  auto c = (*doc)["stages"]["fetch"]["contract"];
  CHECK(c["backend"]["name"] == "setuptools.build_meta");
  CHECK(c["cmake_minimum"]["min"] == "3.18");
  CHECK(c["version"]["value"] == "0.1.0");
  CHECK(c["pins"][0] == nlohmann::json({{"name", "minidep"}, {"ref", "v1.0"}, {"file", ".ci/docker/ci_commit_pins/minidep.txt"}}));
  for (const auto& check : c["checks"]) CHECK(check["ok"] == true);
  CHECK(r->manifest["manifest"]["contract"] == c);
}

TEST_CASE("a recipe driver the tree's backend contradicts stops before configure, exit 2", "[stages][contract]") {
  Env e;
  test::TempDir repos;
  auto url = variant_url(repos, "pyproject.toml",
                         "[build-system]\nrequires = [\"scikit-build-core>=1.0\"]\nbuild-backend = \"scikit_build_core.build\"\n");
  auto plan = plan_for("9.0", url);
  auto runner = happy_runner();
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == Exit::bad_input);
  CHECK_THAT(r.error().message, Catch::StartsWith("pyproject.toml:3: the build backend is scikit_build_core.build") &&
                                    Catch::Contains("setup.py's build commands fail in this era"));
  CHECK(runner.calls().empty());  // configure never started
  // Fetch is not stamped: a rerun reads and checks the tree again, and refuses again.
  auto again = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().exit == Exit::bad_input);
  CHECK(runner.calls().empty());
}

TEST_CASE("cmake_minimum_required above the plan's cmake stops before configure, exit 3", "[stages][contract]") {
  Env e;
  test::TempDir repos;
  auto url = variant_url(repos, "CMakeLists.txt", "cmake_minimum_required(VERSION 3.30...3.31)\nproject(minitorch)\n");
  auto plan = plan_for("9.0", url, "minitorch", V("3.25.1"));
  auto runner = happy_runner();
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == Exit::missing_tool);
  CHECK_THAT(r.error().message, Catch::StartsWith("CMakeLists.txt:1: cmake_minimum_required(VERSION 3.30)") &&
                                    Catch::Contains("(3.25.1 at /usr/bin/cmake)"));
  CHECK(runner.calls().empty());
}

// ---- the package stage's repair, through the pipeline ---------------------------------

TEST_CASE("the package stage repairs a wheel linking libcudart: RUNPATH, Requires-Dist, tag, manifest",
          "[stages][portable]") {
  if (test::which("gcc").empty() || test::which("patchelf").empty() ||
      !fs::exists("/usr/local/cuda/lib64/libcudart.so")) {
    WARN("##archbuild-skip## needs gcc, patchelf and /usr/local/cuda/lib64/libcudart.so");
    return;
  }
  Env e;
  // A library as PyTorch's build leaves it: libcudart found through the toolkit's RUNPATH.
  auto src = e.dir.write("k.c", "extern int cudaGetDeviceCount(int*);\nint k(void) { int n = 0; return cudaGetDeviceCount(&n); }\n");
  auto so = e.dir / "libk.so";
  auto cc = test::run(test::which("gcc"), {"-shared", "-fPIC", "-o", so.string(), src.string(), "-L/usr/local/cuda/lib64",
                                           "-lcudart", "-Wl,-rpath,/usr/local/cuda/lib64"});
  REQUIRE(cc.status == 0);
  std::string lib = test::read_file(so);
  auto plan = example_plan("9.0");
  run::ScriptedRunner runner;  // every step succeeds; the package step leaves this wheel
  run::ScriptedResponse package;
  package.effect = [lib](const run::Command& c) {
    std::string di = "minitorch-0.1.0+cu130.sm90.dist-info/";
    fs::create_directories(c.cwd / "dist");
    REQUIRE(stages::write_zip_members(c.cwd / "dist" / "minitorch-0.1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl",
                                      {{"minitorch/__init__.py", false, false, "\n"},
                                       {"minitorch/lib/libk.so", false, true, lib},
                                       {di + "METADATA", false, false,
                                        "Metadata-Version: 2.1\nName: minitorch\nVersion: 0.1.0+cu130.sm90\n\n"},
                                       {di + "WHEEL", false, false,
                                        "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n"}})
                .ok());
  };
  runner.on([](const run::Command& c) { return c.argv.size() > 2 && c.argv[1] == "setup.py" && c.argv[2] == "bdist_wheel"; },
            package);
  // patchelf runs for real (the ScriptedRunner stands in for the process runner only).
  e.options.patchelf = test::which("patchelf");
  run::ScriptedResponse patch;
  patch.effect = [](const run::Command& c) {
    auto r = test::run(c.argv[0], std::vector<std::string>(c.argv.begin() + 1, c.argv.end()));
    REQUIRE(r.status == 0);
  };
  runner.on({e.options.patchelf.string()}, patch);
  nlohmann::json seen;
  e.options.validate = [&seen](const fs::path& w) -> Result<nlohmann::json> {
    seen = nlohmann::json::parse(test::read_file(w.string() + ".manifest.json"));
    return nlohmann::json{{"ok", true}};
  };
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((r ? "" : r.error().message) << e.progress.str());
  REQUIRE(r.ok());
  std::string name = r->out_wheel.filename().string();
  CHECK(name.rfind("minitorch-0.1.0+cu130.sm90-cp311-cp311-manylinux_2_", 0) == 0);
  CHECK(runner.calls_matching({e.options.patchelf.string()}).size() == 1);
  auto members = stages::read_zip_members(r->out_wheel);
  REQUIRE(members.ok());
  std::string repaired, meta;
  for (const auto& m : *members) {
    if (m.name == "minitorch/lib/libk.so") repaired = m.data;
    if (m.name.ends_with(".dist-info/METADATA")) meta = m.data;
  }
  auto d = binary::read_dynamic(binary::Bytes(reinterpret_cast<const std::uint8_t*>(repaired.data()), repaired.size()));
  REQUIRE(d.ok());
  CHECK(d->runpath == std::vector<std::string>{"$ORIGIN/../../nvidia/cu13/lib"});
  CHECK_THAT(meta, Catch::Contains("Requires-Dist: nvidia-cuda-runtime==13.0.*\n"));
  // The manifest: in the key's record, beside the wheel in --out, and beside the copy validated.
  const auto& p = r->manifest["manifest"]["portability"];
  CHECK(p["layout"] == "official");
  CHECK(p["host_bound"] == false);
  CHECK(p["tag"] == name.substr(name.rfind('-') + 1, name.size() - name.rfind('-') - 5));
  CHECK(seen["portability"] == p);
  auto beside = nlohmann::json::parse(test::read_file(r->out_wheel.string() + ".manifest.json"));
  CHECK(beside["portability"] == p);
}

// ---- the feature summary after configure, the out-of-memory retry --------------------

namespace {

// The example expecting the fixture library minidnn (tests/data/libraries/minidnn-recipe.toml),
// planned with it found through CMAKE_PREFIX_PATH, on a host with 8 cores and 64 GiB (8 jobs).
plan::Plan minidnn_plan(const test::TempDir& dir, bool found) {
  std::string text = test::read_file(std::string(ARCHBUILD_TEST_DATA) + "/libraries/minidnn-recipe.toml");
  text.replace(text.find("extends = \"recipe.toml\""), std::string("extends = \"recipe.toml\"").size(),
               "extends = \"" + std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml\"");
  auto recipe = dir.write("minidnn.toml", text);
  plan::PlanOptions o;
  o.resources = plan::HostResources{8, std::uint64_t(64) << 30};
  o.library_facts.probed = true;
  if (found) {
    plan::LibraryCandidate c;
    c.library = "minidnn";
    c.origin = plan::LibraryOrigin::cmake_prefix_path;
    c.via = "CMAKE_PREFIX_PATH";
    c.root = "/opt/minidnn";
    c.include_dir = "/opt/minidnn/include";
    c.lib_dir = "/opt/minidnn/lib";
    c.lib_file = "/opt/minidnn/lib/libminidnn.so";
    c.version = "1.2.3";
    o.library_facts.found = {c};
  }
  return plan_for("9.0", example_url(), "minitorch", std::nullopt, recipe.string(), o);
}

bool is_configure(const run::Command& c) {
  return c.argv.size() > 2 && c.argv[1] == "setup.py" && c.argv[2] == "build";
}

}  // namespace

TEST_CASE("libraries: a library the plan found but the configure's feature summary shows OFF fails the configure stage / quoting the line",
          "[stages][libraries]") {
  Env e;
  auto plan = minidnn_plan(e.dir, true);
  CHECK(plan->env.at("USE_MINIDNN").value == "1");
  auto runner = happy_runner();
  run::ScriptedResponse configure;
  configure.lines = {"CMake Warning at minidnn.cmake:12 (message):", "  Cannot find minidnn library. Turning the option off",
                     "-- ******** Summary ********", "--   USE_CUDA              : 1", "--   USE_MINIDNN           : OFF"};
  runner.on(is_configure, configure);
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().message);
  CHECK(r.error().exit == Exit::build_failed);
  CHECK(r.error().message.find("configure stage: minidnn was found for the plan (1.2.3 in /opt/minidnn/lib) but the "
                               "build switched it off: \"--   USE_MINIDNN           : OFF\"") != std::string::npos);
  CHECK(r.error().message.find("--without minidnn") != std::string::npos);
  CHECK(stages_of(runner) == std::vector<std::string>{"configure"});  // nothing built after it
}

TEST_CASE("libraries: the summary showing it ON passes - the manifest records where it came from and the check",
          "[stages][libraries]") {
  Env e;
  auto plan = minidnn_plan(e.dir, true);
  auto runner = happy_runner();
  run::ScriptedResponse configure;
  configure.lines = {"-- Found minidnn: /opt/minidnn/lib/libminidnn.so", "-- ******** Summary ********",
                     "--   USE_MINIDNN           : 1"};
  runner.on(is_configure, configure);
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((r ? "" : r.error().message) << e.progress.str());
  REQUIRE(r.ok());
  const auto& m = r->manifest["manifest"];
  CHECK(m["features"]["checked"] == true);
  CHECK(m["features"]["findings"][0]["on"] == true);
  CHECK(m["libraries"]["libraries"][0]["from"]["origin"] == "cmake-prefix-path");
  CHECK(m["libraries"]["libraries"][0]["from"]["version"] == "1.2.3");
  CHECK(m["environment"]["USE_MINIDNN"] == "1");
}

TEST_CASE("build stage: a compile killed by signal 9 is retried once with half the jobs / and says so", "[stages][build]") {
  Env e;
  auto plan = minidnn_plan(e.dir, true);
  REQUIRE(plan->jobs.jobs == 8);
  run::ScriptedRunner runner;
  run::ScriptedResponse killed;
  killed.signal = 9;
  runner.on({"/usr/bin/cmake", "--build"}, killed, 1);
  run::ScriptedResponse configure;
  configure.lines = {"--   USE_MINIDNN           : ON"};
  runner.on(is_configure, configure);
  runner.on({"/usr/bin/cmake", "--build"}, run::ScriptedResponse{});
  run::ScriptedResponse package;
  package.effect = [](const run::Command& c) { test::make_wheel(c.cwd / "dist", "minitorch", "0.1.0+cu130.sm90", "minitorch"); };
  runner.on([](const run::Command& c) { return c.argv.size() > 2 && c.argv[2] == "bdist_wheel"; }, package);
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((r ? "" : r.error().message) << e.progress.str());
  REQUIRE(r.ok());
  auto builds = runner.calls_matching({"/usr/bin/cmake", "--build"});
  REQUIRE(builds.size() == 2);
  CHECK(builds[0].env.at("MAX_JOBS") == "8");
  CHECK(builds[1].env.at("MAX_JOBS") == "4");
  CHECK(builds[1].env.at("CMAKE_BUILD_PARALLEL_LEVEL") == "4");
  CHECK(e.progress.str().find("retrying once with 4 jobs") != std::string::npos);
  CHECK(r->manifest["manifest"]["oom_retry"]["retried_with_jobs"] == 4);
}

TEST_CASE("build stage: killed again after the retry (nvcc's cicc died due to signal 9) fails with the advice",
          "[stages][build]") {
  Env e;
  auto plan = minidnn_plan(e.dir, true);
  run::ScriptedRunner runner;
  run::ScriptedResponse configure;
  configure.lines = {"--   USE_MINIDNN           : ON"};
  runner.on(is_configure, configure);
  run::ScriptedResponse killed;
  killed.signal = 9;
  runner.on({"/usr/bin/cmake", "--build"}, killed, 1);
  // The second time ninja reports it: exit 1, the compile's death in the log.
  run::ScriptedResponse ninja;
  ninja.exit_status = 1;
  ninja.lines = {"FAILED: CMakeFiles/k.dir/k.cu.o", "nvcc error   : 'cicc' died due to signal 9 (Kill signal)",
                 "ninja: build stopped: subcommand failed."};
  runner.on({"/usr/bin/cmake", "--build"}, ninja);
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().message);
  CHECK(r.error().exit == Exit::build_failed);
  CHECK(r.error().message.find("build stage killed again after a retry with half the jobs (exit status 1) with 4 jobs: "
                               "out of memory; give fewer jobs (--jobs 2 or MAX_JOBS)") != std::string::npos);
  CHECK(r.error().message.find("--memory-budget-mb") != std::string::npos);
  CHECK(runner.calls_matching({"/usr/bin/cmake", "--build"}).size() == 2);
}

TEST_CASE("the fetch stage places a [[fetch]] at the planned commit from the mirror, offline too", "[stages][fetch]") {
  Env e;
  std::string project = example_url("minitorch");
  fs::path repos = fs::path(project.substr(7)).parent_path();
  auto rev = test::run(test::which("git"), {"-C", (repos / "minidep").string(), "rev-parse", "v1.0^{commit}"});
  REQUIRE(rev.status == 0);
  std::string dep_commit = rev.out.substr(0, 40);
  // tests/fixtures/minitorch-fetch's recipe, its fetch served from the local minidep (the repository is
  // minitorch's, whose submodule is not checked out: submodules = false).
  auto recipe = e.dir.write("fetch.toml", "extends = \"" + std::string(ARCHBUILD_SOURCE_DIR) +
                                              "/tests/fixtures/minitorch-fetch/recipe.toml\"\n\n[[fetch]]\nname = \"minidep\"\n"
                                              "path = \"third_party/minidep\"\nurl = \"file://" +
                                              (repos / "minidep").string() +
                                              "\"\npin_file = \".ci/docker/ci_commit_pins/minidep.txt\"\n");
  plan::PlanOptions o;
  o.fetches["minidep"] = plan::ResolvedFetch{".ci/docker/ci_commit_pins/minidep.txt", "v1.0", dep_commit};
  auto plan = plan_for("9.0", project, "", std::nullopt, recipe.string(), o);
  REQUIRE(plan->fetches.size() == 1);
  CHECK(plan->key_inputs["fetches"][0]["commit"] == dep_commit);
  auto runner = happy_runner();
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((r ? "" : r.error().message) << e.progress.str());
  REQUIRE(r.ok());
  fs::path placed = e.layout.source_dir(plan->key) / "third_party/minidep";
  CHECK(fs::is_directory(placed / ".git"));
  CHECK_FALSE(fs::is_symlink(placed));
  CHECK(fs::exists(placed / "include/minidep/minidep.h"));
  auto placed_head = source::checkout_commit(placed);
  CHECK((placed_head.ok() && *placed_head == dep_commit));
  auto f = r->manifest["manifest"]["fetches"];
  REQUIRE(f.size() == 1);
  CHECK(f[0]["commit"] == dep_commit);
  CHECK(f[0]["ref"] == "v1.0");
  CHECK(f[0]["path"] == "third_party/minidep");

  SECTION("offline: the mirrors suffice") {
    e.options.offline = true;
    auto again = plan_for("8.0", project, "", std::nullopt, recipe.string(), o);
    auto r2 = stages::run_pipeline(again, e.layout, runner, *e.reporter, e.options);
    INFO((r2 ? "" : r2.error().message) << e.progress.str());
    REQUIRE(r2.ok());
    CHECK(fs::exists(e.layout.source_dir(again->key) / "third_party/minidep/include/minidep/minidep.h"));
  }
  SECTION("a fetch planned without its commit stops the fetch stage, exit 2") {
    auto unresolved = plan_for("8.6", project, "", std::nullopt, recipe.string());
    auto r3 = stages::run_pipeline(unresolved, e.layout, runner, *e.reporter, e.options);
    REQUIRE_FALSE(r3.ok());
    CHECK(r3.error().exit == Exit::bad_input);
    CHECK(r3.error().message.find("fetch minidep") != std::string::npos);
  }
}

TEST_CASE("hostile/paths written: a link planted at the key's ninja log copy is not written through", "[stages]") {
  Env e;
  auto plan = example_plan("9.0");
  // The build leaves a .ninja_log in its build tree, which the build report copies into logs/<key>/;
  // meanwhile a link is planted where the copy goes (after the run has made the key's log folder).
  e.dir.write("outside", "kept");
  const fs::path copy = e.layout.ninja_log_copy(plan->key);
  const fs::path outside = e.dir / "outside";
  auto runner = happy_runner("minitorch-0.1.0+cu130.sm90-py3-none-any.whl", [copy, outside](const run::Command& c) {
    fs::path dir = c.cwd / c.argv.at(2);
    fs::create_directories(dir);
    std::ofstream(dir / ".ninja_log") << "# ninja log v5\n0\t10\t0\ta.o\t1\n";
    fs::create_directories(copy.parent_path());
    fs::create_symlink(outside, copy);
  });
  auto r = stages::run_pipeline(plan, e.layout, runner, *e.reporter, e.options);
  INFO((r ? "" : r.error().message) << e.progress.str());
  REQUIRE(r.ok());  // the report is best effort: the build is not failed for it
  CHECK(test::read_file(e.dir / "outside") == "kept");
  CHECK(fs::is_symlink(e.layout.ninja_log_copy(plan->key)));
  CHECK(e.progress.str().find("no ninja log") != std::string::npos);
}
