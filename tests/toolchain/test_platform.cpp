// The platforms of toolchains/platforms.toml and the rule that picks one (docs/arm-hosts.md).
#include <catch2/catch.hpp>

#include "support/tempdir.hpp"
#include "toolchain/platform.hpp"

using namespace archbuild;
using arch::Cc;
using toolchain::Machine;
using toolchain::Platforms;

namespace {

const Platforms& shipped() { return Platforms::shipped(); }

std::string chosen(const std::optional<std::string>& asked, std::vector<toolchain::PlatformGpu> gpus, Machine m) {
  auto c = toolchain::choose_platform(shipped(), asked, gpus, m);
  if (!c) return "error: " + c.error().message;
  return c->platform->name;
}

}  // namespace

TEST_CASE("platforms: the shipped data", "[toolchain][platform]") {
  const auto& ps = shipped();
  REQUIRE(ps.find("x86_64"));
  const auto* sbsa = ps.find("sbsa");
  const auto* jetson = ps.find("jetson");
  REQUIRE(sbsa);
  REQUIRE(jetson);
  CHECK(sbsa->cuda_target == "sbsa-linux");
  CHECK(sbsa->wheel_arch == "aarch64");
  CHECK(sbsa->pip_cuda);
  CHECK(jetson->cuda_target == "aarch64-linux");
  CHECK_FALSE(jetson->pip_cuda);
  CHECK_FALSE(jetson->has_official_wheels());
  CHECK(ps.default_for("aarch64")->name == "sbsa");
  CHECK(ps.default_for("aarch64", true)->name == "jetson");
  CHECK(ps.default_for("x86_64")->name == "x86_64");
  CHECK(ps.default_for("riscv64") == nullptr);
  // Which GPUs a platform can have. Orin (8.7) is jetson's (JetPack 5/6) and sbsa's (JetPack 7.2).
  CHECK(ps.owner_of({8, 7}) == nullptr);
  REQUIRE(ps.owners_of({8, 7}).size() == 2);
  CHECK(ps.owners_of({8, 7})[0]->name != ps.owners_of({8, 7})[1]->name);
  CHECK(ps.owner_of({5, 3})->name == "jetson");
  CHECK(ps.owner_of({11, 0})->name == "sbsa");
  CHECK(ps.owner_of({12, 1})->name == "sbsa");
  CHECK(ps.owner_of({9, 0}) == nullptr);
  CHECK(ps.owners_of({9, 0}).empty());
  CHECK_THAT(ps.refuses(*sbsa, {7, 0}).value_or(""), Catch::Contains("no GPU older than CC 7.5"));
  CHECK_FALSE(ps.refuses(*sbsa, {8, 7}));
  CHECK_FALSE(ps.refuses(*jetson, {8, 7}));
  CHECK_THAT(ps.refuses(*ps.find("x86_64"), {8, 7}).value_or(""),
             Catch::Contains("CC 8.7 is a GPU of platforms") && Catch::Contains("not of x86_64"));
  CHECK_THAT(ps.refuses(*sbsa, {5, 3}).value_or(""), Catch::Contains("platform jetson only"));
  CHECK_THAT(ps.refuses(*jetson, {9, 0}).value_or(""), Catch::Contains("has only the GPUs of CC 5.3, 6.2, 7.2, 8.7"));
  CHECK_FALSE(ps.refuses(*sbsa, {12, 1}));
  CHECK_FALSE(ps.refuses(*ps.find("x86_64"), {9, 0}));
  // Thor before CUDA 13 (10.1) is an embedded GPU; the embedded toolkits end with CUDA 12.
  CHECK(ps.owner_of({10, 1})->name == "jetson");
  REQUIRE(jetson->cuda_below);
  CHECK(jetson->cuda_below->str() == "13.0");
  CHECK_FALSE(jetson->cuda_below_why.empty());
  CHECK_FALSE(sbsa->cuda_below);
}

TEST_CASE("platforms: which one a command works for", "[toolchain][platform]") {
  const Machine x86{"x86_64", false, ""}, grace{"aarch64", false, ""}, orin{"aarch64", true, "# R36 (release)"};
  // This machine decides when nothing else does.
  CHECK(chosen(std::nullopt, {}, x86) == "x86_64");
  CHECK(chosen(std::nullopt, {}, grace) == "sbsa");
  CHECK(chosen(std::nullopt, {}, orin) == "jetson");
  // A Jetson's platform is its JetPack's, read off its L4T release: JetPack 6.2 (R36.4) is jetson,
  // JetPack 7 (R38 Thor, R39 Orin or Thor) sbsa; an L4T the data lacks takes its major's.
  const Machine orin6 = toolchain::machine_of("aarch64", std::string("# R36 (release), REVISION: 4.3, GCID: 1\n"), toolchain::JetPacks::shipped());
  const Machine orin7 = toolchain::machine_of("aarch64", std::string("# R39 (release), REVISION: 2.0, GCID: 2, BOARD: generic\n"), toolchain::JetPacks::shipped());
  const Machine thor = toolchain::machine_of("aarch64", std::string("# R38 (release), REVISION: 2.0, GCID: 3\n"), toolchain::JetPacks::shipped());
  CHECK(orin6.tegra);
  CHECK(orin6.l4t == "# R36 (release), REVISION: 4.3, GCID: 1");
  CHECK(orin6.l4t_platform == "jetson");
  CHECK(orin7.l4t_platform == "sbsa");
  CHECK(chosen(std::nullopt, {}, orin6) == "jetson");
  CHECK(chosen(std::nullopt, {}, orin7) == "sbsa");
  CHECK(chosen(std::nullopt, {}, thor) == "sbsa");
  CHECK(chosen(std::nullopt, {}, toolchain::machine_of("aarch64", std::string("# R36 (release), REVISION: 5.0"), toolchain::JetPacks::shipped())) == "jetson");
  CHECK(toolchain::default_platform(shipped(), orin7)->cuda_target == "sbsa-linux");
  CHECK_FALSE(toolchain::machine_of("x86_64", std::nullopt, toolchain::JetPacks::shipped()).tegra);
  auto why = toolchain::choose_platform(shipped(), std::nullopt, {}, orin7);
  REQUIRE(why);
  CHECK_THAT(why->why, Catch::Contains("L4T: # R39") && Catch::Contains("platform sbsa"));
  // An Orin on either JetPack: its platform is this Jetson's (the GPU alone does not decide).
  CHECK(chosen(std::nullopt, {{{8, 7}, "", "--gpu Jetson AGX Orin"}}, orin6) == "jetson");
  CHECK(chosen(std::nullopt, {{{8, 7}, "", "--gpu Jetson AGX Orin"}}, orin7) == "sbsa");
  CHECK(chosen(std::nullopt, {{{8, 7}, "", "--sm 8.7"}}, grace) == "sbsa");
  // From a machine whose platform cannot have it: the asker decides (app/advise.cpp asks JetPack first).
  CHECK_THAT(chosen(std::nullopt, {{{8, 7}, "", "--gpu Jetson AGX Orin"}}, x86),
             Catch::Contains("--gpu Jetson AGX Orin: CC 8.7 is a GPU of platforms") && Catch::Contains("give --platform"));
  // A GPU of one platform decides over the machine (asking about a Jetson from an x86 laptop).
  CHECK(chosen(std::nullopt, {{{5, 3}, "jetson", "--gpu Jetson Nano"}}, x86) == "jetson");
  CHECK(chosen(std::nullopt, {{{8, 7}, "jetson", "--gpu Jetson AGX Orin"}}, x86) == "jetson");
  CHECK(chosen(std::nullopt, {{{10, 0}, "sbsa", "--gpu GB200"}}, x86) == "sbsa");
  CHECK(chosen(std::nullopt, {{{12, 1}, "", "--sm 12.1"}}, x86) == "sbsa");
  CHECK(chosen(std::nullopt, {{{9, 0}, "", "--sm 9.0"}}, grace) == "sbsa");
  // GPUs of two platforms, an unknown name, a GPU the named platform cannot have: exit 2.
  auto two = toolchain::choose_platform(shipped(), std::nullopt, {{{8, 7}, "jetson", "--gpu Orin"}, {{12, 1}, "", "--sm 12.1"}}, x86);
  REQUIRE_FALSE(two);
  CHECK(two.error().exit == Exit::bad_input);
  CHECK_THAT(two.error().message, Catch::Contains("two platforms"));
  CHECK_THAT(chosen(std::string("arm64"), {}, x86), Catch::Contains("not a platform") && Catch::Contains("valid: "));
  CHECK_THAT(chosen(std::string("sbsa"), {{{8, 7}, "jetson", "--gpu Jetson AGX Orin"}}, x86),
             Catch::Contains("--gpu Jetson AGX Orin sits on platform jetson"));
  CHECK(chosen(std::string("sbsa"), {{{9, 0}, "", "--sm 9.0"}}, x86) == "sbsa");
}

TEST_CASE("platforms: bad data is one line with file:line:column", "[toolchain][platform]") {
  test::TempDir dir;
  // One platform's required keys, then `tail`: the load's error message.
  auto error_of = [&](const std::string& name, const std::string& tail) {
    auto f = dir.write(name, "[platform.x]\ndescription = \"d\"\nmachine = \"x86_64\"\nwheel_arch = \"x86_64\"\n"
                             "cuda_target = \"x\"\nofficial_wheels = \"\"\n" + tail);
    auto r = Platforms::load(f);
    return r ? std::string("loaded") : r.error().message;
  };
  CHECK_THAT(error_of("platforms.toml", "cuda_libraries = \"conda\"\n"),
             Catch::Contains("platforms.toml:") && Catch::Contains("valid: \"pip\", \"host\""));
  CHECK_THAT(error_of("p2.toml", "cuda_libraries = \"pip\"\nonly_ccs = [\"8.7.1\"]\n"), Catch::Contains("not a compute capability"));
  CHECK_THAT(error_of("p3.toml", "cuda_libraries = \"pip\"\ncuda_below = \"thirteen\"\n"),
             Catch::Contains("p3.toml:8:") && Catch::Contains("not a CUDA release like 13.0"));
  // A limit without its reason.
  CHECK_THAT(error_of("p4.toml", "cuda_libraries = \"pip\"\ncuda_below = \"13.0\"\n"), Catch::Contains("cuda_below_why"));
}
