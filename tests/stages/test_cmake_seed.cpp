// stages/cmake_seed: list values for a tree that reads the environment as one CMake list.
#include <catch2/catch.hpp>

#include <filesystem>

#include "stages/cmake_seed.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
namespace fs = std::filesystem;
namespace t = archbuild::test;

TEST_CASE("cmake seed: the forwarded list values, quoted, after the toolchain file already named", "[stages]") {
  CHECK(stages::forwarded_to_cmake("CMAKE_CUDA_COMPILER_LAUNCHER"));
  CHECK(stages::forwarded_to_cmake("USE_NCCL"));
  CHECK(stages::forwarded_to_cmake("BUILD_TEST"));
  CHECK_FALSE(stages::forwarded_to_cmake("TORCH_CUDA_ARCH_LIST"));  // read through $ENV{}, whole

  // Nothing to seed: no forwarded value holds a ';'.
  CHECK_FALSE(stages::cmake_seed_text({{"USE_NCCL", "0"}, {"TORCH_CUDA_ARCH_LIST", "8.0;9.0"},
                                       {"CMAKE_CXX_COMPILER_LAUNCHER", "/usr/bin/ccache"}}));

  auto text = stages::cmake_seed_text({{"CMAKE_CUDA_COMPILER_LAUNCHER", "/opt/a b/archbuild;cuda-launch;--tree;/t;--"},
                                       {"USE_LIST", "a\\b;\"q\";${HOME}"},
                                       {"USE_NCCL", "0"},
                                       {"TORCH_CUDA_ARCH_LIST", "8.0;9.0"},
                                       {"CMAKE_TOOLCHAIN_FILE", "/home/me/cross.cmake"}});
  REQUIRE(text);
  CHECK(text->find("include(\"/home/me/cross.cmake\")\n") != std::string::npos);
  CHECK(text->find("include(") < text->find("set("));  // the user's toolchain first, the seed wins
  CHECK(text->find("set(CMAKE_CUDA_COMPILER_LAUNCHER \"/opt/a b/archbuild;cuda-launch;--tree;/t;--\" CACHE STRING "
                   "\"archbuild\" FORCE)\n") != std::string::npos);
  CHECK(text->find("set(USE_LIST \"a\\\\b;\\\"q\\\";\\${HOME}\" CACHE STRING") != std::string::npos);
  CHECK(text->find("USE_NCCL") == std::string::npos);
  CHECK(text->find("TORCH_CUDA_ARCH_LIST") == std::string::npos);
  CHECK(text->find("set(CMAKE_TOOLCHAIN_FILE") == std::string::npos);
}

TEST_CASE("cmake seed: a tree that forwards its environment as one CMake list keeps the whole CUDA launcher",
          "[stages][nvcc]") {
  const std::string nvcc = "/usr/local/cuda/bin/nvcc";
  for (const std::string tool : {"cmake", "ninja"})
    if (t::which(tool).empty()) {
      WARN("##archbuild-skip## no " << tool << " on PATH");
      return;
    }
  if (auto u = t::unusable(nvcc); !u.empty()) {
    WARN("##archbuild-skip## " << u);
    return;
  }
  t::TempDir dir;
  const fs::path tree = fs::path(ARCHBUILD_SOURCE_DIR) / "tests/fixtures/env-forwarding";
  // A launcher list as archbuild's: `env MARK=1 <compiler> …` compiles, and MARK shows it was whole.
  const std::map<std::string, std::string> launchers = {
      {"CMAKE_CUDA_COMPILER_LAUNCHER", "/usr/bin/env;ARCHBUILD_CUDA_MARK=1"},
      {"CMAKE_CXX_COMPILER_LAUNCHER", "/usr/bin/env;ARCHBUILD_CXX_MARK=1"}};
  auto configure = [&](const std::string& build, bool seeded) {
    t::RunOptions o;
    o.env = launchers;
    o.env["CUDACXX"] = nvcc;
    o.unset_env = {"CMAKE_TOOLCHAIN_FILE"};
    if (seeded) {
      auto text = stages::cmake_seed_text(launchers);
      REQUIRE(text);
      dir.write("seed.cmake", *text);
      o.env["CMAKE_TOOLCHAIN_FILE"] = (dir / "seed.cmake").string();
    }
    auto r = t::run(t::which("cmake"), {"-S", tree.string(), "-B", (dir / build).string(), "-G", "Ninja"}, o);
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    return t::read_file(dir / build / "CMakeFiles/rules.ninja");
  };
  // Without the seed the tree's forwarding cuts both lists to /usr/bin/env: the mark is gone (an
  // `archbuild;cuda-launch;…` launcher would run `archbuild nvcc …`).
  auto cut = configure("plain", false);
  CHECK(cut.find("ARCHBUILD_CUDA_MARK=1") == std::string::npos);
  CHECK(cut.find("ARCHBUILD_CXX_MARK=1") == std::string::npos);
  auto whole = configure("seeded", true);
  CHECK(whole.find("/usr/bin/env ARCHBUILD_CUDA_MARK=1 " + nvcc) != std::string::npos);
  CHECK(whole.find("/usr/bin/env ARCHBUILD_CXX_MARK=1 ") != std::string::npos);
}
