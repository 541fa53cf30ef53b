// Internal to source/: mirror access shared by the fetch and checkout code.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "source/git_util.hpp"
#include "source/source.hpp"

namespace archbuild::source {

struct Resolved {
  std::string commit;   // peeled commit, 40 hex
  std::string refname;  // "refs/tags/v1.0" ("" for a commit)
  std::string target;   // what the ref points at (an annotated tag object, or the commit)
};

// Opens the bare mirror (creating it when `create`; a damaged one is recreated).
Result<detail::Repo> open_mirror(const std::filesystem::path& dir, const std::string& url, bool create,
                                 const SourceOptions& options);
// `ref` in the mirror, without any network.
std::optional<Resolved> resolve_local(git_repository* repo, const std::string& ref);
// update_mirror, with the ref name it resolved through.
Result<Resolved> update_mirror_resolved(const std::string& url, const std::string& ref, const MirrorSlot& slot,
                                        const SourceOptions& options);

}  // namespace archbuild::source
