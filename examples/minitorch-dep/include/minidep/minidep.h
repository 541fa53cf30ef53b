// minidep: launch-geometry helpers shared by host and device code.
#pragma once

#define MINIDEP_VERSION "1.0"

#if defined(__CUDACC__)
#define MINIDEP_HD __host__ __device__
#else
#define MINIDEP_HD
#endif

namespace minidep {

// Smallest q with q * d >= n (d > 0).
MINIDEP_HD constexpr int ceil_div(int n, int d) { return (n + d - 1) / d; }

// Blocks of `threads` threads needed to give every one of n elements a thread, capped so a
// grid-stride loop covers the rest.
MINIDEP_HD constexpr int blocks_for(int n, int threads, int max_blocks = 65535) {
  int b = ceil_div(n > 0 ? n : 1, threads);
  return b < max_blocks ? b : max_blocks;
}

}  // namespace minidep
