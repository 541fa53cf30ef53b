// Hostile input (issue 47) in core/: the rule for paths archbuild writes, the checked open of a
// file read back from the cache, and what a printed line can carry.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "core/path_kind.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
namespace fs = std::filesystem;

TEST_CASE("hostile/paths written: expect_writable_file takes nothing or a regular file, not what a link is",
          "[core]") {
  test::TempDir tmp;
  CHECK(paths::expect_writable_file(tmp / "absent", "--trace"));
  CHECK(paths::expect_writable_file(tmp / "no/such/folder/file", "--trace"));  // the writer makes the folders
  CHECK(paths::expect_writable_file(tmp.write("file", "x"), "--trace"));
  REQUIRE(::mkfifo((tmp / "fifo").c_str(), 0644) == 0);
  fs::create_symlink(tmp / "file", tmp / "link");
  fs::create_symlink(tmp / "nothing", tmp / "dangling");
  fs::create_directories(tmp / "dir");
  for (auto [p, says] : std::vector<std::pair<fs::path, std::string>>{{tmp / "fifo", "FIFO"},
                                                                     {tmp / "link", "symbolic link"},
                                                                     {tmp / "dangling", "symbolic link"},
                                                                     {tmp / "dir", "directory"},
                                                                     {"/dev/null", "character device"}}) {
    auto r = paths::expect_writable_file(p, "--trace");
    INFO(p.string());
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == Exit::bad_input);
    CHECK(r.error().message.find(says) != std::string::npos);
    CHECK(r.error().message.rfind("--trace \"", 0) == 0);
  }
}

TEST_CASE("hostile/cache records: a FIFO is never opened for reading, a hash of one fails at once", "[core]") {
  test::TempDir tmp;
  auto fifo = tmp / "wheel.whl";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  auto t0 = std::chrono::steady_clock::now();
  auto fd = paths::open_regular_file(fifo, "file");
  CHECK_FALSE(fd);
  auto h = sha256_file_hex(fifo);
  REQUIRE_FALSE(h);
  CHECK(h.error().message.find("FIFO") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  auto ok = paths::open_regular_file(tmp.write("f", "abc"), "file");
  REQUIRE(ok);
  ::close(*ok);
  CHECK(*sha256_file_hex(tmp / "f") == sha256_hex("abc"));
}

TEST_CASE("hostile/printed: a line carries no control character, newline or bidi control raw", "[core]") {
  CHECK(text::one_line("a\x1b[31mred") == "a\\x1b[31mred");
  CHECK(text::one_line("x\nwould stop: fake") == "x\\nwould stop: fake");
  CHECK(text::one_line("name\u202eevil") == "name\\u{202e}evil");
  CHECK(text::one_line("\u2067x\u2069\u200f\u061c") == "\\u{2067}x\\u{2069}\\u{200f}\\u{061c}");
  CHECK(text::one_line("caf\u00e9 \u2192 ok") == "caf\u00e9 \u2192 ok");  // text passes whole
  CHECK(text::quoted("a\u202eb") == "\"a\\u{202e}b\"");
  CHECK(text::printable("two\nlines") == "two\nlines");
  std::string long_line(10000, 'x');
  CHECK(text::one_line(long_line) == long_line);  // uncut
}
