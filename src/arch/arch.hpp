// The architecture model: compute capabilities, a/f variants, SASS/PTX wishes.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace archbuild::arch {

// A compute capability, e.g. 9.0 or 12.1.
struct Cc {
  int major = 0;
  int minor = 0;
  auto operator<=>(const Cc&) const = default;
  int sm() const { return major * 10 + minor; }  // 90, 120
  std::string str() const;                       // "9.0", "12.0"
  static Cc from_sm(int sm) { return {sm / 10, sm % 10}; }
};

// `a`: arch-specific code that runs only on exactly that CC. `f`: family code that runs on the
// CCs of the same major at or above it (https://docs.nvidia.com/cuda/cuda-c-programming-guide/#binary-compatibility).
enum class Variant : std::uint8_t { none, a, f };
std::string_view suffix(Variant v);  // "", "a", "f"

struct Arch {
  Cc cc;
  Variant variant = Variant::none;
  bool sass = true;   // a cubin for exactly this arch
  bool ptx = false;   // PTX for this arch (JIT on newer GPUs)
  // `A(B)` form: the SASS for `cc` is compiled from compute_B instead of compute_A.
  std::optional<Cc> sass_from;

  // Identity for sorting and deduplication (flags are merged, not compared).
  std::tuple<Cc, Variant, Cc> key() const { return {cc, variant, sass_from.value_or(cc)}; }
  std::string sm_name() const;       // "sm_90a"
  std::string compute_name() const;  // "compute_90a"
  std::string cc_name() const;       // "9.0a"
};

// Sort by CC then variant, merge duplicates (their SASS/PTX wishes are OR-ed).
std::vector<Arch> normalize(std::vector<Arch> archs);

// Printers. Each takes a normalized list.
struct Printed {
  std::string text;
  std::vector<std::string> notes;  // what the format could not express exactly
};
Printed to_torch(const std::vector<Arch>& archs);   // "8.0;8.6;9.0+PTX"
Printed to_cmake(const std::vector<Arch>& archs);   // "80-real;86-real;90"
std::vector<std::string> to_nvcc(const std::vector<Arch>& archs);  // -gencode=… per image
Printed to_spack(const std::vector<Arch>& archs);   // "80,86,90"

}  // namespace archbuild::arch
