// validate: coverage verdicts over inspected files. Then the smoke kernel and
// import test below.
#include <catch2/catch.hpp>

#include "arch/arch_data.hpp"
#include "arch/parse.hpp"
#include "validate/coverage.hpp"

using namespace archbuild;
using binary::EntryKind;
using binary::Placement;

namespace {

binary::Entry entry(EntryKind kind, int sm, arch::Variant v = arch::Variant::none) {
  binary::Entry e;
  e.kind = kind;
  e.sm = sm;
  e.variant = v;
  return e;
}

binary::FileReport file(const std::string& path, std::vector<binary::Entry> entries,
                        Placement placement = Placement::runtime) {
  binary::FileReport f;
  f.path = path;
  if (!entries.empty()) {
    binary::Container c;
    c.placement = placement;
    c.section = placement == Placement::relocatable ? "__nv_relfatbin" : ".nv_fatbin";
    c.entries = std::move(entries);
    f.containers.push_back(std::move(c));
  }
  return f;
}

const validate::TargetCoverage& target(const validate::Coverage& c, arch::Cc cc) {
  for (const auto& t : c.targets)
    if (t.cc == cc) return t;
  FAIL("no verdict for " << cc.str());
  return c.targets.front();
}

}  // namespace

TEST_CASE("coverage: one file, each kind of verdict", "[validate][coverage]") {
  std::vector<binary::FileReport> files{
      file("libk.so",
           {entry(EntryKind::sass, 80), entry(EntryKind::sass, 90, arch::Variant::a), entry(EntryKind::ptx, 120)})};
  auto cov = validate::coverage(files, {{8, 0}, {8, 6}, {9, 0}, {12, 1}, {7, 5}, {10, 0}});
  CHECK(cov.files_with_device_code == 1);
  CHECK(target(cov, {8, 0}).worst == arch::RunResult::native);
  CHECK(target(cov, {8, 6}).worst == arch::RunResult::compatible_sass);
  CHECK(target(cov, {9, 0}).worst == arch::RunResult::native);
  CHECK(target(cov, {12, 1}).worst == arch::RunResult::ptx_jit);
  CHECK(target(cov, {12, 1}).covered);
  CHECK(target(cov, {7, 5}).worst == arch::RunResult::no_kernel_image);
  CHECK_FALSE(target(cov, {7, 5}).covered);
  // compute_120 does not JIT down to 10.0, and sm_90a does not run there.
  CHECK(target(cov, {10, 0}).worst == arch::RunResult::no_kernel_image);
  CHECK_FALSE(cov.covered);
  const auto& fv = target(cov, {7, 5}).files.front();
  CHECK(fv.path == "libk.so");
  CHECK(fv.carried.size() == 3);
}

TEST_CASE("coverage: a wheel is covered only if every file with device code is", "[validate][coverage]") {
  std::vector<binary::FileReport> files{file("a.so", {entry(EntryKind::sass, 90)}),
                                        file("cpu.so", {}),  // no device code: does not count
                                        file("b.so", {entry(EntryKind::sass, 80), entry(EntryKind::sass, 86)})};
  auto cov = validate::coverage(files, {{9, 0}});
  CHECK(cov.files_with_device_code == 2);
  CHECK_FALSE(cov.covered);
  const auto& t = target(cov, {9, 0});
  REQUIRE(t.files.size() == 2);
  CHECK(t.files[0].verdict.result == arch::RunResult::native);
  CHECK(t.files[1].path == "b.so");
  CHECK(t.files[1].verdict.result == arch::RunResult::no_kernel_image);

  auto cov86 = validate::coverage(files, {{8, 6}});
  CHECK_FALSE(cov86.covered);  // a.so has only sm_90

  files[0] = file("a.so", {entry(EntryKind::sass, 90), entry(EntryKind::ptx, 80)});
  files[2] = file("b.so", {entry(EntryKind::sass, 80), entry(EntryKind::sass, 86), entry(EntryKind::ptx, 86)});
  auto both = validate::coverage(files, {{8, 9}, {9, 0}});
  CHECK(both.covered);
  CHECK(target(both, {8, 9}).worst == arch::RunResult::ptx_jit);  // a.so: compute_80 JIT
  CHECK(target(both, {8, 9}).files[1].verdict.result == arch::RunResult::compatible_sass);
  CHECK(target(both, {9, 0}).worst == arch::RunResult::ptx_jit);  // b.so: compute_86 JIT
}

TEST_CASE("coverage: relocatable code and LTO-IR do not run", "[validate][coverage]") {
  std::vector<binary::FileReport> files{file("rdc.so", {entry(EntryKind::sass, 90)}, Placement::relocatable)};
  auto cov = validate::coverage(files, {{9, 0}});
  CHECK(cov.files_with_device_code == 1);
  CHECK_FALSE(cov.covered);
  CHECK(target(cov, {9, 0}).files.front().relocatable_only);

  auto lto = validate::coverage({file("lto.so", {entry(EntryKind::lto_ir, 90)})}, {{9, 0}});
  CHECK_FALSE(lto.covered);
  CHECK_FALSE(target(lto, {9, 0}).files.front().relocatable_only);

  // Embedded containers (cuFFT's .ldata) are loaded at run time.
  auto embedded = validate::coverage({file("fft.so", {entry(EntryKind::sass, 90)}, Placement::embedded)}, {{9, 0}});
  CHECK(embedded.covered);
}

TEST_CASE("coverage: no device code anywhere is not covered", "[validate][coverage]") {
  auto cov = validate::coverage({file("cpu.so", {})}, {{9, 0}});
  CHECK(cov.files_with_device_code == 0);
  CHECK_FALSE(cov.covered);
  CHECK(target(cov, {9, 0}).worst == arch::RunResult::no_kernel_image);
}

TEST_CASE("target CCs from an --sm list", "[validate][coverage]") {
  auto archs = arch::parse_arch_list("90a,9.0,sm_120,8.6+PTX", arch::ArchData::shipped());
  REQUIRE(archs.ok());
  auto ccs = validate::target_ccs(*archs);
  CHECK(ccs == std::vector<arch::Cc>{{8, 6}, {9, 0}, {12, 0}});
}

// ---- wheel checks, the smoke kernel and the import test (no process is started:
// validate/ takes an Exec, and these tests script it) ----------------------------------------

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <map>

#include "binary/builders.hpp"
#include "core/sha256.hpp"
#include "support/shipped.hpp"
#include "support/tempdir.hpp"
#include "validate/validate.hpp"

namespace {

using validate::Status;
using Members = std::vector<std::pair<std::string, std::string>>;

std::vector<arch::Arch> sms(const std::string& list) {
  auto a = arch::parse_arch_list(list, arch::ArchData::shipped());
  REQUIRE(a.ok());
  return *a;
}

// A host library whose .nv_fatbin carries the given images ({2, sm} SASS, {1, sm} PTX).
std::string fat_library(const std::vector<std::pair<std::uint16_t, std::uint32_t>>& images) {
  std::vector<test::Buf> entries;
  for (const auto& [kind, sm] : images) {
    test::EntrySpec s;
    s.kind = kind;
    s.sm = sm;
    s.payload = kind == 2 ? test::cubin(sm) : ".version 8.0\n.target sm_" + std::to_string(sm) + "\n";
    entries.push_back(test::entry(s));
  }
  return test::elf_with_fatbin(test::container(entries));
}

std::string record_of(const Members& members, const std::string& record_name) {
  std::string rec;
  for (const auto& [name, data] : members) {
    Sha256 h;
    h.update(data);
    rec += name + "," + validate::record_hash(h.raw()) + "," + std::to_string(data.size()) + "\n";
  }
  return rec + record_name + ",,\n";
}

// A well-formed wheel: package files plus WHEEL, METADATA, top_level.txt and a correct RECORD.
// `edit` may change the members (and RECORD) before the archive is written.
struct FakeWheel {
  std::string file = "demo_pkg-1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl";
  std::string dist_info = "demo_pkg-1.0+cu130.sm90.dist-info";
  Members payload{{"demo_pkg/__init__.py", "from . import cuda\n"},
                  {"demo_pkg/libdemo.so", fat_library({{2, 90}})}};
  std::string wheel_text = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n";
  std::string metadata = "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0+cu130.sm90\n\nA description.\n";

  Members members() const {
    Members m = payload;
    m.push_back({dist_info + "/WHEEL", wheel_text});
    m.push_back({dist_info + "/METADATA", metadata});
    m.push_back({dist_info + "/top_level.txt", "demo_pkg\n"});
    return m;
  }
  std::string record() const { return record_of(members(), dist_info + "/RECORD"); }
  std::string bytes(const std::string* record_override = nullptr, const Members& extra = {}) const {
    Members m = members();
    m.push_back({dist_info + "/RECORD", record_override ? *record_override : record()});
    for (const auto& e : extra) m.push_back(e);
    return test::zip(m);
  }
  std::filesystem::path write(const test::TempDir& dir, const std::string& data) const {
    return dir.write(file, data);
  }
};

validate::Report check_wheel(const std::filesystem::path& p, const std::string& targets,
                             validate::ValidateOptions options = {}) {
  if (!options.libraries) options.libraries = &test::shipped_library_facts();
  validate::Exec none = [](const validate::Command& c) -> Result<validate::Outcome> {
    FAIL("no process expected, got " << c.argv.front());
    return validate::Outcome{};
  };
  auto r = validate::validate_wheel(p, sms(targets), options, none);
  REQUIRE(r.ok());
  return *r;
}

const validate::Check& check(const validate::Report& r, const std::string& name) {
  const auto* c = r.find(name);
  if (!c) FAIL("no check " << name);
  return *c;
}

std::string all_details(const validate::Check& c) {
  std::string s = c.summary;
  for (const auto& d : c.details) s += "\n" + d;
  return s;
}

}  // namespace

TEST_CASE("wheel names: PEP 427", "[validate][wheel]") {
  auto n = validate::parse_wheel_name("torch-2.7.1+cu128-cp311-cp311-manylinux_2_28_x86_64.whl");
  REQUIRE(n.ok());
  CHECK(n->distribution == "torch");
  CHECK(n->version == "2.7.1+cu128");
  CHECK(n->local_label() == "cu128");
  CHECK_FALSE(n->build);
  CHECK(n->dist_info() == "torch-2.7.1+cu128.dist-info");
  CHECK(n->tags() == std::vector<std::string>{"cp311-cp311-manylinux_2_28_x86_64"});

  auto b = validate::parse_wheel_name("six-1.16.0-1local-py2.py3-none-any.whl");
  REQUIRE(b.ok());
  CHECK(b->build == "1local");
  CHECK(b->tags() == std::vector<std::string>{"py2-none-any", "py3-none-any"});
  CHECK(b->local_label().empty());

  for (const char* bad : {"torch-2.7.1-cp311-cp311-linux_x86_64.zip", "torch-2.7.1-cp311-linux_x86_64.whl",
                          "torch-2.7.1-x-cp311-cp311-linux_x86_64.whl", "torch-two-cp311-cp311-linux_x86_64.whl",
                          "torch--2.7.1-cp311-cp311-linux_x86_64.whl", "to rch-2.7-cp311-cp311-any.whl",
                          "torch-2.7-cp311..cp312-cp311-any.whl"}) {
    INFO(bad);
    auto e = validate::parse_wheel_name(bad);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().exit == Exit::bad_input);
    CHECK_THAT(e.error().message, Catch::Contains("NAME-VERSION"));
  }
  CHECK(validate::normalize_name("Demo__Pkg.x") == "demo-pkg-x");
}

TEST_CASE("RECORD hashes, CSV and header parsing", "[validate][wheel]") {
  // sha256 of nothing, in RECORD's urlsafe base64 without padding.
  CHECK(validate::record_hash(Sha256().raw()) == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
  auto rows = validate::parse_record("a.py,sha256=x,3\n\"b,c.py\",sha256=y,4\r\nd/RECORD,,\n\n");
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 3);
  CHECK((*rows)[1].path == "b,c.py");
  CHECK((*rows)[1].line == 2);
  CHECK((*rows)[2].hash.empty());
  auto bad = validate::parse_record("a.py,sha256=x\n");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("line 1") && Catch::Contains("PATH,HASH,SIZE"));
  CHECK_FALSE(validate::parse_record("\"a.py,sha256=x,3\n").ok());

  auto h = validate::parse_headers("Name: x\nTag: a\nTag: b\nSummary: one\n  two\n\nName: body\n");
  CHECK(h["Name"] == std::vector<std::string>{"x"});
  CHECK(h["Tag"] == std::vector<std::string>{"a", "b"});
  CHECK(h["Summary"] == std::vector<std::string>{"one two"});

  auto l = validate::parse_label("cu128.sm90.sm120a.ptx120.post1");
  CHECK(l.cuda == "12.8");
  CHECK(l.images == std::vector<std::string>{"sm_90", "sm_120a", "compute_120"});
  CHECK(l.unknown == std::vector<std::string>{"post1"});
}

TEST_CASE("validate_wheel: a well-formed wheel passes every wheel check", "[validate][wheel]") {
  test::TempDir dir;
  FakeWheel fw;
  auto p = fw.write(dir, fw.bytes());
  auto r = check_wheel(p, "90");
  for (const char* name : {"wheel-name", "metadata", "record", "members", "local-label", "coverage", "ptx-jit",
                           "unrequested-archs"}) {
    INFO(name << ": " << check(r, name).summary);
    CHECK(check(r, name).status == Status::pass);
  }
  CHECK(r.exit() == Exit::ok);
  CHECK_THAT(check(r, "local-label").summary, Catch::Contains("CUDA 13.0") && Catch::Contains("sm_90"));
  CHECK_THAT(check(r, "record").summary, Catch::Contains("every hash and size matches"));
  auto j = r.to_json();
  CHECK(j["valid"] == true);
  CHECK(j["exit"] == 0);
  // + closure (skipped: the synthetic library has no .dynamic) and platform-tag.
  CHECK(j["checks"].size() == 10);
  CHECK(check(r, "closure").status == Status::skip);
  CHECK(check(r, "platform-tag").status == Status::pass);
}

TEST_CASE("validate_wheel: <wheel>.manifest.json beside it is read only when it is a JSON file", "[validate][wheel]") {
  test::TempDir dir;
  FakeWheel fw;
  auto p = fw.write(dir, fw.bytes());
  auto manifest = std::filesystem::path(p.string() + ".manifest.json");
  auto warned = [&](const std::string& what) {
    INFO(what);
    auto r = check_wheel(p, "90");
    const auto* m = r.find("manifest");
    REQUIRE(m);
    CHECK(m->status == Status::warn);
    CHECK_THAT(m->summary, Catch::Contains(manifest.string()) && Catch::Contains(what) &&
                               Catch::Contains("its portability record is not used"));
    CHECK(r.exit() == Exit::ok);
    std::filesystem::remove_all(manifest);
  };
  // A FIFO is never opened (the open would wait for a writer forever), a directory never read.
  REQUIRE(::mkfifo(manifest.c_str(), 0600) == 0);
  warned("is a FIFO");
  std::filesystem::create_directory(manifest);
  warned("is a directory");
  std::filesystem::create_symlink(manifest.filename(), manifest);
  warned("is a loop of symbolic links");
  dir.write(manifest.filename().string(), "{\"portability\": ");
  warned("not JSON: parse error at line 1, column 17");
  dir.write(manifest.filename().string(), "[1, 2]");
  warned("not a JSON object (a array)");
  dir.write(manifest.filename().string(), "{\"portability\": 7}");
  warned("`portability` is not an object");
  // A readable manifest is no finding; none at all neither.
  dir.write(manifest.filename().string(), "{\"portability\": {\"host_bound\": false}}");
  CHECK_FALSE(check_wheel(p, "90").find("manifest"));
  std::filesystem::remove(manifest);
  CHECK_FALSE(check_wheel(p, "90").find("manifest"));
}

TEST_CASE("platform tag: each ELF file is for the machine the tag names", "[validate][wheel][closure]") {
  CHECK(validate::platform_machine("manylinux_2_34_aarch64") == "aarch64");
  CHECK(validate::platform_machine("manylinux2014_x86_64") == "x86-64");
  CHECK(validate::platform_machine("linux_aarch64") == "aarch64");
  CHECK(validate::platform_machine("musllinux_1_2_x86_64") == "x86-64");
  CHECK(validate::platform_machine("manylinux_2_17_ppc64le") == "ppc64le");
  CHECK_FALSE(validate::platform_machine("any"));
  CHECK_FALSE(validate::platform_machine("macosx_11_0_arm64"));
  CHECK_FALSE(validate::platform_machine("win_amd64"));

  test::TempDir dir;
  const std::string aarch64_library = test::elf({{".text", std::string(32, '\0'), 1, 0x6},
                                                 {".nv_fatbin", test::container({test::entry({2, 90, 0x11, test::cubin(90)})})}},
                                                183);  // EM_AARCH64
  struct Case {
    const char* platform;
    std::string library;
    const char* says;
  };
  for (const auto& k : {Case{"manylinux_2_34_aarch64", "", "demo_pkg/libdemo.so is x86-64 ELF, but the tag manylinux_2_34_aarch64 is for aarch64"},
                        Case{"linux_aarch64", "", "demo_pkg/libdemo.so is x86-64 ELF, but the tag linux_aarch64 is for aarch64"},
                        Case{"linux_x86_64", aarch64_library, "demo_pkg/libdemo.so is aarch64 ELF, but the tag linux_x86_64 is for x86-64"},
                        Case{"manylinux_2_28_x86_64", aarch64_library, "is aarch64 ELF, but the tag manylinux_2_28_x86_64 is for x86-64"}}) {
    INFO(k.platform);
    FakeWheel fw;  // a wheel renamed for another machine, its WHEEL Tag and RECORD to match
    fw.file = "demo_pkg-1.0+cu130.sm90-cp311-cp311-" + std::string(k.platform) + ".whl";
    fw.wheel_text = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp311-cp311-" + std::string(k.platform) + "\n";
    if (!k.library.empty()) fw.payload[1].second = k.library;
    auto r = check_wheel(fw.write(dir, fw.bytes()), "90");
    CHECK(check(r, "metadata").status == Status::pass);
    CHECK(check(r, "record").status == Status::pass);
    CHECK(check(r, "platform-tag").status == Status::fail);
    CHECK_THAT(check(r, "platform-tag").summary, Catch::Contains(k.says));
    CHECK(r.exit() == Exit::not_fine);
  }
  // Each machine under its own tag holds.
  FakeWheel arm;
  arm.file = "demo_pkg-1.0+cu130.sm90-cp311-cp311-linux_aarch64.whl";
  arm.wheel_text = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_aarch64\n";
  arm.payload[1].second = aarch64_library;
  CHECK(check(check_wheel(arm.write(dir, arm.bytes()), "90"), "platform-tag").status == Status::pass);
}

TEST_CASE("validate_wheel: another sm has no kernel image, named with what the wheel carries", "[validate][wheel]") {
  test::TempDir dir;
  FakeWheel fw;
  auto r = check_wheel(fw.write(dir, fw.bytes()), "80");
  const auto& c = check(r, "coverage");
  CHECK(c.status == Status::fail);
  CHECK_THAT(c.summary, Catch::Contains("no kernel image for 8.0 in demo_pkg/libdemo.so (carries sm_90)"));
  CHECK(r.exit() == Exit::not_fine);
  CHECK(r.failed_names() == std::vector<std::string>{"coverage"});
  // sm_90 is used by no target of 8.0: size wasted.
  CHECK(check(r, "unrequested-archs").status == Status::warn);
  CHECK_THAT(check(r, "unrequested-archs").summary, Catch::Contains("sm_90"));
}

TEST_CASE("validate_wheel: PTX-only coverage warns, extra archs are reported", "[validate][wheel]") {
  test::TempDir dir;
  FakeWheel fw;
  fw.file = "demo_pkg-1.0-cp311-cp311-linux_x86_64.whl";
  fw.dist_info = "demo_pkg-1.0.dist-info";
  fw.metadata = "Metadata-Version: 2.1\nName: demo_pkg\nVersion: 1.0\n";
  fw.payload[1].second = fat_library({{2, 80}, {2, 86}, {1, 80}});
  auto r = check_wheel(fw.write(dir, fw.bytes()), "8.6,9.0");
  CHECK(check(r, "coverage").status == Status::pass);
  CHECK(check(r, "ptx-jit").status == Status::warn);
  CHECK_THAT(check(r, "ptx-jit").summary, Catch::Contains("9.0") && Catch::Contains("compute_80"));
  // sm_80 serves no target (8.6 has its own SASS, 9.0 JITs compute_80).
  CHECK(check(r, "unrequested-archs").status == Status::warn);
  CHECK(check(r, "unrequested-archs").evidence["images"].size() == 1);
  CHECK(check(r, "unrequested-archs").evidence["images"][0]["image"] == "sm_80");
  // No arch in the label: not archbuild's wheel, so nothing to check there.
  CHECK(check(r, "local-label").status == Status::skip);
  CHECK(r.exit() == Exit::ok);
  // … unless the pipeline says which label it gave.
  validate::ValidateOptions o;
  o.expected_label = "cu130.sm86";
  auto strict = check_wheel(dir / fw.file, "8.6", o);
  CHECK(check(strict, "local-label").status == Status::fail);
}

TEST_CASE("validate_wheel: a tampered RECORD hash fails, naming the member", "[validate][wheel]") {
  test::TempDir dir;
  FakeWheel fw;
  std::string rec = fw.record();
  auto at = rec.find("demo_pkg/__init__.py,sha256=");
  REQUIRE(at != std::string::npos);
  char& ch = rec[at + std::string("demo_pkg/__init__.py,sha256=").size()];
  ch = ch == 'A' ? 'B' : 'A';
  auto r = check_wheel(fw.write(dir, fw.bytes(&rec)), "90");
  const auto& c = check(r, "record");
  CHECK(c.status == Status::fail);
  CHECK_THAT(c.summary, Catch::Contains("demo_pkg/__init__.py: hash mismatch"));
  CHECK(r.exit() == Exit::not_fine);
  CHECK(check(r, "coverage").status == Status::pass);  // the other checks still ran
}

TEST_CASE("validate_wheel: sizes, unlisted and missing RECORD entries", "[validate][wheel]") {
  test::TempDir dir;
  FakeWheel fw;
  std::string rec = fw.record();
  auto line_end = rec.find('\n');
  std::string first = rec.substr(0, line_end);  // demo_pkg/__init__.py,…,18
  std::string wrong_size = first.substr(0, first.rfind(',') + 1) + "999";
  rec = wrong_size + rec.substr(line_end) + "demo_pkg/gone.py,sha256=abc,3\n";
  auto r = check_wheel(fw.write(dir, fw.bytes(&rec, {{"demo_pkg/extra.py", "x = 1\n"}})), "90");
  auto text = all_details(check(r, "record"));
  CHECK(check(r, "record").status == Status::fail);
  CHECK_THAT(text, Catch::Contains("size mismatch: RECORD says 999"));
  CHECK_THAT(text, Catch::Contains("demo_pkg/extra.py is not in RECORD"));
  CHECK_THAT(text, Catch::Contains("demo_pkg/gone.py is not in the wheel"));
}

TEST_CASE("validate_wheel: a member escaping the root fails (and is never extracted)", "[validate][wheel]") {
  test::TempDir dir;
  FakeWheel fw;
  Members evil{{"../evil.py", "import os\n"}};
  Members m = fw.members();
  m.push_back(evil.front());
  std::string rec = record_of(m, fw.dist_info + "/RECORD");  // RECORD agrees: only the name is wrong
  auto r = check_wheel(fw.write(dir, fw.bytes(&rec, evil)), "90");
  CHECK(check(r, "members").status == Status::fail);
  CHECK_THAT(check(r, "members").summary, Catch::Contains("'../evil.py' escapes the wheel root"));
  CHECK(check(r, "record").status == Status::pass);
  CHECK_FALSE(std::filesystem::exists(dir.path().parent_path() / "evil.py"));
  CHECK(r.exit() == Exit::not_fine);
}

TEST_CASE("validate_wheel: metadata disagreeing with the name", "[validate][wheel]") {
  test::TempDir dir;
  FakeWheel fw;
  fw.metadata = "Metadata-Version: 2.1\nName: other\nVersion: 1.1\n";
  fw.wheel_text = "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp312-cp312-linux_x86_64\n";
  auto r = check_wheel(fw.write(dir, fw.bytes()), "90");
  auto text = all_details(check(r, "metadata"));
  CHECK(check(r, "metadata").status == Status::fail);
  CHECK_THAT(text, Catch::Contains("METADATA Name 'other'"));
  CHECK_THAT(text, Catch::Contains("METADATA Version '1.1'"));
  CHECK_THAT(text, Catch::Contains("WHEEL tags cp312-cp312-linux_x86_64 differ"));

  // No WHEEL at all, and a label promising an image the library lacks.
  FakeWheel nowheel;
  nowheel.file = "demo_pkg-1.0+cu130.sm80-cp311-cp311-linux_x86_64.whl";
  nowheel.dist_info = "demo_pkg-1.0+cu130.sm80.dist-info";
  nowheel.metadata = "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0+cu130.sm80\n";
  Members m = nowheel.members();
  m.erase(std::remove_if(m.begin(), m.end(), [](const auto& x) { return x.first.ends_with("/WHEEL"); }), m.end());
  m.push_back({nowheel.dist_info + "/RECORD", record_of(m, nowheel.dist_info + "/RECORD")});
  test::TempDir d2;
  auto r2 = check_wheel(d2.write(nowheel.file, test::zip(m)), "90");
  CHECK_THAT(all_details(check(r2, "metadata")), Catch::Contains("/WHEEL is missing"));
  CHECK(check(r2, "local-label").status == Status::fail);
  CHECK_THAT(check(r2, "local-label").summary, Catch::Contains("carry sm_90"));
}

TEST_CASE("validate_wheel: unreadable input is an error (exit 2), not a report", "[validate][wheel]") {
  test::TempDir dir;
  validate::Exec none;
  auto notzip = validate::validate_wheel(dir.write("x-1.0-py3-none-any.whl", "plain text, not a zip\n"), sms("90"),
                                         {}, none);
  REQUIRE_FALSE(notzip.ok());
  CHECK(notzip.error().exit == Exit::bad_input);
  CHECK_THAT(notzip.error().message, Catch::Contains("not a readable zip"));
  auto missing = validate::validate_wheel(dir / "absent.whl", sms("90"), {}, none);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().exit == Exit::bad_input);
}

// A zip whose end-of-central-directory record points `by` bytes before the central directory.
std::string with_central_directory_moved(std::string zip, std::uint32_t by) {
  auto end = zip.rfind(std::string("PK\x05\x06", 4));
  REQUIRE(end != std::string::npos);
  std::uint32_t at = 0;
  std::memcpy(&at, zip.data() + end + 16, 4);  // little-endian, as this host
  at -= by;
  std::memcpy(zip.data() + end + 16, &at, 4);
  return zip;
}

TEST_CASE("validate_wheel: a zip pip cannot open is unreadable, however good its local headers",
          "[validate][wheel]") {
  // Python's zipfile (pip) reads the central directory at the end: a wheel short of its last
  // bytes, or whose end record points elsewhere, is not a zip there, whatever the members say.
  test::TempDir dir;
  FakeWheel fw;
  const std::string whole = fw.bytes();
  validate::Exec none;
  auto truncated = validate::validate_wheel(fw.write(dir, whole.substr(0, whole.size() - 10)), sms("90"), {}, none);
  REQUIRE_FALSE(truncated.ok());
  CHECK(truncated.error().exit == Exit::bad_input);
  CHECK_THAT(truncated.error().message,
             Catch::Contains("not a readable zip") && Catch::Contains("its central directory cannot be found"));
  auto moved = validate::validate_wheel(fw.write(dir, with_central_directory_moved(whole, 1)), sms("90"), {}, none);
  REQUIRE_FALSE(moved.ok());
  CHECK(moved.error().exit == Exit::bad_input);
  CHECK_THAT(moved.error().message,
             Catch::Contains("not a readable zip") && Catch::Contains("its central directory cannot be read"));
  // The same bytes whole still read.
  CHECK(check_wheel(fw.write(dir, whole), "90").exit() == Exit::ok);
}

// ---- the smoke kernel -----------------------------------------------------------------------

namespace {

validate::SmokeSetup smoke_setup() {
  validate::SmokeSetup s;
  s.nvcc = "/opt/cuda/bin/nvcc";
  s.host_compiler = "/usr/bin/g++-12";
  s.toolkit = "CUDA 13.0 at /opt/cuda";
  s.source = "/share/archbuild/data/smoke/smoke.cu";
  return s;
}

const char* kSmokeOk =
    "{\"device\":\"NVIDIA H100 80GB HBM3\",\"cc\":\"9.0\"}\n"
    "{\"kernel\":\"vector_add\",\"ok\":true,\"cuda_arch\":900,\"ms\":0.120,\"max_error\":0,\"tolerance\":0}\n"
    "{\"kernel\":\"matmul_tiled\",\"ok\":true,\"cuda_arch\":900,\"ms\":0.310,\"max_error\":2.1e-07,\"tolerance\":0.001}\n"
    "{\"kernel\":\"warp_reduce_sum\",\"ok\":true,\"cuda_arch\":900,\"ms\":0.050,\"max_error\":0,\"tolerance\":0}\n";

// A scripted Exec: nvcc "compiles" by writing a library with the SASS its -gencode flags name
// (or `images` when given); the smoke binary prints `run_out`.
struct FakeTools {
  std::vector<validate::Command> seen;
  std::optional<std::vector<std::pair<std::uint16_t, std::uint32_t>>> images;
  int compile_status = 0;
  std::string run_out = kSmokeOk;
  int run_status = 0;
  validate::Exec exec() {
    return [this](const validate::Command& c) -> Result<validate::Outcome> {
      seen.push_back(c);
      if (c.argv.front().ends_with("nvcc")) {
        if (compile_status != 0) return validate::Outcome{compile_status, false, "", "nvcc fatal : bad arch\n"};
        std::vector<std::pair<std::uint16_t, std::uint32_t>> imgs;
        for (const auto& a : c.argv)
          if (a.starts_with("-gencode=")) imgs.push_back({2, std::stoul(a.substr(a.rfind("sm_") + 3))});
        auto out = std::find(c.argv.begin(), c.argv.end(), "-o");
        std::ofstream(*(out + 1), std::ios::binary) << fat_library(images ? *images : imgs);
        return validate::Outcome{0, false, "", ""};
      }
      return validate::Outcome{run_status, false, run_out, ""};
    };
  }
};

}  // namespace

TEST_CASE("smoke: the compile is SASS only, for exactly the targets", "[validate][smoke]") {
  auto s = smoke_setup();
  auto argv = validate::smoke_compile_argv(s, sms("80,90a,12.0+PTX"), "/tmp/x/smoke");
  CHECK(argv == std::vector<std::string>{"/opt/cuda/bin/nvcc", "-ccbin", "/usr/bin/g++-12", "-O2", "-std=c++17",
                                         "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a",
                                         "-gencode=arch=compute_120,code=sm_120", "-o", "/tmp/x/smoke",
                                         "/share/archbuild/data/smoke/smoke.cu"});
  CHECK(validate::expected_cuda_arch(sms("80,90"), {9, 0}) == 900);
  CHECK(validate::expected_cuda_arch(sms("80"), {8, 6}) == 800);  // compatible SASS
  CHECK(validate::expected_cuda_arch(sms("120"), {12, 0}) == 1200);
  CHECK_FALSE(validate::expected_cuda_arch(sms("90"), {8, 0}));

  auto c = validate::interpret_compile({1, false, "", "nvcc fatal   : Unsupported gpu architecture 'compute_70'\n"}, s,
                                       sms("70"));
  CHECK(c.status == Status::fail);
  CHECK_THAT(c.summary, Catch::Contains("Unsupported gpu architecture"));
}

TEST_CASE("smoke: the inspected binary must carry exactly the SASS, no PTX", "[validate][smoke]") {
  auto lib = fat_library({{2, 80}, {2, 90}, {1, 90}});
  auto rep = binary::inspect_elf({reinterpret_cast<const std::uint8_t*>(lib.data()), lib.size()}, "smoke");
  REQUIRE(rep.ok());
  auto c = validate::check_smoke_sass(*rep, sms("90,120"));
  CHECK(c.status == Status::fail);
  CHECK_THAT(c.summary, Catch::Contains("no SASS for sm_120") && Catch::Contains("sm_80") &&
                            Catch::Contains("PTX compute_90"));
  auto good = fat_library({{2, 90}, {2, 120}});
  auto rep2 = binary::inspect_elf({reinterpret_cast<const std::uint8_t*>(good.data()), good.size()}, "smoke");
  REQUIRE(rep2.ok());
  CHECK(validate::check_smoke_sass(*rep2, sms("90,120")).status == Status::pass);
}

TEST_CASE("smoke: the program's output is checked kernel by kernel, with __CUDA_ARCH__", "[validate][smoke]") {
  validate::Gpu h100{0, "NVIDIA H100 80GB HBM3", {9, 0}};
  auto ok = validate::interpret_run({0, false, kSmokeOk, ""}, sms("90"), h100);
  CHECK(ok.status == Status::pass);
  CHECK_THAT(ok.summary, Catch::Contains("3 kernels passed") && Catch::Contains("__CUDA_ARCH__ 900") &&
                             Catch::Contains("matmul_tiled 0.310 ms"));
  CHECK(ok.evidence["kernels"].size() == 3);

  std::string wrong_arch = kSmokeOk;
  for (std::size_t at; (at = wrong_arch.find("900")) != std::string::npos;) wrong_arch.replace(at, 3, "800");
  auto wa = validate::interpret_run({0, false, wrong_arch, ""}, sms("90"), h100);
  CHECK(wa.status == Status::fail);
  CHECK_THAT(wa.summary, Catch::Contains("__CUDA_ARCH__ 800, expected 900"));

  std::string bad_result = kSmokeOk;
  bad_result.replace(bad_result.find("\"ok\":true,\"cuda_arch\":900,\"ms\":0.310"), 9, "\"ok\":false");
  auto br = validate::interpret_run({1, false, bad_result, ""}, sms("90"), h100);
  CHECK(br.status == Status::fail);
  CHECK_THAT(br.summary, Catch::Contains("matmul_tiled: wrong result"));

  auto nodev = validate::interpret_run({2, false, "{\"device\":null,\"error\":\"no CUDA-capable device is detected\"}\n", ""},
                                       sms("90"), h100);
  CHECK(nodev.status == Status::fail);
  CHECK_THAT(nodev.summary, Catch::Contains("found no CUDA device") && Catch::Contains("no CUDA-capable device"));

  auto cuda_err = validate::interpret_run(
      {1, false,
       "{\"device\":\"H100\",\"cc\":\"9.0\"}\n{\"kernel\":\"vector_add\",\"ok\":false,\"error\":\"no kernel image is "
       "available for execution on the device\"}\n",
       ""},
      sms("90"), h100);
  CHECK(cuda_err.status == Status::fail);
  CHECK_THAT(cuda_err.summary, Catch::Contains("vector_add: no kernel image is available"));
  CHECK_THAT(cuda_err.summary, Catch::Contains("matmul_tiled reported nothing"));
}

TEST_CASE("smoke: without a GPU it compiles and inspects, and the run is skipped", "[validate][smoke]") {
  FakeTools tools;
  auto s = smoke_setup();
  s.gpus.why_none = "nvml: libnvidia-ml.so.1 not found";
  auto r = validate::smoke(sms("80,90,120"), s, tools.exec());
  REQUIRE(tools.seen.size() == 1);  // nvcc only
  CHECK(check(r, "smoke-compile").status == Status::pass);
  CHECK(check(r, "smoke-sass").status == Status::pass);
  CHECK(check(r, "smoke-run").status == Status::skip);
  CHECK_THAT(check(r, "smoke-run").summary, Catch::StartsWith("run skipped: no GPU") && Catch::Contains("nvml"));
  CHECK(r.exit() == Exit::ok);

  s.require_gpu = true;
  auto strict = validate::smoke(sms("90"), s, tools.exec());
  CHECK(check(strict, "smoke-run").missing_tool);
  CHECK(strict.exit() == Exit::missing_tool);

  // A GPU of another CC: still no run.
  s.require_gpu = false;
  s.gpus.gpus = {{0, "NVIDIA A100", {8, 0}}};
  auto other = validate::smoke(sms("90"), s, tools.exec());
  CHECK_THAT(check(other, "smoke-run").summary, Catch::Contains("NVIDIA A100 (8.0), not a target (9.0)"));
}

TEST_CASE("smoke: the GPU is selected by the name detection gives, and the job's order is kept", "[validate][smoke]") {
  FakeTools tools;
  auto s = smoke_setup();
  // A UUID (NVML): order-free, so CUDA_DEVICE_ORDER is not touched.
  s.gpus.gpus = {{3, "NVIDIA H100 80GB HBM3", {9, 0}, "GPU-0b1c2d3e-aaaa-bbbb-cccc-000011112222", false}};
  auto r = validate::smoke(sms("90"), s, tools.exec());
  REQUIRE(tools.seen.size() == 2);
  CHECK(tools.seen[1].env.at("CUDA_VISIBLE_DEVICES") == "GPU-0b1c2d3e-aaaa-bbbb-cccc-000011112222");
  CHECK(tools.seen[1].env.count("CUDA_DEVICE_ORDER") == 0);
  // A MIG device's UUID, likewise.
  s.gpus.gpus = {{0, "NVIDIA H100 80GB HBM3", {9, 0}, "MIG-5c3e-aaaa", false}};
  FakeTools mig;
  validate::smoke(sms("90"), s, mig.exec());
  REQUIRE(mig.seen.size() == 2);
  CHECK(mig.seen[1].env.at("CUDA_VISIBLE_DEVICES") == "MIG-5c3e-aaaa");
}

TEST_CASE("smoke: a driver older than the toolkit's runtime needs is the driver finding, not 'no device'",
          "[validate][smoke]") {
  FakeTools tools;
  auto s = smoke_setup();
  s.gpus.gpus = {{0, "NVIDIA H100 80GB HBM3", {9, 0}}};
  s.gpus.driver_version = "575.57.08";
  s.release = "13.0";
  s.driver = validate::DriverNeed{*Version::parse("580.65.06"), "580.65.06", Version::parse("580"), "580",
                                  "cuda-13.0.toml"};
  s.require_gpu = true;
  auto r = validate::smoke(sms("90"), s, tools.exec());
  REQUIRE(tools.seen.size() == 1);  // nvcc only: the run would fail anyway
  CHECK(check(r, "smoke-run").status == Status::skip);
  CHECK(check(r, "smoke-run").missing_tool);
  CHECK_THAT(check(r, "smoke-run").summary,
             Catch::Contains("driver-too-old") && Catch::Contains("575.57.08") && Catch::Contains(">= 580.65.06"));
  CHECK(r.exit() == Exit::missing_tool);
  // At the floor it runs (minor-version compatibility: SASS only, no JIT needed).
  FakeTools ok;
  s.gpus.driver_version = "580.65.06";
  validate::smoke(sms("90"), s, ok.exec());
  CHECK(ok.seen.size() == 2);
  CHECK(validate::driver_too_old("580.65.06", *s.driver, "13.0").empty());
  CHECK(validate::driver_too_old("", *s.driver, "13.0").empty());  // unknown: not refused

  // When the run happens anyway, the runtime's own error reads as the driver, not as "no device".
  auto run = validate::interpret_run(
      {2, false,
       "{\"device\":null,\"error\":\"CUDA driver version is insufficient for CUDA runtime version\",\"code\":"
       "\"cudaErrorInsufficientDriver\"}\n",
       ""},
      sms("90"), s.gpus.gpus.front());
  CHECK(run.status == Status::fail);
  CHECK_THAT(run.summary, Catch::Contains("driver-too-old") && !Catch::Contains("found no CUDA device"));
}

TEST_CASE("smoke: with a GPU of a target CC it runs on that device", "[validate][smoke]") {
  FakeTools tools;
  auto s = smoke_setup();
  s.gpus.gpus = {{0, "NVIDIA A100", {8, 0}}, {1, "NVIDIA H100 80GB HBM3", {9, 0}}};
  auto r = validate::smoke(sms("90"), s, tools.exec());
  REQUIRE(tools.seen.size() == 2);
  CHECK(tools.seen[1].env.at("CUDA_VISIBLE_DEVICES") == "1");
  CHECK(tools.seen[1].env.at("CUDA_DEVICE_ORDER") == "PCI_BUS_ID");
  CHECK(check(r, "smoke-run").status == Status::pass);
  CHECK(r.exit() == Exit::ok);

  // nvcc produced the wrong code: the run is not attempted, the SASS check fails.
  FakeTools wrong;
  wrong.images = std::vector<std::pair<std::uint16_t, std::uint32_t>>{{2, 80}};
  auto w = validate::smoke(sms("90"), s, wrong.exec());
  CHECK(check(w, "smoke-sass").status == Status::fail);
  CHECK(check(w, "smoke-run").status == Status::skip);
  CHECK(w.exit() == Exit::not_fine);

  FakeTools broken;
  broken.compile_status = 1;
  auto b = validate::smoke(sms("90"), s, broken.exec());
  CHECK(check(b, "smoke-compile").status == Status::fail);
  CHECK_THAT(check(b, "smoke-compile").summary, Catch::Contains("nvcc fatal : bad arch"));
}

TEST_CASE("smoke: which toolkit compiles it", "[validate][smoke]") {
  auto archs = [](std::initializer_list<int> list) {
    std::vector<arch::Arch> v;
    for (int sm : list) v.push_back({arch::Cc::from_sm(sm), arch::Variant::none, true, false, std::nullopt});
    return v;
  };
  toolchain::Toolchain f129, f130;
  f129.cuda = *Version::parse("12.9");
  f129.archs = archs({70, 75, 80, 86, 89, 90, 100, 120});
  f130.cuda = *Version::parse("13.0");
  f130.archs = archs({75, 80, 86, 89, 90, 100, 110, 120});
  f130.gcc.max = Version::parse("14");
  toolchain::Toolkit k130, k129;
  k130.root = "/usr/local/cuda-13.0";
  k130.nvcc = "/usr/local/cuda-13.0/bin/nvcc";
  k130.version = *Version::parse("13.0.88");
  k129.root = "/usr/local/cuda-12.9";
  k129.nvcc = "/usr/local/cuda-12.9/bin/nvcc";
  k129.version = *Version::parse("12.9.1");
  toolchain::Compiler gcc15, gcc12;
  gcc15.version = *Version::parse("15.1.0");
  gcc15.path = "/usr/bin/g++-15";
  gcc12.version = *Version::parse("12.2.0");
  gcc12.path = "/usr/bin/g++-12";

  auto c = validate::choose_toolkit({k130, k129}, {f129, f130}, {gcc15, gcc12}, std::nullopt, false, sms("90"));
  REQUIRE(c.ok());
  CHECK(c->toolkit.root == "/usr/local/cuda-13.0");
  REQUIRE(c->compiler);
  CHECK(c->compiler->path == "/usr/bin/g++-12");  // GCC 15 is too new for CUDA 13.0

  auto volta = validate::choose_toolkit({k130, k129}, {f129, f130}, {}, std::nullopt, false, sms("70"));
  REQUIRE(volta.ok());
  CHECK(volta->toolkit.root == "/usr/local/cuda-12.9");

  auto only13 = validate::choose_toolkit({k130}, {f129, f130}, {}, std::nullopt, false, sms("70"));
  REQUIRE_FALSE(only13.ok());
  CHECK(only13.error().exit == Exit::missing_tool);
  CHECK_THAT(only13.error().message, Catch::Contains("CUDA 13.0 cannot compile sm_70") && Catch::Contains("12.9"));

  auto asked = validate::choose_toolkit({k130}, {f129, f130}, {}, Version::parse("12.9"), false, sms("90"));
  REQUIRE_FALSE(asked.ok());
  CHECK(asked.error().exit == Exit::missing_tool);
  CHECK_THAT(asked.error().message, Catch::Contains("CUDA 12.9 is not installed"));
  auto preferred = validate::choose_toolkit({k130}, {f129, f130}, {}, Version::parse("12.9"), true, sms("90"));
  REQUIRE(preferred.ok());
  CHECK(preferred->toolkit.root == "/usr/local/cuda-13.0");

  auto none = validate::choose_toolkit({}, {f130}, {}, std::nullopt, false, sms("90"));
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().exit == Exit::missing_tool);
  CHECK_THAT(none.error().message, Catch::Contains("no CUDA toolkit found"));
}

// ---- the import test ------------------------------------------------------------------------

namespace {

struct FakePython {
  std::vector<validate::Command> seen;
  std::string probe = R"({"version": "3.11.2", "executable": "/usr/bin/python3", "venv": true, "ensurepip": true})";
  int pip_status = 0;
  std::string pip_err;
  // What import_check.py prints; "{venv}" is replaced by the venv's path.
  std::string import_out;
  validate::Exec exec() {
    return [this](const validate::Command& c) -> Result<validate::Outcome> {
      seen.push_back(c);
      const auto& a = c.argv;
      if (a.size() > 1 && a[1] == "-c") return validate::Outcome{0, false, probe + "\n", ""};
      if (a.size() > 2 && a[1] == "-m" && a[2] == "venv") return validate::Outcome{0, false, "", ""};
      if (a.size() > 2 && a[1] == "-m" && a[2] == "pip") return validate::Outcome{pip_status, false, "", pip_err};
      std::string venv = std::filesystem::path(a[0]).parent_path().parent_path().string();
      std::string o = import_out;
      for (std::size_t at; (at = o.find("{venv}")) != std::string::npos;) o.replace(at, 6, venv);
      return validate::Outcome{0, false, "some noise\n" + o + "\n", ""};
    };
  }
};

validate::ImportSetup import_setup() {
  validate::ImportSetup s;
  s.python = "/usr/bin/python3";
  s.module = "demo_pkg";
  s.script = "/share/archbuild/data/validate/import_check.py";
  s.gpus.why_none = "nvml: not found";
  return s;
}

const char* kImported =
    R"({"module": "demo_pkg", "python": "3.11.2", "file": "{venv}/lib/python3.11/site-packages/demo_pkg/__init__.py", "version": "1.0+cu130.sm90", "arch_list": ["sm_90"])";

}  // namespace

TEST_CASE("import test: the plan is venv, pip --no-index --no-deps, then an isolated import", "[validate][import]") {
  FakePython py;
  py.import_out = std::string(kImported) + "}";
  auto name = validate::parse_wheel_name("demo_pkg-1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl");
  REQUIRE(name.ok());
  auto r = validate::import_test("/w/demo_pkg-1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl", *name, sms("90"),
                                 import_setup(), py.exec());
  REQUIRE(py.seen.size() == 4);
  CHECK(py.seen[1].argv[1] == "-m");
  CHECK(py.seen[1].argv[2] == "venv");
  auto venv = std::filesystem::path(py.seen[1].argv[3]);
  CHECK(py.seen[2].argv == std::vector<std::string>{(venv / "bin/python").string(), "-m", "pip", "install",
                                                    "--no-index", "--no-deps", "--no-cache-dir",
                                                    "--disable-pip-version-check", "--no-input",
                                                    "/w/demo_pkg-1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl"});
  CHECK(py.seen[3].argv == std::vector<std::string>{(venv / "bin/python").string(), "-I",
                                                    "/share/archbuild/data/validate/import_check.py", "demo_pkg"});
  CHECK(check(r, "import").status == Status::pass);
  CHECK_THAT(check(r, "import").summary, Catch::Contains("imported demo_pkg 1.0+cu130.sm90") &&
                                             Catch::Contains("get_arch_list() = [sm_90]"));
  // No GPU: the GPU part is skipped with the reason, never passed.
  CHECK(check(r, "import-gpu").status == Status::skip);
  CHECK_THAT(check(r, "import-gpu").summary, Catch::Contains("no GPU (nvml: not found)"));
  CHECK(r.exit() == Exit::ok);
  CHECK_FALSE(std::filesystem::exists(venv.parent_path()));  // the temporary folder is gone
}

TEST_CASE("import test: an interpreter with pip >= 22.3 installs into a venv made without pip", "[validate][import]") {
  // No ensurepip copy in the venv (about 3 s each): the interpreter's own pip installs there
  // through --python, so ensurepip is not needed either.
  FakePython py;
  py.probe = R"({"version": "3.11.2", "executable": "/usr/bin/python3", "venv": true, "ensurepip": false, "pip": "23.0.1"})";
  py.import_out = std::string(kImported) + "}";
  auto name = validate::parse_wheel_name("demo_pkg-1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl");
  REQUIRE(name.ok());
  auto r = validate::import_test("/w/demo_pkg-1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl", *name, sms("90"),
                                 import_setup(), py.exec());
  REQUIRE(py.seen.size() == 4);
  REQUIRE(py.seen[1].argv.size() == 5);
  CHECK(py.seen[1].argv[3] == "--without-pip");
  auto venv = std::filesystem::path(py.seen[1].argv[4]);
  CHECK(py.seen[2].argv == std::vector<std::string>{"/usr/bin/python3", "-m", "pip", "--python",
                                                    (venv / "bin/python").string(), "install", "--no-index",
                                                    "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
                                                    "--no-input",
                                                    "/w/demo_pkg-1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl"});
  CHECK(check(r, "import").status == Status::pass);

  // pip 22.2 cannot (--python came in 22.3): the venv gets its own pip from ensurepip.
  FakePython old;
  old.probe = R"({"version": "3.11.2", "executable": "/usr/bin/python3", "venv": true, "ensurepip": true, "pip": "22.2.2"})";
  old.import_out = std::string(kImported) + "}";
  (void)validate::import_test("/w/demo_pkg-1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl", *name, sms("90"),
                              import_setup(), old.exec());
  REQUIRE(old.seen.size() == 4);
  CHECK(old.seen[1].argv.size() == 4);
  CHECK(old.seen[2].argv[0] == (std::filesystem::path(old.seen[1].argv[3]) / "bin/python").string());
}

TEST_CASE("import test: failures and missing tools", "[validate][import]") {
  auto name = validate::parse_wheel_name("demo_pkg-1.0-cp311-cp311-linux_x86_64.whl");
  REQUIRE(name.ok());
  auto run = [&](FakePython& py) {
    return validate::import_test("/w/x.whl", *name, sms("90"), import_setup(), py.exec());
  };
  {
    FakePython py;
    py.probe = R"({"version": "3.11.2", "executable": "/usr/bin/python3", "venv": true, "ensurepip": false})";
    auto r = run(py);
    CHECK(check(r, "import").status == Status::skip);
    CHECK(check(r, "import").missing_tool);
    CHECK_THAT(check(r, "import").summary, Catch::Contains("ensurepip") && Catch::Contains("python3-venv"));
    CHECK(r.exit() == Exit::missing_tool);
  }
  {
    FakePython py;
    py.probe = R"({"version": "3.12.1", "executable": "/usr/bin/python3", "venv": true, "ensurepip": true})";
    auto r = run(py);
    CHECK(check(r, "import").missing_tool);
    CHECK_THAT(check(r, "import").summary, Catch::Contains("cp311") && Catch::Contains("python3.11"));
  }
  {
    FakePython py;
    py.pip_status = 1;
    py.pip_err = "ERROR: x.whl is not a supported wheel on this platform.\n";
    auto r = run(py);
    CHECK(check(r, "import").status == Status::fail);
    CHECK_THAT(check(r, "import").summary, Catch::Contains("not a supported wheel"));
    CHECK(r.exit() == Exit::not_fine);
  }
  {
    FakePython py;
    py.import_out = R"({"module": "demo_pkg", "import_error": "OSError: libcudart.so.13: cannot open shared object file", "traceback": "Traceback\n  File x\nOSError: libcudart.so.13"})";
    auto r = run(py);
    CHECK(check(r, "import").status == Status::fail);
    CHECK_THAT(check(r, "import").summary, Catch::Contains("import demo_pkg failed: OSError: libcudart.so.13"));
    CHECK(check(r, "import-gpu").status == Status::skip);
  }
  {
    FakePython py;  // imported from somewhere else (the source tree): proves nothing
    py.import_out = R"({"module": "demo_pkg", "python": "3.11.2", "file": "/src/demo_pkg/__init__.py"})";
    auto r = run(py);
    CHECK(check(r, "import").status == Status::fail);
    CHECK_THAT(check(r, "import").summary, Catch::Contains("not the copy pip installed"));
  }
}

TEST_CASE("import test: the GPU part on a GPU of a target CC", "[validate][import]") {
  validate::Gpu h100{3, "NVIDIA H100", {9, 0}};
  auto with_gpu = [&](const std::string& gpu_json) {
    return nlohmann::json::parse(std::string(R"({"module": "torch", "arch_list": ["sm_80", "sm_90"], "gpu": )") +
                                 gpu_json + "}");
  };
  auto ok = validate::interpret_import_gpu(
      with_gpu(R"({"available": true, "device_count": 1, "capability": [9, 0], "op": {"what": "torch: sum", "ok": true}})"),
      sms("90"), h100);
  CHECK(ok.status == Status::pass);
  CHECK_THAT(ok.summary, Catch::Contains("capability 9.0") && Catch::Contains("torch: sum ok"));

  auto wrong_cap = validate::interpret_import_gpu(
      with_gpu(R"({"available": true, "capability": [8, 0], "op": {"what": "op", "ok": true}})"), sms("90"), h100);
  CHECK(wrong_cap.status == Status::fail);

  auto no_image = validate::interpret_import_gpu(
      nlohmann::json::parse(R"({"arch_list": ["sm_80"], "gpu": {"available": true, "capability": [9, 0],
         "op": {"what": "op", "ok": false, "error": "RuntimeError: CUDA error: no kernel image is available"}}})"),
      sms("90"), h100);
  CHECK(no_image.status == Status::fail);
  CHECK_THAT(no_image.summary, Catch::Contains("[sm_80] has no kernel image for 9.0") &&
                                   Catch::Contains("no kernel image is available"));

  auto no_op = validate::interpret_import_gpu(
      with_gpu(R"({"available": true, "capability": [9, 0], "op": {"what": null, "ok": null, "reason": "no op"}})"),
      sms("90"), h100);
  CHECK(no_op.status == Status::warn);

  // Through import_test: the device is selected for the child.
  FakePython py;
  py.import_out = std::string(kImported) +
                  R"(, "gpu": {"available": true, "capability": [9, 0], "op": {"what": "vector_add", "ok": true}}})";
  auto s = import_setup();
  s.gpus.gpus = {h100};
  auto r = validate::import_test("/w/x.whl", std::nullopt, sms("90"), s, py.exec());
  CHECK(py.seen.back().env.at("CUDA_VISIBLE_DEVICES") == "3");
  CHECK(py.seen.back().argv.back() == "--gpu");
  CHECK(check(r, "import-gpu").status == Status::pass);
}

// ---- the link closure and the platform tag, over libraries gcc builds here ------------

#include "support/process.hpp"
#include "validate/closure.hpp"

namespace {

// gcc -shared of a library that links libcudart by absolute RUNPATH and calls pthread_create
// (GLIBC_2.34 on this host's glibc); empty with `skip` set when gcc or the toolkit is absent.
std::string cuda_library(const test::TempDir& dir, const std::string& runpath, std::string& skip) {
  if (test::which("gcc").empty()) {
    skip = "no gcc";
    return {};
  }
  if (!std::filesystem::exists("/usr/local/cuda/lib64/libcudart.so")) {
    skip = "no /usr/local/cuda/lib64/libcudart.so";
    return {};
  }
  auto src = dir.write("k.c",
                       "#include <pthread.h>\nextern int cudaGetDeviceCount(int*);\n"
                       "static void* run(void* p) { return p; }\n"
                       "int k(void) { int n = 0; pthread_t t; pthread_create(&t, 0, run, 0);"
                       " return cudaGetDeviceCount(&n) + n; }\n");
  auto so = dir / "libk.so";
  auto r = test::run(test::which("gcc"), {"-shared", "-fPIC", "-o", so.string(), src.string(), "-L/usr/local/cuda/lib64",
                             "-lcudart", "-Wl,-rpath," + runpath});
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::ifstream in(so, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

validate::LibraryFacts shipped_facts() {
  auto f = validate::load_library_facts(validate::shipped_library_facts());
  REQUIRE(f.ok());
  return *f;
}

}  // namespace

TEST_CASE("elf: DT_NEEDED and RUNPATH and version needs of a gcc-built library", "[validate][closure][binary]") {
  test::TempDir dir;
  std::string skip;
  auto so = cuda_library(dir, "/usr/local/cuda/lib64", skip);
  if (!skip.empty()) {
    WARN("##archbuild-skip## " << skip);
    return;
  }
  binary::Bytes b(reinterpret_cast<const std::uint8_t*>(so.data()), so.size());
  auto d = binary::read_dynamic(b);
  REQUIRE(d.ok());
  CHECK(d->dynamic);
  CHECK(std::find(d->needed.begin(), d->needed.end(), "libcudart.so.13") != d->needed.end());
  CHECK(std::find(d->needed.begin(), d->needed.end(), "libc.so.6") != d->needed.end());
  CHECK(d->runpath == std::vector<std::string>{"/usr/local/cuda/lib64"});
  bool glibc234 = false;
  for (const auto& n : d->version_needs)
    if (n.file == "libc.so.6")
      glibc234 = std::find(n.versions.begin(), n.versions.end(), "GLIBC_2.34") != n.versions.end();
  CHECK(glibc234);
  // Truncated input is an error, never a crash.
  CHECK_FALSE(binary::read_dynamic(b.subspan(0, 200)).ok());
}

TEST_CASE("closure: a library linking CUDA by absolute RUNPATH fails (named) and passes once repaired", "[validate][closure]") {
  test::TempDir dir;
  std::string skip;
  auto so = cuda_library(dir, "/usr/local/cuda/lib64", skip);
  if (!skip.empty()) {
    WARN("##archbuild-skip## " << skip);
    return;
  }
  FakeWheel fw;
  fw.payload = {{"demo_pkg/__init__.py", "\n"}, {"demo_pkg/libk.so", so}};
  auto r = check_wheel(fw.write(dir, fw.bytes()), "90");
  const auto& c = check(r, "closure");
  CHECK(c.status == Status::fail);
  CHECK_THAT(c.summary, Catch::Contains("demo_pkg/libk.so needs libcudart.so.13") &&
                            Catch::Contains("found only at /usr/local/cuda") && Catch::Contains("not portable"));
  CHECK(c.evidence["files"][0]["runpath"][0] == "/usr/local/cuda/lib64");
  // linux_x86_64 is true, and no manylinux tag would be.
  CHECK(check(r, "platform-tag").status == Status::pass);
  CHECK_THAT(check(r, "platform-tag").summary, Catch::Contains("GLIBC_2.34") && Catch::Contains("not portable"));

  // The official layout: RUNPATH into the nvidia package's folder, and the package declared.
  if (test::which("patchelf").empty()) {
    WARN("##archbuild-skip## no patchelf for the repaired half");
    return;
  }
  auto so_path = dir.write("fixed/libk.so", so);
  auto p = test::run(test::which("patchelf"), {"--set-rpath", "$ORIGIN/../nvidia/cu13/lib", so_path.string()});
  REQUIRE(p.status == 0);
  std::ifstream in(so_path, std::ios::binary);
  std::string fixed((std::istreambuf_iterator<char>(in)), {});
  FakeWheel ok;
  ok.payload = {{"demo_pkg/__init__.py", "\n"}, {"demo_pkg/libk.so", fixed}};
  ok.metadata = "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0+cu130.sm90\nRequires-Dist: nvidia-cuda-runtime==13.0.96\n\n";
  auto r2 = check_wheel(ok.write(dir, ok.bytes()), "90");
  INFO(all_details(check(r2, "closure")));
  CHECK(check(r2, "closure").status == Status::pass);
  CHECK(check(r2, "closure").evidence["files"][0]["needed"][0]["where"] == "nvidia-cuda-runtime: nvidia/cu13/lib");

  // The RUNPATH alone is not enough: the package must be a Requires-Dist.
  ok.metadata = "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0+cu130.sm90\n\n";
  auto r3 = check_wheel(ok.write(dir, ok.bytes()), "90");
  CHECK(check(r3, "closure").status == Status::fail);
  CHECK_THAT(check(r3, "closure").summary, Catch::Contains("nvidia-cuda-runtime is not a Requires-Dist"));
}

TEST_CASE("closure: the cuda-toolkit metapackage's extras declare the packages, as official cu130 torch wheels do",
          "[validate][closure]") {
  test::TempDir dir;
  std::string skip;
  auto so = cuda_library(dir, "$ORIGIN/../nvidia/cu13/lib", skip);
  if (!skip.empty()) {
    WARN("##archbuild-skip## " << skip);
    return;
  }
  FakeWheel fw;
  fw.payload = {{"demo_pkg/__init__.py", "\n"}, {"demo_pkg/libk.so", so}};
  // torch-2.14.0+cu130's own form of the requirement.
  fw.metadata = "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0+cu130.sm90\nRequires-Dist: "
                "cuda-toolkit[cublas,cudart,cufft,nvrtc]==13.0.2\n\n";
  auto r = check_wheel(fw.write(dir, fw.bytes()), "90");
  INFO(all_details(check(r, "closure")));
  CHECK(check(r, "closure").status == Status::pass);
  CHECK(check(r, "closure").evidence["files"][0]["needed"][0]["where"] == "nvidia-cuda-runtime: nvidia/cu13/lib");
  // The metapackage without the extra that installs libcudart does not declare it.
  fw.metadata = "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0+cu130.sm90\nRequires-Dist: cuda-toolkit[cublas]==13.0.2\n\n";
  auto r2 = check_wheel(fw.write(dir, fw.bytes()), "90");
  CHECK(check(r2, "closure").status == Status::fail);
  CHECK_THAT(check(r2, "closure").summary, Catch::Contains("nvidia-cuda-runtime is not a Requires-Dist"));
}

TEST_CASE("closure: CUDA 12 wheels resolve into the nvidia-*-cu12 folders, shared sonames by the declared package",
          "[validate][closure]") {
  auto facts = shipped_facts();
  // A soname both majors ship: the -cu12 package for a CUDA 12 build, the CUDA 13 one otherwise.
  CHECK(facts.package_of("libcudnn.so.9", "12")->name == "nvidia-cudnn-cu12");
  CHECK(facts.package_of("libcudnn.so.9", "13")->name == "nvidia-cudnn-cu13");
  CHECK(facts.package_of("libnccl.so.2", "12")->name == "nvidia-nccl-cu12");
  CHECK(facts.packages_of("libcusparseLt.so.0").size() == 2);
  CHECK(facts.package_of("libcudart.so.12")->dir == "nvidia/cuda_runtime/lib");
  CHECK(facts.package_of("libcublasLt.so.12")->name == "nvidia-cublas-cu12");
  CHECK(facts.package_of("libcudart.so.12")->versions.at("12.8") == "12.8.*");
  CHECK(facts.package_of("libcublas.so.12")->meta_extra == "cublas");

  // What PyTorch's cu12 wheels link (build_cuda.sh's CUDA_RPATHS), resolved without a binary.
  auto elf = [](std::vector<std::string> needed) {
    validate::ElfFile f;
    f.path = "torch/lib/libtorch_cuda.so";
    f.dyn.needed = std::move(needed);
    f.dyn.runpath = {"$ORIGIN/../../nvidia/cuda_runtime/lib", "$ORIGIN/../../nvidia/cudnn/lib", "$ORIGIN/../../nvidia/nccl/lib"};
    return f;
  };
  validate::ClosureInput in;
  in.files = {elf({"libcudart.so.12", "libcudnn.so.9", "libnccl.so.2", "libc.so.6"})};
  in.requirements = validate::parse_requirements(
      {"nvidia-cuda-runtime-cu12==12.8.57; platform_system == 'Linux'", "nvidia-cudnn-cu12==9.8.0.87", "nvidia-nccl-cu12==2.25.1"});
  in.host = [](const std::string&, const std::vector<std::string>&) { return std::optional<std::string>{}; };
  auto c = validate::resolve_closure(in, facts);
  REQUIRE(c.size() == 1);
  for (const auto& n : c[0].needed) {
    INFO(n.soname << ": " << n.where);
    CHECK(n.from != validate::From::missing);
  }
  CHECK(c[0].needed[1].where == "nvidia-cudnn-cu12: nvidia/cudnn/lib");
  // The CUDA 13 cuDNN declared instead serves the same folder.
  in.requirements = validate::parse_requirements({"nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu13", "nvidia-nccl-cu12"});
  CHECK(validate::resolve_closure(in, facts)[0].needed[1].where == "nvidia-cudnn-cu13: nvidia/cudnn/lib");
  // Undeclared: the advice names the package of the file's own CUDA major (libcudart.so.12 says 12).
  in.requirements = validate::parse_requirements({"nvidia-cuda-runtime-cu12", "nvidia-nccl-cu12"});
  auto miss = validate::resolve_closure(in, facts)[0].needed[1];
  CHECK(miss.from == validate::From::missing);
  CHECK_THAT(miss.where, Catch::Contains("nvidia-cudnn-cu12 is not a Requires-Dist"));
}

TEST_CASE("platform tag: a library needing a GLIBC above its manylinux tag fails", "[validate][closure]") {
  test::TempDir dir;
  std::string skip;
  auto so = cuda_library(dir, "$ORIGIN/../nvidia/cu13/lib", skip);
  if (!skip.empty()) {
    WARN("##archbuild-skip## " << skip);
    return;
  }
  FakeWheel fw;
  fw.file = "demo_pkg-1.0+cu130.sm90-cp311-cp311-manylinux_2_17_x86_64.whl";
  fw.wheel_text = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_17_x86_64\n";
  fw.metadata = "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0+cu130.sm90\nRequires-Dist: nvidia-cuda-runtime\n\n";
  fw.payload = {{"demo_pkg/__init__.py", "\n"}, {"demo_pkg/libk.so", so}};
  auto r = check_wheel(fw.write(dir, fw.bytes()), "90");
  CHECK(check(r, "closure").status == Status::pass);
  const auto& t = check(r, "platform-tag");
  CHECK(t.status == Status::fail);
  CHECK_THAT(t.summary, Catch::Contains("demo_pkg/libk.so needs GLIBC_2.34, above its tag manylinux_2_17_x86_64"));
  CHECK(t.evidence["needs"]["GLIBC"]["version"] == "2.34");
}

TEST_CASE("closure: tags and policies and requirements", "[validate][closure]") {
  CHECK(validate::manylinux_glibc("manylinux_2_28_x86_64")->str() == "2.28");
  CHECK(validate::manylinux_glibc("manylinux2014_x86_64")->str() == "2.17");
  CHECK_FALSE(validate::manylinux_glibc("linux_x86_64"));
  auto facts = shipped_facts();
  CHECK(facts.package_of("libcudnn.so.9")->dir == "nvidia/cudnn/lib");
  CHECK(facts.package_of("libcudart.so.13")->name == "nvidia-cuda-runtime");
  CHECK(facts.system.count("libcuda.so.1"));
  CHECK(facts.policy_for(*Version::parse("2.28"))->limits.at("GLIBCXX").str() == "3.4.24");
  CHECK(facts.policy_for(*Version::parse("2.30"))->glibc.str() == "2.28");
  CHECK(facts.policy_for(*Version::parse("2.39")) == nullptr);
  auto reqs = validate::parse_requirements({"Typing_Extensions>=4.10", "nvidia-nccl-cu13==2.27.7; platform_system == 'Linux'",
                                            "opt-einsum>=3.3; extra == \"opt-einsum\""});
  REQUIRE(reqs.size() == 3);
  CHECK(reqs[0].name == "typing-extensions");
  CHECK_FALSE(reqs[1].extra);
  CHECK(reqs[2].extra);
  auto meta = validate::parse_requirements({"cuda-toolkit[cublas, CUDART]==13.0.2", "cuda_toolkit [nvrtc]"});
  CHECK(meta[0].name == "cuda-toolkit");
  CHECK(meta[0].extras == std::vector<std::string>{"cublas", "cudart"});
  CHECK(meta[1].name == "cuda-toolkit");
  CHECK(meta[1].extras == std::vector<std::string>{"nvrtc"});
  // A broken data file is a file:line error.
  test::TempDir dir;
  auto bad = dir.write("libraries.toml", "[system]\nlibraries = [\"libc.so.6\"]\n[[package]]\nname = \"x\"\ndir = \"/abs\"\nsonames = []\n");
  auto e = validate::load_library_facts(bad);
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.error().message, Catch::Contains("libraries.toml:5") && Catch::Contains("relative to site-packages"));
  auto dup = dir.write("dup.toml", "[[package]]\nname = \"a\"\ncuda = \"12\"\ndir = \"a\"\nsonames = [\"libx.so.1\"]\n"
                                   "[[package]]\nname = \"b\"\ncuda = \"12\"\ndir = \"b\"\nsonames = [\"libx.so.1\"]\n");
  auto d = validate::load_library_facts(dup);
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(d.error().message, Catch::Contains("dup.toml:10") && Catch::Contains("libx.so.1 is already shipped by a for CUDA 12"));
  auto meta_bad = dir.write("meta.toml", "[[package]]\nname = \"a\"\nmeta = \"cuda-toolkit\"\ndir = \"a\"\nsonames = []\n");
  auto m = validate::load_library_facts(meta_bad);
  REQUIRE_FALSE(m.ok());
  CHECK_THAT(m.error().message, Catch::Contains("meta.toml:3") && Catch::Contains("like \"cuda-toolkit[cublas]\""));
  auto machine_bad = dir.write("machines.toml", "[[package]]\nname = \"a\"\nmachines = [\"arm64\"]\ndir = \"a\"\nsonames = []\n");
  auto mb = validate::load_library_facts(machine_bad);
  REQUIRE_FALSE(mb.ok());
  CHECK_THAT(mb.error().message, Catch::Contains("machines.toml:3") && Catch::Contains("\"arm64\"") &&
                                     Catch::Contains("x86_64 or aarch64"));
}

TEST_CASE("import test: requirements first with pip configuration and skipped (never passed) when none can be had", "[validate][import]") {
  auto name = validate::parse_wheel_name("demo_pkg-1.0-cp311-cp311-linux_x86_64.whl");
  REQUIRE(name.ok());
  auto s = import_setup();
  s.requirements = {"typing-extensions>=4.10"};
  {
    FakePython py;
    py.import_out = std::string(kImported) + "}";
    auto r = validate::import_test("/w/x.whl", *name, sms("90"), s, py.exec());
    REQUIRE(py.seen.size() == 5);
    auto venv = std::filesystem::path(py.seen[1].argv[3]);
    CHECK(py.seen[2].argv == std::vector<std::string>{(venv / "bin/python").string(), "-m", "pip", "install",
                                                      "--no-cache-dir", "--disable-pip-version-check", "--no-input",
                                                      "typing-extensions>=4.10"});
    CHECK_FALSE(py.seen[2].env.count("PIP_CONFIG_FILE"));  // pip.conf / PIP_* reach pip
    CHECK(py.seen[3].argv[5] == "--no-deps");
    CHECK(check(r, "import").status == Status::pass);
  }
  {
    FakePython py;
    py.pip_status = 1;
    py.pip_err = "ERROR: Could not find a version that satisfies the requirement typing-extensions>=4.10 (from versions: none)\n"
                 "ERROR: No matching distribution found for typing-extensions>=4.10\n";
    auto r = validate::import_test("/w/x.whl", *name, sms("90"), s, py.exec());
    CHECK(check(r, "import").status == Status::skip);
    CHECK(check(r, "import").missing_tool);
    CHECK_THAT(check(r, "import").summary, Catch::Contains("cannot be had here") && Catch::Contains("PIP_FIND_LINKS"));
    CHECK(r.exit() == Exit::missing_tool);
  }
}

TEST_CASE("import test: torch feature checks one by one", "[validate][import]") {
  auto j = nlohmann::json::parse(R"({"features": [
      {"name": "cuda-version", "ok": true, "value": "12.8"},
      {"name": "cudnn", "ok": true, "value": "cuDNN 91002"},
      {"name": "nccl", "ok": false, "error": "RuntimeError: torch.distributed.is_nccl_available() is False"},
      {"name": "lapack", "ok": true, "value": "inv ok"},
      {"name": "matmul", "ok": null, "reason": "no GPU of a target CC"}]})");
  auto c = validate::interpret_features(j, std::string("13.0"));
  REQUIRE(c);
  CHECK(c->status == Status::fail);
  CHECK_THAT(c->summary, Catch::Contains("torch.version.cuda is 12.8, the wheel says CUDA 13.0") &&
                             Catch::Contains("is_nccl_available() is False"));
  CHECK(c->details.size() == 5);
  CHECK_FALSE(validate::interpret_features(nlohmann::json::parse(R"({"module": "x"})"), std::nullopt));
}
