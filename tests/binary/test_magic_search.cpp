// binary/magic_search: every implementation this CPU runs finds what a byte-by-byte search finds.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "binary/magic_search.hpp"

using namespace archbuild::binary;

namespace {

std::uint64_t byte_by_byte(const std::vector<std::uint8_t>& b, std::uint64_t p, std::uint64_t stop) {
  for (; p < stop; ++p)
    if (b[p] == 0x50 && b[p + 3] == 0xBA) return p;
  return stop;
}

}  // namespace

TEST_CASE("magic search: every implementation finds the first candidate a byte loop finds", "[binary][magic]") {
  const auto names = magic_search_implementations();
  REQUIRE_FALSE(names.empty());
  CHECK(names.back() == "vector16");  // the fallback every CPU runs
  std::string list;
  for (auto n : names) list += std::string(n) + " ";
  INFO("implementations on this CPU: " << list);

  std::mt19937_64 rng(17);
  // Random bytes without either magic byte, then candidates planted: at every offset of the
  // first 600 bytes (every alignment and every position inside a vector step of each width),
  // near the end (the tail after the last whole step), and a first byte without the last one
  // 3 later (no candidate) just before.
  std::vector<std::uint8_t> base(5000);
  for (auto& x : base) {
    do x = static_cast<std::uint8_t>(rng());
    while (x == 0x50 || x == 0xBA);
  }
  for (auto name : names) {
    INFO(std::string(name));
    CHECK(find_magic_candidate_with(name, base.data(), 0, base.size() - 3) == base.size() - 3);
    for (std::uint64_t at : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{63}, std::uint64_t{64},
                             std::uint64_t{255}, std::uint64_t{256}, std::uint64_t{257}, std::uint64_t{4990},
                             std::uint64_t{4996}}) {
      for (std::uint64_t q = 0; q < 600; ++q) {
        auto b = base;
        const std::uint64_t where = at + q < b.size() - 3 ? at + q : b.size() - 4;
        b[where] = 0x50;
        b[where + 3] = 0xBA;
        if (where >= 2) b[where - 2] = 0x50;  // its last byte would be at where + 1: not a candidate
        for (std::uint64_t from : {std::uint64_t{0}, where > 5 ? where - 5 : 0, where}) {
          const std::uint64_t stop = b.size() - 3;
          INFO("candidate at " << where << ", search from " << from);
          REQUIRE(find_magic_candidate_with(name, b.data(), from, stop) == byte_by_byte(b, from, stop));
        }
        // A stop before the candidate: not found.
        REQUIRE(find_magic_candidate_with(name, b.data(), 0, where) == byte_by_byte(b, 0, where));
      }
    }
  }
  // Many candidates: the first is found, and the next from one past it.
  for (auto name : names) {
    INFO(std::string(name));
    std::vector<std::uint8_t> b(1 << 16);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng() % 4 == 0 ? 0x50 : rng() % 3 == 0 ? 0xBA : rng());
    const std::uint64_t stop = b.size() - 3;
    for (std::uint64_t p = 0, n = 0; p < stop && n < 2000; ++n) {
      const std::uint64_t want = byte_by_byte(b, p, stop);
      REQUIRE(find_magic_candidate_with(name, b.data(), p, stop) == want);
      p = want + 1;
    }
  }
}
