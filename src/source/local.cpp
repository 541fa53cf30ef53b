#include "source/local.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "core/path_kind.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "source/git_util.hpp"

namespace archbuild::source {

namespace fs = std::filesystem;
using namespace detail;

namespace {

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
      auto st = child.symlink_status(ec);
      if (ec) return Error::bad_input(fmt::format("cannot stat {}: {}", child.path().string(), ec.message()));
      if (fs::is_symlink(st)) {
        if (ignored(child_lexical, false)) continue;
        if (auto r = add_link(child.path(), child_rel, child_lexical); !r) return r.error();
        continue;
      }
      if (fs::is_directory(st)) {
        if (ignored(child_lexical, true)) continue;
        if (auto r = walk_dir(child.path(), child_rel, child_lexical); !r) return r.error();
        continue;
      }
      if (!fs::is_regular_file(st)) continue;  // sockets, fifos: not source
      if (ignored(child_lexical, false)) continue;
      add_file(child.path(), child_rel, st);
    }
    if (pushed) scope_stack_.pop_back();
    return Ok{};
  }

  void add_file(const fs::path& from, const std::string& rel, const fs::file_status& st) {
    bool exec = (st.permissions() & fs::perms::owner_exec) != fs::perms::none;
    entries.push_back({rel, from, exec ? LocalEntry::Kind::executable : LocalEntry::Kind::file, ""});
  }

  Result<Ok> add_link(const fs::path& link, const std::string& rel, const fs::path& lexical) {
    std::error_code ec;
    fs::path target = fs::read_symlink(link, ec);
    if (ec) return Error::bad_input(fmt::format("cannot read the link {}: {}", link.string(), ec.message()));
    // Inside the tree (relative, and resolving below the root): kept as a link.
    fs::path resolved = (lexical.parent_path() / target).lexically_normal();
    bool inside = target.is_relative() && !resolved.lexically_relative(root_).string().starts_with("..");
    if (inside) {
      entries.push_back({rel, link, LocalEntry::Kind::symlink, target.string()});
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
          entries.push_back({rel, link, LocalEntry::Kind::symlink, to});
          return Ok{};
        }
      if (id) followed_.emplace(*id, rel);
      return walk_dir(real, rel, lexical);
    }
    if (fs::is_regular_file(st)) add_file(real, rel, st);
    return Ok{};
  }

  fs::path root_;
  std::vector<Repo> repos_;
  std::vector<RepoScope> scope_stack_;
  std::vector<std::pair<dev_t, ino_t>> on_path_;
  std::map<std::pair<dev_t, ino_t>, std::string> followed_;  // a folder outside, copied at this path
};

// The hash of one entry's content (a link: its target text).
Result<std::string> entry_digest(const LocalEntry& e, std::uint64_t* bytes) {
  if (e.kind == LocalEntry::Kind::symlink) return sha256_hex(e.link_target);
  std::ifstream in(e.from, std::ios::binary);
  if (!in) return Error::bad_input(fmt::format("cannot read {}", e.from.string()));
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    auto n = static_cast<std::size_t>(in.gcount());
    h.update(buf.data(), n);
    if (bytes) *bytes += n;
  }
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

}  // namespace

Result<LocalTree> scan_local_tree(const fs::path& dir, std::string_view what) {
  std::error_code ec;
  if (auto is_dir = paths::expect_directory(dir, what); !is_dir) return is_dir.error();
  LocalTree t;
  t.root = fs::canonical(dir, ec);
  if (ec) return Error::bad_input(fmt::format("cannot resolve {}: {}", dir.string(), ec.message()));
  Walker w(t.root);
  if (auto r = w.walk(); !r) return r.error();
  t.entries = std::move(w.entries);
  std::sort(t.entries.begin(), t.entries.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  t.git = w.git_;
  t.head = w.head_;
  t.commit_time = w.commit_time_;
  Sha256 all;
  all.update("archbuild local tree v1\n");
  for (const auto& e : t.entries) {
    auto d = entry_digest(e, &t.bytes);
    if (!d) return d.error();
    all.update(hash_line(e, kind_name(e.kind), *d));
  }
  t.content_hash = all.hex();
  return t;
}

Result<fs::path> copy_local_tree(const LocalTree& tree, const fs::path& target, const std::function<bool()>& cancelled) {
  std::error_code ec;
  fs::path tmp = target;
  tmp += ".partial";
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return Error::build_failed(fmt::format("cannot create {}: {}", tmp.string(), ec.message()));
  auto fail = [&](std::string msg) {
    fs::remove_all(tmp, ec);
    return Error::build_failed(std::move(msg));
  };
  Sha256 all;
  all.update("archbuild local tree v1\n");
  for (const auto& e : tree.entries) {
    if (cancelled && cancelled()) return fail("the copy of the source tree was interrupted");
    fs::path to = tmp / e.path;
    fs::create_directories(to.parent_path(), ec);
    if (e.kind == LocalEntry::Kind::symlink) {
      fs::create_symlink(e.link_target, to, ec);
    } else {
      fs::copy_file(e.from, to, fs::copy_options::overwrite_existing, ec);
      if (!ec) {
        auto perms = e.kind == LocalEntry::Kind::executable ? fs::perms(0755) : fs::perms(0644);
        fs::permissions(to, perms, ec);
      }
    }
    if (ec) return fail(fmt::format("cannot copy {} to {}: {}", e.from.string(), to.string(), ec.message()));
    // The copy is hashed again: an edit during the scan would otherwise build other sources than
    // the key names.
    LocalEntry copied = e;
    copied.from = to;
    auto d = entry_digest(copied, nullptr);
    if (!d) return fail(d.error().message);
    all.update(hash_line(e, kind_name(e.kind), *d));
  }
  if (all.hex() != tree.content_hash)
    return fail(fmt::format("{} changed while archbuild copied it; run again (the key names the content)",
                            tree.root.string()));
  fs::remove_all(target, ec);
  fs::rename(tmp, target, ec);
  if (ec) return fail(fmt::format("cannot move the copy into place at {}: {}", target.string(), ec.message()));
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
