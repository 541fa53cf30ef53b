// The search for a fatbin container's magic (50 ED 55 BA) in the data sections that inspect
// scans: most of inspect's CPU time on large libraries (libcublasLt: ~200 MB searched).
//
// Vectorised, picked once per process: AVX2 on x86-64 CPUs that have it, else 16-byte vectors,
// which every x86-64 (SSE2) and aarch64 (NEON) has. Each is written with vectors of exactly its
// width: GCC 12 turns a 32-byte vector type on a 16-byte target into byte-by-byte code (0.8 GB/s
// against AVX2's 57 GB/s, measured), which is what the fallback of the previous single
// implementation (x86-64 without AVX2, and aarch64) did. Not memchr on one byte: it stops too
// often (every ~300 bytes in libcublasLt's .rodata); not memmem: slow on a 4-byte needle.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace archbuild::binary {

// The first q in [p, stop) where base[q] == 0x50 and base[q + 3] == 0xBA (the magic's first and
// last bytes; the caller checks the two between), or `stop`. base[stop + 2] must be readable.
std::uint64_t find_magic_candidate(const std::uint8_t* base, std::uint64_t p, std::uint64_t stop);

// The implementations this CPU can run, by name ("avx2", "vector16"), the one
// find_magic_candidate uses first; for tests, which run each against a byte-by-byte search.
std::vector<std::string_view> magic_search_implementations();
std::uint64_t find_magic_candidate_with(std::string_view implementation, const std::uint8_t* base, std::uint64_t p,
                                        std::uint64_t stop);

}  // namespace archbuild::binary
