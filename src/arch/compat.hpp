// The run-compatibility rule (https://docs.nvidia.com/cuda/cuda-c-programming-guide/#binary-compatibility): which device code a GPU of a given CC can run.
// Shared by inspect, doctor and validate.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "arch/arch.hpp"

namespace archbuild::arch {

enum class CodeKind : std::uint8_t { sass, ptx };

// One image a binary carries: SASS (cubin) or PTX, for one arch and variant.
struct CodeImage {
  CodeKind kind = CodeKind::sass;
  Cc cc;
  Variant variant = Variant::none;
  auto operator<=>(const CodeImage&) const = default;
  std::string name() const;  // "sm_90a" or "compute_120"
};

enum class RunResult : std::uint8_t {
  native,           // SASS for exactly this CC
  compatible_sass,  // SASS of the same major and a lower minor (or the family's `f` SASS)
  ptx_jit,          // only PTX the driver can JIT-compile (slow first launch)
  no_kernel_image,  // "no kernel image is available for execution on the device"
};
std::string_view to_string(RunResult r);  // "native", "compatible-sass", "ptx-jit", "no-kernel-image"

struct RunVerdict {
  RunResult result = RunResult::no_kernel_image;
  std::optional<CodeImage> image;  // the image the driver would load
};

// Whether a single image runs on a GPU of CC `gpu`, and how.
RunResult runs_on(const CodeImage& image, Cc gpu);
// The best image among `code` for `gpu` (native > compatible SASS > PTX JIT).
RunVerdict run_verdict(std::span<const CodeImage> code, Cc gpu);

// The images a build for `archs` produces (SASS per sass arch, PTX per ptx arch).
std::vector<CodeImage> images_of(const std::vector<Arch>& archs);

}  // namespace archbuild::arch
