#include "core/path_kind.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::paths {

namespace {

Kind kind_of(mode_t mode) {
  if (S_ISREG(mode)) return Kind::regular;
  if (S_ISDIR(mode)) return Kind::directory;
  if (S_ISFIFO(mode)) return Kind::fifo;
  if (S_ISSOCK(mode)) return Kind::socket;
  if (S_ISCHR(mode)) return Kind::char_device;
  if (S_ISBLK(mode)) return Kind::block_device;
  return Kind::other;
}

Result<Ok> expect(const std::filesystem::path& p, std::string_view what, Kind want, const char* wanted) {
  auto info = classify(p);
  if (info.kind == want) return Ok{};
  bool absent = info.kind == Kind::missing || info.kind == Kind::dangling_link || info.kind == Kind::too_long ||
                info.kind == Kind::no_access || info.kind == Kind::not_a_folder || info.kind == Kind::link_loop;
  return Error::bad_input(fmt::format("{} {}: {}{}", what, text::quoted(p.string()), describe(info),
                                      absent ? fmt::format(" (expected {})", wanted) : fmt::format(", not {}", wanted)));
}

}  // namespace

PathInfo classify(const std::filesystem::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) == 0) return {kind_of(st.st_mode), ""};
  int e = errno;
  switch (e) {
    case ENOENT: {
      struct stat lst {};
      if (::lstat(p.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) return {Kind::dangling_link, ""};
      return {Kind::missing, ""};
    }
    case ELOOP: return {Kind::link_loop, ""};
    case ENAMETOOLONG: return {Kind::too_long, ""};
    case EACCES: return {Kind::no_access, ""};
    case ENOTDIR: return {Kind::not_a_folder, ""};
    default: return {Kind::other, std::strerror(e)};
  }
}

std::string describe(const PathInfo& info) {
  switch (info.kind) {
    case Kind::regular: return "is a regular file";
    case Kind::directory: return "is a directory";
    case Kind::fifo: return "is a FIFO (named pipe)";
    case Kind::socket: return "is a socket";
    case Kind::char_device: return "is a character device";
    case Kind::block_device: return "is a block device";
    case Kind::missing: return "no such file or directory";
    case Kind::dangling_link: return "is a symbolic link to nothing";
    case Kind::link_loop: return "is a loop of symbolic links";
    case Kind::too_long: return "the path is too long for the system";
    case Kind::no_access: return "permission denied on a folder of the path";
    case Kind::not_a_folder: return "a part of the path is a file, not a folder";
    case Kind::other: return info.why.empty() ? "is not a file or a folder" : info.why;
  }
  return "unknown";
}

Result<Ok> expect_regular_file(const std::filesystem::path& p, std::string_view what) {
  return expect(p, what, Kind::regular, "a regular file");
}

Result<Ok> expect_directory(const std::filesystem::path& p, std::string_view what) {
  return expect(p, what, Kind::directory, "a directory");
}

Result<int> open_regular_file(const std::filesystem::path& p, std::string_view what) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (auto regular = expect_regular_file(p, what); !regular) return regular.error();
    return Error::bad_input(fmt::format("{} {}: cannot open: {}", what, text::quoted(p.string()), std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error::bad_input(fmt::format("{} {}: {}, not a regular file", what, text::quoted(p.string()),
                                        describe({kind_of(st.st_mode), ""})));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Result<Ok> expect_writable_file(const std::filesystem::path& p, std::string_view what) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) {
    // Nothing there (or a missing folder, which the writer creates): the atomic write makes it.
    if (errno == ENOENT) return Ok{};
    auto info = classify(p);
    if (info.kind == Kind::missing) return Ok{};
    return Error::bad_input(fmt::format("{} {}: {}", what, text::quoted(p.string()), describe(info)));
  }
  if (S_ISREG(st.st_mode)) return Ok{};
  std::string is = S_ISLNK(st.st_mode) ? "is a symbolic link" : describe({kind_of(st.st_mode), ""});
  return Error::bad_input(fmt::format("{} {}: {}; archbuild writes only where nothing is or a regular file is (remove it, or "
                                      "name another path)",
                                      what, text::quoted(p.string()), is));
}

Result<int> open_writable_file(const std::filesystem::path& p, std::string_view what, bool append) {
  if (auto writable = expect_writable_file(p, what); !writable) return writable.error();
  // O_TRUNC only after fstat has said regular: a device opened with it would be touched.
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (append ? O_APPEND : 0), 0644);
  if (fd < 0) {
    int e = errno;
    if (auto again = expect_writable_file(p, what); !again) return again.error();
    if (e == ELOOP) return Error::bad_input(fmt::format("{} {}: is a symbolic link; archbuild writes only where nothing is or a "
                                                        "regular file is (remove it, or name another path)",
                                                        what, text::quoted(p.string())));
    return Error::bad_input(fmt::format("{} {}: cannot open for writing: {}", what, text::quoted(p.string()), std::strerror(e)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error::bad_input(fmt::format("{} {}: {}; archbuild writes only where nothing is or a regular file is", what,
                                        text::quoted(p.string()), describe({kind_of(st.st_mode), ""})));
  }
  if (!append && ::ftruncate(fd, 0) != 0) {
    int e = errno;
    ::close(fd);
    return Error::bad_input(fmt::format("{} {}: cannot truncate: {}", what, text::quoted(p.string()), std::strerror(e)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace archbuild::paths
