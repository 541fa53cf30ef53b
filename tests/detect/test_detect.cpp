// detect: nvidia-smi parsing, source fallback order, reasons when nothing answers.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

#include "arch/arch_data.hpp"
#include "detect/detect.hpp"

using namespace archbuild;

namespace {
const arch::ArchData& data() {
  static arch::ArchData d =
      arch::ArchData::load(std::filesystem::path(ARCHBUILD_SOURCE_DIR) / "data" / "gpus.toml").take();
  return d;
}
}  // namespace

TEST_CASE("nvidia-smi CSV is parsed", "[detect]") {
  std::string driver;
  auto r = detect::parse_smi_csv(
      "0, NVIDIA H100 80GB HBM3, 9.0, 81559, 580.65.06\n1, NVIDIA GeForce RTX 5090, 12.0, 32607, 580.65.06\n",
      &driver);
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  CHECK((*r)[0].name == "NVIDIA H100 80GB HBM3");
  CHECK((*r)[0].cc.str() == "9.0");
  CHECK(*(*r)[0].memory_bytes == 81559ull * 1024 * 1024);
  CHECK((*r)[1].cc.str() == "12.0");
  CHECK((*r)[1].index == 1);
  CHECK(driver == "580.65.06");
  // Old drivers print "[N/A]" for compute_cap.
  auto old = detect::parse_smi_csv("0, Tesla K80, [N/A], 11441, 470.1\n", nullptr);
  REQUIRE_FALSE(old.ok());
  CHECK(old.error().message.find("510") != std::string::npos);
  CHECK_FALSE(detect::parse_smi_csv("garbage\n", nullptr).ok());
}

TEST_CASE("CUDA driver versions print as X.Y", "[detect]") {
  CHECK(detect::cuda_version_string(12080) == "12.8");
  CHECK(detect::cuda_version_string(13000) == "13.0");
  CHECK(detect::cuda_version_string(11080) == "11.8");
}

TEST_CASE("missing libraries fall through to nvidia-smi, and every reason is kept", "[detect]") {
  detect::DetectOptions o;
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  o.cuda_library = "/nonexistent/libcuda.so.1";
  std::vector<std::string> seen;
  o.smi = [&](const std::vector<std::string>& argv) -> Result<std::pair<int, std::string>> {
    seen = argv;
    return std::pair{0, std::string("0, NVIDIA H200, 9.0, 143771, 580.82.07\n")};
  };
  auto d = detect::detect(data(), o);
  CHECK(d.source == "nvidia-smi");
  REQUIRE(d.gpus.size() == 1);
  CHECK(d.gpus[0].known != nullptr);
  CHECK(d.gpus[0].known->name == "H200");
  CHECK(d.gpus[0].cc_known);
  CHECK(d.driver_version == "580.82.07");
  REQUIRE(d.tried.size() == 2);
  CHECK(d.tried[0].rfind("nvml:", 0) == 0);
  CHECK(d.tried[1].rfind("cuda:", 0) == 0);
  CHECK(seen.front() == "nvidia-smi");
  CHECK(seen[1].find("compute_cap") != std::string::npos);
}

TEST_CASE("a CC the database does not know is reported as such", "[detect]") {
  detect::DetectOptions o;
  o.only = "nvidia-smi";
  o.smi = [](const std::vector<std::string>&) -> Result<std::pair<int, std::string>> {
    return std::pair{0, std::string("0, NVIDIA Future 9000, 13.0, 1000, 600.1\n")};
  };
  auto d = detect::detect(data(), o);
  REQUIRE(d.gpus.size() == 1);
  CHECK_FALSE(d.gpus[0].cc_known);
  CHECK(d.gpus[0].known == nullptr);
}

TEST_CASE("no source answers: empty result with the reasons", "[detect]") {
  detect::DetectOptions o;
  o.nvml_library = "/nonexistent/a.so";
  o.cuda_library = "/nonexistent/b.so";
  o.smi = [](const std::vector<std::string>&) -> Result<std::pair<int, std::string>> {
    return Error::missing_tool("nvidia-smi: not found or not executable");
  };
  auto d = detect::detect(data(), o);
  CHECK(d.gpus.empty());
  CHECK(d.source.empty());
  CHECK(d.tried.size() == 3);
  o.smi = [](const std::vector<std::string>&) -> Result<std::pair<int, std::string>> {
    return std::pair{9, std::string("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")};
  };
  d = detect::detect(data(), o);
  CHECK(d.gpus.empty());
  CHECK(d.tried.back().find("couldn't communicate") != std::string::npos);
}

namespace {

detect::DetectedGpu gpu(int index, std::string uuid, std::string name = "NVIDIA H100 80GB HBM3") {
  detect::DetectedGpu g;
  g.index = index;
  g.uuid = std::move(uuid);
  g.name = std::move(name);
  g.cc = {9, 0};
  return g;
}

detect::Detection two_gpus() {
  detect::Detection d;
  d.source = "nvml";
  d.gpus = {gpu(0, "GPU-aaaaaaaa-0000-0000-0000-000000000000"), gpu(1, "GPU-bbbbbbbb-0000-0000-0000-000000000000")};
  return d;
}

// Sets environment variables for one test and restores them after.
struct Env {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  void set(const std::string& k, const std::optional<std::string>& v) {
    const char* old = std::getenv(k.c_str());
    saved.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
    if (v) setenv(k.c_str(), v->c_str(), 1);
    else unsetenv(k.c_str());
  }
  ~Env() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
      else unsetenv(it->first.c_str());
    }
  }
};

// Two H100s in PCI order; CUDA's default order (fastest first) puts the second first.
const char* kFakeGpus =
    "GPU-aaaaaaaa-1111-2222-3333-444444444444|NVIDIA H100 80GB HBM3|9|0|81559;"
    "GPU-bbbbbbbb-1111-2222-3333-444444444444|NVIDIA H100 NVL|9|0|95830";

// A job given "device 0" (CUDA_VISIBLE_DEVICES=0, CUDA's default order) on the two fake H100s.
detect::DetectOptions job_given_device_0(Env& env) {
  env.set("FAKE_GPUS", std::string(kFakeGpus));
  env.set("FAKE_CUDA_ORDER", std::string("1,0"));
  env.set("CUDA_DEVICE_ORDER", std::nullopt);
  env.set("CUDA_VISIBLE_DEVICES", std::string("0"));
  detect::DetectOptions o;
  o.nvml_library = FAKE_DRIVER_LIBRARY;
  o.cuda_library = FAKE_DRIVER_LIBRARY;
  o.visible_devices = "0";
  return o;
}

}  // namespace

TEST_CASE("CUDA_VISIBLE_DEVICES: the job's mask decides which GPUs it has, selected by UUID", "[detect]") {
  // No mask: every GPU, by UUID (order-free).
  auto d = two_gpus();
  detect::apply_visible_devices(d, std::nullopt, "", std::nullopt);
  REQUIRE(d.gpus.size() == 2);
  CHECK(d.gpus[1].cuda_select == "GPU-bbbbbbbb-0000-0000-0000-000000000000");
  CHECK_FALSE(d.gpus[1].pci_order);

  // An index in PCI order.
  d = two_gpus();
  detect::apply_visible_devices(d, std::string("1"), "PCI_BUS_ID", std::nullopt);
  REQUIRE(d.gpus.size() == 1);
  CHECK(d.gpus[0].index == 1);
  CHECK(d.gpus[0].cuda_select == "GPU-bbbbbbbb-0000-0000-0000-000000000000");
  REQUIRE(d.hidden.size() == 1);
  CHECK(d.hidden[0].find("GPU 0") != std::string::npos);

  // A UUID prefix.
  d = two_gpus();
  detect::apply_visible_devices(d, std::string("GPU-aaaa"), "", std::nullopt);
  REQUIRE(d.gpus.size() == 1);
  CHECK(d.gpus[0].index == 0);

  // An index in CUDA's default order: libcuda's list (under the mask) decides, not NVML's order.
  d = two_gpus();
  detect::apply_visible_devices(d, std::string("1"), "",
                                std::vector<std::string>{"GPU-bbbbbbbb-0000-0000-0000-000000000000",
                                                         "GPU-aaaaaaaa-0000-0000-0000-000000000000"});
  REQUIRE(d.gpus.size() == 1);
  CHECK(d.gpus[0].index == 0);
  // Without it, PCI order is assumed, and said.
  d = two_gpus();
  detect::apply_visible_devices(d, std::string("1"), "", std::nullopt);
  REQUIRE(d.gpus.size() == 1);
  CHECK(d.gpus[0].index == 1);
  REQUIRE(d.notes.size() == 1);
  CHECK(d.notes[0].find("PCI bus order assumed") != std::string::npos);

  // CUDA stops at the first entry it cannot use.
  d = two_gpus();
  detect::apply_visible_devices(d, std::string("0,7,1"), "PCI_BUS_ID", std::nullopt);
  REQUIRE(d.gpus.size() == 1);
  CHECK(d.gpus[0].index == 0);
  CHECK(d.notes.front().find("'7'") != std::string::npos);

  // MIG: a MIG-enabled GPU is selected through its MIG device; without one CUDA cannot use it.
  d = two_gpus();
  d.gpus[0].mig = true;
  d.gpus[0].mig_devices = {{"MIG-11111111-2222-3333-4444-555555555555", 10ull << 30}};
  d.gpus[1].mig = true;
  detect::apply_visible_devices(d, std::nullopt, "", std::nullopt);
  CHECK(d.gpus[0].cuda_select == "MIG-11111111-2222-3333-4444-555555555555");
  CHECK(d.gpus[1].cuda_select.empty());
  detect::apply_visible_devices(d, std::string("MIG-1111"), "", std::nullopt);
  REQUIRE(d.gpus.size() == 1);
  CHECK(d.gpus[0].cuda_select == "MIG-11111111-2222-3333-4444-555555555555");
}

TEST_CASE("NVML: UUIDs, MIG mode and MIG devices (fake NVML)", "[detect]") {
  Env env;
  env.set("FAKE_GPUS", std::string("GPU-aaaaaaaa-1111-2222-3333-444444444444|NVIDIA H100 80GB HBM3|9|0|81559|"
                                   "MIG-cccccccc-1111-2222-3333-444444444444:9856,MIG-dddddddd-1111-2222-3333-444444444444:9856;"
                                   "GPU-bbbbbbbb-1111-2222-3333-444444444444|NVIDIA H100 NVL|9|0|95830"));
  detect::DetectOptions o;
  o.only = "nvml";
  o.nvml_library = FAKE_DRIVER_LIBRARY;
  auto d = detect::detect(data(), o);
  REQUIRE(d.source == "nvml");
  REQUIRE(d.gpus.size() == 2);
  CHECK(d.gpus[0].uuid == "GPU-aaaaaaaa-1111-2222-3333-444444444444");
  CHECK(d.gpus[0].mig);
  REQUIRE(d.gpus[0].mig_devices.size() == 2);
  // What CUDA gets is a MIG device: its memory, not the whole GPU's.
  CHECK(*d.gpus[0].memory_bytes == 9856ull << 20);
  CHECK(d.gpus[0].cuda_select == "MIG-cccccccc-1111-2222-3333-444444444444");
  CHECK_FALSE(d.gpus[1].mig);
  CHECK(*d.gpus[1].memory_bytes == 95830ull << 20);
  CHECK(d.gpus[1].cuda_select == "GPU-bbbbbbbb-1111-2222-3333-444444444444");
  // A driver that does not know MIG for a GPU (NVML_ERROR_NOT_SUPPORTED): a whole GPU.
  env.set("FAKE_NO_MIG_SUPPORT", std::string("1"));
  env.set("FAKE_GPUS", std::string(kFakeGpus));
  d = detect::detect(data(), o);
  REQUIRE(d.gpus.size() == 2);
  CHECK_FALSE(d.gpus[0].mig);
}

TEST_CASE("NVML with the job's CUDA_VISIBLE_DEVICES in CUDA's default order (fake NVML and libcuda)", "[detect]") {
  Env env;
  auto o = job_given_device_0(env);
  auto d = detect::detect(data(), o);
  REQUIRE(d.source == "nvml");
  // The job's device 0 is, in CUDA's order, the second GPU on the bus — not NVML's GPU 0.
  REQUIRE(d.gpus.size() == 1);
  CHECK(d.gpus[0].index == 1);
  CHECK(d.gpus[0].cuda_select == "GPU-bbbbbbbb-1111-2222-3333-444444444444");
  REQUIRE(d.hidden.size() == 1);
}

TEST_CASE("the driver-API fallback keeps the job's mask and order (fake libcuda)", "[detect]") {
  Env env;
  auto o = job_given_device_0(env);
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  auto d = detect::detect(data(), o);
  REQUIRE(d.source == "cuda");
  REQUIRE(d.gpus.size() == 1);
  CHECK(d.gpus[0].name == "NVIDIA H100 NVL");
  CHECK(d.gpus[0].uuid == "GPU-bbbbbbbb-1111-2222-3333-444444444444");
  // The ordinal is CUDA's, under the job's mask and order: named by the job's own entry, and no
  // PCI order is forced on it (that would select the other GPU).
  CHECK(d.gpus[0].cuda_select == "0");
  CHECK_FALSE(d.gpus[0].pci_order);
  // A child given that selection, with the job's order, sees the same GPU.
  env.set("CUDA_VISIBLE_DEVICES", d.gpus[0].cuda_select);
  o.only = "cuda";
  auto child = detect::detect(data(), o);
  REQUIRE(child.gpus.size() == 1);
  CHECK(child.gpus[0].name == "NVIDIA H100 NVL");
}

TEST_CASE("real NVML and CUDA driver on a GPU host", "[gpu]") {
  detect::DetectOptions o;
  o.only = "nvml";
  auto nvml = detect::detect(data(), o);
  if (nvml.gpus.empty()) {
    WARN("##archbuild-skip## no GPU through NVML on this host (" << nvml.tried.front() << ")");
    return;
  }
  o.only = "cuda";
  auto cuda = detect::detect(data(), o);
  REQUIRE(cuda.gpus.size() == nvml.gpus.size());
  for (std::size_t i = 0; i < cuda.gpus.size(); ++i) {
    CHECK(cuda.gpus[i].cc == nvml.gpus[i].cc);
    CHECK(nvml.gpus[i].cc_known);
    CHECK(nvml.gpus[i].memory_bytes.value_or(0) > 0);
  }
  CHECK_FALSE(nvml.driver_version.empty());
  CHECK(nvml.cuda_version.has_value());
}
