// core/heap: the heap on transparent huge pages.
#include <catch2/catch.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/heap.hpp"

using namespace archbuild;

namespace {

std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  return line;  // "always [madvise] never"; empty without transparent huge pages
}

// A counter of /proc/vmstat, or -1.
long vmstat(const std::string& name) {
  std::ifstream in("/proc/vmstat");
  std::string key;
  long value = 0;
  while (in >> key >> value)
    if (key == name) return value;
  return -1;
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct Mapping {
  std::string name;      // "[heap]", a path, or empty for anonymous mmaps
  std::string vm_flags;  // "rd wr mr mw me ac hg"
};

// The mapping of this process that holds `address`, from /proc/self/smaps.
Mapping mapping_of(const void* address) {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  Mapping m;
  while (std::getline(in, line)) {
    std::uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream fields(line);
    if (fields >> std::hex >> begin >> dash >> end && dash == '-') {
      if (inside) break;  // the next mapping began without VmFlags: nothing more to read
      inside = begin <= a && a < end;
      if (inside) {
        std::string perms, offset, device, inode;
        fields >> perms >> offset >> device >> inode;
        std::getline(fields >> std::ws, m.name);
      }
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) {
      m.vm_flags = line.substr(8);
      return m;
    }
  }
  return m;
}

}  // namespace

TEST_CASE("the heap serves allocations up to 32 MiB from memory advised onto huge pages", "[heap]") {
  const std::string mode = thp_mode();
  if (mode.empty() || mode.find("[never]") != std::string::npos) {
    WARN("##archbuild-skip## transparent huge pages are off on this kernel (" +
         (mode.empty() ? std::string("no /sys/kernel/mm/transparent_hugepage") : mode) + ")");
    return;
  }
  if (!use_huge_pages_for_heap()) {
    // Where brk cannot grow the heap by its 64 MiB pad (qemu-user emulates brk in a small range
    // after the program: scripts/test-arm64), malloc's blocks are not brk's and nothing is
    // advised: a skip. Where brk can grow, false is the failure it was.
    constexpr std::intptr_t kGrow = std::intptr_t{68} << 20;
    if (::sbrk(kGrow) == reinterpret_cast<void*>(-1)) {
      WARN("##archbuild-skip## brk cannot grow the heap by 68 MiB here (sbrk failed; qemu-user emulates brk in a small range)");
      return;
    }
    ::sbrk(-kGrow);
    FAIL("use_huge_pages_for_heap() is false although brk can grow the heap");
  }
  // 4 MiB: glibc's default would mmap it apart from the heap (threshold 128 KiB), on 4 KiB pages.
  const std::size_t size = std::size_t{4} << 20;
  const long fallbacks_before = vmstat("thp_fault_fallback");
  const long faults_before = minor_faults();
  void* block = std::malloc(size);
  REQUIRE(block != nullptr);
  std::memset(block, 1, size);
  const long faults = minor_faults() - faults_before;
  const Mapping m = mapping_of(static_cast<char*>(block) + (std::size_t{2} << 20));
  std::free(block);
  INFO("mapping: '" << m.name << "', VmFlags:" << m.vm_flags);
  CHECK(m.name == "[heap]");
  CHECK((" " + m.vm_flags + " ").find(" hg ") != std::string::npos);
  // Touched, the block costs a fault per 2 MiB (1,024 on 4 KiB pages). This failed when the
  // advised range was not where malloc took the next blocks from (GCC had removed a malloc).
  if (vmstat("thp_fault_fallback") > fallbacks_before) {
    WARN("##archbuild-skip## the kernel had no free huge page to give (thp_fault_fallback grew): " << faults
                                                                                                  << " faults");
    return;
  }
  INFO(faults << " page faults touching 4 MiB");
  CHECK(faults < 64);
}
