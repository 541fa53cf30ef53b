// The tree's contract on the command line: `archbuild plan` says "fetch to see the tree's
// contract" until the commit is in the mirror, then shows backend, requirements, cmake minimum,
// version and pins read from it; `archbuild wheel` refuses a cmake minimum above the host's cmake
// (exit 3, naming both) before configure. Hermetic fake tools, as in test_resolve_cli.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "source/source.hpp"
#include "store/layout.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void exe(const test::TempDir& tmp, const std::string& rel, const std::string& script) {
  auto p = tmp.write(rel, "#!/bin/sh\n" + script);
  fs::permissions(p, fs::perms::owner_all, fs::perm_options::replace);
}

// g++ 13, Python 3.12, cmake 3.25.1 (Debian 12's), ninja and a CUDA 13.0 toolkit, all scripts.
struct FakeHost {
  test::TempDir tmp;
  FakeHost() {
    exe(tmp, "bin/g++-13", "echo 'g++-13 (Ubuntu 13.2.0-4ubuntu3) 13.2.0'\n");
    exe(tmp, "bin/gcc-13", "exit 0\n");
    exe(tmp, "bin/python3", "echo /fake/python/bin/python3.12\necho 3.12.3\necho setuptools wheel build pip venv\n");
    exe(tmp, "bin/cmake", "[ \"$1\" = --version ] && echo 'cmake version 3.25.1'\nexit 0\n");
    exe(tmp, "bin/ninja", "exit 0\n");
    exe(tmp, "roots/cuda-13.0/bin/nvcc",
        "case \"$1\" in\n"
        "  --version) echo 'Cuda compilation tools, release 13.0, V13.0.88';;\n"
        "  --list-gpu-arch) for a in 75 80 86 89 90 100 120; do echo compute_$a; done;;\n"
        "  *) exit 1;;\n"
        "esac\n");
  }
  fs::path cache() const { return tmp / "cache"; }
  test::Ran run(std::vector<std::string> args) const {
    test::RunOptions o;
    o.env["PATH"] = (tmp.path() / "bin").string();
    o.env["ARCHBUILD_CUDA_ROOTS"] = (tmp.path() / "roots").string();
    o.env["ARCHBUILD_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1";
    o.env["ARCHBUILD_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1";
    o.unset_env = {"CUDA_HOME", "CUDA_PATH", "CUDAHOSTCXX", "ARCHBUILD_CACHE_DIR"};
    args.insert(args.begin(), {"--cache-dir", cache().string()});
    return test::archbuild(args, o);
  }
};

// The example repositories; with `file` replaced (and v0.1.0 moved onto that commit) when given.
std::string example_url(const test::TempDir& dir, const std::string& file = "", const std::string& content = "") {
  auto r = test::run("/bin/bash", {std::string(ARCHBUILD_SOURCE_DIR) + "/tests/support/make-example-repos",
                                   (dir / "repos").string()});
  REQUIRE(r.status == 0);
  fs::path repo = dir / "repos/minitorch";
  if (!file.empty()) {
    dir.write("repos/minitorch/" + file, content);
    test::RunOptions o;
    o.env = {{"GIT_AUTHOR_NAME", "t"}, {"GIT_AUTHOR_EMAIL", "t@archbuild.invalid"}, {"GIT_COMMITTER_NAME", "t"},
             {"GIT_COMMITTER_EMAIL", "t@archbuild.invalid"}, {"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", dir.path().string()}};
    for (std::vector<std::string> args : {std::vector<std::string>{"add", "-A"},
                                          std::vector<std::string>{"commit", "-q", "-m", "variant"},
                                          std::vector<std::string>{"tag", "-f", "-a", "v0.1.0", "-m", "variant"}}) {
      args.insert(args.begin(), {"-C", repo.string()});
      REQUIRE(test::run(test::which("git"), args, o).status == 0);
    }
  }
  return "file://" + repo.string();
}

json parse(const test::Ran& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  auto j = json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

const std::string recipe = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";

}  // namespace

TEST_CASE("plan shows the tree's contract once the commit is in the mirror", "[cli][contract]") {
  FakeHost h;
  test::TempDir repos;
  std::string url = example_url(repos);
  std::vector<std::string> plan = {"plan", "--sm", "90", "--recipe", recipe, "--source-url", url};

  auto before = h.run(plan);
  INFO(before.err);
  REQUIRE(before.status == 0);
  CHECK(contains(before.out, "contract   fetch to see the tree's contract"));
  auto j0 = parse(h.run({"plan", "--sm", "90", "--recipe", recipe, "--source-url", url, "--json"}));
  CHECK(j0["contract"]["available"] == false);

  // Fetched as the fetch stage fetches: into the cache's mirror of that URL.
  store::Layout layout(h.cache());
  auto fetched = source::update_mirror(url, "v0.1.0", {layout.git_mirror(url), layout.git_mirror_lock(url)}, {});
  INFO((fetched ? "" : fetched.error().message));
  REQUIRE(fetched.ok());

  auto text = h.run(plan);
  INFO(text.out << text.err);
  REQUIRE(text.status == 0);
  CHECK(contains(text.out, "contract   the tree at " + fetched->substr(0, 12)));
  CHECK(contains(text.out, "backend        setuptools.build_meta (pyproject.toml:"));
  CHECK(contains(text.out, "cmake>=3.18"));
  CHECK(contains(text.out, "requirements-build.txt:4"));
  CHECK(contains(text.out, "cmake minimum  3.18 (CMakeLists.txt:4)"));
  CHECK(contains(text.out, "version        0.1.0 (version.txt:1)"));
  CHECK(contains(text.out, "minidep = v1.0"));
  CHECK(contains(text.out, "cmake 3.25.1 >= 3.18"));

  auto j = parse(h.run({"plan", "--sm", "90", "--recipe", recipe, "--source-url", url, "--json"}));
  const auto& c = j["contract"];
  CHECK(c["available"] == true);
  CHECK(c["commit"] == *fetched);
  CHECK(c["backend"]["name"] == "setuptools.build_meta");
  CHECK(c["backend"]["drivers"] == json({"setup-py", "python-build"}));
  CHECK(c["cmake_minimum"]["min"] == "3.18");
  CHECK(c["version"]["value"] == "0.1.0");
  CHECK(c["pins"] == json::array({{{"name", "minidep"}, {"ref", "v1.0"}, {"file", ".ci/docker/ci_commit_pins/minidep.txt"}}}));
  bool cmake_req = false;
  for (const auto& r : c["requirements"])
    if (r["name"] == "cmake") cmake_req = r["specifier"] == ">=3.18" && r["file"] == "requirements-build.txt";
  CHECK(cmake_req);
  for (const auto& check : c["checks"]) CHECK(check["ok"] == true);
}

TEST_CASE("wheel refuses a cmake minimum above the host's cmake before configure, exit 3", "[cli][contract]") {
  FakeHost h;
  // A real interpreter behind the fake probe: the build venv is made before the plan, and the
  // cmake it would need (>= 3.30, from pip) cannot be had offline, so the refusal names both.
  exe(h.tmp, "bin/python3", "echo /usr/bin/python3.11\necho 3.11.2\necho setuptools wheel build pip venv\n");
  test::TempDir repos;
  std::string url = example_url(repos, "CMakeLists.txt", "cmake_minimum_required(VERSION 3.30)\nproject(minitorch)\n");
  auto r = h.run({"wheel", "--sm", "90", "--recipe", recipe, "--source-url", url, "--out", (h.tmp / "out").string(),
                  "--compiler-cache", "none"});
  INFO(r.out << r.err);
  CHECK(r.status == 3);
  CHECK(contains(r.err, "the tree needs cmake >= 3.30 (CMakeLists.txt:1), the host's is 3.25.1"));
  // Nothing after fetch ran: no configure log.
  bool configure_log = false;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(h.cache() / "logs", ec))
    if (e.path().filename() == "configure.log") configure_log = true;
  CHECK_FALSE(configure_log);
}
