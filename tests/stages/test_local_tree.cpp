// A local tree's shape and its slot's earlier build (stages/local_tree.hpp): what
// plan::decide_build_start compares; and the copy into a slot that keeps an incremental build's
// build tree and the mtimes of unchanged files.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "source/local.hpp"
#include "stages/local_tree.hpp"
#include "store/key_record.hpp"
#include "store/layout.hpp"
#include "store/tree_cache.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
namespace fs = std::filesystem;

namespace {

source::LocalTree scan(const fs::path& dir) {
  auto t = source::scan_local_tree(dir);
  REQUIRE(t);
  return *t;
}

std::int64_t mtime_ns(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

TEST_CASE("tree shape: an edit keeps it, an added file or a mode changes it, configuration files by digest", "[stages]") {
  test::TempDir tmp;
  tmp.write("tree/CMakeLists.txt", "project(x)\n");
  tmp.write("tree/csrc/k.cu", "__global__ void k() {}\n");
  auto a = stages::tree_shape(scan(tmp / "tree"));
  CHECK(a.config_files.size() == 1);
  CHECK(a.config_files.count("CMakeLists.txt"));
  tmp.write("tree/csrc/k.cu", "__global__ void k() { }\n");  // an edit: the same shape
  auto edited = stages::tree_shape(scan(tmp / "tree"));
  CHECK(edited.hash == a.hash);
  CHECK(edited.config_files == a.config_files);
  tmp.write("tree/CMakeLists.txt", "project(y)\n");  // a configuration file: its digest moves
  auto reconfigured = stages::tree_shape(scan(tmp / "tree"));
  CHECK(reconfigured.hash == a.hash);
  CHECK(reconfigured.config_files != a.config_files);
  tmp.write("tree/csrc/new.h", "");
  auto added = stages::tree_shape(scan(tmp / "tree"));
  CHECK(added.hash != a.hash);
  fs::remove(tmp / "tree/csrc/new.h");
  fs::permissions(tmp / "tree/csrc/k.cu", fs::perms::owner_exec, fs::perm_options::add);
  CHECK(stages::tree_shape(scan(tmp / "tree")).hash != a.hash);
}

TEST_CASE("the slot's earlier build: its state's key, shape, and whether that key configured", "[stages]") {
  test::TempDir tmp;
  store::Layout layout(tmp / "cache");
  REQUIRE(layout.create());
  const std::string slot(24, 'c'), key(64, 'd');
  CHECK_FALSE(stages::earlier_build(layout, slot));  // none yet
  tmp.write("tree/setup.py", "");
  auto shape = stages::tree_shape(scan(tmp / "tree"));
  REQUIRE(store::write_work_state(layout, slot, stages::work_state_json(key, shape)));
  auto e = stages::earlier_build(layout, slot);
  REQUIRE(e);
  CHECK(e->key == key);
  CHECK(e->shape_hash == shape.hash);
  CHECK(e->config_files == shape.config_files);
  CHECK_FALSE(e->configured);  // no record, no configure stamp
  store::KeyRecord record(layout, key);
  REQUIRE(record.mark_done("fetch"));
  REQUIRE(record.mark_done("configure", {{"launchers", nullptr}}));
  CHECK(stages::earlier_build(layout, slot)->configured);
  // A state that is not the one written: no earlier build (the plan builds clean).
  REQUIRE(store::write_work_state(layout, slot, "{\"key\": \"../x\", \"shape_hash\": \"\", \"config_files\": {}}"));
  CHECK_FALSE(stages::earlier_build(layout, slot));
  REQUIRE(store::write_work_state(layout, slot, "not json"));
  CHECK_FALSE(stages::earlier_build(layout, slot));
}

TEST_CASE("a copy into a slot keeps the build tree it is told to and the mtimes of unchanged files", "[stages]") {
  test::TempDir tmp;
  tmp.write("tree/a.cpp", "int a;\n");
  tmp.write("tree/b.cpp", "int b;\n");
  fs::path slot = tmp / "slot";
  source::CopyReuse first;
  auto tree = scan(tmp / "tree");
  REQUIRE(source::copy_local_tree(tree, slot, {}, &first));
  tmp.write("slot/build/a.o", "object");  // what the build wrote
  tmp.write("slot/a.egg-info/PKG-INFO", "x");
  const auto a_before = mtime_ns(slot / "a.cpp");

  tmp.write("tree/b.cpp", "int b2;\n");
  source::CopyReuse again;
  again.previous = slot;
  again.cache.previous = first.cache.next;
  again.cache.recorded_root = fs::canonical(slot);
  again.keep = {"build"};
  auto edited = scan(tmp / "tree");
  REQUIRE(source::copy_local_tree(edited, slot, {}, &again));
  CHECK(again.reused);
  CHECK(again.written == 1);
  CHECK(fs::exists(slot / "build/a.o"));             // the build tree, kept
  CHECK_FALSE(fs::exists(slot / "a.egg-info"));      // anything else the build wrote, removed
  CHECK(mtime_ns(slot / "a.cpp") == a_before);       // unchanged: ninja leaves its object
  CHECK(test::read_file(slot / "b.cpp") == "int b2;\n");

  // Without `keep` (a clean build), the build tree goes too.
  source::CopyReuse clean;
  clean.previous = slot;
  clean.cache.previous = again.cache.next;
  clean.cache.recorded_root = fs::canonical(slot);
  REQUIRE(source::copy_local_tree(edited, slot, {}, &clean));
  CHECK_FALSE(fs::exists(slot / "build"));
}

TEST_CASE("a local tree's stat cache is written again only when what it would hold changed", "[stages]") {
  test::TempDir tmp;
  store::Layout layout(tmp / "cache");
  REQUIRE(layout.create());
  tmp.write("tree/a.cpp", "int a;\n");
  tmp.write("tree/sub/b.cpp", "int b;\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // older than the slack: trusted next time
  source::TreeStatCache stats;
  REQUIRE(stages::scan_local_tree_cached(&layout, tmp / "tree", "--source", {}, &stats));
  const fs::path file = layout.tree_stat_cache(fs::canonical(tmp / "tree"));
  REQUIRE(fs::is_regular_file(file));
  struct stat first {};
  REQUIRE(::stat(file.c_str(), &first) == 0);

  // Nothing changed: the same bytes, not written (the same file, the same mtime).
  REQUIRE(stages::scan_local_tree_cached(&layout, tmp / "tree", "--source", {}, &stats));
  CHECK(stats.previous_valid);
  CHECK(stats.unchanged);
  struct stat kept {};
  REQUIRE(::stat(file.c_str(), &kept) == 0);
  CHECK(kept.st_ino == first.st_ino);
  CHECK(mtime_ns(file) == static_cast<std::int64_t>(first.st_mtim.tv_sec) * 1000000000 + first.st_mtim.tv_nsec);

  // A new file: written again (atomically: another file in its place), and used by the next scan.
  tmp.write("tree/sub/c.cpp", "int c;\n");
  REQUIRE(stages::scan_local_tree_cached(&layout, tmp / "tree", "--source", {}, &stats));
  CHECK_FALSE(stats.unchanged);
  struct stat rewritten {};
  REQUIRE(::stat(file.c_str(), &rewritten) == 0);
  CHECK(rewritten.st_ino != first.st_ino);
  REQUIRE(stages::scan_local_tree_cached(&layout, tmp / "tree", "--source", {}, &stats));
  CHECK(stats.previous_valid);
  CHECK(stats.reused >= 2);
}
