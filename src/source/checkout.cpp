// Checkouts: a work tree at a detached HEAD whose objects are borrowed from the mirror
// (objects/info/alternates, like `git clone --shared`), so a PyTorch-sized checkout costs the
// files only; submodules recursively, each from its own mirror.
#include <cstdlib>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "core/text.hpp"
#include "source/git_util.hpp"
#include "source/mirror.hpp"
#include "source/source.hpp"

namespace fs = std::filesystem;

namespace archbuild::source {

using namespace detail;

namespace {

constexpr int kMaxDepth = 8;  // submodules of submodules …; a cycle stops here

void note(const SourceOptions& o, const std::string& s) {
  if (o.note) o.note(s);
}

struct SubmoduleEntry {
  std::string name, path, url;
  git_oid commit{};
  bool has_commit = false;
  bool update_none = false;
};

extern "C" int collect_submodule(git_submodule* sm, const char* name, void* payload) {
  auto* out = static_cast<std::vector<SubmoduleEntry>*>(payload);
  SubmoduleEntry e;
  e.name = name;
  e.path = git_submodule_path(sm) ? git_submodule_path(sm) : name;
  e.url = git_submodule_url(sm) ? git_submodule_url(sm) : "";
  if (const git_oid* id = git_submodule_head_id(sm)) {
    e.commit = *id;
    e.has_commit = true;
  }
  e.update_none = git_submodule_update_strategy(sm) == GIT_SUBMODULE_UPDATE_NONE;
  out->push_back(e);
  return 0;
}

// Checks out `commit` from the mirror at `mirror_dir` into the empty directory `dir`, then its
// submodules. `prefix` is dir's path relative to the top checkout (for the report).
Result<Ok> checkout_into(const fs::path& dir, const fs::path& mirror_dir, const std::string& url,
                         const Resolved& what, const std::string& prefix, int depth, const MirrorFor& mirror_for,
                         const SourceOptions& options, std::vector<SubmoduleCommit>& subs) {
  if (depth > kMaxDepth)
    return Error::build_failed(fmt::format("{}: submodules nested deeper than {} (a cycle?)", prefix, kMaxDepth));
  git_repository* raw = nullptr;
  git_repository_init_options io;
  git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
  io.flags = GIT_REPOSITORY_INIT_MKPATH;
  if (git_repository_init_ext(&raw, dir.c_str(), &io) != 0)
    return Error::build_failed(fmt::format("{}: cannot create the checkout: {}", dir.string(), last_error()));
  Repo repo(raw);
  fs::path gitdir = git_repository_path(repo.get());
  repo.reset();
  {
    std::ofstream alt(gitdir / "objects/info/alternates");
    alt << fs::absolute(mirror_dir / "objects").string() << "\n";
    if (!alt) return Error::build_failed(fmt::format("{}: cannot write objects/info/alternates", gitdir.string()));
  }
  if (git_repository_open(&raw, dir.c_str()) != 0)
    return Error::build_failed(fmt::format("{}: cannot open the checkout: {}", dir.string(), last_error()));
  repo.reset(raw);

  git_remote* remote = nullptr;  // so tools that ask git for the origin (and submodule init) see it
  if (git_remote_create(&remote, repo.get(), "origin", url.c_str()) == 0) git_remote_free(remote);

  git_oid oid;
  git_oid_fromstr(&oid, what.commit.c_str());
  git_object* obj = nullptr;
  if (git_object_lookup(&obj, repo.get(), &oid, GIT_OBJECT_COMMIT) != 0)
    return Error::build_failed(fmt::format("{}: commit {} is not in the mirror {}: {}", url, what.commit,
                                           mirror_dir.string(), last_error()));
  Object commit(obj);
  git_checkout_options co;
  git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
  co.checkout_strategy = GIT_CHECKOUT_FORCE;
  if (git_checkout_tree(repo.get(), commit.get(), &co) != 0)
    return Error::build_failed(fmt::format("{}: cannot check out {}: {}", dir.string(), what.commit, last_error()));
  if (git_repository_set_head_detached(repo.get(), &oid) != 0)
    return Error::build_failed(fmt::format("{}: cannot set HEAD: {}", dir.string(), last_error()));
  if (what.refname.rfind("refs/tags/", 0) == 0) {  // keep the tag, so `git describe` works in the tree
    git_oid target;
    git_reference* ref = nullptr;
    if (git_oid_fromstr(&target, what.target.c_str()) == 0 &&
        git_reference_create(&ref, repo.get(), what.refname.c_str(), &target, 1, "archbuild checkout") == 0)
      git_reference_free(ref);
  }
  if (!options.submodules) return Ok{};

  std::vector<SubmoduleEntry> entries;
  if (git_submodule_foreach(repo.get(), collect_submodule, &entries) != 0)
    return Error::build_failed(fmt::format("{}: cannot read .gitmodules: {}", dir.string(), last_error()));
  for (const auto& e : entries) {
    std::string sub_prefix = prefix.empty() ? e.path : prefix + "/" + e.path;
    if (!e.has_commit || e.update_none) {
      note(options, fmt::format("submodule {}: {}; skipped", sub_prefix,
                                e.update_none ? "update = none" : "not in the tree"));
      continue;
    }
    if (e.url.empty()) return Error::build_failed(fmt::format("submodule {}: no url in .gitmodules", sub_prefix));
    if (options.cancelled && options.cancelled())
      return Error::build_failed(fmt::format("interrupted while checking out submodule {}", sub_prefix));
    std::string sub_url = resolve_submodule_url(url, e.url);
    std::string sub_commit = oid_hex(e.commit);
    note(options, fmt::format("submodule {} at {} from {}", sub_prefix, sub_commit.substr(0, 12), sub_url));
    MirrorSlot slot = mirror_for(sub_url);
    auto resolved = update_mirror_resolved(sub_url, sub_commit, slot, options);
    if (!resolved) return Error{resolved.error().exit, fmt::format("submodule {}: {}", sub_prefix, resolved.error().message)};
    fs::path sub_dir = dir / e.path;
    std::error_code ec;
    if (fs::exists(sub_dir, ec)) {
      if (!fs::is_empty(sub_dir, ec))
        return Error::build_failed(fmt::format("submodule {}: {} is not empty in the superproject's tree", sub_prefix,
                                               e.path));
      fs::remove(sub_dir, ec);
    }
    subs.push_back({sub_prefix, sub_url, sub_commit});
    auto r = checkout_into(sub_dir, slot.dir, sub_url, *resolved, sub_prefix, depth + 1, mirror_for, options, subs);
    if (!r) return r;
    // Record it in the parent's config as `git submodule init` would.
    git_submodule* sm = nullptr;
    if (git_submodule_lookup(&sm, repo.get(), e.name.c_str()) == 0) {
      git_submodule_init(sm, 1);
      git_submodule_free(sm);
    }
  }
  return Ok{};
}

}  // namespace

bool pin_matches(const std::string& commit, const std::string& pin) {
  std::string p = text::lower(text::trim(pin));
  return !p.empty() && text::starts_with_icase(commit, p);
}

Error pin_mismatch(const std::string& url, const std::string& ref, const std::string& commit, const std::string& pin) {
  return Error::build_failed(fmt::format(
      "{}: '{}' is commit {}, but the recipe pins commit {}; the tag may have been moved upstream, or this "
      "repository is not the recipe's — check the recipe's commit (--ref {} builds the commit this repository's "
      "'{}' names)",
      url, ref, commit, pin, ref, ref));
}

Result<Checkout> fetch_source(const SourceSpec& spec, const fs::path& target, const MirrorFor& mirror_for,
                              const SourceOptions& options) {
  init_libgit2();
  MirrorSlot slot = mirror_for(spec.url);
  auto resolved = update_mirror_resolved(spec.url, spec.ref, slot, options);
  if (!resolved) return resolved.error();
  if (!spec.commit.empty()) {
    std::string pin = text::lower(text::trim(spec.commit));
    bool hex = pin.size() >= 7 && pin.size() <= 40 && pin.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!hex) return Error::bad_input(fmt::format("pinned commit '{}' is not a commit hash (7 to 40 hex digits)", spec.commit));
    if (!pin_matches(resolved->commit, pin)) return pin_mismatch(spec.url, spec.ref, resolved->commit, spec.commit);
  }

  // Leftovers of killed runs (the caller holds the key's lock, so they are nobody's).
  std::error_code ec;
  std::string prefix = "." + target.filename().string() + ".tmp-";
  fs::create_directories(target.parent_path(), ec);
  for (auto it = fs::directory_iterator(target.parent_path(), ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().filename().string().rfind(prefix, 0) == 0) {
      std::error_code e2;
      fs::remove_all(it->path(), e2);
    }

  std::string tmpl = (target.parent_path() / (prefix + "XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    return Error::build_failed(fmt::format("{}: cannot create a temp directory beside it", target.string()));
  fs::path tmp(buf.data());
  Checkout out{spec.url, spec.ref, resolved->commit, {}};
  note(options, fmt::format("checking out {} ({}) into {}", spec.ref, resolved->commit.substr(0, 12), target.string()));
  auto r = checkout_into(tmp, slot.dir, spec.url, *resolved, "", 0, mirror_for, options, out.submodules);
  if (!r) {
    fs::remove_all(tmp, ec);
    return r.error();
  }
  // Patched here, before the rename: a run killed between two patches leaves only a temp folder,
  // removed by the next run, which checks out and patches afresh.
  if (!spec.patches.empty()) {
    auto applied = apply_patches(tmp, spec.patches, [&](std::size_t i) {
      note(options, fmt::format("patch {}/{}: {}", i + 1, spec.patches.size(), spec.patches[i].name));
    });
    std::optional<Error> failure;
    if (!applied) failure = applied.error();
    else if (applied->size() < spec.patches.size() || applied->back().fit == PatchOutcome::Fit::fails)
      failure = Error::bad_input(describe_failure(spec.patches[applied->size() - 1], applied->back(),
                                                  fmt::format("{} at {}", spec.url, resolved->commit.substr(0, 12))));
    if (failure) {
      fs::remove_all(tmp, ec);
      return *failure;
    }
    out.patches = std::move(*applied);
  }
  fs::remove_all(target, ec);
  fs::rename(tmp, target, ec);
  if (ec) {
    std::error_code e2;
    fs::remove_all(tmp, e2);
    return Error::build_failed(fmt::format("{}: cannot move the checkout into place: {}", target.string(), ec.message()));
  }
  return out;
}

namespace {

// The repository at `dir` and its HEAD commit id.
Result<std::pair<Repo, git_oid>> open_head(const fs::path& dir) {
  init_libgit2();
  git_repository* raw = nullptr;
  if (git_repository_open(&raw, dir.c_str()) != 0)
    return Error::build_failed(fmt::format("{}: not a checkout: {}", dir.string(), last_error()));
  Repo repo(raw);
  git_oid oid;
  if (git_reference_name_to_id(&oid, repo.get(), "HEAD") != 0)
    return Error::build_failed(fmt::format("{}: no HEAD: {}", dir.string(), last_error()));
  return std::pair<Repo, git_oid>(std::move(repo), oid);
}

}  // namespace

Result<std::string> checkout_commit(const fs::path& dir) {
  auto head = open_head(dir);
  if (!head) return head.error();
  return oid_hex(head->second);
}

Result<std::int64_t> checkout_commit_time(const fs::path& dir) {
  auto head = open_head(dir);
  if (!head) return head.error();
  git_commit* commit = nullptr;
  if (git_commit_lookup(&commit, head->first.get(), &head->second) != 0)
    return Error::build_failed(fmt::format("{}: HEAD is not a commit: {}", dir.string(), last_error()));
  std::int64_t t = git_commit_time(commit);
  git_commit_free(commit);
  return t;
}

}  // namespace archbuild::source
