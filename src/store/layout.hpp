// The cache directory and every path in it (docs/architecture.md "Cache layout"). This is the ONLY place
// that decides where archbuild's files live; other modules get paths from here.
//
//   git/<url-hash>.git        bare mirrors (source and submodules); git/<url-hash>.lock
//   src/<key>/                checkouts, one per build key
//   build/<key>/              build trees, one per build key
//   wheels/<sha256>.whl       finished wheels, content addressed
//   wheels/<sha256>.named/    a hard link to it under its wheel file name (pip needs the name)
//   keys/<key>.json           manifest: build key → wheel hash, stamps, logs; keys/<key>.lock
//   keys/<key>.session        the processes working in the key's tree now (for the next run)
//   logs/<key>/<stage>.log
//   ccache/                   compiler cache (unless the user points elsewhere)
//   probes/<hash>.json        cached answers of tool probes (resolution on a repeat starts nothing)
//   venvs/<hash>              build venvs (a link to venvs/<hash>.d-<pid>, made when complete),
//                             keyed by interpreter + requirement set; venvs/<hash>.lock, .log
//   peaks/<recipe-hash>.tsv   measured peak memory per source of a recipe's earlier builds
//   build/<key>/admission/    the shared admission state of one build's compiles
//   logs/<key>/compiles.tsv   what the launcher measured per compile; ninja_log, ninja.dot
//   pulls/<key>/              a build store's artifact being downloaded and checked (docs/store.md)
//   trees/<path-hash>.stat    the stat cache of a local source folder, or of a checkout (src/<key>)
//   trees/<path-hash>.last    the slot (work/<slot>) whose place was last copied from that local folder
//   work/<slot>/              a local tree's builds of one configuration (plan::incremental_slot):
//                             src/ (the checkout, its build tree inside), admission/, cmake-seed.cmake,
//                             state.json (the key whose tree is there); work/<slot>.lock
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace archbuild::store {

using GetEnv = std::function<std::optional<std::string>(const std::string& name)>;
GetEnv process_env();  // getenv; empty values count as unset

struct CacheDirChoice {
  std::filesystem::path dir;  // absolute
  std::string origin;         // "--cache-dir", "$ARCHBUILD_CACHE_DIR", "$XDG_CACHE_HOME", "$HOME"
};

// --cache-dir > $ARCHBUILD_CACHE_DIR > $XDG_CACHE_HOME/archbuild > ~/.cache/archbuild.
// A relative --cache-dir or $ARCHBUILD_CACHE_DIR is taken from the current directory; a relative
// $XDG_CACHE_HOME is ignored (the XDG spec says so). Error (exit 2) when none applies.
Result<CacheDirChoice> choose_cache_dir(const std::optional<std::filesystem::path>& flag,
                                        const GetEnv& getenv = process_env());

class Layout {
 public:
  explicit Layout(std::filesystem::path root);
  const std::filesystem::path& root() const { return root_; }

  std::filesystem::path git_dir() const { return root_ / "git"; }
  std::filesystem::path git_mirror(std::string_view url) const;       // git/<url-hash>.git
  std::filesystem::path git_mirror_lock(std::string_view url) const;  // git/<url-hash>.lock
  std::filesystem::path sources_dir() const { return root_ / "src"; }
  std::filesystem::path source_dir(std::string_view key) const;       // src/<key>
  std::filesystem::path builds_dir() const { return root_ / "build"; }
  std::filesystem::path build_dir(std::string_view key) const;        // build/<key>
  std::filesystem::path wheels_dir() const { return root_ / "wheels"; }
  std::filesystem::path wheel(std::string_view sha256) const;         // wheels/<sha256>.whl
  // wheels/<sha256>.named/<filename>: the stored wheel under its own name, for pip (`plan --with`
  // installs torch's finished wheel into a dependent's build venv from the cache).
  std::filesystem::path named_wheel(std::string_view sha256, std::string_view filename) const;
  std::filesystem::path keys_dir() const { return root_ / "keys"; }
  std::filesystem::path manifest(std::string_view key) const;         // keys/<key>.json
  std::filesystem::path key_lock(std::string_view key) const;         // keys/<key>.lock
  // keys/<key>.session: the session of the command now working in the key's tree (run/session.hpp),
  // written and read under the key's lock: a run killed with it there left processes to end.
  std::filesystem::path session_record(std::string_view key) const;
  std::filesystem::path logs_dir() const { return root_ / "logs"; }
  std::filesystem::path log_dir(std::string_view key) const;          // logs/<key>/
  std::filesystem::path log(std::string_view key, std::string_view stage) const;
  std::filesystem::path ccache_dir() const { return root_ / "ccache"; }
  // Memory admission. Peaks are kept per recipe (its package and file name: two
  // projects' recipe.toml must not share), across keys: a new key of the recipe starts from them.
  std::filesystem::path peaks_file(std::string_view package, std::string_view recipe_name) const;
  std::filesystem::path admission_dir(std::string_view key) const;   // build/<key>/admission
  // The build's CMake seed (stages/cmake_seed.hpp), named by CMAKE_TOOLCHAIN_FILE.
  std::filesystem::path cmake_seed(std::string_view key) const;      // build/<key>/cmake-seed.cmake
  std::filesystem::path compiles_file(std::string_view key) const;   // logs/<key>/compiles.tsv
  // The build's .ninja_log and `ninja -t graph`, kept beside the logs for `archbuild report`.
  std::filesystem::path ninja_log_copy(std::string_view key) const;  // logs/<key>/ninja_log
  std::filesystem::path ninja_graph(std::string_view key) const;     // logs/<key>/ninja.dot
  // probes/<hash>.json: a tool's answer to a probe (nvcc --version …), valid while the files it
  // depends on are unchanged (ccache's idea for compiler checks).
  // A second, throw-away cache for `wheel --check-reproducible` (the same plan built elsewhere).
  std::filesystem::path reproducibility_check_dir() const { return root_ / "repro-check"; }
  std::filesystem::path probe(std::string_view hash) const { return root_ / "probes" / (std::string(hash) + ".json"); }
  // venvs/<hash>: a build venv, shared by every build key with the same interpreter and
  // requirement set. It is a symbolic link to the directory it was made in (venvs/<hash>.d-<pid>),
  // created only once that directory is complete: pip's console scripts name their interpreter by
  // absolute path, so the directory cannot be renamed after pip ran, but the link can appear atomically.
  std::filesystem::path venvs_dir() const { return root_ / "venvs"; }
  std::filesystem::path venv(std::string_view hash) const;            // venvs/<hash>
  std::filesystem::path venv_work_dir(std::string_view hash, long pid) const;  // venvs/<hash>.d-<pid>
  std::filesystem::path venv_lock(std::string_view hash) const;       // venvs/<hash>.lock
  std::filesystem::path venv_log(std::string_view hash) const;        // venvs/<hash>.log

  // pulls/<key>/: a build store's artifact while it is downloaded and checked (remote/), removed after.
  std::filesystem::path store_pull_dir(std::string_view key) const { return root_ / "pulls" / std::string(key); }

  // trees/<path-hash>.stat: the stat cache of one local source folder (`--source DIR`,
  // `source.path`), named by 24 hex digits of SHA-256 over its canonical path: what the last scan of
  // that folder saw, so the next one reads only what changed (source::TreeStatCache).
  std::filesystem::path trees_dir() const { return root_ / "trees"; }
  std::filesystem::path tree_stat_cache(const std::filesystem::path& canonical_root) const;
  // trees/<path-hash>.last: the slot whose place (work/<slot>/src) was last copied from that folder;
  // another slot's first key starts from it (source::CopyReuse).
  std::filesystem::path tree_last_checkout(const std::filesystem::path& canonical_root) const;

  // work/<slot>/: where every key of one local folder and configuration builds (plan::BuildStart's
  // slot, 24 hex digits), so the paths a build tree records (CMake's cache, ninja's commands, the
  // launchers' prefix map) are the same for the next key, which continues that build tree.
  std::filesystem::path work_dir(std::string_view slot) const;        // work/<slot>
  std::filesystem::path work_source(std::string_view slot) const { return work_dir(slot) / "src"; }
  std::filesystem::path work_admission(std::string_view slot) const { return work_dir(slot) / "admission"; }
  std::filesystem::path work_cmake_seed(std::string_view slot) const { return work_dir(slot) / "cmake-seed.cmake"; }
  // state.json: the key whose tree and build tree are in src/ now, and that tree's shape.
  std::filesystem::path work_state(std::string_view slot) const { return work_dir(slot) / "state.json"; }
  std::filesystem::path work_lock(std::string_view slot) const;       // work/<slot>.lock

  // Creates the root and its areas (idempotent).
  Result<Ok> create() const;

  // The name of a URL's mirror: 24 hex digits of SHA-256 over the normalised URL (trailing '/'
  // and ".git" dropped, so https://host/a/b and https://host/a/b.git share one mirror).
  static std::string url_hash(std::string_view url);
  // Keys and stage names become file names: [A-Za-z0-9._-], not starting with '.', ≤ 128.
  static bool valid_name(std::string_view name);

 private:
  std::filesystem::path root_;
};

}  // namespace archbuild::store
