// stages/build_path: what the CUDA launcher adds to a compile so the object does not depend on
// where the build tree lives (argument rewriting only; tests/cli/test_cuda_launch_cli.cpp
// compiles for real).
#include <catch2/catch.hpp>

#include "stages/build_path.hpp"

using namespace archbuild;
using Args = std::vector<std::string>;

TEST_CASE("a CMake CUDA compile gets the alias source name, the prefix map and --objdir-as-tempdir", "[build_path]") {
  Args cmake = {"/usr/bin/ccache", "/usr/local/cuda/bin/nvcc", "-DX=1", "-I/c/t/key/csrc", "-O3", "-x", "cu",
                "-c", "/c/t/key/csrc/kernels.cu", "-o", "CMakeFiles/k.dir/csrc/kernels.cu.o"};
  auto out = stages::cuda_compile_args(cmake, "/c/t/key/build", "/c/t/key");
  Args want = cmake;
  want.push_back("-Xcudafe=--orig_src_path_name=/archbuild/src/csrc/kernels.cu");
  want.push_back("-Xcompiler=-ffile-prefix-map=/c/t/key=/archbuild/src");
  want.push_back("--objdir-as-tempdir");
  CHECK(out == want);
}

TEST_CASE("relative sources, -dc, and a last *.cu without -c are found", "[build_path]") {
  auto out = stages::cuda_compile_args({"nvcc", "-dc", "../csrc/a.cu", "-o", "a.o"}, "/t/build", "/t");
  CHECK(out.at(5) == "-Xcudafe=--orig_src_path_name=/archbuild/src/csrc/a.cu");
  out = stages::cuda_compile_args({"nvcc", "-E", "/t/x/b.cu"}, "/", "/t/");
  REQUIRE(out.size() == 5);  // no -o: no --objdir-as-tempdir
  CHECK(out.at(3) == "-Xcudafe=--orig_src_path_name=/archbuild/src/x/b.cu");
  CHECK(out.at(4) == "-Xcompiler=-ffile-prefix-map=/t/=/archbuild/src");
}

// Meson's compiler check compiles and links in one nvcc call (no -c): the source the launcher
// records is the .cu argument, not the rewrite's own option that ends in .cu.
TEST_CASE("a compile and link in one: the source is the .cu argument, not an option ending in .cu", "[build_path]") {
  Args check = {"nvcc", "-w", "-cudart", "static", "/t/build/meson-private/sanitycheckcuda.cu", "-o", "x.exe"};
  auto rewritten = stages::cuda_compile_args(check, "/t/build/meson-private", "/t");
  CHECK(rewritten.at(7) == "-Xcudafe=--orig_src_path_name=/archbuild/src/build/meson-private/sanitycheckcuda.cu");
  CHECK(stages::compile_source(rewritten, "/t/build/meson-private", "/t") == "build/meson-private/sanitycheckcuda.cu");
}

TEST_CASE("what the launcher leaves alone", "[build_path]") {
  Args version = {"nvcc", "--version"};
  CHECK(stages::cuda_compile_args(version, "/t", "/t") == version);
  Args outside = {"nvcc", "-c", "/elsewhere/k.cu", "-o", "k.o"};
  CHECK(stages::cuda_compile_args(outside, "/t", "/t") == outside);
  Args dotdot = {"nvcc", "-c", "../k.cu", "-o", "k.o"};
  CHECK(stages::cuda_compile_args(dotdot, "/t", "/t") == dotdot);
  Args comma = {"nvcc", "-c", "/t/a,b.cu", "-o", "k.o"};  // nvcc would split the option at ','
  CHECK(stages::cuda_compile_args(comma, "/t", "/t") == comma);
  for (const char* given : {"-objtemp", "--objdir-as-tempdir"}) {
    Args has_objtemp = {"nvcc", "-c", "/t/k.cu", "-o", "k.o", given};
    CHECK(stages::cuda_compile_args(has_objtemp, "/t", "/t").back() != "--objdir-as-tempdir");
  }
}

TEST_CASE("the launcher list for CMake, and paths a list cannot carry", "[build_path]") {
  CHECK(stages::cuda_launcher("/bin/archbuild", "/c/src/k", "/usr/bin/ccache") ==
        "/bin/archbuild;cuda-launch;--tree;/c/src/k;--;/usr/bin/ccache");
  CHECK(stages::cuda_launcher("/bin/archbuild", "/c/src/k", "") == "/bin/archbuild;cuda-launch;--tree;/c/src/k;--");
  CHECK_FALSE(stages::cuda_launcher("/bin/archbuild", "/c/a;b/k", ""));
  CHECK_FALSE(stages::cuda_launcher("/bin/archbuild", "/c/a,b/k", ""));
  CHECK_FALSE(stages::cuda_launcher("", "/c/src/k", ""));
  CHECK(stages::prefix_map_flag("/c/src/k") == "-ffile-prefix-map=/c/src/k=/archbuild/src");
}
