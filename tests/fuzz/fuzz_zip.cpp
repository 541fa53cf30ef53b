// libFuzzer target: the zip/wheel reader (libarchive in memory, member-name checks, ELF members
// inspected with --verify). Built like fuzz_elf.cpp; replays tests/fuzz/corpus/zip.
#include <cstddef>
#include <cstdint>

#include "binary/inspect.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace archbuild::binary;
  InspectOptions options;
  options.verify = true;
  options.verify_options.max_uncompressed = 1 << 20;
  options.max_member_size = 4 << 20;  // zip bombs stop here
  auto result = inspect_zip(Bytes(data, size), "fuzz.whl", options);
  if (result.ok()) {
    for (const auto& f : result->files) {
      (void)f.runtime_images();
      (void)f.code_images();
    }
  } else if (result.error().message.empty()) {
    __builtin_trap();
  }
  return 0;
}
