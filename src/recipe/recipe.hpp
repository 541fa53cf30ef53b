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
#include "recipe/library_spec.hpp"

namespace archbuild::recipe {

// How the project is built (the entry point of the tree at its tag: setup.py commands, PEP 517 with setuptools, or scikit-build-core).
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

// Where the wheel's CUDA libraries come from on the target ([wheel] layout):
// official — from nvidia-* pip packages, as PyTorch's own wheels (Requires-Dist + $ORIGIN
// RUNPATH, stages/portable); host — from the build host's toolkit paths (the wheel is host-bound).
enum class WheelLayout { official, host };
std::string_view to_string(WheelLayout l);  // "official", "host"

// How the arch list reaches the build and which spellings its parser accepts.
// torch: "8.0;9.0+PTX"; cmake: "80-real;90"; sm: "80;90" — bare SM numbers, SASS only, of which
// the project knows only `values` (flash-attn's FLASH_ATTN_CUDA_ARCHS: any other is ignored).
enum class ArchFormat { torch, cmake, sm };
struct ArchSyntax {
  std::string env = "TORCH_CUDA_ARCH_LIST";  // the variable the build reads
  ArchFormat format = ArchFormat::torch;
  arch::Grammar grammar = arch::Grammar::build;  // main build or cpp_extension rules
  bool two_digit_major = false;  // "10.0", "12.0" (select_compute_arch.cmake of ≈ 2.7+)
  bool variant_a = false;        // "9.0a"
  bool variant_f = false;        // "12.0f" (PyTorch PR #157999)
  std::vector<int> values;       // format sm: the SM numbers the project's reader knows (80, 90 …)
};

struct Source {
  std::string url;                    // empty: must be given with --source-url
  std::string tag;
  std::optional<std::string> commit;  // 40 hex digits; verified at fetch
  bool submodules = true;             // recursive
  // A local tree built as it is (absolute; the file says it relative to itself). Excludes url.
  std::filesystem::path path;
};

// What the tree's own build would download during the build (PyTorch clones NVIDIA/nccl into
// third_party/nccl at the tag a file of the tree pins, unless USE_NCCL=0 …). archbuild fetches it
// through its mirrors before configure instead, so `--offline` works and the key holds its commit.
struct Fetch {
  std::string name;      // "nccl"
  std::string path;      // where the build looks, relative to the tree: "third_party/nccl"
  std::string url;       // the repository the build would clone
  // The file of the tree naming the tag or commit; "{cuda_major}" and "{cuda_minor}" stand for the
  // plan's CUDA release (".ci/docker/ci_commit_pins/nccl-cu{cuda_major}{cuda_minor}.txt": nccl-cu130.txt
  // for 13.0). Several: the first the tree has (a per-CUDA pin, else the default one).
  std::vector<std::string> pin_files;
  // The build fetches nothing when a variable has one of its values (compared without case):
  // {USE_NCCL: [0, OFF, …], USE_SYSTEM_NCCL: [1, ON, …]}.
  std::map<std::string, std::vector<std::string>> unless_env;
  bool submodules = false;  // check out its submodules too
};

// The pin files of `f` for a CUDA release ("{cuda_major}", "{cuda_minor}" replaced), in order.
std::vector<std::string> pin_files_for(const Fetch& f, const Version& cuda);
// The "NAME=VALUE" of `env` that switches `f` off, or "" when the build would fetch it.
std::string fetch_disabled_by(const Fetch& f, const std::map<std::string, std::string>& env);

// A version condition of a [[patch]]'s `when`: comma-separated comparisons, all of which hold
// (">=2.5, <2.8"; "==12.8"; a bare "2.6" means ==). Missing trailing parts count as 0.
struct VersionRange {
  struct Bound {
    enum class Op { eq, ge, gt, le, lt } op;
    Version v;
  };
  std::vector<Bound> bounds;
  std::string text;  // as written
  static std::optional<VersionRange> parse(std::string_view s);
  bool contains(const Version& v) const;
};

// [[patch]]: a change applied to the checkout after fetch, before configure (source/patch.hpp),
// when every condition of `when` holds. Its sha256 is verified when the recipe is loaded and again
// when the patch is read for applying; it enters the build key.
struct Patch {
  std::filesystem::path file;  // absolute (the recipe writes it relative to itself)
  std::string sha256;          // 64 lowercase hex digits of the file's bytes
  int strip = 1;               // leading path components dropped from the patch's file names (-p1)
  std::string from;            // the upstream PR or commit it comes from ("pytorch/pytorch#185933")
  std::string origin;          // the recipe file that lists it, or "--patch"
  struct When {
    std::optional<VersionRange> torch;  // the torch release (the recipe's torch_version())
    std::optional<VersionRange> cuda;   // the plan's CUDA release
    std::vector<std::string> platform;  // any of these platforms (toolchains/platforms.toml)
    std::vector<Version> arch;          // any target of these compute capabilities ("12.1")
  } when;
  std::string name() const { return file.filename().string(); }
};

// A user's own patch (`--patch FILE`): a regular file (a FIFO, a folder or nothing there is one
// line, exit 2), strip 1 (git's a/ b/ names), no condition, its sha256 taken now.
Result<Patch> patch_from_file(const std::filesystem::path& file);
// The patch's text, read now and checked against its sha256 (a file changed since the recipe was
// loaded or the plan made is refused, exit 2, naming both hashes).
Result<std::string> read_patch(const Patch& p);

// Expected peak memory of one compile when archbuild has measured none for the source yet
// (admission: a compile starts only when its figure fits what is left of the budget).
struct CompileMemory {
  std::uint64_t c_mb = 512;
  std::uint64_t cxx_mb = 1536;
  // One nvcc with --threads 1; without admission the static jobs rule's figure per job (4 GiB; a
  // recipe with heavier kernels raises it, and admission measures real peaks).
  std::uint64_t cuda_mb = 4096;
  std::uint64_t cuda_thread_mb = 1024;  // added per further nvcc --threads (NVCC_THREADS)
  struct Pattern {
    std::string glob;  // fnmatch over the source path relative to the tree ('*' crosses '/')
    std::uint64_t mb = 0;
  };
  std::vector<Pattern> patterns;  // first match wins over the per-kind figure
};

// One nvcc job's expected peak at `threads` nvcc threads: cuda_mb + cuda_thread_mb per thread
// beyond the first. The one memory model: admission expects it of a CUDA compile, and the
// static jobs rule (no admission) divides memory by it.
std::uint64_t nvcc_job_mb(const CompileMemory& m, unsigned threads);

struct Recipe {
  std::string name;                // file stem: "torch-2.7"
  std::filesystem::path file;      // the file it was loaded from
  std::vector<std::filesystem::path> chain;  // file, then what it extends, …
  std::string description;
  std::string package;             // the wheel's distribution name: "torch"
  std::string module;              // what an import test imports: "torch"
  Version version;                 // "2.7.1"
  std::optional<Version> torch;    // torchvision/torchaudio: the torch release it builds against
  // Further torch release lines (MAJOR.MINOR) the release also builds against (`torch_also`):
  // torchaudio 2.11, the last one, serves torch 2.12 - 2.14. `--with` pairs by `torch` or these.
  std::vector<Version> torch_also;
  // The torch recipe it builds against (`torch_recipe`: a name, or a file relative to this one),
  // for a torch that is not a shipped torch recipe (examples/minivision pairs with minitorch);
  // unset: the shipped torch recipe of the `torch` release line.
  std::optional<std::string> torch_recipe;
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
  WheelLayout wheel_layout = WheelLayout::official;  // portable unless the recipe says host
  // The triton release the tag pins ([wheel] triton), required by the package stage the way
  // official wheels require it (PYTORCH_EXTRA_INSTALL_REQUIREMENTS); unset: no requirement.
  std::optional<Version> wheel_triton;
  std::optional<Version> min_gcc;  // the project's own floor (PyTorch: 9.3)
  // Threads each nvcc job runs (`nvcc --threads`, read from NVCC_THREADS by flash-attn); unset:
  // the project does not read it.
  std::optional<unsigned> nvcc_threads;
  // The newest cmake a tag builds with ([build] cmake_max = "3.31": 3.31.x allowed, 4.0 not),
  // for tags that break with CMake 4; a newer host cmake gives way to the build venv's.
  std::optional<Version> cmake_max;
  // The tree's CMake reads USE_*/BUILD_*/CMAKE_* from the environment as one CMake list ([build]
  // forwards_env_as_list; PyTorch 2.12.0 - 2.13.0): a value is cut at its first ';', so the build's
  // list values reach CMake through a seed file instead (stages/cmake_seed.hpp).
  bool forwards_env_as_list = false;
  // Compiler releases that cannot build this tree ([[build.compiler_defect]]): an internal compiler
  // error or a miscompile known upstream, on the machines named (none: every machine).
  struct CompilerDefect {
    std::string compiler;               // "gcc" or "clang"
    Version from;                       // the first release affected
    Version below;                      // the first release fixed
    std::vector<std::string> machines;  // `uname -m` names; empty: all
    std::string why;                    // what fails, with the upstream report
  };
  std::vector<CompilerDefect> compiler_defects;
  CompileMemory memory;            // [build.memory]
  ArchSyntax arch;
  std::vector<Fetch> fetches;      // [[fetch]]: what the build would download (none: nothing)
  // [[patch]]: applied in order, those of the recipe it extends first (plan::select_patches
  // keeps the ones whose `when` holds).
  std::vector<Patch> patches;
  // The official wheels' TORCH_CUDA_ARCH_LIST by CUDA X.Y (each cited in the recipe), for comparisons.
  std::map<std::string, std::string> official;
  // [platform.NAME] (a platform of toolchains/platforms.toml): what a build for it adds — `env`
  // over [build.env] (BLAS=NVPL, the linker's page size …) and `official`, that platform's
  // official arch lists by CUDA X.Y.
  struct PlatformFacts {
    std::map<std::string, std::string> env;
    std::map<std::string, std::string> official;
    // What the official builds for this platform also set but a build here applies only when
    // asked (--env): each needs something the host may lack (NVPL, a built Arm Compute Library).
    std::map<std::string, std::string> official_env;
    // From a CUDA release on, what the official builds set instead (-compress-mode=size: CUDA 13).
    std::map<Version, std::map<std::string, std::string>> official_env_since_cuda;
  };
  std::map<std::string, PlatformFacts> platforms;
  // [validate] cuda_op: one CUDA operation of the package that the import test runs on a GPU
  // (Python statements over `m`, the imported module, that set `ok` and may set `got` and
  // `expected`), named by cuda_op_what; empty: import_check.py's own (torch's, vector_add).
  std::string cuda_op, cuda_op_what;
  bool abstract = false;           // a base others extend; never chosen by resolution
  // [libraries]: the optional libraries the build must not silently lack (library_spec.hpp).
  LibraryRequirements libraries;
  // [host]: what a build needs of the host before it starts (0: not stated). disk_gib: free
  // space in the cache for the tree and its objects. (Memory per compile job is
  // nvcc_job_mb(memory, nvcc_threads), the jobs rule's figure: one number for both.)
  std::int64_t disk_gib = 0;

  // The release the arch-parser rules and --torch refer to: `torch` when set, else `version`.
  const Version& torch_version() const { return torch ? *torch : version; }
};

// The recipe's python_modules, else its driver's default.
const std::vector<std::string>& python_modules(const Recipe& r);

// Where recipe names are looked up (the extending file's own folder first, then `dirs`) and the
// GPU data their arch lists are checked against: both given by the caller, who loaded them once
// (app::Facts), so that parsing reads no process-wide data of its own.
struct Search {
  std::vector<std::filesystem::path> dirs;
  const arch::ArchData* arch = nullptr;  // required
  static Search shipped();  // {data_root()/recipes}, ArchData::shipped(): for tests and tools
};

// A recipe file, with its `extends` chain resolved and merged (tables merge, keys override).
Result<Recipe> load_file(const std::filesystem::path& file, const Search& search);
// NAME (a file stem in the search dirs) or a path to a .toml file.
Result<Recipe> load(const std::string& name_or_path, const Search& search);
// Every recipe in a folder (abstract ones included), sorted by name.
Result<std::vector<Recipe>> load_dir(const std::filesystem::path& dir, const Search& search);
// Every shipped recipe.
Result<std::vector<Recipe>> load_shipped();

// The arch list spelled for the project's reader (arch.format). For format sm each SASS target
// maps to the newest known value of its major at or below it (its SASS runs there:
// https://docs.nvidia.com/cuda/cuda-c-programming-guide/#binary-compatibility); a/f variants and PTX cannot be said and become notes; `unmapped` lists the targets no
// value runs on.
struct ArchListText {
  std::string text;
  std::vector<std::string> notes;
  std::vector<arch::Arch> unmapped;
};
ArchListText print_arch_list(const ArchSyntax& syntax, const std::vector<arch::Arch>& archs);

// True when `s` names a file rather than a recipe (it has a '/' or ends in .toml).
bool looks_like_path(const std::string& s);

}  // namespace archbuild::recipe
