// recipe/: [[patch]] tables — the file beside the recipe, its sha256 checked when loaded, strip,
// from, `when` conditions — inherited along `extends`, and `--patch FILE` (patch_from_file).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "core/sha256.hpp"
#include "recipe/recipe.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;

namespace {

const char* kRecipe = R"(package = "demo"
module = "demo"
version = "2.6.0"
cuda = ["12.8"]
python = ["3.11"]

[source]
url = "https://example.com/demo.git"
tag = "v2.6.0"

[build]
driver = "setup-py"
)";

const char* kDiff = "--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-a\n+b\n";

}  // namespace

TEST_CASE("[[patch]]: file beside the recipe, sha256, strip, from and when", "[recipe][patch]") {
  test::TempDir tmp;
  tmp.write("patches/fix.patch", kDiff);
  std::string sha = sha256_hex(kDiff);
  auto path = tmp.write("r.toml", std::string(kRecipe) + R"(
[[patch]]
file = "patches/fix.patch"
sha256 = ")" + sha + R"("
strip = 1
from = "pytorch/pytorch#185933"
when = { torch = ">=2.5, <2.7", cuda = ">=12.8", platform = ["sbsa"], arch = ["12.1"] }
)");
  auto r = recipe::load_file(path, recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
  REQUIRE(r);
  REQUIRE(r->patches.size() == 1);
  const auto& p = r->patches[0];
  CHECK(p.file == tmp / "patches/fix.patch");
  CHECK(p.sha256 == sha);
  CHECK(p.from == "pytorch/pytorch#185933");
  REQUIRE(p.when.torch);
  CHECK(p.when.torch->contains(*Version::parse("2.6.0")));
  CHECK_FALSE(p.when.torch->contains(*Version::parse("2.7.0")));
  CHECK(p.when.cuda->contains(*Version::parse("13.0")));
  CHECK(p.when.platform == std::vector<std::string>{"sbsa"});
  CHECK(p.when.arch.at(0) == *Version::parse("12.1"));
  CHECK(recipe::read_patch(p).value() == kDiff);
}

TEST_CASE("[[patch]]: a file whose sha256 differs is refused when the recipe loads, and when read again", "[recipe][patch]") {
  test::TempDir tmp;
  tmp.write("fix.patch", kDiff);
  auto path = tmp.write("r.toml", std::string(kRecipe) + "\n[[patch]]\nfile = \"fix.patch\"\nsha256 = \"" +
                                      std::string(64, '0') + "\"\nfrom = \"x\"\n");
  auto r = recipe::load_file(path, recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == Exit::bad_input);
  CHECK(r.error().message.find("r.toml:") != std::string::npos);
  CHECK(r.error().message.find("the file's sha256 is " + sha256_hex(kDiff)) != std::string::npos);

  // Changed after loading: read_patch refuses it, naming both hashes.
  auto user = recipe::patch_from_file(tmp / "fix.patch");
  REQUIRE(user);
  tmp.write("fix.patch", std::string(kDiff) + " \n");
  auto again = recipe::read_patch(*user);
  REQUIRE_FALSE(again);
  CHECK(again.error().exit == Exit::bad_input);
  CHECK(again.error().message.find(sha256_hex(kDiff)) != std::string::npos);

  // Missing key, bad range, missing file: each a line of its own.
  auto bad = [&](const std::string& table) {
    auto p = tmp.write("b.toml", std::string(kRecipe) + "\n[[patch]]\n" + table);
    auto l = recipe::load_file(p, recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
    REQUIRE_FALSE(l);
    return l.error().message;
  };
  std::string good_sha = sha256_hex(std::string(kDiff) + " \n");
  CHECK(bad("file = \"fix.patch\"\nfrom = \"x\"\n").find("sha256") != std::string::npos);
  CHECK(bad("file = \"fix.patch\"\nsha256 = \"" + good_sha + "\"\nfrom = \"x\"\nwhen = { torch = \"newest\" }\n")
            .find("is not a version range") != std::string::npos);
  CHECK(bad("file = \"nope.patch\"\nsha256 = \"" + good_sha + "\"\nfrom = \"x\"\n").find("no such file") != std::string::npos);
  CHECK(bad("file = \"fix.patch\"\nsha256 = \"" + good_sha + "\"\n").find("from") != std::string::npos);
}

TEST_CASE("[[patch]] along extends: the base's first, each file relative to its own recipe", "[recipe][patch]") {
  test::TempDir tmp;
  tmp.write("base/one.patch", kDiff);
  tmp.write("two.patch", std::string(kDiff) + "\n");
  tmp.write("base/common.toml", "abstract = true\n\n[[patch]]\nfile = \"one.patch\"\nsha256 = \"" + sha256_hex(kDiff) +
                                    "\"\nfrom = \"base\"\n");
  std::string child = std::string("extends = \"base/common.toml\"\n") + kRecipe + "\n[[patch]]\nfile = \"two.patch\"\nsha256 = \"" +
                      sha256_hex(std::string(kDiff) + "\n") + "\"\nfrom = \"child\"\n";
  auto r = recipe::load_file(tmp.write("child.toml", child), recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
  REQUIRE(r);
  REQUIRE(r->patches.size() == 2);
  CHECK(r->patches[0].file == tmp / "base/one.patch");
  CHECK(r->patches[0].from == "base");
  CHECK(r->patches[0].origin == (tmp / "base/common.toml").string());
  CHECK(r->patches[1].origin == (tmp / "child.toml").string());
  CHECK(r->patches[1].file == tmp / "two.patch");
  // A recipe without [[patch]] inherits the base's unchanged.
  auto plain = recipe::load_file(tmp.write("plain.toml", std::string("extends = \"base/common.toml\"\n") + kRecipe),
                                 recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
  REQUIRE(plain);
  CHECK(plain->patches.size() == 1);
}

TEST_CASE("patch_from_file, for --patch FILE: a regular file, else one line naming what is there", "[recipe][patch]") {
  test::TempDir tmp;
  auto p = recipe::patch_from_file(tmp.write("mine.patch", kDiff));
  REQUIRE(p);
  CHECK(p->origin == "--patch");
  CHECK(p->strip == 1);
  CHECK(p->sha256 == sha256_hex(kDiff));
  REQUIRE(::mkfifo((tmp / "fifo").c_str(), 0600) == 0);
  for (const auto& [path, words] : std::vector<std::pair<std::filesystem::path, std::string>>{
           {tmp / "fifo", "FIFO"}, {tmp.path(), "directory"}, {tmp / "missing.patch", "no such file"}}) {
    auto e = recipe::patch_from_file(path);
    REQUIRE_FALSE(e);
    CHECK(e.error().exit == Exit::bad_input);
    CHECK(e.error().message.find("--patch") == 0);
    CHECK(e.error().message.find(words) != std::string::npos);
    CHECK(e.error().message.find('\n') == std::string::npos);
  }
}

TEST_CASE("VersionRange: comparisons joined by ','", "[recipe][patch]") {
  auto r = recipe::VersionRange::parse(">=2.5, <2.7").value();
  CHECK(r.contains(*Version::parse("2.5")));
  CHECK(r.contains(*Version::parse("2.6.1")));
  CHECK_FALSE(r.contains(*Version::parse("2.7.0")));
  CHECK(recipe::VersionRange::parse("12.8")->contains(*Version::parse("12.8.0")));
  CHECK_FALSE(recipe::VersionRange::parse("=>2"));
  CHECK_FALSE(recipe::VersionRange::parse(""));
}
