// Fatbin containers and entries (the wrapper is the toolkit's include/fatbinary_section.h; the container is what nvcc writes into .nv_fatbin): which device code a host
// binary carries, read from uncompressed headers only. Optional verification decompresses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arch/arch.hpp"
#include "binary/byte_reader.hpp"
#include "binary/bytes.hpp"
#include "binary/elf.hpp"
#include "core/error.hpp"

namespace archbuild::binary {

inline constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;
// Entry flag set (with a non-zero word at 0x30) on the LTO-IR that cuFFT and cuSPARSE ship: the
// payload is not plain LZ4 then, so verification cannot check it.
inline constexpr std::uint64_t kEntryFlagEncoded = 0x10000;

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

// How read_containers finds the containers of .nv_fatbin and __nv_relfatbin.
enum class ScanMode : std::uint8_t {
  // Those .nvFatBinSegment registers in scanned sections are parsed where its pointers say
  // and skipped by the scan; in .nv_fatbin they are where a walk may start, so a walk is
  // split into parts for threads. The rest is read as in `full`. Same result, fewer bytes read.
  registered,
  // Every container by walking .nv_fatbin and __nv_relfatbin and scanning every other data
  // section: the reference the registered mode is tested against.
  full,
};

// Every container in the input: those in .nv_fatbin and __nv_relfatbin (strictly: anything
// there but containers and zero padding is an error) and those found by scanning the other
// allocated data sections for the magic (only valid headers are accepted; bytes of containers
// already found are skipped, not read). Without a section table the whole file is scanned.
// Errors are one line without the file name. A ByteReader over a file reads only the bytes
// the walk and the scan need (the scan with large pread buffers). With `threads` > 1, large
// data sections are scanned in parts on that many threads; the result is the same.
Result<std::vector<Container>> read_containers(ByteReader& in, const Elf& elf, ScanMode mode = ScanMode::registered,
                                               unsigned threads = 1);
Result<std::vector<Container>> read_containers(Bytes data, const Elf& elf, ScanMode mode = ScanMode::registered,
                                               unsigned threads = 1);

// One 24-byte wrapper of .nvFatBinSegment (magic 0x466243B1, version, data pointer, …): a
// container the CUDA runtime registers at load. The pointer is a virtual address; in a
// shared object the loader writes base + the addend of an R_X86_64_RELATIVE
// (R_AARCH64_RELATIVE) relocation of the field, which GNU ld also stores in the field and lld
// leaves 0.
struct FatbinRegistration {
  std::uint64_t wrapper = 0;         // file offset of the wrapper
  std::uint32_t version = 0;         // 1; 2 for -rdc code (NCCL's __nv_relfatbin)
  std::uint64_t field_address = 0;   // virtual address of the pointer field
  std::uint64_t stored_address = 0;  // the pointer as stored in the file
  std::optional<std::uint64_t> relocated_address;  // the addend of its RELATIVE relocation, when read
  // What the loader will use: the relocation's addend where there is one.
  std::uint64_t address() const { return relocated_address.value_or(stored_address); }
};

// When read_registrations reads the relocation tables (a large library has megabytes of them).
enum class RelocationUse : std::uint8_t {
  when_needed,  // only when a stored pointer maps to no section (lld's zeros)
  always,       // every wrapper gets its relocation's addend where one exists
  never,
};

// The wrappers of .nvFatBinSegment (none without one). Wrappers with another magic are left
// out. Errors are one line without the file name.
Result<std::vector<FatbinRegistration>> read_registrations(ByteReader& in, const Elf& elf,
                                                           RelocationUse relocations = RelocationUse::when_needed);

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
