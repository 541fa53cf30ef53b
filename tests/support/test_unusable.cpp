// support/process: unusable() — the skip reason of tests that need a host program (nvcc): absent,
// or built for another machine than the tests (the x86_64 nvcc beside aarch64 tests under qemu).
#include <catch2/catch.hpp>

#include <string>

#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;

namespace {
// The first 20 bytes of a little-endian ELF64 executable for e_machine `machine`.
std::string elf_header(unsigned machine) {
  std::string h = {'\x7f', 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0};
  h += static_cast<char>(machine & 0xff);
  h += static_cast<char>(machine >> 8);
  return h + std::string(44, '\0');
}
}  // namespace

TEST_CASE("unusable: absent, foreign machine, own machine, script", "[support]") {
  t::TempDir dir;
  CHECK(t::unusable((dir / "nvcc").string()) == "no " + (dir / "nvcc").string());
  // This test's own executable is for this machine.
  CHECK(t::unusable("/proc/self/exe").empty());
  CHECK(t::unusable(dir.write("tool.sh", "#!/bin/sh\n").string()).empty());
#if defined(__x86_64__)
  const unsigned other = 183;
  const std::string own = "x86_64", foreign = "aarch64";
#else
  const unsigned other = 62;
  const std::string own = "aarch64", foreign = "x86_64";
#endif
  auto nvcc = dir.write("bin/nvcc", elf_header(other));
  CHECK(t::unusable(nvcc.string()) == nvcc.string() + " is an " + foreign + " program and these tests are " + own +
                                           " (an " + own + " host has its own)");
}
