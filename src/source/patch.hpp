// Patches applied to a tree (libgit2's apply; no `git` or `patch` process): checked against a
// commit in a bare mirror without a checkout (prepare's stop, `plan --check` and `wheel` alike),
// and applied to a fresh checkout before it is moved into place (fetch_source), so a tree is either
// wholly patched or not there at all. A patch already contained in the tree — its reverse applies —
// is not applied and is said as such. A patch made in the superproject (`git diff
// --submodule=diff`: a/third_party/foo/src/x.c) is split by the deepest submodule holding each
// file, each part applied inside that submodule; a change of a submodule's commit is refused. A
// local tree (no repository) is patched the same way in memory, then written into archbuild's
// copy of it, never into the user's folder.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace archbuild::source {

struct LocalTree;

struct Patch {
  std::string name;  // how messages name it ("fix-arch.patch")
  std::string text;  // the unified diff (git's format or plain ---/+++), its sha256 checked by the caller
  int strip = 1;     // leading components dropped from its file names (patch -pN)
};

struct PatchOutcome {
  enum class Fit { applies, contained, fails };
  Fit fit = Fit::applies;
  std::string file;    // fails: the file of the first hunk that did not apply
  std::string hunk;    // fails: that hunk's header ("@@ -12,7 +12,7 @@ …")
  std::string reason;  // fails: libgit2's words (the patch's own syntax error included)
  // applies / contained: the parts in submodules whose commit is not mirrored yet, not tried
  // (check_patches; the fetch stage applies them, or stops naming the hunk).
  struct Unchecked {
    std::string path, url, commit;  // the submodule's path from the top, its URL and commit
  };
  std::vector<Unchecked> unchecked;
};

// The bare mirror of a submodule (its URL resolved against its parent's, and the commit its
// parent records), when the cache has it: the caller's (store's) choice of place, which may fetch
// it first. None: its part of a patch is not checked (PatchOutcome::unchecked).
using SubmoduleMirror =
    std::function<std::optional<std::filesystem::path>(const std::string& url, const std::string& commit)>;

// Each patch against the tree of `commit` in the mirror, in order, each onto the result of the
// ones before (a contained one changes nothing). Nothing is written to the mirror (the trial's
// objects stay in memory). A file in a submodule is tried on the submodule's commit (the gitlink
// of `commit`'s tree) in the mirror `submodule_mirror` gives for its URL (resolved against `url`,
// the superproject's); without one the part is unchecked. A part in a submodule the checkout
// will not have (`submodules` off, or its .gitmodules says `update = none`) fails as the fetch
// stage would ("not checked out"), mirrored or not. Errors: no mirror or commit (exit 4).
Result<std::vector<PatchOutcome>> check_patches(const std::filesystem::path& mirror, const std::string& commit,
                                                const std::vector<Patch>& patches, const std::string& url = {},
                                                const SubmoduleMirror& submodule_mirror = {}, bool submodules = true);

// Applies each patch to the work tree of the checkout at `dir`, in order; a contained one is
// skipped. `before(i)` runs before patch i (progress). The first that fails stops: its outcome
// is the last one returned; the tree is then half-patched, so the caller drops it (fetch_source
// does, its checkout being a temporary folder until every patch applied).
Result<std::vector<PatchOutcome>> apply_patches(const std::filesystem::path& dir, const std::vector<Patch>& patches,
                                                const std::function<void(std::size_t)>& before = {});

// The same for a plain folder (a local tree, no repository: `.git` never read): the files the
// patches name are read from `dir` and tried in memory; nothing is written.
Result<std::vector<PatchOutcome>> check_patches_in_folder(const std::filesystem::path& dir,
                                                          const std::vector<Patch>& patches);

// The same for a scanned local tree (source::scan_local_tree), as archbuild's copy of it will hold
// it: only the tree's entries are read, so a file its ignore rules leave out is not there. A patch
// changing such a file (one on disk, not scanned, and not created by a patch before) fails naming
// it and the ignore rules.
Result<std::vector<PatchOutcome>> check_patches_in_tree(const LocalTree& tree, const std::vector<Patch>& patches);

// Applies each patch to the plain folder `dir` (archbuild's copy of a local tree), in order, a
// contained one skipped: all are tried in memory first (`before(i)` runs before patch i), and the
// files they change are written (each replaced by a new file: its stat changes) only when none
// fails. The first that fails stops, its outcome the last returned, and nothing is written.
Result<std::vector<PatchOutcome>> apply_patches_to_folder(const std::filesystem::path& dir,
                                                          const std::vector<Patch>& patches,
                                                          const std::function<void(std::size_t)>& before = {});

// The message of a patch that does not apply: its name, the file and the first failing hunk.
std::string describe_failure(const Patch& p, const PatchOutcome& o, const std::string& where);

namespace detail {
// The patch rewritten to git's form with a/ b/ names at strip 1 (plain ---/+++ sections get a
// `diff --git` line), which libgit2's parser reads; `reverse`: the patch that undoes it.
std::string normalized_patch(const std::string& text, int strip, bool reverse);

// One file's section of a normalized patch (mail headers before the first dropped): its old and
// new names (no a/ b/; "/dev/null" for none), its text, and whether it changes a gitlink (mode
// 160000 or a `Subproject commit` line: a submodule's commit).
struct Section {
  std::string old_path, new_path;
  std::string text;
  bool gitlink = false;
};
std::vector<Section> sections_of(const std::string& normalized);
// The section with its names made relative to the submodule at `sub` (which holds them).
std::string relative_to(const Section& s, const std::string& sub);
}  // namespace detail

}  // namespace archbuild::source
