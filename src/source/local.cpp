#include "source/local.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
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

// ---- the stat cache's file --------------------------------------------------------------------

// A header line, the folder (NUL-ended), the recording scan's racy bound and the record count;
// one record per file, sorted by path: the path (NUL-ended), its FileStat and digest,
// space-separated, one line. Then the walk's ignore decisions (IgnoreRecord): "ignore <folders>
// <ignored>", one line per folder walked (path NUL, its .gitignore's state NUL, its scope's
// digest or "-"), one per entry the rules left out (path NUL, "d" or "f"), both sorted by path;
// "ignore -" where none were recorded (a copy's cache). Then "end " and the SHA-256 of
// everything before it. Paths may hold any byte but NUL, so NUL ends them; the rest is digits,
// hex and the few characters of a rule file's state.
constexpr std::string_view kCacheHeader = "archbuild tree stat cache 2\n";
constexpr std::string_view kCacheEnd = "end ";

// Timestamps are as fine as the file system keeps them (1 s on some, 2 s on FAT) and come from a
// coarse clock: a file is trusted only when written more than this before the scan that hashed it.
constexpr std::int64_t kTimestampSlackSeconds = 2;

// Views into the cache's bytes (TreeStatCache::previous, alive for the whole scan): no copy per record.
struct CachedFile {
  std::string_view path;
  FileStat stat;
  std::string_view digest;
};

struct KnownFolder {
  std::string_view rel, gitignore, scope;
};
struct KnownIgnored {
  std::string_view rel;
  bool dir = false;
};

struct ParsedCache {
  StatTime racy_from;
  std::vector<CachedFile> files;  // strictly ascending by path
  bool decisions = false;         // the walk's ignore decisions were recorded (a scan's cache)
  std::vector<KnownFolder> folders;   // strictly ascending by rel
  std::vector<KnownIgnored> ignored;  // strictly ascending by rel

  const KnownFolder* folder(std::string_view rel) const {
    auto it = std::lower_bound(folders.begin(), folders.end(), rel, [](const KnownFolder& f, std::string_view r) { return f.rel < r; });
    return it != folders.end() && it->rel == rel ? &*it : nullptr;
  }
  // The recorded decision for an entry of this kind at `rel`: true left out, false walked or
  // included; none where the recording walk did not meet one of this kind there.
  std::optional<bool> decision(std::string_view rel, bool dir) const {
    if (dir ? folder(rel) != nullptr : file(rel)) return false;
    auto it = std::lower_bound(ignored.begin(), ignored.end(), rel, [](const KnownIgnored& i, std::string_view r) { return i.rel < r; });
    if (it != ignored.end() && it->rel == rel && it->dir == dir) return true;
    return std::nullopt;
  }
  bool file(std::string_view rel) const {
    auto it = std::lower_bound(files.begin(), files.end(), rel, [](const CachedFile& f, std::string_view r) { return f.path < r; });
    return it != files.end() && it->path == rel;
  }
};

// A folder the walk entered: its .gitignore's state (RuleInputs' text; "-" when it has none) and,
// where a repository's rules start (the root inside a repository, a submodule), the digest of
// that repository's other rule inputs; "-" elsewhere.
struct FolderRecord {
  std::string rel, gitignore = "-", scope = "-";
  bool used_known = false;  // a decision in it or below it came from the cache
};
struct IgnoredRecord {
  std::string rel;
  bool dir = false;
};
struct IgnoreRecord {
  const std::vector<FolderRecord>* folders = nullptr;   // sorted by rel
  const std::vector<IgnoredRecord>* ignored = nullptr;  // sorted by rel
};

// One field (to_chars: the cache of a large tree is written on every change, fmt's parsing of a
// format string per record was most of it).
template <class T>
void put_number(std::string& out, T v, char end) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, p);
  out += end;
}

// `out`: a buffer to write into (the previous cache's: its memory is already paged in).
std::string serialize_cache(const fs::path& root, StatTime racy_from, const std::vector<LocalEntry>& entries,
                            const IgnoreRecord* ignore, std::string out = {}) {
  std::size_t size = 256 + root.native().size();
  for (const auto& e : entries) size += e.path.size() + 192;  // 8 numbers, the digest
  if (ignore)
    for (const auto& f : *ignore->folders) size += f.rel.size() + f.gitignore.size() + 68;
  out.clear();
  if (out.capacity() == 0) out.reserve(size);  // a reused buffer is about the size already
  out += kCacheHeader;
  out += root.string();
  out += '\0';
  std::size_t count = 0;
  for (const auto& e : entries) count += e.kind != LocalEntry::Kind::symlink;
  fmt::format_to(std::back_inserter(out), "{} {} {}\n", racy_from.s, racy_from.ns, count);
  for (const auto& e : entries) {
    if (e.kind == LocalEntry::Kind::symlink) continue;
    const FileStat& f = e.stat;
    out += e.path;
    out += '\0';
    put_number(out, f.dev, ' ');
    put_number(out, f.ino, ' ');
    put_number(out, f.mode, ' ');
    put_number(out, f.size, ' ');
    put_number(out, f.mtime_s, ' ');
    put_number(out, f.mtime_ns, ' ');
    put_number(out, f.ctime_s, ' ');
    put_number(out, f.ctime_ns, ' ');
    out += e.digest;
    out += '\n';
  }
  if (!ignore) {
    out += "ignore -\n";
  } else {
    fmt::format_to(std::back_inserter(out), "ignore {} {}\n", ignore->folders->size(), ignore->ignored->size());
    for (const auto& f : *ignore->folders) {
      out += f.rel;
      out += '\0';
      out += f.gitignore;
      out += '\0';
      out += f.scope;
      out += '\n';
    }
    for (const auto& i : *ignore->ignored) {
      out += i.rel;
      out += '\0';
      out += i.dir ? "d\n" : "f\n";
    }
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

// RuleInputs' text of one file: digits, spaces and "-", "!", ">".
bool is_rule_state(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == ' ' || c == '-' || c == '!' || c == '>';
  });
}

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
    f.path = *path;
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
    f.digest = *digest;
    out.files.push_back(f);
  }
  if (!r.literal("ignore ")) return std::nullopt;
  if (r.literal("-\n")) return r.left() == 0 ? std::optional(std::move(out)) : std::nullopt;
  auto folders = r.number<std::uint64_t>(' '), ignored = r.number<std::uint64_t>('\n');
  // At least 5 bytes a folder ("", its separators, "-" twice), 4 an ignored entry.
  if (!folders || !ignored || *folders > r.left() / 5 || *ignored > r.left() / 4) return std::nullopt;
  out.decisions = true;
  out.folders.reserve(static_cast<std::size_t>(*folders));
  for (std::uint64_t i = 0; i < *folders; ++i) {
    auto rel = r.until('\0');
    auto gitignore = r.until('\0');
    auto scope = r.until('\n');
    if (!rel || !gitignore || !scope || !is_rule_state(*gitignore) || (*scope != "-" && !is_digest(*scope)))
      return std::nullopt;
    if (!out.folders.empty() && !(out.folders.back().rel < *rel)) return std::nullopt;
    out.folders.push_back({*rel, *gitignore, *scope});
  }
  out.ignored.reserve(static_cast<std::size_t>(*ignored));
  for (std::uint64_t i = 0; i < *ignored; ++i) {
    auto rel = r.until('\0');
    auto kind = r.until('\n');
    if (!rel || rel->empty() || !kind || (*kind != "d" && *kind != "f")) return std::nullopt;
    if (!out.ignored.empty() && !(out.ignored.back().rel < *rel)) return std::nullopt;
    out.ignored.push_back({*rel, *kind == "d"});
  }
  if (r.left() != 0) return std::nullopt;
  return out;
}

StatTime scan_start_racy_bound() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return {static_cast<std::int64_t>(now.tv_sec) - kTimestampSlackSeconds, static_cast<std::int64_t>(now.tv_nsec)};
}

// ---- the walk ---------------------------------------------------------------------------------

// What stat(2) says of the files an ignore decision reads (.gitignore files, info/exclude, the
// excludes file), as text ("-" absent, "!<errno>" unreadable; a link's stat followed by "> " and
// its target's), and their timestamps for the racy rule.
struct RuleInputs {
  std::string text;
  std::vector<StatTime> times;

  void add_lstat(const fs::path& p, const struct stat& st) {
    add_stat(st);
    if (S_ISLNK(st.st_mode)) {  // git reads what it names
      text += " > ";
      struct stat target {};
      if (::stat(p.c_str(), &target) != 0) add_missing(errno);
      else add_stat(target);
    }
  }
  void add_file(const fs::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) add_missing(errno);
    else add_lstat(p, st);
  }

 private:
  void add_stat(const struct stat& st) {
    const FileStat f = file_stat(st);
    fmt::format_to(std::back_inserter(text), "{} {} {} {} {} {} {} {}", f.mode, f.dev, f.ino, f.size, f.mtime_s,
                   f.mtime_ns, f.ctime_s, f.ctime_ns);
    times.push_back({f.mtime_s, f.mtime_ns});
    times.push_back({f.ctime_s, f.ctime_ns});
  }
  void add_missing(int err) {
    if (err == ENOENT || err == ENOTDIR) text += "-";
    else fmt::format_to(std::back_inserter(text), "!{}", err);
  }
};

// The repository whose ignore rules apply below `workdir`.
struct RepoScope {
  git_repository* repo = nullptr;
  fs::path workdir;  // canonical
};

// The rule inputs of one repository other than the .gitignore files of the folders walked: its
// work tree, info/exclude, the config values that change matching, the excludes file they name
// (else git's default in $XDG_CONFIG_HOME or $HOME), the library's own rules (its version), and
// `above`: the folders from the work tree down to the scanned root's parent (the root is inside
// the repository), whose .gitignore files apply too. As libgit2 resolves them:
// libgit2/libgit2@01ca0bb208febaba407a3edccb7ffbb552ad0c17:src/libgit2/ignore.c (git_ignore__for_path),
// libgit2/libgit2@419948ef23c92cdfd27dcbc3b865bfee7df55bb6:src/libgit2/attrcache.c (attr_cache__lookup_path).
std::string scope_inputs(git_repository* repo, const fs::path& workdir, const fs::path& below, RuleInputs& in) {
  int major = 0, minor = 0, rev = 0;
  git_libgit2_version(&major, &minor, &rev);
  in.text += fmt::format("archbuild ignore inputs 1\nlibgit2 {}.{}.{}\nworkdir {}\nexclude ", major, minor, rev,
                         workdir.string());
  const char* common = git_repository_commondir(repo);
  in.add_file(fs::path(common ? common : "") / "info" / "exclude");
  auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const auto home = env("HOME"), xdg = env("XDG_CONFIG_HOME");
  in.text += fmt::format("\nHOME {}\nXDG_CONFIG_HOME {}\n", home.value_or("-"), xdg.value_or("-"));
  std::optional<std::string> excludes, ignorecase;
  git_config* raw = nullptr;
  if (git_repository_config_snapshot(&raw, repo) == 0) {
    Config cfg(raw);
    const char* v = nullptr;
    if (git_config_get_string(&v, cfg.get(), "core.excludesfile") == 0 && v) excludes = v;
    if (git_config_get_string(&v, cfg.get(), "core.ignorecase") == 0 && v) ignorecase = v;
  } else {
    in.text += "config unreadable\n";
  }
  in.text += fmt::format("core.ignorecase {}\ncore.excludesfile {}\n", ignorecase ? text::quoted(*ignorecase) : "-",
                         excludes ? text::quoted(*excludes) : "-");
  std::vector<fs::path> files;
  if (excludes) {
    files.push_back(excludes->starts_with("~/") ? fs::path(home.value_or("")) / excludes->substr(2) : fs::path(*excludes));
  } else {
    if (xdg) files.push_back(fs::path(*xdg) / "git/ignore");
    if (home) files.push_back(fs::path(*home) / ".config/git/ignore");
  }
  for (const auto& f : files) {
    std::error_code ec;
    fs::path abs = fs::absolute(f, ec);
    in.text += "file " + abs.string() + " ";
    in.add_file(abs);
    in.text += "\n";
  }
  fs::path rel = below.lexically_relative(workdir);
  if (!rel.empty() && rel != "." && !rel.string().starts_with("..")) {
    fs::path folder = workdir;
    for (const auto& part : rel) {
      in.text += "above " + folder.string() + " ";
      in.add_file(folder / ".gitignore");
      in.text += "\n";
      folder /= part;
    }
  }
  return sha256_hex(in.text);
}

class Walker {
 public:
  // With `known` (a valid cache's decisions), the ignore decision of each file and folder the
  // cache names is taken from it, not asked of libgit2; scan_local_tree checks afterwards that
  // they stand (decisions_hold).
  Walker(fs::path root, const ParsedCache* known) : root_(std::move(root)), known_(known) {}

  Result<Ok> walk() {
    init_libgit2();
    git_repository* raw = nullptr;
    std::string root_scope = "-";
    // The tree may be a folder inside a repository (examples/minitorch in archbuild's own).
    if (git_repository_open_ext(&raw, root_.c_str(), 0, nullptr) == 0 && !git_repository_is_bare(raw)) {
      repos_.emplace_back(raw);
      std::error_code ec;
      fs::path wd = fs::canonical(git_repository_workdir(raw), ec);
      scope_stack_.push_back({raw, wd});
      root_scope = scope_digest(raw, wd, root_);
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
    if (known_) entries.reserve(known_->files.size() + 256);
    bool used = false;
    if (auto r = walk_dir(root_, "", root_, std::move(root_scope), used); !r) return r;
    std::sort(folders.begin(), folders.end(), [](const auto& a, const auto& b) { return a.rel < b.rel; });
    std::sort(ignored_entries.begin(), ignored_entries.end(), [](const auto& a, const auto& b) { return a.rel < b.rel; });
    return Ok{};
  }

  bool optimistic() const { return known_ != nullptr; }

  std::vector<LocalEntry> entries;
  std::vector<FolderRecord> folders;           // every folder walked
  std::vector<IgnoredRecord> ignored_entries;  // every file and folder the rules left out
  std::vector<StatTime> rule_times;            // of every rule file read (RuleInputs)
  std::size_t reused = 0, asked = 0;           // decisions taken from `known`, asked of libgit2
  bool git_ = false;
  std::optional<std::string> head_;
  std::optional<std::int64_t> commit_time_;

 private:
  enum class Kind { file, dir, link };

  std::string scope_digest(git_repository* repo, const fs::path& workdir, const fs::path& below) {
    RuleInputs in;
    std::string digest = scope_inputs(repo, workdir, below, in);
    rule_times.insert(rule_times.end(), in.times.begin(), in.times.end());
    return digest;
  }

  // `lexical`: the entry's folder as the user sees it (for libgit2's rules; below a followed link
  // it differs from where the files are read).
  bool ignored(const std::string& rel, Kind kind, const fs::path& lexical, const std::string& name, bool& used_known) {
    if (scope_stack_.empty()) return false;
    const bool dir = kind == Kind::dir;
    // A link is always asked: libgit2 takes it for a folder when what it names is one, which
    // no rule file records.
    if (known_ && kind != Kind::link)
      if (auto d = known_->decision(rel, dir)) {
        used_known = true;
        ++reused;
        if (*d) ignored_entries.push_back({rel, dir});
        return *d;
      }
    ++asked;
    const RepoScope& s = scope_stack_.back();
    std::string scoped = (lexical / name).lexically_relative(s.workdir).generic_string();
    if (scoped.empty() || scoped.starts_with("..")) return false;
    if (dir) scoped += "/";
    int ig = 0;
    if (git_ignore_path_is_ignored(&ig, s.repo, scoped.c_str()) != 0) return false;
    if (ig != 0 && kind != Kind::link) ignored_entries.push_back({rel, dir});
    return ig != 0;
  }

  // A folder's identity (device, inode): the same folder reached by two paths is one.
  static std::optional<std::pair<dev_t, ino_t>> folder_id(const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return std::nullopt;
    return std::pair{st.st_dev, st.st_ino};
  }

  struct Children {
    std::vector<std::string> names;
    std::vector<struct stat> stats;  // names[i]'s
  };

  // The folder's entries but `.git`, sorted by name, each lstat'ed (relative to the folder's
  // descriptor: no path walk from the root per file); whether it has a `.git`.
  static Result<Children> list(DIR* d, const fs::path& dir, bool& has_git) {
    Children out;
    for (;;) {
      errno = 0;
      const dirent* de = ::readdir(d);
      if (!de) {
        if (errno != 0)
          return Error::bad_input(fmt::format("cannot read the folder {}: {}", dir.string(), std::strerror(errno)));
        break;
      }
      std::string_view name = de->d_name;
      if (name == "." || name == "..") continue;
      if (name == ".git") {
        has_git = true;
        continue;
      }
      out.names.emplace_back(name);
    }
    std::sort(out.names.begin(), out.names.end());
    out.stats.resize(out.names.size());
    for (std::size_t i = 0; i < out.names.size(); ++i)
      if (::fstatat(::dirfd(d), out.names[i].c_str(), &out.stats[i], AT_SYMLINK_NOFOLLOW) != 0)
        return Error::bad_input(fmt::format("cannot stat {}: {}", (dir / out.names[i]).string(), std::strerror(errno)));
    return out;
  }

  // `dir`: where the files are read; `rel`: their path in the tree; `lexical`: where they are in
  // the tree as the user sees it (differs from dir below a followed link). `scope`: the folder's
  // record of the rules that start there (the root's, computed by walk). `used_known` is set when
  // a decision in it or below came from the cache. `parent_fd`, `name`: the folder opened
  // relative to its parent's (still open) descriptor, where it is one the walk listed.
  Result<Ok> walk_dir(const fs::path& dir, const std::string& rel, const fs::path& lexical, std::string scope,
                      bool& used_known, int parent_fd = -1, const char* name = nullptr) {
    std::error_code ec;
    int fd = parent_fd >= 0 ? ::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
                            : ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* d = fd >= 0 ? ::fdopendir(fd) : nullptr;
    if (!d) {
      int err = errno;
      if (fd >= 0) ::close(fd);
      return Error::bad_input(fmt::format("cannot read the folder {}: {}", dir.string(), std::strerror(err)));
    }
    struct Close {
      DIR* d;
      ~Close() { ::closedir(d); }
    } close{d};
    // The folders being walked, root to here: a followed link is checked against them.
    bool entered = false;
    struct stat self {};
    if (!rel.empty() && ::fstat(fd, &self) == 0) {
      on_path_.push_back({self.st_dev, self.st_ino});
      entered = true;
    }
    struct Leave {
      std::vector<std::pair<dev_t, ino_t>>& stack;
      bool entered;
      ~Leave() {
        if (entered) stack.pop_back();
      }
    } leave{on_path_, entered};
    bool has_git = false;
    auto children = list(d, dir, has_git);
    if (!children) return children.error();
    // A checked-out submodule (or nested repository): its own ignore rules below it.
    bool pushed = false;
    if (!rel.empty() && has_git) {
      git_repository* sub = nullptr;
      if (git_repository_open(&sub, dir.c_str()) == 0) {
        repos_.emplace_back(sub);
        fs::path wd = fs::canonical(dir, ec);
        scope_stack_.push_back({sub, wd});
        scope = scope_digest(sub, wd, wd);
        pushed = true;
      }
    }
    FolderRecord record{rel, "-", std::move(scope)};
    bool used = false;
    for (std::size_t i = 0; i < children->names.size(); ++i) {
      const std::string& child = children->names[i];
      const struct stat& st = children->stats[i];
      std::string child_rel;
      child_rel.reserve(rel.size() + 1 + child.size());
      if (!rel.empty()) (child_rel += rel) += '/';
      child_rel += child;
      if (child == ".gitignore") {  // an input of every decision below: its state, from the lstat made anyway
        RuleInputs in;
        in.add_lstat(dir / child, st);
        record.gitignore = std::move(in.text);
        rule_times.insert(rule_times.end(), in.times.begin(), in.times.end());
      }
      if (S_ISLNK(st.st_mode)) {
        if (ignored(child_rel, Kind::link, lexical, child, used)) continue;
        if (auto r = add_link(dir / child, child_rel, lexical / child, used); !r) return r.error();
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        if (ignored(child_rel, Kind::dir, lexical, child, used)) continue;
        if (auto r = walk_dir(dir / child, child_rel, lexical / child, "-", used, fd, child.c_str()); !r)
          return r.error();
        continue;
      }
      if (!S_ISREG(st.st_mode)) continue;  // sockets, fifos: not source
      if (ignored(child_rel, Kind::file, lexical, child, used)) continue;
      add_file("", std::move(child_rel), st);  // read from the root at its path
    }
    if (pushed) scope_stack_.pop_back();
    record.used_known = used;
    used_known = used_known || used;
    folders.push_back(std::move(record));
    return Ok{};
  }

  void add_file(std::string from, std::string rel, const struct stat& st) {
    bool exec = (st.st_mode & S_IXUSR) != 0;
    entries.push_back({std::move(rel), std::move(from), exec ? LocalEntry::Kind::executable : LocalEntry::Kind::file, "",
                       file_stat(st), ""});
  }

  Result<Ok> add_link(const fs::path& link, const std::string& rel, const fs::path& lexical, bool& used_known) {
    std::error_code ec;
    fs::path target = fs::read_symlink(link, ec);
    if (ec) return Error::bad_input(fmt::format("cannot read the link {}: {}", link.string(), ec.message()));
    // Inside the tree (relative, and resolving below the root): kept as a link.
    fs::path resolved = (lexical.parent_path() / target).lexically_normal();
    bool inside = target.is_relative() && !resolved.lexically_relative(root_).string().starts_with("..");
    if (inside) {
      entries.push_back({rel, link.string(), LocalEntry::Kind::symlink, target.string(), {}, ""});
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
          entries.push_back({rel, link.string(), LocalEntry::Kind::symlink, to, {}, ""});
          return Ok{};
        }
      if (id) followed_.emplace(*id, rel);
      return walk_dir(real, rel, lexical, "-", used_known);
    }
    if (fs::is_regular_file(st)) {
      struct stat real_st {};
      if (::stat(real.c_str(), &real_st) != 0)
        return Error::bad_input(fmt::format("cannot stat {}: {}", real.string(), std::strerror(errno)));
      add_file(real.string(), rel, real_st);
    }
    return Ok{};
  }

  fs::path root_;
  const ParsedCache* known_ = nullptr;
  std::vector<Repo> repos_;
  std::vector<RepoScope> scope_stack_;
  std::vector<std::pair<dev_t, ino_t>> on_path_;
  std::map<std::pair<dev_t, ino_t>, std::string> followed_;  // a folder outside, copied at this path
};

// Whether the decisions an optimistic walk took from `known` are git's. git's decision for an
// entry is a function of its path, its kind (folder or not) and its repository's rule inputs
// only: the .gitignore of every folder from the work tree down to the entry's, info/exclude, the
// excludes file and the config values that change matching, libgit2's own rules (its version).
// A decision taken from the cache was recorded by a walk that reached the same path with the
// same kind (ParsedCache::decision), so it stands when every folder above it was walked by that
// walk with the same .gitignore state and the same repository's inputs starting there (the
// scope's digest holds the rest, `above` the root included), and when no rule file is racily
// recent (written at or after the recording scan's racy bound: an edit within the timestamps'
// granularity would keep its stat). Folders new to this walk whose subtree took nothing from
// the cache do not matter: libgit2 decided everything in them.
bool decisions_hold(const ParsedCache& known, const Walker& w) {
  for (const auto& t : w.rule_times)
    if (!(t < known.racy_from)) return false;
  for (const auto& f : w.folders) {
    const KnownFolder* k = known.folder(f.rel);
    if (!k) {
      if (f.used_known) return false;
      continue;
    }
    if (k->gitignore != f.gitignore || k->scope != f.scope) return false;
  }
  return true;
}

// Whether a scan that read no file and whose walk's decisions stood would write `previous`'s bytes
// again: the same folder, every file's record used (so the same paths, stats and digests), the
// same folders and left-out entries.
bool same_records(const ParsedCache& previous, bool same_root, std::size_t reused, const Walker& w) {
  if (!same_root || !previous.decisions || reused != previous.files.size()) return false;
  if (w.folders.size() != previous.folders.size() || w.ignored_entries.size() != previous.ignored.size()) return false;
  for (std::size_t i = 0; i < w.folders.size(); ++i) {
    const auto& a = w.folders[i];
    const auto& b = previous.folders[i];
    if (a.rel != b.rel || a.gitignore != b.gitignore || a.scope != b.scope) return false;
  }
  for (std::size_t i = 0; i < w.ignored_entries.size(); ++i)
    if (w.ignored_entries[i].rel != previous.ignored[i].rel || w.ignored_entries[i].dir != previous.ignored[i].dir)
      return false;
  return true;
}

fs::path content_path(const fs::path& root, const LocalEntry& e) { return e.from.empty() ? root / e.path : fs::path(e.from); }

// The hash of one entry's content (a link: its target text). One buffer for the whole scan: a
// fresh zeroed megabyte per file cost more than hashing the small files of a header tree.
Result<std::string> entry_digest(const fs::path& root, const LocalEntry& e, std::uint64_t* bytes) {
  if (e.kind == LocalEntry::Kind::symlink) return sha256_hex(e.link_target);
  // O_NONBLOCK and fstat (paths::open_regular_file): a FIFO swapped in after the walk is refused.
  const fs::path from = content_path(root, e);
  auto fd = paths::open_regular_file(from, "source file");
  if (!fd) return fd.error();
  thread_local std::vector<char> buf(1 << 20);
  Sha256 h;
  for (;;) {
    ssize_t n = ::read(*fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(*fd);
      return Error::bad_input(fmt::format("cannot read {}: {}", from.string(), std::strerror(err)));
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(n));
    if (bytes) *bytes += static_cast<std::uint64_t>(n);
  }
  ::close(*fd);
  return h.hex();
}

// The tree hash, its lines gathered and hashed in blocks (a hash update per line cost more than
// the hashing on a tree of small files).
class TreeHash {
 public:
  TreeHash() {
    buf_.reserve(kBlock + 4096);
    buf_ += "archbuild local tree v1\n";
  }
  // One line; NUL cannot occur in a path.
  void line(const LocalEntry& e, const char* kind, const std::string& digest) {
    buf_ += e.path;
    buf_ += '\0';
    buf_ += kind;
    buf_ += '\0';
    buf_ += digest;
    buf_ += '\n';
    if (buf_.size() >= kBlock) {
      sha_.update(buf_);
      buf_.clear();
    }
  }
  std::string hex() {
    sha_.update(buf_);
    return sha_.hex();
  }

 private:
  static constexpr std::size_t kBlock = 64 << 10;
  Sha256 sha_;
  std::string buf_;
};

const char* kind_name(LocalEntry::Kind k) {
  switch (k) {
    case LocalEntry::Kind::file: return "file";
    case LocalEntry::Kind::executable: return "exec";
    case LocalEntry::Kind::symlink: return "link";
  }
  return "file";
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
  std::optional<ParsedCache> previous;
  if (cache) {
    cache->reused = cache->rehashed = cache->ignore_reused = cache->ignore_asked = 0;
    cache->rewalked = cache->unchanged = false;
    cache->next.clear();
    if (cache->previous) previous = parse_cache(*cache->previous, cache->recorded_root.value_or(t.root));
    cache->previous_valid = previous.has_value();
  }
  // The walk takes the recorded ignore decisions where it can (libgit2 rebuilds its rule stack
  // for every path it is asked about: most of a repeat's time); if the rule inputs changed since,
  // it is made again asking libgit2 about every entry.
  std::optional<Walker> w;
  w.emplace(t.root, previous && previous->decisions ? &*previous : nullptr);
  if (auto r = w->walk(); !r) return r.error();
  bool rewalked = false;
  if (w->optimistic() && !decisions_hold(*previous, *w)) {
    rewalked = true;
    w.emplace(t.root, nullptr);
    if (auto r = w->walk(); !r) return r.error();
  }
  t.entries = std::move(w->entries);
  std::sort(t.entries.begin(), t.entries.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  t.git = w->git_;
  t.head = w->head_;
  t.commit_time = w->commit_time_;
  // Both lists are sorted by path: one merge finds each file's record.
  std::size_t next_record = 0;
  auto recorded = [&](const std::string& path) -> const CachedFile* {
    if (!previous) return nullptr;
    auto& files = previous->files;
    while (next_record < files.size() && files[next_record].path < path) ++next_record;
    return next_record < files.size() && files[next_record].path == path ? &files[next_record] : nullptr;
  };
  TreeHash all;
  for (auto& e : t.entries) {
    const CachedFile* r = e.kind == LocalEntry::Kind::symlink ? nullptr : recorded(e.path);
    if (r && stat_cache_usable(r->stat, e.stat, previous->racy_from)) {
      e.digest = r->digest;
      t.bytes += e.stat.size;
      if (cache) ++cache->reused;
    } else {
      auto d = entry_digest(t.root, e, &t.bytes);
      if (!d) return d.error();
      e.digest = std::move(*d);
      if (cache && e.kind != LocalEntry::Kind::symlink) ++cache->rehashed;
    }
    all.line(e, kind_name(e.kind), e.digest);
  }
  t.content_hash = all.hex();
  if (cache) {
    cache->ignore_reused = w->reused;
    cache->ignore_asked = w->asked;
    cache->rewalked = rewalked;
    // Nothing read again, the rules' inputs as recorded and the same records: the previous bytes
    // are what this scan would write (under their own bound, which every record passed).
    cache->unchanged = previous && cache->rehashed == 0 && !rewalked &&
                       same_records(*previous, cache->recorded_root.value_or(t.root) == t.root, cache->reused, *w);
    if (!cache->unchanged) {
      const IgnoreRecord ignore{&w->folders, &w->ignored_entries};
      std::string buffer;
      if (cache->previous) {  // no longer read (`previous`'s views are not used past here)
        buffer = std::move(*cache->previous);
        cache->previous.reset();
      }
      cache->next = serialize_cache(t.root, racy_from, t.entries, &ignore, std::move(buffer));
    }
  }
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
  TreeHash all;
  for (const auto& e : tree.entries) {
    if (cancelled && cancelled()) return fail("the copy of the source tree was interrupted");
    fs::path to = tmp / e.path;
    auto h = held.find(e.path);
    LocalEntry copied = e;
    copied.from = to.string();
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
          auto d = entry_digest(tree.root, copied, nullptr);
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
        if (auto c = clone_or_copy(content_path(tree.root, e), to); !c) return fail(c.error().message);
        fs::permissions(to, fs::perms(perms), ec);
        if (ec) return fail(fmt::format("cannot set the mode of {}: {}", to.string(), ec.message()));
        // The copy is hashed again: an edit during the scan would otherwise build other sources
        // than the key names.
        auto d = entry_digest(tree.root, copied, nullptr);
        if (!d) return fail(d.error().message);
        copied.digest = std::move(*d);
        struct stat st {};
        if (::lstat(to.c_str(), &st) == 0) copied.stat = file_stat(st);
        if (reuse) ++reuse->written;
      }
    }
    if (e.kind == LocalEntry::Kind::symlink) copied.digest = sha256_hex(e.link_target);
    all.line(e, kind_name(e.kind), copied.digest);
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
    reuse->cache.next = cec ? std::string() : serialize_cache(root, racy_from, copies, nullptr);
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

fs::path content_path(const LocalTree& tree, const LocalEntry& e) { return content_path(tree.root, e); }

}  // namespace archbuild::source
