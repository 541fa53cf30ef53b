// plan/libraries, plan/library_probe, plan/host_check: where each optional library
// comes from (pure over gathered facts), the probe over fake install trees, the plan's env, key and
// refusal (exit 3) with how to provide it, --without, and the host check's figures.
#include <catch2/catch.hpp>

#include <algorithm>

#include "arch/parse.hpp"
#include "plan/host_check.hpp"
#include "plan/libraries.hpp"
#include "plan/library_probe.hpp"
#include "plan/plan.hpp"
#include "plan/resolve.hpp"
#include "support/shipped.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::plan;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const std::vector<recipe::LibrarySpec>& specs() {
  static auto s = recipe::load_shipped_library_specs().take();
  return s;
}

LibraryCandidate cand(const std::string& lib, LibraryOrigin o, const std::string& via, const std::string& root,
                      const std::string& version) {
  LibraryCandidate c;
  c.library = lib;
  c.origin = o;
  c.via = via;
  c.root = root;
  c.include_dir = root + "/include";
  c.lib_dir = root + "/lib";
  c.lib_file = root + "/lib/lib" + lib + ".so";
  c.version = version;
  return c;
}

LibraryInputs torch_inputs() {
  LibraryInputs in;
  in.specs = specs();
  in.requirements.expected = {"cudnn", "nccl", "cusparselt", "lapack"};
  in.requirements.optional = {"magma"};
  in.facts.probed = true;
  return in;
}

const LibraryChoice& choice(const LibraryPlan& p, const std::string& name) {
  auto it = std::find_if(p.choices.begin(), p.choices.end(), [&](const LibraryChoice& c) { return c.name == name; });
  REQUIRE(it != p.choices.end());
  return *it;
}

// A fake install prefix with the library's header (and version macros) and file.
void fake_prefix(const test::TempDir& tmp, const std::string& prefix, const std::string& header,
                 const std::string& header_text, const std::string& lib) {
  tmp.write(prefix + "/include/" + header, header_text);
  tmp.write(prefix + "/lib/" + lib, "not really a library");
}

}  // namespace

TEST_CASE("libraries: versions from the headers' macros (cudnn_version.h / nccl.h / openblas_config.h)") {
  CHECK(version_from_header("#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 19\n#define CUDNN_PATCHLEVEL 0\n",
                            {"CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"}) == "9.19.0");
  CHECK(version_from_header("#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n#define NCCL_SUFFIX \"\"\n",
                            {"NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"}) == "2.28.9");
  CHECK(version_from_header("#define OPENBLAS_VERSION \" OpenBLAS 0.3.21 \"\n", {"OPENBLAS_VERSION"}) == "0.3.21");
  CHECK_FALSE(version_from_header("#define CUDNN_MAJOR 9\n", {"CUDNN_MAJOR", "CUDNN_MINOR"}));
}

TEST_CASE("libraries: each from where it was found / with its switches - NCCL found -> USE_SYSTEM_NCCL=1 and NCCL_ROOT") {
  auto in = torch_inputs();
  in.facts.found = {cand("cudnn", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "9.19.0"),
                    cand("nccl", LibraryOrigin::pip, "nvidia-nccl-cu13", "/venv/site-packages/nvidia/nccl", "2.28.9"),
                    cand("cusparselt", LibraryOrigin::env, "CUSPARSELT_ROOT", "/opt/cusparselt", "0.8.1"),
                    cand("openblas", LibraryOrigin::system, "system", "/usr", "0.3.21")};
  auto p = plan_libraries(in);
  REQUIRE(p.ok());
  CHECK(choice(*p, "cudnn").state == LibraryState::found);
  CHECK(choice(*p, "cudnn").from->version == "9.19.0");
  CHECK(choice(*p, "nccl").from->origin == LibraryOrigin::pip);
  CHECK(choice(*p, "lapack").library == "openblas");  // MKL absent: the other provider
  CHECK(choice(*p, "magma").state == LibraryState::absent);
  CHECK_FALSE(missing_libraries(*p));
  CHECK(p->keyed_env.at("USE_CUDNN") == "1");
  CHECK(p->keyed_env.at("USE_NCCL") == "1");
  CHECK(p->keyed_env.at("USE_SYSTEM_NCCL") == "1");
  CHECK(p->keyed_env.at("BLAS") == "OpenBLAS");
  CHECK(p->keyed_env.at("USE_MAGMA") == "0");  // optional and absent: off, explicitly
  CHECK(p->path_env.at("NCCL_ROOT") == "/venv/site-packages/nvidia/nccl");
  CHECK(p->path_env.at("NCCL_LIB_DIR") == "/venv/site-packages/nvidia/nccl/lib");
  CHECK(p->path_env.at("CUDNN_INCLUDE_DIR") == "/usr/local/cuda/include");
  // The key holds origin and version, never a path.
  auto k = key_json(*p).dump();
  CHECK(contains(k, "\"origin\":\"pip\""));
  CHECK(contains(k, "\"version\":\"2.28.9\""));
  CHECK_FALSE(contains(k, "/venv"));
}

TEST_CASE("libraries: an expected library missing is exit 3 naming the package / the variable and --without") {
  auto in = torch_inputs();
  in.facts.found = {cand("cudnn", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "9.19.0"),
                    cand("nccl", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "2.28.9")};
  auto p = plan_libraries(in);
  REQUIRE(p.ok());
  auto e = missing_libraries(*p);
  REQUIRE(e);
  CHECK(e->exit == Exit::missing_tool);
  INFO(e->message);
  CHECK(contains(e->message, "cusparselt (cuSPARSELt): pip install nvidia-cusparselt-cu13"));
  CHECK(contains(e->message, "CUSPARSELT_ROOT"));
  CHECK(contains(e->message, "lapack (Intel MKL or OpenBLAS or NVPL)"));
  CHECK(contains(e->message, "MKLROOT"));
  CHECK(contains(e->message, "--without cusparselt,lapack"));
}

TEST_CASE("libraries: --without switches off and records - the recipe's USE_NCCL=0 is 'off' / not missing") {
  auto in = torch_inputs();
  in.without = {"cusparselt", "lapack"};
  in.fixed_env = {{"USE_NCCL", "0"}};
  in.facts.found = {cand("cudnn", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "9.19.0")};
  auto p = plan_libraries(in);
  REQUIRE(p.ok());
  CHECK_FALSE(missing_libraries(*p));
  CHECK(choice(*p, "cusparselt").state == LibraryState::without);
  CHECK(choice(*p, "cusparselt").reason == "--without cusparselt");
  CHECK(p->keyed_env.at("USE_CUSPARSELT") == "0");
  CHECK(p->keyed_env.at("BLAS") == "Eigen");
  CHECK(choice(*p, "nccl").state == LibraryState::off);
  CHECK(contains(choice(*p, "nccl").reason, "USE_NCCL=0 from the recipe's [build.env]"));
  CHECK(p->keyed_env.count("USE_NCCL") == 0);  // the recipe's own value stays
  CHECK(p->without == std::vector<std::string>{"cusparselt", "lapack"});
}

TEST_CASE("libraries: --env USE_SYSTEM_NCCL=0 declines the host's NCCL - no NCCL_ROOT, not 'found'") {
  auto in = torch_inputs();
  in.facts.found = {cand("cudnn", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "9.19.0"),
                    cand("nccl", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "2.28.9")};
  in.fixed_env = {{"USE_SYSTEM_NCCL", "0"}};
  in.fixed_from = {{"USE_SYSTEM_NCCL", "--env"}};
  // With the recipe's NCCL fetch: the build compiles the fetched copy.
  in.from_fetch = {{"nccl", "third_party/nccl"}};
  auto p = plan_libraries(in);
  REQUIRE(p.ok());
  CHECK(choice(*p, "nccl").state == LibraryState::source);
  CHECK(contains(choice(*p, "nccl").reason, "USE_SYSTEM_NCCL=0 from --env"));
  CHECK(contains(choice(*p, "nccl").reason, "third_party/nccl"));
  CHECK_FALSE(choice(*p, "nccl").from);
  CHECK(p->path_env.count("NCCL_ROOT") == 0);
  CHECK(p->path_env.count("NCCL_LIB_DIR") == 0);
  CHECK(p->keyed_env.count("USE_SYSTEM_NCCL") == 0);  // --env's own value stays
  CHECK(choice(*p, "cudnn").state == LibraryState::found);  // the others as before
  // Without a fetch: still not the host's, and said so.
  in.from_fetch.clear();
  auto q = plan_libraries(in);
  REQUIRE(q.ok());
  CHECK(choice(*q, "nccl").state == LibraryState::source);
  CHECK(contains(choice(*q, "nccl").reason, "downloads it"));
  CHECK(q->path_env.count("NCCL_ROOT") == 0);
  auto missing = missing_libraries(*q);  // cuSPARSELt and a LAPACK are not on this fake host; NCCL is no gap
  REQUIRE(missing);
  CHECK_FALSE(contains(missing->message, "nccl"));
}

TEST_CASE("libraries: an unknown --without name is bad input listing the valid ones") {
  auto in = torch_inputs();
  in.without = {"cudn"};
  auto p = plan_libraries(in);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().exit == Exit::bad_input);
  CHECK(contains(p.error().message, "--without: 'cudn' is not a library archbuild knows (did you mean 'cudnn'?)"));
}

TEST_CASE("libraries: the probe prefers the allowlisted variables / then pip / toolkit / system - versions read") {
  test::TempDir tmp;
  const std::string cudnn_h = "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 3\n#define CUDNN_PATCHLEVEL 1\n";
  fake_prefix(tmp, "toolkit", "cudnn.h", "", "libcudnn.so.9");
  tmp.write("toolkit/include/cudnn_version.h", cudnn_h);
  fake_prefix(tmp, "site/nvidia/cudnn", "cudnn.h", "", "libcudnn.so.9");
  tmp.write("site/nvidia/cudnn/include/cudnn_version.h", "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 10\n#define CUDNN_PATCHLEVEL 2\n");
  fake_prefix(tmp, "prefix", "cudnn.h", "", "libcudnn.so");
  tmp.write("prefix/include/cudnn_version.h", "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 20\n#define CUDNN_PATCHLEVEL 0\n");

  LibrarySearch s;
  s.toolkit_root = tmp / "toolkit";
  s.toolkit_label = "CUDA 13.0";
  s.system_prefixes = {tmp / "nothing"};
  std::vector<recipe::LibrarySpec> cudnn{specs().front()};
  REQUIRE(cudnn.front().name == "cudnn");

  auto f = probe_libraries(cudnn, s);
  REQUIRE(f.found.size() == 1);
  CHECK(f.found[0].origin == LibraryOrigin::toolkit);
  CHECK(f.found[0].version == "9.3.1");

  s.site_packages = {tmp / "site"};
  f = probe_libraries(cudnn, s);
  REQUIRE(f.found.size() == 2);
  CHECK(f.found[0].origin == LibraryOrigin::pip);
  CHECK(f.found[0].via == "nvidia-cudnn-cu13");
  CHECK(f.found[0].version == "9.10.2");

  s.env["CMAKE_PREFIX_PATH"] = (tmp / "elsewhere").string() + ":" + (tmp / "prefix").string();
  f = probe_libraries(cudnn, s);
  REQUIRE(f.found.size() == 3);
  CHECK(f.found[0].origin == LibraryOrigin::cmake_prefix_path);
  CHECK(f.found[0].version == "9.20.0");
  CHECK(f.found[0].lib_file == tmp / "prefix/lib/libcudnn.so");
}

TEST_CASE("libraries: on this machine cuDNN 9 and NCCL 2 beside /usr/local/cuda are found") {
  if (!fs::exists("/usr/local/cuda/include/cudnn_version.h") || !fs::exists("/usr/local/cuda/include/nccl.h")) {
    WARN("##archbuild-skip## no cuDNN/NCCL beside /usr/local/cuda");
    return;
  }
  LibrarySearch s;
  s.toolkit_root = fs::path("/usr/local/cuda");
  s.toolkit_label = "CUDA 13.0";
  auto f = probe_libraries(specs(), s);
  auto find = [&](const std::string& n) {
    return std::find_if(f.found.begin(), f.found.end(), [&](const LibraryCandidate& c) { return c.library == n; });
  };
  REQUIRE(find("cudnn") != f.found.end());
  REQUIRE(find("nccl") != f.found.end());
  CHECK(find("cudnn")->origin == LibraryOrigin::toolkit);
  CHECK(find("cudnn")->version.value_or("").starts_with("9."));
  CHECK(find("nccl")->version.value_or("").starts_with("2."));
}

// ---- the plan and the host check ----------------------------------------------------------

namespace {

Plan torch_plan(const PlanOptions& o, const std::string& recipe_text = "") {
  test::TempDir tmp;
  toolchain::Host h;
  toolchain::Toolkit t;
  t.root = "/usr/local/cuda-13.0";
  t.nvcc = "/usr/local/cuda-13.0/bin/nvcc";
  t.version = *Version::parse("13.0");
  t.nvcc_version = *Version::parse("13.0.88");
  h.toolkits = {t};
  toolchain::Compiler c;
  c.kind = toolchain::CompilerKind::gcc;
  c.version = *Version::parse("12.2.0");
  c.path = "/usr/bin/g++-12";
  h.compilers = {c};
  h.pythons = {toolchain::Python{"/usr/bin/python3", *Version::parse("3.12.3"), "test"}};
  h.tools = {{"cmake", "/usr/bin/cmake"}, {"ninja", "/usr/bin/ninja"}};
  Inputs in;
  std::optional<std::string> recipe;
  if (!recipe_text.empty()) recipe = tmp.write("r.toml", recipe_text).string();
  in.recipes = test::select_shipped(recipe.value_or("torch-2.15")).take();
  in.toolchains = toolchain::load_shipped().take();
  test::shipped_data(in);
  in.host = h;
  Request req;
  req.targets = arch::parse_arch_list("9.0", arch::ArchData::shipped(), {arch::Grammar::build, {}}).take();
  auto r = resolve(req, in);
  INFO(r.message);
  REQUIRE(r.ok());
  auto p = make_plan(r, test::with_shipped_specs(o));
  INFO((p ? "" : p.error().message));
  REQUIRE(p.ok());
  return *p;
}

PlanOptions resources(unsigned cores, double gib) {
  PlanOptions o;
  o.resources = HostResources{cores, static_cast<std::uint64_t>(gib * 1024 * 1024 * 1024)};
  return o;
}

}  // namespace

TEST_CASE("libraries in the plan: env keyed / paths not / the key changes with origin and --without") {
  auto o = resources(16, 64);
  o.library_facts.probed = true;
  o.library_facts.found = {cand("cudnn", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda-13.0", "9.19.0")};
  auto a = torch_plan(o);
  CHECK(a->env.at("USE_CUDNN").value == "1");
  CHECK(a->env.at("USE_CUDNN").keyed);
  CHECK_FALSE(a->env.at("CUDNN_LIB_DIR").keyed);
  // NCCL is not on this fake host: the tree builds it from the recipe's [[fetch]] (third_party/nccl).
  CHECK(a->env.at("USE_NCCL").value == "1");
  auto nccl = std::find_if(a->libraries.choices.begin(), a->libraries.choices.end(),
                           [](const LibraryChoice& c) { return c.name == "nccl"; });
  REQUIRE(nccl != a->libraries.choices.end());
  CHECK(nccl->state == LibraryState::source);
  CHECK(contains(nccl->reason, "third_party/nccl"));
  auto j = a.to_json();
  CHECK(j["libraries"]["libraries"].size() == 5);
  CHECK(j["key_inputs"]["libraries"].size() == 5);
  REQUIRE(missing_libraries(a->libraries));  // cuSPARSELt and a LAPACK

  // The same library from elsewhere (a pip package) is another build.
  auto o2 = o;
  o2.library_facts.found[0].origin = LibraryOrigin::pip;
  CHECK(torch_plan(o2)->key != a->key);
  // The same origin at another path is the same build.
  auto o3 = o;
  o3.library_facts.found[0].root = "/opt/cuda";
  o3.library_facts.found[0].lib_dir = "/opt/cuda/lib";
  CHECK(torch_plan(o3)->key == a->key);
  auto o4 = o;
  o4.without = {"cusparselt", "lapack"};
  auto w = torch_plan(o4);
  CHECK(w->key != a->key);
  CHECK_FALSE(missing_libraries(w->libraries));
  CHECK(w->env.at("USE_CUSPARSELT").value == "0");
  CHECK(w->env.at("BLAS").value == "Eigen");
}

TEST_CASE("host check: an impossible disk requirement and too many jobs name the figures (exit 3)") {
  std::string recipe = "extends = \"torch-2.15\"\n[host]\ndisk_gib = 100000000\n";
  auto o = resources(16, 6);
  o.jobs = 8;
  auto p = torch_plan(o, recipe);
  HostFigures h;
  h.cache_dir = "/cache";
  h.free_bytes = std::uint64_t(50) * 1024 * 1024 * 1024;
  h.mem_available = std::uint64_t(6) * 1024 * 1024 * 1024;
  auto c = check_host(p, h);
  CHECK_FALSE(c.ok);
  auto e = c.error();
  REQUIRE(e);
  CHECK(e->exit == Exit::missing_tool);
  INFO(e->message);
  CHECK(contains(e->message, "50.0 GiB free in /cache, but a torch build needs 1e+08 GiB there"));
  CHECK(contains(e->message, "8 jobs x 4 GiB per compile job (recipe [build.memory] nvcc job) = 32 GiB, but 6.0 GiB"));
  CHECK(contains(e->message, "use --jobs 1 or fewer"));
  CHECK(c.to_json()["disk"]["need_gib"] == 100000000.0);

  // The shipped figures on a host that has them: fine; the automatic jobs always fit.
  auto ok = torch_plan(resources(16, 64));
  h.free_bytes = std::uint64_t(500) * 1024 * 1024 * 1024;
  h.mem_available = std::uint64_t(64) * 1024 * 1024 * 1024;
  auto good = check_host(ok, h);
  CHECK(good.ok);
  CHECK(good.need_disk_gib == 40);
  CHECK(good.jobs == 16);

  // Admitted by memory (jobs = cores), a small host still passes: admission keeps the compiles
  // within the budget, and the static rule's count of the same per-job figure is what must fit.
  auto small = resources(16, 20);
  small.memory_budget_mb = 0;
  auto admitted = torch_plan(small);
  REQUIRE(admitted->jobs.admitted);
  h.mem_available = std::uint64_t(20) * 1024 * 1024 * 1024;
  auto fits = check_host(admitted, h);
  INFO(fits.problems.size());
  CHECK(fits.ok);
  CHECK(fits.jobs == 5);  // 20 GiB / 4 GiB, not the 16 cores admission runs
}

// ---- NVPL on Arm (docs/arm-hosts.md): the official sbsa builds' BLAS=NVPL -------------------

TEST_CASE("libraries: on sbsa the official BLAS=NVPL is used where NVPL is found, else OpenBLAS with a line saying why",
          "[plan][libraries][arm]") {
  auto in = torch_inputs();
  in.preferred_env = {{"BLAS", "NVPL"}, {"USE_MKLDNN", "ON"}};
  in.preferred_from = "the official sbsa builds (recipe [platform.sbsa] official_env)";
  auto base = std::vector<LibraryCandidate>{cand("cudnn", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "9.19.0"),
                                            cand("nccl", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "2.28.9"),
                                            cand("cusparselt", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "0.8.1")};
  // NVPL and OpenBLAS both installed: NVPL, as the official wheels (OpenBLAS comes first in the data).
  in.facts.found = base;
  in.facts.found.push_back(cand("openblas", LibraryOrigin::system, "system", "/usr", "0.3.21"));
  in.facts.found.push_back(cand("nvpl", LibraryOrigin::system, "system", "/usr/local", "0.4.1"));
  auto both = plan_libraries(in);
  REQUIRE(both.ok());
  const auto& l = choice(*both, "lapack");
  CHECK(l.state == LibraryState::found);
  CHECK(l.library == "nvpl");
  CHECK(both->keyed_env.at("BLAS") == "NVPL");
  CHECK(l.note == "BLAS=NVPL as the official sbsa builds (recipe [platform.sbsa] official_env)");
  CHECK(contains(describe(l), "nvpl 0.4.1"));
  CHECK(to_json(l)["note"] == l.note);

  // NVPL absent: OpenBLAS, and the line says why the official choice was not used.
  in.facts.found = base;
  in.facts.found.push_back(cand("openblas", LibraryOrigin::system, "system", "/usr", "0.3.21"));
  auto fallback = plan_libraries(in);
  REQUIRE(fallback.ok());
  const auto& f = choice(*fallback, "lapack");
  CHECK(f.library == "openblas");
  CHECK(fallback->keyed_env.at("BLAS") == "OpenBLAS");
  INFO(f.note);
  CHECK(contains(f.note, "BLAS=NVPL of the official sbsa builds"));
  CHECK(contains(f.note, "not used: NVPL not found (install NVPL"));
  CHECK(contains(f.note, "OpenBLAS instead"));
  CHECK(contains(describe(f), "BLAS=NVPL of the official sbsa builds"));
  CHECK_FALSE(missing_libraries(*fallback));

  // x86_64 (no preference): the data order, MKL then OpenBLAS; NVPL is never preferred.
  in.preferred_env.clear();
  in.facts.found.push_back(cand("nvpl", LibraryOrigin::system, "system", "/usr/local", "0.4.1"));
  auto x86 = plan_libraries(in);
  REQUIRE(x86.ok());
  CHECK(choice(*x86, "lapack").library == "openblas");
  CHECK(choice(*x86, "lapack").note.empty());
}

TEST_CASE("libraries: --env BLAS=NVPL looks for NVPL only: absent, exit 3 says so instead of building its own LAPACK",
          "[plan][libraries][arm]") {
  auto in = torch_inputs();
  in.facts.found = {cand("cudnn", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "9.19.0"),
                    cand("nccl", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "2.28.9"),
                    cand("cusparselt", LibraryOrigin::toolkit, "CUDA 13.0", "/usr/local/cuda", "0.8.1"),
                    cand("openblas", LibraryOrigin::system, "system", "/usr", "0.3.21")};
  in.fixed_env = {{"BLAS", "NVPL"}};
  in.fixed_from = {{"BLAS", "--env"}};
  auto p = plan_libraries(in);
  REQUIRE(p.ok());
  const auto& l = choice(*p, "lapack");
  CHECK(l.state == LibraryState::missing);  // was "source": MKL's and OpenBLAS's BLAS=… declined
  CHECK(l.title == "NVPL");
  auto e = missing_libraries(*p);
  REQUIRE(e);
  INFO(e->message);
  CHECK(contains(e->message, "lapack (NVPL): install NVPL"));
  CHECK(contains(e->message, "BLAS=NVPL from --env selects NVPL: not found"));
  // Found: used, with no further word.
  in.facts.found.push_back(cand("nvpl", LibraryOrigin::env, "NVPL_ROOT", "/opt/nvpl", "0.4.1"));
  auto q = plan_libraries(in);
  REQUIRE(q.ok());
  CHECK(choice(*q, "lapack").library == "nvpl");
  CHECK(choice(*q, "lapack").state == LibraryState::found);
  CHECK_FALSE(q->keyed_env.count("BLAS"));  // --env's own value stands
}

TEST_CASE("libraries: NVPL is found under NVPL_ROOT or a system prefix like /usr/local", "[plan][libraries][arm]") {
  test::TempDir tmp;
  fake_prefix(tmp, "nvpl", "nvpl_lapack.h", "/* NVPL LAPACK */\n", "libnvpl_lapack_lp64_gomp.so.0");
  fake_prefix(tmp, "local", "nvpl_lapack.h", "/* NVPL LAPACK */\n", "libnvpl_lapack_lp64_gomp.so.0");
  auto it = std::find_if(specs().begin(), specs().end(), [](const recipe::LibrarySpec& s) { return s.name == "nvpl"; });
  REQUIRE(it != specs().end());
  CHECK(it->provides == "lapack");
  std::vector<recipe::LibrarySpec> nvpl{*it};
  LibrarySearch s;
  s.system_prefixes = {tmp / "local"};
  auto f = probe_libraries(nvpl, s);
  REQUIRE(f.found.size() == 1);
  CHECK(f.found[0].origin == LibraryOrigin::system);
  CHECK(f.found[0].lib_file == tmp / "local/lib/libnvpl_lapack_lp64_gomp.so.0");
  s.env["NVPL_ROOT"] = (tmp / "nvpl").string();
  f = probe_libraries(nvpl, s);
  REQUIRE(f.found.size() == 2);
  CHECK(f.found[0].origin == LibraryOrigin::env);
  CHECK(f.found[0].via == "NVPL_ROOT");
}

TEST_CASE("libraries: NVPL exists for aarch64 only: on x86_64 it is neither looked for nor advised, unless named",
          "[plan][libraries][arm]") {
  auto it = std::find_if(specs().begin(), specs().end(), [](const recipe::LibrarySpec& s) { return s.name == "nvpl"; });
  REQUIRE(it != specs().end());
  CHECK(it->machines == std::vector<std::string>{"aarch64"});
  // The probe: an NVPL under NVPL_ROOT is not found for an x86_64 build, and is for an aarch64 one.
  test::TempDir tmp;
  fake_prefix(tmp, "nvpl", "nvpl_lapack.h", "/* NVPL LAPACK */\n", "libnvpl_lapack_lp64_gomp.so.0");
  LibrarySearch s;
  s.system_prefixes = {tmp / "nothing"};
  s.env["NVPL_ROOT"] = (tmp / "nvpl").string();
  s.machine = "x86_64";
  CHECK(probe_libraries({*it}, s).found.empty());
  s.machine = "aarch64";
  CHECK(probe_libraries({*it}, s).found.size() == 1);
  // The plan: LAPACK missing on x86_64 names MKL and OpenBLAS, not NVPL; on aarch64 all three.
  auto in = torch_inputs();
  in.machine = "x86_64";
  auto x86 = plan_libraries(in);
  REQUIRE(x86.ok());
  CHECK(choice(*x86, "lapack").title == "Intel MKL or OpenBLAS");
  CHECK_FALSE(contains(choice(*x86, "lapack").advice, "NVPL"));
  in.machine = "aarch64";
  auto arm = plan_libraries(in);
  REQUIRE(arm.ok());
  CHECK(choice(*arm, "lapack").title == "Intel MKL or OpenBLAS or NVPL");
  // --env BLAS=NVPL on x86_64: the variable names it, so its own missing line says so.
  in.machine = "x86_64";
  in.fixed_env = {{"BLAS", "NVPL"}};
  in.fixed_from = {{"BLAS", "--env"}};
  auto named = plan_libraries(in);
  REQUIRE(named.ok());
  CHECK(choice(*named, "lapack").title == "NVPL");
  CHECK(choice(*named, "lapack").state == LibraryState::missing);
}

TEST_CASE("libraries: {multiarch} in a library's system folders is the build platform's Debian folder (OpenBLAS's)",
          "[plan][libraries][arm]") {
  auto it = std::find_if(specs().begin(), specs().end(), [](const recipe::LibrarySpec& s) { return s.name == "openblas"; });
  REQUIRE(it != specs().end());
  for (const auto& dir : it->system) CHECK(contains(dir, "{multiarch}"));  // no machine written into the data
  // Debian's libopenblas-dev layout, under a temporary root, for the machine these tests run on.
  test::TempDir tmp;
  const std::string multiarch = test::machine() + "-linux-gnu";
  tmp.write("usr/include/" + multiarch + "/openblas-pthread/openblas_config.h", "#define OPENBLAS_VERSION \" OpenBLAS 0.3.21 \"\n");
  tmp.write("usr/lib/" + multiarch + "/openblas-pthread/libopenblas.so.0", "not really a library");
  recipe::LibrarySpec spec = *it;
  for (auto& dir : spec.system) dir = (tmp / dir.substr(1)).string();  // "/usr/…" under the root
  LibrarySearch s;
  s.system_prefixes = {tmp / "nothing"};
  // Folders not known (no platform given): not looked in, never guessed.
  CHECK(probe_libraries({spec}, s).found.empty());
  s.dirs = toolchain::library_dirs_of(toolchain::Platform{.machine = test::machine(), .cuda_target = "x"});
  REQUIRE(s.dirs.multiarch == multiarch);
  auto f = probe_libraries({spec}, s);
  REQUIRE(f.found.size() == 1);
  CHECK(f.found[0].include_dir == tmp / ("usr/include/" + multiarch + "/openblas-pthread"));
  CHECK(f.found[0].lib_file == tmp / ("usr/lib/" + multiarch + "/openblas-pthread/libopenblas.so.0"));
}
