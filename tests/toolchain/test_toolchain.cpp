// toolchain/: the shipped CUDA facts, strict loading, the probe-output parsers, and discovery —
// both with a fake probe and with run::capture on fake toolkit trees (bin/nvcc as a script).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "run/capture.hpp"
#include "support/tempdir.hpp"
#include "toolchain/toolchain.hpp"

using namespace archbuild;
using namespace archbuild::toolchain;
namespace fs = std::filesystem;

namespace {

Version V(const char* s) { return *Version::parse(s); }
arch::Arch A(int major, int minor, arch::Variant v = arch::Variant::none) { return {{major, minor}, v}; }

const Toolchain& find(const std::vector<Toolchain>& all, const char* cuda) {
  for (const auto& t : all)
    if (t.cuda == V(cuda)) return t;
  FAIL("no toolchain " << cuda);
  throw;
}

// An executable file (the probe decides what it "prints").
fs::path exe(const test::TempDir& tmp, const std::string& rel, const std::string& content = "#!/bin/sh\nexit 1\n") {
  auto p = tmp.write(rel, content);
  fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec, fs::perm_options::replace);
  return p;
}

// A fake toolkit tree whose nvcc is a real script, for the run::capture probe.
fs::path fake_toolkit(const test::TempDir& tmp, const std::string& dir, const std::string& release,
                      const std::string& build, const std::string& archs, bool version_json) {
  exe(tmp, dir + "/bin/nvcc",
      "#!/bin/sh\n"
      "case \"$1\" in\n"
      "  --version) echo 'nvcc: NVIDIA (R) Cuda compiler driver'; echo 'Cuda compilation tools, release " +
          release + ", V" + build + "';;\n"
          "  --list-gpu-arch) for a in " + archs + "; do echo compute_$a; done;;\n"
          "  --dryrun) echo \"#\\$ _HERE_=$(cd \"$(dirname \"$0\")\" && pwd -P)\" >&2;;\n"
          "  *) exit 1;;\n"
          "esac\n");
  if (version_json)
    tmp.write(dir + "/version.json", "{\n  \"cuda\" : {\n    \"name\" : \"CUDA SDK\",\n    \"version\" : \"" + release +
                                         ".1\"\n  },\n  \"cuda_nvcc\" : {\"version\" : \"" + build + "\"}\n}\n");
  return tmp.path() / dir;
}

Probe real_probe() {
  return [](const std::vector<std::string>& argv) -> Result<ProbeOutput> {
    auto c = run::capture(argv);
    if (!c) return c.error();
    return ProbeOutput{c->status, c->out, c->err};
  };
}

// A probe that answers from a table and records what it was asked.
struct FakeProbe {
  std::map<std::string, ProbeOutput> answers;  // "argv0 argv1" -> output
  std::vector<std::string> asked;
  Probe probe() {
    return [this](const std::vector<std::string>& argv) -> Result<ProbeOutput> {
      std::string k = argv[0] + " " + (argv.size() > 1 ? argv[1] : "");
      asked.push_back(k);
      auto it = answers.find(k);
      if (it == answers.end()) return ProbeOutput{127, "", "not scripted"};
      return it->second;
    };
  }
};

}  // namespace

TEST_CASE("the shipped toolchains say what each CUDA compiles") {
  auto all = load_shipped();
  REQUIRE(all.ok());
  REQUIRE(all->size() == 11);
  CHECK(all->front().cuda == V("11.8"));
  CHECK(all->back().cuda == V("13.4"));

  const auto& c118 = find(*all, "11.8");
  CHECK(c118.compiles(A(3, 5)));
  CHECK(c118.compiles(A(9, 0)));
  CHECK_FALSE(c118.compiles(A(9, 0, arch::Variant::a)));
  CHECK_FALSE(c118.compiles(A(10, 0)));
  CHECK(c118.gcc.max->str() == "11");

  const auto& c128 = find(*all, "12.8");
  CHECK_FALSE(c128.compiles(A(3, 7)));
  CHECK(c128.compiles(A(12, 0)));
  CHECK(c128.compiles(A(12, 0, arch::Variant::a)));
  CHECK_FALSE(c128.compiles(A(12, 0, arch::Variant::f)));
  CHECK(c128.compiles(A(6, 1)));
  CHECK(c128.cu_tag() == "cu128");
  CHECK(c128.min_driver_text == "570.26");

  const auto& c129 = find(*all, "12.9");
  CHECK(c129.compiles(A(12, 0, arch::Variant::f)));
  CHECK(c129.compiles(A(10, 3)));
  CHECK(c129.compiles(A(6, 1)));  // the last to compile Pascal

  const auto& c130 = find(*all, "13.0");
  CHECK_FALSE(c130.compiles(A(6, 1)));
  CHECK_FALSE(c130.compiles(A(7, 0)));
  CHECK(c130.compiles(A(7, 5)));
  CHECK(c130.compiles(A(11, 0)));
  CHECK_FALSE(c130.compiles(A(10, 1)));  // renamed 11.0
  CHECK(c130.min_driver_text == "580.65.06");
  CHECK(c130.gcc.max->str() == "15");
  CHECK(c130.clang.max->str() == "20");
}

TEST_CASE("CUDA 12.9 alone has 10.1f, 13.1 - 13.3 compile what 13.0 does, 13.4 adds Rubin (10.7)") {
  auto all = load_shipped();
  REQUIRE(all.ok());
  CHECK(find(*all, "12.9").compiles(A(10, 1, arch::Variant::f)));
  for (const char* c : {"12.8", "13.0", "13.1", "13.2", "13.3", "13.4"}) {
    INFO("CUDA " << c);
    CHECK_FALSE(find(*all, c).compiles(A(10, 1, arch::Variant::f)));
  }
  const auto& c130 = find(*all, "13.0");
  for (const char* c : {"13.1", "13.2", "13.3"}) {
    INFO("CUDA " << c);
    const auto& t = find(*all, c);
    CHECK(t.archs.size() == c130.archs.size());
    for (const auto& a : c130.archs) CHECK(t.compiles(a));
    CHECK_FALSE(t.compiles(A(10, 7)));
    CHECK(t.gcc.max->str() == "15");
  }
  CHECK(find(*all, "13.1").min_driver_text == "590.44.01");
  CHECK(find(*all, "13.1").clang.max->str() == "20");  // the lower of two sources
  CHECK(find(*all, "13.2").clang.max->str() == "21");

  const auto& c134 = find(*all, "13.4");
  for (auto v : {arch::Variant::none, arch::Variant::a, arch::Variant::f}) CHECK(c134.compiles(A(10, 7, v)));
  for (const auto& a : c130.archs) CHECK(c134.compiles(a));
  CHECK_FALSE(c134.compiles(A(7, 0)));
  CHECK(c134.cu_tag() == "cu134");
  // Not verified upstream: conservative values that still let a resolution go through.
  CHECK(c134.gcc.max->str() == "15");
  CHECK(c134.clang.max->str() == "21");
  CHECK(c134.min_driver >= find(*all, "13.3").min_driver);
  CHECK_FALSE(c134.rejects(CompilerKind::gcc, V("14.2.0")));
  CHECK(c134.rejects(CompilerKind::gcc, V("16.1.0")));
}

TEST_CASE("host compiler acceptance follows the toolkit's range") {
  auto all = load_shipped();
  REQUIRE(all.ok());
  const auto& c128 = find(*all, "12.8");
  CHECK_FALSE(c128.rejects(CompilerKind::gcc, V("14.2.0")));
  CHECK_FALSE(c128.rejects(CompilerKind::gcc, V("12.2.0")));
  auto too_new = c128.rejects(CompilerKind::gcc, V("15.1.0"));
  REQUIRE(too_new);
  CHECK(too_new->find("GCC 15.1.0 is newer than CUDA 12.8 accepts (at most GCC 14)") != std::string::npos);
  CHECK(c128.rejects(CompilerKind::gcc, V("5.4.0")));
  CHECK(c128.rejects(CompilerKind::clang, V("20.1.0")));
  CHECK_FALSE(c128.rejects(CompilerKind::clang, V("19.1.7")));
}

TEST_CASE("toolchain files are loaded strictly") {
  test::TempDir tmp;
  const auto& data = arch::ArchData::shipped();
  auto err = [&](const std::string& name, const std::string& text) {
    auto r = load_toolchain(tmp.write(name, text), data);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit == Exit::bad_input);
    return r.error().message;
  };
  const std::string good = "cuda = \"12.8\"\nmin_driver = \"570.26\"\narchs = [\"9.0\", \"12.0a\"]\n";
  REQUIRE(load_toolchain(tmp.write("cuda-12.8.toml", good), data).ok());

  auto m = err("cuda-12.8.toml", "cuda = \"12.8\"\nmin_driver = \"570.26\"\narchs = [\"9.0\", \"9.5\"]\n");
  CHECK(m.find((tmp.path() / "cuda-12.8.toml").string() + ":3:17:") == 0);
  CHECK(m.find("no compute capability 9.5") != std::string::npos);

  m = err("cuda-12.6.toml", good);
  CHECK(m.find(":1:8:") != std::string::npos);
  CHECK(m.find("name it cuda-12.8.toml") != std::string::npos);

  m = err("cuda-12.8.toml", good + "\n[gcc]\nmax = \"fourteen\"\n");
  CHECK(m.find(":6:7:") != std::string::npos);
  CHECK(m.find("not a compiler version") != std::string::npos);

  m = err("cuda-12.8.toml", good + "min_drvier = \"1\"\n");
  CHECK(m.find("unknown key 'min_drvier'") != std::string::npos);

  m = err("cuda-12.8.toml", "cuda = \"12\"\n");
  CHECK(m.find(":1:8:") != std::string::npos);
  CHECK(m.find("MAJOR.MINOR") != std::string::npos);
}

TEST_CASE("probe output parsers") {
  const std::string nvcc = "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
                           "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\n"
                           "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n";
  CHECK(parse_nvcc_release(nvcc)->str() == "13.0");
  CHECK(parse_nvcc_build(nvcc)->str() == "13.0.88");
  CHECK_FALSE(parse_nvcc_release("hello"));
  CHECK(parse_cuda_version_json(R"({"cuda": {"name": "CUDA SDK", "version": "12.8.1"}})")->str() == "12.8.1");
  CHECK_FALSE(parse_cuda_version_json("{not json"));
  CHECK_FALSE(parse_cuda_version_json(R"({"cuda_nvcc": {"version": "12.8.93"}})"));
  auto ccs = parse_list_gpu_arch("compute_75\ncompute_80\ncompute_120\ncompute_121\n");
  REQUIRE(ccs.size() == 4);
  CHECK(ccs[2] == arch::Cc{12, 0});

  auto g = parse_compiler_version("g++ (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\n");
  REQUIRE(g);
  CHECK(g->first == CompilerKind::gcc);
  CHECK(g->second.str() == "12.2.0");
  auto u = parse_compiler_version("g++-13 (Ubuntu 13.2.0-4ubuntu3) 13.2.0\n");
  REQUIRE(u);
  CHECK(u->second.str() == "13.2.0");
  auto c = parse_compiler_version("Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu\n");
  REQUIRE(c);
  CHECK(c->first == CompilerKind::clang);
  CHECK(c->second.str() == "14.0.6");
  CHECK_FALSE(parse_compiler_version("icpx (R) oneAPI\n"));
  // cmake --version (Debian 12's; pip's wheels print the same first line).
  CHECK(parse_cmake_version("cmake version 3.25.1\n\nCMake suite maintained and supported by Kitware (kitware.com/cmake).\n") ==
        Version::parse("3.25.1"));
  CHECK(parse_cmake_version("cmake version 4.1.0-rc1\n") == Version::parse("4.1.0"));
  CHECK_FALSE(parse_cmake_version("ninja 1.11\n"));
}

TEST_CASE("toolkit discovery with a fake probe") {
  test::TempDir tmp;
  exe(tmp, "roots/cuda-12.8/bin/nvcc");
  tmp.write("roots/cuda-12.8/version.json", R"({"cuda": {"version": "12.8.1"}})");
  exe(tmp, "roots/cuda-12.6/bin/nvcc");
  fs::create_directories(tmp.path() / "roots/cuda-11.0-broken");  // no nvcc: skipped with a note
  fs::create_directory_symlink(tmp.path() / "roots/cuda-12.8", tmp.path() / "roots/cuda");
  exe(tmp, "home/bin/nvcc");

  FakeProbe fp;
  auto out = [](const char* release, const char* build) {
    return ProbeOutput{0, fmt::format("Cuda compilation tools, release {}, V{}\n", release, build), ""};
  };
  fp.answers[(tmp.path() / "roots/cuda-12.8/bin/nvcc --version").string()] = out("12.8", "12.8.93");
  fp.answers[(tmp.path() / "roots/cuda-12.8/bin/nvcc --list-gpu-arch").string()] = {0, "compute_90\ncompute_120\n", ""};
  fp.answers[(tmp.path() / "roots/cuda-12.6/bin/nvcc --version").string()] = out("12.6", "12.6.85");
  fp.answers[(tmp.path() / "home/bin/nvcc --version").string()] = out("12.4", "12.4.131");

  HostEnv env;
  env.roots = {tmp.path() / "roots"};
  env.vars["CUDA_HOME"] = (tmp.path() / "home").string();
  std::vector<std::string> notes;
  auto tks = discover_toolkits(env, fp.probe(), &notes);
  REQUIRE(tks.size() == 3);
  CHECK(tks[0].found_by == "CUDA_HOME");  // CUDA_HOME first
  CHECK(tks[0].release() == V("12.4"));
  CHECK_FALSE(tks[0].listed);  // its --list-gpu-arch failed: the data alone decides
  CHECK(tks[1].root == tmp.path() / "roots/cuda-12.8");  // newest versioned folder next
  CHECK(tks[1].version.str() == "12.8.1");               // version.json
  CHECK(tks[1].nvcc_version->str() == "12.8.93");        // nvcc --version
  CHECK(tks[1].compiler_version().str() == "12.8.93");
  REQUIRE(tks[1].listed);
  CHECK(tks[1].lists({12, 0}));
  CHECK_FALSE(tks[1].lists({6, 1}));
  CHECK(tks[2].release() == V("12.6"));  // the "cuda" symlink is the same as cuda-12.8: once
  bool noted = false;
  for (const auto& n : notes) noted = noted || n.find("cuda-11.0-broken") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("discovery on fake toolkit trees with the real process probe") {
  test::TempDir tmp;
  fake_toolkit(tmp, "roots/cuda-12.9", "12.9", "12.9.86", "50 61 75 80 90 100 120", true);
  fake_toolkit(tmp, "opt/cuda13", "13.0", "13.0.88", "75 80 90 100 110 120 121", false);
  // An nvcc that cannot run is skipped, not fatal.
  exe(tmp, "roots/cuda-12.1/bin/nvcc", "#!/bin/sh\necho broken >&2\nexit 2\n");

  HostEnv env;
  env.roots = {tmp.path() / "roots", tmp.path() / "opt"};
  std::vector<std::string> notes;
  auto tks = discover_toolkits(env, real_probe(), &notes);
  REQUIRE(tks.size() == 2);
  CHECK(tks[0].version.str() == "12.9.1");  // version.json
  CHECK(tks[0].nvcc_version->str() == "12.9.86");
  CHECK(tks[0].lists({6, 1}));
  CHECK(tks[1].root == tmp.path() / "opt/cuda13");
  CHECK(tks[1].version.str() == "13.0");  // no version.json: nvcc's release
  CHECK(tks[1].compiler_version().str() == "13.0.88");
  CHECK_FALSE(tks[1].lists({6, 1}));
  bool noted = false;
  for (const auto& n : notes) noted = noted || n.find("cuda-12.1") != std::string::npos;
  CHECK(noted);

  SECTION("nvcc on PATH") {
    HostEnv e2;
    e2.roots = {};
    e2.vars["PATH"] = (tmp.path() / "opt/cuda13/bin").string();
    auto t2 = discover_toolkits(e2, real_probe());
    REQUIRE(t2.size() == 1);
    CHECK(t2[0].found_by == "nvcc on PATH");
    CHECK(t2[0].root == tmp.path() / "opt/cuda13");
  }
  // /usr/local/bin/nvcc as `exec /usr/local/cuda-13.0/bin/nvcc "$@"` (CI's machine has one): its
  // folder's parent is no toolkit, so CUDA_HOME must come from where nvcc says it runs.
  SECTION("a wrapper script on PATH names its toolkit, not its own folder") {
    exe(tmp, "wrap/bin/nvcc", "#!/bin/sh\nexec " + (tmp.path() / "opt/cuda13/bin/nvcc").string() + " \"$@\"\n");
    HostEnv e2;
    e2.roots = {};
    e2.vars["PATH"] = (tmp.path() / "wrap/bin").string();
    std::vector<std::string> n2;
    auto t2 = discover_toolkits(e2, real_probe(), &n2);
    REQUIRE(t2.size() == 1);
    CHECK(t2[0].root == fs::canonical(tmp.path() / "opt/cuda13"));
    CHECK(t2[0].nvcc == fs::canonical(tmp.path() / "opt/cuda13") / "bin/nvcc");
    bool said = false;
    for (const auto& n : n2) said = said || n.find("its toolkit is") != std::string::npos;
    CHECK(said);
  }
  SECTION("a symlinked nvcc on PATH is followed to its toolkit") {
    tmp.write("link/bin/.keep", "");
    fs::create_symlink(tmp.path() / "roots/cuda-12.9/bin/nvcc", tmp.path() / "link/bin/nvcc");
    HostEnv e2;
    e2.roots = {};
    e2.vars["PATH"] = (tmp.path() / "link/bin").string();
    auto t2 = discover_toolkits(e2, real_probe());
    REQUIRE(t2.size() == 1);
    CHECK(t2[0].root == fs::canonical(tmp.path() / "roots/cuda-12.9"));
    CHECK(t2[0].version.str() == "12.9.1");
  }
}

TEST_CASE("host compilers and Python on a fake PATH") {
  test::TempDir tmp;
  exe(tmp, "bin/g++-13", "#!/bin/sh\necho 'g++-13 (Ubuntu 13.2.0-4ubuntu3) 13.2.0'\n"
                         "echo 'Copyright (C) 2023 Free Software Foundation, Inc.'\n");
  exe(tmp, "bin/gcc-13", "#!/bin/sh\nexit 0\n");
  exe(tmp, "bin/g++-15", "#!/bin/sh\necho 'g++-15 (GCC) 15.1.0'\n");
  exe(tmp, "bin/clang++-19", "#!/bin/sh\necho 'Ubuntu clang version 19.1.1 (1ubuntu1)'\n");
  exe(tmp, "bin/c++", "#!/bin/sh\necho 'not a compiler I know'\n");
  exe(tmp, "other/g++-11", "#!/bin/sh\necho 'g++-11 (Debian 11.3.0-12) 11.3.0'\n");
  exe(tmp, "bin/python3", "#!/bin/sh\necho /opt/py/bin/python3.12\necho 3.12.4\n");
  exe(tmp, "bin/python3.10", "#!/bin/sh\necho /opt/py310/bin/python3.10\necho 3.10.14\n");

  HostEnv env;
  env.vars["PATH"] = (tmp.path() / "bin").string();
  env.vars["CUDAHOSTCXX"] = (tmp.path() / "other/g++-11").string();
  std::vector<std::string> notes;
  auto cs = discover_compilers(env, real_probe(), &notes);
  REQUIRE(cs.size() == 4);
  CHECK(cs[0].found_by == "CUDAHOSTCXX");
  CHECK(cs[0].version.str() == "11.3.0");
  CHECK(cs[1].path == tmp.path() / "bin/clang++-19");
  CHECK(cs[1].kind == CompilerKind::clang);
  CHECK(cs[2].path == tmp.path() / "bin/g++-13");
  CHECK(cs[2].c_path == tmp.path() / "bin/gcc-13");
  CHECK(cs[2].name() == "g++ 13.2.0");
  CHECK(cs[3].version.str() == "15.1.0");
  CHECK(cs[3].c_path.empty());
  bool noted = false;
  for (const auto& n : notes) noted = noted || n.find("not recognised") != std::string::npos;
  CHECK(noted);  // bin/c++ printed something unknown

  auto dflt = discover_pythons(env, real_probe());
  REQUIRE(dflt.size() == 1);
  CHECK(dflt[0].path == "/opt/py/bin/python3.12");
  CHECK(dflt[0].release() == V("3.12"));
  auto py310 = discover_pythons(env, real_probe(), V("3.10"));
  REQUIRE_FALSE(py310.empty());
  CHECK(py310[0].version.str() == "3.10.14");
  CHECK(py310[0].found_by == "python3.10 on PATH");

  auto host = discover_host(env, real_probe(), {"python3", "ninja"});
  CHECK(host.cudahostcxx == (tmp.path() / "other/g++-11").string());
  CHECK(host.tools.count("python3") == 1);
  CHECK(host.tools.count("ninja") == 0);
}

TEST_CASE("an asked Python that PATH lacks is found among pyenv's builds, newest first") {
  test::TempDir tmp;
  // pyenv's shim for a version that is not the global one fails, as the real one does.
  exe(tmp, "bin/python3.12", "#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\nexit 127\n");
  exe(tmp, "bin/python3", "#!/bin/sh\necho /usr/bin/python3.11\necho 3.11.2\n");
  exe(tmp, "pyenv/versions/3.12.0/bin/python3", "#!/bin/sh\necho $0\necho 3.12.0\n");
  exe(tmp, "pyenv/versions/3.12.1/bin/python3", "#!/bin/sh\necho $0\necho 3.12.1\n");
  exe(tmp, "pyenv/versions/3.13.0/bin/python3", "#!/bin/sh\necho $0\necho 3.13.0\n");
  exe(tmp, "pyenv/versions/my-env/bin/python3", "#!/bin/sh\necho $0\necho 3.12.9\n");  // a virtualenv: not a build

  HostEnv env;
  env.vars["PATH"] = (tmp.path() / "bin").string();
  env.vars["PYENV_ROOT"] = (tmp.path() / "pyenv").string();
  auto builds = pyenv_pythons(env, V("3.12"));
  REQUIRE(builds.size() == 2);
  CHECK(builds[0] == tmp.path() / "pyenv/versions/3.12.1/bin/python3");

  auto found = discover_pythons(env, real_probe(), V("3.12"));
  REQUIRE_FALSE(found.empty());
  CHECK(found.back().version.str() == "3.12.1");
  CHECK(found.back().found_by == "pyenv 3.12.1");
  // Without PYENV_ROOT: ~/.pyenv.
  HostEnv home;
  home.vars["PATH"] = env.vars["PATH"];
  home.vars["HOME"] = tmp.path().string();
  CHECK(pyenv_pythons(home, V("3.13")).empty());
  fs::create_directories(tmp.path() / ".pyenv");
  fs::create_symlink(tmp.path() / "pyenv/versions", tmp.path() / ".pyenv/versions");
  CHECK(pyenv_pythons(home, V("3.13")).size() == 1);
  // Nothing asked: the default python3 only.
  auto dflt = discover_pythons(env, real_probe());
  REQUIRE(dflt.size() == 1);
  CHECK(dflt[0].version.str() == "3.11.2");
}

namespace {

// The CCs of `nvcc --list-gpu-code` (sm_75 …), sorted.
std::set<arch::Cc> listed_sm(const std::string& out) {
  static const std::regex re(R"(\bsm_(\d{2,3})\b)");
  std::set<arch::Cc> ccs;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    ccs.insert(arch::Cc::from_sm(std::stoi((*it)[1].str())));
  return ccs;
}

std::string names(const std::set<arch::Cc>& ccs) {
  std::string s;
  for (const auto& c : ccs) s += (s.empty() ? "" : " ") + c.str();
  return s;
}

}  // namespace

// The tool is the source: where a CUDA toolkit is installed, its toolchain file must list exactly
// the CCs its own nvcc lists (--list-gpu-code for SASS, --list-gpu-arch for PTX), and exactly the
// a/f variants that nvcc accepts for them.
TEST_CASE("the installed nvcc agrees with its toolchain file: --list-gpu-code, --list-gpu-arch, a/f variants") {
  auto env = HostEnv::current();
  auto tks = discover_toolkits(env, real_probe());
  if (tks.empty()) {
    WARN("##archbuild-skip## no CUDA toolkit installed (nvcc not found)");
    return;
  }
  auto all = load_shipped();
  REQUIRE(all.ok());
  for (const auto& tk : tks) {
    INFO("nvcc " << tk.nvcc.string() << " (CUDA " << tk.release().str() << ")");
    const Toolchain* tc = nullptr;
    for (const auto& t : *all)
      if (t.cuda == tk.release()) tc = &t;
    REQUIRE(tc);  // a toolkit archbuild can find has a toolchain file

    std::set<arch::Cc> in_file;
    for (const auto& a : tc->archs) in_file.insert(a.cc);
    auto code = run::capture({tk.nvcc.string(), "--list-gpu-code"});
    REQUIRE(code.ok());
    REQUIRE(code->status == 0);
    auto sass = listed_sm(code->out);
    CHECK(names(sass) == names(in_file));
    auto arch_out = run::capture({tk.nvcc.string(), "--list-gpu-arch"});
    REQUIRE(arch_out.ok());
    REQUIRE(arch_out->status == 0);
    auto ptx_list = parse_list_gpu_arch(arch_out->out);
    std::set<arch::Cc> ptx(ptx_list.begin(), ptx_list.end());
    CHECK(names(ptx) == names(in_file));

    // The variants: nvcc accepts `-gencode arch=compute_90a,code=sm_90a` exactly for those the file
    // lists (--dryrun compiles nothing).
    for (const auto& cc : sass) {
      for (auto v : {arch::Variant::a, arch::Variant::f}) {
        arch::Arch a{cc, v};
        auto r = run::capture({tk.nvcc.string(), "--dryrun", "-gencode",
                               fmt::format("arch={},code={}", a.compute_name(), a.sm_name()), "-c", "-x", "cu",
                               "/dev/null", "-o", "/dev/null"});
        REQUIRE(r.ok());
        INFO(a.cc_name() << ": " << r->err);
        CHECK((r->status == 0) == tc->compiles(a));
      }
    }
  }
}

// The toolkit's own header is the source of its host-compiler limits: where a CUDA toolkit is
// installed, include/crt/host_config.h rejects GCC above the toolchain file's gcc.max
// (`#if __GNUC__ > 15`) and clang from max + 1 on (`(__clang_major__ >= 21)`, in its block for
// clang proper).
TEST_CASE("the installed toolkit's host_config.h agrees with its toolchain file's compiler limits") {
  auto env = HostEnv::current();
  auto tks = discover_toolkits(env, real_probe());
  if (tks.empty()) {
    WARN("##archbuild-skip## no CUDA toolkit installed (nvcc not found)");
    return;
  }
  auto all = load_shipped();
  REQUIRE(all.ok());
  for (const auto& tk : tks) {
    INFO("CUDA " << tk.release().str() << " at " << tk.nvcc.string());
    const Toolchain* tc = nullptr;
    for (const auto& t : *all)
      if (t.cuda == tk.release()) tc = &t;
    REQUIRE(tc);
    const auto header = tk.root / "include" / "crt" / "host_config.h";
    REQUIRE(std::filesystem::exists(header));
    std::ifstream in(header);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    REQUIRE(std::regex_search(text, m, std::regex(R"(#if __GNUC__ > (\d+))")));
    REQUIRE(tc->gcc.max);
    CHECK(tc->gcc.max->str() == m[1].str());
    const auto clang_block = text.find("defined(__clang__) && !defined(__ibmxl_vrm__)");
    REQUIRE(clang_block != std::string::npos);
    const std::string rest = text.substr(clang_block);
    REQUIRE(std::regex_search(rest, m, std::regex(R"(__clang_major__ >= (\d+))")));
    REQUIRE(tc->clang.max);
    CHECK(tc->clang.max->str() == std::to_string(std::stoi(m[1].str()) - 1));
  }
}
