// Fatbin containers and entries (../shared/reference/fatbin.md): which device code a host
// binary carries, read from uncompressed headers only. Optional verification decompresses.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arch/arch.hpp"
#include "binary/bytes.hpp"
#include "binary/elf.hpp"
#include "core/error.hpp"

namespace archbuild::binary {

inline constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;

// Ordered as reports list them: SASS first.
enum class EntryKind : std::uint8_t { sass, ptx, lto_ir, old_cubin };
enum class Compression : std::uint8_t { none, lz4, zstd, legacy };
// Where a container sits, which decides what it means at run time.
enum class Placement : std::uint8_t {
  runtime,      // .nv_fatbin: registered with the CUDA runtime at load
  relocatable,  // __nv_relfatbin: -rdc input to device linking, never loaded as is
  embedded,     // found in another data section (cuFFT's .ldata, cuBLASLt's .cask_resource)
};

std::string_view to_string(EntryKind k);    // "ptx", "sass", "lto-ir", "old-cubin"
std::string_view to_string(Compression c);  // "none", "lz4", "zstd", "legacy"
std::string_view to_string(Placement p);    // "runtime", "relocatable", "embedded"

struct Entry {
  EntryKind kind = EntryKind::sass;
  int sm = 0;                                   // decimal SM: 90, 120
  arch::Variant variant = arch::Variant::none;  // from the a/f flag bits
  Compression compression = Compression::none;
  std::uint64_t offset = 0;  // of the entry header, within the inspected bytes
  std::uint32_t header_size = 0;
  std::uint64_t stored_size = 0;        // payload bytes as stored (padded)
  std::uint32_t compressed_size = 0;    // 0 when not compressed
  std::uint64_t uncompressed_size = 0;  // 0 when not compressed
  std::uint64_t flags = 0;
  std::uint16_t version_major = 0;  // cubin format or PTX ISA version
  std::uint16_t version_minor = 0;

  // "sm_90a" (SASS), "compute_120" (PTX), "lto_75" (LTO-IR), "sm_50 (old cubin)".
  std::string name() const;
  // Payload size once decompressed (stored size when not compressed).
  std::uint64_t expanded_size() const { return compression == Compression::none ? stored_size : uncompressed_size; }
};

struct Container {
  Placement placement = Placement::runtime;
  std::string section;
  std::uint64_t offset = 0;  // of the container header, within the inspected bytes
  std::uint64_t size = 0;    // header + entries
  std::vector<Entry> entries;
};

// Image name for a kind, SM and variant ("sm_90a", "compute_120f", "lto_75").
std::string image_name(EntryKind kind, int sm, arch::Variant variant);

// Every container in `data`: those in .nv_fatbin and __nv_relfatbin (strictly: anything there
// but containers and zero padding is an error) and those found by scanning the other allocated
// data sections for the magic (only valid headers are accepted). Without a section table the
// whole file is scanned. Errors are one line without the file name.
// `prepare`, when set, is called with each file range just before it is scanned end to end
// (a mapped file populates it in one system call instead of faulting page by page).
using PrepareRange = std::function<void(std::uint64_t offset, std::uint64_t length)>;
Result<std::vector<Container>> read_containers(Bytes data, const Elf& elf, const PrepareRange& prepare = {});

// Scans [begin, end) of `data` for containers with valid headers (used for data sections).
// Fails only when crafted data would make the scan quadratic.
Result<std::vector<Container>> scan_containers(Bytes data, std::uint64_t begin, std::uint64_t end,
                                               const std::string& section, Placement placement);

struct VerifyOptions {
  // Refuse to decompress entries larger than this (a hostile header must not exhaust memory).
  std::uint64_t max_uncompressed = std::uint64_t{2} << 30;
};

enum class VerifyStatus : std::uint8_t {
  ok,         // decompressed and matches its header
  mismatch,   // does not decompress, or its contents disagree with the header
  unchecked,  // cannot be checked: the payload is encoded (flag 0x10000, seen on NVIDIA's LTO-IR)
};

struct VerifyResult {
  VerifyStatus status = VerifyStatus::ok;
  std::string message;  // what does not match, or why it was not checked
};

// Decompresses one entry and checks it against its header: a cubin's e_flags SM, a PTX
// `.target`, that an LTO-IR payload decompresses to its stated size.
VerifyResult verify_entry(Bytes data, const Entry& entry, const VerifyOptions& options = {});

}  // namespace archbuild::binary
