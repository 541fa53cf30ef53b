// source/local: a local tree built as it is — what belongs to it (git's ignore rules, submodules,
// links), its content hash (an edit changes it, a move does not), and the copy archbuild builds in.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "core/sha256.hpp"
#include "source/local.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using archbuild::source::copy_local_tree;
using archbuild::source::scan_local_tree;

namespace {

std::vector<std::string> paths(const archbuild::source::LocalTree& tree) {
  std::vector<std::string> out;
  for (const auto& e : tree.entries) out.push_back(e.path);
  return out;
}

void git(const fs::path& dir, std::vector<std::string> args) {
  std::vector<std::string> a = {"-C", dir.string(), "-c", "user.name=t", "-c", "user.email=t@t.invalid"};
  a.insert(a.end(), args.begin(), args.end());
  t::RunOptions o;
  o.env = {{"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", dir.string()}};
  auto r = t::run("/usr/bin/git", a, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
}

}  // namespace

TEST_CASE("local tree: plain folder, hash follows content and not location", "[source][local]") {
  t::TempDir a, b;
  for (const auto* d : {&a, &b}) {
    d->write("proj/setup.py", "print('hi')\n");
    d->write("proj/csrc/k.cu", "__global__ void k() {}\n");
  }
  auto ta = scan_local_tree(a / "proj");
  auto tb = scan_local_tree(b / "proj");
  REQUIRE(ta);
  REQUIRE(tb);
  CHECK(paths(*ta) == std::vector<std::string>{"csrc/k.cu", "setup.py"});
  CHECK(ta->content_hash == tb->content_hash);
  CHECK_FALSE(ta->git);

  b.write("proj/csrc/k.cu", "__global__ void k() { }\n");
  auto tb2 = scan_local_tree(b / "proj");
  REQUIRE(tb2);
  CHECK(tb2->content_hash != ta->content_hash);

  // The executable bit is part of the tree (a build script).
  fs::permissions(a / "proj/setup.py", fs::perms::owner_exec, fs::perm_options::add);
  auto ta2 = scan_local_tree(a / "proj");
  REQUIRE(ta2);
  CHECK(ta2->content_hash != ta->content_hash);

  auto missing = scan_local_tree(a / "nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().exit == archbuild::Exit::bad_input);
}

TEST_CASE("local tree: git's view — ignored files out, untracked and uncommitted changes in", "[source][local]") {
  t::TempDir d;
  fs::path repo = d / "repo";
  d.write("repo/.gitignore", "/build/\n*.o\n");
  d.write("repo/CMakeLists.txt", "project(x)\n");
  git(repo, {"init", "-q"});
  git(repo, {"add", "-A"});
  git(repo, {"commit", "-qm", "one"});
  d.write("repo/CMakeLists.txt", "project(x) # edited, not committed\n");
  d.write("repo/new.cpp", "int main() {}\n");        // untracked, not ignored
  d.write("repo/build/CMakeCache.txt", "x\n");        // ignored folder
  d.write("repo/a.o", "obj\n");                       // ignored file
  // A checked-out submodule (a nested repository): in, by its own ignore rules.
  d.write("repo/third_party/dep/.gitignore", "*.tmp\n");
  d.write("repo/third_party/dep/dep.h", "#pragma once\n");
  d.write("repo/third_party/dep/x.tmp", "scratch\n");
  git(repo / "third_party/dep", {"init", "-q"});

  auto tree = scan_local_tree(repo);
  REQUIRE(tree);
  CHECK(tree->git);
  CHECK(tree->head.has_value());
  CHECK(tree->commit_time.has_value());
  CHECK(paths(*tree) == std::vector<std::string>{".gitignore", "CMakeLists.txt", "new.cpp", "third_party/dep/.gitignore",
                                                 "third_party/dep/dep.h"});

  // A folder inside a repository (an example inside archbuild's own) uses that repository's rules.
  d.write("repo/sub/keep.txt", "k\n");
  d.write("repo/sub/drop.o", "o\n");
  auto sub = scan_local_tree(repo / "sub");
  REQUIRE(sub);
  CHECK(paths(*sub) == std::vector<std::string>{"keep.txt"});
}

TEST_CASE("local tree: links inside are kept, links leaving the tree are copied as their target", "[source][local]") {
  t::TempDir d;
  d.write("dep/include/dep.h", "#pragma once\n");
  d.write("proj/main.cpp", "#include <dep.h>\n");
  fs::create_directories(d / "proj/third_party");
  fs::create_symlink("../../dep", d / "proj/third_party/dep");
  fs::create_symlink("main.cpp", d / "proj/alias.cpp");
  auto tree = scan_local_tree(d / "proj");
  REQUIRE(tree);
  CHECK(paths(*tree) == std::vector<std::string>{"alias.cpp", "main.cpp", "third_party/dep/include/dep.h"});

  fs::path out = d / "copy";
  auto copied = copy_local_tree(*tree, out);
  REQUIRE(copied);
  CHECK(fs::is_symlink(out / "alias.cpp"));
  CHECK(fs::read_symlink(out / "alias.cpp") == "main.cpp");
  CHECK_FALSE(fs::is_symlink(out / "third_party/dep"));
  CHECK(t::read_file(out / "third_party/dep/include/dep.h") == "#pragma once\n");
  CHECK_FALSE(fs::exists(d / "copy.partial"));
  // The copy is the same tree.
  auto again = scan_local_tree(out);
  REQUIRE(again);
  CHECK(again->content_hash == tree->content_hash);
  // The original was not touched.
  CHECK(fs::is_symlink(d / "proj/third_party/dep"));
}

TEST_CASE("local tree: a file edited after the scan fails the copy, nothing half-written stays", "[source][local]") {
  t::TempDir d;
  d.write("proj/a.txt", "one\n");
  auto tree = scan_local_tree(d / "proj");
  REQUIRE(tree);
  d.write("proj/a.txt", "two\n");
  auto copied = copy_local_tree(*tree, d / "copy");
  REQUIRE_FALSE(copied);
  CHECK(copied.error().message.find("changed while archbuild copied it") != std::string::npos);
  CHECK_FALSE(fs::exists(d / "copy"));
  CHECK_FALSE(fs::exists(d / "copy.partial"));
}

// Every shape of a link that leads back to a folder containing it: the walk refuses it (exit 2,
// naming the link) instead of walking the tree inside itself until the stack runs out.
TEST_CASE("local tree: a link to a folder that contains it is a cycle, exit 2 naming the link", "[source][local]") {
  struct Shape {
    const char* what;
    std::string link;                                   // where the link is, in proj/
    std::function<fs::path(const t::TempDir&)> target;  // what it points to
  };
  std::vector<Shape> shapes = {
      {"absolute, to the root", "loop", [](const t::TempDir& d) { return fs::canonical(d / "proj"); }},
      {"absolute, to the folder it is in", "a/b/here", [](const t::TempDir& d) { return fs::canonical(d / "proj/a/b"); }},
      {"absolute, to a folder above it", "a/b/up", [](const t::TempDir& d) { return fs::canonical(d / "proj/a"); }},
      {"absolute, to the folder above the root", "a/top", [](const t::TempDir& d) { return fs::canonical(d.path()); }},
      {"relative, leaving the tree to a folder above it", "a/b/out", [](const t::TempDir&) { return fs::path("../../.."); }},
      {"through a followed folder outside, back to the root", "ext",
       [](const t::TempDir& d) { return fs::canonical(d / "outside"); }},
  };
  for (const auto& s : shapes) {
    DYNAMIC_SECTION(s.what) {
      t::TempDir d;
      d.write("proj/a/b/k.cu", "__global__ void k() {}\n");
      d.write("outside/dep.h", "#pragma once\n");
      // The folder outside links back into the tree (absolute): a cycle only through `ext`.
      fs::create_symlink(fs::canonical(d / "proj"), d / "outside/back");
      fs::create_symlink(s.target(d), d / "proj" / s.link);
      auto tree = scan_local_tree(d / "proj");
      REQUIRE_FALSE(tree);
      INFO(tree.error().message);
      CHECK(tree.error().exit == archbuild::Exit::bad_input);
      CHECK(tree.error().message.find("cycle") != std::string::npos);
      std::string named = s.link == std::string("ext") ? "\"ext/back\"" : "\"" + s.link + "\"";
      CHECK(tree.error().message.find(named) != std::string::npos);
    }
  }
}

// A folder outside reached by several links is copied once; the others become links to that
// copy (a chain of folders each linking twice to the next would otherwise be copied 2^depth times).
TEST_CASE("local tree: a folder outside reached by two links is copied once", "[source][local]") {
  t::TempDir d;
  d.write("proj/main.cpp", "int main() {}\n");
  constexpr int kDepth = 24;  // 2^24 walks without the record of what was copied
  for (int i = 0; i < kDepth; ++i) {
    d.write(fmt::format("chain/{}/file.h", i), "// level\n");
    if (i + 1 < kDepth) {
      fs::create_symlink(fs::canonical(d / "chain") / std::to_string(i + 1), d / fmt::format("chain/{}/x", i));
      fs::create_symlink(fs::canonical(d / "chain") / std::to_string(i + 1), d / fmt::format("chain/{}/y", i));
    }
  }
  fs::create_symlink(fs::canonical(d / "chain/0"), d / "proj/dep");
  auto tree = scan_local_tree(d / "proj");
  REQUIRE(tree);
  std::size_t files = 0, links = 0;
  for (const auto& e : tree->entries) (e.kind == archbuild::source::LocalEntry::Kind::symlink ? links : files)++;
  CHECK(files == kDepth + 1);
  CHECK(links == kDepth - 1);
  // dep/x is the copy of chain/1, dep/y a link to it; the copy builds without the original.
  auto copied = copy_local_tree(*tree, d / "copy");
  REQUIRE(copied);
  CHECK(fs::read_symlink(d / "copy/dep/y") == "x");
  CHECK(t::read_file(d / "copy/dep/y/file.h") == "// level\n");
  CHECK(fs::is_symlink(d / "copy/dep/x/y"));
}

// Issue 46: a checkout cloned without --recursive. The gitlink commit comes from HEAD's tree; a
// .gitmodules path with no gitlink (or no repository: a tarball) is named without one.
TEST_CASE("local tree: submodules of .gitmodules whose folders are missing or empty, with their gitlinks",
          "[source][local]") {
  t::TempDir tmp;
  fs::path repo = tmp / "pytorch";
  tmp.write("pytorch/version.txt", "2.11.0a0\n");
  tmp.write("pytorch/.gitmodules",
            "[submodule \"third_party/pybind11\"]\n\tignore = dirty\n\tpath = third_party/pybind11\n"
            "\turl = https://github.com/pybind/pybind11.git\n"
            "[submodule \"third_party/cpuinfo\"]\n\tpath = third_party/cpuinfo\n\turl = https://github.com/pytorch/cpuinfo.git\n"
            "[submodule \"third_party/fbgemm\"]\n\tpath = third_party/fbgemm\n\turl = https://github.com/pytorch/fbgemm\n");
  tmp.write("pytorch/third_party/fbgemm/CMakeLists.txt", "# checked out\n");
  CHECK(archbuild::source::missing_submodules(repo).size() == 2);  // no repository: no gitlinks
  git(repo, {"init", "-q"});
  git(repo, {"add", "-A"});
  const std::string pybind = "3e9dfa2866941655c56877882565e7577de6fc7b";
  git(repo, {"update-index", "--add", "--cacheinfo", "160000," + pybind + ",third_party/pybind11"});
  git(repo, {"commit", "-qm", "gitlinks"});
  fs::create_directories(repo / "third_party/pybind11");  // the empty folder `git clone` leaves
  auto missing = archbuild::source::missing_submodules(repo);
  REQUIRE(missing.size() == 2);
  CHECK(missing[0].path == "third_party/pybind11");
  CHECK(missing[0].url == "https://github.com/pybind/pybind11.git");
  CHECK(missing[0].commit == std::optional<std::string>(pybind));
  CHECK(missing[1].path == "third_party/cpuinfo");
  CHECK_FALSE(missing[1].commit);  // a .gitmodules path with no gitlink
  tmp.write("pytorch/third_party/pybind11/CMakeLists.txt", "# checked out now\n");
  tmp.write("pytorch/third_party/cpuinfo/LICENSE", "# checked out now\n");
  CHECK(archbuild::source::missing_submodules(repo).empty());
}

// ---- the stat cache (issue 48) -----------------------------------------------------------------

namespace {

using archbuild::source::FileStat;
using archbuild::source::StatTime;
using archbuild::source::TreeStatCache;

// A scan through `cache` (its `next` becomes the following scan's `previous`), checked against a
// scan without any cache: the content hash is the same value either way.
std::string scan_both(const fs::path& dir, TreeStatCache& cache) {
  if (!cache.next.empty()) cache.previous = cache.next;
  auto cached = scan_local_tree(dir, "--source", &cache);
  auto full = scan_local_tree(dir);
  REQUIRE(cached);
  REQUIRE(full);
  CHECK(cached->content_hash == full->content_hash);
  CHECK(cached->bytes == full->bytes);
  return cached->content_hash;
}

// The cache's checksum made again after a test edits its body (a forged cache that parses).
std::string resealed(std::string bytes) {
  const std::size_t trailer = 4 + 64 + 1;
  std::string body = bytes.substr(0, bytes.size() - trailer);
  return body + "end " + archbuild::sha256_hex(body) + "\n";
}

// The cache with its racy bound (the line after the folder) replaced.
std::string with_racy_from(const std::string& bytes, StatTime t) {
  auto root_end = bytes.find('\0');
  auto line_end = bytes.find('\n', root_end);
  auto count_at = bytes.rfind(' ', line_end);
  std::string out = bytes.substr(0, root_end + 1) + fmt::format("{} {}", t.s, t.ns) + bytes.substr(count_at);
  return resealed(out);
}

// The cache with one file's recorded digest replaced.
std::string with_digest(const std::string& bytes, const std::string& path, const std::string& digest) {
  auto at = bytes.find(path + std::string(1, '\0'));
  REQUIRE(at != std::string::npos);
  auto line_end = bytes.find('\n', at);
  std::string out = bytes;
  out.replace(line_end - 64, 64, digest);
  return resealed(out);
}

}  // namespace

TEST_CASE("local tree: the stat cache gives the full rehash's value after every kind of change", "[source][local]") {
  t::TempDir d;
  d.write("outside/dep.h", "#pragma once // outside\n");
  d.write("outside/other.h", "#pragma once // other\n");
  d.write("proj/CMakeLists.txt", "project(x)\n");
  d.write("proj/csrc/k.cu", "__global__ void k() {}\n");
  d.write("proj/csrc/k.h", "#pragma once\n");
  d.write("proj/tools/gen.sh", "#!/bin/sh\n");
  d.write("proj/big.bin", std::string(3 << 20, 'x'));  // more than one read buffer
  fs::create_symlink("csrc/k.h", d / "proj/alias.h");
  fs::create_symlink(fs::canonical(d / "outside/dep.h"), d / "proj/dep.h");  // leaves the tree: copied
  fs::path proj = d / "proj";
  fs::permissions(proj / "tools/gen.sh", fs::perms::owner_exec, fs::perm_options::add);
  // Older than the slack: the first scan's record of them is trusted by the next.
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  TreeStatCache cache;
  std::string first = scan_both(proj, cache);
  CHECK_FALSE(cache.previous_valid);
  CHECK(cache.rehashed == 6);

  // Nothing changed: nothing read, the same value.
  CHECK(scan_both(proj, cache) == first);
  CHECK(cache.previous_valid);
  CHECK(cache.reused == 6);
  CHECK(cache.rehashed == 0);

  // A touch without a change: read again (its stat changed), the same value.
  fs::last_write_time(proj / "csrc/k.cu", fs::file_time_type::clock::now());
  CHECK(scan_both(proj, cache) == first);
  CHECK(cache.rehashed == 1);

  // An edit of the same size, an edit of another size.
  d.write("proj/csrc/k.cu", "__global__ void q() {}\n");
  std::string edited = scan_both(proj, cache);
  CHECK(edited != first);
  d.write("proj/csrc/k.h", "#pragma once\n#define K 1\n");
  CHECK(scan_both(proj, cache) != edited);

  struct Change {
    const char* what;
    std::function<void()> apply;
  };
  std::vector<Change> changes = {
      {"a rename", [&] { fs::rename(proj / "csrc/k.cu", proj / "csrc/kernel.cu"); }},
      {"the exec bit set", [&] { fs::permissions(proj / "CMakeLists.txt", fs::perms::owner_exec, fs::perm_options::add); }},
      {"the exec bit cleared", [&] { fs::permissions(proj / "tools/gen.sh", fs::perms::owner_exec, fs::perm_options::remove); }},
      {"a link inside retargeted", [&] {
         fs::remove(proj / "alias.h");
         fs::create_symlink("CMakeLists.txt", proj / "alias.h");
       }},
      {"a link outside retargeted", [&] {
         fs::remove(proj / "dep.h");
         fs::create_symlink(fs::canonical(d / "outside/other.h"), proj / "dep.h");
       }},
      {"the file a link outside names edited", [&] { d.write("outside/other.h", "#pragma once // edited\n"); }},
      {"a deletion", [&] { fs::remove(proj / "csrc/k.h"); }},
      {"a new file", [&] { d.write("proj/csrc/new.cu", "// new\n"); }},
      {"a file replaced by another of the same size by rename", [&] {
         d.write("proj/tmp.txt", "project(y)\n");
         fs::rename(proj / "tmp.txt", proj / "CMakeLists.txt");
       }},
  };
  std::vector<std::string> seen = {first, edited};
  for (const auto& c : changes) {
    INFO(c.what);
    c.apply();
    std::string h = scan_both(proj, cache);
    CHECK(std::find(seen.begin(), seen.end(), h) == seen.end());
    seen.push_back(h);
  }
  // The tree moved back to an earlier content: the earlier value again.
  d.write("proj/csrc/k.cu", "__global__ void k() {}\n");
  fs::remove(proj / "csrc/kernel.cu");
  fs::remove(proj / "csrc/new.cu");
  scan_both(proj, cache);
}

TEST_CASE("local tree: a file edited within the same second as the cache was written is read again",
          "[source][local]") {
  t::TempDir d;
  d.write("proj/a.txt", "one\n");
  d.write("proj/b.txt", "bee\n");
  TreeStatCache cache;
  std::string first = scan_both(d / "proj", cache);
  d.write("proj/a.txt", "two\n");  // same size, same second
  CHECK(scan_both(d / "proj", cache) != first);
  CHECK(cache.rehashed == 2);  // both written within the slack of the scan that recorded them

  // Deterministic, whatever the file system's clock: a record whose stat matches the file now,
  // but whose bound is not after the file's timestamps, is not trusted; the same record with a
  // bound after them is (which is why the bound must be the recording scan's own start).
  auto now = scan_local_tree(d / "proj");
  REQUIRE(now);
  const FileStat st = now->entries[0].stat;
  std::string wrong(64, '0');
  TreeStatCache forged;
  forged.previous = with_digest(with_racy_from(cache.next, {st.mtime_s, st.mtime_ns}), "a.txt", wrong);
  auto racy = scan_local_tree(d / "proj", "--source", &forged);
  REQUIRE(racy);
  CHECK(forged.previous_valid);
  CHECK(racy->content_hash == now->content_hash);

  forged.previous = with_digest(with_racy_from(cache.next, {st.ctime_s + 10, 0}), "a.txt", wrong);
  auto trusted = scan_local_tree(d / "proj", "--source", &forged);
  REQUIRE(trusted);
  CHECK(forged.reused == 2);
  CHECK(trusted->content_hash != now->content_hash);  // the record was used: the rule is what guards

  using archbuild::source::stat_cache_usable;
  FileStat f{1, 2, 0100644, 3, 100, 5, 100, 7};
  CHECK(stat_cache_usable(f, f, {100, 8}));
  CHECK_FALSE(stat_cache_usable(f, f, {100, 7}));  // ctime at the bound
  CHECK_FALSE(stat_cache_usable(f, f, {100, 5}));
  FileStat g = f;
  g.ctime_ns = 6;
  CHECK_FALSE(stat_cache_usable(f, g, {200, 0}));
  g = f;
  g.ino = 3;
  CHECK_FALSE(stat_cache_usable(f, g, {200, 0}));
  g = f;
  g.mode = 0100755;
  CHECK_FALSE(stat_cache_usable(f, g, {200, 0}));
}

TEST_CASE("hostile/stat cache: damaged, truncated or foreign caches are ignored, never trusted", "[source][local]") {
  t::TempDir d;
  d.write("proj/a.txt", "one\n");
  d.write("proj/dir/b.txt", "two\n");
  d.write("other/a.txt", "one\n");
  d.write("other/dir/b.txt", "two\n");
  TreeStatCache cache;
  auto tree = scan_local_tree(d / "proj", "--source", &cache);
  REQUIRE(tree);
  const std::string good = with_racy_from(cache.next, {std::int64_t{1} << 40, 0});  // every record trusted
  const std::string wrong(64, 'a');
  const std::string poisoned = with_digest(good, "a.txt", wrong);

  std::vector<std::pair<std::string, std::string>> bad = {
      {"empty", ""},
      {"garbage", "\x7f" "ELF\x01\x02 not a cache at all"},
      {"a wrong digest, checksum not made again", good.substr(0, good.size() - 70) + std::string(1, good[good.size() - 70] ^ 1) + good.substr(good.size() - 69)},
      {"the checksum damaged", good.substr(0, good.size() - 2) + (good[good.size() - 2] == '0' ? "1\n" : "0\n")},
      {"another version", resealed("archbuild tree stat cache 1" + good.substr(good.find('\n')))},
      {"a count the bytes cannot hold", resealed(good.substr(0, good.find('\0') + 1) + "0 0 99999999999999\n" +
                                                 good.substr(good.find('\n', good.find('\0')) + 1))},
      {"a count past 2^64", resealed(good.substr(0, good.find('\0') + 1) + "0 0 999999999999999999999999\n" +
                                     good.substr(good.find('\n', good.find('\0')) + 1))},
      {"nanoseconds out of range", with_racy_from(good, {0, 1'000'000'000})},
      {"records out of order", [&] {
         std::string s = poisoned;
         auto a = s.find(std::string("a.txt") + '\0');
         s.replace(a, 5, "z.txt");
         return resealed(s);
       }()},
  };
  for (std::size_t cut = 0; cut < good.size(); cut += 7) bad.push_back({fmt::format("cut at {}", cut), good.substr(0, cut)});
  for (const auto& [what, bytes] : bad) {
    INFO(what);
    TreeStatCache c;
    c.previous = bytes;
    auto t2 = scan_local_tree(d / "proj", "--source", &c);
    REQUIRE(t2);
    CHECK_FALSE(c.previous_valid);
    CHECK(c.reused == 0);
    CHECK(t2->content_hash == tree->content_hash);
  }
  // Another folder's cache (same names, same content) is not this one's.
  TreeStatCache other;
  other.previous = good;
  auto t3 = scan_local_tree(d / "other", "--source", &other);
  REQUIRE(t3);
  CHECK_FALSE(other.previous_valid);
  CHECK(t3->content_hash == tree->content_hash);
  // The same cache, whole: every record is used.
  TreeStatCache same;
  same.previous = good;
  REQUIRE(scan_local_tree(d / "proj", "--source", &same));
  CHECK(same.previous_valid);
  CHECK(same.reused == 2);
}

// ---- copies of what changed (issue 48 §2) ------------------------------------------------------

namespace {

// Every entry of a folder, as it is: path → "file <mode> <content>", "link <target>", "dir".
std::map<std::string, std::string> listing(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    std::string rel = it->path().lexically_relative(root).generic_string();
    auto st = it->symlink_status();
    if (fs::is_symlink(st)) out[rel] = "link " + fs::read_symlink(it->path()).string();
    else if (fs::is_directory(st)) out[rel] = "dir";
    else out[rel] = fmt::format("file {:o} {}", static_cast<unsigned>(st.permissions()), t::read_file(it->path()));
  }
  return out;
}

}  // namespace

TEST_CASE("local tree: a new copy starts from the previous one and equals a fresh copy", "[source][local]") {
  t::TempDir d;
  d.write("proj/CMakeLists.txt", "project(x)\n");
  d.write("proj/csrc/k.cu", "__global__ void k() {}\n");
  d.write("proj/csrc/k.h", "#pragma once\n");
  d.write("proj/gone/only.txt", "removed later\n");
  d.write("proj/tools/gen.sh", "#!/bin/sh\n");
  fs::create_symlink("csrc/k.h", d / "proj/alias.h");
  fs::path proj = d / "proj";
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // the first copy's records trusted later
  auto tree = scan_local_tree(proj);
  REQUIRE(tree);
  archbuild::source::CopyReuse first;
  REQUIRE(copy_local_tree(*tree, d / "src/one", {}, &first));
  CHECK_FALSE(first.reused);
  REQUIRE_FALSE(first.cache.next.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));

  // The build wrote into its copy: a generated file, an edited source, a folder of outputs.
  d.write("src/one/generated.py", "VERSION = 1\n");
  d.write("src/one/csrc/k.h", "#pragma once // the build wrote here\n");
  d.write("src/one/build/obj/k.o", "object\n");
  // The user's edits: a kernel, the exec bit, a deletion, a new file, a link retargeted, a file
  // where a folder was.
  d.write("proj/csrc/k.cu", "__global__ void q() {}\n");
  fs::permissions(proj / "CMakeLists.txt", fs::perms::owner_exec, fs::perm_options::add);
  fs::remove_all(proj / "gone");
  d.write("proj/gone", "a file now\n");
  d.write("proj/csrc/new.cu", "// new\n");
  fs::remove(proj / "alias.h");
  fs::create_symlink("csrc/k.cu", proj / "alias.h");
  auto edited = scan_local_tree(proj);
  REQUIRE(edited);

  archbuild::source::CopyReuse second;
  second.previous = d / "src/one";
  second.cache.previous = first.cache.next;
  auto copied = copy_local_tree(*edited, d / "src/two", {}, &second);
  REQUIRE(copied);
  CHECK(second.reused);
  CHECK(second.cache.previous_valid);
  CHECK_FALSE(fs::exists(d / "src/one"));  // moved, not copied
  CHECK_FALSE(fs::exists(d / "src/two.partial"));
  // Kept: tools/gen.sh (unchanged, untouched). Written: CMakeLists.txt (mode), csrc/k.cu, csrc/k.h
  // (the build's write), csrc/new.cu, gone, alias.h. Removed: generated.py, build/obj/k.o,
  // gone/only.txt.
  CHECK(second.kept == 1);
  CHECK(second.written == 6);
  CHECK(second.removed == 3);
  // What a fresh copy of the same content holds, exactly.
  REQUIRE(copy_local_tree(*edited, d / "fresh"));
  CHECK(listing(d / "src/two") == listing(d / "fresh"));
  auto again = scan_local_tree(d / "src/two");
  REQUIRE(again);
  CHECK(again->content_hash == edited->content_hash);

  // A damaged stat cache of the earlier copy: every file written again, the same result.
  archbuild::source::CopyReuse third;
  third.previous = d / "src/two";
  third.cache.previous = std::string("damaged");
  REQUIRE(copy_local_tree(*edited, d / "src/three", {}, &third));
  CHECK(third.reused);
  CHECK_FALSE(third.cache.previous_valid);
  CHECK(third.kept == edited->entries.size());  // each file read and found equal: nothing written
  CHECK(third.written == 0);
  CHECK(listing(d / "src/three") == listing(d / "fresh"));

  // An earlier copy that is gone: a fresh copy.
  archbuild::source::CopyReuse fourth;
  fourth.previous = d / "src/none";
  REQUIRE(copy_local_tree(*edited, d / "src/four", {}, &fourth));
  CHECK_FALSE(fourth.reused);
  CHECK(listing(d / "src/four") == listing(d / "fresh"));
}

// ---- the ignore decisions in the stat cache -------------------------------------------------------

namespace {

// The cache with its racy bound an hour ahead: every record in it trusted, so that what guards the
// recorded ignore decisions in a test is the comparison of the rules' inputs, not the racy rule
// (every rule file a test edits was written within the slack).
std::string trusted(const std::string& bytes) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return with_racy_from(bytes, {static_cast<std::int64_t>(now.tv_sec) + 3600, 0});
}

// A scan through `cache` (its previous scan's record, trusted) beside a scan without one: the same
// files, the same hash. Returns the cached scan's paths.
std::vector<std::string> scan_both_ignoring(const fs::path& dir, TreeStatCache& cache) {
  if (!cache.next.empty()) cache.previous = cache.next;  // else unchanged: `previous` stays
  if (cache.previous) cache.previous = trusted(*cache.previous);
  auto cached = scan_local_tree(dir, "--source", &cache);
  auto full = scan_local_tree(dir);
  REQUIRE(cached);
  REQUIRE(full);
  CHECK(paths(*cached) == paths(*full));
  CHECK(cached->content_hash == full->content_hash);
  return paths(*cached);
}

bool has(const std::vector<std::string>& v, const std::string& p) { return std::find(v.begin(), v.end(), p) != v.end(); }

// Where the cache records the state of the .gitignore of folder `rel` (offset, length).
std::pair<std::size_t, std::size_t> gitignore_state_at(const std::string& bytes, const std::string& rel) {
  std::size_t pos = bytes.find("\nignore ");
  REQUIRE(pos != std::string::npos);
  pos = bytes.find('\n', pos + 1) + 1;
  for (;;) {
    auto rel_end = bytes.find('\0', pos), state_end = bytes.find('\0', rel_end + 1);
    auto line_end = bytes.find('\n', state_end + 1);
    REQUIRE(line_end != std::string::npos);
    if (bytes.compare(pos, rel_end - pos, rel) == 0) return {rel_end + 1, state_end - rel_end - 1};
    pos = line_end + 1;
  }
}

}  // namespace

TEST_CASE("local tree: the ignore decisions the stat cache keeps give git's view after every change of the rules",
          "[source][local]") {
  t::TempDir d;
  fs::path repo = d / "repo";
  d.write("repo/.gitignore", "*.o\n/build/\nout/\n");
  d.write("repo/CMakeLists.txt", "project(x)\n");
  d.write("repo/notes.txt", "n\n");
  d.write("repo/src/a.cpp", "int a;\n");
  d.write("repo/src/a.o", "obj\n");
  d.write("repo/src/gen/x.cpp", "int x;\n");
  d.write("repo/build/y.txt", "y\n");
  d.write("repo/logs/app.log", "log\n");
  d.write("repo/out", "a file, where the rule names a folder\n");
  d.write("repo/vendor/v.o", "obj\n");
  d.write("repo/nested/.gitignore", "*.tmp\n");
  d.write("repo/nested/n.h", "#pragma once\n");
  d.write("repo/nested/n.tmp", "t\n");
  d.write("repo/nested/n.o", "o\n");
  git(repo, {"init", "-q"});
  git(repo / "nested", {"init", "-q"});

  TreeStatCache cache;
  auto p = scan_both_ignoring(repo, cache);
  CHECK_FALSE(cache.previous_valid);
  CHECK_FALSE(has(p, "src/a.o"));
  CHECK_FALSE(has(p, "build/y.txt"));
  CHECK(has(p, "out"));
  CHECK(has(p, "nested/n.o"));  // its own repository: the outer rules do not reach it
  CHECK_FALSE(has(p, "nested/n.tmp"));

  // Nothing changed: every decision from the cache, nothing asked, the same bytes.
  p = scan_both_ignoring(repo, cache);
  CHECK(cache.previous_valid);
  CHECK_FALSE(cache.rewalked);
  CHECK(cache.ignore_asked == 0);
  CHECK(cache.ignore_reused > 0);
  CHECK(cache.unchanged);
  CHECK(cache.next.empty());

  struct Change {
    const char* what;
    std::function<void()> apply;
    std::function<void(const std::vector<std::string>&)> expect;
    bool rule_change = true;  // an input of the rules changed: the walk is made again
  };
  const fs::path excludes = d / "excludes";
  d.write("excludes", "*.md\n");
  std::vector<Change> changes = {
      {"a .gitignore added in a subfolder", [&] { d.write("repo/src/.gitignore", "gen/\n"); },
       [](const auto& p) { CHECK_FALSE(has(p, "src/gen/x.cpp")); }},
      {"a .gitignore edited, the same size", [&] { d.write("repo/src/.gitignore", "a.c*\n"); },
       [](const auto& p) {
         CHECK(has(p, "src/gen/x.cpp"));
         CHECK_FALSE(has(p, "src/a.cpp"));
       }},
      {"a .gitignore removed", [&] { fs::remove(repo / "src/.gitignore"); },
       [](const auto& p) { CHECK(has(p, "src/a.cpp")); }},
      {"a folder included before, ignored", [&] { d.write("repo/.gitignore", "*.o\n/build/\nout/\n/logs/\n"); },
       [](const auto& p) { CHECK_FALSE(has(p, "logs/app.log")); }},
      {"a folder ignored before, included", [&] { d.write("repo/.gitignore", "*.o\nout/\n/logs/\n"); },
       [](const auto& p) { CHECK(has(p, "build/y.txt")); }},
      {"a new file a rule matches", [&] { d.write("repo/src/new.o", "obj\n"); },
       [](const auto& p) { CHECK_FALSE(has(p, "src/new.o")); }, false},
      {"info/exclude written", [&] { d.write("repo/.git/info/exclude", "notes.txt\n"); },
       [](const auto& p) { CHECK_FALSE(has(p, "notes.txt")); }},
      {"core.excludesfile set in the repository's config", [&] {
         d.write("repo/README.md", "readme\n");
         git(repo, {"config", "core.excludesfile", excludes.string()});
       },
       [](const auto& p) { CHECK_FALSE(has(p, "README.md")); }},
      {"the excludes file edited", [&] { d.write("excludes", "*.txt\n"); },
       [](const auto& p) {
         CHECK(has(p, "README.md"));
         CHECK_FALSE(has(p, "build/y.txt"));
       }},
      {"a nested repository's .gitignore edited", [&] { d.write("repo/nested/.gitignore", "*.h\n"); },
       [](const auto& p) {
         CHECK_FALSE(has(p, "nested/n.h"));
         CHECK(has(p, "nested/n.tmp"));
       }},
      {"a folder made a repository of its own", [&] { git(repo / "vendor", {"init", "-q"}); },
       [](const auto& p) { CHECK(has(p, "vendor/v.o")); }},
      {"a file turned into a folder of the same name", [&] {
         fs::remove(repo / "out");
         d.write("repo/out/z.txt", "z\n");
       },
       [](const auto& p) { CHECK_FALSE(has(p, "out/z.txt")); }, false},
      {"the folder turned back into a file", [&] {
         fs::remove_all(repo / "out");
         d.write("repo/out", "a file again\n");
       },
       [](const auto& p) { CHECK(has(p, "out")); }, false},
  };
  for (const auto& c : changes) {
    INFO(c.what);
    c.apply();
    auto now = scan_both_ignoring(repo, cache);
    c.expect(now);
    CHECK(cache.rewalked == c.rule_change);
    CHECK_FALSE(cache.unchanged);
    // The next scan takes every decision from the record this one wrote.
    scan_both_ignoring(repo, cache);
    CHECK_FALSE(cache.rewalked);
    CHECK(cache.ignore_asked == 0);
    CHECK(cache.unchanged);
  }
}

TEST_CASE("local tree: a rule file edited without a change of its stat is caught by the racy rule", "[source][local]") {
  t::TempDir d;
  fs::path repo = d / "repo";
  d.write("repo/.gitignore", "*.o\n");
  d.write("repo/a.o", "o\n");
  d.write("repo/b.p", "p\n");
  git(repo, {"init", "-q"});
  TreeStatCache recorded;
  REQUIRE(scan_local_tree(repo, "--source", &recorded));  // a.o left out, within the slack
  d.write("repo/.gitignore", "*.p\n");                      // the same size, the same second
  auto now = scan_local_tree(repo);
  REQUIRE(now);
  CHECK(paths(*now) == std::vector<std::string>{".gitignore", "a.o"});
  // The record made to say the .gitignore's stat is what it is now (a file system whose
  // timestamps did not move): only the racy rule can tell.
  TreeStatCache fresh;
  REQUIRE(scan_local_tree(repo, "--source", &fresh));
  auto [at, len] = gitignore_state_at(recorded.next, "");
  auto [now_at, now_len] = gitignore_state_at(fresh.next, "");
  std::string forged = recorded.next;
  forged.replace(at, len, fresh.next.substr(now_at, now_len));
  forged = resealed(forged);

  TreeStatCache racy;
  racy.previous = forged;
  auto r = scan_local_tree(repo, "--source", &racy);
  REQUIRE(r);
  CHECK(racy.previous_valid);
  CHECK(racy.rewalked);
  CHECK(paths(*r) == paths(*now));

  // The same record with a bound after the file's timestamps is trusted: the rule is what guards.
  TreeStatCache stale;
  stale.previous = trusted(forged);
  auto s = scan_local_tree(repo, "--source", &stale);
  REQUIRE(s);
  CHECK_FALSE(stale.rewalked);
  CHECK(paths(*s) != paths(*now));
}

TEST_CASE("local tree: a folder inside a repository keeps the decisions of the rules above it", "[source][local]") {
  t::TempDir d;
  fs::path repo = d / "repo";
  d.write("repo/.gitignore", "*.o\n");
  d.write("repo/sub/keep.cpp", "int k;\n");
  d.write("repo/sub/drop.o", "o\n");
  d.write("repo/sub/deeper/d.o", "o\n");
  git(repo, {"init", "-q"});
  TreeStatCache cache;
  CHECK(scan_both_ignoring(repo / "sub", cache) == std::vector<std::string>{"keep.cpp"});
  scan_both_ignoring(repo / "sub", cache);
  CHECK(cache.ignore_asked == 0);
  // The .gitignore above the scanned folder, edited: the walk is made again.
  d.write("repo/.gitignore", "*.cpp\n");
  CHECK(scan_both_ignoring(repo / "sub", cache) == std::vector<std::string>{"deeper/d.o", "drop.o"});
  CHECK(cache.rewalked);
  // Removed.
  fs::remove(repo / ".gitignore");
  CHECK(scan_both_ignoring(repo / "sub", cache).size() == 3);
  CHECK(cache.rewalked);
}
