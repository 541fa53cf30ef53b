// Parsing every spelling of an architecture list a user types (PyTorch's TORCH_CUDA_ARCH_LIST, CMake's CUDA_ARCHITECTURES, nvcc's -gencode, Spack's and EasyBuild's cuda_arch).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arch/arch.hpp"
#include "arch/arch_data.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

namespace archbuild::arch {

// Which reader's rules apply to names and bare numbers:
//  build:     PyTorch's select_compute_arch.cmake (names add PTX only as `Name+PTX`)
//  extension: torch.utils.cpp_extension (names carry PTX on their last arch; no `f`, no `A(B)`)
//  cmake:     CMAKE_CUDA_ARCHITECTURES (a plain `90` means SASS and PTX)
enum class Grammar { build, extension, cmake };

struct ParseOptions {
  Grammar grammar = Grammar::build;
  // Gives meaning to `native`, `all`, `all-major`, `common`, `auto`: only a toolkit or the
  // GPUs of this host can. Unset: these keywords are refused with a pointer to what can.
  std::function<Result<std::vector<Arch>>(std::string_view keyword)> keyword;
  // The CUDA release the list is for, when known: names PyTorch's parser knows only from a newer
  // CUDA (gpus.toml `min_cuda`, e.g. Rubin from 13.4) are refused.
  std::optional<Version> cuda;
};

// Parses one or more lists (items separated by `;`, `,` or whitespace) into a normalized,
// non-empty arch list. Errors name the offending token and the nearest valid spellings.
Result<std::vector<Arch>> parse_arch_list(std::string_view text, const ArchData& data,
                                          const ParseOptions& options = {});
Result<std::vector<Arch>> parse_arch_lists(const std::vector<std::string>& texts,
                                           const ArchData& data, const ParseOptions& options = {});

}  // namespace archbuild::arch
