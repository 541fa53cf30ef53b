// Bounds-checked little-endian reads over untrusted bytes (ELF files, fatbins, zip members).
// Every offset in the input is hostile until checked: `fits` is the single overflow-safe test.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>

namespace archbuild::binary {

static_assert(std::endian::native == std::endian::little, "the readers load little-endian fields with memcpy");

using Bytes = std::span<const std::uint8_t>;

// Internal to the readers: thrown by the checked loads, turned into an Error value at each
// public entry point so callers only ever see Result<…>.
struct Malformed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// [off, off + len) lies within [0, size), without overflowing.
constexpr bool fits(std::uint64_t off, std::uint64_t len, std::uint64_t size) {
  return off <= size && len <= size - off;
}

template <class T>
T load(Bytes b, std::uint64_t off) {
  if (!fits(off, sizeof(T), b.size()))
    throw Malformed("read past the end of the data at offset " + std::to_string(off));
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

inline Bytes slice(Bytes b, std::uint64_t off, std::uint64_t len) {
  if (!fits(off, len, b.size()))
    throw Malformed("range at offset " + std::to_string(off) + " runs past the end of the data");
  return b.subspan(static_cast<std::size_t>(off), static_cast<std::size_t>(len));
}

std::string hex(std::uint64_t v);  // "0x1c80"

}  // namespace archbuild::binary
