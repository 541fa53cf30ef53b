// Recipes: one TOML file per release line of a project (recipes/torch-2.7.toml …) saying where
// its source is, which CUDA and Python versions it supports, how it is built, and which
// TORCH_CUDA_ARCH_LIST spellings its parser accepts. Loading is strict: every unknown key, wrong
// type, bad version or arch spelling is an error naming FILE:LINE:COLUMN (exit 2).
#pragma once

#include <cstdint>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "arch/arch_data.hpp"
#include "arch/parse.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

namespace archbuild::recipe {

// How the project is built (pytorch-build.md "Entry points, by era").
enum class Driver {
  setup_py,      // setup.py build --cmake-only; cmake --build build; setup.py bdist_wheel
  python_build,  // python -m build --wheel --no-isolation (setuptools backend)
  scikit_build_core,  // python -m build --wheel --no-isolation with scikit-build-core (torch >= 2.14)
  cmake,         // cmake -S . -B build -G Ninja; cmake --build build (no wheel)
};
std::string_view to_string(Driver d);  // "setup-py", "python-build", "scikit-build-core", "cmake"

// The modules each driver's steps import, when the recipe does not say: setup.py bdist_wheel
// needs setuptools and wheel; `python -m build` needs build plus the backend it loads.
const std::vector<std::string>& default_python_modules(Driver d);

// How the arch list reaches the build and which spellings its parser accepts.
enum class ArchFormat { torch, cmake };  // "8.0;9.0+PTX" or "80-real;90"
struct ArchSyntax {
  std::string env = "TORCH_CUDA_ARCH_LIST";  // the variable the build reads
  ArchFormat format = ArchFormat::torch;
  arch::Grammar grammar = arch::Grammar::build;  // main build or cpp_extension rules
  bool two_digit_major = false;  // "10.0", "12.0" (select_compute_arch.cmake of ≈ 2.7+)
  bool variant_a = false;        // "9.0a"
  bool variant_f = false;        // "12.0f" (PyTorch PR #157999)
};

struct Source {
  std::string url;                    // empty: must be given with --source-url
  std::string tag;
  std::optional<std::string> commit;  // 40 hex digits; verified at fetch
  bool submodules = true;             // recursive
  // A local tree built as it is (absolute; the file says it relative to itself). Excludes url.
  std::filesystem::path path;
};

// Expected peak memory of one compile when archbuild has measured none for the source yet
// (issue 17's admission: a compile starts only when its figure fits what is left of the budget).
struct CompileMemory {
  std::uint64_t c_mb = 512;
  std::uint64_t cxx_mb = 1536;
  std::uint64_t cuda_mb = 3072;         // one nvcc with --threads 1
  std::uint64_t cuda_thread_mb = 1024;  // added per further nvcc --threads (NVCC_THREADS)
  struct Pattern {
    std::string glob;  // fnmatch over the source path relative to the tree ('*' crosses '/')
    std::uint64_t mb = 0;
  };
  std::vector<Pattern> patterns;  // first match wins over the per-kind figure
};

struct Recipe {
  std::string name;                // file stem: "torch-2.7"
  std::filesystem::path file;      // the file it was loaded from
  std::vector<std::filesystem::path> chain;  // file, then what it extends, …
  std::string description;
  std::string package;             // the wheel's distribution name: "torch"
  std::string module;              // what an import test imports: "torch"
  Version version;                 // "2.7.1"
  std::optional<Version> torch;    // torchvision/torchaudio: the torch release it builds against
  std::vector<Version> cuda;       // supported CUDA X.Y, preferred first
  std::vector<Version> python;     // supported Python X.Y
  Source source;
  Driver driver = Driver::setup_py;
  std::vector<std::string> tools;  // programs the build needs on PATH ("cmake", "ninja")
  // Python modules the build interpreter must import ([build] python_modules); unset: the
  // driver's default (default_python_modules).
  std::optional<std::vector<std::string>> python_modules;
  std::map<std::string, std::string> env;  // the default build environment
  std::string version_env;         // gets the wheel version, e.g. PYTORCH_BUILD_VERSION
  std::string build_number_env;    // gets build_number, e.g. PYTORCH_BUILD_NUMBER
  std::int64_t build_number = 1;
  std::string wheel_dir = "dist";  // where the wheel lands, relative to the source tree
  std::optional<Version> min_gcc;  // the project's own floor (PyTorch: 9.3)
  CompileMemory memory;            // [build.memory]
  ArchSyntax arch;
  // The official wheels' TORCH_CUDA_ARCH_LIST by CUDA X.Y (cuda-arch.md §6), for comparisons.
  std::map<std::string, std::string> official;
  bool abstract = false;           // a base others extend; never chosen by resolution

  // The release the arch-parser rules and --torch refer to: `torch` when set, else `version`.
  const Version& torch_version() const { return torch ? *torch : version; }
};

// The recipe's python_modules, else its driver's default.
const std::vector<std::string>& python_modules(const Recipe& r);

// Where recipe names are looked up: the extending file's own folder first, then these.
struct Search {
  std::vector<std::filesystem::path> dirs;
  static Search shipped();  // {data_root()/recipes}
};

// A recipe file, with its `extends` chain resolved and merged (tables merge, keys override).
Result<Recipe> load_file(const std::filesystem::path& file, const Search& search = Search::shipped());
// NAME (a file stem in the search dirs) or a path to a .toml file.
Result<Recipe> load(const std::string& name_or_path, const Search& search = Search::shipped());
// Every recipe in a folder (abstract ones included), sorted by name.
Result<std::vector<Recipe>> load_dir(const std::filesystem::path& dir, const Search& search);
// Every shipped recipe.
Result<std::vector<Recipe>> load_shipped();

// True when `s` names a file rather than a recipe (it has a '/' or ends in .toml).
bool looks_like_path(const std::string& s);

}  // namespace archbuild::recipe
