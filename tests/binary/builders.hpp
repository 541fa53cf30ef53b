// Test helpers: build ELF files, fatbin containers and zips in memory, so malformed inputs can
// be made byte by byte (and written as fuzz seeds). Header-only; used by the binary, validate
// and inspect CLI tests.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace archbuild::test {

using Buf = std::string;  // bytes

inline void put16(Buf& b, std::size_t at, std::uint16_t v) { std::memcpy(b.data() + at, &v, 2); }
inline void put32(Buf& b, std::size_t at, std::uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
inline void put64(Buf& b, std::size_t at, std::uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

// One fatbin entry (its header as nvcc writes it); sizes are filled in from the payload unless set.
struct EntrySpec {
  std::uint16_t kind = 2;  // 1 PTX, 2 cubin, 8 LTO-IR
  std::uint32_t sm = 90;
  std::uint64_t flags = 0x11;
  Buf payload;
  std::uint32_t compressed_size = 0;
  std::uint64_t uncompressed_size = 0;
  std::uint32_t header_size = 64;
  std::uint64_t stored_size_override = UINT64_MAX;  // UINT64_MAX: payload size padded to 8
};

inline Buf entry(const EntrySpec& s) {
  Buf payload = s.payload;
  while (payload.size() % 8) payload.push_back('\0');
  Buf h(s.header_size, '\0');
  put16(h, 0, s.kind);
  put16(h, 2, 0x0101);
  put32(h, 4, s.header_size);
  put64(h, 8, s.stored_size_override == UINT64_MAX ? payload.size() : s.stored_size_override);
  put32(h, 0x10, s.compressed_size);
  put16(h, 0x1a, s.kind == 1 ? 9 : 1);
  put32(h, 0x1c, s.sm);
  put64(h, 0x28, s.flags);
  put64(h, 0x38, s.uncompressed_size);
  return h + payload;
}

inline Buf container(const std::vector<Buf>& entries, std::uint64_t size_override = UINT64_MAX,
                     std::uint32_t magic = 0xBA55ED50) {
  Buf body;
  for (const auto& e : entries) body += e;
  Buf h(16, '\0');
  put32(h, 0, magic);
  put16(h, 4, 1);
  put16(h, 6, 16);
  put64(h, 8, size_override == UINT64_MAX ? body.size() : size_override);
  return h + body;
}

// A cubin-like ELF header (EM_CUDA) whose e_flags name `sm` in the CUDA 13 layout.
inline Buf cubin(std::uint32_t sm) {
  Buf b(128, '\0');
  b[0] = 0x7f, b[1] = 'E', b[2] = 'L', b[3] = 'F', b[4] = 2, b[5] = 1, b[6] = 1, b[7] = 0x41, b[8] = 8;
  put16(b, 0x10, 2);
  put16(b, 0x12, 190);
  put32(b, 0x30, 0x6000002 | (sm << 8));
  return b;
}

struct SectionSpec {
  std::string name;
  Buf data;
  std::uint32_t type = 1;     // PROGBITS
  std::uint64_t flags = 0x2;  // ALLOC
};

// An ELF64 little-endian shared object with the given sections (plus NULL and .shstrtab).
inline Buf elf(const std::vector<SectionSpec>& sections, std::uint16_t machine = 62) {
  Buf out(64, '\0');
  out[0] = 0x7f, out[1] = 'E', out[2] = 'L', out[3] = 'F', out[4] = 2, out[5] = 1, out[6] = 1;
  put16(out, 0x10, 3);
  put16(out, 0x12, machine);
  put32(out, 0x14, 1);
  Buf names(1, '\0');
  std::vector<std::uint32_t> name_at;
  for (const auto& s : sections) {
    name_at.push_back(static_cast<std::uint32_t>(names.size()));
    names += s.name + '\0';
  }
  std::uint32_t shstrtab_name = static_cast<std::uint32_t>(names.size());
  names += ".shstrtab";
  names += '\0';
  struct Placed {
    std::uint64_t offset, size;
  };
  std::vector<Placed> placed;
  auto place = [&](const Buf& data) {
    while (out.size() % 8) out.push_back('\0');
    placed.push_back({out.size(), data.size()});
    out += data;
  };
  for (const auto& s : sections) place(s.data);
  place(names);
  while (out.size() % 8) out.push_back('\0');
  std::uint64_t shoff = out.size();
  std::size_t count = sections.size() + 2;
  Buf table(64 * count, '\0');
  for (std::size_t i = 0; i < sections.size(); ++i) {
    std::size_t at = 64 * (i + 1);
    put32(table, at, name_at[i]);
    put32(table, at + 4, sections[i].type);
    put64(table, at + 8, sections[i].flags);
    put64(table, at + 0x18, placed[i].offset);
    put64(table, at + 0x20, placed[i].size);
  }
  std::size_t at = 64 * (count - 1);
  put32(table, at, shstrtab_name);
  put32(table, at + 4, 3);  // STRTAB
  put64(table, at + 0x18, placed.back().offset);
  put64(table, at + 0x20, placed.back().size);
  out += table;
  put64(out, 0x28, shoff);
  put16(out, 0x34, 64);
  put16(out, 0x3a, 64);
  put16(out, 0x3c, static_cast<std::uint16_t>(count));
  put16(out, 0x3e, static_cast<std::uint16_t>(count - 1));
  return out;
}

// A shared object whose .nv_fatbin holds `fatbin`.
inline Buf elf_with_fatbin(const Buf& fatbin, const std::string& section = ".nv_fatbin") {
  return elf({{".text", Buf(32, '\xc3'), 1, 0x6}, {section, fatbin}});
}

// A zip (stored or deflated members) written by libarchive, names taken as given: hostile
// ones included.
inline Buf zip(const std::vector<std::pair<std::string, Buf>>& members, bool deflate = true) {
  archive* a = archive_write_new();
  archive_write_set_format_zip(a);
  if (!deflate) archive_write_set_options(a, "zip:compression=store");
  std::vector<char> out(1 << 20);
  for (const auto& [name, data] : members) out.resize(out.size() + data.size() + 1024);
  std::size_t used = 0;
  archive_write_open_memory(a, out.data(), out.size(), &used);
  for (const auto& [name, data] : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return Buf(out.data(), used);
}

}  // namespace archbuild::test
