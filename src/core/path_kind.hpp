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

// Opens a file read from the cache or the environment (a hash to verify, a record) only when it
// is a regular file, without ever waiting: O_NONBLOCK, so a FIFO swapped in returns at once, then
// fstat on what was opened (no race between a check and the open). The descriptor is blocking
// again on return; the caller closes it. Errors as expect_regular_file's.
Result<int> open_regular_file(const std::filesystem::path& p, std::string_view what);

// A path archbuild writes (a file it creates or replaces: --trace, --out, --constraints, a
// mirror's pages, the cache's files): Ok where nothing is or a regular file is; else bad_input
//   `<what> "<path>": is a FIFO (named pipe); archbuild writes only where nothing is or a regular file is`
// The last component is not followed: a symbolic link, a FIFO or a device (/dev/full) is never
// replaced by the rename of an atomic write, nor opened. store::AtomicFile asks here before every
// write, so every file archbuild writes passes this one rule.
Result<Ok> expect_writable_file(const std::filesystem::path& p, std::string_view what);

// A file archbuild writes as a stream, where an atomic rename cannot serve (a stage's log, which
// `tail -f` and a failed stage's tail read while it grows): expect_writable_file's rule, then an
// open that never follows a link at the last component (O_NOFOLLOW), never waits (O_NONBLOCK: a
// FIFO swapped in since the check is ENXIO or found by fstat, not a hang) and never creates a file
// other than a regular one; the descriptor is blocking again on return, the caller closes it.
// `append`: O_APPEND, else O_TRUNC.
Result<int> open_writable_file(const std::filesystem::path& p, std::string_view what, bool append);

}  // namespace archbuild::paths
