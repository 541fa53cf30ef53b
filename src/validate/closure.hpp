// The link closure: what auditwheel checks, for CUDA wheels. For every ELF file of a
// wheel (or of an installed distribution), each DT_NEEDED is resolved the way the dynamic loader
// would on a clean target: inside the tree through RUNPATH/RPATH ($ORIGIN-relative entries
// only), from a declared Requires-Dist package's known library folder (data/validate/
// libraries.toml), or from the system set (glibc, the compiler runtime, the driver). Anything
// else fails, naming where this host has it ("found only at /usr/local/cuda-13.0/lib64: not
// portable"). The highest GLIBC_/GLIBCXX_/CXXABI_/GCC_ versions needed are judged against the
// platform tag (PEP 600 manylinux_X_Y). Pure functions over what the ELF reader read; the only
// file-system access is the host lookup for the message, which callers may replace.
#pragma once

#include <algorithm>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "binary/elf.hpp"
#include "binary/inspect.hpp"
#include "toolchain/platform.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "validate/report.hpp"
#include "validate/wheel_check.hpp"

namespace archbuild::validate {

// ---- the facts (data/validate/libraries.toml) ---------------------------------------------

struct LibraryPackage {
  std::string name;                  // "nvidia-cuda-runtime"
  std::string dir;                   // "nvidia/cu13/lib", relative to site-packages
  std::vector<std::string> sonames;  // "libcudart.so.13"
  // The package version to require per CUDA X.Y ("13.0" -> "13.0.*"); a CUDA not listed: no pin.
  std::map<std::string, std::string> versions;
  // The CUDA major whose packages these are ("12": nvidia-*-cu12 in nvidia/<lib>/lib; "13": the
  // nvidia/cu13/lib layout). cuDNN, NCCL, cuSPARSELt and cuFile keep their sonames across majors, so
  // a soname alone does not say which package ships it.
  std::string cuda;
  // The metapackage extra that also installs it, as official torch wheels declare it since CUDA 13
  // (`cuda-toolkit[cublas,cudart,…]==13.0.2`): {"cuda-toolkit", "cublas"}; empty when none.
  std::string meta_name, meta_extra;
  // The machines (`uname -m`) the package has wheels for ("x86_64", "aarch64"); empty: any. A
  // wheel for another machine cannot require it: there its library stays host-bound.
  std::vector<std::string> machines;
  bool has_wheel_for(const std::string& machine) const {
    return machines.empty() || machine.empty() || std::find(machines.begin(), machines.end(), machine) != machines.end();
  }
};

// The newest libstdc++/libgcc symbol versions a manylinux glibc version allows.
struct SymbolPolicy {
  Version glibc;
  std::map<std::string, Version> limits;  // "GLIBCXX" -> 3.4.24, "CXXABI", "GCC"
};

struct LibraryFacts {
  std::set<std::string> system;
  std::vector<LibraryPackage> packages;
  std::vector<SymbolPolicy> policies;  // ascending glibc

  // The package that ships `soname` for that CUDA major ("12", "13"); with no major, or none for
  // that major, the first listed.
  const LibraryPackage* package_of(const std::string& soname, const std::string& cuda_major = "") const;
  // Every package that ships `soname` (one per CUDA major at most).
  std::vector<const LibraryPackage*> packages_of(const std::string& soname) const;
  // The policy of the highest glibc <= `glibc`; nullptr when below the first or above the last
  // (nothing known about its libstdc++).
  const SymbolPolicy* policy_for(const Version& glibc) const;
};

// Errors (bad_input) name file:line:column.
Result<LibraryFacts> load_library_facts(const std::filesystem::path& file);
// data_root()/data/validate/libraries.toml
std::filesystem::path shipped_library_facts();

// ---- requirements -------------------------------------------------------------------------

struct Requirement {
  std::string text;  // the Requires-Dist value as written
  std::string name;  // normalized (PEP 503)
  bool extra = false;  // only with an extra (`; extra == "…"`): not installed by default
  std::vector<std::string> extras;  // what it asks of that package: `cuda-toolkit[cublas,cudart]`
};
// Requires-Dist values of METADATA.
std::vector<Requirement> parse_requirements(const std::vector<std::string>& requires_dist);
// The Requires-Dist of the wheel's METADATA (empty when there is none).
std::vector<Requirement> wheel_requirements(const WheelContents& w, const std::optional<WheelName>& name);

// ---- resolution ---------------------------------------------------------------------------

struct ElfFile {
  std::string path;  // relative to the install root (site-packages), '/'-separated
  binary::DynamicInfo dyn;
};

enum class From : std::uint8_t { tree, package, system, missing };
std::string_view to_string(From f);  // "tree", "package", "system", "missing"

struct Resolved {
  std::string soname;
  From from = From::missing;
  std::string where;  // tree: the file; package: "nvidia-cuda-runtime: nvidia/cu13/lib"; missing: why
};

struct FileClosure {
  std::string path;
  std::vector<std::string> search;  // the RUNPATH (else RPATH) entries the loader uses
  bool rpath = false;               // search is DT_RPATH
  std::vector<Resolved> needed;
};

struct ClosureInput {
  std::vector<ElfFile> files;
  std::set<std::string> tree;  // every file of the tree (wheel members, installed RECORD paths)
  std::vector<Requirement> requirements;
  // Installed trees: whether a file exists at this root-relative path (another distribution's
  // library). Unset for a wheel: a declared package's folder is trusted from the facts.
  std::function<bool(const std::string&)> installed;
  // Where this host has a library (for the message); unset: host_library below, with host_dirs.
  std::function<std::optional<std::string>(const std::string& soname, const std::vector<std::string>& dirs)> host;
  toolchain::HostLibraryDirs host_dirs;  // this machine's (app::Facts); empty: those folders not looked in
};

// The first of `dirs` (absolute RUNPATH entries), then the usual system and CUDA folders (this
// machine's multiarch and toolkit targets/ folders where `host_dirs` knows them), that holds
// `soname`: "/usr/local/cuda-13.0/lib64/libcudart.so.13" (symbolic links resolved).
std::optional<std::string> host_library(const std::string& soname, const std::vector<std::string>& dirs,
                                        const toolchain::HostLibraryDirs& host_dirs);

std::vector<FileClosure> resolve_closure(const ClosureInput& in, const LibraryFacts& facts);

// The highest version per symbol-version family ("GLIBC", "GLIBCXX", "CXXABI", "GCC") any file
// needs, with the first file that needs it.
struct NeededVersion {
  Version version;
  std::string file;
};
std::map<std::string, NeededVersion> highest_versions(const std::vector<ElfFile>& files);

// The glibc version a platform tag promises: manylinux_2_28_x86_64 -> 2.28, manylinux2014 ->
// 2.17, manylinux2010 -> 2.12, manylinux1 -> 2.5; nullopt for linux_x86_64 and others.
std::optional<Version> manylinux_glibc(const std::string& platform_tag);

// The machine a Linux platform tag is for, spelled as binary::machine_name spells an ELF file's:
// manylinux_2_28_x86_64, manylinux2014_x86_64, linux_x86_64 -> "x86-64"; …_aarch64 -> "aarch64";
// another machine's tag (…_i686, …_ppc64le) -> its own name; nullopt for a tag of no Linux
// machine ("any", "macosx_…", "win_amd64").
std::optional<std::string> platform_machine(const std::string& platform_tag);

// A host ELF file and its machine ("x86-64", "aarch64").
struct ElfMachine {
  std::string path;
  std::string machine;
};
std::vector<ElfMachine> elf_machines(const std::vector<Member>& members);
std::vector<ElfMachine> elf_machines(const std::vector<binary::FileReport>& files);
// One line for each tag that some file is not for: "minitorch/_C.so is x86-64 ELF, but the tag
// manylinux_2_34_aarch64 is for aarch64" (validate's platform-tag, and publish's refusal).
std::vector<std::string> machine_problems(const std::vector<std::string>& platform_tags,
                                          const std::vector<ElfMachine>& files);

// ---- the checks ---------------------------------------------------------------------------

// "closure": fail naming each library the loader would not find on a clean target.
Check check_closure(const std::vector<FileClosure>& closure);
// "platform-tag": every ELF file is for the tag's machine (`machines`: each host ELF file as the
// reader read it; an x86-64 library under an aarch64 tag fails, naming it), the versions needed
// against the tag's promise (fail above it), and what tag would be true for a plain linux_* tag.
Check check_platform_tag(const std::vector<std::string>& platform_tags, const std::vector<ElfFile>& files,
                         const std::vector<FileClosure>& closure, const LibraryFacts& facts,
                         const std::vector<ElfMachine>& machines);

}  // namespace archbuild::validate
