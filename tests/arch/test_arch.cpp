// The architecture model: parsing every spelling, printing, GPU matching, run compatibility.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "arch/arch.hpp"
#include "arch/arch_data.hpp"
#include "arch/compat.hpp"
#include "arch/parse.hpp"
#include "core/text.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::arch;

namespace {

const ArchData& data() {
  static ArchData d = ArchData::load(std::filesystem::path(ARCHBUILD_SOURCE_DIR) / "data" / "gpus.toml").take();
  return d;
}

std::vector<Arch> parse(const std::string& text, Grammar g = Grammar::build) {
  auto r = parse_arch_list(text, data(), {g, {}});
  INFO(text << " -> " << (r ? std::string("ok") : r.error().message));
  REQUIRE(r.ok());
  return *r;
}

std::string torch(const std::string& text, Grammar g = Grammar::build) { return to_torch(parse(text, g)).text; }
std::string cmake(const std::string& text, Grammar g = Grammar::build) { return to_cmake(parse(text, g)).text; }

std::string reject(const std::string& text, Grammar g = Grammar::build) {
  auto r = parse_arch_list(text, data(), {g, {}});
  INFO(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == Exit::bad_input);
  CHECK(r.error().message.find('\n') == std::string::npos);  // one line
  return r.error().message;
}

CodeImage sass(int sm, Variant v = Variant::none) { return {CodeKind::sass, Cc::from_sm(sm), v}; }
CodeImage ptx(int sm, Variant v = Variant::none) { return {CodeKind::ptx, Cc::from_sm(sm), v}; }

RunResult verdict(std::vector<CodeImage> code, int gpu_sm) {
  return run_verdict(code, Cc::from_sm(gpu_sm)).result;
}

}  // namespace

TEST_CASE("every single-arch spelling of CC 9.0 means the same SASS", "[parse]") {
  for (const char* s : {"9.0", "90", "sm_90", "SM_90", "90-real", "cuda_arch=90",
                        "cuda_compute_capabilities=9.0", "-gencode arch=compute_90,code=sm_90",
                        "-gencode=arch=compute_90,code=sm_90", "--generate-code=arch=compute_90,code=sm_90",
                        "arch=compute_90,code=sm_90", "Hopper"}) {
    INFO(s);
    CHECK(torch(s) == "9.0");
    CHECK(cmake(s) == "90-real");
  }
}

TEST_CASE("PTX spellings", "[parse]") {
  CHECK(torch("9.0+PTX") == "9.0+PTX");
  CHECK(torch("9.0+ptx") == "9.0+PTX");
  CHECK(cmake("9.0+PTX") == "90");
  auto p = parse("compute_90");
  REQUIRE(p.size() == 1);
  CHECK_FALSE(p[0].sass);
  CHECK(p[0].ptx);
  CHECK(cmake("compute_90") == "90-virtual");
  CHECK(cmake("90-virtual") == "90-virtual");
  CHECK(to_torch(parse("compute_90")).notes.size() == 1);  // torch cannot say PTX-only
  CHECK(cmake("-gencode arch=compute_90,code=[sm_90,compute_90]") == "90");
  CHECK(cmake("-gencode=arch=compute_90,code=\"sm_90,compute_90\"") == "90");
  CHECK(cmake("-arch=sm_90") == "90");        // nvcc's shorthand embeds PTX too
  CHECK(cmake("-arch compute_80") == "80-virtual");
}

TEST_CASE("variants a and f", "[parse]") {
  auto a = parse("sm_90a");
  REQUIRE(a.size() == 1);
  CHECK(a[0].variant == Variant::a);
  CHECK(a[0].sm_name() == "sm_90a");
  CHECK(torch("9.0a") == "9.0a");
  CHECK(torch("90a") == "9.0a");
  CHECK(torch("12.0f") == "12.0f");
  CHECK(torch("sm_120f") == "12.0f");
  CHECK(torch("sm_100a;10.0") == "10.0;10.0a");  // distinct images, both kept
  CHECK(cmake("90a") == "90a-real");
  CHECK(to_nvcc(parse("12.0f+PTX")) ==
        std::vector<std::string>{"-gencode=arch=compute_120f,code=sm_120f",
                                 "-gencode=arch=compute_120f,code=compute_120f"});
}

TEST_CASE("CMake plain numbers mean SASS and PTX only under the cmake grammar", "[parse]") {
  CHECK(cmake("90", Grammar::build) == "90-real");
  CHECK(cmake("90", Grammar::cmake) == "90");
  CHECK(cmake("80-real;90", Grammar::cmake) == "80-real;90");
}

TEST_CASE("A(B): SASS for A built from compute_B", "[parse]") {
  auto p = parse("8.6(8.0)");
  REQUIRE(p.size() == 1);
  REQUIRE(p[0].sass_from);
  CHECK(p[0].sass_from->str() == "8.0");
  CHECK(torch("8.6(8.0)") == "8.6(8.0)");
  CHECK(to_nvcc(p) == std::vector<std::string>{"-gencode=arch=compute_80,code=sm_86"});
  CHECK(to_torch(parse("-gencode arch=compute_80,code=sm_86")).text == "8.6(8.0)");
  CHECK(reject("8.0(8.6)").find("newer") != std::string::npos);
  CHECK(reject("8.6(8.0)", Grammar::extension).find("A(B)") != std::string::npos);
}

TEST_CASE("lists: separators, sorting, deduplication, merging", "[parse]") {
  CHECK(torch("9.0;8.0 8.6,8.0") == "8.0;8.6;9.0");
  CHECK(torch("8.6 8.6+PTX") == "8.6+PTX");
  CHECK(torch("12.0 7.5 10.0") == "7.5;10.0;12.0");  // numeric, not text, order
  CHECK(torch("sm_90 compute_90") == "9.0+PTX");
  CHECK(to_nvcc(parse("8.0 8.6+PTX")).size() == 3);
  CHECK(parse_arch_lists({"8.0", "9.0+PTX"}, data()).take().size() == 2);
}

TEST_CASE("the official wheels' arch lists parse", "[parse]") {
  CHECK(torch("3.7;5.0;6.0;7.0;7.5;8.0;8.6;9.0") == "3.7;5.0;6.0;7.0;7.5;8.0;8.6;9.0");
  CHECK(torch("7.5;8.0;8.6;9.0;10.0;12.0+PTX") == "7.5;8.0;8.6;9.0;10.0;12.0+PTX");
  CHECK(cmake("7.5;8.0;8.6;9.0;10.0;12.0+PTX") == "75-real;80-real;86-real;90-real;100-real;120");
}

TEST_CASE("names under the build grammar (select_compute_arch.cmake)", "[parse][names]") {
  CHECK(torch("Kepler") == "3.5");
  CHECK(torch("Kepler+Tesla") == "3.7");
  CHECK(torch("Maxwell") == "5.0;5.2");
  CHECK(torch("Maxwell+Tegra") == "5.3");
  CHECK(torch("Pascal") == "6.0;6.1");
  CHECK(torch("Volta") == "7.0");
  CHECK(torch("Volta+Tegra") == "7.2");
  CHECK(torch("Turing") == "7.5");
  CHECK(torch("Ampere") == "8.0;8.6");
  CHECK(torch("Ampere+Tegra") == "8.7");
  CHECK(torch("Ada") == "8.9");
  CHECK(torch("Hopper") == "9.0");
  CHECK(torch("Blackwell") == "10.0;12.0");
  CHECK(torch("Blackwell+Tegra") == "10.1");
  // PTX only when written Name+PTX, on the name's last arch.
  CHECK(torch("Ampere+PTX") == "8.0;8.6+PTX");
  CHECK(torch("Blackwell+PTX") == "10.0;12.0+PTX");
  CHECK(torch("hopper") == "9.0");  // case-insensitive
  CHECK(torch("Ampere;Hopper") == "8.0;8.6;9.0");
}

TEST_CASE("names under the extension grammar (cpp_extension)", "[parse][names]") {
  const auto ext = Grammar::extension;
  CHECK(torch("Kepler", ext) == "3.5+PTX");
  CHECK(torch("Kepler+Tesla", ext) == "3.7");
  CHECK(torch("Maxwell", ext) == "5.0;5.2+PTX");
  CHECK(torch("Maxwell+Tegra", ext) == "5.3");
  CHECK(torch("Pascal", ext) == "6.0;6.1+PTX");
  CHECK(torch("Volta", ext) == "7.0+PTX");
  CHECK(torch("Volta+Tegra", ext) == "7.2");
  CHECK(torch("Turing", ext) == "7.5+PTX");
  CHECK(torch("Ampere", ext) == "8.0;8.6+PTX");
  CHECK(torch("Ampere+Tegra", ext) == "8.7");
  CHECK(torch("Ada", ext) == "8.9+PTX");
  CHECK(torch("Hopper", ext) == "9.0+PTX");
  CHECK(torch("Blackwell", ext) == "10.0;10.3;12.0;12.1+PTX");
  CHECK(torch("Blackwell+Tegra", ext) == "11.0");
  CHECK(reject("12.0f", ext).find("'f'") != std::string::npos);
  CHECK(torch("9.0a", ext) == "9.0a");
}

TEST_CASE("Rubin (10.7): a build-grammar name from CUDA 13.4 on, none in cpp_extension", "[parse][names]") {
  CHECK(torch("Rubin") == "10.7");
  CHECK(torch("Rubin+PTX") == "10.7+PTX");
  CHECK(torch("sm_107f") == "10.7f");
  CHECK(torch("10.7a") == "10.7a");
  // The reader the list is for decides: cpp_extension has no such name.
  auto ext = reject("Rubin", Grammar::extension);
  CHECK(ext.find("cpp_extension has no name Rubin; write 10.7") != std::string::npos);

  auto with_cuda = [](const char* text, const char* cuda) {
    ParseOptions o{Grammar::build, {}};
    o.cuda = Version::parse(cuda);
    return parse_arch_list(text, data(), o);
  };
  auto old = with_cuda("Rubin", "13.0");
  REQUIRE_FALSE(old.ok());
  CHECK(old.error().exit == Exit::bad_input);
  CHECK(old.error().message.find("knows Rubin only with CUDA >= 13.4 (this list is for CUDA 13.0)") != std::string::npos);
  auto ok = with_cuda("Rubin", "13.4");
  REQUIRE(ok.ok());
  CHECK(to_torch(*ok).text == "10.7");
  // Only the name is gated here; the number is a toolkit question (toolchains/, resolve).
  CHECK(with_cuda("10.7", "13.0").ok());
  // Names without a floor are unaffected.
  CHECK(with_cuda("Hopper", "11.8").ok());

  const ArchName* rubin = data().find_name("rubin");
  REQUIRE(rubin);
  REQUIRE(rubin->min_cuda);
  CHECK(rubin->min_cuda->str() == "13.4");
  CHECK(rubin->extension.empty());
  CHECK(data().architecture(Cc{10, 7}) == "Rubin");
}

TEST_CASE("rejects name the token and the nearest valid spellings", "[parse][reject]") {
  auto m = reject("9.5");
  CHECK(m.find("\"9.5\"") != std::string::npos);
  CHECK(m.find("9.0") != std::string::npos);
  CHECK(m.find("10.0") != std::string::npos);
  CHECK(m.find("sm_95") != std::string::npos);
  m = reject("12.3");
  CHECK(m.find("12.1") != std::string::npos);
  CHECK(m.find("12.0") != std::string::npos);
  m = reject("Hoper");
  CHECK(m.find("Hopper") != std::string::npos);
  m = reject("sm_9");
  CHECK(m.find("sm_9") != std::string::npos);
  CHECK(m.find("90") != std::string::npos);
  m = reject("+PTX");
  CHECK(m.find("must follow") != std::string::npos);
  reject("sm_95");
  reject("95");
  reject("8.6a");     // no a variant before 9.0
  reject("9.0f");     // no f for Hopper
  reject("sm_1000");
  reject("9.00");
  reject("");
  reject(" ; , ");
  reject("-gencode");
  reject("-gencode arch=compute_90");
  reject("-gencode arch=sm_90,code=sm_90");
  reject("sm_");
  reject("Volta;Hoper");  // one bad item fails the list
  reject("8.0;9.5");
}

// Said from the data: a CC it does not list is one archbuild does not know (Kepler's 3.0 existed),
// and a variant's list is every CC the data gives it.
TEST_CASE("rejects say what the data knows, not what exists", "[parse][reject]") {
  auto m = reject("3.0");
  CHECK(m.find("archbuild knows no compute capability 3.0 (sm_30)") != std::string::npos);
  CHECK(m.find("there is no") == std::string::npos);
  CHECK(m.find("3.5") != std::string::npos);
  m = reject("00");
  CHECK(m.find("sm_0") == std::string::npos);
  CHECK(m.find("no compute capability 0.0") != std::string::npos);
  m = reject("87a");
  for (const char* v : {"9.0a", "10.0a", "10.1a", "10.3a", "11.0a", "12.0a", "12.1a"}) CHECK(m.find(v) != std::string::npos);
  m = reject("9.0f");
  CHECK(m.find("10.0f") != std::string::npos);
  CHECK(m.find("12.1f") != std::string::npos);
}

TEST_CASE("nvcc's code=[…] and code=\"…\" must be balanced", "[parse][reject]") {
  CHECK(torch("-gencode arch=compute_90,code=[sm_90,compute_90]") == "9.0+PTX");
  CHECK(torch("-gencode=arch=compute_90,code=\"sm_90,compute_90\"") == "9.0+PTX");
  for (const char* bad : {"-gencode arch=compute_90,code=[sm_90", "-gencode arch=compute_90,code=sm_90]",
                          "-gencode arch=compute_90,code=[[sm_90]", "-gencode=arch=compute_90,code=\"sm_90",
                          "arch=compute_90,code=[sm_90,compute_90"}) {
    auto m = reject(bad);
    CHECK((m.find("without its") != std::string::npos));
  }
}

// The class: whatever the user typed and an error repeats is quoted, its control characters
// escaped, and cut (text::quoted) — for every way parsing fails. Each hostile payload is put
// into each failing spelling: 8 payloads x 12 spellings = 96 inputs.
TEST_CASE("every error repeats the user's text quoted, escaped and bounded", "[parse][reject]") {
  const std::vector<std::string> payloads = {
      "\x1b]0;owned\x07",          // OSC: sets the terminal's title
      "\x1b[2J\x1b[H",             // clears the screen
      "9\r\x1b[Kfake",             // carriage return over the line
      "a\tb",                      // tab (no separator here: ; , and spaces are)
      "\x9b" "31m",                // C1 CSI (invalid UTF-8 byte)
      "\xc2\x9b" "31m",            // C1 CSI as UTF-8
      "\xff\xfe",                  // not UTF-8
      std::string(100000, 'A') + "\x1b[31m",  // 100 KB
  };
  const std::vector<std::string> spellings = {
      "{}",       "sm_{}",        "compute_{}",          "9.0{}",
      "{}+PTX",   "8.6({})",      "-arch={}",           "-gencode=arch={},code=sm_90",
      "-gencode=arch=compute_90,code={}", "arch=compute_90,code=[sm_90,{}", "cuda_arch={}", "-gencode={}",
  };
  int tried = 0;
  for (const auto& payload : payloads)
    for (const auto& spelling : spellings) {
      std::string input = spelling;
      input.replace(input.find("{}"), 2, payload);
      auto r = parse_arch_list(input, data(), {Grammar::build, {}});
      ++tried;
      if (r) continue;  // (none parses; a payload that did would echo nothing)
      const std::string& m = r.error().message;
      INFO(text::quoted(m, 400));
      CHECK(r.error().exit == Exit::bad_input);
      CHECK(m.size() < 1000);
      bool clean = std::none_of(m.begin(), m.end(), [](char ch) {
        auto c = static_cast<unsigned char>(ch);
        return c < 0x20 || c == 0x7f;
      });
      CHECK(clean);
      CHECK(m.find("\xc2\x9b") == std::string::npos);
      CHECK(m.find('"') != std::string::npos);  // quoted
    }
  CHECK(tried == 96);
}

TEST_CASE("keywords need a toolkit or a GPU", "[parse][reject]") {
  CHECK(reject("native").find("archbuild detect") != std::string::npos);
  CHECK(reject("Auto").find("archbuild detect") != std::string::npos);
  CHECK(reject("All").find("toolkit") != std::string::npos);
  reject("Common");
  reject("all-major");
  reject("-arch=native");
  // With a resolver (detect/toolchain), the keyword gets its meaning.
  ParseOptions o;
  o.keyword = [](std::string_view kw) -> Result<std::vector<Arch>> {
    if (kw == "native") return std::vector<Arch>{{Cc{9, 0}, Variant::none, true, false, {}}};
    return Error::bad_input("no");
  };
  auto r = parse_arch_list("native;8.0", data(), o);
  REQUIRE(r.ok());
  CHECK(to_torch(*r).text == "8.0;9.0");
}

TEST_CASE("printers", "[print]") {
  auto l = parse("8.0 8.6 9.0+PTX");
  CHECK(to_torch(l).text == "8.0;8.6;9.0+PTX");
  CHECK(to_cmake(l).text == "80-real;86-real;90");
  CHECK(to_spack(l).text == "80,86,90");
  CHECK(to_nvcc(l) == std::vector<std::string>{"-gencode=arch=compute_80,code=sm_80",
                                               "-gencode=arch=compute_86,code=sm_86",
                                               "-gencode=arch=compute_90,code=sm_90",
                                               "-gencode=arch=compute_90,code=compute_90"});
  auto tegra = parse("10.1");
  CHECK(to_nvcc(tegra).front() == "-gencode=arch=compute_101,code=sm_101");
}

TEST_CASE("every GPU of the table parses back to a known CC", "[gpus]") {
  REQUIRE(data().gpus().size() > 60);
  for (const auto& g : data().gpus()) {
    INFO(g.name);
    CHECK(data().find(g.cc) != nullptr);
  }
}

TEST_CASE("GPU names match case-insensitively and without vendor prefixes", "[gpus]") {
  auto one = [](const std::string& q) {
    auto m = data().match_gpus(q);
    INFO(q);
    REQUIRE(m.size() == 1);
    return m.front();
  };
  CHECK(one("NVIDIA GeForce RTX 4090")->cc.str() == "8.9");
  CHECK(one("rtx 4090")->name == "RTX 4090");
  CHECK(one("GeForce RTX 5090")->cc.str() == "12.0");
  CHECK(one("NVIDIA H100 80GB HBM3")->cc.str() == "9.0");
  CHECK(one("NVIDIA H100 PCIe")->name == "H100");
  CHECK(one("h100")->name == "H100");
  CHECK(one("B200")->cc.str() == "10.0");
  CHECK(one("b300")->cc.str() == "10.3");
  CHECK(one("Tesla T4")->cc.str() == "7.5");
  CHECK(one("A100")->cc.str() == "8.0");
  CHECK(one("DGX Spark")->cc.str() == "12.1");
  CHECK(one("Jetson Thor")->cc.str() == "11.0");
  // The 2026 GPUs.
  CHECK(one("R200")->cc.str() == "10.7");
  CHECK(one("Vera Rubin")->cc.str() == "10.7");
  CHECK(one("RTX PRO 4000 Blackwell SFF")->cc.str() == "12.0");
  CHECK(one("RTX PRO 2000 Blackwell")->cc.str() == "12.0");
  CHECK(one("RTX Spark N1X")->cc.str() == "12.1");
  CHECK(one("Jetson T5000")->cc.str() == "11.0");
  CHECK(one("Jetson T4000")->cc.str() == "11.0");
  CHECK(one("RTX 4000 SFF Ada")->cc.str() == "8.9");
  CHECK(one("RTX 4050")->cc.str() == "8.9");
  CHECK(one("RTX A3000")->cc.str() == "8.6");
  CHECK(data().match_gpus("RTX PRO 4500 Blackwell").size() == 1);  // exact beats "… Server Edition"
  // A partial name gives every match.
  CHECK(data().match_gpus("RTX 30").size() >= 9);
  CHECK(data().match_gpus("Hoper").empty());
  CHECK(data().nearest_gpu_names("H1OO", 3).front() == "H100");
  // A name as nvidia-smi prints it around a known one (a laptop part of the same chip family).
  for (const auto& [smi, cc] : std::vector<std::pair<std::string, std::string>>{
           {"NVIDIA GeForce RTX 4090 Laptop GPU", "8.9"}, {"NVIDIA GeForce RTX 3080 Ti Laptop GPU", "8.6"},
           {"NVIDIA RTX A5000 Laptop GPU", "8.6"}}) {
    auto m = data().match_gpus(smi);
    INFO(smi);
    REQUIRE(m.size() == 1);
    CHECK(m.front()->cc.str() == cc);
  }
}

TEST_CASE("nvidia-smi names identify the GPU", "[gpus]") {
  CHECK(data().identify("NVIDIA H100 80GB HBM3")->name == "H100");
  CHECK(data().identify("NVIDIA H200")->name == "H200");
  CHECK(data().identify("NVIDIA GeForce RTX 4070 Ti SUPER")->name == "RTX 4070 Ti");
  CHECK(data().identify("NVIDIA A100-SXM4-80GB")->name == "A100");
  CHECK(data().identify("NVIDIA GeForce RTX 3060 Laptop GPU")->name == "RTX 3060");
  CHECK(data().identify("NVIDIA Future GPU 9000") == nullptr);
  CHECK(data().identify("NVIDIA RTX Spark N1X")->name == "RTX Spark N1X");
  CHECK(data().identify("NVIDIA RTX 5000 Ada Generation")->name == "RTX 5000 Ada");
  CHECK(data().identify("NVIDIA Thor")->name == "Jetson Thor");
  // Pre-release Rubin boards' generic name is not taken for Rubin.
  CHECK(data().identify("NVIDIA Graphics Device") == nullptr);
}

TEST_CASE("run compatibility: SASS", "[compat]") {
  // Exact SASS is native.
  CHECK(verdict({sass(90)}, 90) == RunResult::native);
  // Same major, higher minor: compatible SASS.
  CHECK(verdict({sass(80)}, 86) == RunResult::compatible_sass);
  CHECK(verdict({sass(80)}, 89) == RunResult::compatible_sass);
  CHECK(verdict({sass(86)}, 89) == RunResult::compatible_sass);
  CHECK(verdict({sass(120)}, 121) == RunResult::compatible_sass);
  CHECK(verdict({sass(100)}, 103) == RunResult::compatible_sass);
  // Lower minor of the same major: no.
  CHECK(verdict({sass(86)}, 80) == RunResult::no_kernel_image);
  // Never across majors, in either direction.
  CHECK(verdict({sass(90)}, 100) == RunResult::no_kernel_image);
  CHECK(verdict({sass(90)}, 120) == RunResult::no_kernel_image);
  CHECK(verdict({sass(120)}, 90) == RunResult::no_kernel_image);
  CHECK(verdict({sass(80), sass(86), sass(90)}, 120) == RunResult::no_kernel_image);
  // Nothing at all.
  CHECK(verdict({}, 90) == RunResult::no_kernel_image);
}

TEST_CASE("run compatibility: a and f variants", "[compat]") {
  CHECK(verdict({sass(90, Variant::a)}, 90) == RunResult::native);
  CHECK(verdict({sass(100, Variant::a)}, 103) == RunResult::no_kernel_image);  // a: exact only
  CHECK(verdict({sass(120, Variant::a)}, 121) == RunResult::no_kernel_image);
  CHECK(verdict({sass(100, Variant::f)}, 100) == RunResult::native);
  CHECK(verdict({sass(100, Variant::f)}, 103) == RunResult::compatible_sass);  // family
  CHECK(verdict({sass(120, Variant::f)}, 121) == RunResult::compatible_sass);
  CHECK(verdict({sass(120, Variant::f)}, 100) == RunResult::no_kernel_image);
  CHECK(verdict({sass(103, Variant::f)}, 100) == RunResult::no_kernel_image);  // family base and up
  CHECK(verdict({sass(100, Variant::f)}, 120) == RunResult::no_kernel_image);
}

TEST_CASE("run compatibility: PTX JIT", "[compat]") {
  CHECK(verdict({ptx(120)}, 120) == RunResult::ptx_jit);
  CHECK(verdict({ptx(90)}, 120) == RunResult::ptx_jit);   // any CC at or above
  CHECK(verdict({ptx(80)}, 121) == RunResult::ptx_jit);
  CHECK(verdict({ptx(120)}, 90) == RunResult::no_kernel_image);
  CHECK(verdict({ptx(90, Variant::a)}, 90) == RunResult::ptx_jit);
  CHECK(verdict({ptx(90, Variant::a)}, 100) == RunResult::no_kernel_image);  // a PTX: exact only
  CHECK(verdict({ptx(100, Variant::f)}, 103) == RunResult::ptx_jit);
  CHECK(verdict({ptx(100, Variant::f)}, 120) == RunResult::no_kernel_image);
}

TEST_CASE("run compatibility: the driver's preference and the chosen image", "[compat]") {
  // The 2.7 cu128 wheel (7.5;8.0;8.6;9.0;10.0;12.0+PTX) on several GPUs.
  auto wheel = images_of(parse("7.5;8.0;8.6;9.0;10.0;12.0+PTX"));
  CHECK(run_verdict(wheel, {12, 0}).result == RunResult::native);
  CHECK(run_verdict(wheel, {8, 9}).result == RunResult::compatible_sass);
  CHECK(run_verdict(wheel, {8, 9}).image->name() == "sm_86");  // the closest SASS
  CHECK(run_verdict(wheel, {12, 1}).result == RunResult::compatible_sass);
  CHECK(run_verdict(wheel, {10, 3}).result == RunResult::compatible_sass);
  CHECK(run_verdict(wheel, {7, 0}).result == RunResult::no_kernel_image);
  // SASS beats PTX even when PTX is newer.
  CHECK(verdict({ptx(90), sass(80)}, 86) == RunResult::compatible_sass);
  // 2.5 cu124 wheel on an RTX 5090: the classic "no kernel image".
  auto old = images_of(parse("5.0;6.0;7.0;7.5;8.0;8.6;9.0"));
  CHECK(run_verdict(old, {12, 0}).result == RunResult::no_kernel_image);
  CHECK_FALSE(run_verdict(old, {12, 0}).image.has_value());
  CHECK(to_string(RunResult::ptx_jit) == "ptx-jit");
  CHECK(to_string(RunResult::no_kernel_image) == "no-kernel-image");
}

TEST_CASE("the data file is checked strictly", "[data]") {
  test::TempDir t;
  auto bad = t.write("gpus.toml", "cc = []\nname = []\ngpu = []\ntypo = 1\n");
  auto r = ArchData::load(bad);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("typo") != std::string::npos);
  CHECK(r.error().message.find(":4:") != std::string::npos);
  auto unknown_cc = t.write("g2.toml", "gpu = [ { name = \"X\", cc = \"9.5\" } ]\ncc = []\nname = []\n");
  r = ArchData::load(unknown_cc);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("9.5") != std::string::npos);
  auto bad_min = t.write("g4.toml", "cc = [ { cc = \"9.0\", architecture = \"Hopper\" } ]\ngpu = []\n"
                                    "name = [ { name = \"X\", build = \"9.0\", min_cuda = \"13\" } ]\n");
  r = ArchData::load(bad_min);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("min_cuda \"13\"") != std::string::npos);
  auto syntax = t.write("g3.toml", "gpu = [\n");
  r = ArchData::load(syntax);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("g3.toml:") != std::string::npos);
}
