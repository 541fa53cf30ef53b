// `archbuild cuda-launch`, the CUDA compiler launcher of the wheel pipeline: the same kernel
// compiled in two build trees (two cache directories, two hosts) gives the same object through
// it — and does not without it, because nvcc names anonymous-namespace kernels after the
// absolute source path. The command it runs keeps its own exit status and output.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "run/admission.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;

namespace {

const std::string kNvcc = "/usr/local/cuda/bin/nvcc";

// An anonymous-namespace kernel and __FILE__: both carry the source path unless mapped.
const char* kKernel = R"(#include <cstdio>
namespace {
__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }
}
const char* where() { return __FILE__; }
void launch(float* x, float a) { scale<<<1, 32>>>(x, a); }
)";

// <root>/csrc/kernels.cu and an empty <root>/build/obj.
void make_tree(const fs::path& root) {
  fs::create_directories(root / "csrc");
  fs::create_directories(root / "build" / "obj");
  std::ofstream(root / "csrc" / "kernels.cu") << kKernel;
}

// Compiles the tree's kernel the way CMake's CUDA rule does (from the build directory, the
// source by absolute path), through the launcher or not.
std::string compile(const fs::path& root, bool launcher) {
  std::vector<std::string> nvcc = {kNvcc, "-O2", "-arch=sm_90", "-x", "cu", "-c",
                                   (root / "csrc" / "kernels.cu").string(), "-o", "obj/kernels.cu.o"};
  t::RunOptions o;
  o.cwd = root / "build";
  t::Ran r;
  if (launcher) {
    std::vector<std::string> args = {"cuda-launch", "--tree", root.string(), "--"};
    args.insert(args.end(), nvcc.begin(), nvcc.end());
    r = t::archbuild(args, o);
  } else {
    r = t::run(nvcc.front(), {nvcc.begin() + 1, nvcc.end()}, o);
  }
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  return t::read_file(root / "build" / "obj" / "kernels.cu.o");
}

}  // namespace

TEST_CASE("cuda-launch: one kernel in two build trees gives one object", "[cli][cuda_launch][nvcc]") {
  if (auto u = t::unusable(kNvcc); !u.empty()) {
    WARN("##archbuild-skip## " << u);
    return;
  }
  t::TempDir dir;
  fs::path host1 = dir / "host1" / "cache" / "src" / "key";
  fs::path host2 = dir / "second-host" / "c" / "src" / "key";
  make_tree(host1);
  make_tree(host2);

  std::string a = compile(host1, true);
  std::string b = compile(host2, true);
  CHECK(a == b);
  CHECK(a.find(dir.path().string()) == std::string::npos);  // no build path at all
  CHECK(a.find("/archbuild/src/csrc/kernels.cu") != std::string::npos);  // __FILE__, mapped
  CHECK(a.find("tmpxft_") == std::string::npos);  // no /tmp/tmpxft_<pid> intermediate names

  // What the launcher is for: nvcc alone puts the path into the object.
  std::string plain1 = compile(host1, false);
  std::string plain2 = compile(host2, false);
  CHECK(plain1 != plain2);
}

TEST_CASE("cuda-launch: the command's exit status and output are its own", "[cli][cuda_launch]") {
  t::TempDir dir;
  auto r = t::archbuild({"cuda-launch", "--tree", dir.path().string(), "--", "/bin/false"});
  CHECK(r.status == 1);
  // /bin/echo in place of nvcc shows exactly what the compile receives.
  r = t::archbuild({"cuda-launch", "--tree", "/w/key", "--", "/bin/echo", "-c", "/w/key/a.cu", "-o", "a.o"});
  CHECK(r.status == 0);
  CHECK(r.out == "-c /w/key/a.cu -o a.o -Xcudafe=--orig_src_path_name=/archbuild/src/a.cu "
                 "-Xcompiler=-ffile-prefix-map=/w/key=/archbuild/src --objdir-as-tempdir\n");
  r = t::archbuild({"cuda-launch", "--tree", "/w/key", "--", "/bin/echo", "-dlink", "a.o", "-o", "dlink.o"});
  CHECK(r.out == "-dlink a.o -o dlink.o\n");  // not a compile of a source: unchanged
}

TEST_CASE("cuda-launch: a missing program is exit 3, a missing command exit 2", "[cli][cuda_launch]") {
  auto r = t::archbuild({"cuda-launch", "--tree", "/w", "--", "/nonexistent/nvcc", "-c", "/w/a.cu"});
  CHECK(r.status == 3);
  CHECK(r.err.find("cannot run /nonexistent/nvcc") != std::string::npos);
  r = t::archbuild({"cuda-launch", "--tree", "/w"});
  CHECK(r.status == 2);
  CHECK_FALSE(t::archbuild({"--help"}).out.find("cuda-launch") != std::string::npos);  // internal
}

TEST_CASE("cuda-launch --admission: admitted by memory, the status its own, the peak recorded", "[cli][cuda_launch]") {
  t::TempDir dir;
  const std::string tree = dir.path().string();
  const std::string peaks = (dir / "peaks.tsv").string();
  std::vector<std::string> admitted = {"cuda-launch", "--tree", tree, "--admission", (dir / "adm").string(),
                                       "--memory-budget-mb", "100", "--expect-mb", "10", "--peaks", peaks, "--"};
  auto with = [&](std::vector<std::string> cmd) {
    auto args = admitted;
    args.insert(args.end(), cmd.begin(), cmd.end());
    return t::archbuild(args);
  };
  auto r = with({"/bin/echo", "-c", tree + "/a.cpp"});
  CHECK(r.status == 0);
  CHECK(r.out.find("-c " + tree + "/a.cpp") == 0);
  auto fail = dir.write("fail.sh", "exit 3\n");
  r = with({"/bin/sh", fail.string(), "-c", tree + "/b.cpp"});
  CHECK(r.status == 3);
  // One line per compile: source relative to the tree, peak KB, waited ms, exit status, output,
  // expected MB, where that came from, language, wall time, nvcc threads.
  auto records = archbuild::run::read_records(peaks);
  REQUIRE(records.size() == 2);
  CHECK(records[0].source == "a.cpp");
  CHECK(records[0].exit_code == 0);
  CHECK(records[0].expect_mb == 10);
  CHECK(records[0].basis == "--expect-mb");
  CHECK(records[0].lang == "CUDA");
  CHECK(records[0].threads == 1);
  CHECK(records[1].source == "b.cpp");
  CHECK(records[1].exit_code == 3);
  CHECK(t::read_file(peaks).find("a.cpp\t") == 0);
  r = with({"/nonexistent/cc", "-c", tree + "/c.cpp"});
  CHECK(r.status == 3);
}
