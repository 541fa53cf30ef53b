// `archbuild doctor` against fake torch packages: a torch/ folder the test writes into a temporary
// site folder (version, version.cuda and cuda.get_arch_list() chosen per case) with a lib/ holding
// real device code — built here with nvcc, or the committed tiny binaries of tests/data/binaries —
// and `--python` pointing at a wrapper that runs /usr/bin/python3 with PYTHONPATH set to it.
// No GPU: targets come from --sm or a fake nvidia-smi; the driver libraries point at nothing.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "support/process.hpp"
#include "support/tempdir.hpp"
#include "support/torch_lines.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;

namespace {

// The official wheels' pip index for a CUDA tag, as data/torch-releases.toml spells it (the
// tests check the doctor's command against the data, not against a URL written here).
std::string official_index(const std::string& cu) {
  auto data = toml::parse_file(std::string(ARCHBUILD_SOURCE_DIR) + "/data/torch-releases.toml");
  std::string pattern = data["index_url"].value_or(std::string());
  REQUIRE(pattern.find("{cu}") != std::string::npos);
  return pattern.replace(pattern.find("{cu}"), 4, cu);
}


const char* const kNvcc = "/usr/local/cuda/bin/nvcc";
const char* const kPython = "/usr/bin/python3";

fs::path committed(const std::string& name) { return fs::path(ARCHBUILD_TEST_DATA) / "binaries" / name; }

// Shared libraries like the official wheels' libtorch_cuda.so, built once per test process.
struct Built {
  fs::path cu124;  // 2.5+cu124-like: sm_80 sm_90 SASS, no PTX
  fs::path cu128;  // 2.7+cu128-like: sm_75 … sm_120 SASS + compute_120 PTX
  std::string error;
};

const Built& built() {
  static t::TempDir dir;
  static const Built b = [] {
    Built out;
    if (auto u = t::unusable(kNvcc); !u.empty()) {
      out.error = u;
      return out;
    }
    auto nvcc = [&](const std::string& name, std::vector<std::string> gencode) -> fs::path {
      std::vector<std::string> args = {"-shared", "-Xcompiler", "-fPIC", "-Xlinker", "-s", "-cudart", "none"};
      for (auto& g : gencode) {
        args.push_back("-gencode");
        args.push_back(g);
      }
      fs::path o = dir / name;
      args.insert(args.end(), {"-o", o.string(), committed("kernel.cu").string()});
      t::RunOptions ro;
      ro.timeout = std::chrono::seconds(300);
      auto r = t::run(kNvcc, args, ro);
      if (r.status != 0) out.error = "nvcc failed: " + r.err;
      return o;
    };
    out.cu124 = nvcc("cu124.so", {"arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90"});
    out.cu128 = nvcc("cu128.so", {"arch=compute_75,code=sm_75", "arch=compute_80,code=sm_80",
                                  "arch=compute_86,code=sm_86", "arch=compute_90,code=sm_90",
                                  "arch=compute_100,code=sm_100", "arch=compute_120,code=[sm_120,compute_120]"});
    return out;
  }();
  return b;
}

std::string py_list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (const auto& x : v) s += "'" + x + "', ";
  return s + "]";
}

// A site folder with a fake torch, an interpreter wrapper that sees it, and a hermetic host: no
// driver libraries, no nvidia-smi unless one is written, CUDA_HOME pointing at nothing.
struct FakeHost {
  t::TempDir dir;
  fs::path python;

  FakeHost() {
    python = dir.write("bin/python-fake", "#!/bin/sh\nPYTHONPATH='" + (dir / "site").string() + "' exec " + kPython +
                                              " \"$@\"\n");
    fs::permissions(python, fs::perms::owner_all);
    fs::create_directories(dir / "site");
  }

  // torch.version.cuda = `cuda` (None when unset); get_arch_list() returns `arch_list`.
  void torch(const std::string& version, std::optional<std::string> cuda, const std::vector<std::string>& arch_list,
             const std::optional<fs::path>& lib_so) {
    std::string c = cuda ? "'" + *cuda + "'" : "None";
    dir.write("site/torch/__init__.py", "__version__ = '" + version + "'\nfrom . import version, cuda\n");
    dir.write("site/torch/version.py", "from typing import Optional\n__version__ = '" + version +
                                           "'\ncuda: Optional[str] = " + c + "\nhip: Optional[str] = None\n");
    dir.write("site/torch/cuda/__init__.py",
              "def is_available():\n    return False\n\ndef get_arch_list():\n    return " + py_list(arch_list) + "\n");
    fs::create_directories(dir / "site/torch/lib");
    if (lib_so) fs::copy_file(*lib_so, dir / "site/torch/lib/libtorch_cuda.so", fs::copy_options::overwrite_existing);
    dir.write("site/torch/lib/README", "not ELF: skipped\n");
  }

  void nvidia_smi(const std::string& csv) {
    auto smi = dir.write("bin/nvidia-smi", "#!/bin/sh\necho '" + csv + "'\n");
    fs::permissions(smi, fs::perms::owner_all);
  }

  // A CUDA_HOME whose nvcc says `release` and lists `archs`.
  void cuda_home(const std::string& release, const std::string& archs) {
    auto nvcc = dir.write("cuda/bin/nvcc", "#!/bin/sh\ncase \"$1\" in\n"
                                           "  --version) echo 'Cuda compilation tools, release " +
                                               release + ", V" + release + ".85';;\n"
                                               "  --list-gpu-arch) printf '" + archs + "';;\n"
                                               "esac\n");
    fs::permissions(nvcc, fs::perms::owner_all);
    cuda = (dir / "cuda").string();
  }

  std::string cuda = "/nonexistent/cuda";

  t::RunOptions options() const {
    t::RunOptions o;
    o.env["PATH"] = (dir / "bin").string() + ":/usr/bin:/bin";
    o.env["ARCHBUILD_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1";
    o.env["ARCHBUILD_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1";
    o.env["CUDA_HOME"] = cuda;
    o.unset_env = {"CUDA_PATH"};
    return o;
  }

  t::Ran doctor(std::vector<std::string> args) const {
    std::vector<std::string> argv = {"doctor", "--python", python.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return t::archbuild(argv, options());
  }

  nlohmann::json json(std::vector<std::string> args, int expect) const {
    args.push_back("--json");
    auto r = doctor(args);
    INFO(r.err);
    CHECK(r.status == expect);
    return nlohmann::json::parse(r.out);
  }
};

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool python_ok() { return fs::exists(kPython); }

}  // namespace

TEST_CASE("doctor: RTX 5090 (--sm 120) against a 2.5+cu124-like torch: no kernel image", "[cli][doctor]") {
  if (!python_ok()) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  const auto& b = built();
  if (!b.error.empty()) {
    WARN("##archbuild-skip## " << b.error);
    return;
  }
  FakeHost h;
  h.torch("2.5.1+cu124", "12.4", {"sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"}, b.cu124);
  auto j = h.json({"--sm", "120"}, 1);
  CHECK(j["torch"]["version"] == "2.5.1+cu124");
  CHECK(j["torch"]["cuda"] == "12.4");
  CHECK(j["torch"]["lib"]["files_with_device_code"][0]["path"] == "lib/libtorch_cuda.so");
  CHECK(j["torch"]["lib"]["files_with_device_code"][0]["images"] == nlohmann::json({"sm_80", "sm_90"}));
  CHECK(j["targets"][0]["result"] == "no-kernel-image");
  REQUIRE(j["findings"].size() == 1);
  const auto& f = j["findings"][0];
  CHECK(f["id"] == "no-kernel-image");
  CHECK(f["cc"] == "12.0");
  // Shortest first: the newest official wheel carrying sm_120 (no driver known: the newest CUDA),
  // then a source build resolution picks.
  CHECK(f["fixes"][0]["kind"] == "official-wheel");
  CHECK(f["fixes"][0]["command"] == h.python.string() +
                                        " -m pip install " + t::newest_official().requirements() + " --index-url " + official_index("cu132"));
  const auto& last = f["fixes"].back();
  CHECK(last["kind"] == "build");
  CHECK(has(last["command"].get<std::string>(), "archbuild wheel --sm 120 --recipe torch-2."));
  CHECK(j["ok"] == false);

  auto r = h.doctor({"--sm", "120"});
  CHECK(r.status == 1);
  CHECK(has(r.out, "finding  no-kernel-image"));
  CHECK(has(r.out, "lib/libtorch_cuda.so carries sm_80 sm_90"));
  CHECK(has(r.out, "fix 1: install the official torch " + t::newest_official().line + " wheel"));
  CHECK(has(r.out, "$ archbuild wheel --sm 120 --recipe torch-2."));
  CHECK(has(r.err, "1 finding: no-kernel-image (12.0)"));
}

TEST_CASE("doctor: H100 (--sm 90) against a 2.7+cu128-like torch: native and exit 0", "[cli][doctor]") {
  if (!python_ok()) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  const auto& b = built();
  if (!b.error.empty()) {
    WARN("##archbuild-skip## " << b.error);
    return;
  }
  FakeHost h;
  h.torch("2.7.1+cu128", "12.8", {"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"}, b.cu128);
  auto j = h.json({"--sm", "90"}, 0);
  CHECK(j["findings"].empty());
  CHECK(j["targets"][0]["result"] == "native");
  CHECK(j["targets"][0]["image"] == "sm_90");
  CHECK(j["ok"] == true);
  auto r = h.doctor({"--sm", "sm_90"});
  CHECK(r.status == 0);
  CHECK(has(r.out, "no finding"));
  // The official 2.7 cu128 list on a 12.1 GPU: sm_120 SASS is compatible (same major, lower
  // minor), so it runs at full speed — no finding either.
  auto k = h.json({"--sm", "12.1"}, 0);
  CHECK(k["targets"][0]["result"] == "compatible-sass");
  CHECK(k["targets"][0]["image"] == "sm_120");
}

TEST_CASE("doctor: 12.1 against a torch whose lib carries sm_90a SASS + compute_120 PTX: PTX only", "[cli][doctor]") {
  if (!python_ok()) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  FakeHost h;
  // multi.so carries sm_80, sm_90a and compute_120: on 12.1 only the PTX runs. get_arch_list()
  // is empty, as real torch's is where CUDA cannot initialise: the verdict comes from lib/.
  h.torch("2.7.1+cu128", "12.8", {}, committed("multi.so"));
  auto j = h.json({"--sm", "121"}, 1);
  CHECK(j["torch"]["arch_list"].is_null());
  CHECK(has(j["torch"]["arch_list_missing"].get<std::string>(), "empty"));
  CHECK(j["targets"][0]["result"] == "ptx-jit");
  CHECK(j["targets"][0]["image"] == "compute_120");
  REQUIRE(j["findings"].size() == 1);
  CHECK(j["findings"][0]["id"] == "ptx-only");
  // An official wheel with SASS for 12.1 exists (2.7 cu128's sm_120): that is the first fix.
  CHECK(j["findings"][0]["fixes"][0]["kind"] == "official-wheel");
  CHECK(has(j["findings"][0]["fixes"][0]["text"].get<std::string>(), "sm_120 on 12.1"));
}

TEST_CASE("doctor: a driver too old for torch's CUDA runtime (fake nvidia-smi)", "[cli][doctor]") {
  if (!python_ok()) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  FakeHost h;
  // lz4.so carries sm_86 + compute_86: an RTX 4090 (8.9) runs the sm_86 SASS, so the driver is
  // the only finding. Targets come from detection (no --sm).
  h.torch("2.7.1+cu128", "12.8", {"sm_86", "compute_86"}, committed("lz4.so"));
  h.nvidia_smi("0, NVIDIA GeForce RTX 4090, 8.9, 24564, 470.82.01");
  auto j = h.json({}, 1);
  CHECK(j["driver"]["version"] == "470.82.01");
  CHECK(j["driver"]["source"] == "nvidia-smi");
  CHECK(j["targets"][0]["source"] == "GPU 0: NVIDIA GeForce RTX 4090");
  CHECK(j["targets"][0]["result"] == "compatible-sass");
  REQUIRE(j["findings"].size() == 1);
  const auto& f = j["findings"][0];
  CHECK(f["id"] == "driver-too-old");
  CHECK(has(f["summary"].get<std::string>(), ">= 570.26"));
  CHECK(f["fixes"][0]["kind"] == "driver");
  auto r = h.doctor({});
  CHECK(r.status == 1);
  CHECK(has(r.out, "driver   470.82.01 (nvidia-smi)"));
  CHECK(has(r.out, "finding  driver-too-old"));
}

TEST_CASE("doctor: a CPU-only torch", "[cli][doctor]") {
  if (!python_ok()) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  FakeHost h;
  h.torch("2.5.1+cpu", std::nullopt, {}, std::nullopt);
  auto j = h.json({"--sm", "90"}, 1);
  CHECK(j["torch"]["cuda"].is_null());
  CHECK(j["torch"]["lib"]["files_with_device_code"].empty());
  REQUIRE(j["findings"].size() == 1);
  CHECK(j["findings"][0]["id"] == "cpu-only");
  CHECK(j["findings"][0]["fixes"][0]["command"] ==
        h.python.string() + " -m pip install " + t::newest_official().requirements() + " --index-url " + official_index("cu132"));
  auto r = h.doctor({"--sm", "90"});
  CHECK(has(r.out, "CPU only"));
  CHECK(has(r.out, "finding  cpu-only"));
}

TEST_CASE("doctor: the toolkit in CUDA_HOME cannot compile the target", "[cli][doctor]") {
  if (!python_ok()) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  FakeHost h;
  // zstd_all.so carries sm_120f SASS: torch runs on 12.0; a CUDA 12.6 CUDA_HOME cannot build for it.
  h.torch("2.7.1+cu128", "12.8", {}, committed("zstd_all.so"));
  h.cuda_home("12.6", "compute_50\\ncompute_90\\n");
  auto j = h.json({"--sm", "120"}, 1);
  CHECK(j["targets"][0]["result"] == "native");
  CHECK(j["toolkit"]["version"] == "12.6");
  CHECK(j["toolkit"]["found_by"] == "CUDA_HOME");
  REQUIRE(j["findings"].size() == 1);
  CHECK(j["findings"][0]["id"] == "toolkit-cannot-compile");
  CHECK(j["findings"][0]["fixes"][0]["command"] == "export CUDA_HOME=/usr/local/cuda-12.8");
}

TEST_CASE("doctor: nothing to examine is exit 3 and a bad --sm exit 2", "[cli][doctor]") {
  if (!python_ok()) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  FakeHost h;  // the site folder has no torch: install advice instead (the next test), exit 0
  auto r = h.doctor({"--sm", "90"});
  CHECK(r.status == 0);
  CHECK(has(r.out, "no torch is installed for " + h.python.string()));
  auto none = h.doctor({});  // no torch, no GPU, no --sm: nothing to advise for
  CHECK(none.status == 3);
  CHECK(has(none.err, "no torch is installed for " + h.python.string()));
  CHECK(has(none.err, "give --sm or --gpu"));
  auto missing = t::archbuild({"doctor", "--python", (h.dir / "no-such-python").string(), "--sm", "90"}, h.options());
  CHECK(missing.status == 3);
  CHECK(has(missing.err, "no such interpreter"));
  // A torch, but no GPU and no --sm: nothing to judge against.
  h.torch("2.7.1+cu128", "12.8", {}, committed("multi.so"));
  auto no_gpu = h.doctor({});
  CHECK(no_gpu.status == 3);
  CHECK(has(no_gpu.err, "give --sm"));
  CHECK(has(no_gpu.out, "torch    2.7.1+cu128"));
  // --json: the failing document carries "error" and "exit", as every command's does.
  auto doc = h.json({}, 3);
  CHECK(doc["exit"] == 3);
  CHECK(has(doc["error"].get<std::string>(), "give --sm"));
  auto ic = t::archbuild({"install-command", "--json"}, h.options());
  CHECK(ic.status == 3);
  auto icd = nlohmann::json::parse(ic.out);
  CHECK(icd["exit"] == 3);
  CHECK(icd.contains("error"));
  auto native = h.doctor({"--sm", "native"});  // no GPU: a clear error, never an empty list
  CHECK(native.status == 3);
  CHECK(has(native.err, "--sm native: no GPU found"));
  auto bad = h.doctor({"--sm", "95"});
  CHECK(bad.status == 2);
  CHECK(has(bad.err, "--sm"));
}

TEST_CASE("doctor without torch: which official wheel to install, or the build", "[cli][doctor][install]") {
  if (!python_ok()) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  FakeHost h;  // no torch in the site folder
  // doctor advises this machine's platform: x86_64's lists below. On an aarch64 machine
  // (scripts/test-arm64) its aarch64 lists answer: with CUDA 12 only 8.0;9.0, no Pascal at all.
  const bool aarch64 = t::machine() == "aarch64";
  SECTION("an aarch64 host: no CUDA 12 aarch64 wheel runs on 12.0, none at all on 6.1") {
    if (!aarch64) return;
    auto j = h.json({"--gpu", "RTX 5090", "--driver", "570.86"}, 1);
    CHECK(j["options"].empty());
    CHECK(has(h.doctor({"--gpu", "RTX 5090", "--driver", "570.86"}).err, "no official wheel runs on 12.0 with driver 570.86"));
    auto pascal = h.json({"--gpu", "GTX 1080 Ti", "--driver", "580.65.06"}, 1);
    CHECK(pascal["options"].empty());
    auto h100 = h.json({"--sm", "90", "--driver", "580.65.06"}, 0);
    CHECK(h100["options"][0]["torch"] == t::newest_official().latest);
  }
  if (aarch64) return;
  SECTION("an RTX 5090 with driver 570: CUDA 12 wheels, not cu130") {
    auto j = h.json({"--gpu", "RTX 5090", "--driver", "570.86"}, 0);
    CHECK(j["torch"].is_null());
    CHECK(j["targets"][0]["cc"] == "12.0");
    CHECK(j["driver"]["source"] == "--driver");
    REQUIRE(!j["options"].empty());
    for (const auto& o : j["options"]) CHECK(o["cuda"].get<std::string>().rfind("12.", 0) == 0);
    CHECK(j["options"][0]["pip"] == h.python.string() + " -m pip install torch==2.13.0 \"torchvision==0.28.*\" "
                                                        "\"torchaudio==2.11.*\" --index-url " + official_index("cu129"));
    CHECK(j["options"][0]["uv"].get<std::string>().ends_with("--torch-backend cu129"));
    auto r = h.doctor({"--gpu", "RTX 5090", "--driver", "570.86"});
    CHECK(r.status == 0);
    CHECK(has(r.out, "no torch is installed for"));
    CHECK(has(r.out, "install  torch 2.13.0 built with CUDA 12.9 (cu129): sm_120 native on 12.0"));
    CHECK(has(r.out, "not      torch 2.15: cu132 needs driver >= 580"));
  }
  SECTION("a GTX 1080 Ti with driver 580: the newest cu126 wheel, and a build for what has none") {
    auto j = h.json({"--gpu", "GTX 1080 Ti", "--driver", "580.65.06"}, 0);
    CHECK(j["options"][0]["torch"] == "2.14.0");
    CHECK(j["options"][0]["variant"] == "cu126");
    CHECK(j["options"][0]["runs"][0]["result"] == "compatible-sass");
    CHECK(has(j["build"]["why"].get<std::string>(), "no official torch " + t::newest_torch().line + " wheel runs here"));
  }
  SECTION("an H100 and an RTX 4090: the release that covers both") {
    auto j = h.json({"--sm", "90", "--gpu", "RTX 4090"}, 0);
    CHECK(j["options"][0]["torch"] == t::newest_official().latest);
    CHECK(j["options"][0]["runs"].size() == 2);
    // No build unless a newer line has a recipe and no wheels yet.
    CHECK(j["build"].is_null() == (t::newest_torch().line == t::newest_official().line));
  }
  SECTION("no official wheel: exit 1 and the archbuild wheel command") {
    // 3.5 (Kepler): no recorded list carries code that runs on it. (11.0, Thor, is an sbsa GPU:
    // the aarch64 wheels carry sm_110 — tests below.)
    auto j = h.json({"--sm", "35", "--driver", "580.65.06"}, 1);
    CHECK(j["options"].empty());
    CHECK(j["ok"] == false);
    CHECK(has(j["build"]["why"].get<std::string>(), "no official wheel runs on 3.5"));
  }
}

TEST_CASE("install-command: the same advice as its own command, bad input", "[cli][install]") {
  FakeHost h;
  // The x86_64 wheels' advice, on any machine (--platform: an aarch64 host has no Pascal wheel).
  std::vector<std::string> args = {"install-command", "--gpu", "GTX 1080 Ti", "--driver", "580.65.06", "--json"};
  if (t::machine() != "x86_64") args.insert(args.end(), {"--platform", "x86_64"});
  auto r = t::archbuild(args, h.options());
  INFO(r.err);
  CHECK(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["options"][0]["pip"] == "pip install torch==2.14.0 \"torchvision==0.29.*\" \"torchaudio==2.11.*\" "
                                  "--index-url " + official_index("cu126"));
  CHECK(j["options"][0]["uv"] == "uv pip install torch==2.14.0 \"torchvision==0.29.*\" \"torchaudio==2.11.*\" "
                                 "--torch-backend cu126");
  auto none = t::archbuild({"install-command"}, h.options());  // no GPU, no --sm
  CHECK(none.status == 3);
  CHECK(has(none.err, "give --sm or --gpu"));
  auto bad_gpu = t::archbuild({"install-command", "--gpu", "GTX 9999 Imaginary"}, h.options());
  CHECK(bad_gpu.status == 2);
  CHECK(has(bad_gpu.err, "--gpu \"GTX 9999 Imaginary\": no GPU of that name"));
  auto bad_driver = t::archbuild({"install-command", "--sm", "90", "--driver", "latest"}, h.options());
  CHECK(bad_driver.status == 2);
  CHECK(has(bad_driver.err, "--driver latest: not a driver version"));
}

TEST_CASE("install-command on ARM hosts: GB10, Thor and an Orin on JetPack 7 get the aarch64 wheel, an Orin on JetPack 6 the build",
          "[cli][install][arm]") {
  FakeHost h;  // the GPUs decide the platform
  auto gb10 = t::archbuild({"install-command", "--gpu", "GB10", "--driver", "580.95.05", "--json"}, h.options());
  INFO(gb10.err);
  CHECK(gb10.status == 0);
  auto g = nlohmann::json::parse(gb10.out);
  CHECK(g["platform"]["name"] == "sbsa");
  CHECK(g["platform"]["this_machine"] == (t::machine() == "aarch64" && !fs::exists("/etc/nv_tegra_release")));
  CHECK(g["options"][0]["variant"] == "cu132");
  CHECK(g["options"][0]["arch_list"] == "8.0;9.0;10.0;11.0;12.0");
  CHECK(g["options"][0]["runs"][0]["image"] == "sm_120");
  CHECK(has(g["notes"].dump(), "manylinux_*_aarch64"));

  auto thor = t::archbuild({"install-command", "--gpu", "Jetson Thor", "--driver", "580.00", "--json"}, h.options());
  CHECK(thor.status == 0);
  CHECK(nlohmann::json::parse(thor.out)["options"][0]["runs"][0]["image"] == "sm_110");

  // An Orin asked about from elsewhere: the newest JetPack for 8.7 (7.2: Jetson Linux 39.2, CUDA
  // 13.2) puts it on sbsa, where the official aarch64 wheels' sm_80 SASS runs on 8.7 (same major,
  // higher minor): the wheel and its index, and the other path (JetPack 6, platform jetson) said.
  // Before JetPack 7.2: platform jetson, no wheel, only a build (and before platforms, the x86_64
  // cu132 wheel's "sm_86 compatible-sass on 8.7").
  auto orin = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--json"}, h.options());
  INFO(orin.out << orin.err);
  CHECK(orin.status == 0);
  auto o = nlohmann::json::parse(orin.out);
  CHECK(o["platform"]["name"] == "sbsa");
  CHECK(o["platform"]["this_machine"] == false);  // the Orin is elsewhere, whatever this machine is
  CHECK(has(o["platform"]["why"].get<std::string>(), "the newest JetPack for the GPUs asked about"));
  CHECK(o["jetpack"]["platform"] == "sbsa");
  CHECK(has(o["jetpack"]["why"].get<std::string>(), "the newest JetPack for CC 8.7"));
  REQUIRE_FALSE(o["options"].empty());
  const auto& best = o["options"][0];
  CHECK(best["runs"][0]["image"] == "sm_80");
  CHECK(best["sass"] == true);
  CHECK(best["index_url"] == "https://download.pytorch.org/whl/" + best["variant"].get<std::string>());
  CHECK(has(best["pip"].get<std::string>(), "--index-url https://download.pytorch.org/whl/cu"));
  CHECK(o["build"].is_null());
  CHECK(has(o["notes"].dump(), "--jetpack 6.2 (platform jetson, CUDA 12.6)"));
  auto text = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin"}, h.options());
  CHECK(has(text.out, "platform sbsa"));
  CHECK(has(text.out, ", platform sbsa) from the newest JetPack for CC 8.7"));
  CHECK(has(text.out, "--index-url https://download.pytorch.org/whl/"));

  // An Orin kept on JetPack 6: --platform jetson (or --jetpack 6.2, below) — no pip wheel, the build.
  auto orin6 = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--platform", "jetson", "--driver", "540.4.0", "--json"},
                            h.options());
  INFO(orin6.out);
  CHECK(orin6.status == 1);
  auto o6 = nlohmann::json::parse(orin6.out);
  CHECK(o6["platform"]["name"] == "jetson");
  CHECK(o6["platform"]["cuda_libraries"] == "host");
  CHECK(o6["options"].empty());
  CHECK(has(o6["build"]["why"].get<std::string>(), "no pip wheel runs on platform jetson"));
  if (o6["build"]["ok"] == true) {
    CHECK(has(o6["build"]["command"].get<std::string>(), "--sm 87 "));
    CHECK(has(o6["build"]["command"].get<std::string>(), "--platform jetson"));
  }
  auto text6 = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--platform", "jetson", "--driver", "540.4.0"},
                            h.options());
  CHECK(has(text6.out, "platform jetson"));
  CHECK(has(text6.out, "build    no pip wheel runs on platform jetson"));

  // A GPU of one platform named with another: exit 2 (the Orin takes either Arm platform).
  auto bad = t::archbuild({"install-command", "--gpu", "Jetson Nano", "--platform", "sbsa"}, h.options());
  CHECK(bad.status == 2);
  CHECK(has(bad.err, "--gpu Jetson Nano sits on platform jetson"));
  auto orin_x86 = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--platform", "x86_64"}, h.options());
  CHECK(orin_x86.status == 2);
  CHECK(has(orin_x86.err, "CC 8.7 is a GPU of platforms jetson, sbsa only"));
  auto unknown = t::archbuild({"install-command", "--sm", "90", "--platform", "arm64"}, h.options());
  CHECK(unknown.status == 2);
  CHECK(has(unknown.err, "not a platform"));
}

TEST_CASE("install-command --jetpack: the Jetson's JetPack CUDA names the recipe, and JetPack 7.0/7.1 are Thor's, 7.2 Orin's too",
          "[cli][install][arm]") {
  FakeHost h;  // an x86_64 machine advising for a Jetson elsewhere
  auto orin = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--jetpack", "6.2", "--driver", "540.4.0", "--json"},
                           h.options());
  INFO(orin.out << orin.err);
  CHECK(orin.status == 1);
  auto o = nlohmann::json::parse(orin.out);
  CHECK(o["platform"]["name"] == "jetson");
  CHECK(o["platform"]["why"] == "--jetpack 6.2 (toolchains/jetpack.toml)");
  CHECK(o["jetpack"]["cuda"] == "12.6");
  CHECK(o["jetpack"]["l4t"] == "36.4.3");
  // Before JetPack data the command named no recipe ("… --platform jetson"); now CUDA 12.6's.
  REQUIRE(o["build"]["ok"] == true);
  CHECK(o["build"]["command"] == "archbuild wheel --sm 87 --recipe torch-2.14 --cuda 12.6 --platform jetson");
  CHECK(has(o["build"]["detail"].get<std::string>(), "JetPack 6.2 (L4T 36.4.3) installs CUDA 12.6"));
  // JetPack 5's CUDA 11.4: no recipe builds with it; the detail says so and what JetPack 5 allows.
  auto five = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--jetpack", "5.1", "--driver", "540.4.0", "--json"},
                           h.options());
  auto f = nlohmann::json::parse(five.out);
  CHECK(f["build"]["ok"] == false);
  CHECK(has(f["build"]["detail"].get<std::string>(), "installs CUDA 11.4"));
  CHECK(has(f["build"]["detail"].get<std::string>(), "CUDA 11.8 or newer"));
  // JetPack 7.0 and 7.1 support Thor only: Orin with them is refused (exit 2) with the source.
  auto orin70 = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--jetpack", "7.0"}, h.options());
  CHECK(orin70.status == 2);
  CHECK(has(orin70.err, "JetPack 7.0 supports CC 11.0 only"));
  CHECK(has(orin70.err, "not 8.7"));
  // JetPack 7.2 supports Orin, on the sbsa stack with CUDA 13.2: the official aarch64 wheel runs (sm_80
  // SASS on 8.7), and the build, where one is asked for, uses JetPack's CUDA 13.2 for platform sbsa.
  auto orin72 = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--jetpack", "7.2", "--json"}, h.options());
  INFO(orin72.out << orin72.err);
  CHECK(orin72.status == 0);
  auto o72 = nlohmann::json::parse(orin72.out);
  CHECK(o72["platform"]["name"] == "sbsa");
  CHECK(o72["platform"]["why"] == "--jetpack 7.2 (toolchains/jetpack.toml)");
  CHECK(o72["jetpack"]["cuda"] == "13.2");
  CHECK(o72["jetpack"]["l4t"] == "39.2.0");
  REQUIRE_FALSE(o72["options"].empty());
  CHECK(o72["options"][0]["runs"][0]["image"] == "sm_80");
  CHECK_FALSE(has(o72["notes"].dump(), "--jetpack 6.2"));  // asked for 7.2: no other path to offer
  auto orin72_text = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--jetpack", "7.2"}, h.options());
  CHECK(has(orin72_text.out, "jetpack  7.2 (L4T 39.2.0, CUDA 13.2, platform sbsa) from --jetpack"));
  // Thor with JetPack 7: the sbsa platform, the official aarch64 wheel.
  auto thor = t::archbuild({"install-command", "--gpu", "Jetson Thor", "--jetpack", "7.0", "--driver", "580.00", "--json"},
                           h.options());
  CHECK(thor.status == 0);
  CHECK(nlohmann::json::parse(thor.out)["platform"]["name"] == "sbsa");
  auto clash = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--jetpack", "6.2", "--platform", "sbsa"}, h.options());
  CHECK(clash.status == 2);
  CHECK(has(clash.err, "--jetpack 6.2 is platform jetson"));
  auto clash7 = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--jetpack", "7.2", "--platform", "jetson"}, h.options());
  CHECK(clash7.status == 2);
  CHECK(has(clash7.err, "--jetpack 7.2 is platform sbsa"));
  auto bad = t::archbuild({"install-command", "--sm", "87", "--jetpack", "9.9"}, h.options());
  CHECK(bad.status == 2);
  CHECK(has(bad.err, "--jetpack 9.9: not a JetPack release"));
}

TEST_CASE("doctor for a Jetson Orin: on JetPack 7.2 an aarch64 wheel fixes it, on JetPack 6.2 only a build", "[cli][doctor][arm]") {
  if (!python_ok()) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  FakeHost h;  // an x86_64 machine asking about an Orin elsewhere
  // No torch: the install advice of each path, and the other path said where the newest JetPack chose.
  auto seven = h.doctor({"--gpu", "Jetson AGX Orin", "--jetpack", "7.2"});
  INFO(seven.out << seven.err);
  CHECK(seven.status == 0);
  CHECK(has(seven.out, "the official wheels that run on the sbsa host"));
  auto six = h.doctor({"--gpu", "Jetson AGX Orin", "--jetpack", "6.2"});
  INFO(six.out << six.err);
  CHECK(six.status == 1);
  CHECK(has(six.out, "no pip wheel runs on platform jetson"));
  auto newest = h.doctor({"--gpu", "Jetson AGX Orin"});
  CHECK(newest.status == 0);
  CHECK(has(newest.err, "--jetpack 6.2"));
  // A torch without sm_8x (an aarch64 list of 9.0;10.0;12.0, as 2.7's cu128 wheel) on the Orin: no
  // kernel image; the fix is the official aarch64 wheel under JetPack 7.2, a build under JetPack 6.2.
  h.torch("2.7.1+cu128", "12.8", {"sm_90", "sm_100", "sm_120"}, std::nullopt);
  auto j7 = h.json({"--gpu", "Jetson AGX Orin", "--jetpack", "7.2"}, 1);
  CHECK(j7["targets"][0]["result"] == "no-kernel-image");
  REQUIRE_FALSE(j7["findings"].empty());
  REQUIRE_FALSE(j7["findings"][0]["fixes"].empty());
  CHECK(j7["findings"][0]["fixes"][0]["kind"] == "official-wheel");
  CHECK(has(j7["findings"][0]["fixes"][0]["command"].get<std::string>(), "--index-url https://download.pytorch.org/whl/cu"));
  auto j6 = h.json({"--gpu", "Jetson AGX Orin", "--jetpack", "6.2"}, 1);
  REQUIRE_FALSE(j6["findings"].empty());
  for (const auto& fix : j6["findings"][0]["fixes"]) CHECK(fix["kind"] != "official-wheel");
}

TEST_CASE("install-command for a Jetson elsewhere: its newest JetPack's CUDA, never this machine's toolkit", "[cli][install][arm]") {
  FakeHost h;  // an x86_64 machine with CUDA 13.0 installed, advising for a Jetson elsewhere
  h.cuda_home("13.0", "compute_75\\ncompute_80\\ncompute_90\\ncompute_100\\ncompute_110\\ncompute_120\\n");
  // Before: "with the recipe its installed CUDA toolkit allows (here: torch 2.15.0 with CUDA 13.0)".
  // An Orin on platform jetson (JetPack 5/6): the newest JetPack of that platform, 6.2, and its CUDA.
  auto orin = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--platform", "jetson", "--json"}, h.options());
  INFO(orin.out << orin.err);
  CHECK(orin.status == 1);
  auto o = nlohmann::json::parse(orin.out);
  CHECK(o["jetpack"]["version"] == "6.2");
  CHECK(has(o["jetpack"]["why"].get<std::string>(), "the newest JetPack for CC 8.7 of platform jetson"));
  REQUIRE(o["build"]["ok"] == true);
  CHECK(o["build"]["command"] == "archbuild wheel --sm 87 --recipe torch-2.14 --cuda 12.6 --platform jetson");
  auto text = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--platform", "jetson"}, h.options());
  CHECK(has(text.out, "jetpack  6.2 (L4T 36.4.3, CUDA 12.6, platform jetson) from the newest JetPack"));
  CHECK_FALSE(has(text.out, "CUDA 13.0"));
  // Without --platform: the newest JetPack for 8.7 (sbsa), a Jetson elsewhere all the same.
  auto orin7 = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--json"}, h.options());
  auto o7 = nlohmann::json::parse(orin7.out);
  CHECK(o7["jetpack"]["platform"] == "sbsa");
  CHECK(o7["platform"]["this_machine"] == false);
  // JetPack 6.0's CUDA 12.2 has no recipe: the way out stays on CUDA 12 (no embedded CUDA 13).
  auto six0 = t::archbuild({"install-command", "--gpu", "Jetson AGX Orin", "--jetpack", "6.0", "--json"}, h.options());
  auto s0 = nlohmann::json::parse(six0.out);
  CHECK(s0["build"]["ok"] == false);
  CHECK(has(s0["build"]["detail"].get<std::string>(), "Way out: --cuda 12."));
  CHECK_FALSE(has(s0["build"]["detail"].get<std::string>(), "--cuda 13."));
  // No JetPack row for the GPU (Nano's 5.3, or 10.1: Thor before CUDA 13): no build command.
  for (const char* sm : {"53", "101"}) {
    auto r = t::archbuild({"install-command", "--sm", sm, "--json"}, h.options());
    INFO(sm << " " << r.out);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["platform"]["name"] == "jetson");
    CHECK(j["build"]["ok"] == false);
    CHECK(has(j["build"]["detail"].get<std::string>(), "no JetPack release of jetpack.toml for platform jetson supports CC"));
  }
  // doctor with no torch here, about a GPU of another platform: the wheels run there, not here.
  auto gb200 = h.doctor({"--gpu", "GB200", "--driver", "580.65.06"});
  const bool sbsa_here = t::machine() == "aarch64" && !fs::exists("/etc/nv_tegra_release");
  CHECK(has(gb200.out, sbsa_here ? "the official wheels that run here" : "the official wheels that run on the sbsa host"));
  // Jetson AGX Thor is a name users write (arm-hosts.md): Thor, CC 11.0, sbsa.
  auto agx = t::archbuild({"install-command", "--gpu", "Jetson AGX Thor", "--driver", "580.00", "--json"}, h.options());
  CHECK(agx.status == 0);
  CHECK(nlohmann::json::parse(agx.out)["platform"]["name"] == "sbsa");
}

TEST_CASE("install-command: the build it advises runs on the driver given", "[cli][install]") {
  FakeHost h;
  h.cuda_home("13.0", "compute_75\\ncompute_80\\ncompute_90\\ncompute_100\\ncompute_110\\ncompute_120\\n");
  // Thor on a 570 driver: sm_110 needs CUDA 13, whose runtime needs driver 580 (before: the
  // CUDA 13.0 build command, as if the driver did not matter).
  auto thor = t::archbuild({"install-command", "--sm", "110", "--platform", "sbsa", "--driver", "570.86", "--json"}, h.options());
  INFO(thor.out);
  auto j = nlohmann::json::parse(thor.out);
  CHECK(j["build"]["ok"] == false);
  auto detail = j["build"]["detail"].get<std::string>();
  CHECK(has(detail, "driver 570.86 cannot start the CUDA 13.0 runtime (needs >= 580)"));
  CHECK(has(detail, "update the driver to >= 580, then: archbuild wheel --sm 110 --platform sbsa"));
  CHECK_FALSE(has(detail, "Way out: CUDA >= 13.0"));
  // GB10 on a 570 driver, any torch release: the newest CUDA 12 that builds sm_121, named.
  auto gb10 = t::archbuild({"install-command", "--sm", "121", "--driver", "570.86", "--json"}, h.options());
  auto g = nlohmann::json::parse(gb10.out);
  REQUIRE(g["build"].is_object());
  if (g["build"]["ok"] == true) {
    CHECK(has(g["build"]["command"].get<std::string>(), "--cuda 12."));
  } else {
    CHECK(has(g["build"]["detail"].get<std::string>(), "on torch " + t::newest_torch().line));  // only the newest line was asked
  }
}

TEST_CASE("install-command: a build advised for this machine names its libraries as `plan` decides them",
          "[cli][install]") {
  // The newest release's lists unknown (a copy of the data without them), so its build is the
  // answer, on this machine, with a driver that starts its CUDA 13 runtime.
  t::TempDir root;
  t::copy_data_root(root.path());
  const auto releases = root / "data" / "torch-releases.toml";
  std::string text = t::read_file(releases);
  const std::string lists = "[torch.\"" + t::newest_official().line + "\".arch_list]\n";
  auto at = text.find(lists);
  REQUIRE(at != std::string::npos);
  auto end = text.find("\n[", at + lists.size());
  text.erase(at, end - at + 1);
  std::ofstream(releases) << text;
  t::RunOptions with_data;
  with_data.env["ARCHBUILD_DATA_DIR"] = root.path().string();
  auto r = t::archbuild({"install-command", "--sm", "90", "--driver", "580.65.06", "--json"}, with_data);
  INFO(r.out << r.err);
  auto doc = nlohmann::json::parse(r.out);
  const auto& build = doc["build"];
  REQUIRE(build.is_object());
  if (build["ok"] != true) {
    WARN("##archbuild-skip## no recipe builds here: " << build["detail"].get<std::string>());
    return;
  }
  REQUIRE(build["libraries"].is_array());
  auto p = t::archbuild({"plan", "--sm", "90", "--recipe", build["recipe"].get<std::string>(), "--json"}, with_data);
  INFO(p.out.substr(0, 2000) << p.err);
  auto plan = nlohmann::json::parse(p.out);
  if (!plan.contains("libraries") || !plan["libraries"].is_object()) {
    WARN("##archbuild-skip## plan decided no libraries here (exit " << p.status << "): " << p.err.substr(0, 200));
    return;
  }
  std::vector<std::string> expected, got;
  for (const auto& l : plan["libraries"]["libraries"])
    if (l.contains("note") || (l["expected"] == true && l["state"] == "missing")) expected.push_back(l["name"]);
  for (const auto& line : build["libraries"]) {
    std::string s = line.get<std::string>();
    got.push_back(s.substr(0, s.find(' ')));
    if (s.find("NVPL") != std::string::npos) CHECK(t::machine() == "aarch64");  // NVPL is no x86_64 advice
  }
  CHECK(got == expected);
  // The human answer lists them under the build's command.
  auto human = t::archbuild({"install-command", "--sm", "90", "--driver", "580.65.06"}, with_data);
  for (const auto& name : expected) CHECK(has(human.out, "  library " + name));
}
