// libFuzzer target: the ELF and fatbin readers, with --verify's decompression, on arbitrary
// bytes. Built with -fsanitize=fuzzer,address,undefined under ARCHBUILD_FUZZ; the same entry
// point replays tests/fuzz/corpus/elf in every build (replay_main.cpp).
#include <cstddef>
#include <cstdint>

#include "binary/elf.hpp"
#include "binary/inspect.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace archbuild::binary;
  InspectOptions options;
  options.verify = true;
  options.verify_options.max_uncompressed = 1 << 20;  // a header may claim any size
  auto report = inspect_elf(Bytes(data, size), "fuzz.so", options);
  if (report.ok()) {
    // The summaries walk every entry again; they must hold for whatever was accepted.
    (void)report->runtime_images();
    (void)report->relocatable_images();
    (void)report->code_images();
    (void)report->compression();
  } else if (report.error().message.empty()) {
    __builtin_trap();  // every refusal says why
  }
  // The dynamic section and version needs read the same hostile bytes.
  auto dyn = read_dynamic(Bytes(data, size));
  if (!dyn.ok() && dyn.error().message.empty()) __builtin_trap();
  return 0;
}
