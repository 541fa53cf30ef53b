// The Plan: an immutable value fixing every input of one build — source, toolkit, compiler,
// Python, the full build environment, each step's argv — and the build key, a SHA-256 over the
// canonical form of everything that affects the output. Nothing after the plan decides anything.
//
// The key leaves out what does not change the wheel: paths (the toolkit's path is replaced by
// its version, the compiler's by its kind and version), the jobs count, the cache location and
// time. Equal inputs on two machines give the same key; any change of an input gives a new one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/contract.hpp"
#include "plan/libraries.hpp"
#include "plan/resolve.hpp"
#include "recipe/stage.hpp"

namespace archbuild::plan {

struct Step {
  recipe::Stage stage = recipe::Stage::build;  // configure, build or package
  std::string tool;                  // "python" or "cmake": the program by role (keyed)
  std::filesystem::path program;     // its path on this host (not keyed)
  std::vector<std::string> args;     // after the program
  std::string cwd = ".";             // relative to the source tree
  std::vector<std::string> argv() const;
};

struct EnvVar {
  std::string value;
  bool keyed = true;  // part of the build key
  std::string why;    // for the unkeyed: what stands for it in the key, or why it cannot matter
};

// MAX_JOBS from cores and memory (plan/jobs.cpp): each nvcc job can need GiBs; the figure per job is the recipe's [build.memory].
struct HostResources {
  unsigned cores = 1;
  std::uint64_t mem_available = 0;  // bytes
  static HostResources current();   // hardware_concurrency and /proc/meminfo MemAvailable
};
struct Jobs {
  unsigned jobs = 1;
  unsigned cores = 1;
  double mem_gib = 0;
  // One nvcc job's figure: recipe::nvcc_job_mb of [build.memory] at the recipe's nvcc threads,
  // the same model admission expects compiles by.
  double gib_per_job = kDefaultGibPerJob;
  std::string per_job_from;  // "[build.memory] cuda_mb 2048 + 3 x cuda_thread_mb 1024"; "": given
  unsigned threads_per_job = 1;  // NVCC_THREADS: each job takes that many cores
  bool from_option = false;  // --jobs N
  static constexpr double kDefaultGibPerJob = 4;
  bool admitted = false;     // jobs = cores: compiles admitted by memory (Admission)
  unsigned static_jobs = 1;  // what the static rule gives (used when no launcher can admit)
  std::string rule() const;  // "2 = min(2 cores, 23.0 GiB available / 4 GiB per nvcc job = 5)"
};
// jobs = min(cores / threads_per_job, memory / gib_per_job), at least 1; --jobs N wins.
Jobs jobs_rule(const HostResources& host, std::optional<unsigned> requested,
               double gib_per_job = Jobs::kDefaultGibPerJob, unsigned threads_per_job = 1);
// The same with the recipe's figures: [build.memory]'s nvcc job at [build] nvcc_threads.
Jobs jobs_rule(const HostResources& host, std::optional<unsigned> requested, const recipe::Recipe& r);
// Where the per-job figure comes from, for the rule's text.
std::string per_job_from(const recipe::CompileMemory& m, unsigned threads);

// Memory-admitted parallelism: the build runs as many jobs as cores and archbuild,
// the launcher of every C, C++ and CUDA compile, starts each compile only when its expected
// peak fits what is left of the budget (run/admission.hpp). The expected peak: what earlier
// builds of the recipe measured for the source, else the recipe's figures.
struct Admission {
  bool on = false;
  std::uint64_t budget_mb = 0;
  std::string budget_from;  // "--memory-budget 48G" or "90% of 52.1 GiB available"
  recipe::CompileMemory figures;
  std::string rule() const;  // one line for `plan`
};

// A --memory-budget value in MB: "48G", "4096M", "1.5T", "512MiB" (binary units; a bare number
// is refused as ambiguous), "75%" of `available` bytes; "off" gives nullopt (the static rule).
// Error (exit 2): one line naming the value and what would be valid.
Result<std::optional<std::uint64_t>> parse_memory_budget(const std::string& text, std::uint64_t available);

// The source when it is not simply the recipe's tag — decided before planning (the command asks
// source/, which alone talks git), so the plan and its key are fixed before anything runs.
struct SourceChoice {
  enum class Kind { recipe_tag, ref, local };
  Kind kind = Kind::recipe_tag;
  // ref: --ref as given, the commit it named when planned, and whether it was a tag.
  std::string ref;
  std::string commit;
  bool ref_is_tag = false;
  // --source-url named another repository than the recipe's: its tags are not the recipe's builds.
  bool other_repository = false;
  // The tree's own version.txt (first line), when it has one: a non-tag build's release part.
  std::optional<std::string> tree_version;
  // local: --source DIR / the recipe's source.path, built as it is (uncommitted changes included).
  std::filesystem::path dir;
  std::string content_hash;  // source::scan_local_tree's hash: the key holds it, not the path
  std::size_t files = 0;
  std::optional<std::string> head;  // the HEAD of the git repository the tree is in (informative)
  // local: what decides whether an earlier build tree can continue (not keyed): the tree's shape
  // (stages::tree_shape: every path, its kind, mode and link target, not its content) and the
  // digests of its configuration files (is_configuration_file).
  std::string shape_hash;
  std::map<std::string, std::string> config_files;
};

// Whether a build starts from a clean build tree or continues the build tree of an earlier key of
// the same local folder and configuration (docs/build.md, "Incremental builds"). Not in the key:
// the wheel is the same either way (tests/cli/test_incremental_cli.cpp proves it on the example).
struct BuildStart {
  enum class Mode { clean, incremental };
  Mode mode = Mode::clean;
  std::string from_key;  // incremental: the key whose build tree this build continues
  std::string why;       // clean: the reason ("--clean", "no earlier build …", …)
  // A local tree: the work place its builds share, one per (folder, configuration): the plan but
  // for the tree's content (incremental_slot). Empty for a repository's checkout (one per key).
  std::string slot;
};

// What the cache holds of the last build in a slot (gathered by prepare from store/).
struct EarlierBuild {
  std::string key;
  bool configured = false;        // its configure stage finished (a build tree to continue)
  std::string shape_hash;         // of the tree it built (SourceChoice::shape_hash)
  std::map<std::string, std::string> config_files;
};

// The files whose change reruns a build system's configure with the values its cache kept from
// the first one (CMake's cache, setup.py's "cmake only when no CMakeCache.txt"): CMakeLists.txt,
// *.cmake, configure_file templates (*.in), setup.py, setup.cfg, pyproject.toml, meson.build,
// meson_options.txt / meson.options, version.txt. A change to one builds clean.
bool is_configuration_file(std::string_view path);

// One [[fetch]] of the recipe as planned: the pin file for this CUDA, whether the build would
// fetch it under the plan's environment, and — resolved before planning through the mirrors, as
// --ref is — the tag or commit the pin file names and the commit that is.
struct FetchPlan {
  std::string name, path, url;
  std::vector<std::string> pin_files;  // the candidates, "{cuda_major}" replaced
  std::string pin_file;        // the one the tree has (set with ref); empty: not read yet
  bool submodules = false;
  std::string disabled_by;     // "USE_NCCL=0": the build would not fetch it (nothing is fetched)
  std::string ref;             // what the pin file holds ("v2.27.7-1"); empty: not read yet
  std::string commit;          // 40 hex; empty: not resolved yet (the tree is not in the mirror)
  bool active() const { return disabled_by.empty(); }
  bool resolved() const { return !commit.empty(); }
};

// A patch the build applies (recipe::Patch whose `when` holds for this resolution), in the order
// applied: the recipe's (its bases' first), then --patch in command-line order. Its sha256 and
// strip are in the key.
struct PatchPlan {
  recipe::Patch patch;
  std::string why;  // which conditions held ("torch 2.6.0 in >=2.5,<2.7; CUDA 12.8 in >=12.8"), or "always"
};
// The recipe's patches whose conditions hold, then `extra` (--patch). No I/O. A torch recipe's
// `when.torch` is held against the tree's own release (version.txt) where the source is not the
// recipe's tag (--ref, a local tree), else against the recipe's release.
std::vector<PatchPlan> select_patches(const Resolution& resolution, const SourceChoice& source,
                                      const std::vector<recipe::Patch>& extra);

// What the caller resolved for a fetch (by name) before planning.
struct ResolvedFetch {
  std::string pin_file;
  std::string ref;
  std::string commit;
};

// The recipe's fetches for this resolution under `env` (the recipe's [build.env] overridden by
// --env): pin files expanded, the disabled ones marked. No I/O.
std::vector<FetchPlan> fetch_plans(const Resolution& resolution, const std::map<std::string, std::string>& env);

// A wheel installed from a file into the build venv after its requirements (`--torch-wheel`, or
// the torch that `--with` built first): what a dependent compiles against. Its sha256 is in the
// venv's hash and in the key (another torch wheel is another build), and the package stage pins
// `name==version` in the dependent's METADATA. The file's path is not keyed.
struct InstalledWheel {
  std::string name;             // PEP 503 name of the distribution ("torch", "minitorch")
  std::string version;          // exact, with its local label ("2.14.0+cu130.sm90")
  std::string sha256;
  std::filesystem::path file;
};

// The build venv, made (or reused) before planning from the chosen interpreter and the tree's
// build requirements (stages/venv.hpp): the steps run its python, its bin/ is first on PATH,
// and the versions of what shapes the binary are in the key. Its path is not keyed.
struct BuildVenv {
  std::filesystem::path dir;      // venvs/<hash> in the cache
  std::filesystem::path python;   // dir/bin/python
  std::string hash;               // interpreter realpath + exact version + requirement set
  std::string interpreter;        // the base interpreter's realpath
  std::string interpreter_version;  // exact ("3.11.2")
  std::vector<std::string> requirements;  // what pip was asked for (PEP 508, as the tree wrote them)
  // Requirements a program of the host satisfies instead ("cmake>=3.18: /usr/bin/cmake 3.25.1").
  std::vector<std::string> from_host;
  // Requirements the venv satisfies itself, not asked of pip ("pip: the venv's own (ensurepip, no index)").
  std::vector<std::string> from_venv;
  // A venv over the interpreter's packages: each required package it sees that is not its own,
  // with where it is ("build 0.9.0: /usr/lib/python3/dist-packages"); never silent.
  std::vector<std::string> from_system;
  // Where packages came from: "index https://…", "find-links DIR", "system-site-packages of …".
  std::vector<std::string> sources;
  bool system_site_packages = false;
  std::map<std::string, std::string> packages;  // every distribution it sees: name → exact version
  // The one cmake of every step: the venv's (the pip package) when the host's is outside what
  // the tree and recipe accept; empty: the host's (the resolution's tool).
  std::filesystem::path cmake;
  std::optional<std::string> cmake_version;  // of the cmake every step runs
  std::map<std::string, std::string> pip_options;  // --index-url / --find-links as given (manifest only)
  std::vector<InstalledWheel> wheels;  // installed from files (--no-deps), after the requirements
  bool reused = false;  // found complete in the cache (not made now)
};

// The packages of the build venv that shape the binary (numpy's ABI, the build tools): in the key.
const std::vector<std::string>& binary_shaping_packages();

struct PlanData {
  Resolution resolution;   // recipe, toolchain, toolkit, compiler, python, archs, rules
  std::string url;         // --source-url or the recipe's (empty for a local tree)
  std::string tag;         // what the fetch stage checks out: the recipe's tag, or --ref's commit
  std::optional<std::string> commit;  // pinned: the recipe's commit, or what --ref resolved to
  std::string ref;         // what was asked for: the recipe's tag, --ref as given, or "" (local)
  std::optional<SourceChoice> local;  // set when the source is a local tree
  bool submodules = true;
  std::string version;     // the wheel version: "2.7.1+cu128.sm120"
  std::map<std::string, EnvVar> env;     // the full environment the build gets
  // Names copied from archbuild's environment at run time (a trailing '*' is a prefix: CUDNN_*),
  // unless the plan sets the name itself: build_env_allowlist() plus the recipe's.
  std::vector<std::string> passthrough;
  std::vector<Step> steps;
  std::string build_dir = "build";  // relative to the source tree
  std::string wheel_dir;            // relative to the source tree; empty: the driver makes no wheel
  // The stage whose steps write the wheel into wheel_dir ("package" for setup-py, "build" for the
  // PEP 517 drivers, whose one step compiles and packages); empty: none. wheel_dir is emptied
  // when that stage starts; the package stage then only normalizes and stores the wheel.
  std::optional<recipe::Stage> wheel_stage;
  // The stage whose steps run CMake's configure: "configure", or "build" where the backend
  // configures inside its build step (a half-configured tree is removed before that stage).
  recipe::Stage configure_stage = recipe::Stage::configure;
  // Why a stage has no step of its own (shown by `plan`, reported when the stage runs).
  std::map<recipe::Stage, std::string> stage_notes;
  // PEP 517 config settings (`-C NAME=VALUE`), in argv order; each is also in the key. Only what
  // the tree's [tool.scikit-build] leaves open: a setting passed wins over the tree's own,
  // its overrides by environment included.
  std::vector<std::pair<std::string, std::string>> config_settings;
  // Why each setting is passed or left to the tree ("cmake.build-type: not passed: …"); not keyed
  // (the tree's pyproject is in the key through its commit or content).
  std::vector<std::string> config_notes;
  // The recipe's [[fetch]]es: what the build would download, fetched by the fetch stage instead.
  // The active ones are in the key with their commits.
  std::vector<FetchPlan> fetches;
  // The patches applied to the checkout after fetch, before configure, in order (keyed).
  std::vector<PatchPlan> patches;
  Jobs jobs;
  // The optional libraries: where each comes from, or why it is off (plan/libraries.hpp). Their
  // USE_* switches are in `env` (keyed), where they were found too (not keyed).
  LibraryPlan libraries;
  std::optional<BuildVenv> venv;    // none: the cmake driver, or the tree's requirements are not known yet
  Admission admission;
  nlohmann::json key_inputs;        // exactly what the key hashes
  std::string key;                  // 64 hex digits
  // Clean or incremental (decide_build_start; not keyed). make_plan: clean, with the slot.
  BuildStart build_start;
};

struct PlanOptions;

class Plan {
 public:
  const PlanData& operator*() const { return *d_; }
  const PlanData* operator->() const { return d_.get(); }
  // name -> value, for the runner (plus `passthrough` taken from the caller's environment).
  std::map<std::string, std::string> environment() const;
  nlohmann::json to_json() const;

 private:
  explicit Plan(std::shared_ptr<const PlanData> d) : d_(std::move(d)) {}
  std::shared_ptr<const PlanData> d_;
  friend Result<Plan> make_plan(const Resolution&, const PlanOptions&);
  friend Plan with_build_start(const Plan&, BuildStart);
};

// The rule: clean when asked (--clean), when the slot has no earlier build or one that did not
// configure, when a file was added, removed, renamed or changed kind, mode or link target since
// (a build tree may keep what it made of it), or when a configuration file changed; else
// incremental from the earlier key. Only a local tree has a slot.
BuildStart decide_build_start(const PlanData& plan, bool clean_asked, const std::optional<EarlierBuild>& earlier);
// The same plan with its build start decided (the key does not change).
Plan with_build_start(const Plan& plan, BuildStart start);
// A local tree's slot: 24 hex digits of SHA-256 over the plan but for the tree's content — the
// key's inputs and the whole environment with the content hash (and the version's "src<hash7>")
// put aside, the steps, the folder and its HEAD (SOURCE_DATE_EPOCH). Empty for other sources.
std::string incremental_slot(const PlanData& plan);
nlohmann::json to_json(const BuildStart& b);

// What of the caller's environment reaches the build (documented in the README): locale and
// home, proxies and certificates (pip, git and the build's own downloads), where libraries are
// (cuDNN, NCCL, MAGMA, MKL, CMake's prefix path, the linker's paths), pip's own configuration.
const std::vector<std::string>& build_env_allowlist();
// True when `name` matches an allowlist entry ("NAME" or "PREFIX*").
bool env_allowed(const std::vector<std::string>& allowlist, const std::string& name);

struct PlanOptions {
  std::optional<unsigned> jobs;              // --jobs N
  // --env K=V: set in the build's environment and in the key. May override the recipe's
  // [build.env] (USE_NCCL=1), never what the plan derives (TORCH_CUDA_ARCH_LIST, CUDA_HOME, PATH …).
  std::map<std::string, std::string> env;
  SourceChoice source;                       // --ref / --source DIR / source.path
  std::optional<HostResources> resources;    // default: HostResources::current()
  // The libraries: the specs (the session's data/build-libraries.toml, app::Facts; the recipe's
  // own [[libraries.define]] go over them; required where the recipe has libraries or --without
  // is given: none is an internal error, never the shipped file read behind the caller's back),
  // what was found on this host, and --without.
  const std::vector<recipe::LibrarySpec>* library_specs = nullptr;
  LibraryFacts library_facts;
  std::vector<std::string> without;
  // The fetches' pins, resolved by the caller through source/ (by name). An active fetch left out
  // is planned unresolved (its commit null in the key): `plan` before the tree is mirrored.
  std::map<std::string, ResolvedFetch> fetches;
  std::vector<recipe::Patch> patches;        // --patch FILE, after the recipe's own (select_patches)
  std::optional<BuildVenv> venv;             // made before planning (stages::prepare_build_venv)
  // The tree's [tool.scikit-build] (contract::read_contract's `skbuild`), read before planning
  // with the tree's requirements. Unset: not known yet (`plan` before the commit is mirrored) or
  // the tree has none; then build-dir is passed and the build type is left to the backend.
  std::optional<contract::ScikitBuild> skbuild;
  // Admission by memory: unset → the static rule (jobs from cores and memory). A budget of 0 MB
  // means the default, 90% of available memory (--memory-budget unset).
  std::optional<std::uint64_t> memory_budget_mb;
  std::string memory_budget_text;            // as given, for the rule ("" = default)
};

// Needs a resolution without refusal or missing tool (else its error comes back).
Result<Plan> make_plan(const Resolution& resolution, const PlanOptions& options = {});

// SHA-256 of the canonical serialization of `key_inputs`.
std::string build_key(const nlohmann::json& key_inputs);

// The wheel version: release + "+cu128" + one label per image ("sm90", "sm120a", "ptx120").
std::string local_version(const recipe::Recipe& r, const toolchain::Toolchain& tc, const std::vector<arch::Arch>& archs);
// The same for a source other than the recipe's tag: a non-tag commit says so ("2.16.0a0+git1a2b3c4.
// cu130.sm90", the release from the tree's version.txt), a tag other than the recipe's gives its own
// release ("v2.15.1" → 2.15.1), a local tree "+src<hash7>". PEP 440 valid in every case. A tag of
// another repository, or the recipe's tag naming another commit than its pin, is not the
// recipe's tree: "+git<commit7>" then too, so two trees never share one wheel name.
std::string source_version(const recipe::Recipe& r, const SourceChoice& s, const toolchain::Toolchain& tc,
                           const std::vector<arch::Arch>& archs);

nlohmann::json to_json(const Resolution& r);
nlohmann::json venv_json(const BuildVenv& v);
// The installed wheels; for the key without their files' paths.
nlohmann::json wheels_json(const std::vector<InstalledWheel>& wheels, bool for_key);
nlohmann::json to_json(const recipe::Recipe& r);

}  // namespace archbuild::plan
