#include "binary/fatbin.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <climits>
#include <cstring>
#include <atomic>
#include <exception>
#include <map>
#include <optional>

#include "binary/magic_search.hpp"
#include "core/spread_thread.hpp"

namespace archbuild::binary {

namespace {

constexpr std::uint64_t kContainerHeader = 16;
constexpr std::uint64_t kEntryHeaderMin = 64;
// Flag bits of the entry header. NVIDIA does not document them: these are the values nvcc writes
// (tests/binary compiles with each --compress-mode and reads the flags back).
constexpr std::uint64_t kFlagCompressedLegacy = 0x1000;
constexpr std::uint64_t kFlagLz4 = 0x2000;
constexpr std::uint64_t kFlagZstd = 0x8000;
constexpr std::uint64_t kFlagVariantA = 0x100000;
constexpr std::uint64_t kFlagVariantF = 0x200000;
// Decimal SM numbers outside this range are not an architecture; a header claiming one is
// garbage (or a false match when scanning).
constexpr std::uint32_t kMinSm = 10;
constexpr std::uint32_t kMaxSm = 999;

constexpr std::string_view kRuntimeSection = ".nv_fatbin";
constexpr std::string_view kRelocatableSection = "__nv_relfatbin";
constexpr std::string_view kSegmentSection = ".nvFatBinSegment";

// The entry at `e`, in a container ending at `end`, from the first kEntryHeaderMin bytes of its
// header `h`.
Entry entry_from_header(Bytes h, std::uint64_t e, std::uint64_t end) {
  Entry en;
  en.offset = e;
  std::uint16_t kind = load<std::uint16_t>(h, 0);
  en.header_size = load<std::uint32_t>(h, 0x04);
  en.stored_size = load<std::uint64_t>(h, 0x08);
  en.compressed_size = load<std::uint32_t>(h, 0x10);
  en.version_minor = load<std::uint16_t>(h, 0x18);
  en.version_major = load<std::uint16_t>(h, 0x1a);
  std::uint32_t sm = load<std::uint32_t>(h, 0x1c);
  en.flags = load<std::uint64_t>(h, 0x28);
  en.uncompressed_size = load<std::uint64_t>(h, 0x38);

  switch (kind) {
    case 1:
      en.kind = EntryKind::ptx;
      break;
    case 2:
      en.kind = EntryKind::sass;
      break;
    case 4:
      en.kind = EntryKind::old_cubin;
      break;
    case 8:
      en.kind = EntryKind::lto_ir;
      break;
    default:
      throw Malformed(fmt::format(
          "fatbin entry at {}: unknown kind {} (expected 1 PTX, 2 cubin, 4 old cubin, 8 LTO-IR)", hex(e), kind));
  }
  if (en.header_size < kEntryHeaderMin || !fits(e, en.header_size, end))
    throw Malformed(
        fmt::format("fatbin entry at {}: header size {} is {}", hex(e), en.header_size,
                    en.header_size < kEntryHeaderMin ? "below the minimum of 64" : "past the end of its container"));
  if (!fits(e + en.header_size, en.stored_size, end))
    throw Malformed(
        fmt::format("fatbin entry at {}: payload of {} bytes runs past the end of its container ({} bytes left)",
                    hex(e), en.stored_size, end - e - en.header_size));
  if (sm < kMinSm || sm > kMaxSm)
    throw Malformed(fmt::format("fatbin entry at {}: arch {} is not an SM number", hex(e), sm));
  en.sm = static_cast<int>(sm);
  en.variant = (en.flags & kFlagVariantA)   ? arch::Variant::a
               : (en.flags & kFlagVariantF) ? arch::Variant::f
                                            : arch::Variant::none;
  en.compression = (en.flags & kFlagZstd)               ? Compression::zstd
                   : (en.flags & kFlagLz4)              ? Compression::lz4
                   : (en.flags & kFlagCompressedLegacy) ? Compression::legacy
                                                        : Compression::none;
  if (en.compression != Compression::none) {
    if (en.compressed_size == 0 || en.compressed_size > en.stored_size)
      throw Malformed(fmt::format("fatbin entry at {}: compressed size {} does not fit its payload of {} bytes", hex(e),
                                  en.compressed_size, en.stored_size));
  } else {
    en.compressed_size = 0;
    en.uncompressed_size = 0;
  }
  return en;
}

Entry parse_entry(ByteReader& in, std::uint64_t e, std::uint64_t end) {
  if (!fits(e, kEntryHeaderMin, end))
    throw Malformed(fmt::format("fatbin entry at {}: its {}-byte header runs past the end of its container", hex(e),
                                kEntryHeaderMin));
  return entry_from_header(in.view(e, kEntryHeaderMin), e, end);
}

// The container at `pos`, which must end by `limit`, from the first kContainerHeader bytes of its
// header `h`: everything but its entries.
Container container_from_header(Bytes h, std::uint64_t pos, std::uint64_t limit, const std::string& section,
                                 Placement placement) {
  if (load<std::uint32_t>(h, 0) != kFatbinMagic)
    throw Malformed(fmt::format("fatbin container at {}: wrong magic {} (expected {})", hex(pos),
                                hex(load<std::uint32_t>(h, 0)), hex(kFatbinMagic)));
  std::uint16_t version = load<std::uint16_t>(h, 4);
  std::uint16_t header = load<std::uint16_t>(h, 6);
  std::uint64_t size = load<std::uint64_t>(h, 8);
  if (version != 1)
    throw Malformed(fmt::format("fatbin container at {}: unknown version {} (expected 1)", hex(pos), version));
  if (header < kContainerHeader || !fits(pos, header, limit))
    throw Malformed(fmt::format("fatbin container at {}: invalid header size {}", hex(pos), header));
  if (!fits(pos + header, size, limit))
    throw Malformed(fmt::format("fatbin container at {}: size {} runs past the end of {} ({} bytes left)", hex(pos),
                                size, section, limit - pos - header));
  Container c;
  c.placement = placement;
  c.section = section;
  c.offset = pos;
  c.size = header + size;
  return c;
}

constexpr std::uint64_t kSmallContainer = ByteReader::kWindowMax / 2;

// The container at `pos`, which must end by `limit`. Throws Malformed naming what is wrong.
// `steps` counts the entry headers looked at (the scan's work budget).
Container parse_container(ByteReader& in, std::uint64_t pos, std::uint64_t limit, const std::string& section,
                          Placement placement, std::uint64_t* steps = nullptr) {
  if (!fits(pos, kContainerHeader, limit))
    throw Malformed(fmt::format("fatbin container at {}: header runs past the end of {}", hex(pos), section));
  Bytes h = in.view(pos, kContainerHeader);
  Container c = container_from_header(h, pos, limit, section, placement);
  const std::uint64_t end = pos + c.size;
  // A small container is read whole, with what follows it, in one read: cuFFT's .ldata holds
  // 24,000 of ~12 KB side by side, and a read per entry header and another for the bytes after
  // each container made 22,000 system calls there. A large one's entry headers are still read
  // one by one, so its payload is never copied.
  if (c.size <= kSmallContainer) h = in.window_at(pos, static_cast<std::size_t>(c.size), ByteReader::kWindowMax);
  for (std::uint64_t e = pos + load<std::uint16_t>(h, 6); e < end;) {
    if (steps) ++*steps;
    Entry en = parse_entry(in, e, end);
    e += en.header_size + en.stored_size;  // both checked to lie within the container
    c.entries.push_back(en);
  }
  return c;
}

// Registered containers by file offset (from .nvFatBinSegment), each parsed where it lies.
using Known = std::map<std::uint64_t, Container>;

// The containers at `starts` (sorted offsets in section `s`), each as parse_container(…, s's end)
// would read it, with their headers read in rounds of batched reads: every container's header
// with its first entry header, then every unfinished container's next entry header, and so on.
// One read after another, libcublasLt's 2,800 containers and 5,700 entries cost 8,500 system
// calls; in rounds they cost a few dozen. A container that ends by the next start within
// kWholeRead bytes (most of libcublasLt's: 2,435 of 2,782) is read whole in the first round,
// and all its entry headers with it: 2,272 fewer reads of ~1 us each, for 5.9 MB copied.
// A start that does not parse is nullopt: the walk reads it again where it reaches it, and
// raises the error a walk raises.
std::vector<std::optional<Container>> parse_batched(ByteReader& in, const Section& s,
                                                    const std::vector<std::uint64_t>& starts, Placement placement) {
  const std::uint64_t limit = s.offset + s.size;
  // Reads go in batches through one buffer, reused: a fresh page costs a fault, and faults are
  // dear on the VMs measured (12-15 us each).
  constexpr std::size_t kChunk = 256;
  constexpr std::size_t kFirst = kContainerHeader + kEntryHeaderMin;  // a header and its first entry's
  constexpr std::size_t kWholeRead = 16 << 10;
  constexpr std::size_t kBatchBytes = 256 << 10;
  // Not zeroed: every byte parsed was read first. Untouched pages cost nothing. (`new T[n]`
  // rather than std::make_unique_for_overwrite, which GCC 10's libstdc++ — the bundle's, built
  // on Debian 11 — lacks; both leave the bytes uninitialised.)
  constexpr std::size_t kBufBytes = std::max(kBatchBytes, kChunk * kEntryHeaderMin);
  const std::unique_ptr<std::uint8_t[]> buf_owner(new std::uint8_t[kBufBytes]);
  std::uint8_t* const buf = buf_owner.get();
  std::vector<ByteReader::BatchRead> reads;
  std::vector<std::size_t> read_of;  // the container each read of the first round is for
  std::vector<std::optional<Container>> out(starts.size());
  struct Cursor {
    std::size_t index = 0;
    std::uint64_t next = 0;  // the next entry header's offset
  };
  std::vector<Cursor> open, still;
  // Container `i` goes on with its entry at `next`, if it has one there that may be read.
  auto go_on = [&](std::size_t i, std::uint64_t next, std::vector<Cursor>& into) {
    const std::uint64_t end = out[i]->offset + out[i]->size;
    if (next >= end) return;
    if (fits(next, kEntryHeaderMin, end))
      into.push_back({i, next});
    else
      out[i].reset();  // parse_entry's error, which the walk raises
  };
  // The first round's reads of what is queued: each container's header and the entry headers
  // its read holds.
  auto first_round = [&] {
    in.read_batch(reads);
    for (std::size_t k = 0; k < reads.size(); ++k) {
      const auto& r = reads[k];
      const std::size_t i = read_of[k];
      try {
        Bytes h(r.out, r.length);
        out[i] = container_from_header(h, starts[i], limit, s.name, placement);
        Container& c = *out[i];
        const std::uint64_t end = c.offset + c.size;
        std::uint64_t next = starts[i] + load<std::uint16_t>(h, 6);
        while (next < end && next - starts[i] + kEntryHeaderMin <= r.length) {
          Entry en =
              entry_from_header(h.subspan(static_cast<std::size_t>(next - starts[i]), kEntryHeaderMin), next, end);
          next += en.header_size + en.stored_size;
          c.entries.push_back(en);
        }
        go_on(i, next, open);
      } catch (const Malformed&) {
        out[i].reset();
      }
    }
    reads.clear();
    read_of.clear();
  };
  std::size_t used = 0;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    if (starts[i] >= limit || limit - starts[i] < kContainerHeader) continue;
    // Up to the next start when that is near (a hint only: the headers decide what is parsed).
    const std::uint64_t room = limit - starts[i];
    const std::uint64_t gap = i + 1 < starts.size() && starts[i + 1] > starts[i] ? starts[i + 1] - starts[i] : 0;
    const std::size_t length = static_cast<std::size_t>(
        std::min<std::uint64_t>(room, gap > kFirst && gap <= kWholeRead ? gap : kFirst));
    if (reads.size() == kChunk || used + length > kBufBytes) {
      first_round();
      used = 0;
    }
    reads.push_back({starts[i], static_cast<std::uint32_t>(length), buf + used});
    read_of.push_back(i);
    used += length;
  }
  if (!reads.empty()) first_round();
  while (!open.empty()) {
    still.clear();
    for (std::size_t first = 0; first < open.size(); first += kChunk) {
      const std::size_t n = std::min(kChunk, open.size() - first);
      reads.clear();
      for (std::size_t k = 0; k < n; ++k)
        reads.push_back({open[first + k].next, kEntryHeaderMin, buf + k * kEntryHeaderMin});
      in.read_batch(reads);
      for (std::size_t k = 0; k < n; ++k) {
        const Cursor cur = open[first + k];
        Container& c = *out[cur.index];
        try {
          Entry en = entry_from_header(Bytes(buf + k * kEntryHeaderMin, kEntryHeaderMin), cur.next,
                                       c.offset + c.size);
          c.entries.push_back(en);
          go_on(cur.index, cur.next + en.header_size + en.stored_size, still);
        } catch (const Malformed&) {
          out[cur.index].reset();
        }
      }
    }
    open.swap(still);
  }
  return out;
}

// What a walk or a scan of part of a section found, and where it would go on: past the last
// container when that runs beyond the part, else the part's end.
struct ScanResult {
  std::vector<Container> found;
  std::uint64_t resume = 0;
};

// .nv_fatbin / __nv_relfatbin from `begin` (the section's start, or a container's): containers
// back to back, zero padding allowed between them, until `stop` is passed.
// `registered` (sorted offsets) are where containers should start: those in [begin, stop) are
// parsed up front, in batches, and taken where the walk reaches them.
ScanResult walk_range(ByteReader& in, const Section& s, std::uint64_t begin, std::uint64_t stop, Placement placement,
                      const std::vector<std::uint64_t>& registered) {
  ScanResult r;
  const std::uint64_t end = s.offset + s.size;
  stop = std::min(stop, end);
  std::vector<std::uint64_t> starts{begin};
  for (auto it = std::upper_bound(registered.begin(), registered.end(), begin);
       it != registered.end() && *it < stop; ++it)
    starts.push_back(*it);
  auto parsed = parse_batched(in, s, starts, placement);
  r.found.reserve(starts.size());
  std::uint64_t p = begin;
  while (p < stop) {
    auto at = std::lower_bound(starts.begin(), starts.end(), p);
    if (at != starts.end() && *at == p) {
      auto& c = parsed[static_cast<std::size_t>(at - starts.begin())];
      if (c) {
        r.found.push_back(std::move(*c));
        c.reset();
        p += r.found.back().size;
        continue;
      }
    }
    Bytes w = in.view(p, static_cast<std::size_t>(std::min<std::uint64_t>(end - p, ByteReader::kViewMax)));
    auto nonzero = std::find_if(w.begin(), w.end(), [](std::uint8_t b) { return b != 0; });
    if (nonzero != w.begin()) {
      p += static_cast<std::uint64_t>(nonzero - w.begin());
      continue;
    }
    if (!fits(p, 4, end) || load<std::uint32_t>(w, 0) != kFatbinMagic)
      throw Malformed(fmt::format("{}: unexpected bytes at {} (expected a fatbin container, magic {})", s.name, hex(p),
                                  hex(kFatbinMagic)));
    r.found.push_back(parse_container(in, p, end, s.name, placement));
    p += r.found.back().size;
  }
  r.resume = std::max(p, begin);
  return r;
}

bool is_scanned(const Section& s) {
  if (s.type != kShtProgbits || !(s.flags & kShfAlloc) || (s.flags & kShfExecinstr)) return false;
  // Compiler-written tables (unwind info, GOT) never hold a program's data.
  static constexpr std::string_view kSkipped[] = {kRuntimeSection, kRelocatableSection, kSegmentSection, ".eh_frame",
                                                  ".eh_frame_hdr", ".gcc_except_table", ".got",          ".got.plt"};
  return std::find(std::begin(kSkipped), std::end(kSkipped), s.name) == std::end(kSkipped);
}

}  // namespace

std::string_view to_string(EntryKind k) {
  switch (k) {
    case EntryKind::ptx:
      return "ptx";
    case EntryKind::sass:
      return "sass";
    case EntryKind::lto_ir:
      return "lto-ir";
    case EntryKind::old_cubin:
      return "old-cubin";
  }
  return "?";
}

std::string_view to_string(Compression c) {
  switch (c) {
    case Compression::none:
      return "none";
    case Compression::lz4:
      return "lz4";
    case Compression::zstd:
      return "zstd";
    case Compression::legacy:
      return "legacy";
  }
  return "?";
}

std::string_view to_string(Placement p) {
  switch (p) {
    case Placement::runtime:
      return "runtime";
    case Placement::relocatable:
      return "relocatable";
    case Placement::embedded:
      return "embedded";
  }
  return "?";
}

std::string image_name(EntryKind kind, int sm, arch::Variant variant) {
  std::string_view v = variant == arch::Variant::a ? "a" : variant == arch::Variant::f ? "f" : "";
  switch (kind) {
    case EntryKind::ptx:
      return fmt::format("compute_{}{}", sm, v);
    case EntryKind::sass:
      return fmt::format("sm_{}{}", sm, v);
    case EntryKind::lto_ir:
      return fmt::format("lto_{}{}", sm, v);
    case EntryKind::old_cubin:
      return fmt::format("sm_{}{} (old cubin)", sm, v);
  }
  return "?";
}

std::string Entry::name() const { return image_name(kind, sm, variant); }

namespace {

// Positions where the magic lies in [p, stop) of the input: straight over memory, else over
// the reader's window, filled by pread: 4 KiB first (after a container the next one is often
// within a few bytes; a 128 KiB read there would copy a large container's payload for
// nothing), then 128 KiB at a time (small enough to stay in L2, large enough that the
// system call is negligible). Bytes skipped (containers already parsed) are never copied, and
// headers inside the window cost no read.
class MagicFinder {
 public:
  explicit MagicFinder(ByteReader& in) : in_(in) {}

  // The first q in [p, stop) holding the magic, or `stop`. stop + 3 must not pass the end.
  std::uint64_t next(std::uint64_t p, std::uint64_t stop) {
    std::size_t read = kFirstRead;
    while (p < stop) {
      Bytes w = in_.window_at(p, 4, static_cast<std::size_t>(std::min<std::uint64_t>(read, stop + 3 - p)));
      read = ByteReader::kWindowMax;
      const std::uint64_t limit = std::min<std::uint64_t>(stop, p + w.size() - 3);
      const std::uint64_t q = p + find_magic_candidate(w.data(), 0, limit - p);
      if (q >= limit) {
        p = limit;
        continue;
      }
      if (load<std::uint32_t>(w, q - p) == kFatbinMagic) return q;
      p = q + 1;
    }
    return stop;
  }

 private:
  static constexpr std::size_t kFirstRead = 4 << 10;
  ByteReader& in_;
};

// Containers whose magic lies in [begin, starts_end), found by their magic and parsed up to the
// section's `end`; only valid headers count. A container of `known` (registered) is taken as
// parsed where the scan reaches it, and its bytes skipped. The scan is deterministic in where it
// starts: from the same position it finds the same containers, which read_all's merge of
// parallel parts relies on.
ScanResult scan_range(ByteReader& in, std::uint64_t begin, std::uint64_t starts_end, std::uint64_t end,
                      const std::string& section, Placement placement, const Known& known = {}) {
  ScanResult r;
  r.resume = std::max(begin, starts_end);
  if (end > in.size() || begin >= end) return r;
  starts_end = std::min(starts_end, end);
  // Each false candidate may walk many entry headers before failing, and candidates can nest:
  // crafted data could make the scan quadratic. Real libraries look at fewer headers than
  // one per 64 bytes; past this budget the section is refused instead of hanging.
  const std::uint64_t budget = (starts_end - std::min(begin, starts_end)) / 16 + 4096;
  std::uint64_t steps = 0;
  MagicFinder finder(in);
  auto next_known = known.lower_bound(begin);
  std::uint64_t p = begin;
  while (p < starts_end && end - p >= kContainerHeader + kEntryHeaderMin) {
    while (next_known != known.end() && next_known->first < p) ++next_known;
    // A registered container is where a scan would find its magic: look for others only
    // before it.
    bool known_ahead = next_known != known.end() && next_known->first < std::min(end - 3, starts_end);
    std::uint64_t stop = known_ahead ? next_known->first : std::min(end - 3, starts_end);
    std::uint64_t q = finder.next(p, stop);
    if (q >= stop) {
      if (!known_ahead) break;
      r.found.push_back(next_known->second);
      p = next_known->first + next_known->second.size;
      continue;
    }
    try {
      Container c = parse_container(in, q, end, section, placement, &steps);
      if (!c.entries.empty()) {
        p = q + c.size;
        r.found.push_back(std::move(c));
        continue;
      }
    } catch (const Malformed&) {
      // Not a container: the magic bytes occurred by chance.
    }
    if (steps > budget)
      throw Malformed(fmt::format("{}: too many invalid fatbin headers (gave up scanning at {})", section, hex(q)));
    p = q + 1;
  }
  r.resume = std::max(p, starts_end);
  return r;
}

std::vector<Container> scan_section(ByteReader& in, std::uint64_t begin, std::uint64_t end, const std::string& section,
                                    Placement placement, const Known& known = {}) {
  return scan_range(in, begin, end, end, section, placement, known).found;
}

Placement placement_of(const Section& s) {
  return s.name == kRuntimeSection       ? Placement::runtime
         : s.name == kRelocatableSection ? Placement::relocatable
                                         : Placement::embedded;
}

bool is_walked(const Section& s) { return s.name == kRuntimeSection || s.name == kRelocatableSection; }

bool is_visited(const Section& s) {
  return s.type != kShtNobits && s.type != 0 && s.size > 0 && (is_walked(s) || is_scanned(s));
}

// The sections that hold a virtual address (those loaded from the file) or a file offset (those
// read_containers visits): the first in header order that does. Looked up once or twice per
// registration (libcublasLt: 2,782, each of which walked all 40 sections and compared their names
// with ten). Where no two of them overlap, as in every linked file, the one that holds it is
// found by a binary search; else (a crafted file) in header order.
class SectionRanges {
 public:
  // `start`: where a section begins, its address or its offset.
  template <class Pred>
  SectionRanges(const Elf& elf, Pred keep, std::uint64_t Section::*start) : start_(start) {
    for (const auto& s : elf.sections)
      if (s.size > 0 && keep(s)) in_order_.push_back(&s);  // an empty one holds nothing
    sorted_ = in_order_;
    std::sort(sorted_.begin(), sorted_.end(), [&](const Section* a, const Section* b) { return a->*start < b->*start; });
    for (std::size_t i = 1; i < sorted_.size(); ++i)
      if (sorted_[i]->*start - sorted_[i - 1]->*start < sorted_[i - 1]->size) disjoint_ = false;
  }

  const Section* holding(std::uint64_t x) const {
    auto holds = [&](const Section* s) { return x >= s->*start_ && x - s->*start_ < s->size; };
    if (!disjoint_) {
      auto it = std::find_if(in_order_.begin(), in_order_.end(), holds);
      return it == in_order_.end() ? nullptr : *it;
    }
    auto after = std::upper_bound(sorted_.begin(), sorted_.end(), x,
                                  [&](std::uint64_t v, const Section* s) { return v < s->*start_; });
    return after != sorted_.begin() && holds(*std::prev(after)) ? *std::prev(after) : nullptr;
  }

 private:
  std::uint64_t Section::*start_;
  std::vector<const Section*> in_order_;
  std::vector<const Section*> sorted_;
  bool disjoint_ = true;
};

// Where the registrations point: file offsets of virtual addresses, through the allocated
// sections that have bytes, and the visited section that holds one.
class AddressMap {
 public:
  explicit AddressMap(const Elf& elf)
      : loaded_(
            elf, [](const Section& s) { return (s.flags & kShfAlloc) && s.type != kShtNobits && s.type != 0; },
            &Section::addr),
        visited_(elf, is_visited, &Section::offset) {}
  std::optional<std::uint64_t> file_offset_of(std::uint64_t addr) const {
    const Section* s = loaded_.holding(addr);
    if (!s) return std::nullopt;
    return s->offset + (addr - s->addr);
  }
  const Section* visited_section_at(std::uint64_t off) const { return visited_.holding(off); }

 private:
  SectionRanges loaded_;
  SectionRanges visited_;
};

// Calls fn(reader, i) for every i in [0, count) on up to `threads` threads, each with its own
// reader over the same input (`in` on the calling thread). A reader that cannot be had means
// fewer threads, not another result.
template <class Fn>
void parallel_for(ByteReader& in, std::size_t count, unsigned threads, Fn fn) {
  std::atomic<std::size_t> next{0};
  auto work = [&](ByteReader& reader) {
    for (std::size_t i; (i = next++) < count;) fn(reader, i);
  };
  std::vector<ByteReader> readers;
  for (std::size_t t = 1; t < std::min<std::size_t>(threads, count); ++t) {
    auto r = in.sibling();
    if (!r) break;
    readers.push_back(std::move(*r));
  }
  run_spread(readers.size() + 1, [&](std::size_t k) { work(k == 0 ? in : readers[k - 1]); });
}

// The registered containers in scanned sections that parse, keyed by offset: the scan skips
// their bytes. (Those in .nv_fatbin are read by its walk, which the registrations split into
// parts instead.) A registration that points nowhere or at no valid container is ignored: the
// scan reads those bytes as it would without it, so the result never depends on the segment
// being right. Parsed in batches on `threads` threads.
Known known_containers(ByteReader& in, const AddressMap& map, const std::vector<FatbinRegistration>& regs,
                       unsigned threads) {
  // Most registrations point into .nv_fatbin (all of libcublasLt's 2,800): those are sorted out
  // first, so that no thread is started and nothing allocated for them.
  struct Target {
    std::uint64_t offset = 0;
    const Section* section = nullptr;
  };
  std::vector<Target> targets;
  for (const auto& r : regs) {
    auto off = map.file_offset_of(r.address());
    const Section* s = off ? map.visited_section_at(*off) : nullptr;
    if (s && !is_walked(*s)) targets.push_back({*off, s});
  }
  std::vector<std::optional<Container>> parsed(targets.size());
  constexpr std::size_t kBatch = 64;
  parallel_for(in, (targets.size() + kBatch - 1) / kBatch, threads, [&](ByteReader& reader, std::size_t batch) {
    for (std::size_t i = batch * kBatch; i < std::min(targets.size(), (batch + 1) * kBatch); ++i) {
      const Section& s = *targets[i].section;
      try {
        Container c = parse_container(reader, targets[i].offset, s.offset + s.size, s.name, placement_of(s));
        if (!c.entries.empty()) parsed[i] = std::move(c);
      } catch (const Malformed&) {
      }
    }
  });
  Known known;
  for (auto& c : parsed)  // in registration order: the first of two at one offset is kept
    if (c) known.emplace(c->offset, std::move(*c));
  // Overlapping registrations would make the skips ambiguous: keep the first of each overlap.
  for (auto it = known.begin(); it != known.end();) {
    auto next = std::next(it);
    while (next != known.end() && next->first < it->first + it->second.size) next = known.erase(next);
    it = next;
  }
  return known;
}

// One unit of read_all's work: a part of a walked section (containers from `begin`, a
// registered container's offset, until `stop`), or of a scanned one (magic looked for in
// [begin, stop), containers parsed up to the section's end).
struct Task {
  const Section* section = nullptr;
  bool walk = false;
  std::uint64_t begin = 0;
  std::uint64_t stop = 0;
};

struct TaskResult {
  ScanResult scan;
  std::exception_ptr error;
};

// Scanning is most of the time on large libraries (libcublasLt: ~200 MB of data sections):
// parts of at least this size go to other threads. A walk costs a few small reads per
// container: parts of at least this many registered containers. Small inputs stay whole.
constexpr std::uint64_t kMinPart = 8 << 20;
constexpr std::size_t kMinWalkPart = 64;

// `registered`: the offsets of registered containers, sorted; where a walk may start.
std::vector<Task> plan_tasks(const Elf& elf, unsigned threads, const std::vector<std::uint64_t>& registered) {
  std::uint64_t scanned = 0;
  for (const auto& s : elf.sections)
    if (is_visited(s) && !is_walked(s)) scanned += s.size;
  // A few parts per thread, so one slow part does not leave the others idle.
  const std::uint64_t parts_wanted = threads > 1 ? threads * 4ULL : 1;
  const std::uint64_t part = threads > 1 ? std::max<std::uint64_t>(kMinPart, scanned / parts_wanted) : UINT64_MAX;
  std::vector<Task> tasks;
  for (const auto& s : elf.sections) {
    if (!is_visited(s)) continue;
    const std::uint64_t end = s.offset + s.size;
    if (is_walked(s)) {
      auto first = std::upper_bound(registered.begin(), registered.end(), s.offset);
      auto last = std::lower_bound(first, registered.end(), end);
      const auto n = static_cast<std::size_t>(last - first);
      const std::size_t step = std::max<std::size_t>(kMinWalkPart, n / parts_wanted);
      std::uint64_t b = s.offset;
      for (std::size_t k = step; k + step / 2 < n; k += step) {
        tasks.push_back({&s, true, b, first[static_cast<std::ptrdiff_t>(k)]});
        b = tasks.back().stop;
      }
      tasks.push_back({&s, true, b, end});
      continue;
    }
    for (std::uint64_t b = s.offset; b < end;) {
      std::uint64_t e = end - b > part + part / 2 ? b + part : end;  // no sliver at the end
      tasks.push_back({&s, false, b, e});
      b = e;
    }
  }
  return tasks;
}

// What read_all knows before reading the parts: the registered containers in scanned sections
// (parsed, skipped by the scan) and the offsets of all registrations (where walks may start).
struct Registered {
  Known known;
  std::vector<std::uint64_t> offsets;  // sorted
};

// A task's part, from `begin` (its own, or where the parts before it left off).
ScanResult run_part(ByteReader& in, const Task& t, std::uint64_t begin, const Registered& reg) {
  const Section& s = *t.section;
  return t.walk ? walk_range(in, s, begin, t.stop, placement_of(s), reg.offsets)
                : scan_range(in, begin, t.stop, s.offset + s.size, s.name, Placement::embedded, reg.known);
}

TaskResult run_task(ByteReader& in, const Task& t, const Registered& reg) {
  TaskResult r;
  try {
    r.scan = run_part(in, t, t.begin, reg);
  } catch (...) {
    r.error = std::current_exception();
  }
  return r;
}

// What a task costs, in bytes copied: a scan copies its range but the registered containers it
// skips; a walk reads a few headers per registered container (a read's cost is about that of
// copying 16 KiB).
std::uint64_t estimated_cost(const Task& t, const Registered& reg) {
  const auto& offsets = reg.offsets;
  if (t.walk) {
    auto n = std::lower_bound(offsets.begin(), offsets.end(), t.stop) -
             std::lower_bound(offsets.begin(), offsets.end(), t.begin);
    return static_cast<std::uint64_t>(n) * (16 << 10);
  }
  std::uint64_t skipped = 0;
  for (auto it = reg.known.lower_bound(t.begin); it != reg.known.end() && it->first < t.stop; ++it)
    skipped += std::min(it->second.size, t.stop - it->first);
  return t.stop - t.begin - std::min(skipped, t.stop - t.begin);
}

// Runs the tasks on up to `threads` threads, the costliest first, so that the last ones to run
// are small and no thread waits long for another at the end (libcublasLt's .ldata, the last
// section, is three parts of ~30 MB); results by task index.
std::vector<TaskResult> run_tasks(ByteReader& in, const std::vector<Task>& tasks, const Registered& reg,
                                  unsigned threads) {
  std::vector<TaskResult> results(tasks.size());
  std::vector<std::pair<std::uint64_t, std::size_t>> order;  // (cost, task)
  for (std::size_t i = 0; i < tasks.size(); ++i) order.emplace_back(estimated_cost(tasks[i], reg), i);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  parallel_for(in, order.size(), threads, [&](ByteReader& reader, std::size_t k) {
    const std::size_t i = order[k].second;
    results[i] = run_task(reader, tasks[i], reg);
  });
  return results;
}

// Puts the parts of one section back into what one walk or scan from its start finds. Both go
// from a position deterministically: a part agrees with the whole from the first container it
// found at or after where the previous parts left off, provided nothing it found before that
// runs past that point (the bytes between were then zeros to the walk, no valid container to
// the scan). Otherwise (a container across parts, a false match inside one, a registration
// that is no container's start, an error) the part is read again from there, on this thread,
// which raises a real error as one read from the start would.
void merge_parts(ByteReader& in, const std::vector<Task>& tasks, std::vector<TaskResult>& results, std::size_t first,
                 std::size_t last, const Registered& reg, std::vector<Container>& out) {
  std::uint64_t pos = tasks[first].section->offset;
  for (std::size_t i = first; i < last; ++i) {
    auto& r = results[i];
    if (!r.error) {
      auto& found = r.scan.found;
      auto kept = std::find_if(found.begin(), found.end(), [&](const Container& c) { return c.offset >= pos; });
      bool agrees = std::all_of(found.begin(), kept, [&](const Container& c) { return c.offset + c.size <= pos; });
      if (agrees) {
        for (auto it = kept; it != found.end(); ++it) out.push_back(std::move(*it));
        pos = std::max(pos, r.scan.resume);
        continue;
      }
    }
    auto again = run_part(in, tasks[i], pos, reg);
    for (auto& c : again.found) out.push_back(std::move(c));
    pos = std::max(pos, again.resume);
  }
}

std::vector<Container> read_all(ByteReader& in, const Elf& elf, ScanMode mode, unsigned threads) {
  if (elf.sections.empty()) return scan_section(in, 0, in.size(), "(whole file)", Placement::embedded);
  Registered reg;
  if (mode == ScanMode::registered) {
    auto regs = read_registrations(in, elf, RelocationUse::when_needed);
    if (regs) {
      const AddressMap map(elf);
      reg.known = known_containers(in, map, *regs, threads);
      auto& offsets = reg.offsets;
      for (const auto& r : *regs)
        if (auto off = map.file_offset_of(r.address())) offsets.push_back(*off);
      std::sort(offsets.begin(), offsets.end());
      offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
    }
  }
  const auto tasks = plan_tasks(elf, threads, reg.offsets);
  auto results = run_tasks(in, tasks, reg, threads);
  std::vector<Container> out;
  std::size_t found = 0;
  for (const auto& r : results) found += r.scan.found.size();
  out.reserve(found);
  for (std::size_t i = 0; i < tasks.size();) {
    std::size_t j = i + 1;
    while (j < tasks.size() && tasks[j].section == tasks[i].section) ++j;
    merge_parts(in, tasks, results, i, j, reg, out);
    i = j;
  }
  return out;
}

constexpr std::uint32_t kSegmentMagic = 0x466243B1;
constexpr std::uint64_t kWrapperSize = 24;
constexpr std::uint32_t kRelX86_64Relative = 8;
constexpr std::uint32_t kRelAarch64Relative = 1027;
constexpr std::uint64_t kRelaSize = 24;

// Addends of the RELATIVE relocations whose target lies in [first, first + length), by target.
std::map<std::uint64_t, std::uint64_t> relative_addends(ByteReader& in, const Elf& elf, std::uint64_t first,
                                                        std::uint64_t length) {
  std::map<std::uint64_t, std::uint64_t> out;
  const std::uint32_t relative = elf.header.machine == kEmAarch64 ? kRelAarch64Relative : kRelX86_64Relative;
  std::vector<std::uint8_t> buf;
  for (const auto& s : elf.sections) {
    if (s.type != kShtRela || s.size < kRelaSize) continue;
    // Read in large blocks: .rela.dyn of libcublasLt is 9 MB.
    constexpr std::uint64_t kBlock = (64 << 10) / kRelaSize * kRelaSize;
    const std::uint64_t count = s.size / kRelaSize;
    for (std::uint64_t i = 0; i < count; i += kBlock / kRelaSize) {
      std::uint64_t n = std::min(count - i, kBlock / kRelaSize);
      buf.resize(static_cast<std::size_t>(n * kRelaSize));
      in.read(s.offset + i * kRelaSize, buf.size(), buf.data());
      for (std::uint64_t k = 0; k < n; ++k) {
        // Elf64_Rela: r_offset u64, r_info u64 (type in the low 32 bits), r_addend i64
        std::uint64_t target = load<std::uint64_t>(Bytes(buf), k * kRelaSize);
        std::uint64_t info = load<std::uint64_t>(Bytes(buf), k * kRelaSize + 8);
        if (static_cast<std::uint32_t>(info) != relative || target < first || target - first >= length) continue;
        out[target] = load<std::uint64_t>(Bytes(buf), k * kRelaSize + 16);
      }
    }
  }
  return out;
}

}  // namespace

Result<std::vector<FatbinRegistration>> read_registrations(ByteReader& in, const Elf& elf, RelocationUse relocations) {
  try {
    std::vector<FatbinRegistration> out;
    const Section* seg = elf.find(kSegmentSection);
    if (!seg || seg->type == kShtNobits || seg->size < kWrapperSize) return out;
    std::vector<std::uint8_t> raw(static_cast<std::size_t>(seg->size / kWrapperSize * kWrapperSize));
    out.reserve(raw.size() / kWrapperSize);
    in.read(seg->offset, raw.size(), raw.data());
    bool unresolved = false;
    const AddressMap map(elf);
    for (std::uint64_t at = 0; at < raw.size(); at += kWrapperSize) {
      // __fatBinC_Wrapper_t: magic u32, version u32, data pointer u64, filename pointer u64
      if (load<std::uint32_t>(Bytes(raw), at) != kSegmentMagic) continue;
      FatbinRegistration r;
      r.wrapper = seg->offset + at;
      r.version = load<std::uint32_t>(Bytes(raw), at + 4);
      r.stored_address = load<std::uint64_t>(Bytes(raw), at + 8);
      r.field_address = seg->addr + at + 8;
      if (!map.file_offset_of(r.stored_address)) unresolved = true;
      out.push_back(r);
    }
    if (out.empty()) return out;
    if (relocations == RelocationUse::always || (relocations == RelocationUse::when_needed && unresolved)) {
      auto addends = relative_addends(in, elf, seg->addr, seg->size);
      for (auto& r : out)
        if (auto it = addends.find(r.field_address); it != addends.end()) r.relocated_address = it->second;
    }
    return out;
  } catch (const Malformed& e) {
    return Error::bad_input(e.what());
  }
}

Result<std::vector<Container>> scan_containers(Bytes data, std::uint64_t begin, std::uint64_t end,
                                               const std::string& section, Placement placement) {
  try {
    ByteReader in(data);
    return scan_section(in, begin, end, section, placement);
  } catch (const Malformed& e) {
    return Error::bad_input(e.what());
  }
}

Result<std::vector<Container>> read_containers(ByteReader& in, const Elf& elf, ScanMode mode, unsigned threads) {
  try {
    return read_all(in, elf, mode, std::max(1u, threads));
  } catch (const Malformed& e) {
    return Error::bad_input(e.what());
  }
}

Result<std::vector<Container>> read_containers(Bytes data, const Elf& elf, ScanMode mode, unsigned threads) {
  ByteReader in(data);
  return read_containers(in, elf, mode, threads);
}

}  // namespace archbuild::binary
