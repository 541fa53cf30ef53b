#include "binary/elf.hpp"

#include <fmt/format.h>

#include <cstring>

namespace archbuild::binary {

namespace {

constexpr std::size_t kEhdrSize = 64;
constexpr std::size_t kShdrSize = 64;
constexpr std::uint16_t kShnXindex = 0xffff;

ElfHeader parse_header(Bytes data) {
  if (data.size() < 16) throw Malformed(fmt::format("truncated ELF header ({} bytes)", data.size()));
  if (!looks_like_elf(data)) throw Malformed("not an ELF file (wrong magic)");
  ElfHeader h;
  h.elf_class = data[4];
  h.data = data[5];
  h.osabi = data[7];
  h.abi_version = data[8];
  if (h.elf_class != 2)
    throw Malformed(h.elf_class == 1 ? "32-bit ELF is not supported (expected ELF64)"
                                     : fmt::format("invalid ELF class {}", h.elf_class));
  if (h.data != 1)
    throw Malformed(h.data == 2 ? "big-endian ELF is not supported (expected little-endian)"
                                : fmt::format("invalid ELF data encoding {}", h.data));
  if (data.size() < kEhdrSize)
    throw Malformed(fmt::format("truncated ELF header ({} of {} bytes)", data.size(), kEhdrSize));
  h.type = load<std::uint16_t>(data, 0x10);
  h.machine = load<std::uint16_t>(data, 0x12);
  h.flags = load<std::uint32_t>(data, 0x30);
  return h;
}

}  // namespace

bool looks_like_elf(Bytes data) {
  return data.size() >= 4 && data[0] == 0x7f && data[1] == 'E' && data[2] == 'L' && data[3] == 'F';
}

const Section* Elf::find(std::string_view name) const {
  for (const auto& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

std::string machine_name(std::uint16_t machine) {
  switch (machine) {
    case kEmX86_64:
      return "x86-64";
    case kEmAarch64:
      return "aarch64";
    case kEmCuda:
      return "cuda";
    default:
      return fmt::format("machine {}", machine);
  }
}

Result<ElfHeader> read_elf_header(Bytes data) {
  try {
    return parse_header(data);
  } catch (const Malformed& e) {
    return Error::bad_input(e.what());
  }
}

Result<Elf> read_elf(Bytes data) {
  try {
    Elf elf;
    elf.header = parse_header(data);
    const std::uint64_t size = data.size();
    std::uint64_t shoff = load<std::uint64_t>(data, 0x28);
    std::uint16_t shentsize = load<std::uint16_t>(data, 0x3a);
    std::uint64_t shnum = load<std::uint16_t>(data, 0x3c);
    std::uint32_t shstrndx = load<std::uint16_t>(data, 0x3e);
    if (shoff == 0) return elf;  // no section table (fully stripped): the caller scans instead
    if (shentsize < kShdrSize)
      throw Malformed(fmt::format("section header size {} is smaller than {}", shentsize, kShdrSize));
    if (!fits(shoff, kShdrSize, size))
      throw Malformed(fmt::format("truncated: section header table at {} is past the end of the file ({} bytes)",
                                  hex(shoff), size));
    // More than 0xff00 sections: the real count and string-table index sit in section 0.
    if (shnum == 0) shnum = load<std::uint64_t>(data, shoff + 0x20);
    if (shstrndx == kShnXindex) shstrndx = load<std::uint32_t>(data, shoff + 0x28);
    if (shnum > (size - shoff) / shentsize)
      throw Malformed(
          fmt::format("truncated: {} section headers of {} bytes at {} run past the end of the file ({} bytes)", shnum,
                      shentsize, hex(shoff), size));
    elf.sections.reserve(static_cast<std::size_t>(shnum));
    std::vector<std::uint32_t> name_offsets;
    name_offsets.reserve(static_cast<std::size_t>(shnum));
    for (std::uint64_t i = 0; i < shnum; ++i) {
      std::uint64_t at = shoff + i * shentsize;
      Section s;
      name_offsets.push_back(load<std::uint32_t>(data, at));
      s.type = load<std::uint32_t>(data, at + 4);
      s.flags = load<std::uint64_t>(data, at + 8);
      s.addr = load<std::uint64_t>(data, at + 0x10);
      s.offset = load<std::uint64_t>(data, at + 0x18);
      s.size = load<std::uint64_t>(data, at + 0x20);
      s.link = load<std::uint32_t>(data, at + 0x28);
      s.info = load<std::uint32_t>(data, at + 0x2c);
      if (s.type != kShtNobits && s.type != 0 && !fits(s.offset, s.size, size))
        throw Malformed(fmt::format("truncated: section {} ({} bytes at {}) runs past the end of the file ({} bytes)",
                                    i, s.size, hex(s.offset), size));
      elf.sections.push_back(std::move(s));
    }
    if (shstrndx != 0) {
      if (shstrndx >= elf.sections.size())
        throw Malformed(
            fmt::format("section name table index {} is out of range ({} sections)", shstrndx, elf.sections.size()));
      const Section& strtab = elf.sections[shstrndx];
      if (strtab.type == kShtNobits) throw Malformed("section name table has no data");
      Bytes names = slice(data, strtab.offset, strtab.size);
      for (std::size_t i = 0; i < elf.sections.size(); ++i) {
        std::uint32_t off = name_offsets[i];
        if (off >= names.size()) {
          if (off == 0) continue;  // empty name table: unnamed sections
          throw Malformed(
              fmt::format("section {} name offset {} is outside the name table ({} bytes)", i, off, names.size()));
        }
        const auto* begin = reinterpret_cast<const char*>(names.data()) + off;
        const void* nul = std::memchr(begin, 0, names.size() - off);
        if (!nul) throw Malformed(fmt::format("section {} name is not terminated in the name table", i));
        elf.sections[i].name.assign(begin, static_cast<const char*>(nul));
      }
    }
    return elf;
  } catch (const Malformed& e) {
    return Error::bad_input(e.what());
  }
}

namespace {

constexpr std::uint32_t kShtStrtab = 3;
constexpr std::uint32_t kShtDynamic = 6;
constexpr std::uint32_t kShtGnuVerneed = 0x6ffffffe;
constexpr std::int64_t kDtNull = 0;
constexpr std::int64_t kDtNeeded = 1;
constexpr std::int64_t kDtSoname = 14;
constexpr std::int64_t kDtRpath = 15;
constexpr std::int64_t kDtRunpath = 29;
// Bounds for hostile input: a real library has a few dozen of each.
constexpr std::size_t kMaxVerneed = 4096;

// The string table a section links to.
Bytes linked_strings(Bytes data, const Elf& elf, const Section& s, const char* what) {
  if (s.link == 0 || s.link >= elf.sections.size())
    throw Malformed(fmt::format("{} links to string table {}, outside the {} sections", what, s.link,
                                elf.sections.size()));
  const Section& str = elf.sections[s.link];
  if (str.type != kShtStrtab) throw Malformed(fmt::format("{} links to section {}, which is not a string table", what, s.link));
  return slice(data, str.offset, str.size);
}

std::string string_at(Bytes strings, std::uint64_t off, const char* what) {
  if (off >= strings.size())
    throw Malformed(fmt::format("{} string offset {} is outside its string table ({} bytes)", what, off, strings.size()));
  const auto* begin = reinterpret_cast<const char*>(strings.data()) + off;
  const void* nul = std::memchr(begin, 0, strings.size() - off);
  if (!nul) throw Malformed(fmt::format("{} string at {} is not terminated", what, off));
  return std::string(begin, static_cast<const char*>(nul));
}

std::vector<std::string> split_path_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    auto colon = s.find(':', start);
    std::string part = s.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!part.empty()) out.push_back(part);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

void read_verneed(Bytes data, const Elf& elf, const Section& s, DynamicInfo& info) {
  Bytes strings = linked_strings(data, elf, s, ".gnu.version_r");
  Bytes table = slice(data, s.offset, s.size);
  std::uint64_t at = 0;
  for (std::size_t n = 0; n < kMaxVerneed; ++n) {
    // Elf64_Verneed: vn_version u16, vn_cnt u16, vn_file u32, vn_aux u32, vn_next u32
    std::uint16_t cnt = load<std::uint16_t>(table, at + 2);
    VersionNeed need;
    need.file = string_at(strings, load<std::uint32_t>(table, at + 4), ".gnu.version_r file");
    std::uint64_t aux = at + load<std::uint32_t>(table, at + 8);
    for (std::uint16_t i = 0; i < cnt; ++i) {
      // Elf64_Vernaux: vna_hash u32, vna_flags u16, vna_other u16, vna_name u32, vna_next u32
      need.versions.push_back(string_at(strings, load<std::uint32_t>(table, aux + 8), ".gnu.version_r version"));
      std::uint32_t next = load<std::uint32_t>(table, aux + 12);
      if (next == 0) break;
      aux += next;
    }
    info.version_needs.push_back(std::move(need));
    std::uint32_t next = load<std::uint32_t>(table, at + 12);
    if (next == 0) return;
    at += next;
  }
  throw Malformed(fmt::format(".gnu.version_r has more than {} entries", kMaxVerneed));
}

}  // namespace

Result<DynamicInfo> read_dynamic(Bytes data, const Elf& elf) {
  try {
    DynamicInfo info;
    for (const auto& s : elf.sections) {
      if (s.type == kShtDynamic) {
        info.dynamic = true;
        Bytes strings = linked_strings(data, elf, s, ".dynamic");
        Bytes table = slice(data, s.offset, s.size);
        for (std::uint64_t at = 0; at + 16 <= table.size(); at += 16) {
          auto tag = load<std::int64_t>(table, at);
          auto val = load<std::uint64_t>(table, at + 8);
          if (tag == kDtNull) break;
          if (tag == kDtNeeded) {
            info.needed.push_back(string_at(strings, val, "DT_NEEDED"));
          } else if (tag == kDtSoname) {
            info.soname = string_at(strings, val, "DT_SONAME");
          } else if (tag == kDtRunpath) {
            info.runpath = split_path_list(string_at(strings, val, "DT_RUNPATH"));
          } else if (tag == kDtRpath) {
            info.rpath = split_path_list(string_at(strings, val, "DT_RPATH"));
          }
        }
      } else if (s.type == kShtGnuVerneed && s.size > 0) {
        read_verneed(data, elf, s, info);
      }
    }
    return info;
  } catch (const Malformed& e) {
    return Error::bad_input(e.what());
  }
}

Result<DynamicInfo> read_dynamic(Bytes data) {
  auto elf = read_elf(data);
  if (!elf) return elf.error();
  return read_dynamic(data, *elf);
}

}  // namespace archbuild::binary
