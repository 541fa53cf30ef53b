// plan/: every resolution example against the shipped recipes and toolchains on
// synthetic hosts, the rules recorded, the Plan's environment and steps, and the build key.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>

#include "arch/parse.hpp"
#include "core/text.hpp"
#include "plan/plan.hpp"
#include "plan/resolve.hpp"
#include "support/shipped.hpp"
#include "support/tempdir.hpp"
#include "support/torch_lines.hpp"

using namespace archbuild;
using namespace archbuild::plan;
namespace fs = std::filesystem;

namespace {

// The newest torch recipe (recipes/): what resolution picks when nothing narrows it.
const std::string newest = test::newest_torch().recipe;

Version V(const char* s) { return *Version::parse(s); }

std::vector<arch::Arch> sm(const std::string& text) {
  auto a = arch::parse_arch_list(text, arch::ArchData::shipped(), {arch::Grammar::build, {}});
  REQUIRE(a.ok());
  return *a;
}

toolchain::Toolkit toolkit(const char* release, const char* build, const std::string& root) {
  toolchain::Toolkit t;
  t.root = root;
  t.nvcc = root + "/bin/nvcc";
  t.version = V(release);
  t.nvcc_version = V(build);
  t.found_by = root;
  return t;
}

toolchain::Compiler gxx(const char* version, const std::string& path) {
  toolchain::Compiler c;
  c.kind = toolchain::CompilerKind::gcc;
  c.version = V(version);
  c.path = path;
  c.found_by = "PATH";
  return c;
}

toolchain::Python python(const char* version, const std::string& path = "/usr/bin/python3") {
  return {path, V(version), "python3 on PATH"};
}

// A build host: CUDA 13.0, g++ 12, Python 3.11, cmake and ninja — like the build machines.
toolchain::Host host_130() {
  toolchain::Host h;
  h.toolkits = {toolkit("13.0", "13.0.88", "/usr/local/cuda-13.0")};
  h.compilers = {gxx("12.2.0", "/usr/bin/g++-12")};
  h.pythons = {python("3.11.2")};
  h.tools = {{"cmake", "/usr/bin/cmake"}, {"ninja", "/usr/bin/ninja"}};
  return h;
}

Inputs inputs(toolchain::Host host, const std::optional<std::string>& recipe = std::nullopt) {
  Inputs in;
  auto rs = test::select_shipped(recipe);
  REQUIRE(rs.ok());
  in.recipes = *rs;
  auto tcs = toolchain::load_shipped();
  REQUIRE(tcs.ok());
  in.toolchains = *tcs;
  test::shipped_data(in);
  in.host = std::move(host);
  return in;
}

Request request(const std::string& targets) {
  Request r;
  r.targets = sm(targets);
  r.recipe_label = "the torch recipes";
  return r;
}

bool has_rule(const Resolution& r, const std::string& id, bool ok, const std::string& words = "") {
  REQUIRE(rules::from_name(id));  // a registered rule (core/rules.hpp), not a typo
  for (const auto& x : r.rules)
    if (x.id == *rules::from_name(id) && x.ok == ok && x.detail.find(words) != std::string::npos) return true;
  return false;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("resolve --sm 120 --torch 2.5: CUDA too old and a parser without two-digit majors, suggests torch >= 2.7") {
  auto req = request("120");
  req.torch = V("2.5");
  auto r = resolve(req, inputs(host_130()));
  INFO(r.message);
  CHECK(r.status == Exit::bad_input);
  CHECK(contains(r.message, "rule toolkit-arch: sm_120 needs CUDA >= 12.8 [torch-2.5 with CUDA 12.4, 12.1, 11.8]"));
  CHECK(contains(r.message, "rule arch-syntax: the TORCH_CUDA_ARCH_LIST parser rejects two-digit majors (12.0)"));
  std::vector<std::string> can;  // every line from 2.7 on, the newest included
  for (const auto& l : test::torch_lines())
    if (V(l.line.c_str()) >= V("2.7")) can.push_back(l.line);
  CHECK(can.size() >= 9);
  CHECK(contains(r.message, "Way out: --torch 2.7 or newer (" + text::join(can, ", ") + " can)"));
  // The parts are fields (doctor words its own way out from `reason`): the message is them joined.
  CHECK(r.way_out == "--torch 2.7 or newer (" + text::join(can, ", ") + " can)");
  CHECK(r.reason.starts_with("cannot build sm_120: rule toolkit-arch"));
  CHECK(r.message == r.reason + ". Way out: " + r.way_out);
  CHECK(has_rule(r, "toolkit-arch", false, "sm_120 needs CUDA >= 12.8"));
  CHECK(has_rule(r, "arch-syntax", false, "of torch-2.5"));
}

TEST_CASE("resolve --sm 6.1 --cuda 13.0: CUDA 13 dropped Pascal, suggests CUDA <= 12.9") {
  auto req = request("6.1");
  req.cuda = V("13.0");
  auto r = resolve(req, inputs(host_130()));
  INFO(r.message);
  CHECK(r.status == Exit::bad_input);
  CHECK(contains(r.message, "rule toolkit-arch: CUDA 13.0 dropped sm_61 (CUDA <= 12.9 compiles it)"));
  // The newest recipe that still builds with CUDA 12.9 (torch 2.12 since the 2026 recipes).
  CHECK(contains(r.message, "Way out: CUDA <= 12.9: --cuda 12.9 (torch-2.12)"));
}

TEST_CASE("resolve --sm 12.0f --torch 2.7: no `f` before the parser learned it") {
  auto req = request("12.0f");
  req.torch = V("2.7");
  auto r = resolve(req, inputs(host_130()));
  INFO(r.message);
  CHECK(r.status == Exit::bad_input);
  CHECK(contains(r.message, "does not accept 'f' suffixes (12.0f)"));
  CHECK(contains(r.message, "sm_120f needs CUDA >= 12.9"));
  CHECK(contains(r.message, "Way out: --torch 2.9"));
}

TEST_CASE("resolve --sm 9.5: there is no such arch (refused before resolution)") {
  auto a = arch::parse_arch_list("9.5", arch::ArchData::shipped(), {arch::Grammar::build, {}});
  REQUIRE_FALSE(a.ok());
  CHECK(a.error().exit == Exit::bad_input);
  CHECK(contains(a.error().message, "9.5"));
}

TEST_CASE("resolve --sm 89 resolves to the newest recipe, with the installed toolkit and compiler") {
  auto r = resolve(request("89"), inputs(host_130()));
  INFO(r.message);
  REQUIRE(r.status == Exit::ok);
  CHECK(r.recipe.name == newest);
  CHECK(r.toolchain.cuda == V("13.0"));
  REQUIRE(r.toolkit);
  CHECK(r.toolkit->root == "/usr/local/cuda-13.0");
  REQUIRE(r.compiler);
  CHECK(r.compiler->path == "/usr/bin/g++-12");
  REQUIRE(r.python);
  CHECK(r.arch_list == "8.9");
  for (const char* id : {"targets", "toolchain-data", "toolkit-arch", "arch-syntax", "python-version", "source-url",
                         "toolkit-installed", "host-compiler", "python-installed", "tool-installed", "arch-list"})
    CHECK(has_rule(r, id, true));
}

TEST_CASE("an installed toolkit is preferred within the newest recipe") {
  auto h = host_130();
  h.toolkits = {toolkit("13.2", "13.2.51", "/usr/local/cuda-13.2")};
  auto r = resolve(request("90"), inputs(h));
  REQUIRE(r.status == Exit::ok);
  CHECK(r.recipe.name == newest);
  CHECK(r.toolchain.cuda == V("13.2"));  // not 13.0, its first preference, which is not installed

  // An installed toolkit never makes an older recipe win: 12.6 is for torch <= 2.14.
  h.toolkits = {toolkit("12.6", "12.6.85", "/usr/local/cuda-12.6")};
  auto old = resolve(request("90"), inputs(h));
  CHECK(old.status == Exit::missing_tool);
  CHECK(old.recipe.name == newest);
  CHECK(contains(old.message, "or use the installed CUDA 12.6: --torch 2.14 --cuda 12.6"));
}

TEST_CASE("only a missing toolkit stands in the way: exit 3, the choice, and how to get it") {
  auto h = host_130();
  h.toolkits.clear();
  auto r = resolve(request("90"), inputs(h));
  CHECK(r.status == Exit::missing_tool);
  CHECK(r.recipe.name == newest);
  CHECK(r.toolchain.cuda == V("13.0"));
  CHECK_FALSE(r.toolkit);
  CHECK(contains(r.message, "CUDA 13.0 is not installed"));
  CHECK(contains(r.message, "CUDA_HOME"));
  CHECK(has_rule(r, "toolkit-installed", false));

  SECTION("and it names an installed alternative when one would do") {
    auto h2 = host_130();
    auto req = request("6.1");  // 13.x cannot; torch 2.14's 12.6 can (not installed)
    h2.toolkits.push_back(toolkit("12.4", "12.4.131", "/usr/local/cuda-12.4"));
    auto r2 = resolve(req, inputs(h2));
    CHECK(r2.status == Exit::missing_tool);
    CHECK(r2.recipe.name == "torch-2.14");
    CHECK(r2.toolchain.cuda == V("12.6"));
    CHECK(contains(r2.message, "or use the installed CUDA 12.4: --torch 2.6 --cuda 12.4"));
  }
}

TEST_CASE("resolve --sm 90 with no recipe: the newest torch with the installed CUDA 13.0") {
  auto r = resolve(request("90"), inputs(host_130()));
  INFO(r.message);
  REQUIRE(r.status == Exit::ok);
  CHECK(r.recipe.name == newest);
  CHECK(r.recipe.driver == recipe::Driver::scikit_build_core);
  CHECK(r.toolchain.cuda == V("13.0"));
  REQUIRE(r.toolkit);
  CHECK(r.toolkit->root == "/usr/local/cuda-13.0");
  CHECK(r.arch_list == "9.0");
}

TEST_CASE("resolve --sm 107 (Rubin): the newest torch with CUDA >= 13.4, the arch passed as the number 10.7") {
  auto h = host_130();
  h.toolkits.push_back(toolkit("13.4", "13.4.92", "/usr/local/cuda-13.4"));
  auto r = resolve(request("107"), inputs(h));
  INFO(r.message);
  REQUIRE(r.status == Exit::ok);
  CHECK(r.recipe.name == newest);
  CHECK(r.toolchain.cuda >= V("13.4"));
  REQUIRE(r.toolkit);
  CHECK(r.toolkit->root == "/usr/local/cuda-13.4");
  CHECK(r.arch_list == "10.7");
  // sm_90 on the same host keeps the preferred, installed 13.0.
  auto hopper = resolve(request("90"), inputs(h));
  REQUIRE(hopper.status == Exit::ok);
  CHECK(hopper.toolchain.cuda == V("13.0"));
  // Without 13.4 installed: the choice stands and the missing toolkit is named (exit 3).
  auto bare = resolve(request("107"), inputs(host_130()));
  CHECK(bare.status == Exit::missing_tool);
  CHECK(bare.toolchain.cuda == V("13.4"));

  SECTION("a recipe that builds with CUDA 13.4 gets it") {
    test::TempDir tmp;
    auto f = tmp.write("torch-2.15-cu134.toml", "extends = \"torch-2.15\"\ncuda = [\"13.4\"]\n");
    auto ok = resolve(request("107"), inputs(h, f.string()));
    INFO(ok.message);
    REQUIRE(ok.status == Exit::ok);
    CHECK(ok.toolchain.cuda >= V("13.4"));
    REQUIRE(ok.toolkit);
    CHECK(ok.toolkit->root == "/usr/local/cuda-13.4");
    CHECK(ok.arch_list == "10.7");
    auto fam = resolve(request("107f"), inputs(h, f.string()));
    REQUIRE(fam.status == Exit::ok);
    CHECK(fam.arch_list == "10.7f");
  }
  SECTION("without 13.4 installed: the choice stands, and the missing toolkit is named") {
    test::TempDir tmp;
    auto f = tmp.write("torch-2.15-cu134.toml", "extends = \"torch-2.15\"\ncuda = [\"13.4\"]\n");
    auto miss = resolve(request("107"), inputs(host_130(), f.string()));
    CHECK(miss.status == Exit::missing_tool);
    CHECK(contains(miss.message, "CUDA 13.4 is not installed"));
  }
}

TEST_CASE("every new recipe resolves on a CUDA 13.0 host") {
  for (const char* name : {"torch-2.10", "torch-2.11", "torch-2.12", "torch-2.13", "torch-2.14", "torch-2.15",
                           "torchvision-0.25", "torchvision-0.26", "torchvision-0.27", "torchvision-0.28",
                           "torchvision-0.29", "torchaudio-2.10", "torchaudio-2.11"}) {
    INFO(name);
    auto r = resolve(request("90"), inputs(host_130(), std::string(name)));
    INFO(r.message);
    CHECK(r.status == Exit::ok);
    CHECK(r.recipe.name == name);
    CHECK(r.toolchain.cuda == V("13.0"));
  }
  // C++20 from 2.13: the recipe's GCC floor.
  auto h = host_130();
  h.compilers = {gxx("10.5.0", "/usr/bin/g++-10")};
  auto old = resolve(request("90"), inputs(h, std::string("torch-2.13")));
  CHECK(old.status == Exit::missing_tool);
  CHECK(contains(old.message, "older than torch-2.13 needs (at least GCC 11.4)"));
  CHECK(resolve(request("90"), inputs(h, std::string("torch-2.12"))).status == Exit::ok);
}

TEST_CASE("an installed nvcc that does not list a target is not used") {
  auto h = host_130();
  h.toolkits[0].listed = std::vector<arch::Cc>{{7, 5}, {8, 0}};
  auto r = resolve(request("90"), inputs(h));
  CHECK(r.status == Exit::missing_tool);
  CHECK(has_rule(r, "nvcc-arch-list", false, "lacks compute_90"));
}

TEST_CASE("host compilers: newest accepted GCC, then Clang, CUDAHOSTCXX is honoured or refused") {
  auto h = host_130();
  h.toolkits = {toolkit("12.8", "12.8.93", "/usr/local/cuda-12.8")};
  auto req = request("90");
  req.torch = V("2.7");

  SECTION("too new only: exit 3 naming the newest accepted GCC and CUDAHOSTCXX") {
    h.compilers = {gxx("15.1.0", "/usr/bin/g++-15")};
    auto r = resolve(req, inputs(h));
    CHECK(r.status == Exit::missing_tool);
    CHECK(contains(r.message, "no host compiler CUDA 12.8 accepts"));
    CHECK(contains(r.message, "GCC 15.1.0 is newer than CUDA 12.8 accepts (at most GCC 14)"));
    CHECK(contains(r.message, "install g++-14 and set CUDAHOSTCXX=/usr/bin/g++-14"));
  }
  SECTION("the newest accepted GCC wins over newer rejected ones and over Clang") {
    auto clang = gxx("18.1.0", "/usr/bin/clang++-18");
    clang.kind = toolchain::CompilerKind::clang;
    h.compilers = {gxx("15.1.0", "/usr/bin/g++-15"), gxx("13.3.0", "/usr/bin/g++-13"), gxx("14.2.0", "/usr/bin/g++-14"),
                   clang};
    auto r = resolve(req, inputs(h));
    REQUIRE(r.status == Exit::ok);
    CHECK(r.compiler->path == "/usr/bin/g++-14");
    CHECK(has_rule(r, "host-compiler", false, "g++-15"));
  }
  SECTION("Clang when no GCC is accepted") {
    auto clang = gxx("19.1.0", "/usr/bin/clang++-19");
    clang.kind = toolchain::CompilerKind::clang;
    h.compilers = {gxx("15.1.0", "/usr/bin/g++-15"), clang};
    auto r = resolve(req, inputs(h));
    REQUIRE(r.status == Exit::ok);
    CHECK(r.compiler->path == "/usr/bin/clang++-19");
  }
  SECTION("the recipe's own floor: GCC older than PyTorch needs") {
    h.compilers = {gxx("8.5.0", "/usr/bin/g++-8")};
    auto r = resolve(req, inputs(h));
    CHECK(r.status == Exit::missing_tool);
    CHECK(contains(r.message, "older than torch-2.7 needs (at least GCC 9.3)"));
  }
  SECTION("CUDAHOSTCXX pointing at a rejected compiler is refused with the way out") {
    auto user = gxx("15.1.0", "/usr/bin/g++-15");
    user.found_by = "CUDAHOSTCXX";
    h.compilers = {user, gxx("13.3.0", "/usr/bin/g++-13")};
    h.cudahostcxx = "/usr/bin/g++-15";
    auto r = resolve(req, inputs(h));
    CHECK(r.status == Exit::bad_input);
    CHECK(contains(r.message, "rule host-compiler: CUDAHOSTCXX=/usr/bin/g++-15"));
    CHECK(contains(r.message, "Way out: CUDAHOSTCXX=/usr/bin/g++-13 (g++ 13.3.0) or unset CUDAHOSTCXX"));
    CHECK(r.way_out == "CUDAHOSTCXX=/usr/bin/g++-13 (g++ 13.3.0) or unset CUDAHOSTCXX");
    CHECK(r.message == r.reason + ". Way out: " + r.way_out);
    // The rejected compiler's reason, not its line cut at the first ": " (a path may hold one).
    CHECK(contains(r.reason, "rule host-compiler: CUDAHOSTCXX=/usr/bin/g++-15: "));
    CHECK_FALSE(contains(r.reason, "/usr/bin/g++-15: /usr/bin/g++-15"));
    CHECK(has_rule(r, "host-compiler", false, "/usr/bin/g++-15: "));
  }
  SECTION("a CUDAHOSTCXX path with ': ' in it: the refusal names the compiler's reason whole") {
    auto user = gxx("15.1.0", "/opt/a: b/g++-15");
    user.found_by = "CUDAHOSTCXX";
    h.compilers = {user, gxx("13.3.0", "/usr/bin/g++-13")};
    h.cudahostcxx = "/opt/a: b/g++-15";
    auto r = resolve(req, inputs(h));
    CHECK(r.status == Exit::bad_input);
    CHECK(contains(r.reason, "rule host-compiler: CUDAHOSTCXX=/opt/a: b/g++-15: "));
    CHECK_FALSE(contains(r.reason, "CUDAHOSTCXX=/opt/a: b/g++-15: b/g++-15"));
  }
  SECTION("CUDAHOSTCXX pointing at an accepted compiler is used even if not the newest") {
    auto user = gxx("12.3.0", "/opt/gcc12/bin/g++");
    user.found_by = "CUDAHOSTCXX";
    h.compilers = {user, gxx("14.2.0", "/usr/bin/g++-14")};
    h.cudahostcxx = "/opt/gcc12/bin/g++";
    auto r = resolve(req, inputs(h));
    REQUIRE(r.status == Exit::ok);
    CHECK(r.compiler->path == "/opt/gcc12/bin/g++");
  }
}

TEST_CASE("Python: the asked version decides the recipe, missing ones are exit 3") {
  auto h = host_130();
  SECTION("--python 3.9 skips torch 2.9 (3.10+)") {
    h.pythons = {python("3.9.18", "/usr/bin/python3.9")};
    h.toolkits.push_back(toolkit("12.9", "12.9.86", "/usr/local/cuda-12.9"));
    auto req = request("90");
    req.python = V("3.9");
    auto r = resolve(req, inputs(h));
    REQUIRE(r.status == Exit::ok);
    CHECK(r.recipe.name == "torch-2.8");
    CHECK(r.python->path == "/usr/bin/python3.9");
    CHECK(has_rule(r, "python-version", false, "torch-2.9 supports Python 3.10"));
  }
  SECTION("an unsupported Python everywhere: refused, naming the installed one that works") {
    auto req = request("90");
    req.python = V("3.7");
    auto r = resolve(req, inputs(h));
    CHECK(r.status == Exit::bad_input);
    CHECK(contains(r.message, "rule python-version: Python 3.7 is not supported"));
    CHECK(contains(r.message, "--python 3.11 (installed"));
  }
  SECTION("a supported but absent interpreter") {
    auto req = request("90");
    req.python = V("3.12");
    auto r = resolve(req, inputs(h));
    CHECK(r.status == Exit::missing_tool);
    CHECK(contains(r.message, "python3.12 is not on PATH"));
  }
  SECTION("tools the build runs") {
    h.tools.erase("ninja");
    auto r = resolve(request("90"), inputs(h));
    CHECK(r.status == Exit::missing_tool);
    CHECK(contains(r.message, "ninja is not on PATH"));
  }
}

TEST_CASE("the arch list: targets as SASS, +PTX on the newest only when asked, never empty") {
  auto r = resolve(request("90,80"), inputs(host_130()));
  REQUIRE(r.status == Exit::ok);
  CHECK(r.arch_list == "8.0;9.0");
  auto req = request("80 90 120");
  req.ptx = true;
  auto p = resolve(req, inputs(host_130()));
  REQUIRE(p.status == Exit::ok);
  CHECK(p.arch_list == "8.0;9.0;12.0+PTX");
  auto a = resolve(request("90a"), inputs(host_130()));
  REQUIRE(a.status == Exit::ok);
  CHECK(a.arch_list == "9.0a");
  Request none;
  auto e = resolve(none, inputs(host_130()));
  CHECK(e.status == Exit::bad_input);
}

TEST_CASE("companion recipes: --recipe torchvision --torch 2.7") {
  auto in = inputs(host_130(), std::string("torchvision"));
  CHECK(in.recipes.size() == 12);
  auto req = request("90");
  req.torch = V("2.7");
  in.host.toolkits.push_back(toolkit("12.8", "12.8.93", "/usr/local/cuda-12.8"));
  auto r = resolve(req, in);
  REQUIRE(r.status == Exit::ok);
  CHECK(r.recipe.name == "torchvision-0.22");
  CHECK(r.recipe.version == V("0.22.1"));
  // torch.utils.cpp_extension has no `f`
  auto f = request("12.0f");
  auto rf = resolve(f, inputs(host_130(), std::string("torchvision")));
  CHECK(rf.status == Exit::bad_input);
  CHECK(contains(rf.message, "torch.utils.cpp_extension does not accept 'f' suffixes"));
}

TEST_CASE("recipe selection: names, packages, files, abstract bases") {
  auto one = test::select_shipped(std::string("torch-2.6"));
  REQUIRE(one.ok());
  REQUIRE(one->size() == 1);
  CHECK(one->front().name == "torch-2.6");
  auto torch = test::select_shipped(std::nullopt);
  REQUIRE(torch.ok());
  CHECK(torch->size() == test::torch_lines().size());  // every torch line, none of the bases
  CHECK(torch->size() >= 12);
  auto base = test::select_shipped(std::string("torch-common"));
  REQUIRE_FALSE(base.ok());
  CHECK(contains(base.error().message, "abstract"));
  auto typo = test::select_shipped(std::string("torchvison"));
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.error().exit == Exit::bad_input);
}

TEST_CASE("a recipe without a url or path needs --source-url") {
  // The example's recipe without its source.path.
  test::TempDir tmp;
  std::string text = test::read_file(std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml");
  text.erase(text.find("path = \".\"\n"), std::string("path = \".\"\n").size());
  std::string file = tmp.write("recipe.toml", text).string();
  auto in = inputs(host_130(), file);
  auto r = resolve(request("90"), in);
  CHECK(r.status == Exit::bad_input);
  CHECK(contains(r.message, "give --source-url URL"));
  auto req = request("90");
  req.source_url = "file:///tmp/minitorch.git";
  auto ok = resolve(req, in);
  REQUIRE(ok.status == Exit::ok);
  CHECK(ok.url() == "file:///tmp/minitorch.git");
  auto p = make_plan(ok, test::with_shipped_specs());
  REQUIRE(p.ok());
  CHECK((*p)->url == "file:///tmp/minitorch.git");
  CHECK((*p)->version == "0.1.0+cu130.sm90");
}

// ---- the Plan ---------------------------------------------------------------------------

namespace {

PlanOptions fixed_resources(unsigned cores = 16, double gib = 64) {
  PlanOptions o;
  o.resources = HostResources{cores, static_cast<std::uint64_t>(gib * 1024 * 1024 * 1024)};
  return o;
}

Plan plan_for(const Request& req, const Inputs& in, const PlanOptions& o = fixed_resources()) {
  auto r = resolve(req, in);
  INFO(r.message);
  REQUIRE(r.status == Exit::ok);
  auto p = make_plan(r, test::with_shipped_specs(o));
  REQUIRE(p.ok());
  return *p;
}

}  // namespace

TEST_CASE("the plan: environment, steps per driver era, version label, jobs") {
  auto h = host_130();
  h.compilers[0].c_path = "/usr/bin/gcc-12";
  h.toolkits.push_back(toolkit("12.8", "12.8.93", "/usr/local/cuda-12.8"));
  auto req = request("120");
  req.torch = V("2.7");
  Plan p = plan_for(req, inputs(h));
  CHECK(p->version == "2.7.1+cu128.sm120");
  CHECK(p->tag == "v2.7.1");
  CHECK(p->url == "https://github.com/pytorch/pytorch.git");
  auto env = p.environment();
  CHECK(env.at("TORCH_CUDA_ARCH_LIST") == "12.0");
  CHECK(env.at("CUDA_HOME") == "/usr/local/cuda-12.8");
  CHECK(env.at("CUDACXX") == "/usr/local/cuda-12.8/bin/nvcc");
  CHECK(env.at("CUDAHOSTCXX") == "/usr/bin/g++-12");
  CHECK(env.at("CXX") == "/usr/bin/g++-12");
  CHECK(env.at("CC") == "/usr/bin/gcc-12");
  CHECK(env.at("MAX_JOBS") == "16");
  CHECK(env.at("CMAKE_BUILD_PARALLEL_LEVEL") == "16");
  CHECK(env.at("PYTORCH_BUILD_VERSION") == "2.7.1+cu128.sm120");
  CHECK(env.at("PYTORCH_BUILD_NUMBER") == "1");
  CHECK(env.at("BUILD_TEST") == "0");
  CHECK(env.at("USE_NCCL") == "1");  // NCCL on: built from third_party/nccl, which the fetch stage places
  CHECK(env.at("PATH").find("/usr/local/cuda-12.8/bin:") == 0);
  CHECK(env.count("CMAKE_INSTALL_PREFIX") == 0);
  CHECK_FALSE(p->env.at("CUDA_HOME").keyed);
  CHECK(p->env.at("TORCH_CUDA_ARCH_LIST").keyed);

  REQUIRE(p->steps.size() == 3);
  CHECK(p->steps[0].stage == recipe::Stage::configure);
  CHECK(p->steps[0].argv() == std::vector<std::string>{"/usr/bin/python3", "setup.py", "build", "--cmake-only"});
  CHECK(p->steps[1].argv() == std::vector<std::string>{"/usr/bin/cmake", "--build", "build"});
  CHECK(p->steps[2].argv() == std::vector<std::string>{"/usr/bin/python3", "setup.py", "bdist_wheel"});
  for (const auto& s : p->steps) CHECK(s.cwd == ".");
  CHECK(p->wheel_dir == "dist");
  CHECK(p->build_dir == "build");

  // torch 2.9: the python -m build era.
  Plan p29 = plan_for(request("90"), inputs(host_130(), std::string("torch-2.9")));
  REQUIRE(p29->steps.size() == 1);
  CHECK(p29->steps[0].argv() == std::vector<std::string>{"/usr/bin/python3", "-m", "build", "--wheel", "--no-isolation",
                                                         "--outdir", "dist", "."});
  CHECK(p29->version == "2.9.1+cu130.sm90");
  // Its one step makes the wheel; configure has no step of its own, and says why.
  CHECK(p29->wheel_stage == recipe::Stage::build);
  CHECK(p29->configure_stage == recipe::Stage::build);
  CHECK(p29->stage_notes.at(recipe::Stage::configure).find("configures in the build step") != std::string::npos);
  CHECK(p29->config_settings.empty());
  CHECK(p->wheel_stage == recipe::Stage::package);
  CHECK(p->configure_stage == recipe::Stage::configure);
  CHECK(p->stage_notes.empty());

  auto j = p.to_json();
  CHECK(j["key"] == p->key);
  CHECK(j["steps"].size() == 3);
  CHECK(j["env"]["TORCH_CUDA_ARCH_LIST"] == "12.0");
  CHECK(j["env_not_in_key"].contains("MAX_JOBS"));
  CHECK(j["jobs"]["rule"].get<std::string>().find("4 GiB per nvcc job") != std::string::npos);
}

TEST_CASE("the meson-python driver: python -m build, builddir and the launchers' native file by variable, keyed") {
  auto file = std::string(ARCHBUILD_SOURCE_DIR) + "/tests/fixtures/minimeson/recipe.toml";
  auto host = host_130();
  host.tools["meson"] = "/usr/bin/meson";
  auto req = request("90");
  req.source_url = "file:///srv/git/minimeson";
  Plan p = plan_for(req, inputs(host, file));
  REQUIRE(p->steps.size() == 1);
  CHECK(p->steps[0].stage == recipe::Stage::build);
  CHECK(p->steps[0].args == std::vector<std::string>{"-m", "build", "--wheel", "--no-isolation", "--outdir", "dist", "-C",
                                                     "builddir=build", "-C",
                                                     "setup-args=--native-file=$ARCHBUILD_MESON_NATIVE_FILE", "."});
  CHECK(p->wheel_stage == recipe::Stage::build);
  CHECK(p->configure_stage == recipe::Stage::build);
  CHECK(p.to_json()["stage_notes"]["configure"] == "the backend configures in the build step (python -m build runs Meson)");
  CHECK(p->key_inputs["driver"] == "meson-python");
  CHECK(p->key_inputs["config_settings"][1] ==
        nlohmann::json{{"name", "setup-args"}, {"value", "--native-file=$ARCHBUILD_MESON_NATIVE_FILE"}});
  CHECK(p.to_json()["config_settings_notes"][0] == "builddir: passed: meson-python builds in a temporary directory otherwise");
  CHECK(p.environment().at("MINIMESON_CUDA_ARCHITECTURES") == "90-real");  // SASS only, as --sm 90 asks
  CHECK(p.environment().at("MINIMESON_BUILD_VERSION") == "0.1.0+cu130.sm90");
  // The tools meson-python runs, found by resolution.
  CHECK(p->resolution.tools.count("meson") == 1);
  CHECK(p->resolution.tools.count("ninja") == 1);
}

TEST_CASE("the scikit-build-core driver: python -m build with a persistent build-dir, every setting keyed") {
  auto file = std::string(ARCHBUILD_SOURCE_DIR) + "/tests/fixtures/minitorch-skbuild/recipe.toml";
  auto req = request("90");
  req.source_url = "file:///srv/git/minitorch-skbuild";
  // The tree not read yet (`plan` before the commit is mirrored): build-dir is passed, the build
  // type left to the backend.
  Plan p = plan_for(req, inputs(host_130(), file));
  REQUIRE(p->steps.size() == 1);
  CHECK(p->steps[0].stage == recipe::Stage::build);
  CHECK(p->steps[0].args == std::vector<std::string>{"-m", "build", "--wheel", "--no-isolation", "--outdir", "dist", "-C",
                                                     "build-dir=build", "."});
  CHECK(p->config_settings == std::vector<std::pair<std::string, std::string>>{{"build-dir", "build"}});
  CHECK(p->build_dir == "build");
  CHECK(p->wheel_stage == recipe::Stage::build);
  // In the key by name, relative (no path of this host), and shown by `plan --json` with why.
  CHECK(p->key_inputs["config_settings"][0] == nlohmann::json{{"name", "build-dir"}, {"value", "build"}});
  CHECK(p.to_json()["config_settings"] == p->key_inputs["config_settings"]);
  CHECK(p.to_json()["config_settings_notes"] ==
        nlohmann::json{"build-dir: passed: the tree's [tool.scikit-build] is not read yet",
                       "cmake.build-type: not passed: the backend's: the tree's overrides, else $CMAKE_BUILD_TYPE, "
                       "else Release"});
  CHECK(p.to_json()["stage_notes"].contains("configure"));
  CHECK(p.environment().at("CMAKE_BUILD_PARALLEL_LEVEL") == "16");  // MAX_JOBS as PyTorch 2.14 maps it
  // The recipe's python_modules: only `build` (scikit_build_core comes into the build venv).
  CHECK(p.to_json()["recipe"]["build"]["python_modules"] == nlohmann::json{"build"});
}

namespace {

contract::ScikitBuild skbuild_table(const std::string& toml) {
  auto files = std::make_shared<std::string>(toml);
  contract::FileAccess a;
  a.read = [files](const std::string& rel) -> std::optional<std::string> {
    if (rel == "pyproject.toml") return *files;
    return std::nullopt;
  };
  a.list = [](const std::string&) { return std::vector<std::string>{}; };
  auto c = contract::read_contract(a);
  INFO((c ? "" : c.error().message));
  REQUIRE(c.ok());
  REQUIRE(c->skbuild);
  return *c->skbuild;
}

}  // namespace

// The issue: the driver always passed -C cmake.build-type=Release, which wins over the tree's
// overrides, so --env DEBUG=1 was keyed and did nothing.
TEST_CASE("the scikit-build-core driver passes only what the tree's [tool.scikit-build] leaves open") {
  auto file = std::string(ARCHBUILD_SOURCE_DIR) + "/tests/fixtures/minitorch-skbuild/recipe.toml";
  auto req = request("90");
  req.source_url = "file:///srv/git/minitorch-skbuild";
  auto with_tree = [&](const std::string& toml, std::map<std::string, std::string> env = {}) {
    PlanOptions o = fixed_resources();
    o.skbuild = skbuild_table(toml);
    o.env = std::move(env);
    return plan_for(req, inputs(host_130(), file), o);
  };
  auto settings_of = [](const Plan& p) {
    std::vector<std::string> out;
    for (const auto& a : p->steps.at(0).args)
      if (a.find('=') != std::string::npos) out.push_back(a);
    return out;
  };
  // PyTorch's tables: build-dir set, the build type by overrides. Nothing is passed; --env DEBUG=1
  // reaches the backend (and the key), which the overrides turn into a Debug build.
  const std::string torch = "[tool.scikit-build]\nbuild-dir = \"build\"\n"
                            "[[tool.scikit-build.overrides]]\nif.env.DEBUG = true\ncmake.build-type = \"Debug\"\n";
  Plan release = with_tree(torch);
  Plan debug = with_tree(torch, {{"DEBUG", "1"}});
  CHECK(settings_of(debug).empty());
  CHECK(debug->config_settings.empty());
  CHECK(debug->steps[0].args == std::vector<std::string>{"-m", "build", "--wheel", "--no-isolation", "--outdir", "dist", "."});
  CHECK(debug.environment().at("DEBUG") == "1");
  CHECK(debug->key != release->key);
  CHECK(debug->config_notes == std::vector<std::string>{
                                   "build-dir: not passed: the tree's own, build (pyproject.toml:2)",
                                   "cmake.build-type: not passed: the tree's: Debug if DEBUG (pyproject.toml:3); else "
                                   "$CMAKE_BUILD_TYPE, else Release"});
  // The tree's own build-dir is the plan's build tree.
  Plan other = with_tree("[tool.scikit-build]\nbuild-dir = \"_skbuild/\"\n");
  CHECK(other->build_dir == "_skbuild");
  CHECK(other->config_settings.empty());
  CHECK(other->key_inputs["build_dir"] == "_skbuild");
  // One the plan cannot use as the key's build tree: archbuild's is passed over it, and says why.
  for (const char* dir : {"build/{wheel_tag}", "/tmp/b", "../b", "", "."}) {
    Plan p = with_tree(std::string("[tool.scikit-build]\nbuild-dir = \"") + dir + "\"\n");
    INFO(dir);
    CHECK(p->build_dir == "build");
    CHECK(p->config_settings == std::vector<std::pair<std::string, std::string>>{{"build-dir", "build"}});
    CHECK(p->config_notes.at(0).rfind("build-dir: passed over the tree's", 0) == 0);
  }
  // No build-dir in the table: passed. A static build type is the tree's too: never passed.
  Plan fixed = with_tree("[tool.scikit-build]\ncmake.build-type = \"RelWithDebInfo\"\n");
  CHECK(settings_of(fixed) == std::vector<std::string>{"build-dir=build"});
  CHECK(fixed->config_notes.at(1) == "cmake.build-type: not passed: the tree's: RelWithDebInfo (pyproject.toml:2)");
}

TEST_CASE("python modules: recipe data, else the driver's default, a lacking one is the build venv's to install, "
          "or exit 3 naming it without pip and venv") {
  auto h = host_130();
  h.pythons[0].modules = std::vector<std::string>{"setuptools", "wheel", "build", "pip", "venv"};
  auto skbuild_example = std::string(ARCHBUILD_SOURCE_DIR) + "/tests/fixtures/minitorch-skbuild/recipe.toml";
  auto req = request("90");
  req.source_url = "file:///srv/git/x";
  // The example states python_modules = ["build"]: no scikit_build_core needed.
  auto ok = resolve(req, inputs(h, skbuild_example));
  INFO(ok.message);
  CHECK(ok.status == Exit::ok);
  CHECK(has_rule(ok, "python-modules", true, "build"));
  // Without it, the driver's default asks for scikit_build_core.
  test::TempDir tmp;
  std::string text = test::read_file(skbuild_example);
  auto at = text.find("python_modules = [\"build\"]\n");
  REQUIRE(at != std::string::npos);
  text.erase(at, std::string("python_modules = [\"build\"]\n").size());
  auto file = tmp.write("skbuild.toml", text);
  // An interpreter that can make a venv with pip: the build venv installs it (stages/venv).
  auto by_venv = resolve(req, inputs(h, file.string()));
  INFO(by_venv.message);
  CHECK(by_venv.status == Exit::ok);
  CHECK(has_rule(by_venv, "python-modules", true, "the build venv installs them"));
  // One without pip: nothing can install it.
  h.pythons[0].modules = std::vector<std::string>{"setuptools", "wheel", "build", "venv"};
  auto refused = resolve(req, inputs(h, file.string()));
  CHECK(refused.status == Exit::missing_tool);
  CHECK(refused.message.find("scikit_build_core") != std::string::npos);
  CHECK(refused.message.find("the scikit-build-core driver") != std::string::npos);
}

TEST_CASE("the cmake driver: configure and build, arch list in CMake syntax, no wheel") {
  test::TempDir tmp;
  auto file = tmp.write("kernels.toml", R"(package = "kernels"
module = "kernels"
version = "1.0.0"
cuda = ["13.0"]
python = ["3.11"]
[source]
url = "file:///srv/git/kernels.git"
tag = "v1.0.0"
[build]
driver = "cmake"
[arch]
env = "CUDAARCHS"
format = "cmake"
grammar = "cmake"
accepts = ["two-digit-major", "a"]
)");
  auto req = request("90a 120");
  req.ptx = true;
  Plan p = plan_for(req, inputs(host_130(), file.string()));
  CHECK(p.environment().at("CUDAARCHS") == "90a-real;120");
  REQUIRE(p->steps.size() == 2);
  CHECK(p->steps[0].args ==
        std::vector<std::string>{"-S", ".", "-B", "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"});
  CHECK(p->steps[1].args == std::vector<std::string>{"--build", "build"});
  CHECK(p->wheel_dir.empty());
  CHECK(p->version == "1.0.0+cu130.sm90a.sm120.ptx120");
}

TEST_CASE("jobs: cores and memory at ~4 GiB per nvcc job, at least 1, --jobs wins") {
  CHECK(jobs_rule({16, 20ull << 30}, std::nullopt).jobs == 5);
  CHECK(jobs_rule({2, 64ull << 30}, std::nullopt).jobs == 2);
  CHECK(jobs_rule({8, 2ull << 30}, std::nullopt).jobs == 1);
  auto j = jobs_rule({8, 2ull << 30}, 7u);
  CHECK(j.jobs == 7);
  CHECK(j.rule() == "7 (--jobs)");
  CHECK(jobs_rule({16, 20ull << 30}, std::nullopt).rule() ==
        "5 = min(16 cores, 20.0 GiB available / 4 GiB per nvcc job = 5), at least 1");
}

TEST_CASE("build key: equal inputs give equal keys, on any machine") {
  auto h = host_130();
  Plan a = plan_for(request("90"), inputs(h), fixed_resources(16, 64));
  Plan b = plan_for(request("90"), inputs(h), fixed_resources(16, 64));
  CHECK(a->key == b->key);
  CHECK(std::regex_match(a->key, std::regex("[0-9a-f]{64}")));

  // Another machine: other paths, another core count and memory — the same build.
  auto other = h;
  other.toolkits = {toolkit("13.0", "13.0.88", "/opt/cuda13")};
  other.compilers = {gxx("12.2.0", "/opt/gcc/bin/g++")};
  other.pythons = {python("3.11.9", "/home/me/.venv/bin/python")};
  other.tools = {{"cmake", "/opt/cmake/bin/cmake"}, {"ninja", "/opt/bin/ninja"}};
  Plan c = plan_for(request("90"), inputs(other), fixed_resources(2, 8));
  CHECK(c->key == a->key);
  CHECK(c->env.at("MAX_JOBS").value != a->env.at("MAX_JOBS").value);
  PlanOptions jobs = fixed_resources();
  jobs.jobs = 3;
  CHECK(plan_for(request("90"), inputs(h), jobs)->key == a->key);

  // Nothing that locates things is in what the key hashes.
  std::string doc = a->key_inputs.dump();
  for (const char* absent : {"/usr/local/cuda", "/usr/bin", "MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL", "PATH", ".cache"})
    CHECK(doc.find(absent) == std::string::npos);
  CHECK(build_key(a->key_inputs) == a->key);
}

TEST_CASE("build key: any change of an input gives a new key") {
  auto h = host_130();
  h.toolkits.push_back(toolkit("12.8", "12.8.93", "/usr/local/cuda-12.8"));
  const std::string base = plan_for(request("90"), inputs(h))->key;
  std::set<std::string> keys{base};
  auto differs = [&](const Plan& p, const char* what) {
    INFO(what);
    CHECK(p->key != base);
    CHECK(keys.insert(p->key).second);  // and differs from every other variation too
  };

  differs(plan_for(request("80"), inputs(h)), "arch");
  differs(plan_for(request("90a"), inputs(h)), "variant");
  auto ptx = request("90");
  ptx.ptx = true;
  differs(plan_for(ptx, inputs(h)), "ptx");
  auto cuda = request("90");
  cuda.cuda = V("12.8");
  differs(plan_for(cuda, inputs(h)), "cuda release");
  auto nvcc = h;
  nvcc.toolkits[0].nvcc_version = V("13.0.48");
  differs(plan_for(request("90"), inputs(nvcc)), "nvcc build");
  auto gcc = h;
  gcc.compilers[0].version = V("12.3.0");
  differs(plan_for(request("90"), inputs(gcc)), "compiler version");
  auto clang = h;
  clang.compilers[0].kind = toolchain::CompilerKind::clang;
  differs(plan_for(request("90"), inputs(clang)), "compiler kind");
  auto py = h;
  py.pythons = {python("3.12.1")};
  differs(plan_for(request("90"), inputs(py)), "python");
  auto url = request("90");
  url.source_url = "https://git.example.com/pytorch.git";
  differs(plan_for(url, inputs(h)), "url");
  differs(plan_for(request("90"), inputs(h, std::string("torch-2.8"))), "recipe");

  // The recipe's own values: tag, commit, env, driver, build number.
  test::TempDir tmp;
  auto variant = [&](const std::string& name, const std::string& body) {
    auto f = tmp.write(name + ".toml", "extends = \"" + newest + "\"\n" + body);  // the recipe `base` chose
    return plan_for(request("90"), inputs(h, f.string()));
  };
  CHECK(variant("same", "")->key == base);  // a copy of the recipe elsewhere: same build
  differs(variant("tag", "[source]\ntag = \"v2.15.1\"\n"), "tag");
  differs(variant("commit", "[source]\ncommit = \"" + std::string(40, 'a') + "\"\n"), "commit");
  differs(variant("env", "[build.env]\nUSE_FLASH_ATTENTION = \"0\"\n"), "env");
  differs(variant("driver", "[build]\ndriver = \"setup-py\"\n"), "driver");
  differs(variant("number", "[build]\nbuild_number = 2\n"), "build number");
  differs(variant("submodules", "[source]\nsubmodules = false\n"), "submodules");
}

TEST_CASE("build key: a fixed input has a fixed key (the serialization is stable)") {
  // Changing what the key hashes changes every user's keys: do it on purpose, and update this.
  test::TempDir tmp;
  auto f = tmp.write("fixed.toml", R"(package = "fixed"
module = "fixed"
version = "1.0.0"
cuda = ["12.8"]
python = ["3.11"]
[source]
url = "https://example.com/fixed.git"
tag = "v1.0.0"
[build]
driver = "setup-py"
tools = ["cmake"]
version_env = "PYTORCH_BUILD_VERSION"
build_number_env = "PYTORCH_BUILD_NUMBER"
[build.env]
BUILD_TEST = "0"
[arch]
accepts = ["two-digit-major", "a"]
)");
  toolchain::Host h;
  h.toolkits = {toolkit("12.8", "12.8.93", "/x/cuda")};
  h.compilers = {gxx("13.2.0", "/x/g++")};
  h.pythons = {python("3.11.4", "/x/python3")};
  h.tools = {{"cmake", "/x/cmake"}};
  // An x86_64 machine's build, wherever the test runs: off x86_64 the platform is keyed too
  // (an aarch64 host's key differs, as its binary does).
  auto in = inputs(h, f.string());
  in.machine = toolchain::Machine{};
  in.machine->arch = "x86_64";
  Plan p = plan_for(request("90 120"), in);
  CHECK(p->key_inputs.dump() ==
        R"({"arch_list":{"env":"TORCH_CUDA_ARCH_LIST","value":"9.0;12.0"},"build_dir":"build",)"
        R"("cuda":{"nvcc":"12.8.93","release":"12.8"},"driver":"setup-py","env":{"BUILD_TEST":"0",)"
        R"("PYTORCH_BUILD_NUMBER":"1","PYTORCH_BUILD_VERSION":"1.0.0+cu128.sm90.sm120",)"
        R"("TORCH_CUDA_ARCH_LIST":"9.0;12.0"},"format":1,"host_compiler":{"kind":"gcc","version":"13.2.0"},)"
        R"("module":"fixed","package":"fixed","python":"3.11","source":{"commit":null,"submodules":true,)"
        R"("tag":"v1.0.0","url":"https://example.com/fixed.git"},"steps":[{"args":["setup.py","build",)"
        R"("--cmake-only"],"cwd":".","stage":"configure","tool":"python"},{"args":["--build","build"],)"
        R"("cwd":".","stage":"build","tool":"cmake"},{"args":["setup.py","bdist_wheel"],"cwd":".",)"
        R"("stage":"package","tool":"python"}],"version":"1.0.0+cu128.sm90.sm120","wheel_dir":"dist"})");
  // sha256("archbuild build key v1\n" + the document above), as any sha256 tool computes it.
  CHECK(p->key == "17fa3a563f2a40ee0876bf7e7743badfa0840d1619c1b8a3b0588fb97612f33a");
}

TEST_CASE("on aarch64 torch 2.9 and 2.10 refuse GCC 14 before 14.4 (an internal compiler error upstream)") {
  auto h = host_130();
  h.compilers = {gxx("14.2.0", "/usr/bin/g++-14"), gxx("13.3.0", "/usr/bin/g++-13")};
  auto in = inputs(h);
  in.machine = toolchain::Machine{};
  in.machine->arch = "aarch64";
  auto req = request("90");
  req.torch = V("2.10");
  auto r = resolve(req, in);
  INFO(r.message);
  REQUIRE(r.compiler);
  CHECK(r.compiler->version == V("13.3.0"));
  CHECK(has_rule(r, "host-compiler", false, "GCC 14.2.0 cannot build torch-2.10 on aarch64 (an internal compiler error"));
  CHECK(has_rule(r, "host-compiler", false, "pytorch#172630; fixed in 14.4)"));
  // The same host compiles x86_64 builds with GCC 14.2, and aarch64 builds of 2.11 (its workaround).
  in.machine->arch = "x86_64";
  auto x = resolve(req, in);
  REQUIRE(x.compiler);
  CHECK(x.compiler->version == V("14.2.0"));
  in.machine->arch = "aarch64";
  req.torch = V("2.11");
  auto y = resolve(req, in);
  REQUIRE(y.compiler);
  CHECK(y.compiler->version == V("14.2.0"));
  // GCC 14.2 alone: no host compiler, and the reason is in what is missing.
  h.compilers = {gxx("14.2.0", "/usr/bin/g++-14")};
  auto only = inputs(h);
  only.machine = in.machine;
  req.torch = V("2.9");
  auto z = resolve(req, only);
  CHECK_FALSE(z.compiler);
  CHECK(contains(z.message, "GCC 14.2.0 cannot build torch-2.9 on aarch64"));
}

TEST_CASE("resolve names the CMake seed for a tree that reads its environment as one CMake list") {
  auto req = request("90");
  req.torch = V("2.13");
  auto r = resolve(req, inputs(host_130()));
  INFO(r.message);
  auto seeded = [](const Resolution& x) {
    return std::any_of(x.notes.begin(), x.notes.end(), [](const std::string& n) { return contains(n, "CMAKE_TOOLCHAIN_FILE"); });
  };
  CHECK(seeded(r));
  req.torch = V("2.11");
  CHECK_FALSE(seeded(resolve(req, inputs(host_130()))));
}

TEST_CASE("a refused or incomplete resolution cannot be planned") {
  auto req = request("120");
  req.torch = V("2.5");
  auto r = resolve(req, inputs(host_130()));
  auto p = make_plan(r, test::with_shipped_specs());
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().exit == Exit::bad_input);
  auto h = host_130();
  h.toolkits.clear();
  auto m = make_plan(resolve(request("90"), inputs(h)), test::with_shipped_specs());
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().exit == Exit::missing_tool);
}

TEST_CASE("the local version label is PEP 440") {
  auto in = inputs(host_130());
  const auto& t27 = *std::find_if(in.recipes.begin(), in.recipes.end(), [](auto& r) { return r.name == "torch-2.7"; });
  const auto& c128 = *std::find_if(in.toolchains.begin(), in.toolchains.end(), [](auto& t) { return t.cuda == V("12.8"); });
  CHECK(local_version(t27, c128, sm("12.0")) == "2.7.1+cu128.sm120");
  auto archs = sm("9.0a 12.0");
  archs.back().ptx = true;
  std::string v = local_version(t27, c128, archs);
  CHECK(v == "2.7.1+cu128.sm90a.sm120.ptx120");
  CHECK(std::regex_match(v, std::regex(R"([0-9.]+\+[a-z0-9]+(\.[a-z0-9]+)*)")));
}

// ---- sources other than the recipe's tag ---------------------------------------

namespace {

const std::string kExampleRecipe = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";

SourceChoice local_choice(const std::string& dir, const std::string& hash) {
  SourceChoice s;
  s.kind = SourceChoice::Kind::local;
  s.dir = dir;
  s.content_hash = hash;
  s.files = 3;
  return s;
}

}  // namespace

TEST_CASE("source.path: the example names its own folder, the key holds the content and not the place") {
  auto in = inputs(host_130(), kExampleRecipe);
  auto r = resolve(request("90"), in);
  REQUIRE(r.status == Exit::ok);
  REQUIRE(r.local_dir());
  CHECK(*r.local_dir() == fs::path(ARCHBUILD_SOURCE_DIR) / "examples" / "minitorch");
  CHECK(r.url().empty());
  // Planning a local tree needs its scan (the command does it; plan/ reads no files).
  CHECK_FALSE(make_plan(r, test::with_shipped_specs(fixed_resources())).ok());

  std::string h1(64, 'a'), h2(64, 'b');
  auto o = fixed_resources();
  o.source = local_choice("/home/a/minitorch", h1);
  auto p1 = make_plan(r, test::with_shipped_specs(o));
  REQUIRE(p1.ok());
  CHECK((*p1)->version == "0.1.0+srcaaaaaaa.cu130.sm90");
  CHECK((*p1)->key_inputs["source"] == nlohmann::json{{"local_content", h1}});
  CHECK(p1->to_json()["source"]["local"]["dir"] == "/home/a/minitorch");
  o.source = local_choice("/elsewhere/copy", h1);  // the same tree elsewhere: the same build
  CHECK(make_plan(r, test::with_shipped_specs(o))->operator->()->key == (*p1)->key);
  o.source = local_choice("/home/a/minitorch", h2);  // an edit: a new key
  CHECK(make_plan(r, test::with_shipped_specs(o))->operator->()->key != (*p1)->key);
  o.source.tree_version = "0.2.0\n";
  CHECK(make_plan(r, test::with_shipped_specs(o))->operator->()->version == "0.2.0+srcbbbbbbb.cu130.sm90");

  // --source-url takes the place of source.path; --source DIR the place of both.
  auto req = request("90");
  req.source_url = "file:///tmp/minitorch.git";
  auto by_url = resolve(req, in);
  REQUIRE(by_url.status == Exit::ok);
  CHECK_FALSE(by_url.local_dir());
  CHECK(by_url.url() == "file:///tmp/minitorch.git");
  req.source_url.reset();
  req.source_dir = "/work/mine";
  auto by_dir = resolve(req, in);
  REQUIRE(by_dir.status == Exit::ok);
  CHECK(*by_dir.local_dir() == "/work/mine");
  CHECK(has_rule(by_dir, "source-url", true, "--source /work/mine"));
}

TEST_CASE("ref option: the key holds the commit, the manifest the ref, the version says what it is") {
  auto in = inputs(host_130(), kExampleRecipe);
  auto req = request("90");
  req.source_url = "file:///tmp/minitorch.git";
  auto r = resolve(req, in);
  REQUIRE(r.status == Exit::ok);
  auto o = fixed_resources();
  o.source.kind = SourceChoice::Kind::ref;
  o.source.ref = "main";
  o.source.commit = "1a2b3c4d5e6f1a2b3c4d5e6f1a2b3c4d5e6f1a2b";
  o.source.tree_version = "0.2.0a0\n";
  auto p = make_plan(r, test::with_shipped_specs(o));
  REQUIRE(p.ok());
  CHECK((*p)->version == "0.2.0a0+git1a2b3c4.cu130.sm90");
  CHECK((*p)->tag == o.source.commit);  // the fetch checks out exactly what was planned
  CHECK((*p)->ref == "main");
  CHECK((*p)->key_inputs["source"]["commit"] == o.source.commit);
  CHECK((*p)->key_inputs["source"].dump().find("main") == std::string::npos);
  auto base = make_plan(r, test::with_shipped_specs(fixed_resources()));
  CHECK((*base)->key != (*p)->key);
  CHECK(std::regex_match((*p)->version, std::regex(R"([0-9.]+a0\+git[0-9a-f]{7}(\.[a-z0-9]+)+)")));

  // No version.txt: the recipe's release, still marked as a git build.
  o.source.tree_version.reset();
  CHECK(make_plan(r, test::with_shipped_specs(o))->operator->()->version == "0.1.0+git1a2b3c4.cu130.sm90");
  // Another tag: its own release; the recipe's own tag: the recipe's version.
  o.source.ref = "v0.1.1";
  o.source.ref_is_tag = true;
  CHECK(make_plan(r, test::with_shipped_specs(o))->operator->()->version == "0.1.1+cu130.sm90");
  o.source.ref = "v0.1.0";
  CHECK(make_plan(r, test::with_shipped_specs(o))->operator->()->version == "0.1.0+cu130.sm90");
  // A tag that is no version: a git build.
  o.source.ref = "nightly";
  CHECK(make_plan(r, test::with_shipped_specs(o))->operator->()->version == "0.1.0+git1a2b3c4.cu130.sm90");
}

TEST_CASE("env option: overrides the recipe's build env and is in the key, never what the plan derives") {
  auto in = inputs(host_130(), kExampleRecipe);
  auto req = request("90");
  req.source_url = "file:///tmp/minitorch.git";
  auto r = resolve(req, in);
  REQUIRE(r.status == Exit::ok);
  auto base = make_plan(r, test::with_shipped_specs(fixed_resources()));
  REQUIRE(base.ok());
  auto o = fixed_resources();
  o.env = {{"USE_CUDA", "1"}, {"CUDNN_LIB_DIR", "/opt/cudnn/lib"}};
  auto p = make_plan(r, test::with_shipped_specs(o));
  REQUIRE(p.ok());
  CHECK((*p)->env.at("CUDNN_LIB_DIR").value == "/opt/cudnn/lib");
  CHECK((*p)->env.at("CUDNN_LIB_DIR").keyed);
  CHECK((*p)->key_inputs["env"]["CUDNN_LIB_DIR"] == "/opt/cudnn/lib");
  CHECK((*p)->key != (*base)->key);
  o.env = {{"USE_CUDA", "0"}};  // the recipe's [build.env]: may be overridden
  REQUIRE(make_plan(r, test::with_shipped_specs(o)).ok());
  for (const char* derived : {"TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "PATH", "MAX_JOBS"}) {
    o.env = {{derived, "x"}};
    auto refused = make_plan(r, test::with_shipped_specs(o));
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().exit == Exit::bad_input);
    CHECK(contains(refused.error().message, "archbuild sets"));
  }
  o.env = {{"1BAD", "x"}};
  CHECK_FALSE(make_plan(r, test::with_shipped_specs(o)).ok());
  CHECK(env_allowed(build_env_allowlist(), "NCCL_ROOT"));
  CHECK(env_allowed(build_env_allowlist(), "http_proxy"));
  CHECK_FALSE(env_allowed(build_env_allowlist(), "AWS_SECRET_ACCESS_KEY"));
  CHECK(env_allowed(build_env_allowlist(), "QEMU_LD_PREFIX"));  // an emulated aarch64 build's loader
}

TEST_CASE("jobs: flash-attn's 5 GiB per nvcc job and 4 NVCC_THREADS decide MAX_JOBS") {
  auto fa = recipe::load("flash-attn-2.8", recipe::Search::shipped());
  REQUIRE(fa.ok());
  CHECK(recipe::nvcc_job_mb(fa->memory, 4) == 5120);  // [build.memory]: 2048 + 3 x 1024
  CHECK(fa->nvcc_threads == 4u);
  // 64 cores, 20 GiB: 4 jobs at 5 GiB where the default 4 GiB gives 5.
  CHECK(jobs_rule({64, 20ull << 30}, std::nullopt, *fa).jobs == 4);
  CHECK(jobs_rule({64, 20ull << 30}, std::nullopt).jobs == 5);
  // 8 cores, 256 GiB: 8 / 4 threads per job = 2 jobs.
  auto j = jobs_rule({8, 256ull << 30}, std::nullopt, *fa);
  CHECK(j.jobs == 2);
  CHECK(j.threads_per_job == 4);
  CHECK(j.rule() == "2 = min(8 cores / 4 nvcc threads = 2, 256.0 GiB available / 5 GiB per nvcc job ([build.memory] "
                    "cuda_mb 2048 + 3 x cuda_thread_mb 1024) = 51), at least 1");
  // 2 cores: threads clamp to the cores, one job, of 2 threads' memory.
  auto small = jobs_rule({2, 64ull << 30}, std::nullopt, *fa);
  CHECK(small.jobs == 1);
  CHECK(small.threads_per_job == 2);
  CHECK(small.gib_per_job == 3);
  // A torch recipe keeps the default figure.
  auto t = recipe::load("torch-2.14", recipe::Search::shipped());
  REQUIRE(t.ok());
  CHECK(jobs_rule({64, 20ull << 30}, std::nullopt, *t).gib_per_job == 4);
}

TEST_CASE("jobs: the plan of a flash-attn build uses its figure and sets NVCC_THREADS") {
  auto req = request("90");
  req.recipe_label = "flash-attn-2.8";
  auto r = resolve(req, inputs(host_130(), std::string("flash-attn-2.8")));
  INFO(r.message);
  REQUIRE(r.status == Exit::ok);
  CHECK(r.arch_list == "90");
  PlanOptions o;
  o.resources = HostResources{16, 12ull << 30};
  auto p = make_plan(r, test::with_shipped_specs(o));
  REQUIRE(p.ok());
  CHECK((*p)->jobs.jobs == 2);  // 12 GiB / 5 GiB, not / 4 GiB
  CHECK(p->environment().at("MAX_JOBS") == "2");
  CHECK(p->environment().at("NVCC_THREADS") == "4");
  CHECK(p->environment().at("FLASH_ATTN_CUDA_ARCHS") == "90");
}

TEST_CASE("recipe: flash-attn's FLASH_ATTN_CUDA_ARCHS maps targets onto the values it knows") {
  auto fa = recipe::load("flash-attn-2.8", recipe::Search::shipped());
  REQUIRE(fa.ok());
  CHECK(fa->arch.env == "FLASH_ATTN_CUDA_ARCHS");
  CHECK(fa->arch.format == recipe::ArchFormat::sm);
  CHECK(fa->arch.values == std::vector<int>{80, 90, 100, 120});
  auto p = recipe::print_arch_list(fa->arch, sm("8.0 8.6 9.0a 12.0"));
  CHECK(p.text == "80;90;120");  // 8.6 runs sm_80 SASS; 9.0a becomes plain sm_90
  CHECK(p.unmapped.empty());
  auto none = recipe::print_arch_list(fa->arch, sm("7.5"));
  REQUIRE(none.unmapped.size() == 1);
  // resolve refuses what flash-attn cannot build for
  auto req = request("75");
  auto r = resolve(req, inputs(host_130(), std::string("flash-attn-2.8")));
  CHECK(r.status == Exit::bad_input);
  CHECK(contains(r.message, "FLASH_ATTN_CUDA_ARCHS of flash-attn-2.8 builds nothing that runs on 7.5"));
}

TEST_CASE("recipe pairing: torchvision 0.29 is refused with torch 2.13, naming the pair") {
  auto req = request("90");
  req.torch = V("2.13");
  req.recipe_label = "torchvision-0.29";
  auto r = resolve(req, inputs(host_130(), std::string("torchvision-0.29")));
  CHECK(r.status == Exit::bad_input);
  INFO(r.message);
  CHECK(contains(r.message, "rule torch-pairing: torchvision-0.29 (torchvision 0.29.0) pairs with torch 2.14.0"));
  CHECK(contains(r.message, "not torch 2.13"));
  CHECK(has_rule(r, "torch-pairing", false));
  // The matching pair resolves.
  req.torch = V("2.14");
  CHECK(resolve(req, inputs(host_130(), std::string("torchvision-0.29"))).status == Exit::ok);
  // Every torchvision recipe names its torch, and each torch line has at most one torchvision.
  auto all = test::select_shipped(std::string("torchvision"));
  REQUIRE(all.ok());
  std::set<Version> lines;
  for (const auto& tv : *all) {
    INFO(tv.name);
    REQUIRE(tv.torch);
    CHECK(lines.insert(tv.torch->prefix(2)).second);
  }
}

TEST_CASE("fetches: planned per CUDA release, switched off by the environment, their commits in the key") {
  auto h = host_130();
  auto base_opts = fixed_resources();
  Plan unresolved = plan_for(request("90"), inputs(h, std::string("torch-2.13")), base_opts);
  REQUIRE(unresolved->fetches.size() == 2);  // NCCL and Eigen
  const FetchPlan& f = unresolved->fetches[0];
  CHECK(f.name == "nccl");
  CHECK(f.active());
  CHECK_FALSE(f.resolved());
  // CUDA 13.0 planned: cmake/PreBuildSteps.cmake's per-CUDA pin, else nccl.txt (pytorch#181450).
  CHECK(f.pin_files == std::vector<std::string>{".ci/docker/ci_commit_pins/nccl-cu130.txt",
                                                ".ci/docker/ci_commit_pins/nccl.txt"});
  CHECK(unresolved->fetches[1].name == "eigen");
  REQUIRE(unresolved->key_inputs.contains("fetches"));
  CHECK(unresolved->key_inputs["fetches"][0]["commit"].is_null());

  // Resolved by the caller (source/, through the mirrors): the commit is keyed.
  auto with = [&](const std::string& commit) {
    PlanOptions o = base_opts;
    o.fetches["nccl"] = ResolvedFetch{".ci/docker/ci_commit_pins/nccl.txt", "v2.27.7-1", commit};
    return plan_for(request("90"), inputs(h, std::string("torch-2.13")), o);
  };
  Plan a = with(std::string(40, 'a'));
  CHECK(a->fetches[0].resolved());
  CHECK(a->key_inputs["fetches"][0]["commit"] == std::string(40, 'a'));
  CHECK(a->key_inputs["fetches"][0]["ref"] == "v2.27.7-1");
  CHECK(a->key != unresolved->key);
  CHECK(with(std::string(40, 'b'))->key != a->key);  // the pin moved: another build
  CHECK(with(std::string(40, 'a'))->key == a->key);
  CHECK(a.to_json()["fetches"][0]["commit"] == std::string(40, 'a'));

  // --env USE_NCCL=0 (or USE_SYSTEM_NCCL=1): the build would not fetch it, nor does archbuild; a
  // resolution given anyway is dropped, and the key holds the variable, not the fetch.
  PlanOptions off = base_opts;
  off.env["USE_NCCL"] = "0";
  off.fetches["nccl"] = ResolvedFetch{"x", "v", std::string(40, 'a')};
  Plan p = plan_for(request("90"), inputs(h, std::string("torch-2.13")), off);
  CHECK(p->fetches[0].disabled_by == "USE_NCCL=0");
  CHECK_FALSE(p->fetches[0].resolved());
  for (const auto& k : p->key_inputs.value("fetches", nlohmann::json::array())) CHECK(k.value("name", "") != "nccl");  // Eigen's stays
  CHECK(fetch_plans(p->resolution, {{"USE_SYSTEM_NCCL", "1"}})[0].disabled_by == "USE_SYSTEM_NCCL=1");

  // CUDA 12.8 and torch 2.11: read_nccl_pin()'s file, nccl-cu12.txt, whatever the CUDA.
  auto h12 = host_130();
  h12.toolkits = {toolkit("12.8", "12.8.93", "/usr/local/cuda-12.8")};
  auto req = request("90");
  req.cuda = V("12.8");
  Plan p12 = plan_for(req, inputs(h12, std::string("torch-2.11")), base_opts);
  CHECK(p12->fetches[0].pin_files.front() == ".ci/docker/ci_commit_pins/nccl-cu12.txt");
}

TEST_CASE("admission: --memory-budget takes sizes, shares of available memory and off, the rest is one clear line") {
  const std::uint64_t avail = 20ull << 30;
  CHECK(*parse_memory_budget("48G", avail).take() == 48 * 1024);
  CHECK(*parse_memory_budget("4096M", avail).take() == 4096);
  CHECK(*parse_memory_budget("1.5GiB", avail).take() == 1536);
  CHECK(*parse_memory_budget("1t", avail).take() == 1024 * 1024);
  CHECK(*parse_memory_budget("50%", avail).take() == 10 * 1024);
  CHECK(!parse_memory_budget("off", avail).take());
  for (const char* bad : {"12", "abc", "-4G", "0G", "12Q", "150%", "G", "", "1e3G", "0x10G", "100K"}) {
    auto r = parse_memory_budget(bad, avail);
    INFO(bad);
    REQUIRE(!r);
    CHECK(r.error().exit == Exit::bad_input);
    CHECK(r.error().message.find(std::string("--memory-budget '") + bad + "'") == 0);
    CHECK(r.error().message.find("expected a size like 48G") != std::string::npos);
    CHECK(r.error().message.find('\n') == std::string::npos);
  }
}

TEST_CASE("one memory model: the static rule's per-job figure and admission's CUDA figure are [build.memory]'s") {
  auto req = request("90");
  req.recipe_label = "flash-attn-2.8";
  auto r = resolve(req, inputs(host_130(), std::string("flash-attn-2.8")));
  REQUIRE(r.status == Exit::ok);
  PlanOptions o;
  o.resources = HostResources{16, 12ull << 30};
  auto off = make_plan(r, test::with_shipped_specs(o));
  REQUIRE(off.ok());
  auto j = off->to_json();
  CHECK(j["jobs"]["gib_per_job"] == 5.0);
  CHECK(j["jobs"]["per_job_from"] == "[build.memory] cuda_mb 2048 + 3 x cuda_thread_mb 1024");
  CHECK(j["jobs"]["rule"].get<std::string>().find("/ 5 GiB per nvcc job ([build.memory] cuda_mb 2048 + 3 x cuda_thread_mb 1024) = 2") !=
        std::string::npos);
  o.memory_budget_mb = 0;
  auto on = make_plan(r, test::with_shipped_specs(o));
  REQUIRE(on.ok());
  auto a = on->to_json()["admission"];
  CHECK(a["expected_mb"]["cuda"] == 2048);
  CHECK(a["expected_mb"]["cuda_per_thread"] == 1024);
  // The figure admission expects of one of its nvcc jobs (4 threads) is the static rule's.
  CHECK(recipe::nvcc_job_mb((*on)->admission.figures, 4) == static_cast<std::uint64_t>((*off)->jobs.gib_per_job * 1024));
  CHECK((*on)->jobs.static_jobs == (*off)->jobs.jobs);
  // A recipe still naming the old figure is told where it went.
  test::TempDir tmp;
  auto file = tmp.path() / "old.toml";
  std::ofstream(file) << "extends = \"flash-attn-2.8\"\n[build]\ngib_per_job = 5\n";
  auto old = recipe::load_file(file, recipe::Search::shipped());
  REQUIRE_FALSE(old.ok());
  CHECK(old.error().exit == Exit::bad_input);
  CHECK(contains(old.error().message, "old.toml:3:1"));
  CHECK(contains(old.error().message, "build.gib_per_job is replaced by [build.memory]"));
}

TEST_CASE("admission: with a budget the plan runs a job per core and shows the budget and the rule") {
  auto h = host_130();
  PlanOptions o = fixed_resources(16, 20);
  Plan off = plan_for(request("90"), inputs(h), o);
  CHECK(off->jobs.jobs == 5);
  CHECK(!off->admission.on);
  o.memory_budget_mb = 0;  // the default: 90% of available
  Plan on = plan_for(request("90"), inputs(h), o);
  CHECK(on->jobs.jobs == 16);
  CHECK(on->jobs.static_jobs == 5);
  CHECK(on->env.at("MAX_JOBS").value == "16");
  CHECK(on->admission.budget_mb == 18432);
  CHECK(on->key == off->key);  // parallelism never changes the output
  auto j = on.to_json();
  CHECK(j["admission"]["on"] == true);
  CHECK(j["admission"]["budget_mb"] == 18432);
  CHECK(j["admission"]["rule"].get<std::string>().find("budget 18.0 GiB (90% of 20.0 GiB available)") == 0);
  CHECK(j["jobs"]["rule"] == "16 = 16 cores; each compile admitted by memory (see admission)");
  o.memory_budget_mb = 4096;
  o.memory_budget_text = "4G";
  o.jobs = 3;
  Plan given = plan_for(request("90"), inputs(h), o);
  CHECK(given->jobs.jobs == 3);  // --jobs still wins
  CHECK(given->admission.budget_from == "--memory-budget 4G");
}

TEST_CASE("pairing: torchvision for torch 2.14 is 0.29, for 2.15 0.30, no torchaudio for 2.15 (the refusal names the pairs)") {
  auto tv = test::select_shipped(std::string("torchvision"));
  REQUIRE(tv.ok());
  auto t14 = recipe::load("torch-2.14", recipe::Search::shipped());
  auto t15 = recipe::load("torch-2.15", recipe::Search::shipped());
  REQUIRE(t14.ok());
  REQUIRE(t15.ok());
  auto paired = pair_with_torch(*tv, *t14, "--with torchvision");
  REQUIRE(paired.ok());
  CHECK(paired->name == "torchvision-0.29");
  auto p15 = pair_with_torch(*tv, *t15, "--with torchvision");
  REQUIRE(p15.ok());
  CHECK(p15->name == "torchvision-0.30");  // pytorch/vision#9607
  // torchaudio 2.11, the last release, serves torch 2.11 - 2.14 (torch_also), not 2.15.
  auto ta = test::select_shipped(std::string("torchaudio"));
  REQUIRE(ta.ok());
  for (const char* t : {"torch-2.11", "torch-2.12", "torch-2.13", "torch-2.14"}) {
    INFO(t);
    auto tr = recipe::load(t, recipe::Search::shipped());
    REQUIRE(tr.ok());
    auto a = pair_with_torch(*ta, *tr, "--with torchaudio");
    REQUIRE(a.ok());
    CHECK(a->name == "torchaudio-2.11");
  }
  CHECK(pair_with_torch(*ta, *recipe::load("torch-2.10", recipe::Search::shipped()), "--with torchaudio")->name == "torchaudio-2.10");
  auto none = pair_with_torch(*ta, *t15, "--with torchaudio");
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().exit == Exit::bad_input);
  CHECK_THAT(none.error().message, Catch::Contains("--with torchaudio: no recipe pairs with torch 2.15.0"));
  // torch itself is no dependent.
  auto self = pair_with_torch({*t14}, *t14, "--with torch-2.14");
  REQUIRE_FALSE(self.ok());
  CHECK_THAT(self.error().message, Catch::Contains("builds no dependent of torch"));
}

TEST_CASE("plan: a wheel installed into the build venv is in the key by its sha256") {
  auto in = inputs(host_130(), kExampleRecipe);
  auto r = resolve(request("90"), in);
  REQUIRE(r.status == Exit::ok);
  auto o = fixed_resources();
  o.source = local_choice("/home/a/minitorch", std::string(64, 'a'));
  BuildVenv v;
  v.dir = "/cache/venvs/x";
  v.python = "/cache/venvs/x/bin/python";
  v.interpreter_version = "3.11.2";
  o.venv = v;
  auto without = make_plan(r, test::with_shipped_specs(o));
  REQUIRE(without.ok());
  CHECK_FALSE((*without)->key_inputs["build_venv"].contains("wheels"));  // keys without one stay as they were
  v.wheels = {{"torch", "2.14.0+cu130.sm90", std::string(64, '1'), "/out/a/torch.whl"}};
  o.venv = v;
  auto one = make_plan(r, test::with_shipped_specs(o));
  v.wheels[0].file = "/elsewhere/torch.whl";  // the same wheel elsewhere: the same key
  o.venv = v;
  auto moved = make_plan(r, test::with_shipped_specs(o));
  v.wheels[0].sha256 = std::string(64, '2');  // another torch wheel: another key
  o.venv = v;
  auto other = make_plan(r, test::with_shipped_specs(o));
  REQUIRE(one.ok());
  REQUIRE(moved.ok());
  REQUIRE(other.ok());
  CHECK((*one)->key != (*without)->key);
  CHECK((*moved)->key == (*one)->key);
  CHECK((*other)->key != (*one)->key);
  CHECK((*one)->key_inputs["build_venv"]["wheels"][0] ==
        nlohmann::json{{"name", "torch"}, {"version", "2.14.0+cu130.sm90"}, {"sha256", std::string(64, '1')}});
}

// A torch recipe's when.torch is held against the release the tree holds: the recipe's for its
// tag, the tree's version.txt for --ref or a local tree; a dependent's is the torch it serves.
TEST_CASE("patches: when.torch is the tree's release for --ref, the recipe's for its tag", "[plan][patch]") {
  Resolution res;
  res.recipe.package = "torch";
  res.recipe.version = *Version::parse("2.6.0");
  recipe::Patch p;
  p.file = "/recipes/fix.patch";
  p.when.torch = recipe::VersionRange::parse(">=2.5, <2.7");
  res.recipe.patches = {p};
  SourceChoice tag;
  REQUIRE(select_patches(res, tag, {}).size() == 1);
  CHECK(select_patches(res, tag, {})[0].why == "torch 2.6.0 in >=2.5, <2.7");
  // --ref naming a 2.7 commit: the tree is 2.7, the patch is not for it.
  SourceChoice ref;
  ref.kind = SourceChoice::Kind::ref;
  ref.tree_version = "2.7.0a0\n";
  CHECK(select_patches(res, ref, {}).empty());
  // --ref naming an older 2.5 commit under the 2.6 recipe: held, and said where from.
  ref.tree_version = "2.5.1\n";
  auto held = select_patches(res, ref, {});
  REQUIRE(held.size() == 1);
  CHECK(held[0].why == "torch 2.5.1 (the tree's version.txt) in >=2.5, <2.7");
  // A tree without version.txt: the recipe's release.
  ref.tree_version.reset();
  CHECK(select_patches(res, ref, {}).size() == 1);
  // A dependent (torch = "2.6"): its own version.txt says nothing about torch.
  res.recipe.package = "torchvision";
  res.recipe.version = *Version::parse("0.21.0");
  res.recipe.torch = *Version::parse("2.6.0");
  ref.tree_version = "0.21.0a0\n";
  CHECK(select_patches(res, ref, {}).size() == 1);
}

TEST_CASE("build start: a local tree's slot is the plan but for its content, the rule says clean or incremental and why") {
  auto in = inputs(host_130(), kExampleRecipe);
  auto r = resolve(request("90"), in);
  REQUIRE(r.status == Exit::ok);
  std::string h1(64, 'a'), h2(64, 'b');
  auto o = fixed_resources();
  o.source = local_choice("/home/a/minitorch", h1);
  o.source.shape_hash = "shape1";
  o.source.config_files = {{"CMakeLists.txt", "c1"}, {"setup.py", "s1"}};
  Plan p1 = *make_plan(r, test::with_shipped_specs(o));
  o.source.content_hash = h2;  // an edit of a kernel: another key, the same slot
  Plan p2 = *make_plan(r, test::with_shipped_specs(o));
  CHECK(p1->key != p2->key);
  CHECK(p1->build_start.slot.size() == 24);
  CHECK(p1->build_start.slot == p2->build_start.slot);
  CHECK(p1->build_start.mode == BuildStart::Mode::clean);
  // Another folder, or another configuration (--env): another slot.
  auto other = o;
  other.source.dir = "/home/b/minitorch";
  CHECK(make_plan(r, test::with_shipped_specs(other))->operator->()->build_start.slot != p1->build_start.slot);
  other = o;
  other.env = {{"USE_FOO", "1"}};
  CHECK(make_plan(r, test::with_shipped_specs(other))->operator->()->build_start.slot != p1->build_start.slot);

  EarlierBuild earlier{p1->key, true, "shape1", {{"CMakeLists.txt", "c1"}, {"setup.py", "s1"}}};
  auto start = decide_build_start(*p2, false, earlier);
  CHECK(start.mode == BuildStart::Mode::incremental);
  CHECK(start.from_key == p1->key);
  CHECK(start.slot == p1->build_start.slot);
  // Not in the key: the plan with its start keeps its key.
  Plan decided = with_build_start(p2, start);
  CHECK(decided->key == p2->key);
  CHECK(decided.to_json()["build_start"]["mode"] == "incremental");
  CHECK(decided.to_json()["build_start"]["from_key"] == p1->key);

  auto why = [&](bool clean, const std::optional<EarlierBuild>& e) {
    auto s = decide_build_start(*p2, clean, e);
    CHECK(s.mode == BuildStart::Mode::clean);
    CHECK(s.from_key.empty());
    return s.why;
  };
  CHECK(why(true, earlier) == "--clean");
  CHECK(contains(why(false, std::nullopt), "no earlier build"));
  auto unconfigured = earlier;
  unconfigured.configured = false;
  CHECK(contains(why(false, unconfigured), "did not finish configuring"));
  auto reshaped = earlier;  // a file added, removed or renamed
  reshaped.shape_hash = "shape0";
  CHECK(contains(why(false, reshaped), "added, removed or renamed"));
  auto reconfigured = earlier;
  reconfigured.config_files["CMakeLists.txt"] = "c0";
  CHECK(contains(why(false, reconfigured), "configuration file changed"));
  CHECK(contains(why(false, reconfigured), "(CMakeLists.txt)"));

  CHECK(is_configuration_file("CMakeLists.txt"));
  CHECK(is_configuration_file("third_party/x/CMakeLists.txt"));
  CHECK(is_configuration_file("cmake/Dependencies.cmake"));
  CHECK(is_configuration_file("csrc/config.h.in"));
  CHECK(is_configuration_file("pyproject.toml"));
  CHECK_FALSE(is_configuration_file("csrc/kernels.cu"));
  CHECK_FALSE(is_configuration_file("csrc/minitorch.h"));
  CHECK_FALSE(is_configuration_file("minitorch/__init__.py"));
}

TEST_CASE("build start: a repository's checkout has no slot and is built clean") {
  auto h = host_130();
  auto req = request("90");
  Plan p = plan_for(req, inputs(h));
  CHECK(p->build_start.slot.empty());
  CHECK(p->build_start.mode == BuildStart::Mode::clean);
  CHECK(contains(p->build_start.why, "local tree"));
}
