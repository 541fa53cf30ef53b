// Patches through libgit2's apply: git_apply_to_tree against a mirrored commit (its trial objects
// written to an in-memory object store, never to the mirror), git_apply onto a checkout's work
// tree. libgit2 reads git's patch form only, so a patch is first rewritten to it (a/ b/ names at
// strip 1), and its reverse is made the same way to tell "already contained" from "does not apply".
#include "source/patch.hpp"

#include <git2/sys/mempack.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <set>
#include <variant>

#include <fmt/format.h>

#include "core/text.hpp"
#include "source/git_util.hpp"
#include "source/local.hpp"
#include "source/source.hpp"

namespace archbuild::source {

using namespace detail;
namespace fs = std::filesystem;

namespace detail {

namespace {

// A ---/+++ or `diff --git` name with its first `strip` components dropped ("" when it has fewer);
// /dev/null stays. A trailing tab (diff's timestamp) ends the name.
std::string stripped(std::string p, int strip) {
  if (auto tab = p.find('\t'); tab != std::string::npos) p.resize(tab);
  while (!p.empty() && (p.back() == '\r' || p.back() == ' ')) p.pop_back();
  if (p == "/dev/null") return p;
  for (int i = 0; i < strip; ++i) {
    auto slash = p.find('/');
    if (slash == std::string::npos) return "";
    p.erase(0, slash + 1);
  }
  return p;
}

std::string side(const std::string& path, const char* prefix) { return path == "/dev/null" ? path : prefix + path; }

// "-12,7" → {12, 7}; a count left out is 1.
bool range_of(std::string_view s, long& start, long& count) {
  if (s.empty()) return false;
  s.remove_prefix(1);
  auto comma = s.find(',');
  auto a = s.substr(0, comma);
  if (std::from_chars(a.data(), a.data() + a.size(), start).ec != std::errc()) return false;
  count = 1;
  if (comma != std::string_view::npos) {
    auto b = s.substr(comma + 1);
    if (std::from_chars(b.data(), b.data() + b.size(), count).ec != std::errc()) return false;
  }
  return true;
}

}  // namespace

std::string normalized_patch(const std::string& text, int strip, bool reverse) {
  std::vector<std::string> in;
  for (std::size_t pos = 0; pos < text.size();) {
    auto nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    in.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  std::string out;
  auto emit = [&](const std::string& l) { out += l + "\n"; };
  long old_left = 0, new_left = 0;
  bool git_section = false;  // a `diff --git` line opened this file's section, before its hunks
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::string& line = in[i];
    if (old_left > 0 || new_left > 0) {  // a hunk's body, counted by its header
      char c = line.empty() ? ' ' : line[0];
      std::string rest = line.empty() ? "" : line.substr(1);
      if (c == '\\') emit(line);
      else if (c == ' ') --old_left, --new_left, emit(line.empty() ? " " : line);
      else if (c == '-') --old_left, emit((reverse ? "+" : "-") + rest);
      else if (c == '+') --new_left, emit((reverse ? "-" : "+") + rest);
      else old_left = new_left = 0, --i;  // short hunk: libgit2 says what is wrong with it
      continue;
    }
    if (reverse && line == "GIT binary patch") {
      // Its two blocks (each "literal N"/"delta N", its data, a blank line) are the forward
      // change then the one that undoes it: the reverse patch has them the other way round.
      auto block = [&](std::size_t from) {
        std::size_t end = from;
        while (end < in.size() && !in[end].empty()) ++end;
        return std::min(end + 1, in.size());  // past its blank line
      };
      std::size_t forward_end = block(i + 1), back_end = block(forward_end);
      emit(line);
      for (std::size_t k = forward_end; k < back_end; ++k) emit(in[k]);
      for (std::size_t k = i + 1; k < forward_end; ++k) emit(in[k]);
      i = back_end - 1;
      git_section = false;
      continue;
    }
    if (line.starts_with("diff --git ")) {
      auto parts = text::split_any(line.substr(11), " ");
      if (parts.size() == 2) {
        std::string a = stripped(parts[0], strip), b = stripped(parts[1], strip);
        emit("diff --git a/" + (reverse ? b : a) + " b/" + (reverse ? a : b));
      } else {
        emit(line);
      }
      git_section = true;
    } else if (line.starts_with("--- ") && i + 1 < in.size() && in[i + 1].starts_with("+++ ")) {
      std::string a = stripped(line.substr(4), strip), b = stripped(in[i + 1].substr(4), strip);
      if (!git_section) {
        std::string name = b != "/dev/null" ? b : a;
        emit("diff --git a/" + name + " b/" + name);
        if (a == "/dev/null" || b == "/dev/null")
          emit(std::string((a == "/dev/null") != reverse ? "new" : "deleted") + " file mode 100644");
      }
      if (reverse) std::swap(a, b);
      emit("--- " + side(a, "a/"));
      emit("+++ " + side(b, "b/"));
      ++i;
      git_section = false;
    } else if (line.starts_with("@@ -")) {
      auto parts = text::split_any(line, " ");
      long os = 0, oc = 0, ns = 0, nc = 0;
      if (parts.size() >= 4 && range_of(parts[1], os, oc) && range_of(parts[2], ns, nc)) {
        old_left = oc;
        new_left = nc;
        if (reverse) {
          auto close = line.find("@@", 2);
          emit(fmt::format("@@ -{},{} +{},{} {}", ns, nc, os, oc, line.substr(close)));
        } else {
          emit(line);
        }
      } else {
        emit(line);
      }
      git_section = false;
    } else if (reverse && git_section) {
      auto swap_word = [&](std::string_view a, std::string_view b) -> bool {
        if (line.starts_with(a)) return emit(std::string(b) + line.substr(a.size())), true;
        if (line.starts_with(b)) return emit(std::string(a) + line.substr(b.size())), true;
        return false;
      };
      if (swap_word("new file mode ", "deleted file mode ") || swap_word("old mode ", "new mode ") ||
          swap_word("rename from ", "rename to "))
        continue;
      if (line.starts_with("index ")) {
        auto parts = text::split_any(line.substr(6), " ");
        auto dots = parts.empty() ? std::string::npos : parts[0].find("..");
        if (dots != std::string::npos) {
          std::string swapped = parts[0].substr(dots + 2) + ".." + parts[0].substr(0, dots);
          emit("index " + swapped + (parts.size() > 1 ? " " + parts[1] : ""));
          continue;
        }
      }
      emit(line);
    } else {
      emit(line);
    }
  }
  return out;
}

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos < text.size();) {
    auto nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

// "a/x y" → "x y" (a normalized name), "/dev/null" kept.
std::string unprefixed(const std::string& name) {
  if (name == "/dev/null") return name;
  return name.size() > 2 && name[1] == '/' ? name.substr(2) : name;
}

}  // namespace

std::vector<Section> sections_of(const std::string& normalized) {
  std::vector<Section> out;
  long old_left = 0, new_left = 0;
  bool in_header = false;  // between a `diff --git` line and its first hunk
  for (const auto& line : lines_of(normalized)) {
    if (old_left > 0 || new_left > 0) {  // a hunk's body, counted by its header
      char c = line.empty() ? ' ' : line[0];
      if (c == ' ') --old_left, --new_left;
      else if (c == '-') --old_left;
      else if (c == '+') --new_left;
      if (!out.empty()) {
        out.back().text += line + "\n";
        if (line.starts_with("+Subproject commit ") || line.starts_with("-Subproject commit ")) out.back().gitlink = true;
      }
      continue;
    }
    if (line.starts_with("diff --git ")) {
      out.emplace_back();
      Section& s = out.back();
      // "diff --git a/X b/Y": the names, until ---/+++ or rename lines say them unambiguously.
      auto b = line.rfind(" b/");
      if (b != std::string::npos && b > 11) {
        s.old_path = unprefixed(line.substr(11, b - 11));
        s.new_path = line.substr(b + 3);
      }
      in_header = true;
    } else if (out.empty()) {
      continue;  // mail headers, a cover text
    } else if (in_header && line.starts_with("--- ")) {
      out.back().old_path = unprefixed(line.substr(4));
    } else if (in_header && line.starts_with("+++ ")) {
      out.back().new_path = unprefixed(line.substr(4));
    } else if (in_header && (line.starts_with("rename from ") || line.starts_with("copy from "))) {
      out.back().old_path = line.substr(line.find(" from ") + 6);
    } else if (in_header && (line.starts_with("rename to ") || line.starts_with("copy to "))) {
      out.back().new_path = line.substr(line.find(" to ") + 4);
    } else if (line.starts_with("@@ -")) {
      auto parts = text::split_any(line, " ");
      long os = 0, ns = 0;
      if (parts.size() < 4 || !range_of(parts[1], os, old_left) || !range_of(parts[2], ns, new_left))
        old_left = new_left = 0;
      in_header = false;
    } else if (in_header && (line.ends_with(" 160000") || line.find("mode 160000") != std::string::npos)) {
      out.back().gitlink = true;
    }
    out.back().text += line + "\n";
  }
  return out;
}

std::string relative_to(const Section& s, const std::string& sub) {
  if (sub.empty()) return s.text;
  const std::string in = sub + "/";
  // `lead` + sub/ + rest → `lead` + rest, where the line starts with lead + sub/.
  auto drop = [&](std::string& line, const std::string& lead) {
    if (line.starts_with(lead + in)) line = lead + line.substr(lead.size() + in.size());
  };
  std::string out;
  bool header = true;
  for (auto line : lines_of(s.text)) {
    if (line.starts_with("@@ -")) header = false;
    if (header) {
      if (line.starts_with("diff --git ")) {
        drop(line, "diff --git a/");
        if (auto b = line.rfind(" b/" + in); b != std::string::npos) line.erase(b + 3, in.size());
      }
      for (const char* lead : {"--- a/", "+++ b/", "rename from ", "rename to ", "copy from ", "copy to "}) drop(line, lead);
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace detail

namespace {

using Diff = std::unique_ptr<git_diff, Deleter<git_diff, git_diff_free>>;
using Index = std::unique_ptr<git_index, Deleter<git_index, git_index_free>>;
using Tree = std::unique_ptr<git_tree, Deleter<git_tree, git_tree_free>>;
using TreeEntry = std::unique_ptr<git_tree_entry, Deleter<git_tree_entry, git_tree_entry_free>>;
using Blob = std::unique_ptr<git_blob, Deleter<git_blob, git_blob_free>>;

// Where libgit2 was when an apply failed: the callbacks run before each file and each hunk.
struct Trace {
  std::string file, hunk;
};

extern "C" int trace_delta(const git_diff_delta* d, void* payload) {
  auto* t = static_cast<Trace*>(payload);
  t->file = d->new_file.path ? d->new_file.path : (d->old_file.path ? d->old_file.path : "");
  t->hunk.clear();
  return 0;
}

extern "C" int trace_hunk(const git_diff_hunk* h, void* payload) {
  auto* t = static_cast<Trace*>(payload);
  t->hunk = text::trim(std::string(h->header, h->header_len));
  return 0;
}

git_apply_options options_for(Trace& t, unsigned flags = 0) {
  git_apply_options o;
  git_apply_options_init(&o, GIT_APPLY_OPTIONS_VERSION);
  o.delta_cb = trace_delta;
  o.hunk_cb = trace_hunk;
  o.payload = &t;
  o.flags = flags;
  return o;
}

Result<Diff> parse(const std::string& name, const std::string& text, int strip, bool reverse) {
  std::string normalized = detail::normalized_patch(text, strip, reverse);
  git_diff* raw = nullptr;
  if (git_diff_from_buffer(&raw, normalized.data(), normalized.size()) != 0)
    return Error::bad_input(fmt::format("patch {}: not a patch libgit2 reads: {}", name, last_error()));
  Diff d(raw);
  if (git_diff_num_deltas(d.get()) == 0) return Error::bad_input(fmt::format("patch {}: changes no file", name));
  return d;
}

PatchOutcome failed(const Trace& t, const std::string& reason, const std::string& sub = {}) {
  PatchOutcome o;
  o.fit = PatchOutcome::Fit::fails;
  o.file = sub.empty() || t.file.empty() ? t.file : sub + "/" + t.file;  // as the superproject names it
  o.hunk = t.hunk;
  o.reason = reason;
  return o;
}

PatchOutcome unreadable(const Error& e) {
  PatchOutcome o;
  o.fit = PatchOutcome::Fit::fails;
  o.reason = e.message;
  return o;
}

PatchOutcome refused(const std::string& file, std::string reason) {
  PatchOutcome o;
  o.fit = PatchOutcome::Fit::fails;
  o.file = file;
  o.reason = std::move(reason);
  return o;
}

// The trial's blobs and trees go to memory: nothing is written into the repository.
bool add_mempack(git_repository* repo) {
  git_odb* odb = nullptr;
  git_odb_backend* mem = nullptr;
  bool ok = git_repository_odb(&odb, repo) == 0 && git_mempack_new(&mem) == 0 && git_odb_add_backend(odb, mem, 1000) == 0;
  if (odb) git_odb_free(odb);
  return ok;
}

Result<Tree> tree_of(git_repository* repo, const std::string& commit, const std::string& where) {
  git_oid oid;
  git_commit* c = nullptr;
  if (git_oid_fromstr(&oid, commit.c_str()) != 0 || git_commit_lookup(&c, repo, &oid) != 0)
    return Error::build_failed(fmt::format("{}: commit {} is not there: {}", where, commit, last_error()));
  Commit owned(c);
  git_tree* t = nullptr;
  if (git_commit_tree(&t, owned.get()) != 0)
    return Error::build_failed(fmt::format("{}: commit {} has no tree: {}", where, commit, last_error()));
  return Tree(t);
}

// path → url and update strategy of each [submodule "…"] section of a .gitmodules (git's config
// syntax, the part of it the file uses).
struct GitmodulesEntry {
  std::string url, update;
};
std::map<std::string, GitmodulesEntry> gitmodules_entries(std::string_view text) {
  std::map<std::string, GitmodulesEntry> out;
  std::string path, url, update;
  bool in_submodule = false;
  auto flush = [&] {
    if (in_submodule && !path.empty() && !url.empty()) out[path] = {url, update};
    path.clear();
    url.clear();
    update.clear();
  };
  for (const auto& raw : detail::lines_of(std::string(text))) {
    std::string line = text::trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      flush();
      in_submodule = line.starts_with("[submodule");
      continue;
    }
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = text::lower(text::trim(line.substr(0, eq))), value = text::trim(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    if (key == "path") path = value;
    else if (key == "url") url = value;
    else if (key == "update") update = text::lower(value);
  }
  flush();
  return out;
}

// Why a submodule's part cannot be applied where the fetch stage does not check it out (the
// checkout skips submodules turned off and those whose .gitmodules says `update = none`).
constexpr const char* kNotCheckedOut = "it is not checked out (submodules off, or update = none)";

std::optional<std::string> blob_at(git_repository* repo, git_tree* tree, const std::string& path) {
  git_tree_entry* e = nullptr;
  if (git_tree_entry_bypath(&e, tree, path.c_str()) != 0) return std::nullopt;
  TreeEntry entry(e);
  git_blob* b = nullptr;
  if (git_tree_entry_type(e) != GIT_OBJECT_BLOB || git_blob_lookup(&b, repo, git_tree_entry_id(e)) != 0) return std::nullopt;
  Blob blob(b);
  return std::string(static_cast<const char*>(git_blob_rawcontent(b)), static_cast<std::size_t>(git_blob_rawsize(b)));
}

// A repository a patch's parts apply to: the top tree, or a submodule (`sub`: its path from the top).
struct Node {
  std::string sub, url, commit;
  Repo repo;        // none: not mirrored, not checked out (`why`)
  Tree base;        // the commit's tree: where its gitlinks and .gitmodules are read
  Tree tree;        // in memory: the trial, the patches so far applied onto `base`
  std::string why;
  bool not_checked_out = false;  // the checkout will not have it: its part is refused, never unchecked
};

// The repositories of one tree and its submodules, found as the patches name their files: in
// memory (mirrors, or a folder's files) or a checkout's work trees.
class Nodes {
 public:
  enum class Where { memory, workdir };
  // `submodules`: whether the checkout the patches are for has its submodules (SourceOptions).
  Nodes(Where where, fs::path top_dir, SubmoduleMirror mirror, bool submodules = true)
      : where_(where), top_dir_(std::move(top_dir)), mirror_(std::move(mirror)), submodules_(submodules) {}
  Where where() const { return where_; }
  Node& add(std::unique_ptr<Node> n) { return *nodes_.emplace_back(std::move(n)); }
  Node& top() { return *nodes_.front(); }

  struct Owner {
    Node* node = nullptr;
    bool gitlink = false;  // the path is a submodule itself
  };
  // The deepest submodule holding `path` (submodules of submodules too), else the top.
  Owner owner_of(const std::string& path) {
    Node* n = &top();
    std::string rel, full;
    auto parts = text::split_any(path, "/");
    for (std::size_t i = 0; i < parts.size(); ++i) {
      rel += (rel.empty() ? "" : "/") + parts[i];
      full += (full.empty() ? "" : "/") + parts[i];
      if (!n->repo || !n->base) break;
      git_tree_entry* e = nullptr;
      if (git_tree_entry_bypath(&e, n->base.get(), rel.c_str()) != 0) break;
      TreeEntry entry(e);
      auto type = git_tree_entry_type(e);
      if (type != GIT_OBJECT_COMMIT) {
        if (type == GIT_OBJECT_TREE) continue;
        break;
      }
      if (i + 1 == parts.size()) return {n, true};
      n = &child(*n, full, rel, *git_tree_entry_id(e));
      rel.clear();
    }
    return {n, false};
  }

 private:
  Node& child(Node& parent, const std::string& full, const std::string& rel, const git_oid& id) {
    for (auto& n : nodes_)
      if (n->sub == full) return *n;
    auto n = std::make_unique<Node>();
    n->sub = full;
    n->commit = oid_hex(id);
    auto unavailable = [&](std::string why) -> Node& {
      n->repo.reset();
      n->why = std::move(why);
      return add(std::move(n));
    };
    git_repository* raw = nullptr;
    if (where_ == Where::workdir) {
      if (git_repository_open(&raw, (top_dir_ / full).c_str()) != 0)
        return unavailable(kNotCheckedOut);
      n->repo.reset(raw);
      git_oid head;
      if (git_reference_name_to_id(&head, raw, "HEAD") != 0) return unavailable("its checkout has no HEAD");
      auto t = tree_of(raw, oid_hex(head), (top_dir_ / full).string());
      if (!t) return unavailable(t.error().message);
      n->base = std::move(*t);
      return add(std::move(n));
    }
    auto modules = blob_at(parent.repo.get(), parent.base.get(), ".gitmodules");
    auto urls = gitmodules_entries(modules.value_or(""));
    auto u = urls.find(rel);
    // As checkout.cpp decides: its checkout skips the submodule, so fetch would refuse its part.
    if (!submodules_ || (u != urls.end() && u->second.update == "none")) {
      n->not_checked_out = true;
      return unavailable(kNotCheckedOut);
    }
    if (u == urls.end()) return unavailable(fmt::format("{}'s .gitmodules names no URL for it", parent.sub.empty() ? "the tree" : parent.sub));
    n->url = resolve_submodule_url(parent.url, u->second.url);
    std::optional<fs::path> mirror = mirror_ ? mirror_(n->url, n->commit) : std::nullopt;
    if (!mirror || git_repository_open_bare(&raw, mirror->c_str()) != 0) return unavailable("its commit is not in the cache");
    n->repo.reset(raw);
    auto t = tree_of(raw, n->commit, mirror->string());
    if (!t || !add_mempack(raw)) return unavailable("its commit is not in the cache");
    n->base = std::move(*t);
    git_tree* copy = nullptr;
    if (git_tree_lookup(&copy, raw, git_tree_id(n->base.get())) != 0) return unavailable(last_error());
    n->tree.reset(copy);
    return add(std::move(n));
  }

  Where where_;
  fs::path top_dir_;
  SubmoduleMirror mirror_;
  bool submodules_ = true;
  std::vector<std::unique_ptr<Node>> nodes_;  // the top first
};

// A patch's sections grouped by the repository holding their files, names made relative to it.
struct Part {
  Node* node = nullptr;
  std::string text;
  std::string first_file;  // as the superproject names it
};

// The parts of `p`, or the refusal of a section no part can carry (a submodule's commit moved,
// a file renamed across a submodule's edge).
std::variant<std::vector<Part>, PatchOutcome> split(Nodes& nodes, const Patch& p) {
  std::vector<Part> parts;
  for (const auto& s : detail::sections_of(detail::normalized_patch(p.text, p.strip, false))) {
    std::string path = s.new_path != "/dev/null" ? s.new_path : s.old_path;
    auto owner = nodes.owner_of(path);
    if (s.gitlink || owner.gitlink)
      return refused(path, "it changes the commit of a submodule (a `Subproject commit` line); a patch cannot move a "
                           "submodule: build a superproject commit that records the one wanted (--ref), or patch the "
                           "submodule's files");
    if (s.old_path != "/dev/null" && s.old_path != path && nodes.owner_of(s.old_path).node != owner.node)
      return refused(path, fmt::format("it renames {} across a submodule's edge", s.old_path));
    auto part = std::find_if(parts.begin(), parts.end(), [&](const Part& x) { return x.node == owner.node; });
    if (part == parts.end()) part = parts.insert(parts.end(), Part{owner.node, "", path});
    part->text += detail::relative_to(s, owner.node->sub);
  }
  return parts;
}

// One patch tried in memory on the nodes' trial trees: applies (the trees advanced to its
// result), contained (its reverse applies to every part), or fails (the first part's failure).
Result<PatchOutcome> try_in_memory(Nodes& nodes, const Patch& p) {
  if (auto whole = parse(p.name, p.text, p.strip, false); !whole) return unreadable(whole.error());
  auto split_up = split(nodes, p);
  if (auto* r = std::get_if<PatchOutcome>(&split_up)) return *r;
  auto& parts = std::get<std::vector<Part>>(split_up);
  for (const auto& part : parts)
    if (part.node->not_checked_out)
      return refused(part.first_file, fmt::format("submodule {}: {}", part.node->sub, part.node->why));
  PatchOutcome out;
  for (const auto& part : parts)
    if (!part.node->repo) out.unchecked.push_back({part.node->sub, part.node->url, part.node->commit});
  std::vector<std::pair<Node*, Tree>> next;
  std::optional<PatchOutcome> failure;
  for (const auto& part : parts) {
    Node& n = *part.node;
    if (!n.repo) continue;
    auto d = parse(p.name, part.text, 1, false);
    if (!d) return unreadable(d.error());
    Trace trace;
    auto opts = options_for(trace);
    git_index* idx = nullptr;
    if (git_apply_to_tree(&idx, n.repo.get(), n.tree.get(), d->get(), &opts) != 0) {
      failure = failed(trace, last_error(), n.sub);
      break;
    }
    Index index(idx);
    git_oid tree_id;
    git_tree* t = nullptr;
    if (git_index_write_tree_to(&tree_id, index.get(), n.repo.get()) != 0 || git_tree_lookup(&t, n.repo.get(), &tree_id) != 0)
      return Error::build_failed(fmt::format("patch {}: cannot make the patched tree: {}", p.name, last_error()));
    next.emplace_back(&n, Tree(t));
  }
  if (!failure) {
    for (auto& [n, t] : next) n->tree = std::move(t);
    return out;
  }
  // A patch saved with CRLF line ends (an editor's, a download's) fits only files that have them.
  if (p.text.find("\r\n") != std::string::npos)
    failure->reason += "; the patch's lines end in CRLF: convert it to LF line ends if the tree's files have them";
  for (const auto& part : parts) {
    Node& n = *part.node;
    if (!n.repo) continue;
    auto back = parse(p.name, part.text, 1, true);
    Trace ignored;
    auto ropts = options_for(ignored);
    git_index* idx = nullptr;
    if (!back || git_apply_to_tree(&idx, n.repo.get(), n.tree.get(), back->get(), &ropts) != 0) return *failure;
    git_index_free(idx);
  }
  out.fit = PatchOutcome::Fit::contained;
  return out;
}

// A git_apply onto a work tree: `check` only tries.
bool apply_workdir(Node& n, const std::string& name, const std::string& text, bool reverse, bool check, Trace& trace,
                   std::string& reason) {
  auto d = parse(name, text, 1, reverse);
  if (!d) {
    reason = d.error().message;
    return false;
  }
  auto opts = options_for(trace, check ? GIT_APPLY_CHECK : 0);
  if (git_apply(n.repo.get(), d->get(), GIT_APPLY_LOCATION_WORKDIR, &opts) == 0) return true;
  reason = last_error();
  return false;
}

// One patch onto a checkout's work trees: every part tried first, then applied.
PatchOutcome apply_to_workdirs(Nodes& nodes, const Patch& p) {
  if (auto whole = parse(p.name, p.text, p.strip, false); !whole) return unreadable(whole.error());
  auto split_up = split(nodes, p);
  if (auto* r = std::get_if<PatchOutcome>(&split_up)) return *r;
  auto& parts = std::get<std::vector<Part>>(split_up);
  for (const auto& part : parts)
    if (!part.node->repo) return refused(part.first_file, fmt::format("submodule {}: {}", part.node->sub, part.node->why));
  std::optional<PatchOutcome> failure;
  for (const auto& part : parts) {
    Trace trace;
    std::string reason;
    if (!apply_workdir(*part.node, p.name, part.text, false, true, trace, reason)) {
      failure = failed(trace, reason, part.node->sub);
      break;
    }
  }
  if (!failure) {
    for (const auto& part : parts) {
      Trace trace;
      std::string reason;
      if (!apply_workdir(*part.node, p.name, part.text, false, false, trace, reason))
        return failed(trace, reason, part.node->sub);  // after its check: the caller drops the tree
    }
    return {};
  }
  for (const auto& part : parts) {
    Trace ignored;
    std::string reason;
    if (!apply_workdir(*part.node, p.name, part.text, true, true, ignored, reason)) return *failure;
  }
  return {PatchOutcome::Fit::contained, "", "", "", {}};
}

// The files the patches name (old and new names), those that can be in a tree only: a name with
// a `..`, `.` or `.git` component is never read or written (libgit2 refuses it in the patch).
std::set<std::string> named_paths(const std::vector<Patch>& patches) {
  std::set<std::string> out;
  for (const auto& p : patches)
    for (const auto& s : detail::sections_of(detail::normalized_patch(p.text, p.strip, false)))
      for (const auto& path : {s.old_path, s.new_path}) {
        if (path == "/dev/null" || path.empty() || path.front() == '/') continue;
        auto parts = text::split_any(path, "/");
        if (std::none_of(parts.begin(), parts.end(), [](const std::string& c) { return c == ".git" || c == ".." || c == "."; }))
          out.insert(path);
      }
  return out;
}

bool inside(const fs::path& root, const fs::path& p) {
  auto r = root.begin(), q = p.begin();
  for (; r != root.end(); ++r, ++q)
    if (q == p.end() || *r != *q) return false;
  return true;
}

// A file as the tree the patches go to holds it: its bytes (a link: its target's text) and mode.
struct Loaded {
  std::string content;
  std::uint32_t mode = GIT_FILEMODE_BLOB;
};
// None: the tree has no such file (or not a file): the patch may create it.
using Reader = std::function<Result<std::optional<Loaded>>(const std::string& path)>;

Result<std::optional<Loaded>> read_regular(const fs::path& file, bool executable) {
  Loaded l;
  std::ifstream in(file, std::ios::binary);
  l.content.assign(std::istreambuf_iterator<char>(in), {});
  if (!in && !in.eof()) return Error::bad_input(fmt::format("cannot read {}", file.string()));
  if (executable) l.mode = GIT_FILEMODE_BLOB_EXECUTABLE;
  return std::optional<Loaded>(std::move(l));
}

// A plain folder's file (`.git` never read: named_paths leaves it out).
Reader folder_reader(const fs::path& dir) {
  std::error_code rec;
  fs::path root = fs::canonical(dir, rec);
  return [dir, root](const std::string& path) -> Result<std::optional<Loaded>> {
    fs::path file = dir / path;
    std::error_code ec;
    auto st = fs::symlink_status(file, ec);
    // A link leaving the folder is its target's file, as archbuild's copy holds it (source/local.hpp).
    if (std::error_code lec; fs::is_symlink(st)) {
      auto target = fs::canonical(file, lec);
      if (!lec && !inside(root, target)) st = fs::status(file, ec);
    }
    if (fs::is_symlink(st)) {
      auto target = fs::read_symlink(file, ec);
      if (ec) return Error::bad_input(fmt::format("cannot read {}: {}", file.string(), ec.message()));
      return std::optional<Loaded>(Loaded{target.string(), GIT_FILEMODE_LINK});
    }
    if (!fs::is_regular_file(st)) return std::optional<Loaded>();
    return read_regular(file, (st.permissions() & fs::perms::owner_exec) != fs::perms::none);
  };
}

const LocalEntry* entry_of(const LocalTree& tree, const std::string& path) {
  auto it = std::lower_bound(tree.entries.begin(), tree.entries.end(), path,
                             [](const LocalEntry& e, const std::string& p) { return e.path < p; });
  return it != tree.entries.end() && it->path == path ? &*it : nullptr;
}

// A scanned tree's file, as archbuild's copy of it will hold it (source/local.hpp): only its
// entries, each read where the scan read it (a link leaving the tree: its target's file).
Reader tree_reader(const LocalTree& tree) {
  return [&tree](const std::string& path) -> Result<std::optional<Loaded>> {
    const LocalEntry* e = entry_of(tree, path);
    if (!e) return std::optional<Loaded>();
    if (e->kind == LocalEntry::Kind::symlink) return std::optional<Loaded>(Loaded{e->link_target, GIT_FILEMODE_LINK});
    return read_regular(content_path(tree, *e), e->kind == LocalEntry::Kind::executable);
  };
}

// The files the patches name, read through `read`, as an in-memory repository: a tree of their
// own, the base the patches are tried on. `where` names the folder for messages.
Result<Ok> load_folder(Nodes& nodes, const std::string& where, const std::vector<Patch>& patches, const Reader& read) {
  git_repository* raw = nullptr;
  git_odb* odb_raw = nullptr;
  git_odb_backend* mem = nullptr;
  if (git_repository_new(&raw) != 0)
    return Error::build_failed(fmt::format("cannot make an in-memory repository: {}", last_error()));
  Repo repo(raw);
  if (git_odb_new(&odb_raw) != 0 || git_mempack_new(&mem) != 0 || git_odb_add_backend(odb_raw, mem, 1) != 0 ||
      git_repository_set_odb(repo.get(), odb_raw) != 0) {
    if (odb_raw) git_odb_free(odb_raw);
    return Error::build_failed(fmt::format("cannot make an in-memory repository: {}", last_error()));
  }
  git_odb_free(odb_raw);
  git_index* idx = nullptr;
  if (git_index_new(&idx) != 0) return Error::build_failed(fmt::format("cannot make an index: {}", last_error()));
  Index index(idx);
  for (const auto& path : named_paths(patches)) {
    auto file = read(path);
    if (!file) return file.error();
    if (!*file) continue;
    git_index_entry e{};
    e.mode = (*file)->mode;
    e.path = path.c_str();
    const std::string& content = (*file)->content;
    if (git_blob_create_from_buffer(&e.id, repo.get(), content.data(), content.size()) != 0 || git_index_add(idx, &e) != 0)
      return Error::build_failed(fmt::format("{}: cannot stage {} in memory: {}", where, path, last_error()));
  }
  git_oid tree_id;
  git_tree* t = nullptr;
  git_tree* t2 = nullptr;
  if (git_index_write_tree_to(&tree_id, idx, repo.get()) != 0 || git_tree_lookup(&t, repo.get(), &tree_id) != 0 ||
      git_tree_lookup(&t2, repo.get(), &tree_id) != 0) {
    if (t) git_tree_free(t);
    return Error::build_failed(fmt::format("{}: cannot make a tree in memory: {}", where, last_error()));
  }
  auto n = std::make_unique<Node>();
  n->repo = std::move(repo);
  n->base.reset(t);
  n->tree.reset(t2);
  nodes.add(std::move(n));
  return Ok{};
}

// A blob's bytes written beside `file` (its name + ".archbuild-patch"), to be renamed over it:
// a new inode, so a stat cache recorded before never takes it for the tree's.
Result<fs::path> write_beside(const fs::path& file, const std::string& content, std::uint32_t mode) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  fs::path tmp = file;
  tmp += ".archbuild-patch";
  fs::remove(tmp, ec);
  ec.clear();
  if (mode == GIT_FILEMODE_LINK) {
    fs::create_symlink(content, tmp, ec);
  } else {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) return Error::build_failed(fmt::format("cannot write {}", tmp.string()));
    fs::permissions(tmp, mode == GIT_FILEMODE_BLOB_EXECUTABLE ? fs::perms(0755) : fs::perms(0644), ec);
  }
  if (ec) return Error::build_failed(fmt::format("cannot write {}: {}", tmp.string(), ec.message()));
  return tmp;
}

// What the trial made of the named files, written into the folder: every new content first
// written beside its file, then (only when all were written) each renamed over its file and the
// removed ones removed, so a failed write leaves the folder as it was; files the patches left as
// they were are not touched.
Result<Ok> write_result(Node& n, const fs::path& dir, const std::vector<Patch>& patches) {
  std::vector<std::pair<fs::path, fs::path>> renames;  // written → its file
  std::vector<fs::path> removals;
  auto drop_written = [&] {
    std::error_code ec;
    for (const auto& [tmp, file] : renames) fs::remove(tmp, ec);
  };
  for (const auto& path : named_paths(patches)) {
    git_tree_entry* b = nullptr;
    git_tree_entry* a = nullptr;
    bool had = git_tree_entry_bypath(&b, n.base.get(), path.c_str()) == 0;
    bool has = git_tree_entry_bypath(&a, n.tree.get(), path.c_str()) == 0;
    TreeEntry before(had ? b : nullptr), after(has ? a : nullptr);
    if (had && has && git_oid_equal(git_tree_entry_id(b), git_tree_entry_id(a)) &&
        git_tree_entry_filemode(b) == git_tree_entry_filemode(a))
      continue;
    if (!has) {
      if (had) removals.push_back(dir / path);
      continue;
    }
    if (git_tree_entry_type(a) != GIT_OBJECT_BLOB) continue;
    git_blob* blob = nullptr;
    if (git_blob_lookup(&blob, n.repo.get(), git_tree_entry_id(a)) != 0) {
      drop_written();
      return Error::build_failed(fmt::format("patched {}: {}", path, last_error()));
    }
    Blob owned(blob);
    std::string content(static_cast<const char*>(git_blob_rawcontent(blob)), static_cast<std::size_t>(git_blob_rawsize(blob)));
    auto tmp = write_beside(dir / path, content, git_tree_entry_filemode(a));
    if (!tmp) {
      drop_written();
      return tmp.error();
    }
    renames.emplace_back(std::move(*tmp), dir / path);
  }
  for (const auto& file : removals) {
    std::error_code ec;
    fs::remove(file, ec);
    if (ec) {
      drop_written();
      return Error::build_failed(fmt::format("cannot remove {}: {}", file.string(), ec.message()));
    }
  }
  for (const auto& [tmp, file] : renames) {
    std::error_code ec;
    fs::rename(tmp, file, ec);
    if (ec) return Error::build_failed(fmt::format("cannot write {}: {}", file.string(), ec.message()));
  }
  return Ok{};
}

}  // namespace

std::string describe_failure(const Patch& p, const PatchOutcome& o, const std::string& where) {
  std::string at = o.file.empty() ? "" : fmt::format(": {}", o.file);
  if (!o.hunk.empty()) at += fmt::format(", hunk {}", o.hunk);
  return fmt::format("patch {} does not apply to {}{}{}{}; update the patch for this tree (or drop it: a recipe's "
                     "[[patch]] `when`, or --patch)",
                     p.name, where, at, o.reason.empty() ? "" : " (", o.reason.empty() ? "" : o.reason + ")");
}

namespace {
// Each patch tried in memory in turn, each onto the result of the ones before.
Result<std::vector<PatchOutcome>> try_each(Nodes& nodes, const std::vector<Patch>& patches) {
  std::vector<PatchOutcome> out;
  for (const auto& p : patches) {
    auto o = try_in_memory(nodes, p);
    if (!o) return o.error();
    out.push_back(std::move(*o));
  }
  return out;
}

// Why a file a patch names cannot be read or written as a plain folder's (or a scanned tree's)
// file, whatever the hunks say; none: it can. `trial`: the patches so far applied.
using Guard = std::function<std::optional<std::string>(const std::string& path, bool removed_before, git_tree* trial)>;

bool in_tree(git_tree* t, const std::string& path) {
  git_tree_entry* e = nullptr;
  if (git_tree_entry_bypath(&e, t, path.c_str()) != 0) return false;
  git_tree_entry_free(e);
  return true;
}

// A name a folder's file can have: relative, no empty, `.`, `..` or `.git` component (any other
// name would be read or written elsewhere than it says, or not at all: named_paths skips it).
bool plain_path(const std::string& path) {
  if (path.empty() || path.front() == '/' || path.back() == '/' || path.find("//") != std::string::npos) return false;
  auto parts = text::split_any(path, "/");
  return std::none_of(parts.begin(), parts.end(), [](const std::string& c) { return c == ".git" || c == ".." || c == "."; });
}

// The target of the link a section makes (a new file or new mode 120000: its hunk's + line).
std::optional<std::string> link_made(const detail::Section& s) {
  bool link = false;
  for (const auto& line : detail::lines_of(s.text)) {
    if (line == "new file mode 120000" || line == "new mode 120000") link = true;
    else if (link && line.starts_with("+") && !line.starts_with("+++ ")) return line.substr(1);
  }
  return std::nullopt;
}

// Whether a link at `path` to `target` leads out of the tree (absolute, or more `..` than depth).
bool link_leaves(const std::string& path, const std::string& target) {
  if (target.empty() || target.front() == '/') return true;
  long depth = static_cast<long>(std::count(path.begin(), path.end(), '/'));
  for (const auto& c : text::split_any(target, "/")) {
    if (c == "..") {
      if (--depth < 0) return true;
    } else if (!c.empty() && c != ".") {
      ++depth;
    }
  }
  return false;
}

// The first of `p`'s files its guard refuses, as the patch's outcome.
std::optional<PatchOutcome> guarded(Nodes& nodes, const Patch& p, const Guard& guard) {
  for (const auto& s : detail::sections_of(detail::normalized_patch(p.text, p.strip, false))) {
    if (auto target = link_made(s); target && s.new_path != "/dev/null" && link_leaves(s.new_path, *target))
      return refused(s.new_path, fmt::format("it makes a link leaving the tree (to {}); archbuild's copy holds no such "
                                             "link (the tree's own are copied as their target's files)", *target));
    for (bool old_side : {true, false}) {
      const std::string& path = old_side ? s.old_path : s.new_path;
      if (path == "/dev/null") continue;
      if (!plain_path(path))
        return refused(path, "its name is not a path inside the tree (an absolute name, an empty, `.`, `..` or `.git` "
                             "part; or a wrong strip level)");
      if (auto why = guard(path, old_side, nodes.top().tree.get())) return refused(path, *why);
    }
  }
  return std::nullopt;
}

// try_each on a folder: each patch's files through the guard first. `stop`: at the first failure.
Result<std::vector<PatchOutcome>> try_each_guarded(Nodes& nodes, const std::vector<Patch>& patches, const Guard& guard,
                                                   const std::function<void(std::size_t)>& before, bool stop) {
  std::vector<PatchOutcome> out;
  for (std::size_t i = 0; i < patches.size(); ++i) {
    if (before) before(i);
    if (auto refusal = guarded(nodes, patches[i], guard)) {
      out.push_back(std::move(*refusal));
    } else {
      auto o = try_in_memory(nodes, patches[i]);
      if (!o) return o.error();
      out.push_back(std::move(*o));
    }
    if (stop && out.back().fit == PatchOutcome::Fit::fails) return out;
  }
  return out;
}

constexpr const char* kFolderThere = "a folder is there where the patch has a file";
// As `git apply` ("beyond a symbolic link"): a link's folder is patched at its real path.
constexpr const char* kBeyondLink = "it is reached through {}, a link in the tree; name the file by its real path";

// A plain folder's guard: a file under a file, or where a folder is; `copy` (archbuild's copy,
// written): a file reached through a link that leaves the folder, which a patch never writes.
Guard folder_guard(const fs::path& dir, bool copy) {
  std::error_code rec;
  fs::path root = fs::canonical(dir, rec);
  return [dir, root, copy](const std::string& path, bool, git_tree*) -> std::optional<std::string> {
    auto parts = text::split_any(path, "/");
    fs::path at = dir;
    std::string prefix;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      at /= parts[i];
      prefix += (prefix.empty() ? "" : "/") + parts[i];
      std::error_code ec;
      auto st = fs::symlink_status(at, ec);
      if (!fs::exists(st)) break;
      if (fs::is_symlink(st)) {
        auto target = fs::canonical(at, ec);
        bool leaves = ec || !inside(root, target);
        if (leaves && !copy) continue;  // the copy holds a link leaving the tree as its target's files
        if (leaves)
          return fmt::format("it is reached through {}, a link leaving archbuild's copy; a patch never writes outside it",
                             prefix);
        return fmt::format(kBeyondLink, prefix);
      } else if (!fs::is_directory(st)) {
        return fmt::format("{} is a file, not a folder", prefix);
      }
    }
    std::error_code ec;
    if (fs::is_directory(fs::symlink_status(dir / path, ec))) return std::string(kFolderThere);
    return std::nullopt;
  };
}

// A scanned tree's guard, as its copy will be: a file under a file or where a folder is, and a
// file the patch changes that its ignore rules leave out (on disk, not scanned, not made by a
// patch before).
Guard tree_guard(const LocalTree& tree) {
  return [&tree](const std::string& path, bool old_side, git_tree* trial) -> std::optional<std::string> {
    auto parts = text::split_any(path, "/");
    std::string prefix;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      prefix += (prefix.empty() ? "" : "/") + parts[i];
      if (const LocalEntry* e = entry_of(tree, prefix))
        return e->kind == LocalEntry::Kind::symlink ? fmt::format(kBeyondLink, prefix)
                                                    : fmt::format("{} is a file, not a folder", prefix);
    }
    const std::string under = path + "/";
    auto it = std::lower_bound(tree.entries.begin(), tree.entries.end(), under,
                               [](const LocalEntry& e, const std::string& p) { return e.path < p; });
    if (it != tree.entries.end() && it->path.starts_with(under)) return std::string(kFolderThere);
    if (!old_side || entry_of(tree, path) || in_tree(trial, path)) return std::nullopt;
    std::error_code ec;
    auto st = fs::symlink_status(tree.root / path, ec);
    if (fs::is_regular_file(st) || fs::is_symlink(st))
      return std::string("the tree's ignore rules (.gitignore, .git/info/exclude) leave it out of archbuild's copy: "
                         "a patch changes only files the build gets");
    return std::nullopt;
  };
}
}  // namespace

Result<std::vector<PatchOutcome>> check_patches(const fs::path& mirror, const std::string& commit,
                                                const std::vector<Patch>& patches, const std::string& url,
                                                const SubmoduleMirror& submodule_mirror, bool submodules) {
  init_libgit2();
  git_repository* raw = nullptr;
  if (git_repository_open_bare(&raw, mirror.c_str()) != 0)
    return Error::build_failed(fmt::format("{}: not a mirror: {}", mirror.string(), last_error()));
  auto top = std::make_unique<Node>();
  top->repo.reset(raw);
  top->url = url;
  top->commit = commit;
  if (!add_mempack(raw))
    return Error::build_failed(fmt::format("{}: cannot check patches in memory: {}", mirror.string(), last_error()));
  auto base = tree_of(raw, commit, mirror.string() + ": the mirror");
  auto trial = tree_of(raw, commit, mirror.string() + ": the mirror");
  if (!base) return base.error();
  if (!trial) return trial.error();
  top->base = std::move(*base);
  top->tree = std::move(*trial);
  Nodes nodes(Nodes::Where::memory, {}, submodule_mirror, submodules);
  nodes.add(std::move(top));
  return try_each(nodes, patches);
}

Result<std::vector<PatchOutcome>> check_patches_in_folder(const fs::path& dir, const std::vector<Patch>& patches) {
  init_libgit2();
  Nodes nodes(Nodes::Where::memory, dir, {});
  if (auto r = load_folder(nodes, dir.string(), patches, folder_reader(dir)); !r) return r.error();
  return try_each_guarded(nodes, patches, folder_guard(dir, false), {}, false);
}

Result<std::vector<PatchOutcome>> check_patches_in_tree(const LocalTree& tree, const std::vector<Patch>& patches) {
  init_libgit2();
  Nodes nodes(Nodes::Where::memory, tree.root, {});
  if (auto r = load_folder(nodes, tree.root.string(), patches, tree_reader(tree)); !r) return r.error();
  return try_each_guarded(nodes, patches, tree_guard(tree), {}, false);
}

Result<std::vector<PatchOutcome>> apply_patches_to_folder(const fs::path& dir, const std::vector<Patch>& patches,
                                                          const std::function<void(std::size_t)>& before) {
  init_libgit2();
  Nodes nodes(Nodes::Where::memory, dir, {});
  if (auto r = load_folder(nodes, dir.string(), patches, folder_reader(dir)); !r) return r.error();
  auto out = try_each_guarded(nodes, patches, folder_guard(dir, true), before, true);
  if (!out || (!out->empty() && out->back().fit == PatchOutcome::Fit::fails)) return out;
  if (auto w = write_result(nodes.top(), dir, patches); !w) return w.error();
  return out;
}

Result<std::vector<PatchOutcome>> apply_patches(const fs::path& dir, const std::vector<Patch>& patches,
                                                const std::function<void(std::size_t)>& before) {
  init_libgit2();
  git_repository* raw = nullptr;
  if (git_repository_open(&raw, dir.c_str()) != 0)
    return Error::build_failed(fmt::format("{}: not a checkout: {}", dir.string(), last_error()));
  auto top = std::make_unique<Node>();
  top->repo.reset(raw);
  git_oid head;
  if (git_reference_name_to_id(&head, raw, "HEAD") != 0)
    return Error::build_failed(fmt::format("{}: no HEAD: {}", dir.string(), last_error()));
  auto base = tree_of(raw, oid_hex(head), dir.string());
  if (!base) return base.error();
  top->base = std::move(*base);
  Nodes nodes(Nodes::Where::workdir, dir, {});
  nodes.add(std::move(top));
  std::vector<PatchOutcome> out;
  for (std::size_t i = 0; i < patches.size(); ++i) {
    if (before) before(i);
    out.push_back(apply_to_workdirs(nodes, patches[i]));
    if (out.back().fit == PatchOutcome::Fit::fails) return out;
  }
  return out;
}

}  // namespace archbuild::source
