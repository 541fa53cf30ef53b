// Hostile input (issue 47) in the store: every path archbuild writes goes through one rule (a
// regular file or nothing is replaced, nothing else is), and every record read back from the
// cache is verified before it is trusted.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "core/path_kind.hpp"
#include "core/sha256.hpp"
#include "store/atomic_file.hpp"
#include "store/key_record.hpp"
#include "store/layout.hpp"
#include "store/wheels.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::store;
using archbuild::test::TempDir;
namespace fs = std::filesystem;

TEST_CASE("hostile/paths written: a FIFO, a device or a link is refused, never replaced", "[store]") {
  TempDir tmp;
  // Nothing there, or a regular file: written atomically.
  REQUIRE(write_file_atomic(tmp / "new/out.json", "one"));
  REQUIRE(write_file_atomic(tmp / "new/out.json", "two"));
  CHECK(test::read_file(tmp / "new/out.json") == "two");
  // Without the fsync (a verified cache's write): the same rename, the same refusals.
  REQUIRE(write_file_atomic(tmp / "new/out.json", "three", AtomicFile::Durability::rename_only));
  CHECK(test::read_file(tmp / "new/out.json") == "three");
  // A FIFO: refused without being opened (open() of a FIFO waits for a reader).
  auto fifo = tmp / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  auto f = write_file_atomic(fifo, "x");
  REQUIRE_FALSE(f);
  CHECK(f.error().exit == Exit::bad_input);
  CHECK(f.error().message.find("FIFO") != std::string::npos);
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK_FALSE(write_file_atomic(fifo, "x", AtomicFile::Durability::rename_only));
  // A link (to a file that exists): the link stays a link, its target unchanged.
  tmp.write("target", "kept");
  fs::create_symlink(tmp / "target", tmp / "link");
  auto l = write_file_atomic(tmp / "link", "x");
  REQUIRE_FALSE(l);
  CHECK(l.error().message.find("symbolic link") != std::string::npos);
  CHECK(fs::is_symlink(tmp / "link"));
  CHECK(test::read_file(tmp / "target") == "kept");
  // A character device: /dev/full was replaced by a regular file (as root) or refused late.
  auto d = paths::expect_writable_file("/dev/full", "--trace");
  REQUIRE_FALSE(d);
  CHECK(d.error().message.find("character device") != std::string::npos);
  // A directory.
  CHECK_FALSE(write_file_atomic(tmp / "new", "x"));
  // No temp file left by a refusal.
  for (const auto& e : fs::directory_iterator(tmp.path())) CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
}

TEST_CASE("hostile/paths written: a copy into the cache refuses a link, FIFO or directory at either end", "[store]") {
  TempDir tmp;
  tmp.write("from", "bytes of the wheel");
  REQUIRE(copy_file_atomic(tmp / "from", tmp / "copies/to"));
  CHECK(test::read_file(tmp / "copies/to") == "bytes of the wheel");
  REQUIRE(copy_file_atomic(tmp / "from", tmp / "copies/to"));  // a regular file is replaced
  // A link planted where the copy goes: std::filesystem::copy_file wrote through it.
  tmp.write("outside", "kept");
  fs::create_symlink(tmp / "outside", tmp / "copies/link");
  auto l = copy_file_atomic(tmp / "from", tmp / "copies/link");
  REQUIRE_FALSE(l);
  CHECK(l.error().message.find("symbolic link") != std::string::npos);
  CHECK(test::read_file(tmp / "outside") == "kept");
  CHECK(fs::is_symlink(tmp / "copies/link"));
  // A FIFO where the copy goes (copy_file opened it and waited for a reader), and as the source.
  auto fifo = tmp / "copies/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  CHECK_FALSE(copy_file_atomic(tmp / "from", fifo));
  auto from_fifo = copy_file_atomic(fifo, tmp / "copies/other");
  REQUIRE_FALSE(from_fifo);
  CHECK(from_fifo.error().message.find("FIFO") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp / "copies/other"));
  // A directory.
  fs::create_directories(tmp / "copies/dir");
  CHECK_FALSE(copy_file_atomic(tmp / "from", tmp / "copies/dir"));
  CHECK(fs::is_directory(tmp / "copies/dir"));
  for (const auto& e : fs::directory_iterator(tmp / "copies")) CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
}

TEST_CASE("hostile/cache records: a damaged named wheel is replaced, not reused after a rebuild", "[store]") {
  TempDir tmp;
  Layout layout(tmp / "cache");
  auto built = tmp.write("dist/t.whl", "torch wheel bytes");
  auto stored = put_wheel(layout, built);
  REQUIRE(stored);
  const std::string name = "minitorch-0.1.0-cp311-cp311-linux_x86_64.whl";
  auto named = named_wheel(layout, stored->sha256, name);
  REQUIRE(named);
  // Damaged in place: the hard link shares the inode, so both names hold the damage.
  { std::ofstream(*named, std::ios::binary | std::ios::in | std::ios::out) << "XXXXX"; }
  CHECK(get_wheel(layout, stored->sha256).state == WheelState::corrupted);  // removed
  // Rebuilt to the same bytes: the named copy must be these bytes again.
  REQUIRE(put_wheel(layout, built));
  auto again = named_wheel(layout, stored->sha256, name);
  REQUIRE(again);
  CHECK(test::read_file(*again) == "torch wheel bytes");
  CHECK(*sha256_file_hex(*again) == stored->sha256);
  // A named copy that is a separate, damaged copy (no hard link) is replaced too.
  fs::remove(*again);
  tmp.write("cache/wheels/" + stored->sha256 + ".named/" + name, "other bytes");
  auto third = named_wheel(layout, stored->sha256, name);
  REQUIRE(third);
  CHECK(test::read_file(*third) == "torch wheel bytes");
  // A name from the record that is not a wheel file name is refused.
  CHECK_FALSE(named_wheel(layout, stored->sha256, ".hidden.whl"));
}

TEST_CASE("hostile/cache records: a truncated, empty or directory key record is exit 1 with the way out", "[store]") {
  TempDir tmp;
  Layout layout(tmp / "cache");
  REQUIRE(layout.create());
  const std::string key = std::string(64, 'b');
  KeyRecord rec(layout, key);
  const std::string path = layout.manifest(key).string();
  for (std::string content : {std::string("{\"key\": \"bbb"), std::string()}) {
    { std::ofstream(layout.manifest(key)) << content; }
    auto r = rec.read();
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == Exit::not_fine);  // the cache's damage, not a failed stage (4)
    CHECK(r.error().message.find("rm -- \"" + path + "\"") != std::string::npos);
  }
  fs::remove(layout.manifest(key));
  fs::create_directories(layout.manifest(key) / "inside");
  auto d = rec.read();
  REQUIRE_FALSE(d);
  CHECK(d.error().exit == Exit::not_fine);
  CHECK(d.error().message.find("is a directory") != std::string::npos);
  CHECK(d.error().message.find("rm -r -- \"" + path + "\"") != std::string::npos);
  fs::remove_all(layout.manifest(key));
  REQUIRE(::mkfifo(layout.manifest(key).c_str(), 0644) == 0);
  auto f = rec.read();  // not opened: a FIFO's open waits for a writer
  REQUIRE_FALSE(f);
  CHECK(f.error().message.find("FIFO") != std::string::npos);
}

TEST_CASE("hostile/late values: a cache path a build's tools would split, a relative HOME", "[store]") {
  auto env_of = [](std::map<std::string, std::string> vars) -> GetEnv {
    return [vars](const std::string& n) -> std::optional<std::string> {
      auto it = vars.find(n);
      if (it == vars.end() || it->second.empty()) return std::nullopt;
      return it->second;
    };
  };
  for (std::string dir : {"/tmp/with space", "/tmp/new\nline", "/tmp/semi;colon", "/tmp/quo\"te", "/tmp/dol$lar"}) {
    INFO(dir);
    auto c = choose_cache_dir(fs::path(dir), env_of({}));
    REQUIRE_FALSE(c);
    CHECK(c.error().exit == Exit::bad_input);
  }
  auto home = choose_cache_dir(std::nullopt, env_of({{"HOME", "/home/a b"}}));
  REQUIRE_FALSE(home);
  CHECK(home.error().message.find("$HOME") != std::string::npos);
  CHECK(home.error().message.find("a space") != std::string::npos);
  auto rel = choose_cache_dir(std::nullopt, env_of({{"HOME", "relative/home"}}));
  REQUIRE_FALSE(rel);
  CHECK(rel.error().message.find("relative") != std::string::npos);
  CHECK(rel.error().message.find("not set") == std::string::npos);
  CHECK(choose_cache_dir(std::nullopt, env_of({{"HOME", "/home/user"}})));
}
