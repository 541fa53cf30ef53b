// The built binary: `archbuild inspect` on nvcc output (fresh when nvcc is installed, committed
// otherwise), wheels, directories, --python, coverage verdicts and malformed input.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "binary/builders.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;
using Strings = std::vector<std::string>;

namespace {

const fs::path kData = fs::path(ARCHBUILD_TEST_DATA) / "binaries";
const std::string kNvcc = "/usr/local/cuda/bin/nvcc";

json inspect_json(const Strings& args, int expected_status = 0) {
  Strings all{"inspect", "--json"};
  all.insert(all.end(), args.begin(), args.end());
  auto r = t::archbuild(all);
  INFO(r.err);
  CHECK(r.status == expected_status);
  return json::parse(r.out);
}

Strings strings(const json& j) { return j.get<Strings>(); }

std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

// Bad input: exit 2 and exactly one line on stderr, naming the file.
void check_refused(const Strings& args, const std::string& expected) {
  Strings all{"inspect"};
  all.insert(all.end(), args.begin(), args.end());
  auto r = t::archbuild(all);
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(lines(r.err) == 1);
  CHECK_THAT(r.err, Catch::StartsWith("archbuild: error: ") && Catch::Contains(expected));
  CHECK(r.out.empty());
}

// Binaries compiled at test time, once per test process (nvcc takes seconds per call).
struct Built {
  std::string name;
  Strings flags;
  Strings sass, ptx, relocatable;
  std::string compression;  // of every entry in .nv_fatbin, or "" for mixed
};

const std::vector<Built>& nvcc_cases() {
  static const std::vector<Built> cases{
      {"gencode.so",
       {"-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_90a,code=[sm_90a,compute_90a]", "-gencode",
        "arch=compute_120,code=sm_120"},
       {"sm_75", "sm_90a", "sm_120"},
       {"compute_90a"},
       {},
       ""},
      {"ptx.so", {"-gencode", "arch=compute_80,code=compute_80"}, {}, {"compute_80"}, {}, "zstd"},
      {"rdc.so",
       {"-rdc=true", "-cudart", "shared", "-gencode", "arch=compute_89,code=sm_89"},
       {"sm_89"},
       {},
       {"sm_89"},
       "none"},
      {"lz4.so",
       {"--compress-mode=speed", "-gencode", "arch=compute_100,code=[sm_100,compute_100]"},
       {"sm_100"},
       {"compute_100"},
       {},
       ""},
      {"zstd.so",
       {"-Xfatbin", "-compress-all", "-gencode", "arch=compute_86,code=sm_86", "-gencode",
        "arch=compute_120f,code=sm_120f"},
       {"sm_86", "sm_120f"},
       {},
       {},
       "zstd"},
  };
  return cases;
}

// Compiles every case into one temporary directory; empty path when nvcc fails.
const fs::path& nvcc_dir() {
  static t::TempDir dir;
  static fs::path built;
  static std::once_flag once;
  std::call_once(once, [] {
    std::ofstream(dir / "k.cu") << "__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }\n"
                                   "void launch(float* x) { scale<<<1, 32>>>(x); }\n";
    for (const auto& c : nvcc_cases()) {
      Strings args{"-shared", "-Xcompiler", "-fPIC", "-o", (dir / c.name).string(), (dir / "k.cu").string()};
      bool has_cudart = std::find(c.flags.begin(), c.flags.end(), "-cudart") != c.flags.end();
      if (!has_cudart) args.insert(args.end(), {"-cudart", "none"});
      args.insert(args.end(), c.flags.begin(), c.flags.end());
      t::RunOptions o;
      o.timeout = std::chrono::seconds(300);
      auto r = t::run(kNvcc, args, o);
      if (r.status != 0) {
        WARN("nvcc failed for " << c.name << ": " << r.err);
        return;
      }
    }
    built = dir.path();
  });
  return built;
}

}  // namespace

TEST_CASE("inspect: nvcc builds list exactly the code that was asked for", "[cli][inspect][nvcc]") {
  if (auto u = t::unusable(kNvcc); !u.empty()) {
    WARN("##archbuild-skip## " << u);
    return;
  }
  const fs::path& dir = nvcc_dir();
  REQUIRE_FALSE(dir.empty());
  for (const auto& c : nvcc_cases()) {
    DYNAMIC_SECTION(c.name) {
      auto j = inspect_json({"--verify", (dir / c.name).string()});
      REQUIRE(j["files"].size() == 1);
      const auto& f = j["files"][0];
      CHECK(strings(f["sass"]) == c.sass);
      CHECK(strings(f["ptx"]) == c.ptx);
      CHECK(strings(f["relocatable"]["sass"]) == c.relocatable);
      CHECK(f["verify"]["problems"].empty());
      if (!c.compression.empty()) {
        CHECK(f["compression"].size() == 1);
        CHECK(f["compression"].contains(c.compression));
      }
    }
  }
  SECTION("LZ4 for PTX with --compress-mode=speed, cubins stored plain") {
    auto j = inspect_json({(dir / "lz4.so").string()});
    for (const auto& img : j["files"][0]["images"])
      CHECK(img["compression"].contains(img["kind"] == "ptx" ? "lz4" : "none"));
  }
  SECTION("a directory of them, judged for several GPUs") {
    auto j = inspect_json({dir.string(), "--sm", "75,90,12.1"}, 1);
    CHECK(j["files"].size() == nvcc_cases().size());
    std::map<std::string, std::string> result;
    for (const auto& v : j["verdicts"]) result[v["sm"]] = v["result"];
    CHECK(result == std::map<std::string, std::string>{
                        {"7.5", "no-kernel-image"}, {"9.0", "no-kernel-image"}, {"12.1", "no-kernel-image"}});
    CHECK(j["covered"] == false);
  }
  SECTION("one file, verdicts with exit 0 when covered") {
    auto j = inspect_json({(dir / "gencode.so").string(), "--sm", "75,90,120,121"});
    std::map<std::string, std::string> result;
    for (const auto& v : j["verdicts"]) result[v["sm"]] = v["result"];
    CHECK(result == std::map<std::string, std::string>{
                        {"7.5", "native"}, {"9.0", "native"}, {"12.0", "native"}, {"12.1", "compatible-sass"}});
    CHECK(j["covered"] == true);
    // compute_90a PTX does not JIT to 10.0, and sm_90a SASS does not run there.
    auto k = inspect_json({(dir / "gencode.so").string(), "--sm", "10.0"}, 1);
    CHECK(k["verdicts"][0]["result"] == "no-kernel-image");
  }
}

TEST_CASE("inspect: committed nvcc binaries, JSON", "[cli][inspect]") {
  auto j = inspect_json({(kData / "multi.so").string(), (kData / "rdc.so").string()});
  REQUIRE(j["files"].size() == 2);
  const auto& m = j["files"][0];
  CHECK(m["path"] == (kData / "multi.so").string());
  CHECK(strings(m["sass"]) == Strings{"sm_80", "sm_90a"});
  CHECK(strings(m["ptx"]) == Strings{"compute_120"});
  CHECK(m["entries"] == 3);
  CHECK(m["compression"] == json{{"none", 2}, {"zstd", 1}});
  CHECK(m["relocatable"]["entries"] == 0);
  const auto& r = j["files"][1];
  CHECK(strings(r["sass"]) == Strings{"sm_90"});
  CHECK(strings(r["relocatable"]["sass"]) == Strings{"sm_90"});
  CHECK(r["relocatable"]["entries"] == 1);
  CHECK_FALSE(j.contains("verdicts"));
  // --threads changes how the bytes are read, never what is found.
  CHECK(inspect_json({(kData / "multi.so").string(), (kData / "rdc.so").string(), "--threads", "1"}) == j);
  CHECK(inspect_json({(kData / "multi.so").string(), (kData / "rdc.so").string(), "--threads", "3"}) == j);
}

TEST_CASE("inspect: table output", "[cli][inspect]") {
  auto r = t::archbuild({"inspect", (kData / "multi.so").string(), (kData / "rdc.so").string()});
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::StartsWith("FILE"));
  CHECK_THAT(r.out, Catch::Contains("sm_80 sm_90a") && Catch::Contains("compute_120") && Catch::Contains("1/3 zstd") &&
                        Catch::Contains("relocatable (-rdc, __nv_relfatbin): sm_90"));
  CHECK(r.err.empty());
}

TEST_CASE("inspect --sm: verdicts and exit status", "[cli][inspect]") {
  std::string multi = (kData / "multi.so").string();
  SECTION("covered: exit 0") {
    auto j = inspect_json({multi, "--sm", "80,86,9.0,sm_120"});
    CHECK(j["covered"] == true);
    REQUIRE(j["verdicts"].size() == 4);
    CHECK(j["verdicts"][0] == json{{"sm", "8.0"},
                                   {"result", "native"},
                                   {"covered", true},
                                   {"files", {{{"path", multi}, {"result", "native"}, {"image", "sm_80"}}}}});
    CHECK(j["verdicts"][1]["result"] == "compatible-sass");
    CHECK(j["verdicts"][3]["result"] == "ptx-jit");
    CHECK(j["verdicts"][3]["files"][0]["image"] == "compute_120");
  }
  SECTION("not covered: exit 1, the file and what it carries instead") {
    auto r = t::archbuild({"inspect", multi, (kData / "ptx_only.so").string(), "--sm", "7.5,9.0"});
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains("no-kernel-image") &&
                          Catch::Contains("multi.so: no kernel image for 7.5 (carries sm_80 sm_90a compute_120)"));
    CHECK_THAT(r.out, Catch::Contains("ptx_only.so: only through the PTX JIT from compute_90"));
    CHECK_THAT(r.err, Catch::Contains("not covered") && Catch::Contains("7.5"));
    auto j = inspect_json({multi, "--sm", "75"}, 1);
    CHECK(j["verdicts"][0]["files"][0]["carries"] == json{"sm_80", "sm_90a", "compute_120"});
  }
  SECTION("a and f variants") {
    auto j = inspect_json({(kData / "zstd_all.so").string(), "--sm", "12.1,10.0,10.3"}, 1);
    std::map<std::string, std::string> result;
    for (const auto& v : j["verdicts"]) result[v["sm"]] = v["result"];
    CHECK(result == std::map<std::string, std::string>{{"10.0", "native"},             // sm_100a
                                                       {"10.3", "no-kernel-image"},    // sm_100a only runs on 10.0
                                                       {"12.1", "compatible-sass"}});  // sm_120f's family
  }
  SECTION("relocatable code only is no kernel image") {
    t::TempDir dir;
    auto only =
        dir.write("rdc_only.so",
                  t::elf_with_fatbin(t::container({t::entry({.sm = 90, .payload = t::cubin(90)})}), "__nv_relfatbin"));
    auto r = t::archbuild({"inspect", only.string(), "--sm", "90"});
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains("only relocatable (-rdc) device code"));
  }
  SECTION("a bad --sm list is bad input") {
    auto r = t::archbuild({"inspect", multi, "--sm", "95"});
    CHECK(r.status == 2);
    CHECK(lines(r.err) == 1);
    // The one --sm rule of every command (app::sm_targets): the option named once, as plan and
    // install-command name it.
    auto banana = t::archbuild({"inspect", multi, "--sm", "banana"});
    CHECK(banana.status == 2);
    CHECK_THAT(banana.err, Catch::StartsWith("archbuild: error: --sm: invalid architecture \"banana\""));
    auto planned = t::archbuild({"plan", "--sm", "banana"});
    CHECK(planned.err == banana.err);
  }
}

TEST_CASE("inspect --verify: mismatches are reported and fail the command", "[cli][inspect]") {
  t::TempDir dir;
  auto ok = t::archbuild({"inspect", "--verify", (kData / "lz4.so").string()});
  CHECK(ok.status == 0);
  CHECK_THAT(ok.out, Catch::Contains("verified: 2 entries match their headers"));
  // A cubin that says sm_86 under a header that says sm_90.
  auto bad = dir.write("lie.so", t::elf_with_fatbin(t::container({t::entry({.sm = 90, .payload = t::cubin(86)})})));
  auto r = t::archbuild({"inspect", "--verify", bad.string()});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("e_flags say sm_86") && Catch::Contains("do not match"));
  auto j = inspect_json({"--verify", bad.string()}, 2);
  CHECK(j["files"][0]["verify"]["problems"].size() == 1);
  // Without --verify the header is all there is.
  CHECK(t::archbuild({"inspect", bad.string()}).status == 0);
}

TEST_CASE("inspect: wheels", "[cli][inspect]") {
  t::TempDir dir;
  auto whl = dir.write("torch-2.9.0-cp312-cp312-linux_x86_64.whl",
                       t::zip({{"torch/__init__.py", ""},
                               {"torch/lib/libtorch_cuda.so", t::read_file(kData / "multi.so")},
                               {"torch/lib/libc10_cuda.so", t::read_file(kData / "ptx_only.so")}}));
  auto j = inspect_json({whl.string(), "--sm", "9.0"});
  REQUIRE(j["files"].size() == 2);
  CHECK(j["files"][0]["path"] == whl.string() + "!torch/lib/libc10_cuda.so");
  CHECK(j["verdicts"][0]["result"] == "ptx-jit");
  inspect_json({whl.string(), "--sm", "8.0"}, 1);
}

TEST_CASE("inspect --python: the torch of an interpreter", "[cli][inspect]") {
  t::TempDir dir;
  auto lib = dir / "site/torch/lib";
  fs::create_directories(lib);
  fs::copy_file(kData / "multi.so", lib / "libtorch_cuda.so");
  auto fake = [&](const std::string& name, const std::string& body) {
    auto p = dir.write(name, "#!/bin/sh\n" + body + "\n");
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  };
  SECTION("torch found") {
    auto py = fake("python-torch", "echo " + (dir / "site/torch").string());
    auto j = inspect_json({"--python", py, "--sm", "8.0"});
    REQUIRE(j["files"].size() == 1);
    CHECK(j["files"][0]["path"] == (lib / "libtorch_cuda.so").string());
  }
  SECTION("no torch: exit 3") {
    auto r = t::archbuild({"inspect", "--python", fake("python-bare", "echo")});
    CHECK(r.status == 3);
    CHECK_THAT(r.err, Catch::Contains("no torch is installed"));
    CHECK(lines(r.err) == 1);
  }
  SECTION("no interpreter: exit 3") {
    auto r = t::archbuild({"inspect", "--python", (dir / "no-such-python").string()});
    CHECK(r.status == 3);
  }
  SECTION("the interpreter fails: exit 3") {
    auto r = t::archbuild({"inspect", "--python", fake("python-broken", "echo boom >&2; exit 1")});
    CHECK(r.status == 3);
    CHECK_THAT(r.err, Catch::Contains("boom"));
  }
  SECTION("a real interpreter without torch") {
    auto py = t::which("python3");
    if (py.empty()) {
      WARN("##archbuild-skip## no python3");
      return;
    }
    auto probe = t::run(py, {"-c", "import importlib.util as u; print(u.find_spec('torch') is None)"});
    if (probe.out != "True\n") {
      WARN("##archbuild-skip## python3 has torch installed");
      return;
    }
    CHECK(t::archbuild({"inspect", "--python", py}).status == 3);
  }
}

TEST_CASE("inspect: malformed input is exit 2 with one line", "[cli][inspect][malformed]") {
  t::TempDir dir;
  std::string so = t::read_file(kData / "multi.so");
  auto entry = t::entry({.sm = 90, .payload = t::cubin(90)});
  check_refused({dir.write("empty.so", "").string()}, "empty file");
  check_refused({dir.write("cut.so", so.substr(0, so.size() / 2)).string()}, "truncated");
  check_refused({dir.write("text.so", "#!/bin/sh\n").string()}, "not an ELF file");
  check_refused({dir.write("magic.so", t::elf_with_fatbin(t::container({entry}, UINT64_MAX, 0x12345678))).string()},
                "expected a fatbin container");
  check_refused({dir.write("huge.so", t::elf_with_fatbin(t::container({entry}, UINT64_MAX - 8))).string()},
                "runs past the end");
  auto past = t::entry({.sm = 90, .payload = t::cubin(90), .stored_size_override = 1u << 20});
  check_refused({dir.write("past.so", t::elf_with_fatbin(t::container({past}))).string()}, "runs past the end");
  check_refused({dir.write("evil.whl", t::zip({{"../../evil.so", so}})).string()}, "unsafe path");
  fs::create_directories(dir / "plain");
  dir.write("plain/a.txt", "x");
  check_refused({(dir / "plain").string()}, "no ELF files");
  check_refused({(dir / "missing.so").string()}, "no such file");
  auto zero = t::archbuild({"inspect", (kData / "multi.so").string(), "--threads", "0"});
  CHECK(zero.status == 2);
  CHECK_THAT(zero.err, Catch::StartsWith("archbuild: error: --threads"));
  CHECK_FALSE(fs::exists(dir.path().parent_path().parent_path() / "evil.so"));

  SECTION("--json still prints one document") {
    auto r = t::archbuild({"inspect", "--json", (dir / "empty.so").string()});
    CHECK(r.status == 2);
    CHECK(json::parse(r.out)["exit"] == 2);
  }
  SECTION("nothing to inspect") {
    auto r = t::archbuild({"inspect"});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains("nothing to inspect"));
  }
}
