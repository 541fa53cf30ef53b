// GPUs of this host: NVML, then the CUDA driver API (both loaded at run time with dlopen, so
// archbuild builds and runs where neither exists), then `nvidia-smi`.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "arch/arch_data.hpp"
#include "core/error.hpp"

namespace archbuild::detect {

struct DetectedGpu {
  int index = 0;
  std::string name;                 // as the driver reports it
  arch::Cc cc;
  std::optional<std::uint64_t> memory_bytes;
  const arch::Gpu* known = nullptr; // the database entry for the name, if any
  bool cc_known = false;            // whether data/gpus.toml knows this CC at all
};

struct Detection {
  std::string source;                    // "nvml", "cuda", "nvidia-smi"; empty when none answered
  std::string driver_version;            // "580.65.06"
  std::optional<std::string> cuda_version;  // CUDA the driver supports: "13.0"
  std::vector<DetectedGpu> gpus;
  std::vector<std::string> tried;        // why each source that did not answer failed
};

// Runs `nvidia-smi` (only run/ starts processes: the caller passes run::capture).
using SmiRunner = std::function<Result<std::pair<int, std::string>>(const std::vector<std::string>& argv)>;

struct DetectOptions {
  std::string only;                  // "", "nvml", "cuda", "nvidia-smi": use only that source
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string cuda_library = "libcuda.so.1";
  SmiRunner smi;                     // unset: nvidia-smi is not tried
};

// Never fails: a host without GPUs gives an empty `gpus` and the reasons in `tried`.
Detection detect(const arch::ArchData& data, const DetectOptions& options);

// Parses `nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version
// --format=csv,noheader,nounits` output.
Result<std::vector<DetectedGpu>> parse_smi_csv(const std::string& text, std::string* driver_version);

// "12080" style integers from NVML / cuDriverGetVersion -> "12.8".
std::string cuda_version_string(int v);

}  // namespace archbuild::detect
