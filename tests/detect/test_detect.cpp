// detect: nvidia-smi parsing, source fallback order, reasons when nothing answers.
#include <catch2/catch.hpp>

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
