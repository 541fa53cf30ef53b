// store/: cache dir choice, layout, atomic files, key locks (threads and processes), wheels,
// stamps/manifest, stats/clear/gc.
#include <catch2/catch.hpp>

#include <csignal>
#include <sys/stat.h>
#include <fstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "core/sha256.hpp"
#include "store/atomic_file.hpp"
#include "store/key_record.hpp"
#include "store/layout.hpp"
#include "store/lock.hpp"
#include "store/maintenance.hpp"
#include "store/tree_cache.hpp"
#include "store/wheels.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::store;
using archbuild::test::TempDir;
namespace fs = std::filesystem;

namespace {

GetEnv env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); ++it)
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

const std::string kKey = "0123456789abcdef0123456789abcdef";

}  // namespace

TEST_CASE("choose_cache_dir: --cache-dir > $ARCHBUILD_CACHE_DIR > $XDG_CACHE_HOME > ~/.cache", "[store]") {
  auto all = env_of({{"ARCHBUILD_CACHE_DIR", "/a"}, {"XDG_CACHE_HOME", "/x"}, {"HOME", "/h"}});
  auto c = choose_cache_dir(fs::path("/flag"), all);
  REQUIRE(c);
  CHECK(c->dir == "/flag");
  CHECK(c->origin == "--cache-dir");
  c = choose_cache_dir(std::nullopt, all);
  CHECK(c->dir == "/a");
  CHECK(c->origin == "$ARCHBUILD_CACHE_DIR");
  c = choose_cache_dir(std::nullopt, env_of({{"ARCHBUILD_CACHE_DIR", ""}, {"XDG_CACHE_HOME", "/x"}, {"HOME", "/h"}}));
  CHECK(c->dir == "/x/archbuild");
  c = choose_cache_dir(std::nullopt, env_of({{"XDG_CACHE_HOME", "relative"}, {"HOME", "/h"}}));
  CHECK(c->dir == "/h/.cache/archbuild");
  CHECK(c->origin == "$HOME");
  c = choose_cache_dir(fs::path("rel/dir"), env_of({}));
  CHECK(c->dir == fs::current_path() / "rel/dir");
  auto none = choose_cache_dir(std::nullopt, env_of({}));
  REQUIRE_FALSE(none);
  CHECK(none.error().exit == Exit::bad_input);
  CHECK(none.error().message.find("--cache-dir") != std::string::npos);
}

TEST_CASE("Layout: every path of the cache layout", "[store]") {
  Layout l("/c");
  CHECK(l.source_dir(kKey) == "/c/src/" + kKey);
  CHECK(l.build_dir(kKey) == "/c/build/" + kKey);
  CHECK(l.manifest(kKey) == "/c/keys/" + kKey + ".json");
  CHECK(l.key_lock(kKey) == "/c/keys/" + kKey + ".lock");
  CHECK(l.log(kKey, "build") == "/c/logs/" + kKey + "/build.log");
  CHECK(l.ccache_dir() == "/c/ccache");
  std::string sha(64, 'a');
  CHECK(l.wheel(sha) == "/c/wheels/" + sha + ".whl");
  auto m = l.git_mirror("https://git.example.org/pytorch/pytorch");
  CHECK(m.parent_path() == "/c/git");
  CHECK(m.extension() == ".git");
  CHECK(m.stem().string().size() == 24);
  CHECK(l.git_mirror("https://git.example.org/pytorch/pytorch.git") == m);
  CHECK(l.git_mirror("https://git.example.org/pytorch/pytorch/") == m);
  CHECK(l.git_mirror("https://git.example.org/pytorch/vision") != m);
  CHECK(l.git_mirror_lock("https://git.example.org/pytorch/pytorch").stem() == m.stem());
  // A local tree's slot: one place for every key of that folder and configuration.
  const std::string slot(24, 'e');
  CHECK(l.work_source(slot) == "/c/work/" + slot + "/src");
  CHECK(l.work_admission(slot) == "/c/work/" + slot + "/admission");
  CHECK(l.work_cmake_seed(slot) == "/c/work/" + slot + "/cmake-seed.cmake");
  CHECK(l.work_state(slot) == "/c/work/" + slot + "/state.json");
  CHECK(l.work_lock(slot) == "/c/work/" + slot + ".lock");
  CHECK_THROWS_AS(l.work_dir("../x"), Failure);
  CHECK_THROWS_AS(l.source_dir("../etc"), Failure);
  CHECK_THROWS_AS(l.log(kKey, "a/b"), Failure);
  CHECK_THROWS_AS(l.wheel("nothex"), Failure);
  TempDir tmp;
  Layout real(tmp / "cache");
  REQUIRE(real.create());
  CHECK(names_in(tmp / "cache") == std::vector<std::string>{"build", "ccache", "git", "keys", "logs", "src", "venvs", "wheels", "work"});
  // What is in the way of a cache directory is said as it is, not as mkdir's errno.
  std::filesystem::create_symlink("/nonexistent/archbuild-cache", tmp / "dangling");
  REQUIRE(::mkfifo((tmp / "fifo").c_str(), 0600) == 0);
  for (const auto& [name, what] : std::vector<std::pair<std::string, std::string>>{
           {"dangling", "is a symbolic link to nothing"}, {"fifo", "is a FIFO (named pipe)"}}) {
    auto r = Layout(tmp / name).create();
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == Exit::bad_input);
    CHECK_THAT(r.error().message, Catch::EndsWith(what));
  }
}

TEST_CASE("AtomicFile: readers see the old file or the new one, no temp left", "[store]") {
  TempDir tmp;
  auto target = tmp / "d/file.json";
  REQUIRE(write_file_atomic(target, "old"));
  {
    auto f = AtomicFile::open(target);
    REQUIRE(f);
    REQUIRE(f->write("new content"));
    CHECK(test::read_file(target) == "old");  // not yet committed
    CHECK(f->temp_path().parent_path() == target.parent_path());
    REQUIRE(f->commit());
  }
  CHECK(test::read_file(target) == "new content");
  {
    auto f = AtomicFile::open(target);
    REQUIRE(f->write("abandoned"));
  }  // destroyed without commit
  CHECK(test::read_file(target) == "new content");
  CHECK(names_in(tmp / "d") == std::vector<std::string>{"file.json"});
}

TEST_CASE("AtomicFile: a process killed mid-write leaves the target intact", "[store]") {
  TempDir tmp;
  auto target = tmp / "manifest.json";
  REQUIRE(write_file_atomic(target, "complete"));
  pid_t pid = fork();
  if (pid == 0) {
    auto f = AtomicFile::open(target);
    if (f) (void)f->write("half-writ");
    ::kill(::getpid(), SIGKILL);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  CHECK(test::read_file(target) == "complete");
  // The orphaned temp file is there (named so gc can find it).
  auto names = names_in(tmp.path());
  REQUIRE(names.size() == 2);
  CHECK(names[0].rfind(".manifest.json.tmp-", 0) == 0);
}

TEST_CASE("FileLock: between threads — try-lock fails, a waiter is told and gets it after release", "[store]") {
  TempDir tmp;
  Layout layout(tmp / "cache");
  auto first = lock_key(layout, kKey);
  REQUIRE(first);
  auto busy = try_lock_key(layout, kKey);
  REQUIRE(busy);
  CHECK_FALSE(busy->has_value());
  std::string told;
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto second = lock_key(layout, kKey, [&](const std::string& msg) { told = msg; });
    got = second.ok() && second->held();
  });
  while (told.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK_FALSE(got);
  CHECK(told == "waiting for another archbuild (pid " + std::to_string(::getpid()) +
                    ") building the same key " + kKey);
  first->release();
  waiter.join();
  CHECK(got);
  auto free_again = try_lock_key(layout, kKey);
  CHECK(free_again->has_value());
}

TEST_CASE("FileLock: between processes, and it dies with a killed holder", "[store]") {
  TempDir tmp;
  Layout layout(tmp / "cache");
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    auto l = lock_key(layout, kKey);
    char c = l ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    pause();  // hold until killed
    _exit(0);
  }
  char c = 0;
  REQUIRE(read(ready[0], &c, 1) == 1);
  REQUIRE(c == 'y');
  auto busy = try_lock_key(layout, kKey);
  REQUIRE(busy);
  CHECK_FALSE(busy->has_value());
  CHECK(lock_holder(layout.key_lock(kKey)) == "pid " + std::to_string(pid));
  // Interruptible while waiting.
  int polls = 0;
  auto cancelled = lock_key(layout, kKey, {}, [&] { return ++polls > 3; });
  REQUIRE_FALSE(cancelled);
  CHECK(cancelled.error().message.find("interrupted while waiting") != std::string::npos);
  // kill -9 of the holder frees the lock.
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  auto mine = lock_key(layout, kKey);
  REQUIRE(mine);
  CHECK(mine->held());
  close(ready[0]);
  close(ready[1]);
}

TEST_CASE("Wheels: put is content addressed, a corrupted wheel is discarded and reported", "[store]") {
  TempDir tmp;
  Layout layout(tmp / "cache");
  auto built = tmp.write("dist/minitorch-0.1.0-cp311-cp311-linux_x86_64.whl", std::string(100000, 'w') + "end");
  auto stored = put_wheel(layout, built);
  REQUIRE(stored);
  CHECK(stored->sha256 == *sha256_file_hex(built));
  CHECK(stored->path == layout.wheel(stored->sha256));
  CHECK(stored->size == 100003);
  CHECK(test::read_file(stored->path) == test::read_file(built));
  CHECK(names_in(layout.wheels_dir()) == std::vector<std::string>{stored->sha256 + ".whl"});
  // Storing the same content again is harmless.
  REQUIRE(put_wheel(layout, built));

  auto ok = get_wheel(layout, stored->sha256);
  CHECK(ok.state == WheelState::ok);
  CHECK(ok.path == stored->path);

  {
    std::fstream f(stored->path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(500);
    f.put('X');
  }
  auto bad = get_wheel(layout, stored->sha256);
  CHECK(bad.state == WheelState::corrupted);
  CHECK(bad.actual_sha256 != stored->sha256);
  CHECK(bad.message.find("corrupted") != std::string::npos);
  CHECK_FALSE(fs::exists(stored->path));
  CHECK(get_wheel(layout, stored->sha256).state == WheelState::missing);
  CHECK_FALSE(put_wheel(layout, tmp / "no-such.whl"));
}

TEST_CASE("named_wheel: the stored wheel under its own name, made once", "[store]") {
  TempDir tmp;
  Layout layout(tmp / "cache");
  auto stored = put_wheel(layout, tmp.write("dist/t.whl", "torch wheel"));
  REQUIRE(stored);
  const std::string name = "minitorch-0.1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl";  // '+': a local version
  auto named = named_wheel(layout, stored->sha256, name);
  REQUIRE(named);
  CHECK(*named == layout.named_wheel(stored->sha256, name));
  CHECK(named->filename() == name);
  CHECK(test::read_file(*named) == "torch wheel");
  CHECK(fs::equivalent(*named, stored->path));  // a hard link, not a second copy
  auto again = named_wheel(layout, stored->sha256, name);
  REQUIRE(again);
  CHECK(*again == *named);
  CHECK(names_in(named->parent_path()) == std::vector<std::string>{name});  // no temp left
  CHECK_FALSE(named_wheel(layout, std::string(64, 'f'), name));  // not stored
  CHECK_THROWS_AS(layout.named_wheel(stored->sha256, "../x.whl"), Failure);
}

TEST_CASE("copy_to_out: complete file or nothing", "[store]") {
  TempDir tmp;
  auto wheel = tmp.write("w.whl", "wheel bytes");
  auto out = copy_to_out(wheel, tmp / "out/sub", "pkg-1.0-py3-none-any.whl");
  REQUIRE(out);
  CHECK(*out == tmp / "out/sub/pkg-1.0-py3-none-any.whl");
  CHECK(test::read_file(*out) == "wheel bytes");
  tmp.write("w2.whl", "newer bytes");
  REQUIRE(copy_to_out(tmp / "w2.whl", tmp / "out/sub", "pkg-1.0-py3-none-any.whl"));
  CHECK(test::read_file(*out) == "newer bytes");
  auto missing = copy_to_out(tmp / "absent.whl", tmp / "out/sub", "other.whl");
  CHECK_FALSE(missing);
  CHECK(names_in(tmp / "out/sub") == std::vector<std::string>{"pkg-1.0-py3-none-any.whl"});
  CHECK_FALSE(copy_to_out(wheel, tmp / "out", "../escape.whl"));
}

// Exit 2 before any build for every --out that cannot take the wheel (root ignores permission
// bits, so /proc stands in for a directory nobody can write into).
TEST_CASE("check_out_dir: an --out that cannot take the wheel is bad input, said before the build", "[store]") {
  TempDir tmp;
  REQUIRE(check_out_dir(tmp / "new" / "dist"));  // can be made: not made yet (a failed build leaves none)
  CHECK_FALSE(fs::exists(tmp / "new"));
  CHECK(names_in(tmp.path()).empty());            // the probe file is gone
  fs::create_directories(tmp / "new" / "dist");
  REQUIRE(check_out_dir(tmp / "new" / "dist"));    // and an existing one is fine
  CHECK(names_in(tmp / "new" / "dist").empty());
  auto file = tmp.write("a-file", "x");
  // What would otherwise fail only when the wheel is copied there, after the build, is said now
  // by what it is (docs/commands.md: a link to nothing, a loop of links, a path too long, a FIFO).
  fs::create_symlink(tmp / "nothing" / "here", tmp / "dangling");
  fs::create_symlink(tmp / "loop-b", tmp / "loop-a");
  fs::create_symlink(tmp / "loop-a", tmp / "loop-b");
  REQUIRE(::mkfifo((tmp / "fifo").c_str(), 0644) == 0);
  fs::path deep = tmp.path();
  for (char c = 'a'; deep.string().size() < 4096; ++c) deep /= std::string(250, c);
  struct Case {
    fs::path out;
    std::string says;
  };
  const std::vector<Case> cases = {
      {file, "is a regular file, not a directory"},  // --out naming a regular file
      {file / "sub", "cannot be made"},         // below a regular file
      {"/proc/1", "cannot write a file there"},  // read-only for everyone, root included
      {"/proc/self/fdinfo", "cannot write a file there"},
      {tmp / "dangling", "is a symbolic link to nothing"},
      {tmp / "dangling" / "sub", "is a symbolic link to nothing"},  // the folder on the way
      {tmp / "loop-a", "is a loop of symbolic links"},
      {tmp / "loop-a" / "sub", "is a loop of symbolic links"},
      {tmp / "fifo", "is a FIFO (named pipe), not a directory"},
      {tmp / "fifo" / "sub", "is a FIFO (named pipe), not a directory"},
      {tmp / "new" / std::string(300, 'y'), "too long"},  // a name over NAME_MAX, not made yet
      {deep, "too long"},                                  // the whole over PATH_MAX
  };
  for (const auto& c : cases) {
    INFO(c.out);
    auto r = check_out_dir(c.out);
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == Exit::bad_input);
    CHECK(r.error().message.find(c.says) != std::string::npos);
    CHECK(r.error().message.find('\n') == std::string::npos);
    if (c.out.string().size() < 1024)
      CHECK(r.error().message.find("\"" + c.out.string() + "\"") != std::string::npos);  // quoted
  }
  CHECK(fs::is_fifo(tmp / "fifo"));
  // Full: more than the file system has free.
  auto full = check_out_dir(tmp / "new" / "dist", std::uintmax_t{1} << 62);
  REQUIRE_FALSE(full);
  CHECK(full.error().exit == Exit::bad_input);
  CHECK(full.error().message.find("full") != std::string::npos);
}

TEST_CASE("choose_cache_dir: a cache path too long for a build is refused up front", "[store]") {
  auto none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  std::string ok_dir = "/" + std::string(2990, 'c');
  CHECK(choose_cache_dir(fs::path(ok_dir), none));
  std::string long_dir = "/" + std::string(3600, 'c');
  for (const auto& getenv : std::vector<GetEnv>{none, [&](const std::string& n) -> std::optional<std::string> {
                                                  if (n == "ARCHBUILD_CACHE_DIR") return long_dir;
                                                  return std::nullopt;
                                                }}) {
    auto r = getenv("ARCHBUILD_CACHE_DIR") ? choose_cache_dir(std::nullopt, getenv) : choose_cache_dir(fs::path(long_dir), getenv);
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == Exit::bad_input);
    CHECK(r.error().message.find("3601 bytes") != std::string::npos);
    CHECK(r.error().message.size() < 500);  // the path is cut, not echoed whole
  }
}

TEST_CASE("KeyRecord: a damaged manifest names a command that exists, a damaged wheel entry is said", "[store]") {
  TempDir tmp;
  Layout layout(tmp / "cache");
  REQUIRE(layout.create());
  KeyRecord rec(layout, kKey);
  std::ofstream(layout.manifest(kKey)) << "{ not json";
  auto r = rec.read();
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("cache clear") == std::string::npos);  // no such command
  CHECK(r.error().message.find("rm -- \"" + layout.manifest(kKey).string() + "\"") != std::string::npos);
  // Entries that name no usable wheel: each is said (wheel() alone says "no wheel").
  const std::vector<std::pair<nlohmann::json, std::string>> damaged = {
      {"a string", "not an object"},
      {{{"sha256", "xyz"}, {"filename", "w.whl"}}, "sha256"},
      {{{"sha256", 42}, {"filename", "w.whl"}}, "sha256"},
      {{{"sha256", std::string(64, 'a')}}, "filename"},
      {{{"sha256", std::string(64, 'a')}, {"filename", ""}}, "filename"},
  };
  for (const auto& [entry, says] : damaged) {
    INFO(entry.dump());
    std::ofstream(layout.manifest(kKey)) << nlohmann::json{{"wheel", entry}}.dump();
    CHECK_FALSE(rec.wheel()->has_value());
    auto d = rec.wheel_damage();
    REQUIRE(d);
    CHECK(d->find(says) != std::string::npos);
  }
  std::ofstream(layout.manifest(kKey)) << nlohmann::json{{"wheel", {{"sha256", std::string(64, 'a')}, {"filename", "w.whl"}}}}.dump();
  CHECK(rec.wheel()->has_value());
  CHECK_FALSE(rec.wheel_damage());
  std::ofstream(layout.manifest(kKey)) << "{}";
  CHECK_FALSE(rec.wheel_damage());
}

TEST_CASE("KeyRecord: stamps resume at the failed stage, wheel, manifest fields kept", "[store]") {
  TempDir tmp;
  Layout layout(tmp / "cache");
  KeyRecord rec(layout, kKey);
  CHECK_FALSE(rec.exists());
  CHECK(*rec.read() == nlohmann::json::object());
  const std::vector<std::string> order{"fetch", "configure", "build", "package"};
  CHECK(*rec.resume_point(order) == "fetch");
  REQUIRE(rec.update([](nlohmann::json& d) { d["plan"] = {{"arch_list", "9.0"}}; }));
  REQUIRE(rec.mark_done("fetch", {{"commit", "abc"}}));
  REQUIRE(rec.mark_done("configure"));
  CHECK(*rec.done("fetch"));
  CHECK_FALSE(*rec.done("build"));
  CHECK(*rec.resume_point(order) == "build");
  auto doc = *rec.read();
  CHECK(doc["key"] == kKey);
  CHECK(doc["plan"]["arch_list"] == "9.0");
  CHECK(doc["stages"]["fetch"]["commit"] == "abc");
  CHECK(doc["stages"]["fetch"]["at"].get<std::string>().size() == 20);
  REQUIRE(rec.mark_done("build"));
  REQUIRE(rec.mark_done("package"));
  CHECK_FALSE(rec.resume_point(order)->has_value());
  REQUIRE(rec.clear_stage("package"));
  CHECK(*rec.resume_point(order) == "package");

  CHECK_FALSE(rec.wheel()->has_value());
  StoredWheel sw{std::string(64, 'b'), layout.wheel(std::string(64, 'b')), 42};
  REQUIRE(rec.set_wheel(sw, "minitorch-0.1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl"));
  auto w = rec.wheel();
  REQUIRE(w->has_value());
  CHECK((*w)->sha256 == sw.sha256);
  CHECK((*w)->size == 42);
  CHECK((*w)->filename.find("+cu130.sm90") != std::string::npos);
  CHECK(names_in(layout.keys_dir()) == std::vector<std::string>{kKey + ".json"});

  tmp.write("cache/keys/" + kKey + ".json", "{not json");
  auto broken = rec.read();
  REQUIRE_FALSE(broken);
  CHECK(broken.error().message.find(kKey + ".json") != std::string::npos);
  CHECK_FALSE(rec.mark_done("fetch"));
}

TEST_CASE("stats, gc and clear", "[store]") {
  TempDir tmp;
  Layout layout(tmp / "cache");
  REQUIRE(layout.create());
  const std::string done_key = "aaaa1111", old_key = "bbbb2222", busy_key = "cccc3333";
  // A finished key: wheel + manifest + trees.
  auto stored = put_wheel(layout, tmp.write("w.whl", "finished wheel"));
  REQUIRE(stored);
  KeyRecord done_rec(layout, done_key);
  REQUIRE(done_rec.mark_done("fetch"));
  REQUIRE(done_rec.set_wheel(*stored, "x-1.0-py3-none-any.whl"));
  tmp.write("cache/src/" + done_key + "/setup.py", "src");
  tmp.write("cache/build/" + done_key + "/build.ninja", "build");
  tmp.write("cache/logs/" + done_key + "/build.log", "log");
  // An unfinished, old key.
  REQUIRE(KeyRecord(layout, old_key).mark_done("fetch"));
  tmp.write("cache/src/" + old_key + "/setup.py", "src");
  // A key being built right now.
  tmp.write("cache/build/" + busy_key + "/build.ninja", "busy");
  auto busy_lock = lock_key(layout, busy_key);
  REQUIRE(busy_lock);
  // An orphan wheel and temp leftovers of killed runs.
  tmp.write("cache/wheels/" + std::string(64, 'e') + ".whl", "orphan");
  tmp.write("cache/wheels/.incoming.whl.tmp-abcdef", "partial");
  tmp.write("cache/src/." + old_key + ".tmp-xyz/half", "half");
  tmp.write("cache/git/0123.git/HEAD", "ref: refs/heads/main\n");
  // trees/: the last checkout of a local folder (the unfinished old key's, whose checkout the
  // first gc keeps; and the finished key's, whose checkout it removes), a folder's stat cache.
  REQUIRE(write_last_checkout(layout, "/work/mine", old_key));
  REQUIRE(write_last_checkout(layout, "/work/theirs", done_key));
  REQUIRE(write_tree_stat_cache(layout, "/work/mine", "cache bytes"));
  tmp.write("cache/trees/.x.stat.tmp-abcdef", "partial");
  // work/: a local tree's slot (what the next key of its folder continues), and one a build holds.
  const std::string slot(24, 'a'), held_slot(24, 'b');
  REQUIRE(write_work_state(layout, slot, "{}"));
  tmp.write("cache/work/" + slot + "/src/build/build.ninja", "");
  tmp.write("cache/work/" + held_slot + "/src/x", "");
  auto slot_lock = FileLock::acquire(layout.work_lock(held_slot));
  REQUIRE(slot_lock);
  REQUIRE(write_last_checkout(layout, "/work/slotted", slot));  // a .last naming a slot's place

  auto s = stats(layout);
  REQUIRE(s);
  CHECK(s->keys == 2);
  CHECK(s->complete_keys == 1);
  auto area = [&](const std::string& n) {
    for (const auto& a : s->areas)
      if (a.name == n) return a;
    return AreaStats{};
  };
  CHECK(area("wheels").entries == 2);
  CHECK(area("src").entries == 2);
  CHECK(area("git").entries == 1);
  CHECK(area("work").entries == 2);  // the two slots (their lock files not counted)
  CHECK(s->total_bytes > 0);

  // gc "now": nothing unfinished is old yet, temps are young.
  auto g1 = gc(layout);
  REQUIRE(g1);
  CHECK_FALSE(fs::exists(layout.source_dir(done_key)));
  CHECK_FALSE(fs::exists(layout.build_dir(done_key)));
  CHECK(fs::exists(layout.log_dir(done_key)));
  CHECK(fs::exists(stored->path));
  CHECK(*done_rec.resume_point({"fetch"}) == "fetch");  // stamps cleared with the trees
  CHECK(done_rec.wheel()->has_value());
  CHECK(fs::exists(layout.source_dir(old_key)));
  CHECK(fs::exists(layout.build_dir(busy_key)));
  CHECK(fs::exists(layout.wheels_dir() / ".incoming.whl.tmp-abcdef"));
  CHECK(g1->bytes_freed >= 8);
  CHECK(read_last_checkout(layout, "/work/mine") == old_key);  // its checkout is there
  CHECK_FALSE(fs::exists(layout.tree_last_checkout("/work/theirs")));  // its checkout went
  CHECK(fs::exists(layout.tree_stat_cache("/work/mine")));
  CHECK(fs::exists(layout.trees_dir() / ".x.stat.tmp-abcdef"));
  CHECK(fs::exists(layout.work_source(slot)));
  CHECK(read_last_checkout(layout, "/work/slotted") == slot);  // its place is there

  // gc a month later: the old unfinished key, the orphan wheel and the temps go; the busy key stays.
  GcOptions later;
  later.now = fs::file_time_type::clock::now() + std::chrono::hours(24 * 30);
  auto g2 = gc(layout, later);
  REQUIRE(g2);
  CHECK_FALSE(fs::exists(layout.source_dir(old_key)));
  CHECK_FALSE(fs::exists(layout.manifest(old_key)));
  CHECK_FALSE(fs::exists(layout.wheel(std::string(64, 'e'))));
  CHECK_FALSE(fs::exists(layout.wheels_dir() / ".incoming.whl.tmp-abcdef"));
  CHECK_FALSE(fs::exists(layout.sources_dir() / ("." + old_key + ".tmp-xyz")));
  CHECK(fs::exists(stored->path));
  CHECK(fs::exists(layout.build_dir(busy_key)));
  CHECK(fs::exists(layout.git_dir() / "0123.git"));
  CHECK_FALSE(fs::exists(layout.tree_last_checkout("/work/mine")));
  CHECK_FALSE(fs::exists(layout.tree_stat_cache("/work/mine")));  // untouched for a month
  CHECK_FALSE(fs::exists(layout.trees_dir() / ".x.stat.tmp-abcdef"));
  CHECK_FALSE(fs::exists(layout.work_dir(slot)));       // untouched for a month
  CHECK(fs::exists(layout.work_source(held_slot)));     // a build holds it

  // clear: everything except what the running build holds (and lock files).
  auto c = clear(layout);
  REQUIRE(c);
  CHECK(fs::exists(layout.build_dir(busy_key)));
  CHECK_FALSE(fs::exists(stored->path));
  CHECK_FALSE(fs::exists(layout.manifest(done_key)));
  CHECK_FALSE(fs::exists(layout.git_dir() / "0123.git"));
  REQUIRE(c->skipped.size() >= 1);
  CHECK(c->skipped[0] == "key " + busy_key + ": being built by pid " + std::to_string(getpid()));
  CHECK(fs::exists(layout.work_source(held_slot)));
  busy_lock->release();
  slot_lock->release();
  REQUIRE(clear(layout));
  CHECK_FALSE(fs::exists(layout.build_dir(busy_key)));
  CHECK_FALSE(fs::exists(layout.work_dir(held_slot)));
}

TEST_CASE("hostile/stat cache file: read only as a bounded regular file, written atomically", "[store]") {
  archbuild::test::TempDir tmp;
  archbuild::store::Layout layout(tmp / "cache");
  const std::filesystem::path root = "/some/tree";
  const auto file = layout.tree_stat_cache(root);
  CHECK(file.parent_path() == tmp / "cache/trees");
  CHECK(file.filename().string().size() == 24 + 5);
  CHECK(layout.tree_stat_cache("/some/other") != file);
  CHECK_FALSE(archbuild::store::read_tree_stat_cache(layout, root));  // none yet
  REQUIRE(archbuild::store::write_tree_stat_cache(layout, root, std::string("a\0b", 3)));
  CHECK(archbuild::store::read_tree_stat_cache(layout, root) == std::string("a\0b", 3));
  // A FIFO, a folder, something too large: no cache, at once.
  std::filesystem::remove(file);
  REQUIRE(::mkfifo(file.c_str(), 0644) == 0);
  CHECK_FALSE(archbuild::store::read_tree_stat_cache(layout, root));
  std::filesystem::remove(file);
  std::filesystem::create_directories(file);
  CHECK_FALSE(archbuild::store::read_tree_stat_cache(layout, root));
  std::filesystem::remove(file);
  {
    std::ofstream big(file, std::ios::binary);
    big.seekp((64 << 20) + 1);
    big.put('x');
  }
  CHECK_FALSE(archbuild::store::read_tree_stat_cache(layout, root));
}
