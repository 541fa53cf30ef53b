#include "core/heap.hpp"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace archbuild {

namespace {
constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
}

bool use_huge_pages_for_heap() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
  // Grow the heap now: a block larger than any free one comes from the heap's top, which malloc
  // extends by what is missing plus the 64 MiB pad. Nothing of it is touched but its header.
  void* block = std::malloc(std::size_t{16} << 20);
  if (block == nullptr) return false;
  const auto start = reinterpret_cast<std::uintptr_t>(block);
  const auto brk = reinterpret_cast<std::uintptr_t>(::sbrk(0));
  std::free(block);
  // Where brk could not grow, malloc maps the block elsewhere: nothing here is the heap's.
  if (brk < start || brk - start < (std::uintptr_t{16} << 20)) return false;
  const std::uintptr_t first = (start + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t last = brk & ~(kHugePage - 1);
  // The bytes up to the first 2 MiB boundary are taken once, never freed, so that what is
  // allocated next comes from the huge pages above them (a few KiB of them are touched).
  if (first - start > 64) {
    [[maybe_unused]] static void* const below_first = std::malloc(first - start - 64);
  }
  if (last <= first) return false;
  return ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE) == 0;
}

}  // namespace archbuild
