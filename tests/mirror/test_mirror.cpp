// mirror/: the PEP 503 layout, name normalisation, immutability, atomic pages and verify.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <atomic>
#include <map>
#include <set>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "arch/arch_data.hpp"
#include "mirror/make_wheel.hpp"
#include "mirror/mirror.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Every file under `dir` with its content and inode: equal snapshots mean nothing changed.
std::map<std::string, std::pair<std::string, ino_t>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<std::string, ino_t>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    struct stat st {};
    ::stat(e.path().c_str(), &st);
    out[fs::relative(e.path(), dir).string()] = {test::read_file(e.path()), st.st_ino};
  }
  return out;
}

ino_t inode(const fs::path& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return st.st_ino;
}

}  // namespace

TEST_CASE("hrefs are percent-encoded and decode back", "[mirror]") {
  CHECK(mirror::percent_encode("torch-2.7.1+cu128.sm120-cp311-cp311-linux_x86_64.whl") ==
        "torch-2.7.1%2Bcu128.sm120-cp311-cp311-linux_x86_64.whl");
  CHECK(mirror::percent_decode("a%2Bb%20c") == "a+b c");
  mirror::Entry e{"x-1.0+cu128-py3-none-any.whl", "x", "1.0+cu128", std::string(64, 'a'), 1, ""};
  CHECK(mirror::file_href(e) == "../../files/x-1.0%2Bcu128-py3-none-any.whl#sha256=" + std::string(64, 'a'));
  auto page = mirror::project_page("x", {e});
  CHECK(contains(page, "<a href=\"../../files/x-1.0%2Bcu128-py3-none-any.whl#sha256=" + std::string(64, 'a') + "\">"));
}

TEST_CASE("publish lays out a PEP 503 index with normalised names, files and a manifest", "[mirror]") {
  test::TempDir tmp;
  auto w1 = test::make_wheel(tmp / "in", "Tiny_Pkg", "0.1.0+cu128.sm120", "tiny_pkg");
  auto w2 = test::make_wheel(tmp / "in", "other.pkg", "2.0", "other_pkg");
  auto dir = tmp / "mirror";
  auto r = mirror::publish(dir, {w1, w2}, arch::ArchData::shipped());
  REQUIRE(r);
  REQUIRE(r->size() == 2);
  CHECK((*r)[0].added);
  CHECK((*r)[0].entry.project == "tiny-pkg");
  CHECK((*r)[1].entry.project == "other-pkg");

  auto sha1 = sha256_file_hex(w1).value();
  CHECK(sha256_file_hex(dir / "files" / w1.filename()).value() == sha1);
  REQUIRE(fs::exists(dir / "simple" / "index.html"));
  auto root = test::read_file(dir / "simple" / "index.html");
  CHECK(contains(root, "<a href=\"tiny-pkg/\">tiny-pkg</a>"));
  CHECK(contains(root, "<a href=\"other-pkg/\">other-pkg</a>"));
  auto page = test::read_file(dir / "simple" / "tiny-pkg" / "index.html");
  CHECK(contains(page, "href=\"../../files/Tiny_Pkg-0.1.0%2Bcu128.sm120-py3-none-any.whl#sha256=" + sha1 + "\""));
  CHECK_FALSE(contains(page, "other"));

  // PEP 691 JSON beside the HTML.
  auto pj = nlohmann::json::parse(test::read_file(dir / "simple" / "tiny-pkg" / "index.json"));
  CHECK(pj["name"] == "tiny-pkg");
  REQUIRE(pj["files"].size() == 1);
  CHECK(pj["files"][0]["hashes"]["sha256"] == sha1);
  auto rj = nlohmann::json::parse(test::read_file(dir / "simple" / "index.json"));
  CHECK(rj["projects"].size() == 2);

  auto m = mirror::read_manifest(dir);
  REQUIRE(m);
  REQUIRE(m->files.count(w1.filename().string()));
  const auto& e = m->files.at(w1.filename().string());
  CHECK(e.sha256 == sha1);
  CHECK(e.size == fs::file_size(w1));
  CHECK(e.version == "0.1.0+cu128.sm120");
  CHECK(e.published_at.size() == 20);  // 2026-11-21T16:20:07Z
  // No temp file is left behind.
  for (const auto& p : fs::recursive_directory_iterator(dir)) CHECK_FALSE(contains(p.path().filename().string(), ".tmp-"));
}

TEST_CASE("a published file name is immutable, the same file again is a no-op", "[mirror]") {
  test::TempDir tmp;
  auto w = test::make_wheel(tmp / "a", "pkg", "1.0", "pkg", "one");
  auto dir = tmp / "mirror";
  REQUIRE(mirror::publish(dir, {w}, arch::ArchData::shipped()));
  auto before = snapshot(dir);

  SECTION("the same file again changes nothing") {
    auto again = mirror::publish(dir, {w}, arch::ArchData::shipped());
    REQUIRE(again);
    REQUIRE(again->size() == 1);
    CHECK_FALSE((*again)[0].added);
    CHECK(snapshot(dir) == before);
  }
  SECTION("the same name with another hash is refused and changes nothing") {
    auto other = test::make_wheel(tmp / "b", "pkg", "1.0", "pkg", "two");
    auto fresh = test::make_wheel(tmp / "b", "fresh", "1.0", "fresh");
    REQUIRE(sha256_file_hex(other).value() != sha256_file_hex(w).value());
    auto r = mirror::publish(dir, {fresh, other}, arch::ArchData::shipped());  // all or nothing: `fresh` is not added either
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == Exit::not_fine);
    CHECK(contains(r.error().message, "immutable"));
    CHECK(snapshot(dir) == before);
  }
  SECTION("a name that is not PEP 427 is bad input") {
    auto bad = tmp.write("c/not-a-wheel.whl", "x");
    auto r = mirror::publish(dir, {bad}, arch::ArchData::shipped());
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == Exit::bad_input);
    CHECK(snapshot(dir) == before);
  }
}

TEST_CASE("pages are replaced atomically: a reader never sees half a page", "[mirror]") {
  test::TempDir tmp;
  auto dir = tmp / "mirror";
  REQUIRE(mirror::publish(dir, {test::make_wheel(tmp / "in", "pkg", "0.0", "pkg")}, arch::ArchData::shipped()));
  auto page = dir / "simple" / "pkg" / "index.html";
  auto ino = inode(page);

  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, torn{0};
  std::thread reader([&] {
    while (!done) {
      std::ifstream in(page, std::ios::binary);
      std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      ++reads;
      if (s.rfind("<!DOCTYPE html>", 0) != 0 || !contains(s, "</html>\n")) ++torn;
    }
  });
  for (int i = 1; i <= 30; ++i)
    REQUIRE(mirror::publish(dir, {test::make_wheel(tmp / "in", "pkg", "0." + std::to_string(i), "pkg")}, arch::ArchData::shipped()));
  done = true;
  reader.join();
  CHECK(reads > 0);
  CHECK(torn == 0);
  CHECK(inode(page) != ino);  // a new file renamed over the old one, not rewritten in place
  CHECK(mirror::read_manifest(dir)->files.size() == 31);
}

TEST_CASE("verify re-hashes files and page links against the manifest", "[mirror]") {
  test::TempDir tmp;
  auto dir = tmp / "mirror";
  auto w = test::make_wheel(tmp / "in", "pkg", "1.0", "pkg");
  auto w2 = test::make_wheel(tmp / "in", "pkg", "2.0", "pkg");
  REQUIRE(mirror::publish(dir, {w, w2}, arch::ArchData::shipped()));
  auto clean = mirror::verify(dir, arch::ArchData::shipped());
  REQUIRE(clean);
  CHECK(clean->ok());
  CHECK(clean->files_checked == 2);
  CHECK(clean->pages_checked >= 2);

  auto kinds = [&] {
    std::set<std::string> k;
    auto v = mirror::verify(dir, arch::ArchData::shipped());
    REQUIRE(v);
    for (const auto& p : v->problems) k.insert(p.kind);
    return k;
  };
  SECTION("a tampered file") {
    std::ofstream(dir / "files" / w.filename(), std::ios::app) << "tampered";
    CHECK(kinds() == std::set<std::string>{"hash-mismatch"});
  }
  SECTION("a missing file and an extra one") {
    fs::remove(dir / "files" / w.filename());
    std::ofstream(dir / "files" / "stray-1.0-py3-none-any.whl") << "x";
    CHECK(kinds() == std::set<std::string>{"missing-file", "extra-file"});
  }
  SECTION("a page whose link hash was edited") {
    auto p = dir / "simple" / "pkg" / "index.html";
    auto s = test::read_file(p);
    auto sha = sha256_file_hex(w).value();
    s.replace(s.find(sha), 64, std::string(64, '0'));
    std::ofstream(p, std::ios::trunc) << s;
    CHECK(kinds() == std::set<std::string>{"page-link-hash"});
  }
  SECTION("not a mirror") {
    auto r = mirror::verify(tmp / "in", arch::ArchData::shipped());
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == Exit::bad_input);
  }
}

// A publish killed between its file's rename and its manifest leaves a whole file (the copy is
// written under a '.' name and renamed): that file counts as published, never replaced.
TEST_CASE("a file in files/ without a manifest entry is published: kept, listed, never replaced", "[mirror]") {
  test::TempDir tmp;
  auto dir = tmp / "mirror";
  auto w = test::make_wheel(tmp / "in", "pkg", "1.0", "pkg", "one");
  fs::create_directories(dir / "files");
  fs::copy_file(w, dir / "files" / w.filename());
  auto other = test::make_wheel(tmp / "other", "pkg", "1.0", "pkg", "two");
  auto refused = mirror::publish(dir, {other}, arch::ArchData::shipped());
  REQUIRE_FALSE(refused);
  CHECK(refused.error().exit == Exit::not_fine);
  CHECK(test::read_file(dir / "files" / w.filename()) == test::read_file(w));
  auto same = mirror::publish(dir, {w}, arch::ArchData::shipped());
  REQUIRE(same);
  CHECK_FALSE((*same)[0].added);
  CHECK(mirror::read_manifest(dir)->files.count(w.filename().string()) == 1);
  CHECK(mirror::verify(dir, arch::ArchData::shipped())->ok());

  // Something there that is not a sound wheel is neither listed nor replaced: the user decides.
  test::TempDir tmp2;
  auto dir2 = tmp2 / "mirror";
  tmp2.write("mirror/files/" + w.filename().string(), "half a wheel");
  auto r = mirror::publish(dir2, {w}, arch::ArchData::shipped());
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == Exit::not_fine);
  CHECK(contains(r.error().message, "move it away"));
  CHECK(test::read_file(dir2 / "files" / w.filename()) == "half a wheel");
}
