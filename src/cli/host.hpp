// Facts about this host that several commands need, gathered through run/ and detect/.
#pragma once

#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "arch/arch_data.hpp"
#include "arch/parse.hpp"
#include "core/error.hpp"
#include "detect/detect.hpp"

namespace archbuild::cli {

// Detection with nvidia-smi run through run::capture. ARCHBUILD_NVML_LIBRARY and
// ARCHBUILD_CUDA_LIBRARY override the library names (tests point them at nothing).
detect::Detection detect_host(const arch::ArchData& data, const std::string& only_source = "");

// Parses `--sm` values; `native` means the GPUs detect_host finds (an error when there are none).
// `cuda` (--cuda, when given) refuses names PyTorch knows only from a newer CUDA.
Result<std::vector<arch::Arch>> parse_targets(const std::vector<std::string>& values,
                                              const arch::ArchData& data,
                                              arch::Grammar grammar = arch::Grammar::build,
                                              std::optional<Version> cuda = std::nullopt);

}  // namespace archbuild::cli
