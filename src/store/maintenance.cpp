#include "store/maintenance.hpp"

#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "store/atomic_file.hpp"
#include "store/key_record.hpp"
#include "store/lock.hpp"
#include "store/tree_cache.hpp"

namespace fs = std::filesystem;

namespace archbuild::store {

std::uintmax_t disk_usage(const fs::path& p) {
  std::error_code ec;
  auto st = fs::symlink_status(p, ec);
  if (ec) return 0;
  if (fs::is_regular_file(st)) return fs::file_size(p, ec);
  if (!fs::is_directory(st)) return 0;
  std::uintmax_t total = 0;
  for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code e2;
    if (it->is_regular_file(e2) && !it->is_symlink(e2)) total += it->file_size(e2);
  }
  return total;
}

namespace {

bool is_temp_name(const std::string& name) { return !name.empty() && name[0] == '.' && name.find(".tmp-") != std::string::npos; }

std::vector<fs::directory_entry> entries(const fs::path& dir) {
  std::vector<fs::directory_entry> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    out.push_back(*it);
  return out;
}

// Every key the cache knows of: manifests, trees and logs.
std::set<std::string> all_keys(const Layout& layout) {
  std::set<std::string> keys;
  for (const auto& e : entries(layout.keys_dir())) {
    auto name = e.path().filename().string();
    if (e.path().extension() == ".json" && !is_temp_name(name)) keys.insert(e.path().stem().string());
  }
  for (const auto& dir : {layout.sources_dir(), layout.builds_dir(), layout.logs_dir()})
    for (const auto& e : entries(dir)) {
      auto name = e.path().filename().string();
      if (Layout::valid_name(name)) keys.insert(name);
    }
  return keys;
}

void remove_path(const fs::path& p, Removal& r) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(p, ec))) return;
  auto bytes = disk_usage(p);
  fs::remove_all(p, ec);
  if (!ec) {
    r.removed.push_back(p);
    r.bytes_freed += bytes;
  } else {
    r.skipped.push_back(fmt::format("{}: {}", p.string(), ec.message()));
  }
}

std::optional<fs::file_time_type> mtime(const fs::path& p) {
  std::error_code ec;
  auto t = fs::last_write_time(p, ec);
  if (ec) return std::nullopt;
  return t;
}

// The wheels that manifests refer to.
std::set<std::string> referenced_wheels(const Layout& layout, const std::set<std::string>& keys) {
  std::set<std::string> shas;
  for (const auto& key : keys) {
    KeyRecord rec(layout, key);
    if (auto w = rec.wheel(); w && *w) shas.insert((*w)->sha256);
  }
  return shas;
}

// The key a temp entry in src/ or build/ belongs to (".<key>.tmp-XXXXXX").
std::string temp_owner(const std::string& name) {
  auto pos = name.find(".tmp-");
  return pos == std::string::npos || pos < 2 ? std::string() : name.substr(1, pos - 1);
}

}  // namespace

Result<CacheStats> stats(const Layout& layout) {
  CacheStats s;
  s.root = layout.root();
  const std::pair<const char*, fs::path> areas[] = {
      {"git", layout.git_dir()},       {"src", layout.sources_dir()}, {"build", layout.builds_dir()},
      {"wheels", layout.wheels_dir()}, {"keys", layout.keys_dir()},   {"logs", layout.logs_dir()},
      {"ccache", layout.ccache_dir()}, {"work", layout.root() / "work"}};
  for (const auto& [name, path] : areas) {
    AreaStats a;
    a.name = name;
    a.path = path;
    a.bytes = disk_usage(path);
    for (const auto& e : entries(path)) {
      auto n = e.path().filename().string();
      if (e.path().extension() == ".lock" || is_temp_name(n)) continue;
      ++a.entries;
    }
    s.total_bytes += a.bytes;
    s.areas.push_back(a);
  }
  for (const auto& e : entries(layout.keys_dir())) {
    if (e.path().extension() != ".json" || is_temp_name(e.path().filename().string())) continue;
    ++s.keys;
    KeyRecord rec(layout, e.path().stem().string());
    if (auto w = rec.wheel(); w && *w) ++s.complete_keys;
  }
  return s;
}

namespace {

// The key's lock if no build holds it (held while the caller removes the key's files); a busy
// key is noted as skipped, with its holder, and added to `busy`.
Result<std::optional<FileLock>> lock_idle_key(const Layout& layout, const std::string& key, Removal& r,
                                              std::set<std::string>& busy) {
  auto lock = try_lock_key(layout, key);
  if (!lock) return lock.error();
  if (!*lock) {
    busy.insert(key);
    auto holder = lock_holder(layout.key_lock(key));
    r.skipped.push_back(fmt::format("key {}: being built{}", key, holder.empty() ? "" : " by " + holder));
  }
  return lock;
}

// Everything a key owns but its wheel (the store keeps wheels by hash).
void remove_key(const Layout& layout, const std::string& key, Removal& r) {
  remove_path(layout.source_dir(key), r);
  remove_path(layout.build_dir(key), r);
  remove_path(layout.log_dir(key), r);
  remove_path(layout.manifest(key), r);
}

}  // namespace

namespace {

// work/<slot>/ folders whose lock no build holds, their state (else the folder) older than `before`.
void remove_idle_slots(const Layout& layout, Removal& r, std::optional<fs::file_time_type> before) {
  for (const auto& e : entries(layout.root() / "work")) {
    const auto name = e.path().filename().string();
    std::error_code ec;
    if (!Layout::valid_name(name) || !fs::is_directory(fs::symlink_status(e.path(), ec))) continue;
    auto lock = FileLock::try_acquire(layout.work_lock(name));
    if (!lock || !*lock) {
      r.skipped.push_back(fmt::format("{}: a build holds it", e.path().string()));
      continue;
    }
    if (before) {
      auto t = mtime(layout.work_state(name));
      if (!t) t = mtime(e.path());
      if (t && *t > *before) continue;
    }
    remove_path(e.path(), r);
  }
}

}  // namespace

Result<Removal> clear(const Layout& layout) {
  Removal r;
  auto keys = all_keys(layout);
  std::set<std::string> busy;
  for (const auto& key : keys) {
    auto lock = lock_idle_key(layout, key, r, busy);
    if (!lock) return lock.error();
    if (*lock) remove_key(layout, key, r);
  }
  auto keep = referenced_wheels(layout, busy);
  for (const auto& e : entries(layout.wheels_dir())) {
    auto name = e.path().filename().string();
    if (!busy.empty() && is_temp_name(name)) continue;  // may be a busy key's wheel on its way in
    if (keep.count(e.path().stem().string())) continue;
    remove_path(e.path(), r);
  }
  for (const auto& dir : {layout.keys_dir(), layout.sources_dir(), layout.builds_dir()})
    for (const auto& e : entries(dir)) {
      auto name = e.path().filename().string();
      if (is_temp_name(name) && !busy.count(temp_owner(name))) remove_path(e.path(), r);
    }
  for (const auto& e : entries(layout.git_dir())) {
    if (e.path().extension() != ".git") continue;
    auto lock_path = e.path();
    lock_path.replace_extension(".lock");
    auto lock = FileLock::try_acquire(lock_path);
    if (!lock) return lock.error();
    if (!*lock) {
      r.skipped.push_back(fmt::format("mirror {}: being fetched", e.path().string()));
      continue;
    }
    remove_path(e.path(), r);
  }
  remove_idle_slots(layout, r, std::nullopt);
  if (busy.empty()) {
    for (const auto& e : entries(layout.ccache_dir())) remove_path(e.path(), r);
  } else {
    r.skipped.push_back("ccache: kept while a build is running");
  }
  return r;
}

Result<Removal> gc(const Layout& layout, const GcOptions& options) {
  Removal r;
  auto keys = all_keys(layout);
  std::set<std::string> busy;
  for (const auto& key : keys) {
    auto lock = lock_idle_key(layout, key, r, busy);
    if (!lock) return lock.error();
    if (!*lock) continue;
    KeyRecord rec(layout, key);
    auto wheel = rec.wheel();
    if (wheel && *wheel) {
      auto before = r.removed.size();
      remove_path(layout.source_dir(key), r);
      remove_path(layout.build_dir(key), r);
      if (r.removed.size() != before) {
        if (auto c = rec.clear_stages(); !c) return c.error();
      }
      continue;
    }
    std::optional<fs::file_time_type> newest;
    for (const auto& p : {layout.manifest(key), layout.source_dir(key), layout.build_dir(key), layout.log_dir(key)})
      if (auto t = mtime(p); t && (!newest || *t > *newest)) newest = t;
    if (newest && options.now - *newest < options.keep_unfinished) continue;
    remove_key(layout, key, r);
  }
  auto keep = referenced_wheels(layout, all_keys(layout));
  for (const auto& e : entries(layout.wheels_dir())) {
    auto name = e.path().filename().string();
    if (is_temp_name(name)) continue;  // handled below, by age
    // <sha256>.named/ is a kept wheel's hard link under its own name: kept with it.
    auto ext = e.path().extension();
    if ((ext == ".whl" || ext == ".named") && keep.count(e.path().stem().string())) continue;
    // A running build stores its wheel before its manifest names it: leave young ones.
    if (auto t = mtime(e.path()); t && options.now - *t < options.temp_age) continue;
    remove_path(e.path(), r);
  }
  for (const auto& dir : {layout.keys_dir(), layout.wheels_dir(), layout.sources_dir(), layout.builds_dir()})
    for (const auto& e : entries(dir)) {
      auto name = e.path().filename().string();
      if (!is_temp_name(name) || busy.count(temp_owner(name))) continue;
      auto t = mtime(e.path());
      if (t && options.now - *t < options.temp_age) continue;
      remove_path(e.path(), r);
    }
  // trees/ holds accelerators only (a missing one costs one full read of its folder, or a whole
  // copy): a .last naming a key whose checkout is gone goes, and so does any file there untouched
  // for keep_unfinished (a folder no longer built from, a checkout gc removed); temps by age.
  for (const auto& e : entries(layout.trees_dir())) {
    const auto name = e.path().filename().string();
    const auto t = mtime(e.path());
    if (is_temp_name(name)) {
      if (!t || options.now - *t >= options.temp_age) remove_path(e.path(), r);
      continue;
    }
    bool stale = !t || options.now - *t >= options.keep_unfinished;
    if (!stale && e.path().extension() == ".last") {
      auto key = read_last_checkout_file(e.path());
      std::error_code ec;
      // It names a key's checkout (src/<key>), or a local tree's slot (work/<slot>/src).
      stale = !key || (!fs::is_directory(layout.source_dir(*key), ec) && !fs::is_directory(layout.work_source(*key), ec));
    }
    if (stale) remove_path(e.path(), r);
  }
  // work/<slot>/ is what the next key of that folder and configuration continues (a copy and a
  // build tree): one whose state is untouched for keep_unfinished goes, never while a build holds it.
  remove_idle_slots(layout, r, options.now - options.keep_unfinished);
  return r;
}

}  // namespace archbuild::store
