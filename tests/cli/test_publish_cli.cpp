// `archbuild publish` end to end: the JSON it prints, immutability and exit statuses, two
// processes publishing at once, --verify, and the real pip installing from the mirror.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "mirror/make_wheel.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("publish prints one JSON document, the same file again is unchanged, another hash is exit 1",
          "[publish]") {
  test::TempDir tmp;
  auto w = test::make_wheel(tmp / "a", "Tiny_Pkg", "0.1.0+cu128.sm120", "tiny_pkg", "one");
  auto dir = (tmp / "mirror").string();
  auto r = test::archbuild({"publish", w.string(), "--mirror", dir, "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = json::parse(r.out);
  REQUIRE(j["files"].size() == 1);
  CHECK(j["files"][0]["status"] == "added");
  CHECK(j["files"][0]["project"] == "tiny-pkg");
  CHECK(j["files"][0]["sha256"].get<std::string>().size() == 64);
  CHECK(contains(j["index_url"].get<std::string>(), "file://"));

  auto again = test::archbuild({"publish", w.string(), "--mirror", dir, "--json"});
  REQUIRE(again.status == 0);
  CHECK(json::parse(again.out)["files"][0]["status"] == "unchanged");

  auto manifest = test::read_file(fs::path(dir) / "manifest.json");
  auto page = test::read_file(fs::path(dir) / "simple" / "tiny-pkg" / "index.html");
  auto other = test::make_wheel(tmp / "b", "Tiny_Pkg", "0.1.0+cu128.sm120", "tiny_pkg", "two");
  auto refused = test::archbuild({"publish", other.string(), "--mirror", dir});
  CHECK(refused.status == 1);
  CHECK(contains(refused.err, "immutable"));
  CHECK(test::read_file(fs::path(dir) / "manifest.json") == manifest);
  CHECK(test::read_file(fs::path(dir) / "simple" / "tiny-pkg" / "index.html") == page);
  CHECK(test::read_file(fs::path(dir) / "files" / w.filename()) == test::read_file(w));

  auto bad = test::archbuild({"publish", (tmp / "missing-1.0-py3-none-any.whl").string(), "--mirror", dir});
  CHECK(bad.status == 2);
  auto none = test::archbuild({"publish", "--mirror", dir});
  CHECK(none.status == 2);
}

TEST_CASE("two processes publishing at once are serialised by the lock", "[publish]") {
  test::TempDir tmp;
  auto dir = (tmp / "mirror").string();
  std::vector<std::string> a = {"publish"}, b = {"publish"};
  for (int i = 0; i < 8; ++i) {
    a.push_back(test::make_wheel(tmp / "a", "alpha", "1." + std::to_string(i), "alpha").string());
    b.push_back(test::make_wheel(tmp / "b", "beta", "1." + std::to_string(i), "beta").string());
  }
  for (auto* v : {&a, &b}) {
    v->push_back("--mirror");
    v->push_back(dir);
  }
  test::Background pa(ARCHBUILD_EXE, a), pb(ARCHBUILD_EXE, b);
  auto ra = pa.wait(), rb = pb.wait();
  INFO(ra.err << rb.err);
  CHECK(ra.status == 0);
  CHECK(rb.status == 0);
  auto m = json::parse(test::read_file(fs::path(dir) / "manifest.json"));
  CHECK(m["files"].size() == 16);  // neither publish lost the other's entries
  auto root = test::read_file(fs::path(dir) / "simple" / "index.html");
  CHECK(contains(root, "alpha/"));
  CHECK(contains(root, "beta/"));
  auto v = test::archbuild({"publish", "--verify", "--mirror", dir, "--json"});
  INFO(v.out);
  CHECK(v.status == 0);
  CHECK(json::parse(v.out)["ok"] == true);
}

TEST_CASE("publish --verify finds a tampered file (exit 1)", "[publish]") {
  test::TempDir tmp;
  auto w = test::make_wheel(tmp / "a", "pkg", "1.0", "pkg");
  auto dir = (tmp / "mirror").string();
  REQUIRE(test::archbuild({"publish", w.string(), "--mirror", dir}).status == 0);
  REQUIRE(test::archbuild({"publish", "--verify", "--mirror", dir}).status == 0);
  std::ofstream(fs::path(dir) / "files" / w.filename(), std::ios::app) << "tampered";
  auto r = test::archbuild({"publish", "--verify", "--mirror", dir, "--json"});
  CHECK(r.status == 1);
  auto j = json::parse(r.out);
  CHECK(j["ok"] == false);
  REQUIRE(j["problems"].size() == 1);
  CHECK(j["problems"][0]["kind"] == "hash-mismatch");
  CHECK(j["problems"][0]["file"] == w.filename().string());
  auto human = test::archbuild({"publish", "--verify", "--mirror", dir});
  CHECK(human.status == 1);
  CHECK(contains(human.out, "hash-mismatch"));
  CHECK(test::archbuild({"publish", "--verify", "--mirror", (tmp / "nothing").string()}).status == 2);
}

TEST_CASE("the real pip installs from the mirror", "[publish][pip]") {
  const std::string python = "/usr/bin/python3";
  if (!fs::exists(python) || test::run(python, {"-c", "import venv, ensurepip"}).status != 0) {
    WARN("##archbuild-skip## /usr/bin/python3 has no venv/ensurepip");
    return;
  }
  test::TempDir tmp;
  auto venv = tmp / "venv";
  auto made = test::run(python, {"-m", "venv", venv.string()}, {.timeout = std::chrono::seconds(300)});
  if (made.status != 0 || !fs::exists(venv / "bin" / "pip")) {
    WARN("##archbuild-skip## python3 -m venv could not make a venv with pip: " << made.err);
    return;
  }
  auto dir = tmp / "mirror";
  auto w1 = test::make_wheel(tmp / "in", "Tiny_Pkg", "0.1.0+cu128.sm120", "tiny_pkg", "sm120 build");
  auto w0 = test::make_wheel(tmp / "in", "Tiny_Pkg", "0.1.0+cu128.sm90", "tiny_pkg", "sm90 build");
  REQUIRE(test::archbuild({"publish", w0.string(), w1.string(), "--mirror", dir.string()}).status == 0);

  // file:// index only: pip reads nothing but the mirror (no network). The name is asked in
  // another spelling to exercise PEP 503 normalisation.
  test::RunOptions opts;
  opts.timeout = std::chrono::seconds(300);
  opts.env = {{"PIP_DISABLE_PIP_VERSION_CHECK", "1"}, {"PIP_NO_CACHE_DIR", "1"}, {"PIP_CONFIG_FILE", "/dev/null"}};
  auto pip = test::run((venv / "bin" / "pip").string(),
                       {"install", "--index-url", "file://" + (dir / "simple").string(), "tiny.pkg==0.1.0+cu128.sm120"},
                       opts);
  INFO(pip.out << pip.err);
  REQUIRE(pip.status == 0);
  auto imported = test::run((venv / "bin" / "python").string(), {"-c", "import tiny_pkg; print(tiny_pkg.VALUE)"});
  CHECK(imported.status == 0);
  CHECK(imported.out == "sm120 build\n");
  auto show = test::run((venv / "bin" / "pip").string(), {"show", "tiny-pkg"}, opts);
  CHECK(contains(show.out, "Version: 0.1.0+cu128.sm120"));

  // A tampered file is refused by pip's own hash check (the #sha256= fragment).
  std::ofstream(dir / "files" / w0.filename(), std::ios::app) << "tampered";
  auto bad = test::run((venv / "bin" / "pip").string(),
                       {"install", "--force-reinstall", "--index-url", "file://" + (dir / "simple").string(),
                        "tiny-pkg==0.1.0+cu128.sm90"},
                       opts);
  CHECK(bad.status != 0);
  CHECK(contains(bad.out + bad.err, "HASH"));
}
