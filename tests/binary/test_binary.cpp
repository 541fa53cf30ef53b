// The ELF, fatbin and zip readers: real nvcc output (committed under tests/data/binaries),
// libcublas where the CUDA toolkit is installed, and malformed inputs made byte by byte.
#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "binary/builders.hpp"
#include "binary/byte_reader.hpp"
#include "binary/elf.hpp"
#include "binary/fatbin.hpp"
#include "binary/inspect.hpp"
#include "binary/mapped_file.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::binary;
namespace fs = std::filesystem;
using test::Buf;
using test::EntrySpec;

namespace {

const fs::path kData = fs::path(ARCHBUILD_TEST_DATA) / "binaries";

Bytes bytes_of(const Buf& b) { return {reinterpret_cast<const std::uint8_t*>(b.data()), b.size()}; }

std::set<std::string> names(const std::vector<ImageCount>& images, EntryKind kind) {
  std::set<std::string> out;
  for (const auto& ic : images)
    if (ic.kind == kind) out.insert(ic.name());
  return out;
}

FileReport inspect_one(const fs::path& p, bool verify = true) {
  InspectOptions o;
  o.verify = verify;
  auto r = inspect_path(p, o);
  INFO(p.string() << ": " << (r ? "" : r.error().message));
  REQUIRE(r.ok());
  REQUIRE(r->files.size() == 1);
  return r->files.front();
}

// Inspects bytes that must be refused; returns the one-line message.
std::string refused(const Buf& b, const InspectOptions& o = {}) {
  auto r = inspect_elf(bytes_of(b), "x.so", o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == Exit::bad_input);
  CHECK(r.error().message.find('\n') == std::string::npos);
  CHECK(r.error().message.rfind("x.so: ", 0) == 0);
  return r.error().message;
}

Buf read_bytes(const fs::path& p) { return test::read_file(p); }

Buf zstd(const Buf& in) {
  Buf out(ZSTD_compressBound(in.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3));
  return out;
}

Buf lz4(const Buf& in) {
  Buf out(LZ4_compressBound(static_cast<int>(in.size())), '\0');
  out.resize(static_cast<std::size_t>(
      LZ4_compress_default(in.data(), out.data(), static_cast<int>(in.size()), static_cast<int>(out.size()))));
  return out;
}

VerifyResult verify_single(const Buf& fatbin) {
  Buf file = test::elf_with_fatbin(fatbin);
  auto elf = read_elf(bytes_of(file));
  REQUIRE(elf.ok());
  auto cs = read_containers(bytes_of(file), *elf);
  REQUIRE(cs.ok());
  REQUIRE(cs->size() == 1);
  REQUIRE(cs->front().entries.size() == 1);
  return verify_entry(bytes_of(file), cs->front().entries.front());
}

}  // namespace

TEST_CASE("nvcc-built binaries: each lists exactly the code it was built with", "[binary]") {
  SECTION("sm_80, sm_90a and compute_120 PTX (default compression: PTX zstd)") {
    auto f = inspect_one(kData / "multi.so");
    auto img = f.runtime_images();
    CHECK(names(img, EntryKind::sass) == std::set<std::string>{"sm_80", "sm_90a"});
    CHECK(names(img, EntryKind::ptx) == std::set<std::string>{"compute_120"});
    CHECK(f.relocatable_images().empty());
    for (const auto& ic : img)
      CHECK(ic.compression.begin()->first == (ic.kind == EntryKind::ptx ? Compression::zstd : Compression::none));
    CHECK(f.machine == "x86-64");
    CHECK(f.problems.empty());
    CHECK(f.unchecked == 0);
  }
  SECTION("PTX only") {
    auto f = inspect_one(kData / "ptx_only.so");
    CHECK(names(f.runtime_images(), EntryKind::sass).empty());
    CHECK(names(f.runtime_images(), EntryKind::ptx) == std::set<std::string>{"compute_90"});
    CHECK(f.problems.empty());
  }
  SECTION("-rdc: the relocatable container is reported apart") {
    auto f = inspect_one(kData / "rdc.so");
    CHECK(names(f.runtime_images(), EntryKind::sass) == std::set<std::string>{"sm_90"});
    CHECK(names(f.relocatable_images(), EntryKind::sass) == std::set<std::string>{"sm_90"});
    std::size_t reloc = 0;
    for (const auto& c : f.containers)
      if (c.placement == Placement::relocatable) {
        ++reloc;
        CHECK(c.section == "__nv_relfatbin");
      }
    CHECK(reloc == 1);
    CHECK(f.problems.empty());
  }
  SECTION("--compress-mode=speed: LZ4") {
    auto f = inspect_one(kData / "lz4.so");
    CHECK(names(f.runtime_images(), EntryKind::sass) == std::set<std::string>{"sm_86"});
    CHECK(names(f.runtime_images(), EntryKind::ptx) == std::set<std::string>{"compute_86"});
    CHECK(f.compression()[Compression::lz4] == 1);
    CHECK(f.problems.empty());
  }
  SECTION("-Xfatbin -compress-all: every cubin zstd, a and f variants") {
    auto f = inspect_one(kData / "zstd_all.so");
    CHECK(names(f.runtime_images(), EntryKind::sass) == std::set<std::string>{"sm_75", "sm_100a", "sm_120f"});
    auto comp = f.compression();
    CHECK(comp.size() == 1);
    CHECK(comp[Compression::zstd] == 3);
    CHECK(f.problems.empty());
    auto images = f.code_images();
    CHECK(std::count_if(images.begin(), images.end(), [](const arch::CodeImage& i) {
            return i.cc == arch::Cc{12, 0} && i.variant == arch::Variant::f && i.kind == arch::CodeKind::sass;
          }) == 1);
  }
}

TEST_CASE("an aarch64 library is read like an x86-64 one", "[binary]") {
  Buf b = read_bytes(kData / "multi.so");
  test::put16(b, 0x12, kEmAarch64);
  auto r = inspect_elf(bytes_of(b), "arm.so");
  REQUIRE(r.ok());
  CHECK(r->machine == "aarch64");
  CHECK(r->entry_count() == 3);
}

TEST_CASE("libcublas.so.13 carries the device code its fatbin headers name", "[binary]") {
  fs::path lib = "/usr/local/cuda/lib64/libcublas.so.13";
  if (!fs::exists(lib)) {
    WARN("##archbuild-skip## " << lib << " is not installed");
    return;
  }
  auto f = inspect_one(lib, false);
  auto img = f.runtime_images();
  CHECK(names(img, EntryKind::sass) == std::set<std::string>{"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"});
  CHECK(names(img, EntryKind::ptx) == std::set<std::string>{"compute_120"});
  auto comp = f.compression();
  CHECK(comp.size() == 1);
  CHECK(comp.begin()->first == Compression::zstd);
  // Duplicates are counted, not listed twice.
  CHECK(f.entry_count() > img.size());
}

TEST_CASE("containers in other data sections are found by their magic, false magics are not", "[binary]") {
  Buf good = test::container({test::entry({.kind = 2, .sm = 89, .payload = test::cubin(89)}),
                              test::entry({.kind = 8, .sm = 75, .payload = Buf(40, 'L')})});
  // A magic followed by nonsense, then a real container after some unrelated bytes.
  Buf fake = test::container({}, 0xffff);
  Buf rodata = "some strings\0" + fake + Buf(5, '\x55') + Buf("P\xed\x55\xba", 4) + Buf(3, '\0') + good + "tail";
  Buf file = test::elf({{".text", Buf(16, '\xc3'), 1, 0x6},
                        {".rodata", rodata},
                        {".nv_fatbin", test::container({test::entry({.sm = 90, .payload = test::cubin(90)})})},
                        {".debug_info", good, 1, 0}});  // not allocated: not scanned
  auto r = inspect_elf(bytes_of(file), "lib.so", {.verify = true});
  REQUIRE(r.ok());
  REQUIRE(r->containers.size() == 2);
  CHECK(r->containers[0].section == ".rodata");
  CHECK(r->containers[0].placement == Placement::embedded);
  CHECK(names(r->runtime_images(), EntryKind::sass) == std::set<std::string>{"sm_89", "sm_90"});
  CHECK(names(r->runtime_images(), EntryKind::lto_ir) == std::set<std::string>{"lto_75"});
  // LTO-IR is not something the driver loads.
  CHECK(r->code_images().size() == 2);
  CHECK(r->problems.empty());
}

TEST_CASE("flags give the variant and the compression", "[binary]") {
  Buf fat = test::container({
      test::entry({.sm = 90, .flags = 0x100011, .payload = test::cubin(90)}),
      test::entry({.sm = 120, .flags = 0x200011, .payload = test::cubin(120)}),
      test::entry({.kind = 1,
                   .sm = 100,
                   .flags = 0x108011,
                   .payload = Buf(16, 'x'),
                   .compressed_size = 16,
                   .uncompressed_size = 64}),
      test::entry({.kind = 1,
                   .sm = 86,
                   .flags = 0x2011,
                   .payload = Buf(16, 'x'),
                   .compressed_size = 10,
                   .uncompressed_size = 64}),
      test::entry({.sm = 90, .flags = 0x100011, .payload = test::cubin(90)}),  // a duplicate
  });
  auto r = inspect_elf(bytes_of(test::elf_with_fatbin(fat)), "v.so");
  REQUIRE(r.ok());
  auto img = r->runtime_images();
  CHECK(names(img, EntryKind::sass) == std::set<std::string>{"sm_90a", "sm_120f"});
  CHECK(names(img, EntryKind::ptx) == std::set<std::string>{"compute_86", "compute_100a"});
  CHECK(r->entry_count() == 5);
  for (const auto& ic : img) {
    if (ic.name() == "sm_90a") CHECK(ic.count == 2);
    if (ic.name() == "compute_100a") CHECK(ic.compression.at(Compression::zstd) == 1);
    if (ic.name() == "compute_86") CHECK(ic.compression.at(Compression::lz4) == 1);
  }
}

TEST_CASE("malformed ELF files are refused with one line", "[binary][malformed]") {
  SECTION("empty") { CHECK_THAT(refused(""), Catch::Contains("truncated ELF header")); }
  SECTION("wrong magic") { CHECK_THAT(refused(Buf(64, 'A')), Catch::Contains("not an ELF file")); }
  SECTION("32-bit") {
    Buf b = test::elf_with_fatbin("");
    b[4] = 1;
    CHECK_THAT(refused(b), Catch::Contains("32-bit"));
  }
  SECTION("big-endian") {
    Buf b = test::elf_with_fatbin("");
    b[5] = 2;
    CHECK_THAT(refused(b), Catch::Contains("big-endian"));
  }
  SECTION("another machine") {
    Buf b = test::elf_with_fatbin("");
    test::put16(b, 0x12, 40);  // ARM (32-bit)
    CHECK_THAT(refused(b), Catch::Contains("machine 40"));
  }
  SECTION("section table past the end") {
    Buf b = test::elf_with_fatbin("");
    test::put64(b, 0x28, b.size() + 8);
    CHECK_THAT(refused(b), Catch::Contains("section header table"));
  }
  SECTION("section count overflowing the file") {
    Buf b = test::elf_with_fatbin("");
    test::put16(b, 0x3c, 0xfff0);
    CHECK_THAT(refused(b), Catch::Contains("section headers"));
  }
  SECTION("a section's data past the end, with an offset that overflows") {
    Buf b = test::elf_with_fatbin("");
    std::uint64_t shoff;
    std::memcpy(&shoff, b.data() + 0x28, 8);
    test::put64(b, shoff + 64 * 2 + 0x18, UINT64_MAX - 4);  // section 2 (.nv_fatbin) offset
    CHECK_THAT(refused(b), Catch::Contains("runs past the end of the file"));
  }
  SECTION("a name outside the name table") {
    Buf b = test::elf_with_fatbin("");
    std::uint64_t shoff;
    std::memcpy(&shoff, b.data() + 0x28, 8);
    test::put32(b, shoff + 64, 0x7fffffff);
    CHECK_THAT(refused(b), Catch::Contains("outside the name table"));
  }
  SECTION("every truncation of a real library") {
    Buf whole = read_bytes(kData / "multi.so");
    for (std::size_t n = 0; n < whole.size(); n += 61) {
      INFO("cut at " << n);
      refused(whole.substr(0, n));
    }
  }
}

TEST_CASE("malformed fatbins are refused with one line", "[binary][malformed]") {
  Buf ok_entry = test::entry({.sm = 90, .payload = test::cubin(90)});
  SECTION("wrong container magic in .nv_fatbin") {
    CHECK_THAT(refused(test::elf_with_fatbin(test::container({ok_entry}, UINT64_MAX, 0xBA55ED51))),
               Catch::Contains("unexpected bytes"));
  }
  SECTION("zero padding between containers is fine, garbage is not") {
    Buf two = test::container({ok_entry}) + Buf(8, '\0') + test::container({ok_entry});
    auto r = inspect_elf(bytes_of(test::elf_with_fatbin(two)), "x.so");
    REQUIRE(r.ok());
    CHECK(r->containers.size() == 2);
    CHECK_THAT(refused(test::elf_with_fatbin(test::container({ok_entry}) + "junk")),
               Catch::Contains("unexpected bytes"));
  }
  SECTION("container size that overflows") {
    CHECK_THAT(refused(test::elf_with_fatbin(test::container({ok_entry}, UINT64_MAX - 8))),
               Catch::Contains("runs past the end of .nv_fatbin"));
  }
  SECTION("container version") {
    Buf c = test::container({ok_entry});
    test::put16(c, 4, 7);
    CHECK_THAT(refused(test::elf_with_fatbin(c)), Catch::Contains("unknown version 7"));
  }
  SECTION("entry payload past the end of its container") {
    EntrySpec e{.sm = 90, .payload = test::cubin(90), .stored_size_override = 4096};
    CHECK_THAT(refused(test::elf_with_fatbin(test::container({test::entry(e)}))),
               Catch::Contains("payload of 4096 bytes runs past"));
  }
  SECTION("entry payload size that overflows") {
    EntrySpec e{.sm = 90, .payload = test::cubin(90), .stored_size_override = UINT64_MAX - 32};
    CHECK_THAT(refused(test::elf_with_fatbin(test::container({test::entry(e)}))), Catch::Contains("runs past"));
  }
  SECTION("entry header size below 64 (a loop that would never advance)") {
    Buf e = ok_entry;
    test::put32(e, 4, 0);
    CHECK_THAT(refused(test::elf_with_fatbin(test::container({e}))), Catch::Contains("below the minimum"));
  }
  SECTION("entry header size past the container") {
    Buf e = ok_entry;
    test::put32(e, 4, 0xfffffff0);
    CHECK_THAT(refused(test::elf_with_fatbin(test::container({e}))), Catch::Contains("header size"));
  }
  SECTION("truncated entry header") {
    CHECK_THAT(refused(test::elf_with_fatbin(test::container({ok_entry.substr(0, 40)}))),
               Catch::Contains("header runs past"));
  }
  SECTION("unknown kind") {
    Buf e = ok_entry;
    test::put16(e, 0, 3);
    CHECK_THAT(refused(test::elf_with_fatbin(test::container({e}))), Catch::Contains("unknown kind 3"));
  }
  SECTION("arch that is not an SM") {
    CHECK_THAT(refused(test::elf_with_fatbin(test::container({test::entry({.sm = 0, .payload = "x"})}))),
               Catch::Contains("not an SM number"));
  }
  SECTION("nested false containers in a data section cannot make the scan quadratic") {
    // Every 128 bytes a container header claiming the rest of the section, then an entry
    // whose payload covers the next container header: each candidate walks every entry to
    // the end and fails on the last one (unknown kind). Without a work budget that is
    // 20000 candidates × 10000 entries on average.
    constexpr std::size_t kUnits = 20000;
    Buf unit = test::container({test::entry({.sm = 90, .payload = Buf(64, '\0')})});
    Buf rodata;
    for (std::size_t m = 0; m < kUnits; ++m) rodata += unit.substr(0, 16 + 64 + 48);
    rodata += test::entry({.kind = 3, .sm = 90});
    for (std::size_t m = 0; m < kUnits; ++m) test::put64(rodata, 128 * m + 8, rodata.size() - 128 * m - 16);
    auto message = refused(test::elf({{".rodata", rodata}}));
    CHECK_THAT(message, Catch::Contains("too many invalid fatbin headers"));
  }
  SECTION("compressed size larger than the payload") {
    EntrySpec e{.sm = 90, .flags = 0x8011, .payload = Buf(16, 'z'), .compressed_size = 17, .uncompressed_size = 100};
    CHECK_THAT(refused(test::elf_with_fatbin(test::container({test::entry(e)}))),
               Catch::Contains("compressed size 17"));
  }
}

TEST_CASE("verify cross-checks decompressed entries against their headers", "[binary][verify]") {
  SECTION("uncompressed cubin whose e_flags disagree") {
    auto v = verify_single(test::container({test::entry({.sm = 90, .payload = test::cubin(86)})}));
    CHECK(v.status == VerifyStatus::mismatch);
    CHECK_THAT(v.message, Catch::Contains("sm_86") && Catch::Contains("sm_90"));
  }
  SECTION("old e_flags layout (ABI version 7): SM in the low byte") {
    Buf c = test::cubin(0);
    c[7] = 0x33, c[8] = 7;
    test::put32(c, 0x30, 0x5a0000 | 86);
    CHECK(verify_single(test::container({test::entry({.sm = 86, .payload = c})})).status == VerifyStatus::ok);
  }
  SECTION("zstd cubin") {
    Buf cub = test::cubin(100);
    Buf z = zstd(cub);
    EntrySpec e{.sm = 100,
                .flags = 0x8011,
                .payload = z,
                .compressed_size = static_cast<std::uint32_t>(z.size()),
                .uncompressed_size = cub.size()};
    CHECK(verify_single(test::container({test::entry(e)})).status == VerifyStatus::ok);
    e.sm = 103;
    CHECK(verify_single(test::container({test::entry(e)})).status == VerifyStatus::mismatch);
    e.sm = 100;
    e.uncompressed_size = cub.size() + 8;
    CHECK_THAT(verify_single(test::container({test::entry(e)})).message, Catch::Contains("decompresses to"));
  }
  SECTION("LZ4 PTX with the a variant") {
    Buf ptx = "//\n// Generated by NVIDIA NVVM Compiler\n.version 9.0\n.target sm_90a\n.address_size 64\n";
    Buf l = lz4(ptx);
    EntrySpec e{.kind = 1,
                .sm = 90,
                .flags = 0x102011,
                .payload = l,
                .compressed_size = static_cast<std::uint32_t>(l.size()),
                .uncompressed_size = ptx.size()};
    CHECK(verify_single(test::container({test::entry(e)})).status == VerifyStatus::ok);
    e.flags = 0x2011;  // header says plain compute_90
    auto v = verify_single(test::container({test::entry(e)}));
    CHECK(v.status == VerifyStatus::mismatch);
    CHECK_THAT(v.message, Catch::Contains(".target sm_90a"));
  }
  SECTION("PTX without a .target line, or holding an ELF") {
    CHECK(
        verify_single(test::container({test::entry({.kind = 1, .sm = 90, .payload = "// .target sm_90\n"})})).status ==
        VerifyStatus::mismatch);
    CHECK(verify_single(test::container({test::entry({.kind = 1, .sm = 90, .payload = test::cubin(90)})})).status ==
          VerifyStatus::mismatch);
  }
  SECTION("a payload that does not decompress") {
    EntrySpec e{.sm = 90, .flags = 0x8011, .payload = Buf(32, 'q'), .compressed_size = 32, .uncompressed_size = 1000};
    CHECK_THAT(verify_single(test::container({test::entry(e)})).message, Catch::Contains("zstd"));
    e.flags = 0x2011;
    CHECK(verify_single(test::container({test::entry(e)})).status == VerifyStatus::mismatch);
  }
  SECTION("an uncompressed size over the limit is not allocated") {
    EntrySpec e{
        .sm = 90, .flags = 0x8011, .payload = Buf(32, 'q'), .compressed_size = 32, .uncompressed_size = UINT64_MAX};
    CHECK_THAT(verify_single(test::container({test::entry(e)})).message, Catch::Contains("over the limit"));
  }
  SECTION("encoded LTO-IR is reported as unchecked, not as fine") {
    EntrySpec e{.kind = 8,
                .sm = 75,
                .flags = 0x12011,
                .payload = Buf(32, 'q'),
                .compressed_size = 32,
                .uncompressed_size = 100};
    CHECK(verify_single(test::container({test::entry(e)})).status == VerifyStatus::unchecked);
  }
}

TEST_CASE("wheels and zips are read in memory", "[binary][zip]") {
  test::TempDir dir;
  Buf so = read_bytes(kData / "multi.so");
  Buf rdc = read_bytes(kData / "rdc.so");
  SECTION("ELF members are inspected, other members skipped") {
    auto whl = dir.write("t-1.0-cp311-linux_x86_64.whl", test::zip({{"t/__init__.py", "import os\n"},
                                                                    {"t/lib/libk.so", so},
                                                                    {"t/lib/librdc.so", rdc},
                                                                    {"t-1.0.dist-info/RECORD", "t/__init__.py,,\n"}}));
    auto r = inspect_path(whl);
    REQUIRE(r.ok());
    REQUIRE(r->files.size() == 2);
    CHECK(r->files[0].path == whl.string() + "!t/lib/libk.so");
    CHECK(names(r->files[0].runtime_images(), EntryKind::sass) == std::set<std::string>{"sm_80", "sm_90a"});
    CHECK(names(r->files[1].relocatable_images(), EntryKind::sass) == std::set<std::string>{"sm_90"});
  }
  SECTION("stored members too") {
    auto whl = dir.write("s.whl", test::zip({{"a/b.so", so}}, false));
    auto r = inspect_path(whl);
    REQUIRE(r.ok());
    CHECK(r->files.size() == 1);
  }
  SECTION("hostile member names refuse the archive and nothing is written") {
    for (std::string name : {"../x.so", "/etc/x.so", "a/../../x.so", "a\\..\\x.so", "C:x.so", "a/\n/x.so"}) {
      INFO(name);
      auto whl = dir.write("h.whl", test::zip({{"ok.so", so}, {name, so}}));
      auto r = inspect_path(whl);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().exit == Exit::bad_input);
      CHECK_THAT(r.error().message, Catch::Contains("unsafe path"));
      CHECK(r.error().message.find('\n') == std::string::npos);
    }
    CHECK_FALSE(fs::exists(dir.path().parent_path() / "x.so"));
  }
  SECTION("a zip without ELF files") {
    auto whl = dir.write("py.whl", test::zip({{"a.py", "x = 1\n"}}));
    auto r = inspect_path(whl);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("no ELF files"));
  }
  SECTION("a truncated zip") {
    Buf z = test::zip({{"a/b.so", so}, {"c.so", rdc}});
    auto whl = dir.write("cut.whl", z.substr(0, z.size() / 2));
    auto r = inspect_path(whl);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit == Exit::bad_input);
  }
  SECTION("a member over the size limit") {
    auto whl = dir.write("big.whl", test::zip({{"a/b.so", so}}));
    InspectOptions o;
    o.max_member_size = 1000;
    auto r = inspect_path(whl, o);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("over the limit"));
  }
  SECTION("a malformed ELF member names the member") {
    auto whl = dir.write("m.whl", test::zip({{"lib/bad.so", so.substr(0, 2000)}}));
    auto r = inspect_path(whl);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::StartsWith(whl.string() + "!lib/bad.so: "));
  }
}

TEST_CASE("unsafe member names", "[binary][zip]") {
  CHECK(unsafe_member_name(""));
  CHECK(unsafe_member_name("../a"));
  CHECK(unsafe_member_name("a/.."));
  CHECK(unsafe_member_name("/a"));
  CHECK(unsafe_member_name("a\\b"));
  CHECK(unsafe_member_name("D:a"));
  CHECK(unsafe_member_name(std::string("a\x01", 2)));
  CHECK_FALSE(unsafe_member_name("torch/lib/libtorch_cuda.so"));
  CHECK_FALSE(unsafe_member_name("a/..b/c"));
  CHECK_FALSE(unsafe_member_name("dir/"));
}

TEST_CASE("directories: every ELF file below, links not followed", "[binary]") {
  test::TempDir dir;
  Buf so = read_bytes(kData / "multi.so");
  dir.write("lib/libk.so", so);
  dir.write("lib/sub/libp.so", read_bytes(kData / "ptx_only.so"));
  dir.write("lib/README", "not ELF");
  dir.write("lib/libcpu.so", test::elf({{".text", Buf(16, '\xc3'), 1, 0x6}}));
  fs::create_symlink("libk.so", dir / "lib/libk.so.1");
  fs::create_directory_symlink(dir / "lib", dir / "lib/sub/loop");
  Buf cuda_elf = test::cubin(90);  // an ELF for another machine: skipped, not refused
  dir.write("lib/kernel.cubin", cuda_elf);
  auto r = inspect_path(dir / "lib");
  REQUIRE(r.ok());
  std::vector<std::string> paths;
  for (const auto& f : r->files) paths.push_back(fs::relative(f.path, dir.path()).string());
  CHECK(paths == std::vector<std::string>{"lib/libcpu.so", "lib/libk.so", "lib/sub/libp.so"});
  CHECK_FALSE(r->files[0].has_device_code());
  CHECK(r->skipped.size() == 1);

  SECTION("a directory of non-ELF files is refused") {
    test::TempDir plain;
    plain.write("a.txt", "hello");
    plain.write("b/c.py", "x = 1");
    auto p = inspect_path(plain.path());
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.error().message, Catch::Contains("no ELF files"));
  }
  SECTION("a malformed ELF file in a directory fails the directory") {
    dir.write("lib/zz.so", so.substr(0, 100));
    auto p = inspect_path(dir / "lib");
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.error().message, Catch::Contains("zz.so: "));
  }
}

TEST_CASE("files that are neither ELF nor zip", "[binary][malformed]") {
  test::TempDir dir;
  auto check = [&](const std::string& name, const Buf& content, const std::string& expected) {
    auto r = inspect_path(dir.write(name, content));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit == Exit::bad_input);
    CHECK_THAT(r.error().message, Catch::Contains(expected));
  };
  check("empty.so", "", "empty file");
  check("text.so", "hello world", "not an ELF file, a wheel or a zip");
  check("pk.whl", "PK\x03\x04garbage", "not a readable zip");
  // Read through the central directory, as pip does: a zip short of its end record is not one.
  Buf zip = test::zip({{"pkg/libk.so", test::elf_with_fatbin(test::container({test::entry({2, 90, 0x11, test::cubin(90)})}))}});
  REQUIRE(inspect_path(dir.write("whole.whl", zip)).ok());
  check("cut.whl", zip.substr(0, zip.size() - 10), "its central directory cannot be found");
  auto missing = inspect_path(dir / "nope.so");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("no such file"));
}

// Inspect at memory speed: the fast path (registered containers from
// .nvFatBinSegment, the rest walked or scanned through pread buffers, skipping what is known)
// must find exactly what the full scan finds (every data section scanned in memory).

namespace {

// Everything a report shows of a container, as one comparable string.
std::string describe(const std::vector<Container>& cs) {
  std::string out;
  for (const auto& c : cs) {
    out += fmt::format("{} {} {:#x}+{:#x}:", c.section, to_string(c.placement), c.offset, c.size);
    for (const auto& e : c.entries)
      out += fmt::format(" {}@{:#x}/{}/{}/{:#x}", e.name(), e.offset, e.stored_size, to_string(e.compression), e.flags);
    out += '\n';
  }
  return out;
}

// The section (with bytes) holding virtual address `addr`, and the file offset there.
std::optional<std::uint64_t> offset_of(const Elf& elf, std::uint64_t addr) {
  for (const auto& s : elf.sections)
    if ((s.flags & kShfAlloc) && s.type != kShtNobits && s.type != 0 && addr >= s.addr && addr - s.addr < s.size)
      return s.offset + (addr - s.addr);
  return std::nullopt;
}

// The fast path against the full scan on one file; returns the registrations.
std::vector<FatbinRegistration> check_fast_equals_full(const fs::path& p) {
  INFO(p.string());
  auto mapped = MappedFile::open(p);
  REQUIRE(mapped);
  auto elf = read_elf(mapped->bytes());
  REQUIRE(elf);
  auto reader = ByteReader::open(p);
  REQUIRE(reader);
  auto fast = read_containers(*reader, *elf, ScanMode::registered);
  REQUIRE(fast);
  auto full = read_containers(mapped->bytes(), *elf, ScanMode::full);
  REQUIRE(full);
  CHECK(fast->size() == full->size());
  CHECK(describe(*fast) == describe(*full));
  // Large libraries are scanned in parts on several threads: the same containers.
  auto parallel = read_containers(*reader, *elf, ScanMode::registered, 3);
  REQUIRE(parallel);
  CHECK(describe(*parallel) == describe(*full));
  // Both ways of reading the pointers agree, and each points at a container found.
  auto regs = read_registrations(*reader, *elf, RelocationUse::always);
  REQUIRE(regs);
  std::set<std::uint64_t> starts;
  for (const auto& c : *full) starts.insert(c.offset);
  for (const auto& r : *regs) {
    if (elf->header.type == 3) {
      REQUIRE(r.relocated_address.has_value());
      if (r.stored_address != 0) CHECK(r.stored_address == *r.relocated_address);
    }
    auto off = offset_of(*elf, r.address());
    REQUIRE(off.has_value());
    CHECK(starts.count(*off) == 1);
  }
  return std::move(*regs);
}

}  // namespace

TEST_CASE("inspect finds the same containers as a full scan on every CUDA library", "[binary][cuda]") {
  const fs::path lib64 = "/usr/local/cuda/lib64";
  if (!fs::is_directory(lib64)) {
    WARN("##archbuild-skip## /usr/local/cuda/lib64 is not installed");
    return;
  }
  std::size_t libraries = 0, registered = 0;
  for (const auto& de : fs::directory_iterator(lib64)) {
    if (de.is_symlink() || !de.is_regular_file()) continue;
    auto mapped = MappedFile::open(de.path());
    REQUIRE(mapped);
    Bytes b = mapped->bytes();
    if (!looks_like_elf(b)) continue;
    ++libraries;
    registered += check_fast_equals_full(de.path()).size();
  }
  CHECK(libraries > 0);
  CHECK(registered > 0);
}

TEST_CASE("a shared object's registered container is found through its RELATIVE relocation", "[binary][nvcc]") {
  const fs::path nvcc = "/usr/local/cuda/bin/nvcc";
  if (auto u = archbuild::test::unusable(nvcc); !u.empty()) {
    WARN("##archbuild-skip## " << u);
    return;
  }
  test::TempDir dir;
  auto cu = dir.write("k.cu", "__global__ void k(int* p) { *p = 1; }\nvoid launch(int* p) { k<<<1, 1>>>(p); }\n");
  auto so = dir / "libk.so";
  auto built = test::run(nvcc.string(), {"-shared", "-cudart", "shared", "-Xcompiler", "-fPIC", "-gencode",
                                         "arch=compute_90,code=sm_90", "-o", so.string(), cu.string()});
  INFO(built.err);
  REQUIRE(built.status == 0);

  // nvcc 13.0 -shared writes two wrappers here (versions 1 and 2), each pointing at its own
  // container in .nv_fatbin.
  auto regs = check_fast_equals_full(so);
  REQUIRE_FALSE(regs.empty());
  for (const auto& r : regs) CHECK(r.relocated_address.has_value());

  // The same library as lld leaves it: 0 in the fields, the addresses only in the relocations.
  Buf bytes = read_bytes(so);
  for (const auto& r : regs) test::put64(bytes, static_cast<std::size_t>(r.wrapper + 8), 0);
  auto zeroed = dir.write("libzero.so", bytes);
  ByteReader in(bytes_of(bytes));
  auto elf = read_elf(bytes_of(bytes));
  REQUIRE(elf);
  auto again = read_registrations(in, *elf);  // reads the relocations because the fields are 0
  REQUIRE(again);
  REQUIRE(again->size() == regs.size());
  for (std::size_t i = 0; i < regs.size(); ++i) {
    CHECK(again->at(i).stored_address == 0);
    CHECK(again->at(i).relocated_address == regs[i].relocated_address);
  }
  auto none = read_registrations(in, *elf, RelocationUse::never);
  REQUIRE(none);
  CHECK(none->front().address() == 0);
  check_fast_equals_full(zeroed);
  auto report = inspect_one(zeroed, false);
  CHECK(names(report.runtime_images(), EntryKind::sass) == std::set<std::string>{"sm_90"});
}

// The section `name` of `elf`, which the test's file has.
static const Section& section_of(const Elf& elf, const char* name) {
  const Section* s = elf.find(name);
  REQUIRE(s);
  return *s;
}

// The ELF builder leaves every sh_addr 0: gives each section its file offset as address.
static void addresses_at_offsets(Buf& file) {
  auto elf = read_elf(bytes_of(file));
  REQUIRE(elf);
  std::uint64_t shoff = 0;
  std::memcpy(&shoff, file.data() + 0x28, 8);
  for (std::size_t i = 1; i < elf->sections.size(); ++i)
    test::put64(file, static_cast<std::size_t>(shoff + 64 * i + 0x10), elf->sections[i].offset);
}

// An ELF file with `fat` as .nv_fatbin and a .nvFatBinSegment registering each of `offsets`
// (relative to .nv_fatbin's start), in that order.
static Buf registering_file(const Buf& fat, const std::vector<std::uint64_t>& offsets) {
  Buf seg(24 * offsets.size(), '\0');
  Buf file = test::elf({{".text", Buf(32, '\xc3'), 1, 0x6}, {".nv_fatbin", fat}, {".nvFatBinSegment", seg, 1, 0x3}});
  addresses_at_offsets(file);
  auto elf = read_elf(bytes_of(file));
  REQUIRE(elf);
  const Section* fs = elf->find(".nv_fatbin");
  const Section* ss = elf->find(".nvFatBinSegment");
  REQUIRE(fs);
  REQUIRE(ss);
  for (std::size_t w = 0; w < offsets.size(); ++w) {
    test::put32(file, ss->offset + 24 * w, 0x466243B1);
    test::put32(file, ss->offset + 24 * w + 4, 1);
    test::put64(file, ss->offset + 24 * w + 8, fs->addr + offsets[w]);
  }
  return file;
}

TEST_CASE("registrations that point nowhere change nothing", "[binary]") {
  // A fatbin in .nv_fatbin and one in .rodata; the segment registers the first, a wrapper
  // with another magic, and an address outside the file.
  Buf one = test::container({test::entry({2, 90})});
  Buf two = test::container({test::entry({1, 120})});
  Buf rodata = Buf(100, 'x') + two + Buf(50, 'y');
  Buf seg(72, '\0');
  test::put32(seg, 0, 0x466243B1);
  test::put32(seg, 4, 1);
  test::put32(seg, 24, 0x12345678);
  test::put32(seg, 48, 0x466243B1);
  test::put32(seg, 52, 1);
  test::put64(seg, 56, 0xdead0000);
  Buf file = test::elf({{".text", Buf(32, '\xc3'), 1, 0x6},
                        {".nv_fatbin", one},
                        {".rodata", rodata},
                        {".nvFatBinSegment", seg, 1, 0x3}});
  addresses_at_offsets(file);
  auto elf = read_elf(bytes_of(file));
  REQUIRE(elf);
  const Section* fat = elf->find(".nv_fatbin");
  REQUIRE(fat);
  test::put64(file, static_cast<std::size_t>(elf->find(".nvFatBinSegment")->offset + 8), fat->addr);
  ByteReader in(bytes_of(file));
  auto regs = read_registrations(in, *elf);
  REQUIRE(regs);
  CHECK(regs->size() == 2);  // the wrapper with another magic is left out
  auto fast = read_containers(in, *elf, ScanMode::registered);
  auto full = read_containers(bytes_of(file), *elf, ScanMode::full);
  REQUIRE(fast);
  REQUIRE(full);
  REQUIRE(full->size() == 2);
  CHECK(describe(*fast) == describe(*full));
  CHECK(full->at(1).section == ".rodata");
}

TEST_CASE("registrations into sections whose addresses overlap change nothing", "[binary]") {
  // A crafted file: .data claims .rodata's addresses. The registration's address is in both; the
  // first section in header order that holds it decides (the lookup's fallback where sections
  // overlap), and whichever it is, the containers found are a full scan's.
  Buf two = test::container({test::entry({1, 120})});
  Buf three = test::container({test::entry({2, 86})});
  Buf seg(24, '\0');
  test::put32(seg, 0, 0x466243B1);
  test::put32(seg, 4, 1);
  for (bool data_first : {false, true}) {
    std::vector<test::SectionSpec> specs = {{".text", Buf(32, '\xc3'), 1, 0x6},
                                            {".rodata", Buf(100, 'x') + two + Buf(50, 'y')},
                                            {".data", Buf(60, 'z') + three + Buf(90, 'w'), 1, 0x3},
                                            {".nvFatBinSegment", seg, 1, 0x3}};
    if (data_first) std::swap(specs[1], specs[2]);
    Buf file = test::elf(specs);
    addresses_at_offsets(file);
    auto elf = read_elf(bytes_of(file));
    REQUIRE(elf);
    // .data's address becomes .rodata's; the registration points at `two` (100 bytes in).
    const std::uint64_t ro = section_of(*elf, ".rodata").addr;
    std::uint64_t shoff = 0;
    std::memcpy(&shoff, file.data() + 0x28, 8);
    const std::size_t data_index = data_first ? 2 : 3;
    test::put64(file, static_cast<std::size_t>(shoff + 64 * data_index + 0x10), ro);
    test::put64(file, static_cast<std::size_t>(section_of(*elf, ".nvFatBinSegment").offset + 8), ro + 100);
    elf = read_elf(bytes_of(file));
    REQUIRE(elf);
    INFO((data_first ? ".data first" : ".rodata first"));
    ByteReader in(bytes_of(file));
    auto regs = read_registrations(in, *elf);
    REQUIRE(regs);
    CHECK(regs->size() == 1);
    auto full = read_containers(bytes_of(file), *elf, ScanMode::full);
    REQUIRE(full);
    REQUIRE(full->size() == 2);
    for (unsigned threads : {1u, 4u}) {
      auto fast = read_containers(in, *elf, ScanMode::registered, threads);
      REQUIRE(fast);
      CHECK(describe(*fast) == describe(*full));
    }
  }
}

TEST_CASE("a data section scanned in parts on threads gives what one scan gives", "[binary]") {
  // 48 MiB of data: read_all cuts it into 8 MiB parts (its minimum part) for 2 to 8 threads, so
  // the placements below sit on the parts' boundaries, offsets relative to the section.
  constexpr std::size_t kMiB = 1 << 20;
  Buf data(48 * kMiB, 'x');
  auto put = [&](std::size_t at, const Buf& b) { data.replace(at, b.size(), b); };
  auto with_payload = [](std::uint32_t sm, std::size_t bytes) {
    return test::container({test::entry({.kind = 2, .sm = sm, .payload = Buf(bytes, 'p')})});
  };
  // A container straddling the first boundary.
  put(8 * kMiB - 1000, with_payload(80, 5000));
  // A container A straddling the second boundary, and inside A's payload, in the next part, the
  // bytes of a container B that parses and runs past A's end, over a real container C. One scan
  // skips A whole and finds C; the part after the boundary finds B and skips C.
  const std::size_t a_at = 16 * kMiB - 2000;
  Buf a = with_payload(86, 10000);
  put(a_at, a);
  Buf b = test::container({test::entry({.kind = 2, .sm = 70, .stored_size_override = 20000})}, 64 + 20000);
  b.resize(16 + 64);  // header and entry header only: its payload is whatever follows
  put(16 * kMiB + 104, b);
  const std::size_t c_at = a_at + a.size() + 504;
  put(c_at, with_payload(89, 3000));
  // A false magic across the third boundary, a container right at the fourth, and a few more.
  put(24 * kMiB - 2, Buf("P\xed\x55\xba", 4) + Buf(12, '\x7f'));
  put(32 * kMiB, with_payload(90, 4000));
  for (std::size_t k = 0; k < 7; ++k) put(40 * kMiB + 123456 * k + 8, with_payload(75 + k, 100 + 300 * k));

  Buf file = test::elf({{".text", Buf(32, '\xc3'), 1, 0x6}, {".rodata", data}});
  auto elf = read_elf(bytes_of(file));
  REQUIRE(elf);
  const Section* rodata = elf->find(".rodata");
  REQUIRE(rodata);
  auto one = read_containers(bytes_of(file), *elf, ScanMode::full, 1);
  REQUIRE(one);
  std::vector<std::uint64_t> offsets;
  for (const auto& c : *one) offsets.push_back(c.offset - rodata->offset);
  CHECK(offsets.size() == 11);
  CHECK(std::count(offsets.begin(), offsets.end(), a_at) == 1);
  CHECK(std::count(offsets.begin(), offsets.end(), c_at) == 1);
  CHECK(std::count(offsets.begin(), offsets.end(), 16 * kMiB + 104) == 0);  // B lies inside A
  // ... yet a scan from the boundary finds B and misses C: the case the merge must repair.
  const std::uint64_t boundary = rodata->offset + 16 * kMiB;
  auto from_boundary = scan_containers(bytes_of(file), boundary, rodata->offset + rodata->size, ".rodata",
                                       Placement::embedded);
  REQUIRE(from_boundary);
  REQUIRE_FALSE(from_boundary->empty());
  CHECK(from_boundary->front().offset == boundary + 104);
  CHECK(from_boundary->size() > 1);
  CHECK((*from_boundary)[1].offset > rodata->offset + c_at);
  for (unsigned threads : {2u, 3u, 4u, 8u}) {
    INFO(threads << " threads");
    auto parts = read_containers(bytes_of(file), *elf, ScanMode::full, threads);
    REQUIRE(parts);
    CHECK(describe(*parts) == describe(*one));
  }
  // From a file (each thread its own descriptor), through inspect's option.
  test::TempDir dir;
  auto report = inspect_path(dir.write("libparts.so", file), {.threads = 4});
  REQUIRE(report);
  REQUIRE(report->files.size() == 1);
  CHECK(describe(report->files[0].containers) == describe(*one));
}

TEST_CASE("a walk split at registered containers gives what one walk gives, registrations that are no start included",
          "[binary]") {
  // 300 containers in .nv_fatbin, some apart by zero padding. Each is registered, and so is a
  // bogus address beside each: inside its entry header for most, in the padding before it for
  // some. read_all starts parts of the walk at registered offsets; those that are no container's
  // start must be read again from where the parts before them left off.
  Buf fat;
  std::vector<std::uint64_t> starts, bogus;
  for (std::uint32_t k = 0; k < 300; ++k) {
    if (k % 7 == 3) {
      bogus.push_back(fat.size() + 8);  // in the padding
      fat += Buf(32, '\0');
    } else if (k > 0) {
      bogus.push_back(fat.size() - 40);  // inside the previous container's entry
    }
    starts.push_back(fat.size());
    fat += test::container({test::entry({.kind = 2, .sm = 50 + k % 70, .payload = Buf(8 * (k % 13), 'p')})});
  }
  std::vector<std::uint64_t> registered = starts;
  registered.insert(registered.end(), bogus.begin(), bogus.end());
  Buf file = registering_file(fat, registered);
  auto elf = read_elf(bytes_of(file));
  REQUIRE(elf);
  const Section* fs = elf->find(".nv_fatbin");
  REQUIRE(fs);
  auto full = read_containers(bytes_of(file), *elf, ScanMode::full);
  REQUIRE(full);
  REQUIRE(full->size() == 300);
  for (unsigned threads : {1u, 2u, 3u, 4u, 8u}) {
    INFO(threads << " threads");
    auto parts = read_containers(bytes_of(file), *elf, ScanMode::registered, threads);
    REQUIRE(parts);
    CHECK(describe(*parts) == describe(*full));
  }
  // A part that starts at a real container yet meets a malformed one still fails the walk, with
  // the error one walk from the start gives.
  Buf broken = file;
  test::put32(broken, static_cast<std::size_t>(fs->offset + starts[250]), 0x12345678);
  auto one = read_containers(bytes_of(broken), *elf, ScanMode::full);
  REQUIRE_FALSE(one);
  auto split = read_containers(bytes_of(broken), *elf, ScanMode::registered, 4);
  REQUIRE_FALSE(split);
  CHECK(split.error().message == one.error().message);
}

// read_batch with io_uring allowed or not (the path of kernels that refuse it), for one test.
struct IoUring {
  explicit IoUring(bool allowed) { ByteReader::allow_io_uring(allowed); }
  ~IoUring() { ByteReader::allow_io_uring(true); }
};

// A temporary file of 1 MiB whose bytes differ from their neighbours (what a read got is checked
// against them byte for byte), and a reader of it.
struct PatternedFile {
  static Buf patterned() {
    Buf content(1 << 20, '\0');
    for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>((i * 2654435761u) >> 13);
    return content;
  }
  const Buf content = patterned();
  test::TempDir dir;
  const fs::path path = dir.write("data.bin", content);
  ByteReader reader = ByteReader::open(path).take();
};

TEST_CASE("read_batch reads what single reads read, from a file and from memory", "[binary]") {
  // More reads than one io_uring submission holds (256), of every small length, anywhere in
  // the file, the last byte included; a read past the end is refused before anything is read.
  PatternedFile f;
  const Buf& content = f.content;
  ByteReader memory(bytes_of(content));
  // io_uring where the kernel allows it, and the pread path of kernels that refuse it.
  const bool ring = GENERATE(true, false);
  IoUring io_uring(ring);
  INFO((ring ? "io_uring allowed" : "io_uring refused"));
  for (ByteReader* in : {&f.reader, &memory}) {
    std::vector<ByteReader::BatchRead> reads;
    std::vector<std::uint8_t> out(1000 * 300);
    for (std::size_t k = 0; k < 1000; ++k) {
      std::uint32_t len = static_cast<std::uint32_t>(1 + (k * 7) % 300);
      std::uint64_t off = k == 999 ? content.size() - len : (k * 104729) % (content.size() - len);
      reads.push_back({off, len, out.data() + k * 300});
    }
    in->read_batch(reads);
    for (const auto& r : reads) {
      INFO("read at " << r.offset << " of " << r.length);
      REQUIRE(std::memcmp(r.out, content.data() + r.offset, r.length) == 0);
    }
    std::uint8_t spare[8] = {};
    std::vector<ByteReader::BatchRead> past{{0, 8, spare}, {content.size() - 4, 8, spare}};
    CHECK_THROWS_AS(in->read_batch(past), Malformed);
    CHECK(spare[0] == 0);
  }
}

TEST_CASE("a batch that fails part-way leaves the reader's next batches right", "[binary]") {
  // A file that shrinks while it is read: the first read of a batch of 300 finds its end, the
  // 299 others succeed. Their completions must not be left in the reader's io_uring for the
  // next batch, of 2 reads, to take as its own (indices up to 299 into 2 reads).
  PatternedFile f;
  const Buf& content = f.content;
  ByteReader* in = &f.reader;
  fs::resize_file(f.path, content.size() / 2);
  const bool ring = GENERATE(true, false);
  IoUring io_uring(ring);
  INFO((ring ? "io_uring allowed" : "io_uring refused"));
  std::vector<std::uint8_t> out(300 * 64);
  std::vector<ByteReader::BatchRead> failing{{content.size() / 2 + 4096, 64, out.data()}};
  for (std::uint32_t k = 1; k < 300; ++k) failing.push_back({k * 1000ULL, 64, out.data() + k * 64});
  CHECK_THROWS_AS(in->read_batch(failing), Malformed);
  for (int round = 0; round < 3; ++round) {
    std::vector<ByteReader::BatchRead> reads;
    const std::size_t n = round == 1 ? 300 : 2;
    for (std::size_t k = 0; k < n; ++k)
      reads.push_back({(round * 7919 + k * 1500) % (content.size() / 2 - 64), 64, out.data() + k * 64});
    std::fill(out.begin(), out.end(), std::uint8_t{0});
    INFO("batch " << round << " after the failed one");
    REQUIRE_NOTHROW(in->read_batch(reads));
    for (const auto& r : reads) REQUIRE(std::memcmp(r.out, content.data() + r.offset, r.length) == 0);
  }
}

TEST_CASE("a walk whose headers are read in batches from a file gives what one walk gives", "[binary]") {
  // 700 registered containers of 1 to 5 entries each (more than one io_uring submission holds),
  // zero padding between some; read through a file (the batched reads), on 1 and 3 threads,
  // against one walk in memory. Most are small, read whole with the next start as the bound;
  // every 7th is over 16 KiB, its entry headers read round by round; every 11th has a
  // registration 200 bytes in (no container's start), so its first read stops there and holds
  // some of its entry headers only.
  Buf fat;
  std::vector<std::uint64_t> starts;
  for (std::uint32_t k = 0; k < 700; ++k) {
    if (k % 9 == 4) fat += Buf(16, '\0');
    starts.push_back(fat.size());
    if (k % 11 == 5) starts.push_back(fat.size() + 200);
    std::vector<Buf> entries;
    for (std::uint32_t e = 0; e <= k % 5; ++e)
      entries.push_back(test::entry(
          {.kind = static_cast<std::uint16_t>(e % 2 ? 1 : 2),
           .sm = 50 + (k + e) % 70,
           .payload = Buf(k % 7 == 3 && e == 0 ? 20000 : 8 * ((k * 31 + e * 17) % 90), 'p')}));
    fat += test::container(entries);
  }
  Buf file = registering_file(fat, starts);
  auto elf = read_elf(bytes_of(file));
  REQUIRE(elf);
  auto full = read_containers(bytes_of(file), *elf, ScanMode::full);
  REQUIRE(full);
  REQUIRE(full->size() == 700);
  test::TempDir dir;
  auto path = dir.write("fat.so", file);
  const bool ring = GENERATE(true, false);
  IoUring io_uring(ring);
  INFO((ring ? "io_uring allowed" : "io_uring refused"));
  for (unsigned threads : {1u, 3u}) {
    INFO(threads << " threads");
    auto reader = ByteReader::open(path);
    REQUIRE(reader);
    auto batched = read_containers(*reader, *elf, ScanMode::registered, threads);
    REQUIRE(batched);
    CHECK(describe(*batched) == describe(*full));
  }
  // A bad entry deep in a registered container (its fourth) fails the batched walk with the
  // error one walk gives.
  Buf broken = file;
  test::put16(broken, static_cast<std::size_t>(full->at(603).entries.at(3).offset), 77);
  auto one = read_containers(bytes_of(broken), *elf, ScanMode::full);
  REQUIRE_FALSE(one);
  CHECK_THAT(one.error().message, Catch::Matchers::Contains("unknown kind 77"));
  auto broken_path = dir.write("broken.so", broken);
  auto reader = ByteReader::open(broken_path);
  REQUIRE(reader);
  auto batched = read_containers(*reader, *elf, ScanMode::registered, 3);
  REQUIRE_FALSE(batched);
  CHECK(batched.error().message == one.error().message);
}
