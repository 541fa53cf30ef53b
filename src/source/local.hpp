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

struct LocalEntry {
  std::string path;                   // relative, '/'-separated
  std::filesystem::path from;         // where its content is read (a followed link's target)
  enum class Kind { file, executable, symlink } kind = Kind::file;
  std::string link_target;            // for symlink
};

struct LocalTree {
  std::filesystem::path root;         // absolute, canonical
  std::vector<LocalEntry> entries;    // sorted by path
  std::string content_hash;           // SHA-256 over every entry's path, kind and content
  std::uint64_t bytes = 0;
  bool git = false;                   // inside a git work tree
  std::optional<std::string> head;    // that repository's HEAD commit, when it has one
  std::optional<std::int64_t> commit_time;  // HEAD's committer time (SOURCE_DATE_EPOCH)
};

// Reads the tree and hashes it. Errors: exit 2 (not a directory, unreadable file).
// `what` names where the folder was given, for the message when it is none ("--source",
// "source.path of recipe.toml").
Result<LocalTree> scan_local_tree(const std::filesystem::path& dir, std::string_view what = "--source");

// Copies the scanned entries into `target` (written beside it and renamed: a half-written copy
// is never taken for a finished one). Fails (exit 4) if a file changed since the scan.
Result<std::filesystem::path> copy_local_tree(const LocalTree& tree, const std::filesystem::path& target,
                                              const std::function<bool()>& cancelled = {});

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
