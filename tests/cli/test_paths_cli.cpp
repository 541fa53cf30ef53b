// Every command that takes a path, given every kind of path that is not what it expects: a file
// of the wrong content, a directory, a FIFO, a unix socket, a device, a dangling link, a link
// loop, nothing, a path too long for the system, a name with control characters (and, when not
// root, an unreadable file). Each must end (a FIFO opened for reading waits forever), with the
// documented status 2 (never a signal, never 0), one line on stderr naming the path as
// text::quoted writes it, and with --json one JSON document holding "error" and "exit".
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "mirror/make_wheel.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A kind of path: made under `dir`, its name ending in `ext` (".whl", ".toml") where it has one.
struct PathKind {
  std::string name;
  std::function<fs::path(const fs::path& dir, const std::string& ext)> make;
};

std::vector<PathKind> path_kinds() {
  std::vector<PathKind> kinds = {
      {"a regular file of the wrong content",
       [](const fs::path& d, const std::string& ext) {
         auto p = d / ("wrong" + ext);
         std::ofstream(p) << "this is not what the option expects\n";
         // Executable, so that --python runs it (/bin/true-like) instead of failing to start.
         fs::permissions(p, fs::perms::owner_all);
         return p;
       }},
      {"a directory",
       [](const fs::path& d, const std::string& ext) {
         auto p = d / ("dir" + ext);
         fs::create_directories(p);
         return p;
       }},
      {"a FIFO",
       [](const fs::path& d, const std::string& ext) {
         auto p = d / ("fifo" + ext);
         REQUIRE(::mkfifo(p.c_str(), 0644) == 0);
         return p;
       }},
      {"a unix socket",
       [](const fs::path& d, const std::string& ext) {
         auto p = d / ("sock" + ext);
         int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
         REQUIRE(fd >= 0);
         sockaddr_un addr{};
         addr.sun_family = AF_UNIX;
         REQUIRE(p.string().size() < sizeof(addr.sun_path));
         std::strncpy(addr.sun_path, p.c_str(), sizeof(addr.sun_path) - 1);
         REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
         ::close(fd);  // the socket file stays
         return p;
       }},
      {"a character device", [](const fs::path&, const std::string&) { return fs::path("/dev/null"); }},
      {"a dangling link",
       [](const fs::path& d, const std::string& ext) {
         auto p = d / ("dangling" + ext);
         fs::create_symlink(d / "nothing-here", p);
         return p;
       }},
      {"a link loop",
       [](const fs::path& d, const std::string& ext) {
         auto a = d / ("loop-a" + ext), b = d / ("loop-b" + ext);
         fs::create_symlink(b, a);
         fs::create_symlink(a, b);
         return a;
       }},
      {"nothing there", [](const fs::path& d, const std::string& ext) { return d / ("missing" + ext); }},
      {"a path too long for the system",
       [](const fs::path& d, const std::string& ext) {
         fs::path p = d;
         while (p.string().size() <= 4200) p /= std::string(200, 'x');
         return fs::path(p.string() + ext);
       }},
      {"a name with control characters",
       [](const fs::path& d, const std::string& ext) { return d / ("bad\n\x1b[31mname" + ext); }},
  };
  // root reads a chmod 000 file all the same: the kind is only tried where it means something.
  if (::geteuid() != 0)
    kinds.push_back({"an unreadable file", [](const fs::path& d, const std::string& ext) {
                       auto p = d / ("unreadable" + ext);
                       std::ofstream(p) << "secret\n";
                       fs::permissions(p, fs::perms::none);
                       return p;
                     }});
  return kinds;
}

// An argument of a command that takes a path.
struct PathArg {
  std::string name;  // "publish WHEEL"
  std::string ext;   // what the expected file's name ends in
  std::function<std::vector<std::string>(const std::string& path, const fs::path& work)> argv;
  // Kinds that are valid input here (a directory where one is expected), with why they are left out.
  std::set<std::string> valid;
  // Kinds documented with another status than 2 (inspect --python: no interpreter is exit 3).
  std::map<std::string, int> status = {};
};

std::size_t lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("every command that takes a path refuses every kind of wrong path: exit 2, one line naming it",
          "[cli][paths]") {
  test::TempDir tmp;
  const auto wheel = test::make_wheel(tmp / "good", "pkg", "1.0", "pkg");
  const std::string recipe = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";
  std::vector<PathArg> args = {
      {"inspect PATH", ".so", [](const std::string& p, const fs::path&) { return std::vector<std::string>{"inspect", p}; },
       {}},
      // README: 3 when the interpreter is missing or does not run; 2 for a path that is no file.
      {"inspect --python PATH", "",
       [](const std::string& p, const fs::path&) { return std::vector<std::string>{"inspect", "--python", p}; }, {},
       {{"a regular file of the wrong content", 3}, {"nothing there", 3}, {"a dangling link", 3},
        {"a name with control characters", 3}}},
      {"validate WHEEL", ".whl",
       [](const std::string& p, const fs::path&) {
         return std::vector<std::string>{"validate", p, "--sm", "90", "--no-import", "--no-smoke"};
       },
       {}},
      {"publish WHEEL", ".whl",
       [](const std::string& p, const fs::path& work) {
         return std::vector<std::string>{"publish", p, "--mirror", (work / "mirror").string()};
       },
       {}},
      // A directory is what --mirror takes, and a missing one is created.
      {"publish --mirror DIR", "",
       [&](const std::string& p, const fs::path&) {
         return std::vector<std::string>{"publish", wheel.string(), "--mirror", p};
       },
       {"a directory", "nothing there", "a name with control characters"}},
      {"publish --verify --mirror DIR", "",
       [](const std::string& p, const fs::path&) {
         return std::vector<std::string>{"publish", "--verify", "--mirror", p};
       },
       {"a directory"}},
      {"resolve --recipe FILE", ".toml",
       [](const std::string& p, const fs::path&) {
         return std::vector<std::string>{"resolve", "--sm", "90", "--recipe", p};
       },
       {}},
      {"plan --recipe FILE", ".toml",
       [](const std::string& p, const fs::path&) {
         return std::vector<std::string>{"plan", "--sm", "90", "--recipe", p};
       },
       {}},
      {"matrix --recipe FILE", ".toml",
       [](const std::string& p, const fs::path&) {
         return std::vector<std::string>{"matrix", "--sm", "90", "--recipe", p};
       },
       {}},
      {"resolve --python PATH", "",
       [&](const std::string& p, const fs::path&) {
         return std::vector<std::string>{"resolve", "--sm", "90", "--recipe", recipe, "--python", p};
       },
       {}},
  };

  const auto kinds = path_kinds();
  std::size_t tried = 0;
  for (const auto& arg : args) {
    for (const auto& kind : kinds) {
      if (arg.valid.count(kind.name)) continue;
      DYNAMIC_SECTION(arg.name << " given " << kind.name) {
        test::TempDir work;
        const fs::path path = kind.make(work.path(), arg.ext);
        const std::string shown = text::quoted(path.string());
        test::RunOptions quick;
        quick.timeout = std::chrono::seconds(120);  // a hang, not a slow command
        std::vector<std::string> argv = {"--cache-dir", (work / "cache").string()};
        for (auto& a : arg.argv(path.string(), work.path())) argv.push_back(a);
        auto r = test::archbuild(argv, quick);
        ++tried;
        INFO("archbuild " << text::join(argv, " ") << "\nstderr: " << r.err);
        const int expected = arg.status.count(kind.name) ? arg.status.at(kind.name) : 2;
        CHECK(r.status == expected);
        CHECK(lines(r.err) == 1);
        // A file read and found wrong is named where in it (TOML: file:line:column, unquoted).
        const bool named = r.err.find(shown) != std::string::npos ||
                           (kind.name == "a regular file of the wrong content" &&
                            r.err.find(path.string() + ":") != std::string::npos);
        CHECK(named);

        std::vector<std::string> with_json = argv;
        with_json.insert(with_json.begin(), "--json");
        auto j = test::archbuild(with_json, quick);
        ++tried;
        INFO("--json stdout: " << j.out);
        CHECK(j.status == expected);
        auto doc = json::parse(j.out, nullptr, false);
        REQUIRE_FALSE(doc.is_discarded());
        CHECK(doc.value("exit", -1) == expected);
        // resolve and plan print their refusal as the resolution document, its line in "message"
        // (cli/resolve_common.cpp's format, not this change's).
        const char* key = doc.contains("error") ? "error" : "message";
        REQUIRE(doc.contains(key));
        CHECK(doc[key].is_string());
        if (doc[key].is_string())
          CHECK((doc[key].get<std::string>().find(shown) != std::string::npos ||
                 (kind.name == "a regular file of the wrong content" &&
                  doc[key].get<std::string>().find(path.string() + ":") != std::string::npos)));
        // Nothing made where the bad path was (a FIFO is still a FIFO, not a file).
        if (kind.name == "a FIFO") CHECK(fs::is_fifo(path));
      }
    }
  }
}

// --source DIR is read only once the plan resolved: on a host where it does not (no nvcc, no
// python3 with the build modules), the kinds cannot reach the tree walk and are skipped.
TEST_CASE("plan --source refuses every kind of path that is not a directory", "[cli][paths]") {
  test::TempDir tmp;
  const std::string recipe = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";
  auto plan = [&](const std::string& source, bool json_doc, const fs::path& cache) {
    std::vector<std::string> a = {"--cache-dir", cache.string(), "-q", "plan", "--sm", "90", "--recipe", recipe,
                                  "--python", "/usr/bin/python3", "--source", source};
    if (json_doc) a.insert(a.begin(), "--json");
    test::RunOptions quick;
    quick.timeout = std::chrono::seconds(180);
    return test::archbuild(a, quick);
  };
  auto good = plan(std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch", false, tmp / "cache");
  if (good.status != 0) {
    WARN("##archbuild-skip## plan of the example does not resolve here (exit " << good.status << "): " << good.err);
    return;
  }
  for (const auto& kind : path_kinds()) {
    if (kind.name == "a directory") continue;  // what it takes
    DYNAMIC_SECTION("--source given " << kind.name) {
      test::TempDir work;
      const fs::path path = kind.make(work.path(), "");
      const std::string shown = text::quoted(path.string());
      auto r = plan(path.string(), false, tmp / "cache");
      INFO(r.err);
      CHECK(r.status == 2);
      CHECK(lines(r.err) == 1);
      CHECK(r.err.find(shown) != std::string::npos);
      auto j = plan(path.string(), true, tmp / "cache");
      auto doc = json::parse(j.out, nullptr, false);
      REQUIRE_FALSE(doc.is_discarded());
      CHECK(doc.value("exit", -1) == 2);
      CHECK((doc.contains("error") || doc.contains("message")));
    }
  }
  // A recipe's source.path that is no folder is named as the recipe's, not as a --source given.
  auto mine = tmp.write("mine.toml", "extends = \"" + recipe + "\"\n[source]\npath = \"no-such-tree\"\n");
  std::vector<std::string> a = {"--cache-dir", (tmp / "cache").string(), "-q", "plan", "--sm", "90",
                                "--recipe", mine.string(), "--python", "/usr/bin/python3"};
  auto r = test::archbuild(a);
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("source.path of " + mine.string()) != std::string::npos);
  CHECK(r.err.find("--source") == std::string::npos);
}

// A program that runs but is no Python: named as such, not "python3.X is not on PATH".
TEST_CASE("resolve --python /bin/true names it as not a Python interpreter", "[cli][paths]") {
  const std::string recipe = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";
  test::TempDir tmp;
  auto r = test::archbuild({"--cache-dir", (tmp / "cache").string(), "resolve", "--sm", "90", "--recipe", recipe,
                            "--python", "/bin/true"});
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("--python \"/bin/true\": not a Python interpreter") != std::string::npos);
  CHECK(r.err.find("is not on PATH") == std::string::npos);
}

TEST_CASE("a FIFO as the torch wheel or in a mirror's pages is refused without blocking", "[cli][paths]") {
  const std::string recipe = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";
  test::TempDir tmp;
  fs::path fifo = tmp / "torch-2.15.0-cp311-cp311-linux_x86_64.whl";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  test::RunOptions quick;
  quick.timeout = std::chrono::seconds(120);  // a hang, not a slow command
  auto r = test::archbuild({"--cache-dir", (tmp / "cache").string(), "plan", "--sm", "90", "--recipe", recipe,
                            "--torch-wheel", fifo.string()},
                           quick);
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("FIFO") != std::string::npos);

  // publish --verify over a mirror whose simple/ holds a FIFO where a page is expected.
  fs::path mirror = tmp / "mirror";
  fs::create_directories(mirror / "simple" / "minitorch");
  std::ofstream(mirror / "manifest.json") << R"({"files": {}})";
  REQUIRE(::mkfifo((mirror / "simple" / "index.html").c_str(), 0644) == 0);
  REQUIRE(::mkfifo((mirror / "simple" / "minitorch" / "index.html").c_str(), 0644) == 0);
  auto v = test::archbuild({"publish", "--verify", "--mirror", mirror.string()}, quick);
  INFO(v.out << v.err);
  CHECK(v.status != -1);  // ended, not killed by the harness's limit
  CHECK(v.status != 0);
}

// An exception no rule turned into an Error is archbuild's own fault: it exits 70 (EX_SOFTWARE),
// never 2 ("bad input"), and asks for a report. Its old trigger, a non-UTF-8 file name in a --json
// document, is handled now (U+FFFD, tests/cli/test_hostile_cli.cpp), so the fault is injected.
TEST_CASE("an internal error has its own status (70) and asks for a report, in text and --json", "[cli][paths]") {
  test::TempDir tmp;
  const fs::path elf = tmp / "lib.so";
  fs::copy_file(ARCHBUILD_EXE, elf);
  auto r = test::archbuild({"inspect", "--json", elf.string()}, test::RunOptions{.env = {{"ARCHBUILD_TEST_FAULT", "internal"}}});
  INFO(r.err);
  CHECK(r.status == 70);
  CHECK(r.err.find("internal error: ") != std::string::npos);
  CHECK(r.err.find("please report it") != std::string::npos);
  const auto doc = json::parse(r.out);
  CHECK(doc.at("exit") == 70);
  CHECK(doc.at("error").get<std::string>().find("please report it") != std::string::npos);
}
