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

// A MIG device (a slice of a MIG-enabled GPU): what CUDA sees instead of the GPU.
struct MigDevice {
  std::string uuid;  // "MIG-…"
  std::optional<std::uint64_t> memory_bytes;
};

struct DetectedGpu {
  int index = 0;                    // the source's: NVML and nvidia-smi in PCI bus order, CUDA its ordinal
  std::string name;                 // as the driver reports it
  arch::Cc cc;
  std::optional<std::uint64_t> memory_bytes;  // a MIG-enabled GPU: its first MIG device's, what CUDA gets
  const arch::Gpu* known = nullptr; // the database entry for the name, if any
  bool cc_known = false;            // whether data/gpus.toml knows this CC at all
  std::string uuid;                 // "GPU-…"; empty when the source does not say
  bool mig = false;                 // MIG mode enabled: CUDA sees its MIG devices, not the GPU
  std::vector<MigDevice> mig_devices;
  // What a child process's CUDA_VISIBLE_DEVICES names to get this GPU as its device 0: a UUID
  // (order-free), else an index; `pci_order`: the index is in PCI bus order (CUDA_DEVICE_ORDER=
  // PCI_BUS_ID with it). Empty: CUDA cannot use it (MIG enabled without a MIG device).
  std::string cuda_select;
  bool pci_order = false;
  // An integrated GPU (CU_DEVICE_ATTRIBUTE_INTEGRATED, read through the CUDA driver API): a
  // Jetson's, which NVML does not list in L4T before JetPack 7; unset when the source does not say.
  std::optional<bool> integrated;
};

struct Detection {
  std::string source;                    // "nvml", "cuda", "nvidia-smi"; empty when none answered
  std::string driver_version;            // "580.65.06"
  std::optional<std::string> cuda_version;  // CUDA the driver supports: "13.0"
  std::vector<DetectedGpu> gpus;
  std::vector<std::string> tried;        // why each source that did not answer failed
  // GPUs the job's CUDA_VISIBLE_DEVICES hides (NVML and nvidia-smi see every GPU): why, one each.
  std::vector<std::string> hidden;
  std::vector<std::string> notes;
};

// Runs `nvidia-smi` (only run/ starts processes: the caller passes run::capture).
using SmiRunner = std::function<Result<std::pair<int, std::string>>(const std::vector<std::string>& argv)>;

struct DetectOptions {
  std::string only;                  // "", "nvml", "cuda", "nvidia-smi": use only that source
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string cuda_library = "libcuda.so.1";
  SmiRunner smi;                     // unset: nvidia-smi is not tried
  // The job's CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER (unset: every GPU, CUDA's default order).
  std::optional<std::string> visible_devices;
  std::string device_order;
};

// Never fails: a host without GPUs gives an empty `gpus` and the reasons in `tried`.
Detection detect(const arch::ArchData& data, const DetectOptions& options);

// Parses `nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version
// --format=csv,noheader,nounits` output.
Result<std::vector<DetectedGpu>> parse_smi_csv(const std::string& text, std::string* driver_version);

// Keeps the GPUs of `d` (NVML's or nvidia-smi's: every GPU, PCI order) that the job's
// CUDA_VISIBLE_DEVICES `mask` leaves to CUDA, each with the name to select it by; the others go to
// d.hidden. Integers in the mask are in CUDA_DEVICE_ORDER `order`: PCI order only with
// "PCI_BUS_ID"; otherwise `cuda_uuids` (the UUIDs libcuda lists under the mask) decide, or, without
// them, PCI order is assumed with a note. As CUDA does, the mask ends at its first unusable entry.
void apply_visible_devices(Detection& d, const std::optional<std::string>& mask, const std::string& order,
                           const std::optional<std::vector<std::string>>& cuda_uuids);

// 16 bytes of a CUuuid -> "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (nvidia-smi's form).
std::string uuid_string(const unsigned char* bytes);

// "12080" style integers from NVML / cuDriverGetVersion -> "12.8".
std::string cuda_version_string(int v);

}  // namespace archbuild::detect
