// `archbuild validate`: the example's wheel (built here with nvcc for sm_90) is valid, is not
// valid for another sm, and tampering with it (RECORD, a `../` member) is caught; unreadable
// input, a missing python or nvcc give their exit statuses. [gpu] tests run the GPU parts.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "binary/builders.hpp"
#include "cli/example_wheel.hpp"
#include "mirror/make_wheel.hpp"

using namespace archbuild;
using test::check_of;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The wheel rewritten with `edit` applied to its members.
fs::path rewrite(const fs::path& wheel, const test::TempDir& dir,
                 const std::function<void(std::vector<std::pair<std::string, std::string>>&)>& edit) {
  auto members = test::unzip(wheel);
  REQUIRE(members.size() > 3);
  edit(members);
  return dir.write(wheel.filename().string(), test::zip(members));
}

#define EXAMPLE_WHEEL_OR_SKIP(w)                                    \
  auto w = test::example_wheel("9.0");                              \
  if (!w.skip.empty()) {                                            \
    WARN("##archbuild-skip## " << w.skip);                                    \
    return;                                                         \
  }                                                                 \
  INFO(w.log);                                                      \
  REQUIRE(!w.path.empty())

// A small well-formed wheel: `libk` (an ELF file, by default a synthetic one with an sm_90
// cubin: no nvcc needed) as tiny/libk.so, under the platform tag `platform`, with `requirements`
// as Requires-Dist lines.
fs::path tiny_wheel(const test::TempDir& dir, const std::string& platform = "linux_x86_64", std::string libk = "",
                    const std::vector<std::string>& requirements = {}) {
  if (libk.empty()) libk = test::elf_with_fatbin(test::container({test::entry({2, 90, 0x11, test::cubin(90)})}));
  const std::string di = "tiny-1.0.dist-info";
  std::string metadata = "Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n";
  for (const auto& r : requirements) metadata += "Requires-Dist: " + r + "\n";
  std::vector<std::pair<std::string, std::string>> m{
      {"tiny/__init__.py", "\n"},
      {"tiny/libk.so", libk},
      {di + "/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-" + platform + "\n"},
      {di + "/METADATA", metadata}};
  std::string rec;
  for (const auto& [name, data] : m) rec += name + "," + test::record_line_hash(data) + "," + std::to_string(data.size()) + "\n";
  m.push_back({di + "/RECORD", rec + di + "/RECORD,,\n"});
  return dir.write("tiny-1.0-cp311-cp311-" + platform + ".whl", test::zip(m));
}

// An aarch64 shared library the way a real one keeps its device code: host code from the
// aarch64 cross gcc (linked against a stub libcudart.so.13, so it needs it as a real one does,
// with the RUNPATH the package stage gives it),
// the fatbin from nvcc -fatbin (device code does not depend on the host), put into .nv_fatbin
// with the cross objcopy. Empty `skip`: built.
struct Aarch64Library {
  std::string bytes;
  std::string skip;
  std::string log;
};
Aarch64Library aarch64_library(const test::TempDir& dir, const std::string& sm) {
  Aarch64Library lib;
  for (const char* tool : {"aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objcopy"})
    if (test::which(tool).empty()) {
      lib.skip = std::string(tool) + " is not on PATH (apt install gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu)";
      return lib;
    }
  if (!fs::exists(test::kNvcc)) {
    lib.skip = test::kNvcc.string() + " is absent";
    return lib;
  }
  auto step = [&](const std::string& tool, const std::vector<std::string>& args) {
    test::RunOptions o;
    o.cwd = dir.path();
    auto r = test::run(tool.find('/') == std::string::npos ? test::which(tool) : tool, args, o);
    lib.log += tool + ": " + r.out + r.err + "\n";
    return r.status == 0;
  };
  dir.write("stub.c", "int cudaGetDeviceCount(int* n) { *n = 0; return 0; }\n");
  dir.write("host.c", "int cudaGetDeviceCount(int*);\nint tiny_devices(void) { int n = 0; cudaGetDeviceCount(&n); return n; }\n");
  const std::string kernel = (fs::path(ARCHBUILD_TEST_DATA) / "binaries" / "kernel.cu").string();
  bool ok = step(test::kNvcc.string(), {"-fatbin", "-gencode", "arch=compute_" + sm + ",code=sm_" + sm, "-o", "k.fatbin", kernel}) &&
            step("aarch64-linux-gnu-gcc", {"-shared", "-fPIC", "-Wl,-soname,libcudart.so.13", "-o", "libcudart.so.13", "stub.c"}) &&
            step("aarch64-linux-gnu-gcc", {"-shared", "-fPIC", "-o", "libk.so", "host.c", "-L.", "-l:libcudart.so.13",
                                            // where the package stage points it: the nvidia-* package's folder
                                            "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../nvidia/cu13/lib"}) &&
            step("aarch64-linux-gnu-objcopy", {"--add-section", ".nv_fatbin=k.fatbin", "--set-section-flags",
                                                ".nv_fatbin=alloc,readonly,data", "libk.so"});
  if (ok) lib.bytes = test::read_file(dir / "libk.so");
  return lib;
}

#define AARCH64_LIBRARY_OR_SKIP(lib, dir, sm)              \
  auto lib = aarch64_library(dir, sm);                     \
  if (!lib.skip.empty()) {                                 \
    WARN("##archbuild-skip## " << lib.skip);               \
    return;                                                \
  }                                                        \
  INFO(lib.log);                                           \
  REQUIRE(!lib.bytes.empty())

}  // namespace

TEST_CASE("validate: the example's wheel is valid for its sm", "[validate][cli][nvcc]") {
  EXAMPLE_WHEEL_OR_SKIP(w);
  test::TempDir dir;
  auto o = test::no_gpu(dir);
  auto r = test::archbuild({"validate", w.path.string(), "--sm", "90", "--python", test::kSystemPython.string(), "--json"}, o);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  auto doc = json::parse(r.out);
  CHECK(doc["valid"] == true);
  for (const char* name : {"wheel-name", "metadata", "record", "members", "local-label", "coverage", "import",
                           "smoke-compile", "smoke-sass"})
    CHECK(check_of(doc, name)["status"] == "pass");
  CHECK_THAT(check_of(doc, "local-label")["summary"].get<std::string>(), Catch::Contains("sm_90"));
  CHECK_THAT(check_of(doc, "import")["summary"].get<std::string>(),
             Catch::Contains("imported minitorch 0.1.0+cu") && Catch::Contains("get_arch_list() = [sm_90]"));
  CHECK(check_of(doc, "smoke-sass")["evidence"]["sass"] == json::array({"sm_90"}));
  // No GPU here: the GPU parts are skipped with the reason, never passed.
  CHECK(check_of(doc, "import-gpu")["status"] == "skip");
  CHECK(check_of(doc, "smoke-run")["status"] == "skip");
  CHECK_THAT(check_of(doc, "smoke-run")["summary"].get<std::string>(), Catch::StartsWith("run skipped: no GPU"));
}

TEST_CASE("validate: the same wheel against another sm has no kernel image", "[validate][cli][nvcc]") {
  EXAMPLE_WHEEL_OR_SKIP(w);
  auto r = test::archbuild({"validate", w.path.string(), "--sm", "8.0", "--no-import", "--no-smoke"});
  INFO(r.out << r.err);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::Contains("not valid: coverage: no kernel image for 8.0 in minitorch/libminitorch_kernels.so "
                                    "(carries sm_90)"));
  CHECK_THAT(r.out, Catch::Contains("fail  coverage"));
  CHECK_THAT(r.out, Catch::Contains("skip  import"));
  CHECK_THAT(r.out, Catch::Contains("NOT VALID"));
}

TEST_CASE("validate: a tampered RECORD hash", "[validate][cli][nvcc]") {
  EXAMPLE_WHEEL_OR_SKIP(w);
  test::TempDir dir;
  auto p = rewrite(w.path, dir, [](auto& members) {
    for (auto& [name, data] : members)
      if (name.ends_with(".dist-info/RECORD")) {
        auto at = data.find("minitorch/cuda.py,sha256=");
        REQUIRE(at != std::string::npos);
        char& ch = data[at + std::string("minitorch/cuda.py,sha256=").size()];
        ch = ch == 'x' ? 'y' : 'x';
      }
  });
  auto r = test::archbuild({"validate", p.string(), "--sm", "90", "--no-import", "--no-smoke", "--json"});
  INFO(r.out << r.err);
  CHECK(r.status == 1);
  auto doc = json::parse(r.out);
  CHECK(check_of(doc, "record")["status"] == "fail");
  CHECK_THAT(check_of(doc, "record")["summary"].get<std::string>(), Catch::Contains("minitorch/cuda.py: hash mismatch"));
  CHECK(check_of(doc, "coverage")["status"] == "pass");
  CHECK_THAT(r.err, Catch::Contains("not valid: record:"));
}

TEST_CASE("validate: a wheel with a ../ member", "[validate][cli][nvcc]") {
  EXAMPLE_WHEEL_OR_SKIP(w);
  test::TempDir dir;
  auto p = rewrite(w.path, dir, [](auto& members) { members.insert(members.begin(), {"../escape.py", "print(1)\n"}); });
  auto r = test::archbuild({"validate", p.string(), "--sm", "90", "--no-import", "--no-smoke"});
  INFO(r.out << r.err);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::Contains("members: '../escape.py' escapes the wheel root"));
  CHECK_THAT(r.err, Catch::Contains("record:"));  // and RECORD does not list it
  CHECK_FALSE(fs::exists(dir.path().parent_path() / "escape.py"));
}

TEST_CASE("validate: unreadable input is exit 2", "[validate][cli]") {
  test::TempDir dir;
  auto text = dir.write("notes-1.0-py3-none-any.whl", "this is not a zip archive\n");
  auto r = test::archbuild({"validate", text.string(), "--sm", "90", "--no-import", "--no-smoke"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("not a readable zip"));
  CHECK(r.out.empty());

  auto missing = test::archbuild({"validate", (dir / "absent.whl").string(), "--sm", "90"});
  CHECK(missing.status == 2);
  CHECK_THAT(missing.err, Catch::Contains("absent.whl\": no such file"));

  auto bad_sm = test::archbuild({"validate", text.string(), "--sm", "banana"});
  CHECK(bad_sm.status == 2);
  CHECK_THAT(bad_sm.err, Catch::Contains("--sm"));

  auto json_err = test::archbuild({"validate", text.string(), "--sm", "90", "--no-import", "--no-smoke", "--json"});
  CHECK(json_err.status == 2);
  CHECK(json::parse(json_err.out)["exit"] == 2);
}

TEST_CASE("validate: a python without venv/ensurepip is a missing tool (exit 3)", "[validate][cli]") {
  test::TempDir dir;
  auto wheel = tiny_wheel(dir);
  // An interpreter whose ensurepip is missing, as on Debian without python3-venv.
  auto py = dir.write("bin/python3.11",
                      "#!/bin/sh\necho '{\"version\": \"3.11.2\", \"executable\": \"/x\", \"venv\": true, "
                      "\"ensurepip\": false}'\n");
  fs::permissions(py, fs::perms::owner_all);
  auto r = test::archbuild({"validate", wheel.string(), "--sm", "90", "--python", py.string(), "--no-smoke"},
                           test::no_gpu(dir));
  INFO(r.out << r.err);
  CHECK(r.status == 3);
  CHECK_THAT(r.err, Catch::Contains("ensurepip") && Catch::Contains("python3-venv"));
  CHECK_THAT(r.out, Catch::Contains("pass  coverage"));

  auto none = test::archbuild({"validate", wheel.string(), "--sm", "90", "--python", "/nonexistent/python3",
                               "--no-smoke"});
  CHECK(none.status == 3);
  CHECK_THAT(none.err, Catch::Contains("/nonexistent/python3: not found"));

  // A failed check outranks a missing tool.
  auto wrong_sm = test::archbuild({"validate", wheel.string(), "--sm", "80", "--python", "/nonexistent/python3",
                                   "--no-smoke"});
  CHECK(wrong_sm.status == 1);
}

TEST_CASE("validate: no nvcc for the smoke kernel is a missing tool (exit 3)", "[validate][cli]") {
  test::TempDir dir;
  auto wheel = tiny_wheel(dir);
  fs::create_directories(dir / "no-cuda");
  auto o = test::no_gpu(dir);
  o.env["PATH"] = (dir / "nogpu-bin").string() + ":/usr/bin:/bin";  // no /usr/local/cuda/bin
  o.env["ARCHBUILD_CUDA_ROOTS"] = (dir / "no-cuda").string();
  o.unset_env = {"CUDA_HOME", "CUDA_PATH"};
  auto r = test::archbuild({"validate", wheel.string(), "--sm", "90", "--no-import", "--json"}, o);
  INFO(r.out << r.err);
  CHECK(r.status == 3);
  auto doc = json::parse(r.out);
  CHECK(check_of(doc, "smoke")["missing_tool"] == true);
  CHECK_THAT(check_of(doc, "smoke")["summary"].get<std::string>(), Catch::Contains("no CUDA toolkit found"));
}

TEST_CASE("validate: the GPU parts on this host's GPU", "[validate][cli][gpu][nvcc]") {
  auto d = test::archbuild({"detect", "--json"});
  if (d.status != 0) {
    WARN("##archbuild-skip## no GPU on this host (" << d.err.substr(0, 200) << ")");
    return;
  }
  auto gpus = json::parse(d.out)["gpus"];
  REQUIRE(!gpus.empty());
  std::string cc = gpus[0]["cc"];
  auto w = test::example_wheel(cc);
  if (!w.skip.empty()) {
    WARN("##archbuild-skip## " << w.skip);
    return;
  }
  INFO(w.log);
  REQUIRE(!w.path.empty());
  auto r = test::archbuild({"validate", w.path.string(), "--sm", cc, "--python", test::kSystemPython.string(), "--json"},
                           {{}, {}, std::nullopt, "", std::chrono::seconds(900)});
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  auto doc = json::parse(r.out);
  CHECK(check_of(doc, "import-gpu")["status"] == "pass");
  CHECK(check_of(doc, "smoke-run")["status"] == "pass");
}

// A package whose __init__ imports its declared dependency. The import test installs
// the requirement from a local wheelhouse through pip's own configuration (PIP_FIND_LINKS,
// PIP_NO_INDEX) and passes; without the wheelhouse it is skipped and validation is incomplete.
TEST_CASE("validate: the import test installs the requirements from a wheelhouse", "[validate][cli][import]") {
  test::TempDir dir;
  if (!fs::exists(test::kSystemPython)) {
    WARN("##archbuild-skip## no " << test::kSystemPython.string());
    return;
  }
  auto house = dir / "wheelhouse";
  test::make_wheel(house, "helper_dep", "2.0", "helper_dep", "from the wheelhouse");
  const std::string di = "needy-1.0.dist-info";
  std::vector<std::pair<std::string, std::string>> m{
      {"needy/__init__.py", "import helper_dep\nVALUE = helper_dep.VALUE\n"},
      {"needy/libk.so", test::elf_with_fatbin(test::container({test::entry({2, 90, 0x11, test::cubin(90)})}))},
      {di + "/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"},
      {di + "/METADATA", "Metadata-Version: 2.1\nName: needy\nVersion: 1.0\nRequires-Dist: helper-dep>=2\n"},
      {di + "/top_level.txt", "needy\n"}};
  std::string rec;
  for (const auto& [name, data] : m) rec += name + "," + test::record_line_hash(data) + "," + std::to_string(data.size()) + "\n";
  m.push_back({di + "/RECORD", rec + di + "/RECORD,,\n"});
  auto wheel = dir.write("out/needy-1.0-py3-none-linux_x86_64.whl", test::zip(m));

  auto opts = test::no_gpu(dir);
  opts.env["PIP_NO_INDEX"] = "1";
  opts.env["PIP_FIND_LINKS"] = house.string();
  auto r = test::archbuild({"validate", wheel.string(), "--sm", "90", "--python", test::kSystemPython.string(),
                            "--no-smoke", "--json"}, opts);
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  auto doc = json::parse(r.out);
  CHECK(check_of(doc, "import")["status"] == "pass");

  opts.env.erase("PIP_FIND_LINKS");
  auto without = test::archbuild({"validate", wheel.string(), "--sm", "90", "--python", test::kSystemPython.string(),
                                  "--no-smoke", "--json"}, opts);
  INFO(without.out << without.err);
  CHECK(without.status == 3);
  auto doc2 = json::parse(without.out);
  CHECK(check_of(doc2, "import")["status"] == "skip");
  CHECK_THAT(check_of(doc2, "import")["summary"].get<std::string>(), Catch::Contains("cannot be had here"));
}

// --installed reads a distribution in place (torch in a venv, as on a GPU host).
TEST_CASE("validate --installed: a distribution in site-packages and bad input", "[validate][cli][installed]") {
  if (!fs::exists(test::kSystemPython)) {
    WARN("##archbuild-skip## no " << test::kSystemPython.string());
    return;
  }
  test::TempDir dir;
  auto r = test::archbuild({"validate", "--installed", "pip", "--python", test::kSystemPython.string(), "--sm", "90",
                            "--json"},
                           test::no_gpu(dir));
  INFO(r.out << r.err);
  auto doc = json::parse(r.out);
  CHECK(check_of(doc, "import")["status"] == "pass");
  CHECK(check_of(doc, "closure")["status"] == "skip");  // pure Python: no ELF files
  CHECK(r.status == 1);                                  // and no kernel image for 9.0

  auto missing = test::archbuild({"validate", "--installed", "no-such-dist-here", "--python",
                                  test::kSystemPython.string(), "--sm", "90"});
  CHECK(missing.status == 2);
  CHECK_THAT(missing.err, Catch::Contains("no-such-dist-here: not installed"));

  auto both = test::archbuild({"validate", "x.whl", "--installed", "pip", "--sm", "90"});
  CHECK(both.status == 2);
  CHECK_THAT(both.err, Catch::Contains("either WHEEL or --installed"));
}

// The GPU half of the torch feature checks, as PyTorch's release smoke test
// (.ci/pytorch/smoke_test/smoke_test.py: matmul and conv2d in fp16/fp32 under autocast, an
// asserted CUDA error surfaces, get_arch_list() covers the device), on the torch installed here.
TEST_CASE("validate --installed torch: the feature checks on this host's GPU", "[validate][cli][gpu]") {
  auto d = test::archbuild({"detect", "--json"});
  if (d.status != 0) {
    WARN("##archbuild-skip## no GPU on this host (" << d.err.substr(0, 200) << ")");
    return;
  }
  std::string python = test::which("python3");
  if (python.empty() || test::run(python, {"-c", "import torch"}).status != 0) {
    WARN("##archbuild-skip## no torch importable by python3 on this host");
    return;
  }
  std::string cc = json::parse(d.out)["gpus"][0]["cc"];
  auto r = test::archbuild({"validate", "--installed", "torch", "--python", python, "--sm", cc, "--json"},
                           {{}, {}, std::nullopt, "", std::chrono::seconds(900)});
  INFO(r.out << r.err);
  auto doc = json::parse(r.out);
  CHECK(check_of(doc, "import")["status"] == "pass");
  CHECK(check_of(doc, "import-gpu")["status"] == "pass");  // get_arch_list() covers the device
  const auto& features = check_of(doc, "features")["evidence"]["features"];
  for (const char* n : {"matmul", "conv2d", "cuda-error"}) {
    bool ok = false;
    for (const auto& f : features)
      if (f["name"] == n) ok = f["ok"] == true;
    CHECK((std::string(n) + (ok ? " ok" : " not ok")) == std::string(n) + " ok");
  }
}

TEST_CASE("validate: an x86-64 library under an aarch64 platform tag fails, naming the file", "[validate][cli]") {
  test::TempDir dir;
  for (const char* tag : {"manylinux_2_34_aarch64", "linux_aarch64"}) {
    auto wheel = tiny_wheel(dir, tag);  // WHEEL's Tag and RECORD made for that tag
    auto r = test::archbuild({"validate", wheel.string(), "--sm", "90", "--no-import", "--no-smoke", "--json"});
    INFO(r.out << r.err);
    CHECK(r.status == 1);
    auto doc = json::parse(r.out);
    CHECK(check_of(doc, "metadata")["status"] == "pass");
    CHECK(check_of(doc, "platform-tag")["status"] == "fail");
    CHECK_THAT(check_of(doc, "platform-tag")["summary"].get<std::string>(),
               Catch::Contains(std::string("tiny/libk.so is x86-64 ELF, but the tag ") + tag + " is for aarch64"));
  }
}

TEST_CASE("validate: an aarch64 wheel's coverage and closure are read from its aarch64 ELF", "[validate][cli][aarch64]") {
  test::TempDir build, dir;
  AARCH64_LIBRARY_OR_SKIP(lib, build, "87");
  const std::string tag = "manylinux_2_28_aarch64";
  auto wheel = tiny_wheel(dir, tag, lib.bytes, {"nvidia-cuda-runtime==13.0.*"});

  SECTION("sm_87 SASS covers a Jetson Orin; the CUDA runtime comes from its package") {
    auto r = test::archbuild({"validate", wheel.string(), "--sm", "87", "--no-import", "--no-smoke", "--json"});
    INFO(r.out << r.err);
    auto doc = json::parse(r.out);
    CHECK(check_of(doc, "coverage")["status"] == "pass");
    CHECK(check_of(doc, "wheel-name")["status"] == "pass");
    CHECK(check_of(doc, "closure")["status"] == "pass");
    CHECK_THAT(check_of(doc, "closure").dump(), Catch::Contains("libcudart.so.13"));
    CHECK(r.status == 0);
  }
  SECTION("no kernel image for an sbsa GPU the wheel was not built for") {
    auto r = test::archbuild({"validate", wheel.string(), "--sm", "90", "--no-import", "--no-smoke"});
    INFO(r.out << r.err);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains("no kernel image for 9.0 in tiny/libk.so (carries sm_87)"));
  }
  SECTION("the same aarch64 library in a wheel tagged for x86_64 fails the platform tag, naming it") {
    auto x86 = tiny_wheel(dir, "manylinux_2_28_x86_64", lib.bytes, {"nvidia-cuda-runtime==13.0.*"});
    auto r = test::archbuild({"validate", x86.string(), "--sm", "87", "--no-import", "--no-smoke", "--json"});
    INFO(r.out << r.err);
    CHECK(r.status == 1);
    auto doc = json::parse(r.out);
    CHECK(check_of(doc, "platform-tag")["status"] == "fail");
    CHECK_THAT(check_of(doc, "platform-tag")["summary"].get<std::string>(),
               Catch::Contains("tiny/libk.so is aarch64 ELF, but the tag manylinux_2_28_x86_64 is for x86-64"));
  }
  SECTION("without its Requires-Dist the runtime is not in the closure") {
    auto bare = tiny_wheel(dir, tag + "", lib.bytes, {});
    auto r = test::archbuild({"validate", bare.string(), "--sm", "87", "--no-import", "--no-smoke", "--json"});
    INFO(r.out << r.err);
    CHECK(r.status == 1);
    auto doc = json::parse(r.out);
    CHECK(check_of(doc, "closure")["status"] == "fail");
    CHECK_THAT(check_of(doc, "closure").dump(), Catch::Contains("libcudart.so.13"));
  }
}
