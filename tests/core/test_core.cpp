// core: strict TOML, text helpers, sha256, Result.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "core/toml_load.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;

TEST_CASE("text helpers", "[core]") {
  CHECK(text::split_any("a;b, c;;", ";, ") == std::vector<std::string>{"a", "b", "c"});
  CHECK(text::trim("  x y \n") == "x y");
  CHECK(text::edit_distance("Hoper", "Hopper") == 1);
  CHECK(text::edit_distance("", "abc") == 3);
  CHECK(text::nearest("Hoper", {"Hopper", "Kepler", "Ampere"}) == std::vector<std::string>{"Hopper"});
  CHECK(text::nearest("zzzzzz", {"Hopper"}).empty());
  CHECK(text::equals_icase("NVIDIA", "nvidia"));
  CHECK(text::join({"a", "b"}, ", ") == "a, b");
}

TEST_CASE("text::quoted: a user's string in an error is quoted, escaped and bounded", "[core]") {
  CHECK(text::quoted("sm_90") == "\"sm_90\"");
  CHECK(text::quoted("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(text::quoted("\x1b[31mred\n") == "\"\\x1b[31mred\\n\"");
  CHECK(text::quoted("caf\xc3\xa9") == "\"caf\xc3\xa9\"");          // UTF-8 passes
  // ("\x9b" "2J": a hex escape takes every hex digit that follows, \x9b2 would be one char)
  CHECK(text::quoted("\xc2\x9b" "2J") == "\"\\xc2\\x9b2J\"");       // a C1 CSI does not
  CHECK(text::quoted("\xff\xfe") == "\"\\xff\\xfe\"");              // bytes that are not UTF-8
  std::string big(100000, 'x');
  auto q = text::quoted(big);
  CHECK(q.size() < 260);
  CHECK(q.find("99800 more bytes") != std::string::npos);
  // Every byte value: the result holds no control character at all.
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (unsigned char c : text::quoted(all, 1000)) CHECK((c >= 0x20 && c != 0x7f));
}

TEST_CASE("text::printable: a whole message line, escaped and bounded, newlines kept", "[core]") {
  CHECK(text::printable("plain \"text\"") == "plain \"text\"");
  CHECK(text::printable("a\nb") == "a\nb");
  CHECK(text::printable("\x1b]0;owned\x07\r") == "\\x1b]0;owned\\x07\\r");
  std::string big(100000, 'x');
  CHECK(text::printable(big).size() < 4200);
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (unsigned char c : text::printable(all)) CHECK(((c >= 0x20 && c != 0x7f) || c == '\n'));
}

TEST_CASE("sha256 of known vectors", "[core]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  test::TempDir t;
  auto p = t.write("f", "abc");
  CHECK(sha256_file_hex(p).take() == sha256_hex("abc"));
  CHECK_FALSE(sha256_file_hex(t / "missing").ok());
}

TEST_CASE("Result carries a value or an error with its exit status", "[core]") {
  Result<int> ok = 3;
  CHECK(ok.ok());
  CHECK(*ok == 3);
  Result<int> bad = Error::missing_tool("no nvcc");
  CHECK_FALSE(bad.ok());
  CHECK(bad.error().exit == Exit::missing_tool);
  CHECK_THROWS_AS(std::move(bad).take(), Failure);
}

TEST_CASE("Error: a kind to decide by and a context chain in front of the message", "[core]") {
  Error plain = Error::bad_input("no such recipe");
  CHECK(plain.kind == ErrorKind::general);
  CHECK(plain.context.empty());
  CHECK(plain.reason() == "no such recipe");
  // Aggregate construction as every module writes it still works, with the defaults.
  Error old{Exit::missing_tool, "nvcc: not found"};
  CHECK(old.kind == ErrorKind::general);
  CHECK(old.reason() == "nvcc: not found");

  Error e = Error::missing_tool("not found or not executable").with_context("python3.11").with_kind(ErrorKind::cannot_start);
  CHECK(e.message == "python3.11: not found or not executable");
  CHECK(e.exit == Exit::missing_tool);
  CHECK(e.kind == ErrorKind::cannot_start);
  CHECK(e.context == std::vector<std::string>{"python3.11"});
  CHECK(e.reason() == "not found or not executable");
  // Outermost first; the words below any context stay what they were.
  const Error outer = e.with_context("--python");
  CHECK(outer.message == "--python: python3.11: not found or not executable");
  CHECK(outer.context == std::vector<std::string>{"--python", "python3.11"});
  CHECK(outer.reason() == "not found or not executable");
  CHECK(e.context.size() == 1);  // the const& form copies
  // A message extended after its context keeps its reason's tail.
  Error more = Error::bad_input("bad value").with_context("r.toml");
  more.message += " (set it here)";
  CHECK(more.reason() == "bad value (set it here)");
}

TEST_CASE("strict TOML: syntax errors give file:line:column", "[core][toml]") {
  auto r = tomlx::parse_string("a = 1\nb = [1,\n", "x.toml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.rfind("x.toml:", 0) == 0);
  CHECK(r.error().exit == Exit::bad_input);
  test::TempDir t;
  CHECK(tomlx::parse_file(t / "nope.toml").error().message.find("no such file") != std::string::npos);
}

TEST_CASE("strict TOML: wrong types, missing keys and unknown keys", "[core][toml]") {
  auto tbl = tomlx::parse_string("name = \"x\"\ncount = \"7\"\nlist = [1]\nnmae = 2\n", "r.toml").take();
  {
    tomlx::TableReader r(tbl, "r.toml", "recipe");
    CHECK(r.string("name", true) == std::optional<std::string>("x"));
    CHECK_FALSE(r.integer("count").has_value());
    auto e = r.finish();
    REQUIRE(e);
    CHECK(e->message.find("r.toml:2:9") != std::string::npos);
    CHECK(e->message.find("must be an integer") != std::string::npos);
  }
  {
    tomlx::TableReader r(tbl, "r.toml", "recipe");
    r.string("name");
    r.string("count");
    CHECK_FALSE(r.strings("list").has_value());
    auto e = r.finish();
    REQUIRE(e);
    CHECK(e->message.find("only strings") != std::string::npos);
  }
  {
    tomlx::TableReader r(tbl, "r.toml", "recipe");
    r.string("name");
    r.string("count");
    r.node("list");
    auto e = r.finish();
    REQUIRE(e);
    CHECK(e->message.find("r.toml:4:1") != std::string::npos);
    CHECK(e->message.find("unknown key 'nmae'") != std::string::npos);
    CHECK(e->message.find("did you mean 'name'") != std::string::npos);
  }
  {
    tomlx::TableReader r(tbl, "r.toml", "recipe");
    r.string("missing", true);
    auto e = r.finish();
    REQUIRE(e);
    CHECK(e->message.find("missing required key 'missing'") != std::string::npos);
    CHECK(e->kind == ErrorKind::missing_key);
  }
}
