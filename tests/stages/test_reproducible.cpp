// stages/reproducible: the deterministic wheel rewrite. Two zips with the same contents in another
// order, with other times, modes and owners, become the same bytes; RECORD is regenerated; the
// output passes validate's wheel checks; the member diff names exactly what changed; hostile
// names are refused without leaving a file.
#include <catch2/catch.hpp>

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/sha256.hpp"
#include "stages/reproducible.hpp"
#include "support/tempdir.hpp"
#include "validate/wheel_check.hpp"

using namespace archbuild;
namespace fs = std::filesystem;

namespace {

struct In {
  std::string name;
  std::string data;
  int perm = 0644;
  std::int64_t mtime = 1700000000;
  bool dir = false;
};

// A zip written by libarchive as a build would: any order, any times, modes and owners.
void make_zip(const fs::path& p, const std::vector<In>& members, bool store = false) {
  archive* a = archive_write_new();
  REQUIRE(a);
  archive_write_set_format_zip(a);
  if (store) archive_write_set_options(a, "zip:compression=store");
  REQUIRE(archive_write_open_filename(a, p.c_str()) == ARCHIVE_OK);
  for (const auto& m : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_filetype(e, m.dir ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(e, m.perm);
    archive_entry_set_size(e, m.dir ? 0 : static_cast<la_int64_t>(m.data.size()));
    archive_entry_set_mtime(e, m.mtime, 0);
    archive_entry_set_uid(e, 1000 + static_cast<int>(m.mtime % 7));
    archive_entry_set_uname(e, "builder");
    REQUIRE(archive_write_header(a, e) == ARCHIVE_OK);
    if (!m.data.empty())
      REQUIRE(archive_write_data(a, m.data.data(), m.data.size()) == static_cast<la_ssize_t>(m.data.size()));
    archive_entry_free(e);
  }
  REQUIRE(archive_write_close(a) == ARCHIVE_OK);
  archive_write_free(a);
}

struct Read {
  std::string name, data;
  int perm = 0;
  std::int64_t mtime = 0;
  bool uid0 = false;
};
std::vector<Read> read_zip(const fs::path& p) {
  std::vector<Read> out;
  archive* a = archive_read_new();
  archive_read_support_format_zip(a);
  REQUIRE(archive_read_open_filename(a, p.c_str(), 1 << 16) == ARCHIVE_OK);
  archive_entry* e = nullptr;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    Read r;
    r.name = archive_entry_pathname_utf8(e) ? archive_entry_pathname_utf8(e) : archive_entry_pathname(e);
    r.perm = static_cast<int>(archive_entry_perm(e));
    r.mtime = archive_entry_mtime(e);
    r.uid0 = archive_entry_uid(e) == 0 && archive_entry_gid(e) == 0;
    char buf[4096];
    la_ssize_t n;
    while ((n = archive_read_data(a, buf, sizeof buf)) > 0) r.data.append(buf, static_cast<std::size_t>(n));
    out.push_back(std::move(r));
  }
  archive_read_free(a);
  return out;
}

const std::string kDi = "minitorch-0.1.0+cu130.sm90.dist-info/";
const std::string kWheel = "minitorch-0.1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl";

std::vector<In> members_v1() {
  return {
      {"minitorch/__init__.py", "from ._C import add\n"},
      {"minitorch/_C.so", std::string("\x7f" "ELF fake library bytes", 24), 0755},
      {"minitorch/data,with \"comma\".txt", "odd name\n"},
      {"minitorch/empty.txt", ""},
      {kDi + "METADATA", "Metadata-Version: 2.1\nName: minitorch\nVersion: 0.1.0+cu130.sm90\n"},
      {kDi + "WHEEL",
       "Wheel-Version: 1.0\nGenerator: archbuild\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n"},
      {kDi + "top_level.txt", "minitorch\n"},
      {kDi + "RECORD", "stale,sha256=nothing,1\n"},
  };
}

// Same contents: reversed order, other times, modes (umask 002, an x bit on group only), owners.
std::vector<In> members_v1_shuffled() {
  auto v = members_v1();
  std::reverse(v.begin(), v.end());
  std::int64_t t = 1600000000;
  for (auto& m : v) {
    m.mtime = t;
    t += 3601;
    m.perm = m.perm == 0755 ? 0710 : 0664;
  }
  return v;
}

std::string file_bytes(const fs::path& p) { return test::read_file(p); }

}  // namespace

TEST_CASE("same contents in any order, time or mode give byte-identical wheels", "[reproducible]") {
  test::TempDir t;
  fs::create_directories(t / "a");
  fs::create_directories(t / "b");
  make_zip(t / "a" / kWheel, members_v1());
  make_zip(t / "b" / kWheel, members_v1_shuffled(), /*store=*/true);
  REQUIRE(file_bytes(t / "a" / kWheel) != file_bytes(t / "b" / kWheel));

  const std::int64_t epoch = 1714000000;
  REQUIRE(stages::normalize_wheel(t / "a" / kWheel, t / "a.whl", epoch).ok());
  REQUIRE(stages::normalize_wheel(t / "b" / kWheel, t / "b.whl", epoch).ok());
  CHECK(file_bytes(t / "a.whl") == file_bytes(t / "b.whl"));
  CHECK_FALSE(fs::exists(t / "a.whl.tmp"));

  // Idempotent: normalizing a normalized wheel (in place) changes nothing.
  auto before = file_bytes(t / "a.whl");
  REQUIRE(stages::normalize_wheel(t / "a.whl", t / "a.whl", epoch).ok());
  CHECK(file_bytes(t / "a.whl") == before);

  // The time zone of the build host does not leak in (libarchive writes DOS times in local time).
  const char* old = std::getenv("TZ");
  std::string saved = old ? old : "";
  setenv("TZ", "EST5EDT", 1);
  tzset();
  REQUIRE(stages::normalize_wheel(t / "b" / kWheel, t / "b-est.whl", epoch).ok());
  setenv("TZ", "IST-5:30", 1);
  tzset();
  REQUIRE(stages::normalize_wheel(t / "b" / kWheel, t / "b-ist.whl", epoch).ok());
  if (old) setenv("TZ", saved.c_str(), 1); else unsetenv("TZ");
  tzset();
  CHECK(file_bytes(t / "b-est.whl") == before);
  CHECK(file_bytes(t / "b-ist.whl") == before);

  // Another epoch is another wheel (the time is really written).
  REQUIRE(stages::normalize_wheel(t / "a" / kWheel, t / "c.whl", epoch + 10).ok());
  CHECK(file_bytes(t / "c.whl") != before);
}

TEST_CASE("the rewritten wheel: order, times, modes, owners and RECORD", "[reproducible]") {
  test::TempDir t;
  make_zip(t / kWheel, members_v1_shuffled());
  REQUIRE(stages::normalize_wheel(t / kWheel, t / "out.whl", 1714000000).ok());
  auto got = read_zip(t / "out.whl");
  REQUIRE(got.size() == members_v1().size());

  // Sorted bytewise, RECORD last.
  std::vector<std::string> names;
  for (const auto& r : got) names.push_back(r.name);
  CHECK(names.back() == kDi + "RECORD");
  CHECK(std::is_sorted(names.begin(), names.end() - 1));
  CHECK(names.front() == "minitorch-0.1.0+cu130.sm90.dist-info/METADATA");  // '-' (0x2d) < '/' (0x2f)

  for (const auto& r : got) {
    INFO(r.name);
    CHECK(r.mtime == 1714000000);
    CHECK(r.uid0);
    CHECK(r.perm == (r.name == "minitorch/_C.so" ? 0755 : 0644));
  }

  // RECORD: one line per other member, the hash computed here, CSV-quoted odd names, itself last.
  const std::string& record = got.back().data;
  Sha256 sha;
  sha.update(std::string("from ._C import add\n"));
  std::string init_line = "minitorch/__init__.py," + stages::record_digest(sha.raw()) + ",20\n";
  CHECK(record.find(init_line) != std::string::npos);
  CHECK(stages::record_digest(sha.raw()).find('=', 7) == std::string::npos);
  CHECK(record.find("minitorch/empty.txt,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n") !=
        std::string::npos);
  CHECK(record.find("\"minitorch/data,with \"\"comma\"\".txt\",sha256=") != std::string::npos);
  CHECK(record.ends_with(kDi + "RECORD,,\n"));
  CHECK(record.find("stale") == std::string::npos);
  std::size_t lines = static_cast<std::size_t>(std::count(record.begin(), record.end(), '\n'));
  CHECK(lines == got.size());
  // Same order as the members.
  std::size_t pos = 0;
  for (const auto& n : names) {
    auto at = record.find(n == "minitorch/data,with \"comma\".txt" ? "\"minitorch/data" : n, pos);
    INFO(n);
    REQUIRE(at != std::string::npos);
    pos = at;
  }

}

TEST_CASE("the rewritten wheel passes validate's RECORD and member checks", "[reproducible]") {
  test::TempDir t;
  make_zip(t / "in.whl", members_v1_shuffled());
  fs::create_directories(t / "v");
  REQUIRE(stages::normalize_wheel(t / "in.whl", t / "v" / kWheel, 1714000000).ok());
  auto w = validate::read_wheel(t / "v" / kWheel);
  REQUIRE(w.ok());
  auto name = validate::parse_wheel_name(kWheel);
  REQUIRE(name.ok());
  auto rec = validate::check_record(*w, *name);
  INFO(rec.summary);
  for (const auto& d : rec.details) INFO(d);
  CHECK(rec.status == validate::Status::pass);
  auto mem = validate::check_members(*w);
  INFO(mem.summary);
  CHECK(mem.status != validate::Status::fail);
  auto meta = validate::check_metadata(*w, *name);
  INFO(meta.summary);
  CHECK(meta.status != validate::Status::fail);
}

TEST_CASE("epochs before 1980 clamp to the zip epoch", "[reproducible]") {
  test::TempDir t;
  make_zip(t / "in.whl", members_v1());
  REQUIRE(stages::normalize_wheel(t / "in.whl", t / "a.whl", 0).ok());
  REQUIRE(stages::normalize_wheel(t / "in.whl", t / "b.whl", stages::zip_epoch_min).ok());
  CHECK(file_bytes(t / "a.whl") == file_bytes(t / "b.whl"));
  for (const auto& r : read_zip(t / "a.whl")) CHECK(r.mtime == stages::zip_epoch_min);
}

TEST_CASE("differing_members names exactly the members that differ", "[reproducible]") {
  test::TempDir t;
  auto v2 = members_v1();
  v2[1].data = std::string("\x7f" "ELF other library bytes", 25);  // minitorch/_C.so
  make_zip(t / "a.whl", members_v1());
  make_zip(t / "b.whl", v2);
  make_zip(t / "c.whl", members_v1_shuffled());
  REQUIRE(stages::normalize_wheel(t / "a.whl", t / "na.whl", 1714000000).ok());
  REQUIRE(stages::normalize_wheel(t / "b.whl", t / "nb.whl", 1714000000).ok());
  REQUIRE(stages::normalize_wheel(t / "c.whl", t / "nc.whl", 1714000000).ok());

  // RECORD differs too: it carries the changed hash.
  CHECK(stages::differing_members(t / "na.whl", t / "nb.whl") ==
        std::vector<std::string>{kDi + "RECORD", "minitorch/_C.so"});
  CHECK(stages::differing_members(t / "na.whl", t / "nc.whl").empty());
  // Raw inputs: same contents apart from RECORD's stale text and modes.
  CHECK(stages::differing_members(t / "a.whl", t / "c.whl").empty());

  // A member only in one.
  auto v3 = members_v1();
  v3.push_back({"minitorch/extra.py", "x = 1\n"});
  make_zip(t / "d.whl", v3);
  CHECK(stages::differing_members(t / "a.whl", t / "d.whl") == std::vector<std::string>{"minitorch/extra.py"});

  // Unreadable: an error, not an empty list.
  t.write("junk.whl", "not a zip");
  auto r = stages::compare_members(t / "a.whl", t / "junk.whl");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == Exit::bad_input);
  CHECK_THROWS_AS(stages::differing_members(t / "junk.whl", t / "a.whl"), Failure);
}

TEST_CASE("hostile member names and broken wheels are refused with exit 2 and no output", "[reproducible]") {
  test::TempDir t;
  for (std::string bad : {"../evil.py", "minitorch/../../evil.py", "/etc/passwd", "..\\evil.py", ".."}) {
    INFO(bad);
    auto v = members_v1();
    v.push_back({bad, "boom\n"});
    make_zip(t / "in.whl", v);
    auto r = stages::normalize_wheel(t / "in.whl", t / "out.whl", 1714000000);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit == Exit::bad_input);
    CHECK(r.error().message.find("member name") != std::string::npos);
    CHECK_FALSE(fs::exists(t / "out.whl"));
    CHECK_FALSE(fs::exists(t / "out.whl.tmp"));
  }
  // libarchive's zip reader turns '\\' into '/' in names (so "..\\x" above is "../x"): a
  // backslash never reaches the rewritten wheel.
  {
    auto v = members_v1();
    v.push_back({"minitorch\\win.py", "w\n"});
    make_zip(t / "in.whl", v);
    REQUIRE(stages::normalize_wheel(t / "in.whl", t / "bs.whl", 1714000000).ok());
    for (const auto& r : read_zip(t / "bs.whl")) CHECK(r.name.find('\\') == std::string::npos);
    CHECK(test::read_file(t / "bs.whl").find("minitorch\\win.py") == std::string::npos);
  }
  // A name like "a..b" is fine.
  {
    auto v = members_v1();
    v.push_back({"minitorch/a..b.txt", "ok\n"});
    make_zip(t / "in.whl", v);
    CHECK(stages::normalize_wheel(t / "in.whl", t / "ok.whl", 1714000000).ok());
  }
  // Not a zip; no dist-info.
  t.write("junk.whl", "not a zip at all");
  auto junk = stages::normalize_wheel(t / "junk.whl", t / "out.whl", 1714000000);
  REQUIRE_FALSE(junk.ok());
  CHECK(junk.error().exit == Exit::bad_input);
  // A zip short of its end record: its local headers are intact, but pip reads the central
  // directory, and so does the rewrite (validate and inspect agree).
  make_zip(t / "whole.whl", members_v1());
  auto whole = test::read_file(t / "whole.whl");
  t.write("cut.whl", whole.substr(0, whole.size() - 10));
  auto cut = stages::normalize_wheel(t / "cut.whl", t / "out.whl", 1714000000);
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().exit == Exit::bad_input);
  CHECK(cut.error().message.find("its central directory cannot be found") != std::string::npos);
  CHECK_FALSE(fs::exists(t / "out.whl"));
  make_zip(t / "nodi.whl", {{"minitorch/__init__.py", "x\n"}});
  auto nodi = stages::normalize_wheel(t / "nodi.whl", t / "out.whl", 1714000000);
  REQUIRE_FALSE(nodi.ok());
  CHECK(nodi.error().message.find("dist-info") != std::string::npos);
  CHECK_FALSE(fs::exists(t / "out.whl"));
}
