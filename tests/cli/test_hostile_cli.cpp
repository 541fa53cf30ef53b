// Hostile input, second pass (issue 47), end to end: the probe's cases kept as tests, one
// TEST_CASE per class of docs/guarantees.md — paths archbuild writes, paths and libraries it opens
// from the environment, sizes read from untrusted bytes, records read back from the cache, the
// mirror's names, exit statuses, values that would fail late, what is printed, lenient input.
// Every run has a timeout: a hang is a failure, never a stuck test.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mirror/make_wheel.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// No hang: every run here ends well before this.
test::RunOptions quick(test::RunOptions o = {}) {
  o.timeout = std::chrono::seconds(60);
  return o;
}

// archbuild through the shell, for what a program's own redirections do (> /dev/full, >&-).
test::Ran shell(const std::string& script, const test::RunOptions& o = quick()) {
  return test::run("/bin/sh", {"-c", script}, o);
}

std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

const std::string kExe = ARCHBUILD_EXE;

// A key's build logs as `report` reads them (no build needed).
std::string fake_built_key(const fs::path& cache) {
  const std::string key = std::string(64, 'a');
  fs::create_directories(cache / "keys");
  std::ofstream(cache / "keys" / (key + ".json")) << "{}";
  fs::create_directories(cache / "logs" / key);
  std::ofstream(cache / "logs" / key / "ninja_log") << "# ninja log v5\n0\t100\t0\tobj/a.o\tabc\n";
  return key;
}

}  // namespace

TEST_CASE("hostile/paths written: --trace never replaces a FIFO, a device or a link", "[cli][hostile]") {
  test::TempDir tmp;
  auto cache = tmp / "cache";
  auto key = fake_built_key(cache);
  auto report = [&](const fs::path& trace) {
    return test::archbuild({"--cache-dir", cache.string(), "report", key.substr(0, 12), "--trace", trace.string()}, quick());
  };
  // The probe: a FIFO became a regular file, /dev/full was replaced, a link became a file; exit 0.
  auto fifo = tmp / "trace.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  auto f = report(fifo);
  CHECK(f.status == 2);
  CHECK(has(f.err, "FIFO"));
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  auto d = report("/dev/full");
  CHECK(d.status == 2);
  CHECK(has(d.err, "character device"));
  REQUIRE(::lstat("/dev/full", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  tmp.write("elsewhere.json", "kept");
  fs::create_symlink(tmp / "elsewhere.json", tmp / "trace.link");
  auto l = report(tmp / "trace.link");
  CHECK(l.status == 2);
  CHECK(has(l.err, "symbolic link"));
  CHECK(fs::is_symlink(tmp / "trace.link"));
  CHECK(test::read_file(tmp / "elsewhere.json") == "kept");
  // Nothing there, or a regular file: written.
  auto ok = report(tmp / "trace.json");
  INFO(ok.err);
  CHECK(ok.status == 0);
  CHECK(json::parse(test::read_file(tmp / "trace.json")).is_object());
  CHECK(report(tmp / "trace.json").status == 0);
}

TEST_CASE("hostile/environment: a FIFO named as the NVML or CUDA library does not hang detect or doctor",
          "[cli][hostile]") {
  test::TempDir tmp;
  auto fifo = tmp / "libnvidia-ml.so.1";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  test::RunOptions o = quick();
  o.timeout = std::chrono::seconds(30);
  o.env["PATH"] = "/nonexistent";  // no nvidia-smi either
  o.env["ARCHBUILD_NVML_LIBRARY"] = fifo.string();
  o.env["ARCHBUILD_CUDA_LIBRARY"] = fifo.string();
  auto d = test::archbuild({"detect"}, o);
  CHECK(d.status == 3);
  CHECK(has(d.err, "FIFO"));
  if (fs::exists("/usr/bin/python3")) {
    auto doc = test::archbuild({"doctor", "--python", "/usr/bin/python3"}, o);
    CHECK(doc.status >= 0);  // ended (a signal or the timeout is negative)
    CHECK(doc.status != 70);
  }
}

TEST_CASE("hostile/sizes: a 50 KB store host is exit 2 in one line, not SIGSEGV", "[cli][hostile]") {
  test::TempDir tmp;
  const std::string url = "oci://" + std::string(50'000, 'a') + "/builds";
  test::RunOptions o = quick();
  o.env["ARCHBUILD_STORE"] = url;
  for (auto args : std::vector<std::vector<std::string>>{
           {"--cache-dir", (tmp / "c").string(), "plan", "--sm", "90", "--store", url},
           {"--cache-dir", (tmp / "c").string(), "plan", "--sm", "90"}}) {
    auto r = test::archbuild(args, o);
    INFO(r.err.substr(0, 2000));
    CHECK(r.status == 2);
    CHECK(has(r.err, "not a store URL"));
    CHECK(r.err.size() < 2000);
  }
}

TEST_CASE("hostile/sizes: a zip bomb's ELF member is refused by the archive's size, not read into memory",
          "[cli][hostile]") {
  if (!fs::exists("/usr/bin/python3")) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  test::TempDir tmp;
  // 256 MiB of zeros after an ELF header deflate to ~250 KB: 1000x, where a wheel's libraries
  // compress 2-5x (the probe's 3 GiB in 3 MB, scaled down).
  auto wheel = tmp / "bomb-1.0-py3-none-any.whl";
  auto made = test::run("/usr/bin/python3",
                        {"-c",
                         "import sys, zipfile\n"
                         "with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:\n"
                         "  with z.open('bomb/lib.so', 'w', force_zip64=True) as f:\n"
                         "    f.write(b'\\x7fELF\\x02\\x01\\x01' + bytes(9))\n"
                         "    for _ in range(256): f.write(bytes(1 << 20))\n"
                         "  z.writestr('bomb-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: bomb\\nVersion: 1.0\\n')\n",
                         wheel.string()},
                        quick());
  REQUIRE(made.status == 0);
  REQUIRE(fs::file_size(wheel) < (4u << 20));
  for (auto args : std::vector<std::vector<std::string>>{{"inspect", wheel.string()},
                                                         {"validate", "--sm", "90", "--no-import", wheel.string()}}) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = test::archbuild(args, quick());
    INFO(args.front() << ": " << r.err);
    CHECK(has(r.err + r.out, "zip bomb"));
    CHECK(r.status != 0);
    CHECK(r.status != 70);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  }
}

TEST_CASE("hostile/mirror: a manifest's project is a name, never a path out of the mirror", "[cli][hostile]") {
  test::TempDir tmp;
  auto w = test::make_wheel(tmp / "in", "norm", "1.0", "norm");
  auto dir = tmp / "mirror";
  REQUIRE(test::archbuild({"publish", w.string(), "--mirror", dir.string()}, quick()).status == 0);
  auto manifest = json::parse(test::read_file(dir / "manifest.json"));
  for (std::string project : std::vector<std::string>{(tmp / "outside").string(), "../../../escaped", "Norm"}) {
    INFO(project);
    auto edited = manifest;
    edited["files"][w.filename().string()]["project"] = project;
    std::ofstream(dir / "manifest.json") << edited.dump();
    auto other = test::make_wheel(tmp / "in2", "other", "1.0", "other");
    auto r = test::archbuild({"publish", other.string(), "--mirror", dir.string()}, quick());
    CHECK(r.status == 1);
    CHECK(has(r.err, "PEP 503"));
    CHECK_FALSE(fs::exists(tmp / "outside"));
    CHECK_FALSE(fs::exists(tmp / "escaped"));
    CHECK_FALSE(fs::exists(tmp.path().parent_path() / "escaped"));
    CHECK(test::archbuild({"publish", "--verify", "--mirror", dir.string()}, quick()).status == 1);
  }
}

TEST_CASE("hostile/mirror: a FIFO in files/ does not hang a publish", "[cli][hostile]") {
  test::TempDir tmp;
  auto w = test::make_wheel(tmp / "in", "norm", "1.0", "norm");
  auto dir = tmp / "mirror";
  REQUIRE(test::archbuild({"publish", w.string(), "--mirror", dir.string()}, quick()).status == 0);
  auto published = dir / "files" / w.filename();
  fs::remove(published);
  REQUIRE(::mkfifo(published.c_str(), 0644) == 0);
  test::RunOptions o = quick();
  o.timeout = std::chrono::seconds(30);
  auto r = test::archbuild({"publish", w.string(), "--mirror", dir.string()}, o);
  CHECK(r.status == 1);
  CHECK(has(r.err, "FIFO"));
  auto v = test::archbuild({"publish", "--verify", "--mirror", dir.string(), "--json"}, o);
  CHECK(v.status == 1);
}

TEST_CASE("hostile/mirror: immutability holds by PEP 503 project and PEP 440 version, not by spelling",
          "[cli][hostile]") {
  test::TempDir tmp;
  auto dir = (tmp / "mirror").string();
  auto first = test::make_wheel(tmp / "a", "norm", "1.0", "norm", "one");
  REQUIRE(test::archbuild({"publish", first.string(), "--mirror", dir}, quick()).status == 0);
  // 1.0.0 == 1.0 (PEP 440): `pip download norm==1.0` would change file.
  auto respelled = test::make_wheel(tmp / "b", "norm", "1.0.0", "norm", "two");
  auto r = test::archbuild({"publish", respelled.string(), "--mirror", dir}, quick());
  CHECK(r.status == 1);
  CHECK(has(r.err, "immutable"));
  CHECK_FALSE(fs::exists(fs::path(dir) / "files" / respelled.filename()));
  // My_Pkg, my_pkg, my.pkg, MY_PKG: one PEP 503 project.
  auto a = test::make_wheel(tmp / "c", "My_Pkg", "1.0", "my_pkg", "one");
  REQUIRE(test::archbuild({"publish", a.string(), "--mirror", dir}, quick()).status == 0);
  for (std::string spelling : {"my_pkg", "my.pkg", "MY_PKG"}) {
    auto b = test::make_wheel(tmp / ("d-" + spelling), spelling, "1.0", "my_pkg", "other-" + spelling);
    auto refused = test::archbuild({"publish", b.string(), "--mirror", dir}, quick());
    INFO(spelling << ": " << refused.err);
    CHECK(refused.status == 1);
  }
  // Another version is another release file.
  auto next = test::make_wheel(tmp / "e", "norm", "1.0.1", "norm", "three");
  CHECK(test::archbuild({"publish", next.string(), "--mirror", dir}, quick()).status == 0);
  CHECK(test::archbuild({"publish", "--verify", "--mirror", dir}, quick()).status == 0);
  // A mirror that already holds two spellings (published before this rule): --verify says so.
  fs::copy_file(respelled, fs::path(dir) / "files" / respelled.filename());
  auto manifest = json::parse(test::read_file(fs::path(dir) / "manifest.json"));
  auto entry = manifest["files"][first.filename().string()];
  entry["version"] = "1.0.0";
  entry["sha256"] = test::run("/usr/bin/sha256sum", {respelled.string()}).out.substr(0, 64);
  entry["size"] = fs::file_size(respelled);
  manifest["files"][respelled.filename().string()] = entry;
  std::ofstream(fs::path(dir) / "manifest.json") << manifest.dump();
  auto v = test::archbuild({"publish", "--verify", "--mirror", dir, "--json"}, quick());
  CHECK(v.status == 1);
  CHECK(has(v.out, "duplicate-release"));
}

TEST_CASE("hostile/exit statuses: output that stdout did not take is not success", "[cli][hostile]") {
  auto full = shell("exec " + sh_quote(kExe) + " gpus H100 > /dev/full");
  CHECK(full.status == 3);
  CHECK(has(full.err, "standard output"));
  auto full_json = shell("exec " + sh_quote(kExe) + " gpus H100 --json > /dev/full");
  CHECK(full_json.status == 3);
  auto closed = shell("exec " + sh_quote(kExe) + " gpus H100 >&-");
  CHECK(closed.status == 3);
  CHECK(has(closed.err, "standard output is closed"));
  // A failure keeps its own status.
  CHECK(shell("exec " + sh_quote(kExe) + " gpus 'no such gpu at all' > /dev/full").status == 1);
  // gpus --json with no match: the document says so, as every failure document does.
  auto none = test::archbuild({"gpus", "no such gpu at all", "--json"}, quick());
  CHECK(none.status == 1);
  auto doc = json::parse(none.out);
  CHECK(doc["exit"] == 1);
  CHECK(doc["error"].is_string());
}

TEST_CASE("hostile/exit statuses: a missing TMPDIR is bad input, said before any tool runs", "[cli][hostile]") {
  test::TempDir tmp;
  auto w = test::make_wheel(tmp / "in", "norm", "1.0", "norm");
  test::RunOptions o = quick();
  o.env["TMPDIR"] = (tmp / "no-such-dir").string();
  auto r = test::archbuild({"validate", "--sm", "90", w.string()}, o);
  CHECK(r.status == 2);
  CHECK(has(r.err, "TMPDIR"));
  auto s = test::archbuild({"--cache-dir", (tmp / "c").string(), "wheel", "--sm", "90", "--out", (tmp / "out").string()}, o);
  CHECK(s.status == 2);
  CHECK(has(s.err, "TMPDIR"));
}

TEST_CASE("hostile/late values: a cache path with a space, a bad SOURCE_DATE_EPOCH, a relative HOME", "[cli][hostile]") {
  test::TempDir tmp;
  for (std::string name : {"with space", "new\nline", "semi;colon"}) {
    auto r = test::archbuild({"--cache-dir", (tmp / name).string(), "plan", "--sm", "90", "--check"}, quick());
    INFO(name << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(has(r.err, "cache directory"));
  }
  for (std::string epoch : {"abc", "5000000000", "-1", "100"}) {
    auto r = test::archbuild({"--cache-dir", (tmp / "c").string(), "plan", "--sm", "90", "--env", "SOURCE_DATE_EPOCH=" + epoch},
                             quick());
    INFO(epoch << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(has(r.err, "SOURCE_DATE_EPOCH"));
  }
  test::RunOptions rel = quick();
  rel.env["HOME"] = "relative/home";
  rel.unset_env = {"ARCHBUILD_CACHE_DIR", "XDG_CACHE_HOME"};
  auto h = test::archbuild({"report", "abcdef"}, rel);
  CHECK(h.status == 2);
  CHECK(has(h.err, "relative"));
  CHECK_FALSE(has(h.err, "not set"));
}

TEST_CASE("hostile/printed: control characters and bidi marks of a recipe or an --env value are escaped",
          "[cli][hostile]") {
  test::TempDir tmp;
  auto shipped = fs::path(ARCHBUILD_SOURCE_DIR) / "recipes" / "torch-2.7.toml";
  auto recipe = tmp / "hostile.toml";
  std::ofstream(recipe) << "extends = " << json(shipped.string()).dump() << "\n"
                        << "description = \"a\\u001b[31mred\\u202eevil\\u0007\"\n";
  auto r = test::archbuild({"recipes", "show", recipe.string()}, quick());
  INFO(r.err);
  if (r.status == 0) {
    CHECK_FALSE(has(r.out, "\x1b"));
    CHECK_FALSE(has(r.out, "\u202e"));
    CHECK_FALSE(has(r.out, "\a"));
    CHECK(has(r.out, "\\x1b[31mred"));
  }
  auto p = test::archbuild({"--cache-dir", (tmp / "c").string(), "plan", "--sm", "90", "--env",
                            "MY_VAR=x\nwould stop: fake"},
                           quick());
  CHECK_FALSE(has(p.out, "\nwould stop: fake"));
  CHECK_FALSE(has(p.err, "\nwould stop: fake"));
}

TEST_CASE("hostile/lenient: --sm \"90,,\", 8.6(), a stray ./torch-2.7 file", "[cli][hostile]") {
  test::TempDir tmp;
  for (std::string sm : {"90,,", ",90", "90;;80"}) {
    auto r = test::archbuild({"resolve", "--sm", sm}, quick());
    INFO(sm << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(has(r.err, "empty item"));
  }
  auto paren = test::archbuild({"arch", "8.6()"}, quick());
  CHECK(paren.status == 2);
  // A file named like a shipped recipe in the working directory does not replace it.
  tmp.write("torch-2.7", "this is not a recipe = [\n");
  test::RunOptions here = quick();
  here.cwd = tmp.path();
  auto shown = test::archbuild({"recipes", "show", "torch-2.7"}, here);
  INFO(shown.err);
  CHECK(shown.status == 0);
  CHECK(has(shown.out, "recipes/torch-2.7.toml"));
  // ./torch-2.7 still means the file.
  CHECK(test::archbuild({"recipes", "show", "./torch-2.7"}, here).status == 2);
}

TEST_CASE("hostile/internal error: a non-UTF-8 file name in --json, a deleted working directory", "[cli][hostile]") {
  test::TempDir tmp;
  // An ELF file under a name that is not UTF-8, inspected with --json: a document, not exit 70.
  auto dir = tmp / "libs";
  fs::create_directories(dir);
  fs::copy_file("/bin/true", dir / "lib\xff\xfe.so");
  auto r = test::archbuild({"inspect", dir.string(), "--json"}, quick());
  INFO(r.err);
  CHECK(r.status != 70);
  CHECK_FALSE(has(r.err, "internal error"));
  CHECK_NOTHROW(json::parse(r.out));
  // The working directory removed under the command, with every path absolute.
  auto recipe = fs::path(ARCHBUILD_SOURCE_DIR) / "recipes" / "torch-2.7.toml";
  auto gone = shell("mkdir -p " + sh_quote((tmp / "gone").string()) + " && cd " + sh_quote((tmp / "gone").string()) +
                    " && rmdir " + sh_quote((tmp / "gone").string()) + " && exec " + sh_quote(kExe) + " --cache-dir " +
                    sh_quote((tmp / "c").string()) + " recipes show " + sh_quote(recipe.string()));
  INFO(gone.err);
  CHECK(gone.status != 70);
  CHECK_FALSE(has(gone.err, "internal error"));
}

namespace {

// archbuild run as `nobody` (setpriv), for what permissions deny: root reads every file whatever
// its mode. Empty `why` when it can run here.
struct AsNobody {
  std::string why;
  AsNobody() {
    if (::geteuid() != 0) why = "not root: setpriv cannot change to nobody";
    else if (!fs::exists("/usr/bin/setpriv")) why = "no /usr/bin/setpriv (util-linux)";
  }
  test::Ran operator()(const std::vector<std::string>& args, const fs::path& home) const {
    std::vector<std::string> argv = {"--reuid=65534", "--regid=65534", "--clear-groups", kExe};
    argv.insert(argv.end(), args.begin(), args.end());
    test::RunOptions o = quick();
    o.env["HOME"] = home.string();
    o.unset_env = {"ARCHBUILD_CACHE_DIR", "XDG_CACHE_HOME", "ARCHBUILD_MIRROR"};
    return test::run("/usr/bin/setpriv", argv, o);
  }
};

}  // namespace

TEST_CASE("hostile/exit statuses: files, locks and mirrors this user cannot read or write say so, exit 2",
          "[cli][hostile]") {
  AsNobody nobody;
  if (!nobody.why.empty()) {
    WARN("##archbuild-skip## " << nobody.why);
    return;
  }
  test::TempDir tmp;
  fs::permissions(tmp.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  auto home = tmp / "home";
  fs::create_directories(home);
  fs::permissions(home, fs::perms::all);
  // A folder of libraries nobody may read: each one said, counted, never an empty report.
  auto libs = tmp / "libs";
  fs::create_directories(libs);
  for (int i = 0; i < 40; ++i) {
    auto so = libs / ("lib" + std::to_string(i) + ".so");
    fs::copy_file("/bin/true", so);
    fs::permissions(so, fs::perms::none);
  }
  for (const auto& json_flag : {std::string(), std::string("--json")}) {
    std::vector<std::string> args = {"inspect", libs.string()};
    if (!json_flag.empty()) args.push_back(json_flag);
    auto r = nobody(args, home);
    INFO(r.out << r.err);
    CHECK(r.status == 2);
    const std::string said = json_flag.empty() ? r.err : json::parse(r.out)["error"].get<std::string>();
    CHECK(has(said, "40 of its 40 files could not be read"));
    CHECK(has(said, "Permission denied"));
    CHECK(has(said, "and 37 more"));
  }
  // Only FIFOs and links to nothing named .so (root too): not read, and said.
  auto odd = tmp / "odd";
  fs::create_directories(odd);
  REQUIRE(::mkfifo((odd / "libfifo.so").c_str(), 0644) == 0);
  fs::create_symlink(odd / "gone.so.1", odd / "libgone.so");
  auto o = test::archbuild({"inspect", odd.string()}, quick());
  CHECK(o.status == 2);
  CHECK(has(o.err, "2 entries are links, FIFOs, sockets or devices"));

  // A mirror nobody may write (another user's): publish is exit 2 naming the lock; --verify reads it.
  auto w = test::make_wheel(tmp / "in", "norm", "1.0", "norm");
  auto mirror = tmp / "mirror";
  REQUIRE(test::archbuild({"publish", w.string(), "--mirror", mirror.string()}, quick()).status == 0);
  auto p = nobody({"publish", w.string(), "--mirror", mirror.string()}, home);
  INFO(p.err);
  CHECK(p.status == 2);
  CHECK(has(p.err, "Permission denied"));
  auto v = nobody({"publish", "--verify", "--mirror", mirror.string()}, home);
  INFO(v.out << v.err);
  CHECK(v.status == 0);
  // A lock file nobody may open in a folder nobody may write to: exit 2, not a failed stage (4).
  auto shared = tmp / "shared";
  REQUIRE(test::archbuild({"publish", w.string(), "--mirror", shared.string()}, quick()).status == 0);
  fs::permissions(shared, fs::perms::all);
  fs::permissions(shared / ".lock", fs::perms::owner_read | fs::perms::owner_write);
  auto l = nobody({"publish", w.string(), "--mirror", shared.string()}, home);
  INFO(l.err);
  CHECK(l.status == 2);
  CHECK(has(l.err, ".lock"));
}
