// `archbuild cache stats|gc|clear`: sizes per area, and removal that never touches a key another
// archbuild is building right now (its lock is held) nor a mirror being fetched.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "store/layout.hpp"

namespace archbuild::store {

struct AreaStats {
  std::string name;             // "git", "src", "build", "wheels", "keys", "logs", "ccache"
  std::filesystem::path path;
  std::uintmax_t bytes = 0;
  std::size_t entries = 0;      // top-level entries (mirrors, trees, wheels, manifests, …)
};

struct CacheStats {
  std::filesystem::path root;
  std::vector<AreaStats> areas;
  std::uintmax_t total_bytes = 0;
  std::size_t keys = 0;           // manifests
  std::size_t complete_keys = 0;  // manifests with a wheel
};

Result<CacheStats> stats(const Layout& layout);

struct Removal {
  std::vector<std::filesystem::path> removed;
  std::vector<std::string> skipped;  // "key <key>: being built by pid 1234", …
  std::uintmax_t bytes_freed = 0;
};

// Removes everything but lock files and what running archbuilds hold.
Result<Removal> clear(const Layout& layout);

struct GcOptions {
  // Unfinished keys (no wheel) untouched for this long lose their trees, logs and manifest.
  std::chrono::hours keep_unfinished{24 * 14};
  // Temp files/directories left by killed runs are removed once this old.
  std::chrono::minutes temp_age{60};
  std::filesystem::file_time_type now = std::filesystem::file_time_type::clock::now();
};

// - finished keys (manifest with a wheel): src/<key> and build/<key> go (the compiler cache keeps
//   rebuilds fast; the next key of a local folder then copies it whole), and their stamps are
//   cleared so a rebuild (after the wheel goes missing) starts from fetch;
// - unfinished keys older than keep_unfinished: everything of the key;
// - wheels no manifest refers to; temp leftovers older than temp_age;
// - trees/: a .last naming a key whose checkout is gone, any file untouched for keep_unfinished.
// Mirrors (git/), ccache/ and lock files stay.
Result<Removal> gc(const Layout& layout, const GcOptions& options = {});

// Size of a file or a tree (not following symlinks).
std::uintmax_t disk_usage(const std::filesystem::path& p);

}  // namespace archbuild::store
