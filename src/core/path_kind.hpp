// What a path the user gave is, said in one line: every command that expects a file (a recipe,
// a wheel, a binary, an interpreter) asks here first, so a FIFO, a device, a directory, a
// dangling link or a link loop is refused by what it is, without being opened for reading (a
// FIFO's open() blocks until a writer comes).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace archbuild::paths {

enum class Kind {
  regular,
  directory,
  fifo,
  socket,
  char_device,
  block_device,
  missing,        // nothing there (or a parent is missing)
  dangling_link,  // a link whose target is missing
  link_loop,      // links that lead back to themselves (ELOOP)
  too_long,       // ENAMETOOLONG
  no_access,      // a folder on the way cannot be searched (EACCES)
  not_a_folder,   // a part of the path before the last is a file (ENOTDIR)
  other,
};

struct PathInfo {
  Kind kind = Kind::other;
  std::string why;  // strerror for `other`
};

// stat() (following links), then lstat() to tell a dangling link from nothing.
PathInfo classify(const std::filesystem::path& p);

// "a FIFO", "a directory", "a link to nothing", "no such file", …
std::string describe(const PathInfo& info);

// Ok for a regular file (or a link to one); else bad_input:
//   `<what> "<path>": is a FIFO, not a regular file`
// `what` names the role: "recipe file", "wheel", "python".
Result<Ok> expect_regular_file(const std::filesystem::path& p, std::string_view what);
// The same for a directory.
Result<Ok> expect_directory(const std::filesystem::path& p, std::string_view what);

}  // namespace archbuild::paths
