// The facts behind the model, loaded from data/gpus.toml: which CCs exist, their variants,
// PyTorch's architecture names, and the GPU name database.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

namespace archbuild::arch {

struct KnownCc {
  Cc cc;
  std::string architecture;        // "Hopper"
  std::vector<Variant> variants;   // the suffixes that exist for it
  std::optional<Cc> renamed_to;    // 10.1 became 11.0 in CUDA 13
};

// A PyTorch architecture name and its two expansions (pytorch/pytorch torch/utils/cpp_extension.py _get_cuda_arch_flags).
struct ArchName {
  std::string name;                 // "Ampere", "Blackwell+Tegra"
  std::vector<Cc> build;            // select_compute_arch.cmake: SASS
  std::vector<Cc> build_ptx;        // … and the PTX that `Name+PTX` adds
  std::vector<Arch> extension;      // cpp_extension: with PTX on the last; empty: it has no such name
  std::optional<Version> min_cuda;  // PyTorch's parser knows the name only with this CUDA or newer
};

struct Gpu {
  std::string name;                 // "H100"
  Cc cc;
  std::vector<std::string> aliases; // other marketing names
  std::vector<std::string> smi;     // names nvidia-smi / NVML print
  // The one platform (toolchains/platforms.toml) this GPU sits on: "sbsa" for Grace and GB10,
  // "jetson" for L4T's integrated GPUs; "" when it is a card several platforms take.
  std::string platform;
};

class ArchData {
 public:
  static Result<ArchData> load(const std::filesystem::path& gpus_toml);
  // data/gpus.toml under data_root(); cached for the process.
  static const ArchData& shipped();

  const KnownCc* find(Cc cc) const;
  const std::vector<KnownCc>& ccs() const { return ccs_; }
  const ArchName* find_name(std::string_view name) const;  // case-insensitive
  const std::vector<ArchName>& names() const { return names_; }
  const std::vector<Gpu>& gpus() const { return gpus_; }
  std::string architecture(Cc cc) const;  // "Hopper", or "unknown"

  // GPUs whose name, alias or nvidia-smi name equals `query` (ignoring case and an
  // "NVIDIA"/"GeForce" prefix); when none does, those whose names contain it.
  std::vector<const Gpu*> match_gpus(std::string_view query) const;
  // The single best GPU for a name as nvidia-smi/NVML prints it ("NVIDIA H100 80GB HBM3").
  const Gpu* identify(std::string_view device_name) const;
  // Closest names to an unmatched query, for "did you mean".
  std::vector<std::string> nearest_gpu_names(std::string_view query, std::size_t limit = 5) const;

 private:
  std::vector<KnownCc> ccs_;
  std::vector<ArchName> names_;
  std::vector<Gpu> gpus_;
};

// "NVIDIA GeForce RTX 4090" -> "rtx 4090": lower case, vendor/brand prefixes and extra spaces gone.
std::string normalize_gpu_name(std::string_view name);

}  // namespace archbuild::arch
