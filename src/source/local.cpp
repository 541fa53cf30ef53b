#include "source/local.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "core/path_kind.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "source/git_util.hpp"

namespace archbuild::source {

namespace fs = std::filesystem;
using namespace detail;

namespace {

FileStat file_stat(const struct stat& st) {
  FileStat f;
  f.dev = static_cast<std::uint64_t>(st.st_dev);
  f.ino = static_cast<std::uint64_t>(st.st_ino);
  f.mode = static_cast<std::uint32_t>(st.st_mode);
  f.size = static_cast<std::uint64_t>(st.st_size);
  f.mtime_s = st.st_mtim.tv_sec;
  f.mtime_ns = st.st_mtim.tv_nsec;
  f.ctime_s = st.st_ctim.tv_sec;
  f.ctime_ns = st.st_ctim.tv_nsec;
  return f;
}

// The repository whose ignore rules apply below `workdir`.
struct RepoScope {
  git_repository* repo = nullptr;
  fs::path workdir;  // canonical
};

class Walker {
 public:
  explicit Walker(fs::path root) : root_(std::move(root)) {}

  Result<Ok> walk() {
    init_libgit2();
    git_repository* raw = nullptr;
    // The tree may be a folder inside a repository (examples/minitorch in archbuild's own).
    if (git_repository_open_ext(&raw, root_.c_str(), 0, nullptr) == 0 && !git_repository_is_bare(raw)) {
      repos_.emplace_back(raw);
      std::error_code ec;
      fs::path wd = fs::canonical(git_repository_workdir(raw), ec);
      scope_stack_.push_back({raw, wd});
      git_ = true;
      git_oid oid;
      if (git_reference_name_to_id(&oid, raw, "HEAD") == 0) {
        head_ = oid_hex(oid);
        git_commit* c = nullptr;
        if (git_commit_lookup(&c, raw, &oid) == 0) {
          commit_time_ = git_commit_time(c);
          git_commit_free(c);
        }
      }
    } else if (raw) {
      git_repository_free(raw);
    }
    // The root and every folder above it count as being walked: a link back to any of them
    // (`up -> /home/me`) would walk the tree again inside itself.
    for (fs::path p = root_;; p = p.parent_path()) {
      if (auto id = folder_id(p)) on_path_.push_back(*id);
      if (p == p.parent_path()) break;
    }
    return walk_dir(root_, "", root_);
  }

  std::vector<LocalEntry> entries;
  bool git_ = false;
  std::optional<std::string> head_;
  std::optional<std::int64_t> commit_time_;

 private:
  bool ignored(const fs::path& abs, bool dir) {
    if (scope_stack_.empty()) return false;
    const RepoScope& s = scope_stack_.back();
    std::string rel = abs.lexically_relative(s.workdir).generic_string();
    if (rel.empty() || rel.starts_with("..")) return false;
    if (dir) rel += "/";
    int ig = 0;
    if (git_ignore_path_is_ignored(&ig, s.repo, rel.c_str()) != 0) return false;
    return ig != 0;
  }

  // A folder's identity (device, inode): the same folder reached by two paths is one.
  static std::optional<std::pair<dev_t, ino_t>> folder_id(const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return std::nullopt;
    return std::pair{st.st_dev, st.st_ino};
  }

  // `dir`: where the files are read; `rel`: their path in the tree; `lexical`: where they are in
  // the tree as the user sees it (for the ignore rules; differs from dir below a followed link).
  Result<Ok> walk_dir(const fs::path& dir, const std::string& rel, const fs::path& lexical) {
    std::error_code ec;
    // The folders being walked, root to here: a followed link is checked against them.
    bool entered = false;
    if (!rel.empty())
      if (auto id = folder_id(dir)) {
        on_path_.push_back(*id);
        entered = true;
      }
    struct Leave {
      std::vector<std::pair<dev_t, ino_t>>& stack;
      bool entered;
      ~Leave() {
        if (entered) stack.pop_back();
      }
    } leave{on_path_, entered};
    // A checked-out submodule (or nested repository): its own ignore rules below it.
    bool pushed = false;
    if (!rel.empty() && fs::exists(dir / ".git", ec)) {
      git_repository* sub = nullptr;
      if (git_repository_open(&sub, dir.c_str()) == 0) {
        repos_.emplace_back(sub);
        scope_stack_.push_back({sub, fs::canonical(dir, ec)});
        pushed = true;
      }
    }
    std::vector<fs::directory_entry> children;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) children.push_back(*it);
    if (ec) return Error::bad_input(fmt::format("cannot read the folder {}: {}", dir.string(), ec.message()));
    std::sort(children.begin(), children.end(),
              [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
    for (const auto& child : children) {
      std::string name = child.path().filename().string();
      if (name == ".git") continue;
      std::string child_rel = rel.empty() ? name : rel + "/" + name;
      fs::path child_lexical = lexical / name;
      // One lstat per entry: its kind, and for a file everything the stat cache compares.
      struct stat st {};
      if (::lstat(child.path().c_str(), &st) != 0)
        return Error::bad_input(fmt::format("cannot stat {}: {}", child.path().string(), std::strerror(errno)));
      if (S_ISLNK(st.st_mode)) {
        if (ignored(child_lexical, false)) continue;
        if (auto r = add_link(child.path(), child_rel, child_lexical); !r) return r.error();
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        if (ignored(child_lexical, true)) continue;
        if (auto r = walk_dir(child.path(), child_rel, child_lexical); !r) return r.error();
        continue;
      }
      if (!S_ISREG(st.st_mode)) continue;  // sockets, fifos: not source
      if (ignored(child_lexical, false)) continue;
      add_file(child.path(), child_rel, st);
    }
    if (pushed) scope_stack_.pop_back();
    return Ok{};
  }

  void add_file(const fs::path& from, const std::string& rel, const struct stat& st) {
    bool exec = (st.st_mode & S_IXUSR) != 0;
    entries.push_back({rel, from, exec ? LocalEntry::Kind::executable : LocalEntry::Kind::file, "", file_stat(st), ""});
  }

  Result<Ok> add_link(const fs::path& link, const std::string& rel, const fs::path& lexical) {
    std::error_code ec;
    fs::path target = fs::read_symlink(link, ec);
    if (ec) return Error::bad_input(fmt::format("cannot read the link {}: {}", link.string(), ec.message()));
    // Inside the tree (relative, and resolving below the root): kept as a link.
    fs::path resolved = (lexical.parent_path() / target).lexically_normal();
    bool inside = target.is_relative() && !resolved.lexically_relative(root_).string().starts_with("..");
    if (inside) {
      entries.push_back({rel, link, LocalEntry::Kind::symlink, target.string(), {}, ""});
      return Ok{};
    }
    fs::path real = fs::canonical(link, ec);
    if (ec)
      return Error::bad_input(fmt::format("--source: the link {} leaves the tree and points to nothing ({}): {}",
                                          text::quoted(rel), text::quoted(target.string()), ec.message()));
    auto st = fs::status(real, ec);
    if (fs::is_directory(st)) {
      // Copied once, as its content; a link to a folder it is itself inside would never end.
      auto id = folder_id(real);
      if (id && std::find(on_path_.begin(), on_path_.end(), *id) != on_path_.end())
        return Error::bad_input(fmt::format(
            "--source: the link {} points to {}, a folder that contains the link: a cycle (make it a relative link "
            "inside the tree, or remove it)",
            text::quoted(rel), text::quoted(real.string())));
      // Another link to a folder already copied: a link to that copy (linear work, not one walk
      // per path to it).
      if (id)
        if (auto it = followed_.find(*id); it != followed_.end()) {
          std::string to = fs::path(it->second).lexically_relative(fs::path(rel).parent_path()).generic_string();
          entries.push_back({rel, link, LocalEntry::Kind::symlink, to, {}, ""});
          return Ok{};
        }
      if (id) followed_.emplace(*id, rel);
      return walk_dir(real, rel, lexical);
    }
    if (fs::is_regular_file(st)) {
      struct stat real_st {};
      if (::stat(real.c_str(), &real_st) != 0)
        return Error::bad_input(fmt::format("cannot stat {}: {}", real.string(), std::strerror(errno)));
      add_file(real, rel, real_st);
    }
    return Ok{};
  }

  fs::path root_;
  std::vector<Repo> repos_;
  std::vector<RepoScope> scope_stack_;
  std::vector<std::pair<dev_t, ino_t>> on_path_;
  std::map<std::pair<dev_t, ino_t>, std::string> followed_;  // a folder outside, copied at this path
};

// The hash of one entry's content (a link: its target text). One buffer for the whole scan: a
// fresh zeroed megabyte per file cost more than hashing the small files of a header tree.
Result<std::string> entry_digest(const LocalEntry& e, std::uint64_t* bytes) {
  if (e.kind == LocalEntry::Kind::symlink) return sha256_hex(e.link_target);
  // O_NONBLOCK and fstat (paths::open_regular_file): a FIFO swapped in after the walk is refused.
  auto fd = paths::open_regular_file(e.from, "source file");
  if (!fd) return fd.error();
  thread_local std::vector<char> buf(1 << 20);
  Sha256 h;
  for (;;) {
    ssize_t n = ::read(*fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(*fd);
      return Error::bad_input(fmt::format("cannot read {}: {}", e.from.string(), std::strerror(err)));
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(n));
    if (bytes) *bytes += static_cast<std::uint64_t>(n);
  }
  ::close(*fd);
  return h.hex();
}

// One line of the tree hash; NUL cannot occur in a path.
std::string hash_line(const LocalEntry& e, const char* kind, const std::string& digest) {
  std::string line = e.path;
  line += '\0';
  line += kind;
  line += '\0';
  line += digest;
  line += '\n';
  return line;
}

const char* kind_name(LocalEntry::Kind k) {
  switch (k) {
    case LocalEntry::Kind::file: return "file";
    case LocalEntry::Kind::executable: return "exec";
    case LocalEntry::Kind::symlink: return "link";
  }
  return "file";
}

// The stat cache's file: a header line, the folder (NUL-ended), the recording scan's racy bound
// and the record count; one record per file, sorted by path: the path (NUL-ended), its FileStat
// and digest, space-separated, one line; then "end " and the SHA-256 of everything before it.
// Paths may hold any byte but NUL, so NUL ends them; the rest is digits and hex.
constexpr std::string_view kCacheHeader = "archbuild tree stat cache 1\n";
constexpr std::string_view kCacheEnd = "end ";

// Timestamps are as fine as the file system keeps them (1 s on some, 2 s on FAT) and come from a
// coarse clock: a file is trusted only when written more than this before the scan that hashed it.
constexpr std::int64_t kTimestampSlackSeconds = 2;

struct CachedFile {
  std::string path;
  FileStat stat;
  std::string digest;
};

struct ParsedCache {
  StatTime racy_from;
  std::vector<CachedFile> files;  // strictly ascending by path
};

std::string serialize_cache(const fs::path& root, StatTime racy_from, const std::vector<LocalEntry>& entries) {
  std::string out;
  out.reserve(64 + entries.size() * 160);
  out += kCacheHeader;
  out += root.string();
  out += '\0';
  std::size_t count = 0;
  for (const auto& e : entries) count += e.kind != LocalEntry::Kind::symlink;
  out += fmt::format("{} {} {}\n", racy_from.s, racy_from.ns, count);
  for (const auto& e : entries) {
    if (e.kind == LocalEntry::Kind::symlink) continue;
    const FileStat& f = e.stat;
    out += e.path;
    out += '\0';
    fmt::format_to(std::back_inserter(out), "{} {} {} {} {} {} {} {} {}\n", f.dev, f.ino, f.mode, f.size, f.mtime_s,
                   f.mtime_ns, f.ctime_s, f.ctime_ns, e.digest);
  }
  std::string sum = sha256_hex(out);
  out += kCacheEnd;
  out += sum;
  out += '\n';
  return out;
}

// A reader over untrusted bytes: every step checks what is left; any surprise is "no cache".
class CacheReader {
 public:
  explicit CacheReader(std::string_view s) : s_(s) {}
  bool literal(std::string_view l) {
    if (s_.substr(pos_, l.size()) != l) return false;
    pos_ += l.size();
    return true;
  }
  std::optional<std::string_view> until(char end) {
    auto at = s_.find(end, pos_);
    if (at == std::string_view::npos) return std::nullopt;
    auto out = s_.substr(pos_, at - pos_);
    pos_ = at + 1;
    return out;
  }
  template <class T>
  std::optional<T> number(char end) {
    auto field = until(end);
    if (!field || field->empty()) return std::nullopt;
    T v{};
    auto [p, ec] = std::from_chars(field->data(), field->data() + field->size(), v);
    if (ec != std::errc{} || p != field->data() + field->size()) return std::nullopt;
    return v;
  }
  std::size_t left() const { return s_.size() - pos_; }

 private:
  std::string_view s_;
  std::size_t pos_ = 0;
};

bool is_digest(std::string_view d) {
  return d.size() == 64 && std::all_of(d.begin(), d.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool valid_ns(std::int64_t ns) { return ns >= 0 && ns < 1'000'000'000; }

std::optional<ParsedCache> parse_cache(std::string_view bytes, const fs::path& root) {
  // The checksum first: a truncated or damaged file is refused whole, not half used.
  const std::size_t trailer = kCacheEnd.size() + 64 + 1;
  if (bytes.size() < kCacheHeader.size() + trailer) return std::nullopt;
  std::string_view body = bytes.substr(0, bytes.size() - trailer), tail = bytes.substr(bytes.size() - trailer);
  if (!tail.starts_with(kCacheEnd) || tail.back() != '\n') return std::nullopt;
  if (tail.substr(kCacheEnd.size(), 64) != sha256_hex(body)) return std::nullopt;
  CacheReader r(body);
  if (!r.literal(kCacheHeader)) return std::nullopt;
  auto recorded_root = r.until('\0');
  if (!recorded_root || *recorded_root != root.string()) return std::nullopt;
  ParsedCache out;
  auto rs = r.number<std::int64_t>(' ');
  auto rns = r.number<std::int64_t>(' ');
  auto count = r.number<std::uint64_t>('\n');
  if (!rs || !rns || !count || !valid_ns(*rns)) return std::nullopt;
  out.racy_from = {*rs, *rns};
  // A record is at least 84 bytes (a one-byte path, nine one-digit fields, the digest): a count
  // the bytes cannot hold is refused before anything is reserved for it.
  if (*count > r.left() / 84) return std::nullopt;
  out.files.reserve(static_cast<std::size_t>(*count));
  for (std::uint64_t i = 0; i < *count; ++i) {
    CachedFile f;
    auto path = r.until('\0');
    if (!path || path->empty()) return std::nullopt;
    f.path = std::string(*path);
    if (!out.files.empty() && !(out.files.back().path < f.path)) return std::nullopt;  // sorted, no duplicate
    auto dev = r.number<std::uint64_t>(' '), ino = r.number<std::uint64_t>(' ');
    auto mode = r.number<std::uint32_t>(' ');
    auto size = r.number<std::uint64_t>(' ');
    auto ms = r.number<std::int64_t>(' '), mns = r.number<std::int64_t>(' ');
    auto cs = r.number<std::int64_t>(' '), cns = r.number<std::int64_t>(' ');
    auto digest = r.until('\n');
    if (!dev || !ino || !mode || !size || !ms || !mns || !cs || !cns || !digest) return std::nullopt;
    if (!valid_ns(*mns) || !valid_ns(*cns) || !is_digest(*digest)) return std::nullopt;
    f.stat = {*dev, *ino, *mode, *size, *ms, *mns, *cs, *cns};
    f.digest = std::string(*digest);
    out.files.push_back(std::move(f));
  }
  if (r.left() != 0) return std::nullopt;
  return out;
}

StatTime scan_start_racy_bound() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return {static_cast<std::int64_t>(now.tv_sec) - kTimestampSlackSeconds, static_cast<std::int64_t>(now.tv_nsec)};
}

}  // namespace

bool stat_cache_usable(const FileStat& recorded, const FileStat& now, StatTime racy_from) {
  if (!(recorded == now)) return false;
  return StatTime{now.mtime_s, now.mtime_ns} < racy_from && StatTime{now.ctime_s, now.ctime_ns} < racy_from;
}

Result<LocalTree> scan_local_tree(const fs::path& dir, std::string_view what, TreeStatCache* cache) {
  std::error_code ec;
  if (auto is_dir = paths::expect_directory(dir, what); !is_dir) return is_dir.error();
  LocalTree t;
  t.root = fs::canonical(dir, ec);
  if (ec) return Error::bad_input(fmt::format("cannot resolve {}: {}", dir.string(), ec.message()));
  // Taken before the first stat: a file written after it is never trusted from this scan's record.
  const StatTime racy_from = scan_start_racy_bound();
  Walker w(t.root);
  if (auto r = w.walk(); !r) return r.error();
  t.entries = std::move(w.entries);
  std::sort(t.entries.begin(), t.entries.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  t.git = w.git_;
  t.head = w.head_;
  t.commit_time = w.commit_time_;
  std::optional<ParsedCache> previous;
  if (cache) {
    cache->reused = cache->rehashed = 0;
    if (cache->previous) previous = parse_cache(*cache->previous, cache->recorded_root.value_or(t.root));
    cache->previous_valid = previous.has_value();
  }
  // Both lists are sorted by path: one merge finds each file's record.
  std::size_t next_record = 0;
  auto recorded = [&](const std::string& path) -> const CachedFile* {
    if (!previous) return nullptr;
    auto& files = previous->files;
    while (next_record < files.size() && files[next_record].path < path) ++next_record;
    return next_record < files.size() && files[next_record].path == path ? &files[next_record] : nullptr;
  };
  Sha256 all;
  all.update("archbuild local tree v1\n");
  for (auto& e : t.entries) {
    const CachedFile* r = e.kind == LocalEntry::Kind::symlink ? nullptr : recorded(e.path);
    if (r && stat_cache_usable(r->stat, e.stat, previous->racy_from)) {
      e.digest = r->digest;
      t.bytes += e.stat.size;
      if (cache) ++cache->reused;
    } else {
      auto d = entry_digest(e, &t.bytes);
      if (!d) return d.error();
      e.digest = std::move(*d);
      if (cache && e.kind != LocalEntry::Kind::symlink) ++cache->rehashed;
    }
    all.update(hash_line(e, kind_name(e.kind), e.digest));
  }
  t.content_hash = all.hex();
  if (cache) cache->next = serialize_cache(t.root, racy_from, t.entries);
  return t;
}

namespace {

// A file's bytes into a new file: cloned where the file system shares blocks (btrfs, XFS), else
// copied. Never a hard link: the build writes into its tree, and must never write through to
// the user's files or an earlier key's copy.
Result<Ok> clone_or_copy(const fs::path& from, const fs::path& to) {
  auto in = paths::open_regular_file(from, "source file");
  if (!in) return in.error();
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) {
    int err = errno;
    ::close(*in);
    return Error::build_failed(fmt::format("cannot create {}: {}", to.string(), std::strerror(err)));
  }
  bool done = ::ioctl(out, FICLONE, *in) == 0;
  int err = 0;
  if (!done) {
    thread_local std::vector<char> buf(1 << 20);
    done = true;
    for (;;) {
      ssize_t n = ::read(*in, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        err = errno;
        done = false;
        break;
      }
      if (n == 0) break;
      for (ssize_t w = 0; w < n;) {
        ssize_t m = ::write(out, buf.data() + w, static_cast<std::size_t>(n - w));
        if (m < 0 && errno == EINTR) continue;
        if (m < 0) {
          err = errno;
          done = false;
          break;
        }
        w += m;
      }
      if (!done) break;
    }
  }
  ::close(*in);
  if (::close(out) != 0 && done) {
    err = errno;
    done = false;
  }
  if (!done) return Error::build_failed(fmt::format("cannot copy {} to {}: {}", from.string(), to.string(), std::strerror(err)));
  return Ok{};
}

// What an earlier copy holds, as it is now (the build may have written into it): every entry,
// none followed, `.git` included; folders listed parents first.
struct Held {
  enum class Kind { file, symlink, other } kind = Kind::other;
  FileStat stat;
  std::string link_target;
};

void list_held(const fs::path& dir, const std::string& rel, std::map<std::string, Held>& out,
               std::vector<std::string>& dirs, const std::vector<std::string>& keep) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::string child = rel.empty() ? name : rel + "/" + name;
    if (std::find(keep.begin(), keep.end(), child) != keep.end()) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      dirs.push_back(child);
      list_held(it->path(), child, out, dirs, keep);
    } else if (S_ISREG(st.st_mode)) {
      out[child] = {Held::Kind::file, file_stat(st), ""};
    } else if (S_ISLNK(st.st_mode)) {
      std::error_code lec;
      out[child] = {Held::Kind::symlink, {}, fs::read_symlink(it->path(), lec).string()};
    } else {
      out[child] = {Held::Kind::other, {}, ""};
    }
  }
}

}  // namespace

Result<fs::path> copy_local_tree(const LocalTree& tree, const fs::path& target, const std::function<bool()>& cancelled,
                                 CopyReuse* reuse) {
  std::error_code ec;
  fs::path tmp = target;
  tmp += ".partial";
  fs::remove_all(tmp, ec);
  auto fail = [&](std::string msg) {
    fs::remove_all(tmp, ec);
    return Error::build_failed(std::move(msg));
  };
  const StatTime racy_from = scan_start_racy_bound();
  // The earlier copy, moved here, and what its stat cache says its files hold.
  std::map<std::string, Held> held;
  std::vector<std::string> held_dirs;
  std::optional<ParsedCache> recorded;
  if (reuse) {
    reuse->kept = reuse->written = reuse->removed = 0;
    reuse->reused = false;
    std::error_code rec;
    fs::path previous_root = reuse->previous.empty() ? fs::path() : fs::canonical(reuse->previous, rec);
    if (!reuse->previous.empty() && !rec && (fs::rename(reuse->previous, tmp, rec), !rec)) {
      reuse->reused = true;
      list_held(tmp, "", held, held_dirs, reuse->keep);
      if (reuse->cache.previous)
        recorded = parse_cache(*reuse->cache.previous, reuse->cache.recorded_root.value_or(previous_root));
      reuse->cache.previous_valid = recorded.has_value();
    }
  }
  if (!reuse || !reuse->reused) fs::create_directories(tmp, ec);
  if (ec) return Error::build_failed(fmt::format("cannot create {}: {}", tmp.string(), ec.message()));
  // What the earlier copy holds that the tree does not (at that path, of that kind) goes first.
  std::unordered_map<std::string_view, const LocalEntry*> wanted;
  for (const auto& e : tree.entries) wanted.emplace(e.path, &e);
  for (auto it = held.begin(); it != held.end();) {
    auto w = wanted.find(it->first);
    bool same_kind = w != wanted.end() && (w->second->kind == LocalEntry::Kind::symlink) == (it->second.kind == Held::Kind::symlink) &&
                     it->second.kind != Held::Kind::other;
    if (same_kind) {
      ++it;
      continue;
    }
    fs::remove(tmp / it->first, ec);
    if (ec) return fail(fmt::format("cannot remove {}: {}", (tmp / it->first).string(), ec.message()));
    if (reuse) ++reuse->removed;
    it = held.erase(it);
  }
  std::size_t next_record = 0;
  auto record_of = [&](const std::string& path) -> const CachedFile* {
    if (!recorded) return nullptr;
    auto& files = recorded->files;
    while (next_record < files.size() && files[next_record].path < path) ++next_record;
    return next_record < files.size() && files[next_record].path == path ? &files[next_record] : nullptr;
  };
  std::vector<LocalEntry> copies;
  copies.reserve(tree.entries.size());
  Sha256 all;
  all.update("archbuild local tree v1\n");
  for (const auto& e : tree.entries) {
    if (cancelled && cancelled()) return fail("the copy of the source tree was interrupted");
    fs::path to = tmp / e.path;
    auto h = held.find(e.path);
    LocalEntry copied = e;
    copied.from = to;
    copied.stat = {};
    if (e.kind == LocalEntry::Kind::symlink) {
      if (h != held.end() && h->second.link_target == e.link_target) {
        if (reuse) ++reuse->kept;
      } else {
        fs::remove(to, ec);
        fs::create_directories(to.parent_path(), ec);
        fs::create_symlink(e.link_target, to, ec);
        if (ec) return fail(fmt::format("cannot link {} to {}: {}", to.string(), e.link_target, ec.message()));
        if (reuse) ++reuse->written;
      }
    } else {
      const std::uint32_t perms = e.kind == LocalEntry::Kind::executable ? 0755 : 0644;
      // A file there with the right mode holds the tree's content when its record says so, or
      // (no record it can be trusted by: copied in the same tick, damaged cache) when it hashes so.
      bool keep = false;
      if (h != held.end() && (h->second.stat.mode & 07777) == perms) {
        const CachedFile* r = record_of(e.path);
        if (r && stat_cache_usable(r->stat, h->second.stat, recorded->racy_from)) {
          keep = r->digest == e.digest;
        } else {
          auto d = entry_digest(copied, nullptr);
          keep = d && *d == e.digest;
        }
      }
      if (keep) {
        copied.stat = h->second.stat;
        copied.digest = e.digest;
        if (reuse) ++reuse->kept;
      } else {
        // Held, or under a kept path (a file the build tree has where the tree has one too).
        fs::remove(to, ec);
        if (fs::is_directory(fs::symlink_status(to, ec))) fs::remove_all(to, ec);  // a folder where the file goes
        fs::create_directories(to.parent_path(), ec);
        if (auto c = clone_or_copy(e.from, to); !c) return fail(c.error().message);
        fs::permissions(to, fs::perms(perms), ec);
        if (ec) return fail(fmt::format("cannot set the mode of {}: {}", to.string(), ec.message()));
        // The copy is hashed again: an edit during the scan would otherwise build other sources
        // than the key names.
        auto d = entry_digest(copied, nullptr);
        if (!d) return fail(d.error().message);
        copied.digest = std::move(*d);
        struct stat st {};
        if (::lstat(to.c_str(), &st) == 0) copied.stat = file_stat(st);
        if (reuse) ++reuse->written;
      }
    }
    if (e.kind == LocalEntry::Kind::symlink) copied.digest = sha256_hex(e.link_target);
    all.update(hash_line(e, kind_name(e.kind), copied.digest));
    copies.push_back(std::move(copied));
  }
  // Folders left empty by what went away (a fresh copy has only the folders of its files).
  for (auto it = held_dirs.rbegin(); it != held_dirs.rend(); ++it) ::rmdir((tmp / *it).c_str());
  if (all.hex() != tree.content_hash)
    return fail(fmt::format("{} changed while archbuild copied it; run again (the key names the content)",
                            tree.root.string()));
  fs::remove_all(target, ec);
  fs::rename(tmp, target, ec);
  if (ec) return fail(fmt::format("cannot move the copy into place at {}: {}", target.string(), ec.message()));
  if (reuse) {
    std::error_code cec;
    fs::path root = fs::canonical(target, cec);
    reuse->cache.next = cec ? std::string() : serialize_cache(root, racy_from, copies);
  }
  return target;
}

namespace {

// `path = X` and `url = Y` of each [submodule "…"] section, as git's config syntax writes them
// (what PyTorch's PreBuildSteps.cmake reads of the file too: its `path` lines).
std::vector<MissingSubmodule> gitmodules_entries(const fs::path& file) {
  std::vector<MissingSubmodule> out;
  std::ifstream in(file);
  std::string line;
  bool in_submodule = false;
  while (std::getline(in, line)) {
    std::string l = text::trim(line);
    if (l.empty() || l[0] == '#' || l[0] == ';') continue;
    if (l[0] == '[') {
      in_submodule = l.rfind("[submodule", 0) == 0;
      if (in_submodule) out.push_back({});
      continue;
    }
    if (!in_submodule) continue;
    auto eq = l.find('=');
    if (eq == std::string::npos) continue;
    std::string key = text::lower(text::trim(l.substr(0, eq))), value = text::trim(l.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    if (key == "path") out.back().path = value;
    else if (key == "url") out.back().url = value;
  }
  std::erase_if(out, [](const MissingSubmodule& m) { return m.path.empty(); });
  return out;
}

// The gitlink HEAD's tree records at `path`, where `root` is the top of a repository.
std::optional<std::string> gitlink_at(git_repository* repo, const std::string& path) {
  git_oid head;
  if (git_reference_name_to_id(&head, repo, "HEAD") != 0) return std::nullopt;
  git_commit* c = nullptr;
  if (git_commit_lookup(&c, repo, &head) != 0) return std::nullopt;
  Commit commit(c);
  git_tree* t = nullptr;
  if (git_commit_tree(&t, commit.get()) != 0) return std::nullopt;
  std::unique_ptr<git_tree, Deleter<git_tree, git_tree_free>> tree(t);
  git_tree_entry* e = nullptr;
  if (git_tree_entry_bypath(&e, tree.get(), path.c_str()) != 0) return std::nullopt;
  std::unique_ptr<git_tree_entry, Deleter<git_tree_entry, git_tree_entry_free>> entry(e);
  if (git_tree_entry_type(entry.get()) != GIT_OBJECT_COMMIT) return std::nullopt;
  return oid_hex(*git_tree_entry_id(entry.get()));
}

}  // namespace

std::vector<MissingSubmodule> missing_submodules(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_regular_file(root / ".gitmodules", ec)) return {};
  std::vector<MissingSubmodule> out;
  for (auto& m : gitmodules_entries(root / ".gitmodules")) {
    fs::path dir = root / m.path;
    bool empty = !fs::is_directory(dir, ec) || fs::is_empty(dir, ec);
    if (empty) out.push_back(std::move(m));
  }
  if (out.empty()) return out;
  // The commits the superproject records, where the tree is the top of its repository.
  init_libgit2();
  git_repository* raw = nullptr;
  if (git_repository_open(&raw, root.c_str()) == 0) {
    Repo repo(raw);
    for (auto& m : out) m.commit = gitlink_at(repo.get(), m.path);
  }
  return out;
}

}  // namespace archbuild::source
