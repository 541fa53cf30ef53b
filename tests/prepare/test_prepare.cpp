// prepare/: the one answer to "would `wheel` stop before its first stage", computed without a
// process (a strict ScriptedRunner: any command fails the test) on local trees written here that
// behave as PyTorch's files do at their tags: version.txt "2.11.0a0" (pytorch/pytorch main before
// the 2.11 branch cut), setuptools' pyproject, third_party/eigen_pin.txt read by checkout_eigen()
// in tools/optional_submodules.py, .ci/docker/ci_commit_pins/nccl.txt read by read_nccl_pin().
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "arch/parse.hpp"
#include "contract/contract.hpp"
#include "core/data_dir.hpp"
#include "core/text.hpp"
#include "plan/resolve.hpp"
#include "prepare/prepare.hpp"
#include "recipe/recipe.hpp"
#include "run/reporter.hpp"
#include "run/scripted_runner.hpp"
#include "support/process.hpp"
#include "support/shipped.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
namespace fs = std::filesystem;

namespace {

Version V(const char* s) { return *Version::parse(s); }

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A tree with PyTorch's setup.py-era contract at a 2.11.0a0 main commit.
void torch_like_tree(const fs::path& dir, const std::string& version = "2.11.0a0") {
  write(dir / "version.txt", version + "\n");
  write(dir / "pyproject.toml",
        "[build-system]\nrequires = [\"setuptools>=70.1.0\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n");
  write(dir / "setup.py", "from setuptools import setup\nsetup()\n");
  write(dir / "CMakeLists.txt", "cmake_minimum_required(VERSION 3.27 FATAL_ERROR)\nproject(Torch)\n");
}

// A recipe for the tree (setup-py driver, source.path = the tree), with the given [[fetch]]es.
fs::path recipe_for(const fs::path& dir, const fs::path& tree, const std::string& version, const std::string& fetches) {
  fs::path file = dir / "recipe.toml";
  write(file, "description = \"a torch-like tree\"\npackage = \"torch\"\nmodule = \"torch\"\nversion = \"" + version +
                  "\"\ncuda = [\"13.0\"]\npython = [\"3.11\"]\n[source]\npath = \"" + tree.string() +
                  "\"\ntag = \"v" + version + "\"\n[build]\ndriver = \"setup-py\"\ntools = [\"cmake\", \"ninja\"]\n"
                  "[arch]\nenv = \"TORCH_CUDA_ARCH_LIST\"\nformat = \"torch\"\ngrammar = \"build\"\n"
                  "accepts = [\"two-digit-major\", \"a\", \"f\"]\n" + fetches);
  return file;
}

plan::Resolution resolve_with(const fs::path& recipe_file) {
  plan::Request req;
  req.targets = *arch::parse_arch_list("90", arch::ArchData::shipped(), {arch::Grammar::build, {}});
  req.recipe_label = recipe_file.string();
  plan::Inputs in;
  auto rs = test::select_shipped(recipe_file.string());
  REQUIRE(rs.ok());
  in.recipes = *rs;
  in.toolchains = *toolchain::load_shipped();
  test::shipped_data(in);
  toolchain::Toolkit tk;
  tk.root = "/nonexistent/cuda-13.0";
  tk.nvcc = "/nonexistent/cuda-13.0/bin/nvcc";
  tk.version = V("13.0");
  tk.nvcc_version = V("13.0.88");
  tk.found_by = "test";
  in.host.toolkits = {tk};
  toolchain::Compiler c;
  c.kind = toolchain::CompilerKind::gcc;
  c.version = V("12.2.0");
  c.path = "/usr/bin/g++-12";
  c.found_by = "PATH";
  in.host.compilers = {c};
  in.host.pythons = {{"/usr/bin/python3", V("3.11.2"), "python3 on PATH"}};
  in.host.tools = {{"cmake", "/usr/bin/cmake"}, {"ninja", "/usr/bin/ninja"}};
  auto r = plan::resolve(req, in);
  INFO(r.message);
  REQUIRE(r.ok());
  return r;
}

// prepare() with a runner that refuses every command: nothing here may start a process.
prepare::Prepared prepared(const plan::Resolution& r, prepare::Request q, const fs::path& cache_dir) {
  run::ScriptedRunner runner;
  runner.strict();
  auto reporter = run::make_reporter(run::ReporterKind::plain, std::cerr);
  prepare::Services s{runner, *reporter};
  prepare::Cache cache;
  cache.layout.emplace(cache_dir);
  q.offline = true;
  if (q.no_venv_because.empty()) q.no_venv_because = "not made in this test";
  if (!q.library_specs) q.library_specs = &test::shipped_library_specs();
  auto p = prepare::prepare(r, q, cache, s);
  INFO((p ? "" : p.error().message));
  REQUIRE(p.ok());
  CHECK(runner.calls().empty());
  return std::move(*p);
}

bool has_stop(const prepare::Prepared& p, const std::string& rule, const std::string& words = "") {
  REQUIRE(rules::from_name(rule));  // a registered rule (core/rules.hpp), not a typo
  for (const auto& s : p.stops)
    if (s.rule == *rules::from_name(rule) && s.error.message.find(words) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("prepare: a 2.11.0a0 tree with a 2.15 recipe is a stop (exit 2) naming both, unless on purpose",
          "[prepare]") {
  test::TempDir dir;
  torch_like_tree(dir / "tree");
  auto r = resolve_with(recipe_for(dir.path(), dir / "tree", "2.15.0", ""));
  auto p = prepared(r, {}, dir / "cache");
  REQUIRE(has_stop(p, "release-line", "2.11.0a0"));
  CHECK(has_stop(p, "release-line", "2.15.0"));
  CHECK(has_stop(p, "release-line", "--allow-release-mismatch"));
  REQUIRE(p.first_stop());
  CHECK(p.first_stop()->exit == Exit::bad_input);

  prepare::Request on_purpose;
  on_purpose.allow_release_mismatch = true;
  auto q = prepared(r, on_purpose, dir / "cache");
  CHECK_FALSE(has_stop(q, "release-line"));
  REQUIRE(q.notes.size() == 1);
  CHECK(q.notes[0].find("on purpose") != std::string::npos);

  // The same line is no stop; a tree ahead of every recipe (main) takes the newest with a note.
  auto same = prepared(resolve_with(recipe_for(dir.path(), dir / "tree", "2.11.0", "")), {}, dir / "cache");
  CHECK_FALSE(has_stop(same, "release-line"));
  torch_like_tree(dir / "tree", "2.16.0a0");
  prepare::Request ahead;
  ahead.recipe_lines = {V("2.14.0"), V("2.15.0")};
  auto main = prepared(r, ahead, dir / "cache");
  CHECK_FALSE(has_stop(main, "release-line"));
  CHECK(main.notes.at(0).find("no recipe of line 2.16") != std::string::npos);
}

TEST_CASE("prepare: a local tree's contract is read and checked before the venv", "[prepare]") {
  test::TempDir dir;
  torch_like_tree(dir / "tree", "2.11.0a0");
  // A scikit-build-core tree for a setup-py recipe: the driver cannot build it.
  write(dir / "tree/pyproject.toml",
        "[build-system]\nrequires = [\"scikit-build-core>=0.11\"]\nbuild-backend = \"scikit_build_core.build\"\n"
        "[tool.scikit-build]\nbuild-dir = \"build\"\n");
  auto r = resolve_with(recipe_for(dir.path(), dir / "tree", "2.11.0", ""));
  prepare::Request q;
  q.library_specs = &test::shipped_library_specs();
  q.no_venv_because = "";  // would be made, were the contract not contradicted
  run::ScriptedRunner runner;
  runner.strict();
  auto reporter = run::make_reporter(run::ReporterKind::plain, std::cerr);
  prepare::Services s{runner, *reporter};
  prepare::Cache cache;
  cache.layout.emplace(dir / "cache");
  auto p = prepare::prepare(r, q, cache, s);
  REQUIRE(p.ok());
  CHECK(runner.calls().empty());  // no venv was made for a tree the recipe cannot build
  REQUIRE(p->tree.contract);
  CHECK(p->tree.contract->version == std::optional<std::string>("2.11.0a0"));
  CHECK(has_stop(*p, "driver-backend", "scikit_build_core.build"));
  CHECK(p->venv_note.find("contradicts") != std::string::npos);
  CHECK(p->first_stop()->exit == Exit::bad_input);
}

TEST_CASE("prepare: a pin file the tree's build clones from, with no [[fetch]], is a stop naming the file",
          "[prepare]") {
  test::TempDir dir;
  torch_like_tree(dir / "tree");
  write(dir / "tree/third_party/eigen_pin.txt", "3.4.0\n");
  auto bare = resolve_with(recipe_for(dir.path(), dir / "tree", "2.11.0", ""));
  auto p = prepared(bare, {}, dir / "cache");
  CHECK(has_stop(p, "tree-download", "third_party/eigen_pin.txt"));
  CHECK(p.first_stop()->exit == Exit::missing_tool);

  // NCCL's pin file: a stop too, unless the build's environment switches the download off.
  write(dir / "tree/.ci/docker/ci_commit_pins/nccl.txt", "v2.27.5-1\n");
  p = prepared(bare, {}, dir / "cache");
  CHECK(has_stop(p, "tree-download", ".ci/docker/ci_commit_pins/nccl.txt"));
  prepare::Request system_nccl;
  system_nccl.env = {{"USE_SYSTEM_NCCL", "1"}};
  CHECK_FALSE(has_stop(prepared(bare, system_nccl, dir / "cache"), "tree-download", "nccl"));

  // Declared: the eigen fetch stands for the file (offline here: its pin is a fetch-pin stop).
  auto declared = resolve_with(recipe_for(
      dir.path(), dir / "tree", "2.11.0",
      "[[fetch]]\nname = \"eigen\"\npath = \"third_party/eigen\"\nurl = \"https://gitlab.com/libeigen/eigen\"\n"
      "pin_file = \"third_party/eigen_pin.txt\"\n"));
  auto d = prepared(declared, system_nccl, dir / "cache");
  CHECK_FALSE(has_stop(d, "tree-download"));
  CHECK(has_stop(d, "fetch-pin", "offline: the tree pins eigen at 3.4.0"));
  CHECK(d.first_stop()->exit == Exit::missing_tool);
}

TEST_CASE("prepare: the shipped tree-downloads data loads, and a pattern finds the tree's NCCL pin file", "[prepare]") {
  auto d = prepare::load_tree_downloads(data_root() / "data" / "tree-downloads.toml");
  INFO((d ? "" : d.error().message));
  REQUIRE(d.ok());
  REQUIRE(d->size() >= 2);
  for (const auto& x : *d) CHECK_FALSE(x.why.empty());
  test::TempDir dir;
  write(dir / ".ci/docker/ci_commit_pins/nccl-cu13.txt", "v2.28.3-1\n");
  auto has = prepare::tree_has(contract::directory_access(dir.path()));
  CHECK(has(".ci/docker/ci_commit_pins/nccl*.txt") == std::optional<std::string>(".ci/docker/ci_commit_pins/nccl-cu13.txt"));
  CHECK_FALSE(has("third_party/eigen_pin.txt"));
  write(dir / "bad.toml", "[[download]]\nname = \"x\"\npin_files = [\"a\"]\nfetch = \"x\"\nwhy = \"y\"\ntypo = 1\n");
  auto bad = prepare::load_tree_downloads(dir / "bad.toml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("bad.toml:") != std::string::npos);
}

// Issue 46: the detector reads the pin the tree's own code selects (exact names, the plan's CUDA),
// not every nccl*.txt of the pins folder, and the switches that turn each download off. Pin files
// with their upstream content (tests/fixtures/pytorch-real/README.md).
TEST_CASE("prepare: the tree-download detector reads the NCCL pin the tree's code selects, and its switches",
          "[prepare]") {
  test::TempDir dir;
  torch_like_tree(dir / "tree");
  fs::path pins = dir / "tree/.ci/docker/ci_commit_pins";
  write(pins / "nccl-extensions.txt", "nccl-extensions-v0.1.0\n");
  write(pins / "nccl-legacy.txt", "ab2b89c4c339bd7f816fbc114a4b05d386b66290\n");
  auto bare = resolve_with(recipe_for(dir.path(), dir / "tree", "2.11.0", ""));
  // Neither is the NCCL pin: nothing is cloned from them.
  CHECK_FALSE(has_stop(prepared(bare, {}, dir / "cache"), "tree-download"));

  // The plan's CUDA (13.0): nccl-cu130.txt first, as PreBuildSteps.cmake takes it, then nccl.txt.
  write(pins / "nccl-cu130.txt", "v2.27.7-1\n");
  CHECK(has_stop(prepared(bare, {}, dir / "cache"), "tree-download", ".ci/docker/ci_commit_pins/nccl-cu130.txt"));
  fs::remove(pins / "nccl-cu130.txt");
  write(pins / "nccl.txt", "v2.29.3-1\n");
  CHECK(has_stop(prepared(bare, {}, dir / "cache"), "tree-download", ".ci/docker/ci_commit_pins/nccl.txt"));

  // Each switch of the tree's code turns it off: USE_DISTRIBUTED=0 among them.
  for (auto [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"USE_DISTRIBUTED", "0"}, {"USE_DISTRIBUTED", "off"}, {"USE_NCCL", "N"}, {"USE_CUDA", "FALSE"},
           {"USE_SYSTEM_NCCL", "ON"}}) {
    prepare::Request q;
    q.env = {{var, value}};
    INFO(var << "=" << value);
    CHECK_FALSE(has_stop(prepared(bare, q, dir / "cache"), "tree-download", "nccl"));
  }

  // Eigen: USE_SYSTEM_EIGEN_INSTALL=1 switches its download off, as the recipes' [[fetch]] says.
  write(dir / "tree/third_party/eigen_pin.txt", "5.0.1\n");
  prepare::Request no_nccl;
  no_nccl.env = {{"USE_DISTRIBUTED", "0"}};
  CHECK(has_stop(prepared(bare, no_nccl, dir / "cache"), "tree-download", "third_party/eigen_pin.txt"));
  no_nccl.env["USE_SYSTEM_EIGEN_INSTALL"] = "1";
  CHECK_FALSE(has_stop(prepared(bare, no_nccl, dir / "cache"), "tree-download"));
}

TEST_CASE("prepare: tree-downloads.toml agrees with every shipped recipe's [[fetch]] of the same name", "[prepare]") {
  auto downloads = prepare::load_tree_downloads(data_root() / "data" / "tree-downloads.toml");
  REQUIRE(downloads.ok());
  auto recipes = recipe::load_shipped();
  REQUIRE(recipes.ok());
  int compared = 0;
  for (const auto& r : *recipes)
    for (const auto& f : r.fetches)
      for (const auto& d : *downloads) {
        if (d.fetch != f.name) continue;
        INFO(r.file.string() << " [[fetch]] " << f.name);
        // The same switches: the recipe fetches nothing exactly when the tree's code clones nothing.
        std::map<std::string, std::set<std::string>> a, b;
        for (const auto& [k, v] : f.unless_env)
          for (const auto& x : v) a[k].insert(text::lower(x));
        for (const auto& [k, v] : d.unless_env)
          for (const auto& x : v) b[k].insert(text::lower(x));
        CHECK(a == b);
        // Every pin file the recipe reads is one the detector knows.
        for (const auto& p : f.pin_files)
          CHECK(std::find(d.pin_files.begin(), d.pin_files.end(), p) != d.pin_files.end());
        ++compared;
      }
  CHECK(compared >= 10);
}

TEST_CASE("prepare: a tree older than every recipe is one stop saying so, without the contract's noise", "[prepare]") {
  test::TempDir dir;
  torch_like_tree(dir / "tree", "2.3.0a0");
  // A scikit-build-core tree for the setup-py recipe: against the wrong recipe a driver-backend
  // stop would come too, noise where no recipe fits.
  write(dir / "tree/pyproject.toml", "[build-system]\nrequires = [\"scikit-build-core\"]\n"
                                     "build-backend = \"scikit_build_core.build\"\n");
  auto r = resolve_with(recipe_for(dir.path(), dir / "tree", "2.15.0", ""));
  prepare::Request q;
  q.recipe_lines = {V("2.4.0"), V("2.10.0"), V("2.15.0")};
  auto p = prepared(r, q, dir / "cache");
  REQUIRE_FALSE(p.stops.empty());
  CHECK(p.stops[0].rule == rules::Id::release_line);
  CHECK_FALSE(has_stop(p, "driver-backend"));
  CHECK_THAT(p.stops[0].error.message, Catch::Contains("older than every recipe") &&
                                           Catch::Contains("no recipe covers line 2.3") &&
                                           Catch::Contains("the oldest is line 2.4"));
  CHECK(p.stops[0].error.message.find("choose the recipe of line 2.3") == std::string::npos);
  CHECK(p.first_stop()->exit == Exit::bad_input);
}

TEST_CASE("prepare: a local tree whose .gitmodules folders are empty stops before any venv, naming each", "[prepare]") {
  test::TempDir dir;
  torch_like_tree(dir / "tree");
  write(dir / "tree/.gitmodules",
        "[submodule \"third_party/pybind11\"]\n\tignore = dirty\n\tpath = third_party/pybind11\n"
        "\turl = https://github.com/pybind/pybind11.git\n[submodule \"third_party/cpuinfo\"]\n"
        "\tpath = third_party/cpuinfo\n\turl = https://github.com/pytorch/cpuinfo.git\n");
  fs::create_directories(dir / "tree/third_party/pybind11");        // empty: cloned without --recursive
  write(dir / "tree/third_party/cpuinfo/CMakeLists.txt", "# here\n");  // checked out
  auto r = resolve_with(recipe_for(dir.path(), dir / "tree", "2.11.0", ""));
  prepare::Request q;
  q.library_specs = &test::shipped_library_specs();
  q.no_venv_because = "";  // the venv would be made: the stop must come first
  run::ScriptedRunner runner;
  runner.strict();
  auto reporter = run::make_reporter(run::ReporterKind::plain, std::cerr);
  prepare::Services s{runner, *reporter};
  prepare::Cache cache;
  cache.layout.emplace(dir / "cache");
  q.offline = true;
  auto p = prepare::prepare(r, q, cache, s);
  REQUIRE(p.ok());
  CHECK(runner.calls().empty());  // no venv, no process
  REQUIRE_FALSE(p->stops.empty());
  CHECK(p->stops[0].rule == rules::Id::submodules);
  CHECK_THAT(p->stops[0].error.message, Catch::Contains("third_party/pybind11") &&
                                            Catch::Contains("https://github.com/pybind/pybind11.git") &&
                                            Catch::Contains("git submodule update --init --recursive"));
  CHECK(p->stops[0].error.message.find("cpuinfo") == std::string::npos);
  CHECK_FALSE(p->plan->venv);
}

TEST_CASE("prepare: patches on a local tree are tried on its files before any venv, the tree never written",
          "[prepare][patch]") {
  test::TempDir dir;
  torch_like_tree(dir / "tree");
  write(dir / "tree/csrc/k.cu", "int k() {\n  return 2;\n}\n");
  auto stamp = [&] {
    std::string s = test::read_file(dir / "tree/csrc/k.cu");
    return s + std::to_string(fs::last_write_time(dir / "tree/csrc/k.cu").time_since_epoch().count());
  };
  const std::string before = stamp();
  write(dir / "fix.patch", "--- a/csrc/k.cu\n+++ b/csrc/k.cu\n@@ -1,3 +1,3 @@\n int k() {\n-  return 2;\n+  return 3;\n }\n");
  write(dir / "merged.patch", "--- a/version.txt\n+++ b/version.txt\n@@ -1 +1 @@\n-2.10.0a0\n+2.11.0a0\n");
  write(dir / "stale.patch", "--- a/csrc/k.cu\n+++ b/csrc/k.cu\n@@ -1,3 +1,3 @@\n int k() {\n-  return 7;\n+  return 8;\n }\n");
  auto r = resolve_with(recipe_for(dir.path(), dir / "tree", "2.11.0", ""));
  auto with = [&](const std::vector<std::string>& names) {
    prepare::Request q;
    for (const auto& n : names) q.patches.push_back(*recipe::patch_from_file(dir / n));
    return prepared(r, q, dir / "cache");
  };
  auto plain = with({});
  auto fixed = with({"fix.patch", "merged.patch"});
  CHECK(fixed.stops.empty());
  CHECK(fixed.patch_states == std::vector<std::string>{"applies", "contained"});
  CHECK(std::any_of(fixed.notes.begin(), fixed.notes.end(), [&](const std::string& n) {
    return n.find("patch merged.patch (--patch) is already contained in the local tree") != std::string::npos;
  }));
  CHECK(fixed.plan->key != plain.plan->key);  // the patches are in the key
  REQUIRE(fixed.plan->patches.size() == 2);

  auto stale = with({"fix.patch", "stale.patch"});
  CHECK(stale.patch_states == std::vector<std::string>{"applies", "fails"});
  CHECK(has_stop(stale, "patch", "patch stale.patch does not apply to the local tree"));
  CHECK(has_stop(stale, "patch", "csrc/k.cu, hunk @@ -1,3 +1,3 @@"));
  CHECK(stale.first_stop()->exit == Exit::bad_input);
  CHECK_FALSE(stale.plan->venv);
  CHECK(stamp() == before);  // the user's tree: never written
}

TEST_CASE("prepare: a patch on a file the local tree's ignore rules leave out of the copy stops, saying so",
          "[prepare][patch]") {
  test::TempDir dir;
  torch_like_tree(dir / "tree");
  write(dir / "tree/.gitignore", "gen/\n");
  write(dir / "tree/gen/k.cu", "int k() {\n  return 2;\n}\n");  // on disk, ignored: not in the copy
  auto init = test::run("/usr/bin/git", {"init", "-q", (dir / "tree").string()});
  REQUIRE(init.status == 0);
  write(dir / "gen.patch", "--- a/gen/k.cu\n+++ b/gen/k.cu\n@@ -1,3 +1,3 @@\n int k() {\n-  return 2;\n+  return 3;\n }\n");
  auto r = resolve_with(recipe_for(dir.path(), dir / "tree", "2.11.0", ""));
  prepare::Request q;
  q.patches.push_back(*recipe::patch_from_file(dir / "gen.patch"));
  auto p = prepared(r, q, dir / "cache");
  CHECK(p.patch_states == std::vector<std::string>{"fails"});
  CHECK(has_stop(p, "patch", "patch gen.patch does not apply to the local tree"));
  CHECK(has_stop(p, "patch", "gen/k.cu (the tree's ignore rules"));
  REQUIRE(p.first_stop());
  CHECK(p.first_stop()->exit == Exit::bad_input);
  CHECK(p.first_stop()->message.find('\n') == std::string::npos);
  CHECK_FALSE(p.plan->venv);
}
