// `archbuild publish` end to end: the JSON it prints, immutability and exit statuses, two
// processes publishing at once, --verify, and the real pip installing from the mirror.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <thread>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "binary/builders.hpp"
#include "mirror/make_wheel.hpp"
#include "support/process.hpp"
#include "support/registry.hpp"
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

namespace {

// Lines on stderr (the one error line, and nothing else).
std::size_t lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Every file under `dir` with its content ("" when dir does not exist).
std::map<std::string, std::string> files_under(const fs::path& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != ".lock")
      out[fs::relative(e.path(), dir).string()] = test::read_file(e.path());
  return out;
}

}  // namespace

// Each way a file named like a wheel can fail to be one: publish refuses it (exit 2, one line
// naming the file) before the mirror is touched, so the name stays free for the right wheel.
TEST_CASE("publish refuses what validate's structure checks refuse, and the name stays free", "[publish]") {
  using test::Members;
  const std::string dist = "pkg", version = "1.0", di = "pkg-1.0.dist-info/";
  const std::string file = "pkg-1.0-py3-none-any.whl";
  auto good = test::wheel_members(dist, version, "pkg");
  auto rewrite_record = [&](Members m) {  // RECORD made to match whatever the members now are
    std::string record;
    for (const auto& [name, content] : m) {
      if (name == di + "RECORD") continue;
      Sha256 h;
      h.update(content);
      record += name + "," + validate::record_hash(h.raw()) + "," + std::to_string(content.size()) + "\n";
    }
    record += di + "RECORD,,\n";
    for (auto& [name, content] : m)
      if (name == di + "RECORD") content = record;
    return m;
  };
  auto with = [&](std::string name, std::string content) {
    auto m = good;
    m.insert(m.begin(), {std::move(name), std::move(content)});
    return rewrite_record(m);
  };
  struct Bad {
    const char* what;
    std::function<void(const fs::path&)> write;
    const char* says;  // part of the error line
  };
  std::vector<Bad> bad = {
      {"random bytes", [](const fs::path& p) { std::ofstream(p, std::ios::binary) << std::string("\x13\x37 not a zip at all\xff", 22); },
       "not a readable zip"},
      {"an empty file", [](const fs::path& p) { std::ofstream(p, std::ios::binary).flush(); }, "an empty file"},
      {"a zip cut in half",
       [&](const fs::path& p) {
         auto whole = p.parent_path() / "whole.zip";
         test::write_zip(whole, good);
         auto bytes = test::read_file(whole);
         std::ofstream(p, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
       },
       ""},  // the reader fails where the cut falls: a member, RECORD, the central directory
      {"a zip short of its last 10 bytes (its end record)",
       [&](const fs::path& p) {
         auto whole = p.parent_path() / "whole.zip";
         test::write_zip(whole, good);
         auto bytes = test::read_file(whole);
         std::ofstream(p, std::ios::binary) << bytes.substr(0, bytes.size() - 10);
       },
       "its central directory cannot be found"},
      {"a zip whose end record points a byte before its central directory",
       [&](const fs::path& p) {
         auto whole = p.parent_path() / "whole.zip";
         test::write_zip(whole, good);
         auto bytes = test::read_file(whole);
         auto end = bytes.rfind(std::string("PK\x05\x06", 4));
         REQUIRE(end != std::string::npos);
         std::uint32_t at = 0;
         std::memcpy(&at, bytes.data() + end + 16, 4);  // little-endian, as this host
         --at;
         std::memcpy(bytes.data() + end + 16, &at, 4);
         std::ofstream(p, std::ios::binary) << bytes;
       },
       "its central directory cannot be read"},
      {"an absolute member", [&](const fs::path& p) { test::write_zip(p, with("/etc/evil", "x")); }, "escapes the wheel root"},
      {"a member with ..", [&](const fs::path& p) { test::write_zip(p, with("../evil.py", "x")); }, "escapes the wheel root"},
      {"a member RECORD does not list",
       [&](const fs::path& p) {
         auto m = good;
         m.insert(m.begin(), {"pkg/extra.py", "x = 1\n"});
         test::write_zip(p, m);
       },
       "not in RECORD"},
      {"a member whose hash RECORD contradicts",
       [&](const fs::path& p) {
         auto m = good;
         m[0].second = "VALUE = \"changed\"\n";
         test::write_zip(p, m);
       },
       "hash mismatch"},
      {"METADATA naming another project",
       [&](const fs::path& p) {
         auto m = good;
         m[1].second = "Metadata-Version: 2.1\nName: other\nVersion: 1.0\n";
         test::write_zip(p, rewrite_record(m));
       },
       "METADATA Name"},
      {"no .dist-info folder", [&](const fs::path& p) { test::write_zip(p, {{"pkg/__init__.py", ""}}); }, "dist-info"},
  };
  for (const auto& b : bad) {
    DYNAMIC_SECTION(b.what) {
      test::TempDir tmp;
      fs::create_directories(tmp / "in");
      auto w = tmp / "in" / file;
      b.write(w);
      auto dir = tmp / "mirror";
      auto r = test::archbuild({"publish", w.string(), "--mirror", dir.string()});
      INFO(r.err);
      CHECK(r.status == 2);
      CHECK(contains(r.err, b.says));
      CHECK(contains(r.err, w.string()));
      CHECK(lines(r.err) == 1);
      CHECK(files_under(dir).empty());  // nothing written
      auto j = test::archbuild({"publish", w.string(), "--mirror", dir.string(), "--json"});
      CHECK(j.status == 2);
      auto doc = json::parse(j.out);
      CHECK(doc["exit"] == 2);
      CHECK(contains(doc["error"].get<std::string>(), b.says));
      // The right wheel still takes the name.
      auto right = test::make_wheel(tmp / "right", dist, version, "pkg");
      auto ok = test::archbuild({"publish", right.string(), "--mirror", dir.string(), "--json"});
      INFO(ok.err);
      REQUIRE(ok.status == 0);
      CHECK(json::parse(ok.out)["files"][0]["status"] == "added");
    }
  }
}

TEST_CASE("publish refuses a library for another machine than the platform tag's", "[publish]") {
  // An x86-64 library under an aarch64 tag would install there and fail at import: it must
  // not take the name. The same bytes under their own machine's tag are published.
  auto wheel = [](const fs::path& dir, const std::string& platform) {
    const std::string di = "pkg-1.0.dist-info/";
    test::Members m = {{"pkg/__init__.py", ""},
                       {"pkg/libk.so", test::elf({{".text", std::string(32, '\xc3'), 1, 0x6}})},  // x86-64
                       {di + "METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n"},
                       {di + "WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-" + platform + "\n"}};
    std::string record;
    for (const auto& [name, content] : m) {
      Sha256 h;
      h.update(content);
      record += name + "," + validate::record_hash(h.raw()) + "," + std::to_string(content.size()) + "\n";
    }
    m.emplace_back(di + "RECORD", record + di + "RECORD,,\n");
    auto path = dir / ("pkg-1.0-cp311-cp311-" + platform + ".whl");
    test::write_zip(path, m);
    return path;
  };
  test::TempDir tmp;
  auto mirror = tmp / "mirror";
  for (const char* tag : {"manylinux_2_34_aarch64", "linux_aarch64"}) {
    auto r = test::archbuild({"publish", wheel(tmp / "in", tag).string(), "--mirror", mirror.string()});
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(contains(r.err, std::string("platform-tag: pkg/libk.so is x86-64 ELF, but the tag ") + tag + " is for aarch64"));
    CHECK_FALSE(fs::exists(mirror / "files"));
  }
  auto ok = test::archbuild({"publish", wheel(tmp / "in", "manylinux_2_34_x86_64").string(), "--mirror", mirror.string()});
  INFO(ok.err);
  CHECK(ok.status == 0);
}

// The files in files/ are what was published: a manifest lost, put back from an older copy,
// damaged or replaced by something that is not a file never lets a publish replace one.
TEST_CASE("immutability holds from the files: a missing or damaged manifest never lets a file be replaced",
          "[publish]") {
  struct Damage {
    const char* what;
    std::function<void(const fs::path& dir, const std::string& older)> apply;
    int status;           // of publishing another wheel under the published name
    bool rebuilt;         // the manifest lists the file again afterwards
  };
  std::vector<Damage> damages = {
      {"manifest.json deleted", [](const fs::path& dir, const std::string&) { fs::remove(dir / "manifest.json"); }, 1,
       true},
      {"manifest.json put back from before the publish",
       [](const fs::path& dir, const std::string& older) { std::ofstream(dir / "manifest.json") << older; }, 1, true},
      {"manifest.json empty", [](const fs::path& dir, const std::string&) { std::ofstream(dir / "manifest.json").flush(); },
       1, false},
      {"manifest.json not JSON",
       [](const fs::path& dir, const std::string&) { std::ofstream(dir / "manifest.json") << "{\"format\": 1, \"fi"; }, 1,
       false},
      {"manifest.json a directory",
       [](const fs::path& dir, const std::string&) {
         fs::remove(dir / "manifest.json");
         fs::create_directory(dir / "manifest.json");
       },
       1, false},
      {"manifest.json a FIFO",
       [](const fs::path& dir, const std::string&) {
         fs::remove(dir / "manifest.json");
         REQUIRE(::mkfifo((dir / "manifest.json").c_str(), 0644) == 0);
       },
       1, false},
  };
  for (const auto& d : damages) {
    DYNAMIC_SECTION(d.what) {
      test::TempDir tmp;
      auto dir = tmp / "mirror";
      auto first = test::make_wheel(tmp / "first", "other", "2.0", "other");
      REQUIRE(test::archbuild({"publish", first.string(), "--mirror", dir.string()}).status == 0);
      auto older = test::read_file(dir / "manifest.json");
      auto w = test::make_wheel(tmp / "a", "pkg", "1.0", "pkg", "one");
      REQUIRE(test::archbuild({"publish", w.string(), "--mirror", dir.string()}).status == 0);
      auto published = test::read_file(dir / "files" / w.filename());
      d.apply(dir, older);

      auto other = test::make_wheel(tmp / "b", "pkg", "1.0", "pkg", "two");
      test::RunOptions quick;
      quick.timeout = std::chrono::seconds(60);  // a FIFO read would wait forever
      auto r = test::archbuild({"publish", other.string(), "--mirror", dir.string()}, quick);
      INFO(r.err);
      CHECK(r.status == d.status);
      CHECK(lines(r.err) == 1);
      CHECK(test::read_file(dir / "files" / w.filename()) == published);
      if (d.rebuilt) {
        CHECK(contains(r.err, "immutable"));
        // The same file again is unchanged, and the manifest lists both files again.
        auto same = test::archbuild({"publish", w.string(), "--mirror", dir.string(), "--json"}, quick);
        INFO(same.err);
        CHECK(same.status == 0);
        CHECK(json::parse(same.out)["files"][0]["status"] == "unchanged");
        auto m = json::parse(test::read_file(dir / "manifest.json"));
        CHECK(m["files"].contains(w.filename().string()));
        CHECK(m["files"].contains(first.filename().string()));
        auto v = test::archbuild({"publish", "--verify", "--mirror", dir.string()}, quick);
        INFO(v.out);
        CHECK(v.status == 0);
      } else {
        CHECK(contains(r.err, "manifest.json"));
      }
    }
  }
}

TEST_CASE("a file in files/ that the manifest does not match is not replaced either", "[publish]") {
  test::TempDir tmp;
  auto dir = tmp / "mirror";
  auto w = test::make_wheel(tmp / "a", "pkg", "1.0", "pkg", "one");
  REQUIRE(test::archbuild({"publish", w.string(), "--mirror", dir.string()}).status == 0);
  // files/ now holds another wheel under that name (the manifest still says the first).
  auto other = test::make_wheel(tmp / "b", "pkg", "1.0", "pkg", "two");
  fs::copy_file(other, dir / "files" / w.filename(), fs::copy_options::overwrite_existing);
  auto r = test::archbuild({"publish", w.string(), "--mirror", dir.string()});
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(contains(r.err, "immutable"));
  CHECK(test::read_file(dir / "files" / w.filename()) == test::read_file(other));
}

// ---- GPU views (docs/mirror.md) -------------------------------------------------------------

namespace {

// A wheel of `dist` whose package carries `so` (a shared object, device code or not) beside an
// __init__.py whose VALUE is the version: platform linux_x86_64, RECORD correct.
fs::path gpu_wheel(const fs::path& dir, const std::string& dist, const std::string& version, const std::string& so) {
  std::string di = dist + "-" + version + ".dist-info/";
  test::Members members = {
      {dist + "/__init__.py", "VALUE = \"" + version + "\"\n"},
      {di + "METADATA", "Metadata-Version: 2.1\nName: " + dist + "\nVersion: " + version + "\n"},
      {di + "WHEEL", "Wheel-Version: 1.0\nGenerator: archbuild-test\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"},
  };
  if (!so.empty()) members.emplace_back(dist + "/_C.so", so);
  std::string record;
  for (const auto& [name, content] : members) {
    Sha256 h;
    h.update(content);
    record += name + "," + validate::record_hash(h.raw()) + "," + std::to_string(content.size()) + "\n";
  }
  record += di + "RECORD,,\n";
  members.emplace_back(di + "RECORD", record);
  auto path = dir / (dist + "-" + version + "-py3-none-linux_x86_64.whl");
  test::write_zip(path, members);
  return path;
}

// A shared object whose .nv_fatbin holds SASS for `sass` and PTX for `ptx` (sm numbers).
std::string fake_device_code(std::vector<std::uint32_t> sass, std::vector<std::uint32_t> ptx = {}) {
  std::vector<test::Buf> entries;
  for (auto sm : sass) entries.push_back(test::entry({.sm = sm, .payload = test::cubin(sm)}));
  for (auto sm : ptx) entries.push_back(test::entry({.kind = 1, .sm = sm, .payload = test::Buf(16, 'x')}));
  return test::elf_with_fatbin(test::container(entries));
}

struct Pip {
  fs::path venv;
  test::RunOptions opts;
  // Why pip cannot be used here ("" when it can).
  std::string make(const fs::path& where) {
    const std::string python = "/usr/bin/python3";
    if (!fs::exists(python) || test::run(python, {"-c", "import venv, ensurepip"}).status != 0)
      return "/usr/bin/python3 has no venv/ensurepip";
    venv = where;
    auto made = test::run(python, {"-m", "venv", venv.string()}, {.timeout = std::chrono::seconds(300)});
    if (made.status != 0 || !fs::exists(venv / "bin" / "pip")) return "python3 -m venv could not make a venv with pip: " + made.err;
    opts.timeout = std::chrono::seconds(300);
    opts.env = {{"PIP_DISABLE_PIP_VERSION_CHECK", "1"}, {"PIP_NO_CACHE_DIR", "1"}, {"PIP_CONFIG_FILE", "/dev/null"}};
    return "";
  }
  // `pip download --no-deps` of `requirement` from `index` into a fresh folder: the file pip chose ("" on failure).
  std::string download(const std::string& index, const std::string& requirement, const fs::path& into) {
    fs::remove_all(into);
    auto r = test::run((venv / "bin" / "pip").string(),
                       {"download", "--no-deps", "--index-url", index, "-d", into.string(), requirement}, opts);
    if (r.status != 0) return "";
    for (const auto& e : fs::directory_iterator(into)) return e.path().string();
    return "";
  }
};

// tests/scripts/check_pep825.py on a mirror's variants: its status (77: no jsonschema) and output.
test::Ran check_pep825(const fs::path& mirror) {
  return test::run("/usr/bin/python3", {std::string(ARCHBUILD_SOURCE_DIR) + "/tests/scripts/check_pep825.py", mirror.string(),
                                        std::string(ARCHBUILD_TEST_DATA) + "/pep825/variant-schema-0.1.1.json"});
}

// The variant wheel PEP 825's ordering takes from the mirror for a host of `cc` whose driver runs
// CUDA `driver`, with the NVIDIA provider's supported values (check_pep825.py --select): its path,
// or "none".
std::string select_variant(const fs::path& mirror, const std::string& project, const std::string& version,
                           const std::string& cc, const std::string& driver) {
  auto r = test::run("/usr/bin/python3", {std::string(ARCHBUILD_SOURCE_DIR) + "/tests/scripts/check_pep825.py", "--select",
                                          mirror.string(), project, version, cc, driver});
  auto out = r.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// For each GPU: pip, pinned and unpinned, from its view gets the build `want` (a version), and
// `archbuild inspect --sm` says that file runs there.
void check_views(Pip& pip, const fs::path& mirror, const std::string& base, const std::map<std::string, std::string>& want) {
  for (const auto& [cc, version] : want) {
    std::string sm = cc;
    sm.erase(std::remove(sm.begin(), sm.end(), '.'), sm.end());
    for (const std::string req : {"minitorch==0.1.0", "minitorch"}) {
      INFO("CC " << cc << ": pip download " << req << " from " << base << "/gpu/sm_" << sm << "/simple");
      auto got = pip.download(base + "/gpu/sm_" + sm + "/simple", req, mirror.parent_path() / ("dl-" + sm));
      REQUIRE(!got.empty());
      CHECK(fs::path(got).filename().string() == "minitorch-" + version + "-py3-none-linux_x86_64.whl");
      auto inspected = test::archbuild({"inspect", "--sm", cc, got});
      INFO(inspected.out << inspected.err);
      CHECK(inspected.status == 0);
    }
  }
}

}  // namespace

TEST_CASE("GPU views: pip from each GPU's view gets a build that runs there, and install-command names it", "[publish][pip]") {
  test::TempDir tmp;
  Pip pip;
  if (auto why = pip.make(tmp / "venv"); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  auto in = tmp / "in";
  std::vector<std::string> wheels = {
      gpu_wheel(in, "minitorch", "0.1.0+cu130.sm90", fake_device_code({90})).string(),
      gpu_wheel(in, "minitorch", "0.1.0+cu130.sm100", fake_device_code({100})).string(),
      gpu_wheel(in, "minitorch", "0.1.0+cu130.sm120", fake_device_code({120})).string(),
      gpu_wheel(in, "minitorch", "0.1.0+cu130.multi", fake_device_code({80}, {90})).string(),
      // Hostile: the name claims sm120, the code is sm_90's; and a build with no device code.
      gpu_wheel(in, "liar", "1.0+cu130.sm120", fake_device_code({90})).string(),
      gpu_wheel(in, "plain", "1.0", "").string(),
  };
  auto dir = tmp / "mirror";
  std::vector<std::string> args = {"publish"};
  args.insert(args.end(), wheels.begin(), wheels.end());
  args.insert(args.end(), {"--mirror", dir.string()});
  auto pub = test::archbuild(args);
  INFO(pub.out << pub.err);
  REQUIRE(pub.status == 0);
  const std::string base = "file://" + dir.string();
  // What plain simple/ gives, and the real command per view.
  CHECK(contains(pub.err, "simple/ lists every build of minitorch 0.1.0"));
  CHECK(contains(pub.err, "minitorch-0.1.0+cu130.sm90-py3-none-linux_x86_64.whl (the highest local label, PEP 440)"));
  CHECK(contains(pub.err, "sm_120  pip install --index-url " + base + "/gpu/sm_120/simple minitorch plain"));
  // The manifest records each wheel's device code.
  auto manifest = json::parse(test::read_file(dir / "manifest.json"));
  auto images = manifest["files"]["minitorch-0.1.0+cu130.multi-py3-none-linux_x86_64.whl"]["gpu"]["files"][0]["images"]
                    .get<std::set<std::string>>();
  CHECK(images == std::set<std::string>{"compute_90", "sm_80"});
  CHECK(manifest["files"]["plain-1.0-py3-none-linux_x86_64.whl"]["gpu"]["files"].empty());

  check_views(pip, dir, base,
              {{"8.6", "0.1.0+cu130.multi"}, {"9.0", "0.1.0+cu130.sm90"}, {"10.0", "0.1.0+cu130.sm100"},
               {"12.0", "0.1.0+cu130.sm120"}, {"12.1", "0.1.0+cu130.sm120"}});
  // Plain simple/: what publish said.
  CHECK(fs::path(pip.download(base + "/simple", "minitorch==0.1.0", tmp / "dl-plain")).filename() ==
        "minitorch-0.1.0+cu130.sm90-py3-none-linux_x86_64.whl");
  // The wheel named sm120 is where its code runs; the one without device code is in every view.
  CHECK_FALSE(pip.download(base + "/gpu/sm_90/simple", "liar", tmp / "dl-liar").empty());
  CHECK(pip.download(base + "/gpu/sm_120/simple", "liar", tmp / "dl-liar").empty());
  CHECK_FALSE(pip.download(base + "/gpu/sm_120/simple", "plain", tmp / "dl-plain").empty());
  // A GPU no build covers has no view.
  CHECK_FALSE(fs::exists(dir / "gpu" / "sm_75"));

  // Over HTTP (python3 -m http.server on 127.0.0.1): the same view.
  int port = test::free_local_port();
  test::Background server("/usr/bin/python3", {"-m", "http.server", std::to_string(port), "--bind", "127.0.0.1", "--directory", dir.string()});
  for (int i = 0; i < 100 && !test::local_port_accepts(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto http = pip.download("http://127.0.0.1:" + std::to_string(port) + "/gpu/sm_120/simple", "minitorch==0.1.0", tmp / "dl-http");
  CHECK(fs::path(http).filename() == "minitorch-0.1.0+cu130.sm120-py3-none-linux_x86_64.whl");
  // And pip installs it from there (hashes checked).
  auto installed = test::run((pip.venv / "bin" / "pip").string(),
                             {"install", "--no-deps", "--index-url", "http://127.0.0.1:" + std::to_string(port) + "/gpu/sm_100/simple", "minitorch"},
                             pip.opts);
  INFO(installed.out << installed.err);
  CHECK(installed.status == 0);
  CHECK(test::run((pip.venv / "bin" / "python").string(), {"-c", "import minitorch; print(minitorch.VALUE)"}).out ==
        "0.1.0+cu130.sm100\n");
  server.kill(SIGTERM);
  server.wait();

  // install-command --mirror: the view that runs on the GPUs asked about, or why none does.
  auto ic = test::archbuild({"install-command", "--sm", "120", "--driver", "580.65", "--mirror", base, "--json"});
  INFO(ic.err);
  CHECK(ic.status == 0);
  auto icj = json::parse(ic.out);
  CHECK(icj["mirror"]["view"] == "sm_120");
  CHECK(icj["mirror"]["pip"] == "pip install --index-url " + base + "/gpu/sm_120/simple minitorch plain");
  test::RunOptions env;
  env.env["ARCHBUILD_MIRROR"] = base + "/simple";
  auto two = test::archbuild({"install-command", "--sm", "86,89", "--driver", "580.65"}, env);
  CHECK(two.status == 0);
  CHECK(contains(two.out, base + "/gpu/sm_86/simple"));
  auto none = test::archbuild({"install-command", "--sm", "75", "--driver", "580.65"}, env);
  CHECK(none.status == 1);
  CHECK(contains(none.err, "no published build runs on CC 7.5"));
  auto both = test::archbuild({"install-command", "--sm", "90,120", "--driver", "580.65"}, env);
  CHECK(both.status == 1);
  CHECK(contains(both.err, "every GPU here"));

  // Views are derived: verify checks them; one deleted by hand is found and rebuilt.
  CHECK(test::archbuild({"publish", "--verify", "--mirror", dir.string()}).status == 0);
  fs::remove_all(dir / "gpu" / "sm_120");
  std::ofstream(dir / "gpu" / "sm_90" / "simple" / "minitorch" / "index.html", std::ios::app) << "<!-- edited -->";
  auto v = test::archbuild({"publish", "--verify", "--mirror", dir.string()});
  CHECK(v.status == 1);
  CHECK(contains(v.out, "view-missing"));
  CHECK(contains(v.out, "view-stale"));
  auto rebuilt = test::archbuild({"publish", "--rebuild-views", "--mirror", dir.string()});
  INFO(rebuilt.err);
  CHECK(rebuilt.status == 0);
  CHECK(test::archbuild({"publish", "--verify", "--mirror", dir.string()}).status == 0);
  CHECK(fs::exists(dir / "gpu" / "sm_120" / "simple" / "minitorch" / "index.json"));
  // Rebuilt from files/ alone: the facts gone from the manifest are read again.
  auto m = json::parse(test::read_file(dir / "manifest.json"));
  for (auto& [name, e] : m["files"].items()) e.erase("gpu");
  std::ofstream(dir / "manifest.json", std::ios::trunc) << m.dump(1);
  fs::remove_all(dir / "gpu");
  REQUIRE(test::archbuild({"publish", "--rebuild-views", "--mirror", dir.string()}).status == 0);
  CHECK(test::archbuild({"publish", "--verify", "--mirror", dir.string()}).status == 0);
  CHECK(fs::path(pip.download(base + "/gpu/sm_121/simple", "minitorch", tmp / "dl-121")).filename() ==
        "minitorch-0.1.0+cu130.sm120-py3-none-linux_x86_64.whl");
}

TEST_CASE("doctor --mirror: a torch that cannot run here is told the mirror's GPU view that can", "[publish][doctor]") {
  test::TempDir tmp;
  if (!fs::exists("/usr/bin/python3")) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  auto in = tmp / "in";
  auto dir = tmp / "mirror";
  REQUIRE(test::archbuild({"publish", gpu_wheel(in, "minitorch", "0.1.0+cu130.sm90", fake_device_code({90})).string(),
                           gpu_wheel(in, "minitorch", "0.1.0+cu130.sm120", fake_device_code({120})).string(), "--mirror",
                           dir.string()})
              .status == 0);
  const std::string base = "file://" + dir.string();
  // A CPU-only torch (cannot run on any GPU) behind an interpreter wrapper; no driver, no toolkit.
  tmp.write("site/torch/__init__.py", "__version__ = '2.7.0+cpu'\nfrom . import version, cuda\n");
  tmp.write("site/torch/version.py", "__version__ = '2.7.0+cpu'\ncuda = None\nhip = None\n");
  tmp.write("site/torch/cuda/__init__.py", "def is_available():\n    return False\n\ndef get_arch_list():\n    return []\n");
  fs::create_directories(tmp / "site/torch/lib");
  auto python = tmp.write("bin/python-fake", "#!/bin/sh\nPYTHONPATH='" + (tmp / "site").string() + "' exec /usr/bin/python3 \"$@\"\n");
  fs::permissions(python, fs::perms::owner_all);
  test::RunOptions o;
  o.env["PATH"] = (tmp / "bin").string() + ":/usr/bin:/bin";
  o.env["ARCHBUILD_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1";
  o.env["ARCHBUILD_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1";
  o.env["CUDA_HOME"] = "/nonexistent/cuda";
  o.unset_env = {"CUDA_PATH", "ARCHBUILD_MIRROR"};
  auto doctor = [&](std::vector<std::string> args, const test::RunOptions& opts) {
    args.insert(args.begin(), {"doctor", "--python", python.string(), "--driver", "580.65"});
    return test::archbuild(args, opts);
  };
  auto r = doctor({"--sm", "120", "--mirror", base, "--json"}, o);
  INFO(r.out << r.err);
  CHECK(r.status == 1);  // the finding stands: the installed torch still cannot run
  auto j = json::parse(r.out);
  REQUIRE(j["findings"].size() == 1);
  CHECK(j["findings"][0]["id"] == "cpu-only");
  const auto& fix = j["findings"][0]["fixes"][0];
  CHECK(fix["kind"] == "mirror");
  CHECK(fix["command"] == python.string() + " -m pip install --index-url " + base + "/gpu/sm_120/simple minitorch");
  CHECK(j["mirror"]["view"] == "sm_120");
  // Through $ARCHBUILD_MIRROR, in words.
  auto env = o;
  env.env["ARCHBUILD_MIRROR"] = base;
  auto text = doctor({"--sm", "90"}, env);
  CHECK(contains(text.out, "fix 1: install from the mirror's GPU view sm_90 (minitorch), whose builds run on CC 9.0"));
  CHECK(contains(text.out, "$ " + python.string() + " -m pip install --index-url " + base + "/gpu/sm_90/simple minitorch"));
  // A GPU no published build covers: the other fixes, and a note why the mirror has none.
  auto none = doctor({"--sm", "75", "--json"}, env);
  auto nj = json::parse(none.out);
  CHECK(nj["mirror"]["ok"] == false);
  CHECK(nj["findings"][0]["fixes"][0]["kind"] != "mirror");
  CHECK(contains(nj["findings"][0]["notes"].dump(), "has no build for these GPUs"));
  // A mirror that is not there is bad input.
  CHECK(doctor({"--sm", "90", "--mirror", (tmp / "nothing").string()}, o).status == 2);
}

TEST_CASE("GPU views with real device code from nvcc: 9.0, 10.0, 12.0 and a multi-arch build with PTX",
          "[publish][pip][nvcc]") {
  const std::string nvcc = "/usr/local/cuda/bin/nvcc";
  if (auto why = test::unusable(nvcc); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  test::TempDir tmp;
  Pip pip;
  if (auto why = pip.make(tmp / "venv"); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  tmp.write("k.cu", "__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }\n"
                    "extern \"C\" void launch(float* x) { scale<<<1, 32>>>(x, 2.0f); }\n");
  // One shared object per build: -cudart none keeps it small (nothing here loads it).
  auto build = [&](const std::string& name, std::vector<std::string> gencode) {
    std::vector<std::string> args = {"-shared", "-Xcompiler", "-fPIC", "-cudart", "none", "-o", (tmp / (name + ".so")).string()};
    for (const auto& g : gencode) args.insert(args.end(), {"-gencode", g});
    args.push_back((tmp / "k.cu").string());
    auto r = test::run(nvcc, args);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return test::read_file(tmp / (name + ".so"));
  };
  auto in = tmp / "in";
  std::vector<std::string> args = {
      "publish",
      gpu_wheel(in, "minitorch", "0.1.0+cu130.sm90", build("sm90", {"arch=compute_90,code=sm_90"})).string(),
      gpu_wheel(in, "minitorch", "0.1.0+cu130.sm100", build("sm100", {"arch=compute_100,code=sm_100"})).string(),
      gpu_wheel(in, "minitorch", "0.1.0+cu130.sm120", build("sm120", {"arch=compute_120,code=sm_120"})).string(),
      gpu_wheel(in, "minitorch", "0.1.0+cu130.multi",
                build("multi", {"arch=compute_80,code=sm_80", "arch=compute_90,code=compute_90"})).string(),
      "--mirror", (tmp / "mirror").string()};
  auto pub = test::archbuild(args);
  INFO(pub.out << pub.err);
  REQUIRE(pub.status == 0);
  check_views(pip, tmp / "mirror", "file://" + (tmp / "mirror").string(),
              {{"8.6", "0.1.0+cu130.multi"}, {"9.0", "0.1.0+cu130.sm90"}, {"10.0", "0.1.0+cu130.sm100"},
               {"12.0", "0.1.0+cu130.sm120"}, {"12.1", "0.1.0+cu130.sm120"}});
  CHECK(test::archbuild({"publish", "--verify", "--mirror", (tmp / "mirror").string()}).status == 0);

  // The same builds as PEP 825 variant wheels, their properties read from nvcc's fatbins: the
  // variant PEP 825's ordering takes for each GPU runs there.
  REQUIRE(test::archbuild({"publish", "--rebuild-views", "--variants", "--mirror", (tmp / "mirror").string()}).status == 0);
  for (const auto& [cc, want] : std::map<std::string, std::string>{{"8.6", "cu130_sm80_ptx90"}, {"9.0", "cu130_sm90"},
                                                                    {"10.0", "cu130_sm100"}, {"12.0", "cu130_sm120"},
                                                                    {"12.1", "cu130_sm120"}}) {
    INFO("CC " << cc);
    auto got = select_variant(tmp / "mirror", "minitorch", "0.1.0", cc, "13.0");
    CHECK(fs::path(got).filename() == "minitorch-0.1.0-py3-none-linux_x86_64-" + want + ".whl");
    CHECK(test::archbuild({"inspect", "--sm", cc, got}).status == 0);
  }
  auto pep825 = check_pep825(tmp / "mirror");
  INFO(pep825.out);
  CHECK((pep825.status == 0 || pep825.status == 77));
  CHECK(test::archbuild({"publish", "--verify", "--mirror", (tmp / "mirror").string()}).status == 0);
}

TEST_CASE("served by nginx with the shipped configuration: JSON when pip asks for it, HTML otherwise", "[publish][pip][nginx]") {
  const std::string nginx = "/usr/sbin/nginx";
  if (!fs::exists(nginx)) {
    WARN("##archbuild-skip## no " << nginx << " (Debian's nginx-light; scripts/install-deps installs it)");
    return;
  }
  test::TempDir tmp;
  Pip pip;
  if (auto why = pip.make(tmp / "venv"); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  auto in = tmp / "in";
  auto dir = tmp / "mirror";
  REQUIRE(test::archbuild({"publish", gpu_wheel(in, "minitorch", "0.1.0+cu130.sm90", fake_device_code({90})).string(),
                           gpu_wheel(in, "minitorch", "0.1.0+cu130.sm120", fake_device_code({120})).string(), "--mirror",
                           dir.string()})
              .status == 0);
  // The shipped server block, with this mirror as its root and a free port on 127.0.0.1.
  std::string server = test::read_file(fs::path(ARCHBUILD_SOURCE_DIR) / "examples" / "mirror" / "nginx.conf");
  int port = test::free_local_port();
  auto replace = [&](const std::string& from, const std::string& to) {
    auto at = server.find(from);
    REQUIRE(at != std::string::npos);
    server.replace(at, from.size(), to);
  };
  replace("listen 8080;", "listen 127.0.0.1:" + std::to_string(port) + ";");
  replace("root /srv/archbuild-mirror;", "root " + dir.string() + ";");
  tmp.write("server.conf", server);
  auto run = tmp / "run";
  fs::create_directories(run);
  // Started as root, nginx's workers would run as nobody, who cannot read the test's private temp dir.
  tmp.write("nginx.conf", fmt::format(R"({2}pid {0}/nginx.pid;
error_log {0}/error.log;
events {{}}
http {{
  log_format negotiated '$request_uri $sent_http_content_type';
  access_log {0}/access.log negotiated;
  client_body_temp_path {0}/body;
  proxy_temp_path {0}/proxy;
  fastcgi_temp_path {0}/fastcgi;
  uwsgi_temp_path {0}/uwsgi;
  scgi_temp_path {0}/scgi;
  include /etc/nginx/mime.types;
  include {1};
}}
)",
                                      run.string(), (tmp / "server.conf").string(), ::geteuid() == 0 ? "user root;\n" : ""));
  test::Background server_process(nginx, {"-e", (run / "error.log").string(), "-p", tmp.path().string(), "-c",
                                          (tmp / "nginx.conf").string(), "-g", "daemon off;"});
  for (int i = 0; i < 100 && !test::local_port_accepts(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(test::local_port_accepts(port));
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  auto got = pip.download(base + "/gpu/sm_120/simple", "minitorch==0.1.0", tmp / "dl");
  CHECK(fs::path(got).filename() == "minitorch-0.1.0+cu130.sm120-py3-none-linux_x86_64.whl");
  // A client that does not ask for JSON gets the HTML page from the same URL.
  auto html = test::run("/usr/bin/python3", {"-c", "import sys, urllib.request as u; r = u.urlopen(sys.argv[1]); "
                                                   "print(r.headers['Content-Type']); print(r.read().decode()[:15])",
                                             base + "/gpu/sm_120/simple/minitorch/"});
  CHECK(contains(html.out, "application/vnd.pypi.simple.v1+html\n<!DOCTYPE html>"));
  server_process.kill(SIGQUIT);  // graceful: the access log is written
  server_process.wait();
  auto log = test::read_file(run / "access.log");
  INFO(log);
  CHECK(contains(log, "/gpu/sm_120/simple/minitorch/ application/vnd.pypi.simple.v1+json"));
  CHECK(contains(log, "/gpu/sm_120/simple/minitorch/ application/vnd.pypi.simple.v1+html"));
  // file:// still works: the pages are files.
  CHECK_FALSE(pip.download("file://" + dir.string() + "/gpu/sm_90/simple", "minitorch", tmp / "dl-file").empty());
}

// ---- PEP 825 variant wheels (docs/mirror.md, "Wheel variants") ------------------------------

TEST_CASE("variants: publish --variants offers each build as a PEP 825 variant wheel that the real pip ignores", "[publish][pip]") {
  test::TempDir tmp;
  Pip pip;
  if (auto why = pip.make(tmp / "venv"); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  auto in = tmp / "in";
  std::vector<std::string> wheels = {
      gpu_wheel(in, "minitorch", "0.1.0+cu130.sm90", fake_device_code({90})).string(),
      gpu_wheel(in, "minitorch", "0.1.0+cu130.sm120", fake_device_code({120})).string(),
      gpu_wheel(in, "minitorch", "0.1.0+cu130.multi", fake_device_code({80}, {90})).string(),
      gpu_wheel(in, "plain", "1.0", "").string(),
  };
  auto dir = tmp / "mirror";
  std::vector<std::string> args = {"publish", "--variants", "--json"};
  args.insert(args.end(), wheels.begin(), wheels.end());
  args.insert(args.end(), {"--mirror", dir.string()});
  auto pub = test::archbuild(args);
  INFO(pub.out << pub.err);
  REQUIRE(pub.status == 0);
  const std::string base = "file://" + dir.string();
  auto pj = json::parse(pub.out);
  CHECK(pj["variants"]["index_url"] == base + "/variants/simple");
  std::set<std::string> offered;
  for (const auto& f : pj["variants"]["files"]) offered.insert(f["file"].get<std::string>());
  const std::string v120 = "minitorch-0.1.0-py3-none-linux_x86_64-cu130_sm120.whl";
  CHECK(offered == std::set<std::string>{"minitorch-0.1.0-py3-none-linux_x86_64-cu130_sm80_ptx90.whl",
                                         "minitorch-0.1.0-py3-none-linux_x86_64-cu130_sm90.whl", v120,
                                         "plain-1.0-py3-none-linux_x86_64-null.whl"});
  CHECK(fs::exists(dir / "variants" / "files" / "minitorch-0.1.0-variants.json"));

  // The PEP's grammar, its JSON schema, the index-level file linked from every page that links a
  // variant wheel, the NVIDIA provider's namespace (tests/scripts/check_pep825.py).
  auto check = [&] {
    auto r = check_pep825(dir);
    INFO(r.out << r.err);
    if (r.status == 77) {
      WARN("PEP 825 schema not checked: " << r.out);
      return;
    }
    CHECK(r.status == 0);
  };
  check();

  // Which variant PEP 825's ordering takes with the NVIDIA provider's supported values for a host
  // (re-stated from its plugin.py by check_pep825.py --select: no variant-aware installer runs
  // here), and that it runs there (inspect --sm).
  auto select = [&](const std::string& project, const std::string& cc, const std::string& driver) {
    return select_variant(dir, project, project == "plain" ? "1.0" : "0.1.0", cc, driver);
  };
  for (const auto& [cc, want] : std::map<std::string, std::string>{{"8.6", "cu130_sm80_ptx90"}, {"9.0", "cu130_sm90"},
                                                                    {"12.0", "cu130_sm120"}, {"12.1", "cu130_sm120"}}) {
    INFO("CC " << cc);
    auto got = select("minitorch", cc, "13.0");
    CHECK(got == (dir / "variants" / "files" / ("minitorch-0.1.0-py3-none-linux_x86_64-" + want + ".whl")).string());
    CHECK(test::archbuild({"inspect", "--sm", cc, got}).status == 0);
  }
  CHECK(select("minitorch", "7.5", "13.0") == "none");   // no build runs there
  CHECK(select("minitorch", "12.0", "12.8") == "none");  // a driver older than CUDA 13.0
  CHECK(fs::path(select("plain", "7.5", "12.8")).filename() == "plain-1.0-py3-none-linux_x86_64-null.whl");

  // A pip that knows no variants: the variant index alone offers it nothing it can install...
  CHECK(pip.download(base + "/variants/simple", "minitorch", tmp / "dl-variants").empty());
  CHECK(pip.download(base + "/variants/simple", "plain", tmp / "dl-variants").empty());
  // ...beside the GPU's view or plain simple/, it installs the build it installs without them...
  auto with_variants = [&](const std::string& index, const std::string& req) {
    fs::remove_all(tmp / "dl");
    auto r = test::run((pip.venv / "bin" / "pip").string(),
                       {"download", "--no-deps", "--index-url", index, "--extra-index-url", base + "/variants/simple",
                        "--find-links", (dir / "variants" / "files").string(), "-d", (tmp / "dl").string(), req},
                       pip.opts);
    INFO(r.out << r.err);
    std::vector<std::string> got;
    if (r.status == 0)
      for (const auto& e : fs::directory_iterator(tmp / "dl")) got.push_back(e.path().filename().string());
    return got;
  };
  CHECK(with_variants(base + "/gpu/sm_120/simple", "minitorch==0.1.0") ==
        std::vector<std::string>{"minitorch-0.1.0+cu130.sm120-py3-none-linux_x86_64.whl"});
  CHECK(with_variants(base + "/gpu/sm_120/simple", "minitorch") ==
        std::vector<std::string>{"minitorch-0.1.0+cu130.sm120-py3-none-linux_x86_64.whl"});
  CHECK(with_variants(base + "/simple", "minitorch==0.1.0") ==
        std::vector<std::string>{"minitorch-0.1.0+cu130.sm90-py3-none-linux_x86_64.whl"});
  CHECK(with_variants(base + "/simple", "plain") == std::vector<std::string>{"plain-1.0-py3-none-linux_x86_64.whl"});
  // ...and a variant wheel given by path is refused by its file name, as PEP 825 says tools do.
  auto direct = test::run((pip.venv / "bin" / "pip").string(),
                          {"install", "--no-deps", (dir / "variants" / "files" / v120).string()}, pip.opts);
  CHECK(direct.status != 0);
  CHECK(contains(direct.out + direct.err, "not a valid wheel filename"));

  // Derived data: verify checks every variant file (made again and compared) and page.
  auto verify = [&] { return test::archbuild({"publish", "--verify", "--mirror", dir.string()}); };
  auto ok = verify();
  INFO(ok.out);
  CHECK(ok.status == 0);
  std::ofstream(dir / "variants" / "files" / v120, std::ios::app) << "x";
  fs::remove(dir / "variants" / "files" / "minitorch-0.1.0-variants.json");
  std::ofstream(dir / "variants" / "files" / "stray.whl") << "x";
  auto bad = verify();
  CHECK(bad.status == 1);
  CHECK(contains(bad.out, "variant-stale      variants/files/" + v120));
  CHECK(contains(bad.out, "variant-missing    variants/files/minitorch-0.1.0-variants.json"));
  CHECK(contains(bad.out, "variant-extra      variants/files/stray.whl"));
  // --rebuild-views makes them again (a variant file changed or deleted by hand).
  auto rebuilt = test::archbuild({"publish", "--rebuild-views", "--mirror", dir.string()});
  INFO(rebuilt.out << rebuilt.err);
  CHECK(rebuilt.status == 0);
  fs::remove(dir / "variants" / "files" / v120);
  REQUIRE(test::archbuild({"publish", "--rebuild-views", "--mirror", dir.string()}).status == 0);
  auto again = verify();
  INFO(again.out);
  CHECK(again.status == 0);

  // A later publish without --variants keeps the variants up to date.
  auto later = test::archbuild({"publish", gpu_wheel(in, "minitorch", "0.1.0+cu130.sm100", fake_device_code({100})).string(),
                                "--mirror", dir.string()});
  INFO(later.err);
  CHECK(later.status == 0);
  CHECK(contains(later.err, "minitorch-0.1.0-py3-none-linux_x86_64-cu130_sm100.whl"));
  auto index = json::parse(test::read_file(dir / "variants" / "files" / "minitorch-0.1.0-variants.json"));
  CHECK(index["variants"].size() == 4);
  CHECK(index["variants"]["cu130_sm100"]["nvidia"]["sm_arch"] == json{"100_real"});
  CHECK(verify().status == 0);
  check();
}
