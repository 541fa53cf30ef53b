// JetPack releases as data (toolchains/jetpack.toml, docs/arm-hosts.md): each release's L4T,
// CUDA, GPUs and platform, the lookup by version and by /etc/nv_tegra_release, and bad data.
#include <catch2/catch.hpp>

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
  CHECK(js.find("5.1")->version.str() == "5.1.3");  // the newest 5.1.x
  // Orin (8.7) is JetPack 5/6's, platform jetson; JetPack 7 is Thor's (11.0), an sbsa stack.
  auto six = js.find("6.2").take();
  CHECK(six.platform == "jetson");
  CHECK(six.supports(Cc{8, 7}));
  auto seven = js.find("7.0").take();
  CHECK(seven.platform == "sbsa");
  CHECK(seven.supports(Cc{11, 0}));
  CHECK_FALSE(seven.supports(Cc{8, 7}));
  // Every row names a platform, a CUDA with toolchain facts where archbuild builds it, and a source.
  const auto& ps = toolchain::Platforms::shipped();
  for (const auto& j : js.list) {
    INFO(j.version.str());
    REQUIRE(ps.find(j.platform));
    for (auto cc : j.ccs) CHECK_FALSE(ps.refuses(*ps.find(j.platform), cc));
    CHECK(j.url.rfind("https://developer.nvidia.com/", 0) == 0);
  }
  auto unknown = js.find("4.6");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().exit == Exit::bad_input);
  CHECK_THAT(unknown.error().message, Catch::Contains("--jetpack 4.6") && Catch::Contains("6.2 (CUDA 12.6)"));
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
