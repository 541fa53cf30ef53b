#include "core/heap.hpp"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace archbuild {

namespace {
constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
void* volatile below_first = nullptr;
}

bool use_huge_pages_for_heap() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
  // Grow the heap now: a block larger than the top's free space comes from the top, which malloc
  // extends by what is missing plus the 64 MiB pad. malloc touches only the block's header and
  // the next chunk's, at the block's end.
  constexpr std::uintptr_t kProbe = std::uintptr_t{4} << 20;
  void* block = std::malloc(kProbe);
  if (block == nullptr) return false;
  const auto start = reinterpret_cast<std::uintptr_t>(block);
  const auto brk = reinterpret_cast<std::uintptr_t>(::sbrk(0));
  std::free(block);
  // Where brk could not grow, malloc maps the block elsewhere: nothing here is the heap's.
  if (brk < start || brk - start < kProbe) return false;
  // Advise only 2 MiB ranges no byte of which was touched yet: one touched before the advice has
  // its page table of 4 KiB pages already, and stays on them.
  const std::uintptr_t first = (start + kProbe + 4096 + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t last = brk & ~(kHugePage - 1);
  if (last <= first) return false;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE) != 0) return false;
  // The bytes below `first` are taken once, never freed and never touched (but for malloc's
  // headers, below `first`), so that what is allocated next comes from the advised range. The
  // pointer is kept where the compiler must store it: GCC removes a malloc whose result is
  // unused, and did so here before (every allocation then came from below `first`).
  below_first = std::malloc(first - start - 64);
  return below_first != nullptr;
}

}  // namespace archbuild
