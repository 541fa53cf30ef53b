// Content-addressed wheels (wheels/<sha256>.whl) and publishing a copy to --out.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "store/layout.hpp"

namespace archbuild::store {

struct StoredWheel {
  std::string sha256;
  std::filesystem::path path;  // wheels/<sha256>.whl
  std::uintmax_t size = 0;
};

// Copies a built wheel into the store: hashed while copied to a temp file beside the target,
// fsync'ed, renamed to wheels/<sha256>.whl (an existing one is replaced atomically).
Result<StoredWheel> put_wheel(const Layout& layout, const std::filesystem::path& built_wheel);

enum class WheelState { ok, missing, corrupted };

struct WheelCheck {
  WheelState state = WheelState::missing;
  std::filesystem::path path;
  std::string actual_sha256;  // when corrupted
  std::uintmax_t size = 0;
  std::string message;        // for the user when not ok
};

// The stored wheel with this hash, re-hashed. A corrupted one (hash no longer matches) is
// deleted and reported (state corrupted + message), so the caller rebuilds it.
WheelCheck get_wheel(const Layout& layout, const std::string& sha256);

// The stored wheel with this hash under its file name (Layout::named_wheel): a hard link made
// once (a copy where the file system has none), atomically. Error: not stored, or not linkable.
Result<std::filesystem::path> named_wheel(const Layout& layout, const std::string& sha256, const std::string& filename);

// The user's --out, checked before anything is built (an --out that cannot take the wheel is bad
// input, exit 2, not a build that failed hours later): it is created if missing, and must be a
// directory this process can write a file into, with free space. `minimum_free`: the bytes the
// wheel needs when known (0: at least one block).
Result<Ok> check_out_dir(const std::filesystem::path& out_dir, std::uintmax_t minimum_free = 0);

// Copies `wheel` to out_dir/filename without ever leaving a partial file there: temp file in
// out_dir, fsync, rename (an older file of that name is replaced atomically). Creates out_dir.
Result<std::filesystem::path> copy_to_out(const std::filesystem::path& wheel, const std::filesystem::path& out_dir,
                                          const std::string& filename);

}  // namespace archbuild::store
