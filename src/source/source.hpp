// The fetch stage (libgit2 only; no `git` subprocess): a bare mirror per repository URL, fetched
// incrementally; a checkout of a tag/commit into a per-key tree (written beside it and renamed,
// so a half-written checkout is never reused); submodules recursively, each from its own mirror,
// at the commits the superproject records; a pinned commit verified.
//
// Where mirrors live is not decided here: the caller (store's Layout) says, per URL.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "source/patch.hpp"

namespace archbuild::source {

struct MirrorSlot {
  std::filesystem::path dir;   // the bare mirror (store: git/<url-hash>.git)
  std::filesystem::path lock;  // held while the mirror is created or fetched (git/<url-hash>.lock)
};
using MirrorFor = std::function<MirrorSlot(const std::string& url)>;

// Network and I/O errors are retried: `attempts` tries in all, waiting delay, delay*factor, …
struct RetryPolicy {
  int attempts = 3;
  std::chrono::milliseconds delay{2000};
  double factor = 2.0;
};

struct TransferProgress {
  std::string url;
  std::size_t received_objects = 0, total_objects = 0, indexed_deltas = 0, total_deltas = 0;
  std::size_t received_bytes = 0;
};

struct SourceOptions {
  bool offline = false;     // mirrors only; a missing tag/commit is an error saying so
  bool submodules = true;   // check out submodules recursively
  RetryPolicy retry;
  std::function<void(const std::string& note)> note;             // "fetching tag v2.7.1 from …"
  std::function<void(const TransferProgress&)> progress;         // during downloads
  std::function<bool()> cancelled;                               // Ctrl-C: stop as soon as possible
};

struct SourceSpec {
  std::string url;     // https://…, file:///…, or a local path
  std::string ref;     // a tag ("v2.7.1"), a branch, a full ref ("refs/tags/v2.7.1") or a 40-hex commit
  std::string commit;  // pinned commit (full or ≥ 7 hex digits); empty: not pinned
  // Applied in order to the checkout before it is moved into place (source/patch.hpp): the tree
  // at `target` is wholly patched or not there.
  std::vector<Patch> patches;
};

struct SubmoduleCommit {
  std::string path;    // relative to the top of the checkout ("third_party/minidep/third_party/x")
  std::string url;     // resolved (relative .gitmodules URLs made absolute against the parent's)
  std::string commit;  // what the parent's tree records
};

struct Checkout {
  std::string url;
  std::string ref;
  std::string commit;  // what `ref` resolved to (peeled to a commit)
  std::vector<SubmoduleCommit> submodules;  // depth-first, parents before children
  std::vector<PatchOutcome> patches;        // one per SourceSpec patch: applied or contained
};

// Makes sure the mirror at slot.dir has `ref` — fetching only that tag/branch (or, for a commit
// it lacks, the remote's branches and tags) — and returns the commit it names. Offline: never
// connects. Errors are exit 4 and name the URL.
Result<std::string> update_mirror(const std::string& url, const std::string& ref, const MirrorSlot& slot,
                                  const SourceOptions& options);

// The whole fetch stage: mirror(s) updated, pin verified (a mismatch names both commits),
// `target` replaced by a complete checkout of the commit (a git work tree at a detached HEAD
// whose objects come from the mirror via alternates), submodules in place. The caller holds the
// build key's lock (target is per key). On error nothing is left at `target` or beside it. A
// patch that does not apply is exit 2, naming it and its first failing hunk (describe_failure);
// `options.note` hears each patch before it is applied.
Result<Checkout> fetch_source(const SourceSpec& spec, const std::filesystem::path& target,
                              const MirrorFor& mirror_for, const SourceOptions& options);

// What a ref names now (`--ref BRANCH|TAG|COMMIT`), the mirror updated as update_mirror does (a
// branch is fetched again unless offline): a plan pins the commit, so the key holds it.
struct RefInfo {
  enum class Kind { tag, branch, commit };
  std::string ref;
  std::string commit;  // 40 hex
  Kind kind = Kind::commit;
};
Result<RefInfo> resolve_ref(const std::string& url, const std::string& ref, const MirrorSlot& slot,
                            const SourceOptions& options);

// A file of a commit in a bare mirror, read without a checkout (version.txt before planning):
// its text, nullopt when the commit has no such file. Errors: exit 4 (no mirror, no commit).
Result<std::optional<std::string>> read_file_at(const std::filesystem::path& mirror, const std::string& commit,
                                                const std::string& path);

// HEAD commit of an existing checkout (to check a reused tree), or an error.
Result<std::string> checkout_commit(const std::filesystem::path& dir);
// The committer time (seconds since the epoch) of a checkout's HEAD: SOURCE_DATE_EPOCH for a
// reproducible build.
Result<std::int64_t> checkout_commit_time(const std::filesystem::path& dir);

// The files of one commit, read straight from a bare mirror: no checkout, no network, no lock
// (reads only). `plan` shows the tree's contract this way once the commit is mirrored.
struct CommitFiles {
  std::string commit;  // what the ref resolved to
  // A blob's content by path ("pyproject.toml"); nullopt when the commit has no such file.
  std::function<std::optional<std::string>(const std::string& path)> read;
  // The file names (blobs, not trees or submodules) of a directory of the commit.
  std::function<std::vector<std::string>(const std::string& dir)> list;
};
// Errors (exit 2): no mirror at `mirror`, or `ref` (tag, branch or commit) is not in it.
Result<CommitFiles> open_commit_files(const std::filesystem::path& mirror, const std::string& ref);

// git's rules for a relative submodule URL ("../dep", "./x"): resolved against the parent URL
// (its last path component dropped per "../"). Absolute URLs come back unchanged.
std::string resolve_submodule_url(const std::string& parent_url, const std::string& url);

// A recipe's pinned commit (full or >= 7 hex digits) against what its tag names: true when
// `commit` starts with it.
bool pin_matches(const std::string& commit, const std::string& pin);
// The refusal of a tag that names another commit than the recipe pins (moved upstream, or a
// mirror of another tree): both hashes and the `--ref` way out, exit 4 (docs/build.md). The
// fetch stage and prepare's check of the cached mirror say the same.
Error pin_mismatch(const std::string& url, const std::string& ref, const std::string& commit, const std::string& pin);

// True for 40 hex digits.
bool is_full_commit(const std::string& s);

}  // namespace archbuild::source
