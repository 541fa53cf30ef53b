#include "binary/magic_search.hpp"

#include <cstring>

namespace archbuild::binary {

namespace {

using SearchFn = std::uint64_t (*)(const std::uint8_t*, std::uint64_t, std::uint64_t);

// Four vectors of W bytes per step: each position compared with the first byte, the position 3
// later with the last, the hits of the four ORed so that one test decides the step; the byte
// loop finds which position. A macro, not a template: GCC lowers the vector operations of an
// inlined template for the target of the template's own definition (byte-by-byte code again),
// not for the target of the function it is inlined into.
#define ARCHBUILD_MAGIC_SEARCH(NAME, W)                                                         \
  std::uint64_t NAME(const std::uint8_t* base, std::uint64_t p, std::uint64_t stop) {           \
    using Bytes = std::uint8_t __attribute__((vector_size(W)));                                 \
    using Words = std::uint64_t __attribute__((vector_size(W)));                                \
    const Bytes first = Bytes{} + std::uint8_t{0x50};                                          \
    const Bytes last = Bytes{} + std::uint8_t{0xBA};                                           \
    while (stop - p >= 4 * (W)) {                                                               \
      Bytes hits{};                                                                             \
      for (int k = 0; k < 4; ++k) {                                                             \
        Bytes a, b;                                                                             \
        std::memcpy(&a, base + p + k * (W), (W));                                               \
        std::memcpy(&b, base + p + k * (W) + 3, (W));                                           \
        hits |= (a == first) & (b == last);                                                     \
      }                                                                                         \
      const auto words = reinterpret_cast<Words>(hits);                                         \
      std::uint64_t any = 0;                                                                    \
      for (int i = 0; i < (W) / 8; ++i) any |= words[i];                                        \
      if (any != 0) break;                                                                      \
      p += 4 * (W);                                                                             \
    }                                                                                           \
    for (; p < stop; ++p)                                                                       \
      if (base[p] == 0x50 && base[p + 3] == 0xBA) return p;                                     \
    return stop;                                                                                \
  }

ARCHBUILD_MAGIC_SEARCH(search16, 16)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ARCHBUILD_X86_DISPATCH 1
// No AVX-512 version: 25% faster alone on a buffer in L2, it made inspect 0.8-1.7 ms slower on the
// VM measured (AMD EPYC), between reads that each enter the kernel; AVX2 is what is used there.
[[gnu::target("avx2")]] ARCHBUILD_MAGIC_SEARCH(search_avx2, 32)
#endif

struct Implementation {
  std::string_view name;
  SearchFn fn;
};

// Widest first.
std::vector<Implementation> supported() {
  std::vector<Implementation> out;
#ifdef ARCHBUILD_X86_DISPATCH
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) out.push_back({"avx2", search_avx2});
#endif
  out.push_back({"vector16", search16});
  return out;
}

const std::vector<Implementation>& implementations() {
  static const std::vector<Implementation> all = supported();
  return all;
}

}  // namespace

std::uint64_t find_magic_candidate(const std::uint8_t* base, std::uint64_t p, std::uint64_t stop) {
  static const SearchFn best = implementations().front().fn;
  return best(base, p, stop);
}

std::vector<std::string_view> magic_search_implementations() {
  std::vector<std::string_view> names;
  for (const auto& i : implementations()) names.push_back(i.name);
  return names;
}

std::uint64_t find_magic_candidate_with(std::string_view implementation, const std::uint8_t* base, std::uint64_t p,
                                        std::uint64_t stop) {
  for (const auto& i : implementations())
    if (i.name == implementation) return i.fn(base, p, stop);
  return find_magic_candidate(base, p, stop);
}

}  // namespace archbuild::binary
