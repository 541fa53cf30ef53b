// JetPack releases as data (toolchains/jetpack.toml, docs/arm-hosts.md): each release's L4T,
// CUDA, GPUs and platform, the lookup by version and by /etc/nv_tegra_release, that each CUDA a
// row names has its toolchains file, and bad data.
#include <catch2/catch.hpp>

#include <algorithm>

#include "support/tempdir.hpp"
#include "toolchain/jetpack.hpp"
#include "toolchain/platform.hpp"
#include "toolchain/toolchain.hpp"

using namespace archbuild;
using arch::Cc;
using toolchain::JetPacks;

TEST_CASE("jetpack: the shipped releases and their CUDA", "[toolchain][jetpack][arm]") {
  const auto& js = JetPacks::shipped();
  auto cuda_of = [&](const char* v) {
    auto j = js.find(v);
    REQUIRE(j.ok());
    return j->cuda.str();
  };
  CHECK(cuda_of("5.1.2") == "11.4");
  CHECK(cuda_of("6.0") == "12.2");
  CHECK(cuda_of("6.1") == "12.6");
  CHECK(cuda_of("6.2") == "12.6");
  CHECK(cuda_of("7.0") == "13.0");
  CHECK(cuda_of("7.1") == "13.0");
  CHECK(cuda_of("7.2") == "13.2");
  CHECK(js.find("5.1")->version.str() == "5.1.3");  // the newest 5.1.x
  CHECK(js.find("6.2")->version.str() == "6.2");    // a release itself, whatever 6.2.x follow it
  // Orin (8.7) is on JetPack 5/6 (platform jetson) and on JetPack 7.2 (platform sbsa, CUDA 13.2);
  // JetPack 7.0/7.1 are Thor's (11.0) only.
  auto six = js.find("6.2").take();
  CHECK(six.platform == "jetson");
  CHECK(six.supports(Cc{8, 7}));
  auto seven = js.find("7.0").take();
  CHECK(seven.platform == "sbsa");
  CHECK(seven.supports(Cc{11, 0}));
  CHECK_FALSE(seven.supports(Cc{8, 7}));
  CHECK_FALSE(js.find("7.1")->supports(Cc{8, 7}));
  auto orin7 = js.find("7.2").take();
  CHECK(orin7.platform == "sbsa");
  CHECK(orin7.supports(Cc{8, 7}));
  CHECK(orin7.supports(Cc{11, 0}));
  CHECK(orin7.l4t.str() == "39.2.0");
  // The newest JetPack for Orin, of any platform and of jetson's alone: the two paths of the advice.
  REQUIRE(js.newest_for({Cc{8, 7}}));
  CHECK(js.newest_for({Cc{8, 7}})->platform == "sbsa");
  CHECK(js.newest_for({Cc{8, 7}})->cuda >= *Version::parse("13.2"));
  REQUIRE(js.newest_for("jetson", {Cc{8, 7}}));
  CHECK(js.newest_for("jetson", {Cc{8, 7}})->cuda.major() == 12);
  CHECK_FALSE(js.newest_for({Cc{5, 3}}));
  // Every row names a platform that can have its GPUs and NVIDIA's page of its facts.
  const auto& ps = toolchain::Platforms::shipped();
  for (const auto& j : js.list) {
    INFO(j.version.str());
    REQUIRE(ps.find(j.platform));
    for (auto cc : j.ccs) CHECK_FALSE(ps.refuses(*ps.find(j.platform), cc));
    CHECK((j.url.rfind("https://developer.nvidia.com/", 0) == 0 || j.url.rfind("https://docs.nvidia.com/", 0) == 0));
  }
  auto unknown = js.find("4.6");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().exit == Exit::bad_input);
  CHECK_THAT(unknown.error().message, Catch::Contains("--jetpack 4.6") && Catch::Contains("6.2 (CUDA 12.6)"));
}

TEST_CASE("jetpack: every row's CUDA has its toolchains file, or the row says why not", "[toolchain][jetpack]") {
  // A new JetPack names a CUDA release: its toolchains/cuda-X.Y.toml comes with it (what nvcc
  // compiles, its driver, its host compilers), or the row's no_toolchain says why none is needed.
  auto tcs = toolchain::load_shipped();
  REQUIRE(tcs.ok());
  for (const auto& j : JetPacks::shipped().list) {
    INFO("JetPack " << j.version.str() << " names CUDA " << j.cuda.str());
    const bool has_file = std::any_of(tcs->begin(), tcs->end(), [&](const auto& tc) { return tc.cuda == j.cuda.prefix(2); });
    CHECK((has_file || !j.no_toolchain.empty()));
    if (has_file) CHECK(j.no_toolchain.empty());  // a stale reason is wrong data too
  }
}

TEST_CASE("jetpack: the L4T release of /etc/nv_tegra_release names the JetPack", "[toolchain][jetpack][arm]") {
  auto v = toolchain::l4t_version("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8 01:49:37 UTC 2025");
  REQUIRE(v);
  CHECK(v->str() == "36.4.3");
  CHECK_FALSE(toolchain::l4t_version("not an L4T line"));
  const auto& js = JetPacks::shipped();
  REQUIRE(js.for_l4t(*v));
  CHECK(js.for_l4t(*v)->version.str() == "6.2");
  // A later 36.4 revision: the newest JetPack of 36.4 (same CUDA).
  REQUIRE(js.for_l4t(*Version::parse("36.4.4")));
  CHECK(js.for_l4t(*Version::parse("36.4.4"))->cuda.str() == "12.6");
  CHECK_FALSE(js.for_l4t(*Version::parse("32.7.1")));
  // What `detect` says on a Jetson, from the line as this_machine() keeps it.
  auto j = toolchain::jetpack_of_l4t(js, "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64");
  REQUIRE(j);
  CHECK(j->version.str() == "6.2");
  CHECK(j->cuda.str() == "12.6");
  CHECK_FALSE(toolchain::jetpack_of_l4t(js, "# R32 (release), REVISION: 7.1"));  // JetPack 4: not listed
  CHECK_FALSE(toolchain::jetpack_of_l4t(js, ""));
  // A JetPack 7.2 Orin (or Thor): L4T 39.2 is JetPack 7.2, CUDA 13.2, platform sbsa; 39.2.1 the same line.
  const std::string r39 = "# R39 (release), REVISION: 2.0, GCID: 1, BOARD: generic, EABI: aarch64, DATE: Mon Jun 1 2026";
  auto j7 = toolchain::jetpack_of_l4t(js, r39);
  REQUIRE(j7);
  CHECK(j7->version.str() == "7.2");
  CHECK(j7->cuda.str() == "13.2");
  CHECK(toolchain::platform_of_l4t(js, r39) == "sbsa");
  auto j721 = toolchain::jetpack_of_l4t(js, "# R39 (release), REVISION: 2.1, GCID: 2, BOARD: generic, EABI: aarch64");
  REQUIRE(j721);
  CHECK(j721->version.str() == "7.2");
  // The platform of an L4T line the data has no row for: its L4T major's (R36.5: jetson; an R38.x: sbsa).
  CHECK_FALSE(toolchain::jetpack_of_l4t(js, "# R36 (release), REVISION: 5.0"));
  CHECK(toolchain::platform_of_l4t(js, "# R36 (release), REVISION: 5.0") == "jetson");
  CHECK(toolchain::platform_of_l4t(js, "# R36 (release), REVISION: 4.3") == "jetson");
  CHECK(toolchain::platform_of_l4t(js, "# R38 (release), REVISION: 9.0") == "sbsa");
  CHECK(toolchain::platform_of_l4t(js, "# R32 (release), REVISION: 7.1").empty());
  CHECK(toolchain::platform_of_l4t(js, "").empty());
}

TEST_CASE("jetpack: bad data is one line with file:line:column", "[toolchain][jetpack]") {
  test::TempDir dir;
  auto load = [&](const std::string& row) { return JetPacks::load(dir.write("jetpack.toml", "[[jetpack]]\n" + row)); };
  const std::string good = "version = \"6.2\"\nl4t = \"36.4.3\"\ncuda = \"12.6\"\nccs = [\"8.7\"]\nplatform = \"jetson\"\nurl = \"https://x\"\n";
  CHECK(load(good).ok());
  auto plat = load("version = \"6.2\"\nl4t = \"36.4.3\"\ncuda = \"12.6\"\nccs = [\"8.7\"]\nplatform = \"tegra\"\nurl = \"https://x\"\n");
  REQUIRE_FALSE(plat.ok());
  CHECK_THAT(plat.error().message, Catch::Contains("jetpack.toml:6") && Catch::Contains("\"jetson\", \"sbsa\""));
  auto cc = load("version = \"6.2\"\nl4t = \"36.4.3\"\ncuda = \"12.6\"\nccs = [\"87\"]\nplatform = \"jetson\"\nurl = \"https://x\"\n");
  REQUIRE_FALSE(cc.ok());
  CHECK_THAT(cc.error().message, Catch::Contains("jetpack.toml:5") && Catch::Contains("'87'"));
  auto l4t = load("version = \"6.2\"\nl4t = \"36\"\ncuda = \"12.6\"\nccs = [\"8.7\"]\nplatform = \"jetson\"\nurl = \"https://x\"\n");
  REQUIRE_FALSE(l4t.ok());
  CHECK_THAT(l4t.error().message, Catch::Contains("jetpack.toml:3") && Catch::Contains("36.4.3"));
  auto typo = load(good + "notes = \"x\"\n");
  REQUIRE_FALSE(typo.ok());
  CHECK_THAT(typo.error().message, Catch::Contains("notes"));
}

TEST_CASE("jetpack: the CUDA a Jetson's build uses: JetPack's elsewhere, the installed toolkit here, else JetPack's",
          "[toolchain][jetpack]") {
  const auto& js = JetPacks::shipped();
  auto six = js.find("6.2");
  REQUIRE(six.ok());
  // Advice for another machine: JetPack 6.2's CUDA 12.6, whatever this host has installed.
  auto there = toolchain::jetson_build_cuda(*six, false, 3);
  REQUIRE(there);
  CHECK(there->cuda.str() == "12.6");
  CHECK_THAT(there->why, Catch::Contains("JetPack 6.2 (L4T 36.4.3) installs CUDA 12.6"));
  // This Jetson with a toolkit installed (JetPack 6 lets CUDA be upgraded): that toolkit decides.
  CHECK_FALSE(toolchain::jetson_build_cuda(*six, true, 1));
  // This Jetson with none: JetPack's CUDA, so the advice names that toolkit rather than the newest recipe.
  auto here = toolchain::jetson_build_cuda(*six, true, 0);
  REQUIRE(here);
  CHECK(here->cuda.str() == "12.6");
  CHECK_THAT(here->why, Catch::StartsWith("no CUDA toolkit is installed on this Jetson; JetPack 6.2"));
}
