// source/local: a local tree built as it is — what belongs to it (git's ignore rules, submodules,
// links), its content hash (an edit changes it, a move does not), and the copy archbuild builds in.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>

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
