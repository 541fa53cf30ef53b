// A local source tree built as it is (`archbuild wheel --source DIR`, a recipe's `source.path`):
// uncommitted changes included, the tree itself never touched. The build works on archbuild's own
// copy. The set of files is what git would consider part of the work tree: everything except
// `.git` and what the tree's (and each checked-out submodule's) ignore rules exclude; outside a git
// repository, everything except `.git`. Submodules count as checked out, as they are.
// Symlinks that stay inside the tree are kept as links; those that leave it are followed and
// their target copied (rsync's --copy-unsafe-links), so the copy builds without the original.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace archbuild::source {

// What stat(2) says of a file, as git's index keeps it: while all of it is unchanged (and the
// file was not written too close to the scan that recorded it), its content is taken as unchanged.
struct FileStat {
  std::uint64_t dev = 0, ino = 0;
  std::uint32_t mode = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_s = 0, mtime_ns = 0, ctime_s = 0, ctime_ns = 0;
  bool operator==(const FileStat&) const = default;
};

struct LocalEntry {
  std::string path;                   // relative, '/'-separated
  std::string from;                   // where its content is read (a followed link's target); empty: root/path
  enum class Kind { file, executable, symlink } kind = Kind::file;
  std::string link_target;            // for symlink
  FileStat stat;                      // of `from` (a file; zero for a symlink)
  std::string digest;                 // SHA-256 of its content (a link: of its target text)
};

struct LocalTree;
// Where the scan read an entry's content: `from`, else the tree's root / path.
std::filesystem::path content_path(const LocalTree& tree, const LocalEntry& e);

struct LocalTree {
  std::filesystem::path root;         // absolute, canonical
  std::vector<LocalEntry> entries;    // sorted by path
  std::string content_hash;           // SHA-256 over every entry's path, kind and content
  std::uint64_t bytes = 0;
  bool git = false;                   // inside a git work tree
  std::optional<std::string> head;    // that repository's HEAD commit, when it has one
  std::optional<std::int64_t> commit_time;  // HEAD's committer time (SOURCE_DATE_EPOCH)
};

// The stat cache of one source folder (git's index, for a tree that is not committed): the caller
// reads the bytes of the file store/ keeps for the folder and hands them in untrusted (anything
// that does not parse, names another folder, or fails its checksum is ignored: the scan then
// hashes everything); the scan fills `next`, which the caller writes atomically for the next one.
// A file's recorded digest is used only while its whole FileStat is unchanged and its mtime and
// ctime are older than the recording scan's start by more than a timestamp's granularity
// (`stat_cache_usable`); every other file is read. The content hash is the same value either way.
// The cache also keeps the walk's ignore decisions (git's rules: which files and folders are left
// out) with the state of every input of them (the .gitignore files, info/exclude, the excludes
// file, the config values that change matching, each repository's, the library's version): the
// next walk takes each decision the cache names from it, and checks at the end that no input
// changed (a rule file racily recent counts as changed); if one did, it walks again asking
// libgit2 about every entry. The files are the same set either way. When nothing changed, the
// scan would write `previous` byte for byte: `unchanged`, and `next` is left empty (not written).
struct TreeStatCache {
  std::optional<std::string> previous;  // the cache file's bytes; none when there is none (a scan
                                        // that writes `next` takes its buffer: then none after)
  std::string next;                     // the cache to keep, after a successful scan (empty when `unchanged`)
  std::size_t reused = 0;               // files whose recorded digest was used
  std::size_t rehashed = 0;             // files read and hashed
  bool previous_valid = false;          // `previous` parsed, for this folder
  std::size_t ignore_reused = 0;        // ignore decisions taken from `previous`
  std::size_t ignore_asked = 0;         // ignore decisions asked of libgit2 (in the walk that stood)
  bool rewalked = false;                // the rules' inputs changed: walked again, asking libgit2
  bool unchanged = false;               // `previous` is what the scan would write: nothing to write
  // The folder `previous` was recorded for, when the folder was moved since (archbuild's own
  // copy renamed to a new key's place: rename keeps every file's stat); else the folder scanned.
  std::optional<std::filesystem::path> recorded_root;
};

// The rule for one file: its recorded digest stands for its content only while every stat field
// is unchanged and neither mtime nor ctime is at or after `racy_from` (the recording scan's start
// less the granularity slack): a file written in the same tick as the scan that hashed it may
// change again without its timestamps changing (git's "racily clean" entries).
struct StatTime {
  std::int64_t s = 0, ns = 0;
  auto operator<=>(const StatTime&) const = default;
};
bool stat_cache_usable(const FileStat& recorded, const FileStat& now, StatTime racy_from);

// Reads the tree and hashes it. Errors: exit 2 (not a directory, unreadable file).
// `what` names where the folder was given, for the message when it is none ("--source",
// "source.path of recipe.toml"). With `cache`, files unchanged since it was recorded are not read.
Result<LocalTree> scan_local_tree(const std::filesystem::path& dir, std::string_view what = "--source",
                                  TreeStatCache* cache = nullptr);

// An earlier copy of the same folder (archbuild's checkout of a previous key) that a new copy
// starts from: it is moved to the new place, its files whose content is already the tree's are
// kept, the others written again, what the tree no longer has removed. What a file there holds
// is known from its own stat cache (`cache`, recorded when it was copied; a file the build
// wrote since has another stat and is read or replaced), so the result is the tree's content
// exactly: it is hashed, as a fresh copy is, against the tree's content hash.
struct CopyReuse {
  std::filesystem::path previous;  // the earlier copy (moved away: it is consumed)
  TreeStatCache cache;             // its stat cache in `previous`; the new copy's out in `next`
  // Relative paths in `previous` left as they are (not listed, kept, never removed): the build
  // tree an incremental build continues (plan::BuildStart). A tree entry under one is written.
  std::vector<std::string> keep;
  std::size_t kept = 0, written = 0, removed = 0;
  bool reused = false;             // the earlier copy was moved and used
};

// Copies the scanned entries into `target` (written beside it and renamed: a half-written copy
// is never taken for a finished one). Fails (exit 4) if a file changed since the scan. With
// `reuse`, starts from its earlier copy where it can be moved (else from nothing), and fills
// `reuse->cache.next` with the stat cache of the new copy either way (for the next reuse).
// Files are cloned (FICLONE) where the file system shares blocks, else copied; never linked.
Result<std::filesystem::path> copy_local_tree(const LocalTree& tree, const std::filesystem::path& target,
                                              const std::function<bool()>& cancelled = {},
                                              CopyReuse* reuse = nullptr);

// A submodule the tree's .gitmodules names whose folder is missing or empty: a checkout made
// without --recursive. PyTorch's configure then runs `git submodule update --init --recursive`
// itself where the tree has .git (a download mid-build), else stops ("Submodule … appears
// incomplete", pytorch/pytorch@09dbde5c7b52:cmake/PreBuildSteps.cmake); archbuild's copy has no .git.
struct MissingSubmodule {
  std::string path;                   // as .gitmodules says ("third_party/pybind11")
  std::string url;                    // as .gitmodules says
  std::optional<std::string> commit;  // the gitlink HEAD records; none: no gitlink (or no repository)
};
// In .gitmodules order; empty when the tree has no .gitmodules or every folder has files.
std::vector<MissingSubmodule> missing_submodules(const std::filesystem::path& root);

}  // namespace archbuild::source
