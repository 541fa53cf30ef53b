// extenv/: what `archbuild env` prints, as a pure function over synthetic hosts (toolkit,
// compilers, the torch probe's answer) and the shipped recipes and toolchains; the printers.
#include <catch2/catch.hpp>

#include <algorithm>

#include "arch/parse.hpp"
#include "extenv/extenv.hpp"
#include "support/torch_lines.hpp"

using namespace archbuild;
using namespace archbuild::extenv;

namespace {

Version V(const char* s) { return *Version::parse(s); }

std::vector<arch::Arch> sm(const std::string& text) {
  auto a = arch::parse_arch_list(text, arch::ArchData::shipped(), {arch::Grammar::build, {}});
  REQUIRE(a.ok());
  return *a;
}

toolchain::Compiler gxx(const char* version, const std::string& path, const std::string& found_by = "PATH") {
  toolchain::Compiler c;
  c.kind = toolchain::CompilerKind::gcc;
  c.version = V(version);
  c.path = path;
  c.found_by = found_by;
  return c;
}

// CUDA 13.0 at /usr/local/cuda, g++ 12, 16 cores and 64 GiB, no torch.
Inputs host() {
  Inputs in;
  toolchain::Toolkit tk;
  tk.root = "/usr/local/cuda";
  tk.nvcc = "/usr/local/cuda/bin/nvcc";
  tk.version = V("13.0.2");
  tk.found_by = "CUDA_HOME";
  in.toolkit = tk;
  auto tcs = toolchain::load_shipped();
  REQUIRE(tcs.ok());
  in.toolchains = *tcs;
  in.arch = &arch::ArchData::shipped();
  auto rs = recipe::load_shipped();
  REQUIRE(rs.ok());
  in.recipes = *rs;
  in.compilers = {gxx("12.2.0", "/usr/bin/g++")};
  in.host = {16, 64ull << 30};
  return in;
}

Request request(const std::string& targets, const std::optional<std::string>& project = std::nullopt) {
  Request r;
  r.targets = sm(targets);
  if (project) {
    auto p = recipe::load(*project, recipe::Search::shipped());
    REQUIRE(p.ok());
    r.project = *p;
  }
  return r;
}

std::string value(const Environment& e, const std::string& name) {
  const Var* v = e.find(name);
  return v ? v->value : "<unset>";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("env --sm 90: the extension grammar of the newest torch when none is installed") {
  auto e = compute(request("90"), host());
  REQUIRE(e.ok());
  CHECK(value(*e, "TORCH_CUDA_ARCH_LIST") == "9.0");
  CHECK(value(*e, "CMAKE_CUDA_ARCHITECTURES") == "90-real");
  CHECK(value(*e, "FLASH_ATTN_CUDA_ARCHS") == "90");
  CHECK(value(*e, "CUDA_HOME") == "/usr/local/cuda");
  CHECK(e->find("CUDAHOSTCXX") == nullptr);  // g++ 12 is accepted by CUDA 13.0
  CHECK(e->grammar == "extension");
  CHECK(contains(e->grammar_of, test::newest_torch().recipe));
  bool said = false;
  for (const auto& n : e->notes) said = said || contains(n, "no torch is installed");
  CHECK(said);
  // Without --for, MAX_JOBS fits the most demanding extension recipe (flash-attn: 5 GiB, 4 threads).
  CHECK(value(*e, "MAX_JOBS") == "4");  // min(16 / 4, 64 / 5 = 12)
  CHECK(value(*e, "NVCC_THREADS") == "4");
}

TEST_CASE("env: the installed torch's version decides the reader, --constraints pins it exactly") {
  auto in = host();
  in.torch = TorchSeen{"/usr/bin/python3", "2.11.0+cu130.sm90", std::string("13.0")};
  auto e = compute(request("9.0 12.0+PTX"), in);
  REQUIRE(e.ok());
  CHECK(value(*e, "TORCH_CUDA_ARCH_LIST") == "9.0;12.0+PTX");
  CHECK(contains(e->grammar_of, "torch 2.11.0+cu130.sm90"));
  auto c = constraints(*e);
  REQUIRE(c.ok());
  CHECK(*c == "torch==2.11.0+cu130.sm90\n");
  // No torch: nothing to pin (exit 3).
  auto none = compute(request("90"), host());
  REQUIRE(none.ok());
  CHECK(constraints(*none).error().exit == Exit::missing_tool);
}

TEST_CASE("env: Thor's 10.1 is built as 11.0 by a CUDA 13 toolkit, which renamed it", "[arm]") {
  // Before: "CUDA 13.0 … cannot compile sm_101" for --sm 10.1 or Blackwell+Tegra.
  for (const char* target : {"10.1", "Blackwell+Tegra"}) {
    INFO(target);
    auto e = compute(request(target), host());  // CUDA 13.0
    REQUIRE(e.ok());
    CHECK(value(*e, "TORCH_CUDA_ARCH_LIST") == "11.0");
    CHECK(std::any_of(e->notes.begin(), e->notes.end(),
                      [](const std::string& n) { return contains(n, "10.1 is 11.0 for CUDA 13.0"); }));
  }
}

TEST_CASE("env: a toolkit of another CUDA major than torch's is refused as cpp_extension refuses it (exit 3)") {
  auto in = host();  // CUDA 13.0
  in.torch = TorchSeen{"/usr/bin/python3", "2.7.1+cu128", std::string("12.8")};
  auto e = compute(request("90"), in);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().exit == Exit::missing_tool);
  CHECK(contains(e.error().message, "torch 2.7.1+cu128 was built with CUDA 12.8, and the CUDA 13.0 toolkit"));
  CHECK(contains(e.error().message, "install a CUDA 12.x toolkit"));
  in.torch = TorchSeen{"/usr/bin/python3", "2.11.0+cu130", std::string("13.0")};
  CHECK(compute(request("90"), in).ok());
  in.torch = TorchSeen{"/usr/bin/python3", "2.11.0+cpu", std::nullopt};  // a CPU torch: nothing to compare
  CHECK(compute(request("90"), in).ok());
}

TEST_CASE("env: an old torch's reader rejects two-digit majors, cpp_extension never takes 'f'") {
  auto in = host();
  in.torch = TorchSeen{"/usr/bin/python3", "2.5.1+cu124", std::nullopt};
  auto e = compute(request("12.0"), in);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().exit == Exit::bad_input);
  CHECK(contains(e.error().message, "rejects two-digit majors (12.0)"));
  auto f = compute(request("12.0f"), host());
  REQUIRE_FALSE(f.ok());
  CHECK(contains(f.error().message, "does not accept 'f' suffixes (12.0f)"));
  // --for torch: the main build's grammar, which takes `f` from 2.9 on.
  auto t = compute(request("12.0f", "torch-2.14"), host());
  REQUIRE(t.ok());
  CHECK(t->grammar == "build");
  CHECK(value(*t, "TORCH_CUDA_ARCH_LIST") == "12.0f");
}

TEST_CASE("env: archs the installed toolkit cannot compile are refused (exit 2, one line)") {
  auto e = compute(request("7.0"), host());
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().exit == Exit::bad_input);
  CHECK(contains(e.error().message, "CUDA 13.0 at /usr/local/cuda cannot compile sm_70"));
  CHECK(e.error().message.find('\n') == std::string::npos);
  auto in = host();
  in.toolkit.reset();
  auto none = compute(request("90"), in);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().exit == Exit::missing_tool);
}

TEST_CASE("env --for flash-attn: its own list and its memory per job") {
  auto in = host();
  in.host = {64, 20ull << 30};
  auto e = compute(request("8.6 9.0", "flash-attn-2.8"), in);
  REQUIRE(e.ok());
  CHECK(value(*e, "FLASH_ATTN_CUDA_ARCHS") == "80;90");  // 8.6 runs sm_80 SASS
  CHECK(value(*e, "TORCH_CUDA_ARCH_LIST") == "8.6;9.0");
  CHECK(value(*e, "MAX_JOBS") == "4");  // 20 GiB / 5 GiB per job
  CHECK(value(*e, "NVCC_THREADS") == "4");
  // A target flash-attn builds nothing for is refused when it is the project ...
  auto bad = compute(request("7.5", "flash-attn-2.8"), host());
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.error().message, "FLASH_ATTN_CUDA_ARCHS (flash-attn-2.8) builds nothing that runs on 7.5"));
  // ... and only left out (with a note) otherwise.
  auto other = compute(request("7.5"), host());
  REQUIRE(other.ok());
  CHECK(other->find("FLASH_ATTN_CUDA_ARCHS") == nullptr);
  // xformers reads TORCH_CUDA_ARCH_LIST through cpp_extension: no variable of its own.
  auto xf = compute(request("90", "xformers-0.0.31"), host());
  REQUIRE(xf.ok());
  CHECK(value(*xf, "TORCH_CUDA_ARCH_LIST") == "9.0");
  CHECK(value(*xf, "MAX_JOBS") == "12");  // min(16 cores, 64 / 5)
}

TEST_CASE("env: CUDAHOSTCXX only when the default compiler is newer than the toolkit allows") {
  auto in = host();
  in.compilers = {gxx("16.1.0", "/usr/bin/g++"), gxx("14.2.0", "/usr/bin/g++-14"), gxx("12.2.0", "/usr/bin/g++-12")};
  auto e = compute(request("90"), in);
  REQUIRE(e.ok());
  CHECK(value(*e, "CUDAHOSTCXX") == "/usr/bin/g++-14");
  CHECK(contains(e->find("CUDAHOSTCXX")->why, "GCC 16"));
  in.compilers = {gxx("16.1.0", "/usr/bin/g++")};
  auto none = compute(request("90"), in);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().exit == Exit::missing_tool);
}

TEST_CASE("env printers: shell quoting, dotenv, github multi-line, one json document") {
  Environment e;
  e.vars = {{"TORCH_CUDA_ARCH_LIST", "8.0;9.0+PTX", ""}, {"CUDA_HOME", "/usr/local/cuda", ""},
            {"ODD", "it's \"x\" $y\nz", ""}};
  CHECK(to_shell(e) == "export TORCH_CUDA_ARCH_LIST='8.0;9.0+PTX'\nexport CUDA_HOME=/usr/local/cuda\n"
                       "export ODD='it'\\''s \"x\" $y\nz'\n");
  CHECK(to_dotenv(e) == "TORCH_CUDA_ARCH_LIST=\"8.0;9.0+PTX\"\nCUDA_HOME=/usr/local/cuda\n"
                        "ODD=\"it's \\\"x\\\" \\$y\\nz\"\n");
  CHECK(to_github(e) == "TORCH_CUDA_ARCH_LIST=8.0;9.0+PTX\nCUDA_HOME=/usr/local/cuda\n"
                        "ODD<<ARCHBUILD_EOF\nit's \"x\" $y\nz\nARCHBUILD_EOF\n");
  e.vars = {{"X", "a\nARCHBUILD_EOF\nb", ""}};
  CHECK(to_github(e) == "X<<ARCHBUILD_EOF_\na\nARCHBUILD_EOF\nb\nARCHBUILD_EOF_\n");
  auto j = to_json(e);
  CHECK(j["env"]["X"] == "a\nARCHBUILD_EOF\nb");
}

TEST_CASE("env: the torch probe's answer") {
  auto found = parse_torch_probe("noise\n@@archbuild-doctor@@{\"python\": \"/p\", \"found\": true, \"version\": "
                                 "\"2.11.0+cu130\", \"cuda\": \"13.0\", \"version_read\": true}\n", "python3");
  REQUIRE(found.ok());
  REQUIRE(found->has_value());
  CHECK((*found)->version == "2.11.0+cu130");
  CHECK((*found)->release() == V("2.11.0"));
  auto none = parse_torch_probe("@@archbuild-doctor@@{\"found\": false}\n", "python3");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  CHECK(parse_torch_probe("", "python3").error().exit == Exit::missing_tool);
  auto unread = parse_torch_probe("@@archbuild-doctor@@{\"found\": true, \"dir\": \"/s/torch\", \"version_error\": \"x\"}\n", "py");
  REQUIRE_FALSE(unread.ok());
  CHECK_THAT(unread.error().message, Catch::Contains("/s/torch") && Catch::Contains("version file could not be read"));
}
