// Patches applied to a tree (libgit2's apply; no `git` or `patch` process): checked against a
// commit in a bare mirror without a checkout (prepare's stop, `plan --check` and `wheel` alike),
// and applied to a fresh checkout before it is moved into place (fetch_source), so a tree is either
// wholly patched or not there at all. A patch already contained in the tree — its reverse applies —
// is not applied and is said as such.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace archbuild::source {

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
};

// Each patch against the tree of `commit` in the mirror, in order, each onto the result of the
// ones before (a contained one changes nothing). Nothing is written to the mirror (the trial's
// objects stay in memory). Errors: no mirror or commit (exit 4).
Result<std::vector<PatchOutcome>> check_patches(const std::filesystem::path& mirror, const std::string& commit,
                                                const std::vector<Patch>& patches);

// Applies each patch to the work tree of the checkout at `dir`, in order; a contained one is
// skipped. `before(i)` runs before patch i (progress). The first that fails stops: its outcome
// is the last one returned; the tree is then half-patched, so the caller drops it (fetch_source
// does, its checkout being a temporary folder until every patch applied).
Result<std::vector<PatchOutcome>> apply_patches(const std::filesystem::path& dir, const std::vector<Patch>& patches,
                                                const std::function<void(std::size_t)>& before = {});

// The message of a patch that does not apply: its name, the file and the first failing hunk.
std::string describe_failure(const Patch& p, const PatchOutcome& o, const std::string& where);

namespace detail {
// The patch rewritten to git's form with a/ b/ names at strip 1 (plain ---/+++ sections get a
// `diff --git` line), which libgit2's parser reads; `reverse`: the patch that undoes it.
std::string normalized_patch(const std::string& text, int strip, bool reverse);
}  // namespace detail

}  // namespace archbuild::source
