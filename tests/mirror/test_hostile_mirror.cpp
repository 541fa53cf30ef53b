// Hostile input (issue 47) in mirror/: a manifest's project is a name, never a path; a FIFO in
// files/ is refused, not opened; immutability holds by PEP 503 project and PEP 440 version.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/sha256.hpp"
#include "arch/arch_data.hpp"
#include "mirror/make_wheel.hpp"
#include "mirror/mirror.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
namespace fs = std::filesystem;

TEST_CASE("hostile/mirror: a manifest's project that is a path writes nothing outside the mirror", "[mirror]") {
  test::TempDir tmp;
  auto w = test::make_wheel(tmp / "in", "norm", "1.0", "norm");
  auto dir = tmp / "mirror";
  REQUIRE(mirror::publish(dir, {w}, arch::ArchData::shipped()));
  auto manifest = nlohmann::json::parse(test::read_file(dir / "manifest.json"));
  auto other = test::make_wheel(tmp / "in2", "other", "1.0", "other");
  for (std::string project : std::vector<std::string>{(tmp / "outside").string(), "../../../escaped", "Norm", ""}) {
    INFO(project);
    auto edited = manifest;
    edited["files"][w.filename().string()]["project"] = project;
    std::ofstream(dir / "manifest.json") << edited.dump();
    auto r = mirror::publish(dir, {other}, arch::ArchData::shipped());
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == Exit::not_fine);
    CHECK(r.error().message.find("PEP 503") != std::string::npos);
    CHECK_FALSE(fs::exists(tmp / "outside"));
    CHECK_FALSE(fs::exists(tmp / "escaped"));
    CHECK_FALSE(fs::exists(dir / "files" / other.filename()));
    CHECK_FALSE(mirror::verify(dir, arch::ArchData::shipped()));
  }
}

TEST_CASE("hostile/mirror: a FIFO where a published file lies is refused at once", "[mirror]") {
  test::TempDir tmp;
  auto w = test::make_wheel(tmp / "in", "norm", "1.0", "norm");
  auto dir = tmp / "mirror";
  REQUIRE(mirror::publish(dir, {w}, arch::ArchData::shipped()));
  auto published = dir / "files" / w.filename();
  fs::remove(published);
  REQUIRE(::mkfifo(published.c_str(), 0644) == 0);
  auto t0 = std::chrono::steady_clock::now();
  auto r = mirror::publish(dir, {w}, arch::ArchData::shipped());
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == Exit::not_fine);
  CHECK(r.error().message.find("FIFO") != std::string::npos);
  auto v = mirror::verify(dir, arch::ArchData::shipped());
  REQUIRE(v);
  CHECK_FALSE(v->ok());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
}

TEST_CASE("hostile/mirror: one release file for pip under another spelling with other bytes is refused", "[mirror]") {
  test::TempDir tmp;
  auto dir = tmp / "mirror";
  auto first = test::make_wheel(tmp / "a", "norm", "1.0", "norm", "one");
  REQUIRE(mirror::publish(dir, {first}, arch::ArchData::shipped()));
  auto respelled = test::make_wheel(tmp / "b", "norm", "1.0.0", "norm", "two");
  auto r = mirror::publish(dir, {respelled}, arch::ArchData::shipped());
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == Exit::not_fine);
  CHECK(r.error().message.find("immutable") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "files" / respelled.filename()));
  auto a = test::make_wheel(tmp / "c", "My_Pkg", "1.0", "my_pkg", "one");
  REQUIRE(mirror::publish(dir, {a}, arch::ArchData::shipped()));
  for (std::string spelling : {"my_pkg", "my.pkg", "MY_PKG"}) {
    auto b = test::make_wheel(tmp / ("d-" + spelling), spelling, "1.0", "my_pkg", "other-" + spelling);
    auto refused = mirror::publish(dir, {b}, arch::ArchData::shipped());
    INFO(spelling);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().exit == Exit::not_fine);
  }
  // Two spellings in one publish: bad input, nothing written.
  auto x = test::make_wheel(tmp / "e", "twice", "2.0", "twice", "x");
  auto y = test::make_wheel(tmp / "f", "twice", "2.0.0", "twice", "y");
  CHECK_FALSE(mirror::publish(dir, {x, y}, arch::ArchData::shipped()));
  // Another version is another release file; the mirror verifies clean.
  auto next = test::make_wheel(tmp / "g", "norm", "1.0.1", "norm", "three");
  REQUIRE(mirror::publish(dir, {next}, arch::ArchData::shipped()));
  auto clean = mirror::verify(dir, arch::ArchData::shipped());
  REQUIRE(clean);
  CHECK(clean->ok());
  // A mirror that already holds two spellings (from before this rule): verify says so.
  fs::copy_file(respelled, dir / "files" / respelled.filename());
  auto m = nlohmann::json::parse(test::read_file(dir / "manifest.json"));
  auto entry = m["files"][first.filename().string()];
  entry["version"] = "1.0.0";
  entry["sha256"] = *sha256_file_hex(respelled);
  entry["size"] = fs::file_size(respelled);
  m["files"][respelled.filename().string()] = entry;
  std::ofstream(dir / "manifest.json") << m.dump();
  auto v = mirror::verify(dir, arch::ArchData::shipped());
  REQUIRE(v);
  bool duplicate = false;
  for (const auto& p : v->problems) duplicate = duplicate || p.kind == "duplicate-release";
  CHECK(duplicate);
}
