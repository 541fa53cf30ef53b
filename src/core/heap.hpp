// The heap on transparent huge pages (2 MiB), for the whole process.
//
// Why: on the hosts measured (bench/inspect) a page fault costs 12-20 us, and most of what
// `inspect` allocates lands on pages nothing touched before: vectors of containers as they
// grow, each container's entries, the read windows. cuFFT's 24,000 containers cost ~1,400
// such faults, a third of its run. On 2 MiB pages one fault maps what took 512.
//
// What it does: glibc's main arena serves every thread (one arena: the others would be
// mmap'd heaps this cannot reach) and every allocation below 32 MiB (not fresh mmaps), keeps
// freed memory (no trimming below 128 MiB), and grows in steps of 64 MiB of address space, of
// which only what is touched becomes memory. That range is madvise'd MADV_HUGEPAGE: with
// transparent huge pages in "madvise" or "always" mode (Debian's default is madvise) the
// kernel then maps it 2 MiB at a time; with "never" nothing changes but the malloc settings.
#pragma once

namespace archbuild {

// Call before any thread starts, in the commands that read large binaries (inspect, validate).
// Returns whether the kernel took the advice.
bool use_huge_pages_for_heap();

}  // namespace archbuild
