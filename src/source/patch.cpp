// Patches through libgit2's apply: git_apply_to_tree against a mirrored commit (its trial objects
// written to an in-memory object store, never to the mirror), git_apply onto a checkout's work
// tree. libgit2 reads git's patch form only, so a patch is first rewritten to it (a/ b/ names at
// strip 1), and its reverse is made the same way to tell "already contained" from "does not apply".
#include "source/patch.hpp"

#include <git2/sys/mempack.h>

#include <charconv>

#include <fmt/format.h>

#include "core/text.hpp"
#include "source/git_util.hpp"

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

}  // namespace detail

namespace {

using Diff = std::unique_ptr<git_diff, Deleter<git_diff, git_diff_free>>;
using Index = std::unique_ptr<git_index, Deleter<git_index, git_index_free>>;
using Tree = std::unique_ptr<git_tree, Deleter<git_tree, git_tree_free>>;

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

Result<Diff> parse(const Patch& p, bool reverse) {
  std::string text = detail::normalized_patch(p.text, p.strip, reverse);
  git_diff* raw = nullptr;
  if (git_diff_from_buffer(&raw, text.data(), text.size()) != 0)
    return Error::bad_input(fmt::format("patch {}: not a patch libgit2 reads: {}", p.name, last_error()));
  Diff d(raw);
  if (git_diff_num_deltas(d.get()) == 0) return Error::bad_input(fmt::format("patch {}: changes no file", p.name));
  return d;
}

PatchOutcome failed(const Trace& t, const std::string& reason) {
  PatchOutcome o;
  o.fit = PatchOutcome::Fit::fails;
  o.file = t.file;
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

}  // namespace

std::string describe_failure(const Patch& p, const PatchOutcome& o, const std::string& where) {
  std::string at = o.file.empty() ? "" : fmt::format(": {}", o.file);
  if (!o.hunk.empty()) at += fmt::format(", hunk {}", o.hunk);
  return fmt::format("patch {} does not apply to {}{}{}{}; update the patch for this tree (or drop it: a recipe's "
                     "[[patch]] `when`, or --patch)",
                     p.name, where, at, o.reason.empty() ? "" : " (", o.reason.empty() ? "" : o.reason + ")");
}

Result<std::vector<PatchOutcome>> check_patches(const fs::path& mirror, const std::string& commit,
                                                const std::vector<Patch>& patches) {
  init_libgit2();
  git_repository* raw = nullptr;
  if (git_repository_open_bare(&raw, mirror.c_str()) != 0)
    return Error::build_failed(fmt::format("{}: not a mirror: {}", mirror.string(), last_error()));
  Repo repo(raw);
  {  // The trial's blobs and trees go to memory: checking never writes into the mirror.
    git_odb* odb = nullptr;
    git_odb_backend* mem = nullptr;
    if (git_repository_odb(&odb, repo.get()) != 0 || git_mempack_new(&mem) != 0 || git_odb_add_backend(odb, mem, 1000) != 0) {
      if (odb) git_odb_free(odb);
      return Error::build_failed(fmt::format("{}: cannot check patches in memory: {}", mirror.string(), last_error()));
    }
    git_odb_free(odb);
  }
  git_oid oid;
  git_commit* c = nullptr;
  if (git_oid_fromstr(&oid, commit.c_str()) != 0 || git_commit_lookup(&c, repo.get(), &oid) != 0)
    return Error::build_failed(fmt::format("{}: commit {} is not in the mirror: {}", mirror.string(), commit, last_error()));
  Commit owned(c);
  git_tree* t = nullptr;
  if (git_commit_tree(&t, owned.get()) != 0)
    return Error::build_failed(fmt::format("{}: commit {} has no tree: {}", mirror.string(), commit, last_error()));
  Tree tree(t);
  std::vector<PatchOutcome> out;
  for (const auto& p : patches) {
    auto forward = parse(p, false);
    if (!forward) {
      out.push_back(unreadable(forward.error()));
      continue;
    }
    Trace trace;
    auto opts = options_for(trace);
    git_index* idx = nullptr;
    if (git_apply_to_tree(&idx, repo.get(), tree.get(), forward->get(), &opts) == 0) {
      Index index(idx);
      git_oid tree_id;
      if (git_index_write_tree_to(&tree_id, index.get(), repo.get()) != 0 || git_tree_lookup(&t, repo.get(), &tree_id) != 0)
        return Error::build_failed(fmt::format("patch {}: cannot make the patched tree: {}", p.name, last_error()));
      tree.reset(t);
      out.push_back({});
      continue;
    }
    std::string reason = last_error();
    auto backward = parse(p, true);
    Trace ignored;
    auto ropts = options_for(ignored);
    if (backward && git_apply_to_tree(&idx, repo.get(), tree.get(), backward->get(), &ropts) == 0) {
      git_index_free(idx);
      out.push_back({PatchOutcome::Fit::contained, "", "", ""});
      continue;
    }
    out.push_back(failed(trace, reason));
  }
  return out;
}

Result<std::vector<PatchOutcome>> apply_patches(const fs::path& dir, const std::vector<Patch>& patches,
                                                const std::function<void(std::size_t)>& before) {
  init_libgit2();
  git_repository* raw = nullptr;
  if (git_repository_open(&raw, dir.c_str()) != 0)
    return Error::build_failed(fmt::format("{}: not a checkout: {}", dir.string(), last_error()));
  Repo repo(raw);
  std::vector<PatchOutcome> out;
  for (std::size_t i = 0; i < patches.size(); ++i) {
    const Patch& p = patches[i];
    if (before) before(i);
    auto forward = parse(p, false);
    if (!forward) {
      out.push_back(unreadable(forward.error()));
      return out;
    }
    Trace trace;
    auto opts = options_for(trace);
    if (git_apply(repo.get(), forward->get(), GIT_APPLY_LOCATION_WORKDIR, &opts) == 0) {
      out.push_back({});
      continue;
    }
    std::string reason = last_error();
    auto backward = parse(p, true);
    Trace ignored;
    auto ropts = options_for(ignored, GIT_APPLY_CHECK);
    if (backward && git_apply(repo.get(), backward->get(), GIT_APPLY_LOCATION_WORKDIR, &ropts) == 0) {
      out.push_back({PatchOutcome::Fit::contained, "", "", ""});
      continue;
    }
    out.push_back(failed(trace, reason));
    return out;
  }
  return out;
}

}  // namespace archbuild::source
