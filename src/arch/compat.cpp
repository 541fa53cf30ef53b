#include "arch/compat.hpp"

#include <fmt/format.h>

namespace archbuild::arch {

std::string CodeImage::name() const {
  return fmt::format("{}_{}{}", kind == CodeKind::sass ? "sm" : "compute", cc.sm(), suffix(variant));
}

std::string_view to_string(RunResult r) {
  switch (r) {
    case RunResult::native: return "native";
    case RunResult::compatible_sass: return "compatible-sass";
    case RunResult::ptx_jit: return "ptx-jit";
    default: return "no-kernel-image";
  }
}

RunResult runs_on(const CodeImage& image, Cc gpu) {
  const Cc& c = image.cc;
  if (image.kind == CodeKind::sass) {
    if (c == gpu) return RunResult::native;  // exact SASS, whatever its variant
    // `a` SASS runs only on its exact CC; plain and `f` SASS run on the same major at or
    // above their minor (f: the family). SASS never crosses majors.
    if (image.variant == Variant::a) return RunResult::no_kernel_image;
    if (c.major == gpu.major && c.minor <= gpu.minor) return RunResult::compatible_sass;
    return RunResult::no_kernel_image;
  }
  // PTX: plain PTX JITs to any CC at or above it; `a` PTX only on its exact CC; `f` PTX within
  // its family (same major, at or above).
  switch (image.variant) {
    case Variant::a: return c == gpu ? RunResult::ptx_jit : RunResult::no_kernel_image;
    case Variant::f:
      return (c.major == gpu.major && c <= gpu) ? RunResult::ptx_jit : RunResult::no_kernel_image;
    default: return c <= gpu ? RunResult::ptx_jit : RunResult::no_kernel_image;
  }
}

RunVerdict run_verdict(std::span<const CodeImage> code, Cc gpu) {
  RunVerdict best;
  for (const CodeImage& img : code) {
    RunResult r = runs_on(img, gpu);
    if (r == RunResult::no_kernel_image) continue;
    // Among equally good images prefer the closest to the GPU (the driver picks the newest
    // compatible SASS, and the newest PTX gives the best JIT).
    bool better = !best.image || r < best.result || (r == best.result && best.image->cc < img.cc);
    if (better) {
      best.result = r;
      best.image = img;
    }
  }
  return best;
}

std::vector<CodeImage> images_of(const std::vector<Arch>& archs) {
  std::vector<CodeImage> out;
  for (const Arch& a : archs) {
    if (a.sass) out.push_back({CodeKind::sass, a.cc, a.variant});
    if (a.ptx) out.push_back({CodeKind::ptx, a.cc, a.variant});
  }
  return out;
}

}  // namespace archbuild::arch
