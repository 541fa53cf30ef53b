// CUDA toolkits and host compilers: the facts per CUDA release (toolchains/cuda-X.Y.toml) and
// discovery of what this host has installed.
//
// This module starts no process: only run/ does (docs/architecture.md "Invariants"). Discovery asks its questions
// (`nvcc --version`, `g++ --version`, …) through an injected Probe; the CLI passes
// run::capture, tests pass a fake or run::capture on fake toolkit trees.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "arch/arch_data.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

namespace archbuild::toolchain {

enum class CompilerKind { gcc, clang };
std::string_view to_string(CompilerKind k);  // "gcc", "clang"

struct CompilerRange {
  std::optional<Version> min;
  std::optional<Version> max;  // compared on the major (and minor when given): GCC 14.2 <= "14"
};

// What one CUDA release can do (the toolkit's own `nvcc --list-gpu-code`, which a test compares with toolchains/; release notes: https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/).
struct Toolchain {
  Version cuda;                        // 12.8
  Version min_driver;                  // 570.26
  std::string min_driver_text;         // as written: "580.65.06" (drivers keep leading zeros)
  std::vector<arch::Arch> archs;       // what nvcc compiles, variants included
  CompilerRange gcc, clang;
  std::filesystem::path file;

  std::string cu_tag() const;          // "cu128"
  // nvcc compiles this arch (CC and variant; PTX and SASS alike).
  bool compiles(const arch::Arch& a) const;
  // `a` under the name this release compiles it by when a later CUDA renamed its CC (10.1, Jetson
  // Thor, is 11.0 from CUDA 13: `renamed_to` in data/gpus.toml); nullopt when `a` needs no new
  // name here or the new one does not compile either.
  std::optional<arch::Arch> renamed(const arch::Arch& a, const arch::ArchData& data) const;
  // Why this compiler is not accepted as nvcc's host compiler, or nullopt when it is.
  std::optional<std::string> rejects(CompilerKind kind, const Version& v) const;
};

Result<Toolchain> load_toolchain(const std::filesystem::path& file, const arch::ArchData& data);
// Every cuda-*.toml of a folder, oldest CUDA first.
Result<std::vector<Toolchain>> load_toolchains(const std::filesystem::path& dir, const arch::ArchData& data);
// data_root()/toolchains.
Result<std::vector<Toolchain>> load_shipped(const arch::ArchData& data = arch::ArchData::shipped());

// ---- discovery --------------------------------------------------------------------------

struct ProbeOutput {
  int status = -1;
  std::string out;
  std::string err;
};
// Runs argv (no shell) and returns its output; an Error when it could not be started.
using Probe = std::function<Result<ProbeOutput>(const std::vector<std::string>& argv)>;

// The parts of the process environment discovery reads, so tests can supply their own.
struct HostEnv {
  std::map<std::string, std::string> vars;  // CUDA_HOME, CUDA_PATH, CUDAHOSTCXX, PATH, PYENV_ROOT, HOME
  // Folders searched for cuda-* and cuda (under /usr/local) and cuda* (under /opt).
  // ARCHBUILD_CUDA_ROOTS (':'-separated) replaces them.
  std::vector<std::filesystem::path> roots = {"/usr/local", "/opt"};

  static HostEnv current();
  std::optional<std::string> get(const std::string& name) const;  // set and non-empty
  std::vector<std::filesystem::path> path_dirs() const;
  // First executable `name` on PATH (or `name` itself when it holds a '/').
  std::optional<std::filesystem::path> find_program(const std::string& name) const;
};

struct Toolkit {
  std::filesystem::path root;      // CUDA_HOME for the build
  std::filesystem::path nvcc;
  Version version;                 // release: 12.8.1 (version.json) or 12.8 (nvcc)
  std::optional<Version> nvcc_version;  // the compiler's own: V12.8.93
  std::string found_by;            // "CUDA_HOME", "PATH", "/usr/local/cuda-12.8" …
  // `nvcc --list-gpu-arch`: compute_XY entries (no variants), when nvcc printed them.
  std::optional<std::vector<arch::Cc>> listed;

  Version release() const { return version.prefix(2); }  // 12.8
  // The version that determines the code nvcc emits (for the build key).
  const Version& compiler_version() const { return nvcc_version ? *nvcc_version : version; }
  // False when nvcc's own list is known and lacks the CC.
  bool lists(arch::Cc cc) const;
};

struct Compiler {
  CompilerKind kind = CompilerKind::gcc;
  std::filesystem::path path;      // the C++ compiler (CUDAHOSTCXX, CXX)
  std::filesystem::path c_path;    // its C compiler (CC), when found
  Version version;                 // 12.2.0
  std::string found_by;            // "CUDAHOSTCXX", "PATH"
  std::string name() const;        // "g++ 12.2.0"
};

struct Python {
  std::filesystem::path path;      // sys.executable
  Version version;                 // 3.11.7
  std::string found_by;            // "python3 on PATH"
  // Which of the build modules it can import (python_build_modules()); unknown when not probed.
  std::optional<std::vector<std::string>> modules;
  Version release() const { return version.prefix(2); }
  bool has_module(const std::string& m) const;  // true when not probed
};

// The modules a build interpreter may need: setuptools and wheel (setup.py bdist_wheel), build
// (python -m build), pip and venv (validation's import test).
const std::vector<std::string>& python_build_modules();
// Where a module comes from on Debian (python3-wheel …), for "missing module" messages.
std::string debian_package_for_module(const std::string& module);

// Everything discovered on one host.
struct Host {
  std::vector<Toolkit> toolkits;         // in discovery order (CUDA_HOME first)
  std::vector<Compiler> compilers;       // CUDAHOSTCXX first, then PATH
  std::optional<std::string> cudahostcxx;  // CUDAHOSTCXX as set (the user's explicit choice)
  std::vector<Python> pythons;           // the asked interpreter (path or pythonX.Y), or the default python3
  // `--python PATH` named something that is not a Python interpreter: the line saying what it is
  // (a plan refuses with it, exit 2, instead of looking for another interpreter).
  std::optional<std::string> python_refused;
  std::vector<Python> other_pythons;     // /usr/bin/python3 when it is not the chosen one (for suggestions)
  std::map<std::string, std::filesystem::path> tools;  // name -> path for the asked tools
  // Versions of the asked tools that have a version probe (cmake: `cmake --version`), for the
  // tree's cmake_minimum_required check.
  std::map<std::string, Version> tool_versions;
  std::vector<std::string> notes;        // what discovery skipped and why
};

std::vector<Toolkit> discover_toolkits(const HostEnv& env, const Probe& probe, std::vector<std::string>* notes = nullptr);
std::vector<Compiler> discover_compilers(const HostEnv& env, const Probe& probe, std::vector<std::string>* notes = nullptr);
// `wanted` X.Y: pythonX.Y, then python3 and python when they are that version, then pyenv's
// builds of X.Y (pyenv_pythons) and /usr/bin, /usr/local/bin pythonX.Y. Otherwise the default
// interpreter: python3, else python. (Each probe starts an interpreter, so only these.)
// pyenv's CPython builds of `wanted` X.Y, newest first: $PYENV_ROOT (else ~/.pyenv)
// /versions/X.Y.*/bin/python3. No process is started.
std::vector<std::filesystem::path> pyenv_pythons(const HostEnv& env, const Version& wanted);
std::vector<Python> discover_pythons(const HostEnv& env, const Probe& probe, std::optional<Version> wanted = std::nullopt,
                                     std::vector<std::string>* notes = nullptr);
// One interpreter by path (`--python /usr/bin/python3`), probed the same way. Without one,
// `why` says what the path did instead ("exit 1", "printed no Python version").
std::optional<Python> probe_python(const std::filesystem::path& exe, const Probe& probe, const std::string& found_by,
                                   std::vector<std::string>* notes = nullptr, std::string* why = nullptr);
Host discover_host(const HostEnv& env, const Probe& probe, const std::vector<std::string>& tools,
                   std::optional<Version> python = std::nullopt,
                   const std::optional<std::filesystem::path>& python_path = std::nullopt);

// Parsers for the probes' output (exposed for tests).
std::optional<Version> parse_nvcc_release(const std::string& out);        // "release 12.8, V12.8.93"
std::optional<Version> parse_nvcc_build(const std::string& out);          // V12.8.93
std::optional<Version> parse_cuda_version_json(const std::string& json);  // {"cuda":{"version":…}}
std::vector<arch::Cc> parse_list_gpu_arch(const std::string& out);        // compute_75 compute_80 …
std::optional<std::pair<CompilerKind, Version>> parse_compiler_version(const std::string& out);
std::optional<Version> parse_cmake_version(const std::string& out);       // "cmake version 3.25.1"

}  // namespace archbuild::toolchain
