// What the command line itself is given: an empty value (never "not given"), a list with an empty
// item, a driver version with four numbers, a name with a control character, and usage errors
// under --json (one document on stdout, as for every other failure). None of these needs a
// toolkit or a GPU: each is refused while the options are read.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

const std::string kRecipe = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";

}  // namespace

TEST_CASE("no option takes an empty value: exit 2 naming it, nothing made", "[cli][inputs]") {
  struct Case {
    std::string option;             // what the message names
    std::vector<std::string> argv;  // with "" where the value goes
  };
  const std::vector<Case> cases = {
      {"--out", {"wheel", "--sm", "90", "--recipe", kRecipe, "--out", ""}},
      {"--mirror", {"publish", "W.whl", "--mirror", ""}},
      {"--platform", {"resolve", "--sm", "90", "--platform", ""}},
      {"--platform", {"plan", "--sm", "90", "--platform", ""}},
      {"--platform", {"wheel", "--sm", "90", "--platform", ""}},
      {"--platform", {"install-command", "--sm", "90", "--platform", ""}},
      {"--platform", {"doctor", "--platform", ""}},
      {"--jetpack", {"install-command", "--sm", "87", "--jetpack", ""}},
      {"--cache-dir", {"--cache-dir", "", "resolve", "--sm", "90"}},
      {"--recipe", {"resolve", "--sm", "90", "--recipe", ""}},
      {"--trace", {"report", "0123456789abcdef", "--trace", ""}},
      {"--trace", {"wheel", "--sm", "90", "--trace", ""}},
      {"--constraints", {"env", "--sm", "90", "--constraints", ""}},
      {"--python", {"resolve", "--sm", "90", "--python", ""}},
      {"--python", {"wheel", "--sm", "90", "--python", ""}},
      {"--cuda", {"resolve", "--sm", "90", "--cuda", ""}},
      {"--torch", {"resolve", "--sm", "90", "--torch", ""}},
      {"--driver", {"install-command", "--sm", "90", "--driver", ""}},
      {"--memory-budget", {"plan", "--sm", "90", "--memory-budget", ""}},
      {"--source", {"plan", "--sm", "90", "--source", ""}},
      {"--store-sign-key", {"wheel", "--sm", "90", "--store", "oci://127.0.0.1:1/x", "--store-sign-key", ""}},
      {"--sm", {"resolve", "--sm", ""}},
      {"WHEEL", {"validate", "", "--sm", "90"}},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(archbuild::text::join(c.argv, " ")) {
      t::TempDir work;
      t::RunOptions o;
      o.cwd = work.path();  // "" would be the current directory: nothing may appear in it
      o.env["XDG_CACHE_HOME"] = (work / "xdg").string();
      o.unset_env = {"ARCHBUILD_CACHE_DIR"};
      o.timeout = std::chrono::seconds(120);
      auto r = t::archbuild(c.argv, o);
      INFO("stderr: " << r.err);
      CHECK(r.status == 2);
      CHECK(has(r.err, c.option + ": the value is empty"));
      CHECK(r.out.empty());
      CHECK(names_in(work.path()).empty());
    }
  }
}

TEST_CASE("wheel --python with an empty item is bad input, not the default interpreter", "[cli][inputs]") {
  for (const std::string list : {",", "3.11,,", ",3.12"}) {
    INFO("--python " << list);
    auto r = t::archbuild({"wheel", "--sm", "90", "--recipe", kRecipe, "--python", list});
    CHECK(r.status == 2);
    CHECK(has(r.err, "an empty item"));
    CHECK_FALSE(has(r.err, "[1/"));
  }
}

TEST_CASE("plan with an empty item or spaces in --with is bad input, not a shorter list", "[cli][inputs]") {
  for (const std::string list : {"torchvision,,", ",torchvision", "torchvision, torchaudio"}) {
    INFO("--with " << list);
    auto r = t::archbuild({"plan", "--sm", "90", "--with", list});
    CHECK(r.status == 2);
    CHECK((has(r.err, "an empty item") || has(r.err, "spaces around a name")));
  }
}

TEST_CASE("inspect and validate: --sm takes one list per use, a path after it stays a path", "[cli][inputs]") {
  // Before: `inspect --sm 90 lib.so` read lib.so as a second --sm value ("invalid architecture").
  const std::string so = std::string(ARCHBUILD_SOURCE_DIR) + "/tests/data/binaries/lz4.so";
  auto r = t::archbuild({"inspect", "--sm", "86", so});
  INFO(r.err);
  CHECK(r.status != 2);
  CHECK_FALSE(has(r.err, "invalid architecture"));
  auto v = t::archbuild({"validate", "--sm", "90", "/nonexistent/x.whl"});
  CHECK(v.status == 2);
  CHECK_FALSE(has(v.err, "invalid architecture"));
  CHECK(has(v.err, "x.whl"));
}

TEST_CASE("a --driver with four numbers is no driver version", "[cli][inputs]") {
  auto r = t::archbuild({"install-command", "--sm", "90", "--driver", "570.86.15.1"});
  CHECK(r.status == 2);
  CHECK(has(r.err, "--driver: 570.86.15.1 has 4 numbers"));
}

TEST_CASE("a control character in --gpu is escaped in the one error line", "[cli][inputs]") {
  auto r = t::archbuild({"install-command", "--gpu", "evil\nline2\x1b[31m"});
  CHECK(r.status == 2);
  INFO(r.err);
  auto first = r.err.substr(0, r.err.find('\n'));
  CHECK(has(first, R"("evil\nline2\x1b[31m")"));
  CHECK_FALSE(has(r.err, "\nline2"));  // no line of the message starts with what followed the newline
  CHECK_FALSE(has(r.err, "\x1b"));
}

TEST_CASE("usage errors under --json print one document with error and exit", "[cli][inputs]") {
  const std::vector<std::vector<std::string>> cases = {
      {"--json", "wheel"},                                // a required option missing
      {"--json", "resolve", "--sm", "90", "--bogus"},     // an unknown option
      {"--json", "report"},                               // a required argument missing
      {"--json", "gpus", "a", "b", "c"},                  // too many arguments
      {"resolve", "--json", "--sm", ""},                  // an empty value (per-command --json)
      {"--json", "install-command", "--driver", "1.2.3.4"},
  };
  for (const auto& argv : cases) {
    DYNAMIC_SECTION(archbuild::text::join(argv, " ")) {
      auto r = t::archbuild(argv);
      INFO("stdout: " << r.out << "\nstderr: " << r.err);
      CHECK(r.status == 2);
      auto doc = json::parse(r.out, nullptr, false);
      REQUIRE_FALSE(doc.is_discarded());
      CHECK(doc["exit"] == 2);
      REQUIRE(doc["error"].is_string());
      CHECK_FALSE(doc["error"].get<std::string>().empty());
    }
  }
  // Without --json stdout stays empty.
  auto plain = t::archbuild({"wheel"});
  CHECK(plain.status == 2);
  CHECK(plain.out.empty());
}

// docs/commands.md: wheel's failure document is {"ok": false, "key", "error", "exit"}, also when it
// stops before the plan (the key then null).
TEST_CASE("wheel --json stopped before any build: ok false, key null, error and exit", "[cli][inputs]") {
  t::TempDir work;
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"wheel", "--sm", "9.5", "--json"},
        std::vector<std::string>{"wheel", "--sm", "90", "--recipe", (work / "nope.toml").string(), "--json"}}) {
    auto r = t::archbuild(argv);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 2);
    auto doc = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(doc.is_discarded());
    CHECK(doc["ok"] == false);
    CHECK(doc.contains("key"));
    CHECK(doc["key"].is_null());
    CHECK(doc["exit"] == 2);
    CHECK(doc["error"].is_string());
  }
}
