// Verification of fatbin entries (`inspect --verify`): each payload decompressed (LZ4, zstd)
// and checked against what its header says (a cubin's ELF machine and SM, a PTX text's target).
// Reading which entries a binary carries needs none of this (binary/fatbin.cpp).
#include <climits>

#include <fmt/format.h>
#include <lz4.h>
#include <zstd.h>

#include "binary/fatbin.hpp"

namespace archbuild::binary {

namespace {

// The payload decompressed, or the reason it could not be.
struct Expanded {
  std::vector<std::uint8_t> owned;
  Bytes bytes;
  std::string error;
};

Expanded expand(Bytes data, const Entry& en, const VerifyOptions& options) {
  Expanded x;
  Bytes payload = slice(data, en.offset + en.header_size, en.stored_size);
  if (en.compression == Compression::none) {
    x.bytes = payload;
    return x;
  }
  Bytes src = payload.first(en.compressed_size);
  if (en.uncompressed_size == 0) {
    x.error = "compressed entry without an uncompressed size";
    return x;
  }
  if (en.uncompressed_size > options.max_uncompressed) {
    x.error = fmt::format("uncompressed size {} is over the limit of {} bytes", en.uncompressed_size,
                          options.max_uncompressed);
    return x;
  }
  x.owned.resize(static_cast<std::size_t>(en.uncompressed_size));
  if (en.compression == Compression::zstd) {
    std::size_t n = ZSTD_decompress(x.owned.data(), x.owned.size(), src.data(), src.size());
    if (ZSTD_isError(n)) {
      x.error = fmt::format("zstd payload does not decompress: {}", ZSTD_getErrorName(n));
      return x;
    }
    if (n != x.owned.size()) {
      x.error = fmt::format("zstd payload decompresses to {} bytes, header says {}", n, x.owned.size());
      return x;
    }
  } else {
    // LZ4 raw block (0x2000); the legacy flag is tried the same way.
    if (src.size() > INT_MAX || x.owned.size() > INT_MAX) {
      x.error = "LZ4 payload too large to decompress";
      return x;
    }
    int n = LZ4_decompress_safe(reinterpret_cast<const char*>(src.data()), reinterpret_cast<char*>(x.owned.data()),
                                static_cast<int>(src.size()), static_cast<int>(x.owned.size()));
    if (n < 0) {
      x.error = "LZ4 payload does not decompress";
      return x;
    }
    if (static_cast<std::size_t>(n) != x.owned.size()) {
      x.error = fmt::format("LZ4 payload decompresses to {} bytes, header says {}", n, x.owned.size());
      return x;
    }
  }
  x.bytes = x.owned;
  return x;
}

// `.target sm_90a` (possibly followed by `, debug`): SM and variant, or nullopt.
std::optional<std::pair<int, arch::Variant>> ptx_target(Bytes text) {
  std::string_view s(reinterpret_cast<const char*>(text.data()), text.size());
  if (auto nul = s.find('\0'); nul != std::string_view::npos) s = s.substr(0, nul);
  for (std::size_t pos = s.find(".target"); pos != std::string_view::npos; pos = s.find(".target", pos + 1)) {
    // A directive starts its line (after blanks); `.target` in a comment does not count.
    std::size_t line = s.rfind('\n', pos);
    line = line == std::string_view::npos ? 0 : line + 1;
    if (s.find_first_not_of(" \t", line) != pos) continue;
    std::size_t i = pos + 7;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (s.substr(i, 3) != "sm_") return std::nullopt;
    i += 3;
    int sm = 0;
    std::size_t digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 4) sm = sm * 10 + (s[i++] - '0'), ++digits;
    if (digits == 0) return std::nullopt;
    arch::Variant v = arch::Variant::none;
    if (i < s.size() && s[i] == 'a') v = arch::Variant::a;
    if (i < s.size() && s[i] == 'f') v = arch::Variant::f;
    return std::pair{sm, v};
  }
  return std::nullopt;
}

}  // namespace

VerifyResult verify_entry(Bytes data, const Entry& en, const VerifyOptions& options) {
  auto bad = [](std::string m) { return VerifyResult{VerifyStatus::mismatch, std::move(m)}; };
  try {
    if (en.flags & kEntryFlagEncoded)
      return {VerifyStatus::unchecked, "payload is encoded (flag 0x10000); it cannot be decompressed"};
    Expanded x = expand(data, en, options);
    if (!x.error.empty()) return bad(x.error);
    switch (en.kind) {
      case EntryKind::sass: {
        auto h = read_elf_header(x.bytes);
        if (!h) return bad(fmt::format("cubin is not a valid ELF: {}", h.error().message));
        if (h->machine != kEmCuda) return bad(fmt::format("cubin ELF is for {}, not cuda", machine_name(h->machine)));
        // Two layouts of e_flags: EF_CUDA_SM (low byte) for ELFABIVERSION_CUDA_V1, EF_CUDA_SM_MASK at
        // EF_CUDA_SM_OFFSET 8 after it (llvm/llvm-project@12322b22c68a588caeee8702946695de0a8ba788:
        // llvm/include/llvm/BinaryFormat/ELF.h).
        bool new_layout = h->abi_version >= 8 || h->osabi == 0x41;
        int sm = static_cast<int>(new_layout ? (h->flags >> 8) & 0xff : h->flags & 0xff);
        if (sm != en.sm) return bad(fmt::format("cubin e_flags say sm_{}, the entry header says {}", sm, en.name()));
        return {};
      }
      case EntryKind::ptx: {
        if (looks_like_elf(x.bytes)) return bad("PTX entry holds an ELF file, not PTX text");
        auto t = ptx_target(x.bytes);
        if (!t) return bad("PTX has no `.target sm_NN` line");
        if (t->first != en.sm || t->second != en.variant)
          return bad(fmt::format("PTX says .target {}, the entry header says {}",
                                 image_name(EntryKind::sass, t->first, t->second), en.name()));
        return {};
      }
      case EntryKind::lto_ir:
      case EntryKind::old_cubin:
        return {};  // decompressing is the whole check: no arch inside to compare
    }
    return {};
  } catch (const Malformed& e) {
    return bad(e.what());
  }
}

}  // namespace archbuild::binary
