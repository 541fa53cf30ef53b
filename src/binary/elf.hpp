// ELF64 little-endian reader: the file header and the section table with names. Nothing else
// of the file is touched, so reading a large library costs a few pages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "binary/bytes.hpp"
#include "core/error.hpp"

namespace archbuild::binary {

inline constexpr std::uint16_t kEmX86_64 = 62;
inline constexpr std::uint16_t kEmAarch64 = 183;
inline constexpr std::uint16_t kEmCuda = 190;  // a cubin
inline constexpr std::uint32_t kShtProgbits = 1;
inline constexpr std::uint32_t kShtNobits = 8;
inline constexpr std::uint32_t kShtRela = 4;
inline constexpr std::uint64_t kShfAlloc = 0x2;
inline constexpr std::uint64_t kShfExecinstr = 0x4;

struct Section {
  std::string name;
  std::uint32_t type = 0;
  std::uint64_t flags = 0;
  std::uint64_t addr = 0;    // virtual address when loaded (0 for unallocated sections)
  std::uint64_t offset = 0;  // in the file; bounds already checked unless type is NOBITS
  std::uint64_t size = 0;
  std::uint32_t link = 0;  // .dynamic and .gnu.version_r: the index of their string table
  std::uint32_t info = 0;  // .gnu.version_r: the number of entries
};

struct ElfHeader {
  std::uint8_t elf_class = 0;  // 1: 32-bit, 2: 64-bit
  std::uint8_t data = 0;       // 1: little-endian, 2: big-endian
  std::uint8_t osabi = 0;
  std::uint8_t abi_version = 0;
  std::uint16_t type = 0;  // ET_REL 1, ET_EXEC 2, ET_DYN 3
  std::uint16_t machine = 0;
  std::uint32_t flags = 0;
};

struct Elf {
  ElfHeader header;
  std::vector<Section> sections;  // empty when the file has no section table

  const Section* find(std::string_view name) const;
};

// Starts with \x7fELF.
bool looks_like_elf(Bytes data);

// The identification and fixed fields of an ELF64 little-endian header (any machine: cubins
// too). Errors are one line without the file name; callers prefix it.
Result<ElfHeader> read_elf_header(Bytes data);

// The header and section table of an ELF64 little-endian file. Every section's file range and
// every name is checked against the file size.
Result<Elf> read_elf(Bytes data);

// What the dynamic loader reads from a shared library or executable: DT_SONAME, DT_NEEDED,
// DT_RUNPATH / DT_RPATH (split at ':', as written: "$ORIGIN/../lib" stays unexpanded) and the
// symbol versions each needed library must provide (.gnu.version_r: "GLIBC_2.34",
// "GLIBCXX_3.4.32"). `dynamic` is false for a static file (no .dynamic section).
struct VersionNeed {
  std::string file;                   // "libc.so.6"
  std::vector<std::string> versions;  // in file order
};

struct DynamicInfo {
  bool dynamic = false;
  std::optional<std::string> soname;
  std::vector<std::string> needed;
  std::vector<std::string> runpath;
  std::vector<std::string> rpath;  // ignored by the loader when runpath is present
  std::vector<VersionNeed> version_needs;
};

// Reads .dynamic and .gnu.version_r through the section table (their sh_link names the string
// table). A fully stripped file without a section table reads as not dynamic. Every offset is
// checked; errors are one line without the file name.
Result<DynamicInfo> read_dynamic(Bytes data);
Result<DynamicInfo> read_dynamic(Bytes data, const Elf& elf);

// "x86-64", "aarch64", "cuda", or "machine 40".
std::string machine_name(std::uint16_t machine);

}  // namespace archbuild::binary
