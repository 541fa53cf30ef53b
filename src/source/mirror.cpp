// Bare mirrors: created on first use, fetched only for what they lack.
#include <cstdlib>
#include <thread>
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

void note(const SourceOptions& o, const std::string& s) {
  if (o.note) o.note(s);
}

bool cancelled(const SourceOptions& o) { return o.cancelled && o.cancelled(); }

// A retryable failure (network, I/O) vs one that retrying cannot fix.
struct Attempt {
  bool ok = false;
  bool permanent = false;
  std::string message;
  bool names_url = false;  // the message is a whole sentence naming the URL (else libgit2's words)
};

// Whether fetching again can help after libgit2 failed with `rc`: a network, TLS or I/O failure
// may pass; an object or reference the remote lacks, a corrupt pack, an invalid refspec will fail
// the same way every time. Judged by libgit2's error class (a repository path not found is a
// network-class error, kept retryable: a mount may come back).
bool fetch_error_retryable(int rc, const git_error* e) {
  if (rc == GIT_EUSER) return false;  // cancelled
  if (rc == GIT_EMISMATCH || rc == GIT_EINVALIDSPEC) return false;
  if (!e) return true;
  switch (e->klass) {
    case GIT_ERROR_ODB:
    case GIT_ERROR_OBJECT:
    case GIT_ERROR_REFERENCE:
    case GIT_ERROR_INDEXER:
    case GIT_ERROR_ZLIB:
    case GIT_ERROR_INVALID:
    case GIT_ERROR_TREE:
    case GIT_ERROR_TAG:
      return false;
    default:
      return true;  // GIT_ERROR_NET, _OS, _SSL, _SSH, _HTTP and anything unknown
  }
}

struct CallbackPayload {
  const SourceOptions* options;
  std::string url;
};

extern "C" int on_transfer(const git_indexer_progress* stats, void* payload) {
  auto* p = static_cast<CallbackPayload*>(payload);
  if (p->options->cancelled && p->options->cancelled()) return -1;
  if (p->options->progress) {
    TransferProgress t;
    t.url = p->url;
    t.received_objects = stats->received_objects;
    t.total_objects = stats->total_objects;
    t.indexed_deltas = stats->indexed_deltas;
    t.total_deltas = stats->total_deltas;
    t.received_bytes = stats->received_bytes;
    p->options->progress(t);
  }
  return 0;
}

extern "C" int on_sideband(const char*, int, void* payload) {
  auto* p = static_cast<CallbackPayload*>(payload);
  return p->options->cancelled && p->options->cancelled() ? -1 : 0;
}

Result<Repo> create_mirror(const fs::path& dir, const std::string& url) {
  // Initialised beside it and renamed, so a killed run never leaves a half-made mirror.
  fs::create_directories(dir.parent_path());
  std::string tmpl = (dir.parent_path() / ("." + dir.filename().string() + ".tmp-XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    return Error::build_failed(fmt::format("{}: cannot create the mirror directory", dir.string()));
  fs::path tmp(buf.data());
  git_repository* raw = nullptr;
  git_repository_init_options opts;
  git_repository_init_options_init(&opts, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
  opts.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH;
  if (git_repository_init_ext(&raw, tmp.c_str(), &opts) != 0) {
    std::string e = last_error();
    std::error_code ec;
    fs::remove_all(tmp, ec);
    return Error::build_failed(fmt::format("{}: cannot create a mirror: {}", dir.string(), e));
  }
  Repo repo(raw);
  git_remote* remote = nullptr;  // recorded for people looking into the cache
  if (git_remote_create(&remote, repo.get(), "origin", url.c_str()) == 0) git_remote_free(remote);
  repo.reset();
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    return Error::build_failed(fmt::format("{}: cannot create a mirror: {}", dir.string(), ec.message()));
  }
  if (git_repository_open_bare(&raw, dir.c_str()) != 0)
    return Error::build_failed(fmt::format("{}: cannot open the new mirror: {}", dir.string(), last_error()));
  return Repo(raw);
}

}  // namespace

Result<Repo> open_mirror(const fs::path& dir, const std::string& url, bool create, const SourceOptions& options) {
  init_libgit2();
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    git_repository* raw = nullptr;
    if (git_repository_open_bare(&raw, dir.c_str()) == 0) return Repo(raw);
    if (!create)
      return Error::build_failed(fmt::format("the mirror of {} at {} is damaged: {}", url, dir.string(), last_error()));
    note(options, fmt::format("the mirror of {} at {} is damaged ({}); recreating it", url, dir.string(), last_error()));
    fs::remove_all(dir, ec);
  }
  if (!create) return Error::build_failed(fmt::format("offline: there is no mirror of {} yet (run once without --offline)", url));
  note(options, fmt::format("creating a mirror of {}", url));
  return create_mirror(dir, url);
}

std::optional<Resolved> resolve_local(git_repository* repo, const std::string& ref) {
  if (is_full_commit(ref)) {
    git_oid oid;
    if (git_oid_fromstr(&oid, ref.c_str()) != 0) return std::nullopt;
    git_commit* c = nullptr;
    if (git_commit_lookup(&c, repo, &oid) != 0) return std::nullopt;
    git_commit_free(c);
    return Resolved{text::lower(ref), "", oid_hex(oid)};
  }
  std::vector<std::string> names;
  if (ref.rfind("refs/", 0) == 0) {
    names = {ref};
  } else {
    names = {"refs/tags/" + ref, "refs/heads/" + ref};
  }
  for (const auto& name : names) {
    git_reference* r = nullptr;
    if (git_reference_lookup(&r, repo, name.c_str()) != 0) continue;
    Reference ref_holder(r);
    git_object* peeled = nullptr;
    if (git_reference_peel(&peeled, r, GIT_OBJECT_COMMIT) != 0) continue;
    Object obj(peeled);
    Resolved res;
    res.commit = oid_hex(*git_object_id(peeled));
    res.refname = name;
    const git_oid* target = git_reference_target(r);
    res.target = target ? oid_hex(*target) : res.commit;
    return res;
  }
  return std::nullopt;
}

namespace {

// One connection: list the remote's refs, download what `ref` needs, update the mirror's refs.
Attempt fetch_once(git_repository* repo, const std::string& url, const std::string& ref,
                   const SourceOptions& options) {
  Attempt a;
  git_remote* raw = nullptr;
  if (git_remote_create_anonymous(&raw, repo, url.c_str()) != 0) {
    a.permanent = true;
    a.message = last_error();
    return a;
  }
  Remote remote(raw);
  CallbackPayload payload{&options, url};
  git_remote_callbacks cb;
  git_remote_init_callbacks(&cb, GIT_REMOTE_CALLBACKS_VERSION);
  cb.transfer_progress = on_transfer;
  cb.sideband_progress = on_sideband;
  cb.payload = &payload;
  git_proxy_options proxy;
  git_proxy_options_init(&proxy, GIT_PROXY_OPTIONS_VERSION);
  proxy.type = GIT_PROXY_AUTO;
  if (int rc = git_remote_connect(remote.get(), GIT_DIRECTION_FETCH, &cb, &proxy, nullptr); rc != 0) {
    a.message = last_error();
    a.permanent = !fetch_error_retryable(rc, git_error_last());
    return a;
  }
  const git_remote_head** heads = nullptr;
  size_t count = 0;
  if (int rc = git_remote_ls(&heads, &count, remote.get()); rc != 0) {
    a.message = last_error();
    a.permanent = !fetch_error_retryable(rc, git_error_last());
    return a;
  }
  std::vector<std::string> refspecs;
  if (is_full_commit(ref)) {
    std::string want = text::lower(ref);
    for (size_t i = 0; i < count; ++i) {
      std::string name = heads[i]->name;
      // "refs/tags/v1^{}" is the commit an annotated tag points at: fetch the tag itself.
      if (name.size() > 3 && name.compare(name.size() - 3, 3, "^{}") == 0) name.resize(name.size() - 3);
      if (oid_hex(heads[i]->oid) == want && (name.rfind("refs/heads/", 0) == 0 || name.rfind("refs/tags/", 0) == 0)) {
        refspecs = {"+" + name + ":" + name};
        break;
      }
    }
    if (refspecs.empty()) {
      // Not at a tip: fetch the branches and tags (git sends only the objects we lack).
      note(options, fmt::format("fetching the branches and tags of {} (commit {} is not at a tip)", url, want.substr(0, 12)));
      refspecs = {"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"};
    }
  } else {
    std::vector<std::string> candidates = ref.rfind("refs/", 0) == 0
                                              ? std::vector<std::string>{ref}
                                              : std::vector<std::string>{"refs/tags/" + ref, "refs/heads/" + ref};
    std::string found;
    for (const auto& c : candidates) {
      for (size_t i = 0; i < count && found.empty(); ++i)
        if (c == heads[i]->name) found = c;
      if (!found.empty()) break;
    }
    if (found.empty()) {
      std::vector<std::string> names;
      for (size_t i = 0; i < count; ++i) {
        std::string n = heads[i]->name;
        if (n.size() > 3 && n.compare(n.size() - 3, 3, "^{}") == 0) continue;
        for (const char* p : {"refs/tags/", "refs/heads/"})
          if (n.rfind(p, 0) == 0) names.push_back(n.substr(std::string(p).size()));
      }
      auto near = text::nearest(ref, names);
      a.permanent = true;
      a.names_url = true;
      a.message = fmt::format("{} has no tag or branch '{}'{}", url, ref,
                              near.empty() ? "" : " (did you mean " + text::join(near, ", ") + "?)");
      return a;
    }
    note(options, fmt::format("fetching {} from {}", found, url));
    refspecs = {"+" + found + ":" + found};
  }
  std::vector<char*> specs;
  for (auto& s : refspecs) specs.push_back(s.data());
  git_strarray arr{specs.data(), specs.size()};
  git_fetch_options fo;
  git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
  fo.callbacks = cb;
  fo.proxy_opts = proxy;
  fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
  fo.prune = GIT_FETCH_NO_PRUNE;
  fo.update_fetchhead = 0;
  int rc = git_remote_download(remote.get(), &arr, &fo);
  if (rc == 0) rc = git_remote_update_tips(remote.get(), &cb, 0, GIT_REMOTE_DOWNLOAD_TAGS_NONE, "archbuild fetch");
  if (rc != 0) {
    a.message = rc == GIT_EUSER ? "interrupted" : last_error();
    a.permanent = !fetch_error_retryable(rc, git_error_last());
    return a;
  }
  git_remote_disconnect(remote.get());
  a.ok = true;
  return a;
}

}  // namespace

Result<Resolved> update_mirror_resolved(const std::string& url, const std::string& ref, const MirrorSlot& slot,
                                        const SourceOptions& options) {
  init_libgit2();
  if (url.empty()) return Error::build_failed("empty repository URL");
  if (ref.empty()) return Error::build_failed(fmt::format("{}: no tag or commit given", url));
  auto lock = lock_file(slot.lock, options.cancelled);
  if (!lock) return lock.error();
  auto repo = open_mirror(slot.dir, url, !options.offline, options);
  if (!repo) return repo.error();
  // A tag or commit already in the mirror is never fetched again; a branch is, unless offline.
  auto local = resolve_local(repo->get(), ref);
  bool is_branch = local && local->refname.rfind("refs/heads/", 0) == 0;
  if (local && (!is_branch || options.offline)) return *local;
  if (options.offline)
    return Error::build_failed(fmt::format(
        "offline: the mirror of {} ({}) has no {} '{}'; run once without --offline to fetch it", url,
        slot.dir.string(), is_full_commit(ref) ? "commit" : "tag or branch", ref));

  const int attempts = std::max(1, options.retry.attempts);
  auto delay = options.retry.delay;
  Attempt last;
  for (int i = 1; i <= attempts; ++i) {
    if (cancelled(options)) return Error::build_failed(fmt::format("interrupted while fetching {}", url));
    last = fetch_once(repo->get(), url, ref, options);
    if (last.ok || last.permanent) break;
    if (i < attempts) {
      note(options, fmt::format("fetching {} failed ({}); retrying in {} ms (attempt {} of {})", url,
                                last.message, delay.count(), i + 1, attempts));
      auto until = std::chrono::steady_clock::now() + delay;
      while (std::chrono::steady_clock::now() < until && !cancelled(options))
        std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(delay, std::chrono::milliseconds(50)));
      delay = std::chrono::milliseconds(static_cast<long>(static_cast<double>(delay.count()) * options.retry.factor));
    } else {
      last.message += fmt::format(" (after {} attempts)", attempts);
    }
  }
  if (!last.ok) {
    if (last.permanent && last.names_url) return Error::build_failed(last.message);
    return Error::build_failed(fmt::format("cannot fetch '{}' from {}: {}", ref, url, last.message));
  }
  auto resolved = resolve_local(repo->get(), ref);
  if (!resolved)
    return Error::build_failed(fmt::format("{}: {} '{}' not found after fetching{}", url,
                                           is_full_commit(ref) ? "commit" : "tag or branch", ref,
                                           is_full_commit(ref) ? " its branches and tags" : ""));
  return *resolved;
}

Result<RefInfo> resolve_ref(const std::string& url, const std::string& ref, const MirrorSlot& slot,
                            const SourceOptions& options) {
  auto r = update_mirror_resolved(url, ref, slot, options);
  if (!r) return r.error();
  RefInfo info{ref, r->commit, RefInfo::Kind::commit};
  if (r->refname.rfind("refs/tags/", 0) == 0) info.kind = RefInfo::Kind::tag;
  else if (r->refname.rfind("refs/heads/", 0) == 0) info.kind = RefInfo::Kind::branch;
  return info;
}

Result<std::optional<std::string>> read_file_at(const fs::path& mirror, const std::string& commit, const std::string& path) {
  auto files = open_commit_files(mirror, commit);
  if (!files) return Error::build_failed(files.error().message);
  return files->read(path);
}

Result<std::string> update_mirror(const std::string& url, const std::string& ref, const MirrorSlot& slot,
                                  const SourceOptions& options) {
  auto r = update_mirror_resolved(url, ref, slot, options);
  if (!r) return r.error();
  return r->commit;
}

}  // namespace archbuild::source
