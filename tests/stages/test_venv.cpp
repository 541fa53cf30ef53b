// The build venv's decisions that need no process: which requirements pip gets and which a host
// program satisfies, PEP 440 specifiers for host versions, the cmake choice, provider hints,
// merged advice; then, with /usr/bin/python3, the fallback over a venv's packages and pip's
// handling of an unreachable index and of --offline (a local wheel built here, no network).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "run/reporter.hpp"
#include "run/runner.hpp"
#include "stages/venv.hpp"
#include "store/layout.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace s = archbuild::stages;
using archbuild::Version;

namespace {

archbuild::contract::Requirement req(const std::string& name, const std::string& spec = "",
                                     const std::string& file = "requirements-build.txt") {
  archbuild::contract::Requirement r;
  r.name = name;
  r.specifier = spec;
  r.where = {file, 1};
  return r;
}

s::VenvRequest base() {
  s::VenvRequest q;
  q.interpreter = "/usr/bin/python3";
  q.interpreter_version = *Version::parse("3.11.2");
  q.host_tools = {{"cmake", "/usr/bin/cmake"}, {"ninja", "/usr/bin/ninja"}};
  q.host_tool_versions = {{"cmake", *Version::parse("3.25.1")}};
  return q;
}

}  // namespace

TEST_CASE("venv: specifiers on host versions", "[venv]") {
  auto v = *Version::parse("3.25.1");
  CHECK(s::specifier_allows(">=3.18", v));
  CHECK(s::specifier_allows(">=3.18,<4", v));
  CHECK_FALSE(s::specifier_allows(">=3.27", v));
  CHECK(s::specifier_allows("==3.25.*", v));
  CHECK_FALSE(s::specifier_allows("!=3.25.*", v));
  CHECK(s::specifier_allows("~=3.20", v));
  CHECK_FALSE(s::specifier_allows("~=3.26.0", v));
  CHECK_FALSE(s::specifier_allows(">=garbage", v));
  CHECK(s::specifier_allows("", v));
}

TEST_CASE("venv: pip gets the tree's build requirements, and the host's cmake and ninja stand in where they fit",
          "[venv]") {
  auto q = base();
  q.requirements = {req("setuptools", ">=61", "pyproject.toml"), req("wheel", "", "pyproject.toml"),
                    req("cmake", ">=3.18"), req("ninja"), req("archbuild_tinydep", ">=1.0"),
                    req("hypothesis", "", "requirements.txt")};
  q.driver_modules = {"setuptools", "wheel"};
  auto p = s::pip_requirements(q);
  CHECK(p.pip == std::vector<std::string>{"archbuild_tinydep>=1.0", "setuptools>=61", "wheel"});
  REQUIRE(p.from_host.size() == 2);
  CHECK(p.from_host[0] == "cmake>=3.18: /usr/bin/cmake 3.25.1");
  CHECK(p.from_host[1] == "ninja: /usr/bin/ninja");
  CHECK_FALSE(p.cmake_problem);
}

TEST_CASE("venv: a host cmake older than the tree's minimum or newer than the recipe's maximum gives way to pip's",
          "[venv]") {
  auto q = base();
  q.requirements = {req("setuptools")};
  q.cmake_min = *Version::parse("3.27");
  q.cmake_min_where = "CMakeLists.txt:1";
  auto p = s::pip_requirements(q);
  REQUIRE(p.cmake_problem);
  CHECK(p.cmake_problem->find("3.27") != std::string::npos);
  CHECK(p.cmake_problem->find("3.25.1") != std::string::npos);
  CHECK(std::find(p.pip.begin(), p.pip.end(), "cmake>=3.27") != p.pip.end());

  auto m = base();
  m.host_tool_versions["cmake"] = *Version::parse("4.1.2");
  m.cmake_max = *Version::parse("3.31");
  m.requirements = {req("cmake", ">=3.18")};
  auto pm = s::pip_requirements(m);
  REQUIRE(pm.cmake_problem);
  CHECK(pm.cmake_problem->find("cmake_max") != std::string::npos);
  // The tree's own cmake requirement goes to pip, within the recipe's maximum.
  CHECK(pm.pip == std::vector<std::string>{"cmake>=3.18,<3.32"});
  CHECK(pm.from_host.empty());
  // The same minimum in the tree's specifier and its cmake_minimum_required: one clause.
  m.cmake_min = *Version::parse("3.18");
  CHECK(s::pip_requirements(m).pip == std::vector<std::string>{"cmake>=3.18,<3.32"});

  auto ok = base();
  ok.host_tool_versions["cmake"] = *Version::parse("3.31.6");
  ok.cmake_max = *Version::parse("3.31");
  CHECK_FALSE(s::pip_requirements(ok).cmake_problem);
}

TEST_CASE("venv: a missing requirement is named with what provides it", "[venv]") {
  CHECK(s::provider_hint("numpy", "/usr/bin/python3") ==
        "Debian package python3-numpy, or --find-links a wheelhouse that has it, or --index-url a mirror");
  CHECK(s::provider_hint("numpy", "/opt/py/bin/python3") == "--find-links a wheelhouse that has it, or --index-url a mirror");
  CHECK(s::provider_hint("cmake", "/usr/bin/python3").find("pip package cmake") != std::string::npos);
  CHECK(s::canonical_name("Typing_Extensions") == "typing-extensions");
  CHECK(s::canonical_name("scikit_build.core") == "scikit-build-core");
}

TEST_CASE("venv: a requirement of the tree on the torch wheel given is left to that file and never asked of pip",
          "[venv]") {
  auto q = base();
  q.requirements = {req("setuptools"), req("torch", ">=2.14")};
  q.wheels = {"/out/torch-2.14.0+cu130.sm90-cp311-cp311-manylinux_2_28_x86_64.whl"};
  auto p = s::pip_requirements(q);
  CHECK(p.pip == std::vector<std::string>{"setuptools"});
  REQUIRE(p.from_wheels.size() == 1);
  CHECK(p.from_wheels[0] == "torch>=2.14: torch-2.14.0+cu130.sm90-cp311-cp311-manylinux_2_28_x86_64.whl");
}

TEST_CASE("venv: specifiers of one package are merged, every clause once", "[venv]") {
  CHECK(s::merge_specifiers({">=77.0.0,<80.0", ">=77.0.0,<82"}) == ">=77.0.0,<80.0,<82");
  CHECK(s::merge_specifiers({">= 61", "", ">=61"}) == ">=61");
  CHECK(s::merge_specifiers({}) == "");
}

TEST_CASE("venv: what is missing is one line per package, naming a Debian package only where it can help", "[venv]") {
  std::vector<s::ProbedRequirement> probed = {
      {"setuptools>=77.0.0,<80.0", "setuptools", true, "66.1.1", false},
      {"wheel", "wheel", true, "0.38.4", true},
      {"numpy>=1.22", "numpy", true, std::nullopt, false},
      {"setuptools>=77.0.0,<82", "setuptools", true, "66.1.1", false},
      {"pywin32; sys_platform == 'win32'", "pywin32", false, std::nullopt, true},
      {"cmake>=3.30", "cmake", true, std::nullopt, false},
  };
  auto lines = s::missing_lines(probed, "/usr/bin/python3", {{"cmake", "the host's is 3.25.1"}});
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] ==
        "setuptools>=77.0.0,<80.0,<82: 66.1.1 installed does not satisfy it; a wheelhouse that has it (--find-links "
        "DIR), an index that has it (--index-url URL), or a --python whose own setuptools satisfies it");
  CHECK(lines[1] ==
        "numpy>=1.22: not installed; Debian package python3-numpy, or --find-links a wheelhouse that has it, or "
        "--index-url a mirror");
  CHECK(lines[2].rfind("cmake>=3.30 (the host's is 3.25.1): not installed; the pip package cmake", 0) == 0);
  for (const auto& l : lines) CHECK(l.find('\n') == std::string::npos);
}

TEST_CASE("venv: pip's lines that say an index did not answer", "[venv]") {
  CHECK(s::pip_index_unreachable(
      "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken "
      "by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPConnection object at 0x7f>: Failed to establish a "
      "new connection: [Errno 111] Connection refused')': /simple/setuptools/"));
  CHECK(s::pip_index_unreachable("Could not fetch URL https://pypi.org/simple/pip/: connection error: timed out"));
  CHECK_FALSE(s::pip_index_unreachable("ERROR: Could not find a version that satisfies the requirement x"));
  CHECK_FALSE(s::pip_index_unreachable("Looking in indexes: http://127.0.0.1:9/simple"));
  CHECK_FALSE(s::pip_index_unreachable(
      "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken "
      "by 'ReadTimeoutError(\"HTTPSConnectionPool(host='files.example', port=443): Read timed out. (read timeout=15)\")'"));
}

namespace {

namespace t = archbuild::test;
namespace fs = std::filesystem;

const char* const kSystemPython = "/usr/bin/python3";

std::string python_missing() {
  if (!fs::exists(kSystemPython)) return std::string("no ") + kSystemPython;
  if (t::run(kSystemPython, {"-c", "import venv, pip"}).status != 0) return std::string(kSystemPython) + " lacks venv or pip";
  return "";
}

Version system_python_version() {
  auto r = t::run(kSystemPython, {"-c", "import platform; print(platform.python_version())"});
  REQUIRE(r.status == 0);
  auto v = Version::parse(r.out.substr(0, r.out.find('\n')));
  REQUIRE(v);
  return *v;
}

// The package archbuild-marker 1.0 as a file tree an interpreter can see (a dist-info beside the
// module), laid out at `dir`.
void marker_tree(const fs::path& dir) {
  fs::create_directories(dir / "archbuild_marker");
  fs::create_directories(dir / "archbuild_marker-1.0.dist-info");
  std::ofstream(dir / "archbuild_marker" / "__init__.py") << "VERSION = '1.0'\n";
  std::ofstream(dir / "archbuild_marker-1.0.dist-info" / "METADATA")
      << "Metadata-Version: 2.1\nName: archbuild-marker\nVersion: 1.0\n";
}

// The same package as a wheel in `wheelhouse`, zipped by the system's python (no setuptools, no
// network).
void marker_wheel(const fs::path& wheelhouse) {
  fs::create_directories(wheelhouse);
  const char* script = R"PY(
import base64, hashlib, sys, zipfile
files = {
    "archbuild_marker/__init__.py": "VERSION = '1.0'\n",
    "archbuild_marker-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: archbuild-marker\nVersion: 1.0\n",
    "archbuild_marker-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(sys.argv[1] + "/archbuild_marker-1.0-py3-none-any.whl", "w") as z:
    for name, text in files.items():
        data = text.encode()
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("archbuild_marker-1.0.dist-info/RECORD,,")
    z.writestr("archbuild_marker-1.0.dist-info/RECORD", "\n".join(record) + "\n")
)PY";
  auto r = t::run(kSystemPython, {"-c", script, wheelhouse.string()});
  INFO(r.err);
  REQUIRE(r.status == 0);
}

// A port on 127.0.0.1 that nothing listens on: bound by the test, then closed.
int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

s::VenvRequest marker_request(const fs::path& python, std::map<std::string, std::string> env) {
  s::VenvRequest q;
  q.interpreter = python;
  q.interpreter_version = system_python_version();
  q.requirements = {req("archbuild-marker", ">=1.0")};
  env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  env["PIP_CONFIG_FILE"] = "/dev/null";  // no pip.conf of this machine
  q.env = std::move(env);
  return q;
}

struct Made {
  archbuild::Result<archbuild::plan::BuildVenv> venv;
  std::string log;  // every venv log of the cache, concatenated
};

Made make_venv(const s::VenvRequest& q, const fs::path& cache) {
  archbuild::store::Layout layout(cache);
  archbuild::run::ProcessRunner runner;
  std::ostringstream messages;
  auto reporter = archbuild::run::make_reporter(archbuild::run::ReporterKind::plain, messages);
  Made m{s::prepare_build_venv(q, layout, runner, *reporter), ""};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(layout.venvs_dir(), ec))
    if (e.path().extension() == ".log") m.log += t::read_file(e.path());
  return m;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("venv: the fallback venv of a venv's python sees that venv's packages, and each such venv has its own",
          "[venv][python]") {
  if (auto why = python_missing(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir tmp;
  // V1: a venv of the system python (its pip comes from the system's site-packages) with
  // archbuild-marker in its own site-packages only, through a .pth like an editable install.
  auto v1 = tmp / "v1", v2 = tmp / "v2";
  for (const auto& v : {v1, v2}) {
    auto r = t::run(kSystemPython, {"-m", "venv", "--without-pip", "--system-site-packages", v.string()});
    INFO(r.err);
    REQUIRE(r.status == 0);
  }
  auto ver = system_python_version();
  fs::path site = v1 / "lib" / fmt::format("python{}.{}", ver.parts[0], ver.parts[1]) / "site-packages";
  REQUIRE(fs::is_directory(site));
  marker_tree(tmp / "marker");
  std::ofstream(site / "archbuild_marker.pth") << (tmp / "marker").string() << "\n";
  REQUIRE(t::run((v1 / "bin/python").string(), {"-c", "import archbuild_marker"}).status == 0);
  REQUIRE(t::run(kSystemPython, {"-c", "import archbuild_marker"}).status != 0);

  // No index, no wheelhouse: pip fails, the fallback must find the package in V1.
  auto m = make_venv(marker_request(v1 / "bin/python", {{"PIP_NO_INDEX", "1"}}), tmp / "cache");
  INFO(m.log);
  REQUIRE(m.venv);
  CHECK(m.venv->system_site_packages);
  CHECK(m.venv->packages["archbuild-marker"] == "1.0");
  CHECK(m.venv->packages.count("pip") == 1);  // V1 sees the system's packages, so the build venv does
  std::string sources;
  for (const auto& src : m.venv->sources) sources += src + "\n";
  CHECK(sources.find("site-packages of the venv " + v1.string()) != std::string::npos);
  auto imp = t::run(m.venv->python.string(), {"-c", "import archbuild_marker"});
  INFO(imp.err);
  CHECK(imp.status == 0);

  // V2, of the same base interpreter without the package: not V1's venv reused, exit 3.
  auto m2 = make_venv(marker_request(v2 / "bin/python", {{"PIP_NO_INDEX", "1"}}), tmp / "cache");
  REQUIRE_FALSE(m2.venv);
  CHECK(m2.venv.error().exit == archbuild::Exit::missing_tool);
  CHECK(m2.venv.error().message.find("archbuild-marker>=1.0: not installed") != std::string::npos);
}

TEST_CASE("venv: an index that refuses connections is tried once, not by the fallback, and said", "[venv][python]") {
  if (auto why = python_missing(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir tmp;
  std::string index = fmt::format("http://127.0.0.1:{}/simple", closed_port());
  auto m = make_venv(marker_request(kSystemPython, {{"PIP_INDEX_URL", index}}), tmp / "cache");
  INFO(m.log);
  REQUIRE_FALSE(m.venv);
  CHECK(m.venv.error().exit == archbuild::Exit::missing_tool);
  CHECK(m.venv.error().message.find("the package index is unreachable") != std::string::npos);
  // One retry of the one page the first pip asks for; the fallback's pip does not ask.
  CHECK(count(m.log, "Retrying (") == 1);
  CHECK(count(m.log, "Looking in indexes") == 1);

  // With a wheelhouse, the venv is made from it and its sources say the index did not answer.
  marker_wheel(tmp / "wheels");
  auto w = make_venv(marker_request(kSystemPython, {{"PIP_INDEX_URL", index}, {"PIP_FIND_LINKS", (tmp / "wheels").string()}}),
                     tmp / "cache2");
  INFO(w.log);
  REQUIRE(w.venv);
  CHECK(w.venv->packages["archbuild-marker"] == "1.0");
  REQUIRE_FALSE(w.venv->sources.empty());
  CHECK(w.venv->sources[0] == "index " + index + " (unreachable: not asked again)");
}

TEST_CASE("venv: --offline gives pip no index, only the wheelhouse", "[venv][python]") {
  if (auto why = python_missing(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir tmp;
  marker_wheel(tmp / "wheels");
  std::string index = fmt::format("http://127.0.0.1:{}/simple", closed_port());
  auto q = marker_request(kSystemPython, {{"PIP_INDEX_URL", index}, {"PIP_FIND_LINKS", (tmp / "wheels").string()}});
  q.offline = true;
  auto m = make_venv(q, tmp / "cache");
  INFO(m.log);
  REQUIRE(m.venv);
  CHECK(m.venv->packages["archbuild-marker"] == "1.0");
  CHECK(count(m.log, "Looking in indexes") == 0);
  CHECK(count(m.log, "Retrying (") == 0);
  CHECK(std::find(m.venv->sources.begin(), m.venv->sources.end(), "no index (--offline)") != m.venv->sources.end());
}

namespace {

// Counts what it starts, then starts it.
struct CountingRunner : archbuild::run::Runner {
  archbuild::run::ProcessRunner real;
  int started = 0;
  archbuild::run::CommandResult run(const archbuild::run::Command& cmd, const archbuild::run::LineCallback& on_line,
                                    const archbuild::run::TickCallback& on_tick) override {
    ++started;
    return real.run(cmd, on_line, on_tick);
  }
};

}  // namespace

TEST_CASE("venv: a venv over the system's packages is reused without a process while its sys.path is unchanged",
          "[venv][python]") {
  if (auto why = python_missing(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  if (t::run(kSystemPython, {"-c", "import wheel"}).status != 0) {
    WARN("##archbuild-skip## " << kSystemPython << " has no wheel module (python3-wheel) for the fallback to find");
    return;
  }
  t::TempDir tmp;
  // No index, no wheelhouse: only the fallback over the system's packages has `wheel`.
  s::VenvRequest q;
  q.interpreter = kSystemPython;
  q.interpreter_version = system_python_version();
  q.requirements = {req("wheel", "")};
  q.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"PIP_CONFIG_FILE", "/dev/null"}};
  q.offline = true;
  auto made = make_venv(q, tmp / "cache");
  INFO(made.log);
  REQUIRE(made.venv);
  REQUIRE(made.venv->system_site_packages);

  archbuild::store::Layout layout(tmp / "cache");
  std::ostringstream messages;
  auto reporter = archbuild::run::make_reporter(archbuild::run::ReporterKind::plain, messages);
  CountingRunner runner;
  auto again = s::prepare_build_venv(q, layout, runner, *reporter);
  REQUIRE(again);
  CHECK(again->reused);
  CHECK(runner.started == 0);  // the recorded answer holds
  CHECK(again->packages == made.venv->packages);

  // A package appears in a folder of its sys.path: probed again, once.
  fs::path site = fs::canonical(made.venv->dir) / "lib" /
                  fmt::format("python{}.{}", q.interpreter_version.major(), q.interpreter_version.minor()) / "site-packages";
  REQUIRE(fs::is_directory(site));
  marker_tree(site);
  auto changed = s::prepare_build_venv(q, layout, runner, *reporter);
  REQUIRE(changed);
  CHECK(runner.started == 1);
  CHECK(changed->packages["archbuild-marker"] == "1.0");
  runner.started = 0;
  REQUIRE(s::prepare_build_venv(q, layout, runner, *reporter));
  CHECK(runner.started == 0);  // and that answer is recorded in turn
}

// Issue 46: PyTorch's requirements-build.txt ends with a bare `pip` line
// (pytorch/pytorch@1975038f:requirements-build.txt, tests/fixtures/pytorch-real): the venv's own
// pip satisfies it, so it is never asked of an index or a wheelhouse.
TEST_CASE("venv: the tree's bare `pip` is the venv's own, never asked of pip", "[venv]") {
  auto q = base();
  auto pip_line = req("pip", "");
  pip_line.where = {"requirements-build.txt", 11};
  q.requirements = {req("six"), pip_line};
  q.driver_modules = {"setuptools", "pip"};
  auto p = s::pip_requirements(q);
  CHECK(p.pip == std::vector<std::string>{"setuptools", "six"});
  CHECK(p.venv_pip);
  REQUIRE(p.from_venv.size() == 1);
  CHECK(p.from_venv[0] == "pip (requirements-build.txt:11): the venv's own pip (ensurepip, no index)");
  // A version asked for is pip's to install.
  q.requirements = {req("pip", ">=99")};
  auto v = s::pip_requirements(q);
  CHECK_FALSE(v.venv_pip);
  CHECK(std::find(v.pip.begin(), v.pip.end(), "pip>=99") != v.pip.end());
}

TEST_CASE("venv: offline with the `pip` line the venv is made isolated, and over the system's packages it says which",
          "[venv][python]") {
  if (auto why = python_missing(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  if (t::run(kSystemPython, {"-c", "import ensurepip, six"}).status != 0) {
    WARN("##archbuild-skip## " << kSystemPython << " has no ensurepip or six (python3-venv, python3-six)");
    return;
  }
  t::TempDir tmp;
  marker_wheel(tmp / "wheels");
  // The wheelhouse has what is asked: `pip` does not make the isolated venv fail.
  auto q = marker_request(kSystemPython, {{"PIP_FIND_LINKS", (tmp / "wheels").string()}});
  q.requirements.push_back(req("pip", ""));
  q.offline = true;
  auto m = make_venv(q, tmp / "cache");
  INFO(m.log);
  REQUIRE(m.venv);
  CHECK_FALSE(m.venv->system_site_packages);
  CHECK(m.venv->packages.count("pip") == 1);  // its own
  CHECK(m.venv->from_system.empty());
  REQUIRE(m.venv->from_venv.size() == 1);

  // `six` is in no wheelhouse: the venv over the interpreter's packages, and it says whose six it is.
  s::VenvRequest o;
  o.interpreter = kSystemPython;
  o.interpreter_version = system_python_version();
  o.requirements = {req("six", "")};
  o.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"PIP_CONFIG_FILE", "/dev/null"}};
  o.offline = true;
  auto f = make_venv(o, tmp / "cache2");
  INFO(f.log);
  REQUIRE(f.venv);
  REQUIRE(f.venv->system_site_packages);
  REQUIRE(f.venv->from_system.size() == 1);
  CHECK_THAT(f.venv->from_system[0], Catch::StartsWith("six ") && Catch::Contains("dist-packages"));
}
