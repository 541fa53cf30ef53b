// Reading a commit's files from its bare mirror (blobs by path), for showing a tree's contract
// before anything is checked out.
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "source/git_util.hpp"
#include "source/mirror.hpp"
#include "source/source.hpp"

namespace fs = std::filesystem;

namespace archbuild::source {

using namespace detail;

namespace {

using Tree = std::unique_ptr<git_tree, Deleter<git_tree, git_tree_free>>;
using TreeEntry = std::unique_ptr<git_tree_entry, Deleter<git_tree_entry, git_tree_entry_free>>;
using Blob = std::unique_ptr<git_blob, Deleter<git_blob, git_blob_free>>;

// Shared by the two functions of CommitFiles: the repository stays open while either lives.
struct OpenCommit {
  Repo repo;
  Tree tree;
};

}  // namespace

Result<CommitFiles> open_commit_files(const fs::path& mirror, const std::string& ref) {
  init_libgit2();
  std::error_code ec;
  if (!fs::is_directory(mirror, ec)) return Error::bad_input(fmt::format("no mirror at {}", mirror.string()));
  git_repository* raw = nullptr;
  if (git_repository_open_bare(&raw, mirror.c_str()) != 0)
    return Error::bad_input(fmt::format("{}: cannot open the mirror: {}", mirror.string(), last_error()));
  auto open = std::make_shared<OpenCommit>();
  open->repo.reset(raw);
  auto resolved = resolve_local(open->repo.get(), ref);
  if (!resolved) return Error::bad_input(fmt::format("{}: the mirror has no '{}' yet", mirror.string(), ref));
  git_oid oid;
  git_commit* commit = nullptr;
  if (git_oid_fromstr(&oid, resolved->commit.c_str()) != 0 || git_commit_lookup(&commit, open->repo.get(), &oid) != 0)
    return Error::bad_input(fmt::format("{}: cannot read commit {}: {}", mirror.string(), resolved->commit, last_error()));
  Commit commit_holder(commit);
  git_tree* tree = nullptr;
  if (git_commit_tree(&tree, commit) != 0)
    return Error::bad_input(fmt::format("{}: cannot read the tree of {}: {}", mirror.string(), resolved->commit, last_error()));
  open->tree.reset(tree);

  CommitFiles files;
  files.commit = resolved->commit;
  files.read = [open](const std::string& path) -> std::optional<std::string> {
    git_tree_entry* e = nullptr;
    if (git_tree_entry_bypath(&e, open->tree.get(), path.c_str()) != 0) return std::nullopt;
    TreeEntry entry(e);
    if (git_tree_entry_type(e) != GIT_OBJECT_BLOB) return std::nullopt;
    git_blob* b = nullptr;
    if (git_blob_lookup(&b, open->repo.get(), git_tree_entry_id(e)) != 0) return std::nullopt;
    Blob blob(b);
    const char* data = static_cast<const char*>(git_blob_rawcontent(b));
    return std::string(data, static_cast<std::size_t>(git_blob_rawsize(b)));
  };
  files.list = [open](const std::string& dir) {
    std::vector<std::string> names;
    git_tree_entry* e = nullptr;
    if (git_tree_entry_bypath(&e, open->tree.get(), dir.c_str()) != 0) return names;
    TreeEntry entry(e);
    if (git_tree_entry_type(e) != GIT_OBJECT_TREE) return names;
    git_tree* sub = nullptr;
    if (git_tree_lookup(&sub, open->repo.get(), git_tree_entry_id(e)) != 0) return names;
    Tree subtree(sub);
    for (std::size_t i = 0, n = git_tree_entrycount(sub); i < n; ++i) {
      const git_tree_entry* child = git_tree_entry_byindex(sub, i);
      if (git_tree_entry_type(child) == GIT_OBJECT_BLOB) names.emplace_back(git_tree_entry_name(child));
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  return files;
}

}  // namespace archbuild::source
