#include "store/wheels.hpp"

#include <cerrno>
#include <cstring>
#include <climits>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include "core/path_kind.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "store/atomic_file.hpp"

namespace archbuild::store {

namespace {

// Streams `src` into `dst` (if given), hashing what passes.
Result<std::string> copy_hashing(const std::filesystem::path& src, AtomicFile* dst, std::uintmax_t* size) {
  int fd = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::build_failed(fmt::format("{}: cannot read: {}", src.string(), std::strerror(errno)));
  Sha256 h;
  std::vector<char> buf(1 << 20);
  std::uintmax_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Error::build_failed(fmt::format("{}: read error: {}", src.string(), std::strerror(err)));
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(n));
    total += static_cast<std::uintmax_t>(n);
    if (dst) {
      if (auto w = dst->write(buf.data(), static_cast<std::size_t>(n)); !w) {
        ::close(fd);
        return w.error();
      }
    }
  }
  ::close(fd);
  if (size) *size = total;
  return h.hex();
}

}  // namespace

Result<StoredWheel> put_wheel(const Layout& layout, const std::filesystem::path& built_wheel) {
  // The name is known only after hashing: write the temp file, then name the target.
  auto tmp = AtomicFile::open(layout.wheels_dir() / "incoming.whl");
  if (!tmp) return tmp.error();
  StoredWheel w;
  auto hex = copy_hashing(built_wheel, &*tmp, &w.size);
  if (!hex) return hex.error();
  w.sha256 = *hex;
  w.path = layout.wheel(w.sha256);
  tmp->retarget(w.path);
  if (auto c = tmp->commit(); !c) return c.error();
  return w;
}

WheelCheck get_wheel(const Layout& layout, const std::string& sha256) {
  WheelCheck c;
  c.path = layout.wheel(sha256);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(c.path, ec)) {
    c.state = WheelState::missing;
    c.message = fmt::format("cached wheel {} is missing; it will be rebuilt", c.path.string());
    return c;
  }
  auto hex = copy_hashing(c.path, nullptr, &c.size);
  if (hex && *hex == sha256) {
    c.state = WheelState::ok;
    return c;
  }
  c.state = WheelState::corrupted;
  c.actual_sha256 = hex ? *hex : std::string();
  c.message = hex ? fmt::format("cached wheel {} is corrupted (its SHA-256 is now {}); discarded, it will be rebuilt",
                                c.path.string(), *hex)
                  : fmt::format("cached wheel {} cannot be read ({}); discarded, it will be rebuilt",
                                c.path.string(), hex.error().message);
  std::filesystem::remove(c.path, ec);
  return c;
}

Result<std::filesystem::path> named_wheel(const Layout& layout, const std::string& sha256, const std::string& filename) {
  // The name comes from the key's record: a plain file name only, never a path out of the folder.
  if (filename.empty() || filename.front() == '.' || filename.find('/') != std::string::npos || !filename.ends_with(".whl"))
    return Error::bad_input(fmt::format("the key record names the wheel {}, not a wheel file name", text::quoted(filename)));
  auto stored = layout.wheel(sha256);
  auto target = layout.named_wheel(sha256, filename);
  std::error_code ec;
  // The stored wheel first, re-hashed (a corrupted one is removed): only its bytes are named.
  auto check = get_wheel(layout, sha256);
  if (check.state != WheelState::ok) return Error::bad_input(check.message);
  // The named copy is a record of the cache like the others, verified before it is used: the
  // stored wheel's own inode (a hard link), or a copy with its hash. A link left from before a
  // rebuild holds the damaged bytes the rebuild replaced: it is made again below.
  struct stat named {}, original {};
  if (::lstat(target.c_str(), &named) == 0 && S_ISREG(named.st_mode)) {
    if (::stat(stored.c_str(), &original) == 0 && named.st_dev == original.st_dev && named.st_ino == original.st_ino)
      return target;
    if (auto h = sha256_file_hex(target); h && *h == sha256) return target;
  }
  std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) return Error::bad_input(fmt::format("{}: cannot create: {}", target.parent_path().string(), ec.message()));
  // A link beside the target, renamed over it: another process never sees a partial name.
  auto tmp = target.parent_path() / fmt::format(".{}.{}", filename, ::getpid());
  std::filesystem::remove(tmp, ec);
  std::filesystem::create_hard_link(stored, tmp, ec);
  if (ec) return copy_to_out(stored, target.parent_path(), filename);  // no hard links here
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Error::bad_input(fmt::format("{}: cannot name the cached wheel: {}", target.string(), ec.message()));
  }
  return target;
}

namespace {

// What `at` is, said for --out: "is a FIFO (named pipe), not a directory", "is a symbolic link to
// nothing, not a directory", "permission denied on a folder of the path" …
Result<Ok> refuse_out(const std::string& shown, const std::filesystem::path& at, const std::filesystem::path& out_dir,
                      const paths::PathInfo& info) {
  std::string what = paths::describe(info);
  if (what.starts_with("is ")) what += ", not a directory";
  if (at == out_dir)
    return Error::bad_input(fmt::format("--out {}: {}; name a directory for the wheel", shown, what));
  return Error::bad_input(fmt::format("--out {}: cannot be made, {} {}; name a directory you can write to", shown,
                                      text::quoted(at.string(), 1024), what));
}

}  // namespace

Result<Ok> check_out_dir(const std::filesystem::path& out_dir, std::uintmax_t minimum_free) {
  const std::string shown = text::quoted(out_dir.string(), 1024);
  // The folders not made yet are never asked of the file system, so their lengths are checked
  // here: each name within NAME_MAX, the whole (and the wheel's name below it) within PATH_MAX.
  for (const auto& part : out_dir)
    if (part.native().size() > NAME_MAX)
      return Error::bad_input(fmt::format("--out {}: the path is too long for the system: its name {} is {} bytes, "
                                          "a name may have at most {}; name a shorter directory",
                                          shown, text::quoted(part.string(), 40), part.native().size(), NAME_MAX));
  // A wheel's file name is rarely over 200 bytes (torch-2.7.0+cu128.sm90-cp312-cp312-linux_x86_64.whl).
  constexpr std::size_t kWheelNameRoom = 256;
  if (out_dir.native().size() + kWheelNameRoom >= PATH_MAX)
    return Error::bad_input(fmt::format("--out {}: the path is too long for the system: {} bytes, and the wheel's "
                                        "path below it must stay within {}; name a shorter directory",
                                        shown, out_dir.native().size(), PATH_MAX));
  auto info = paths::classify(out_dir);
  // Not made here (a build that fails leaves no empty --out behind): the nearest folder that
  // exists is where it would be made, and must take a file. A link to nothing or a loop of links
  // on the way is said as such (creating the folder would fail after the build).
  std::filesystem::path at = out_dir;
  auto absent = [](const paths::PathInfo& i) {
    return i.kind == paths::Kind::missing || i.kind == paths::Kind::not_a_folder;
  };
  if (absent(info)) {
    at = out_dir.parent_path();
    for (;;) {
      if (at.empty()) at = ".";
      info = paths::classify(at);
      if (!absent(info) || at == at.parent_path() || at == ".") break;
      at = at.parent_path();
    }
  }
  if (info.kind != paths::Kind::directory) return refuse_out(shown, at, out_dir, info);
  // A probe file rather than access(W_OK): it also finds a read-only mount, and no inodes left.
  auto probe = at / fmt::format(".archbuild-out-check.tmp-{}", ::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    return Error::bad_input(fmt::format("--out {}: cannot write a file there: {}; name a directory you can write to",
                                        shown, std::strerror(err)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  struct statvfs vfs {};
  if (::statvfs(at.c_str(), &vfs) == 0) {
    std::uintmax_t free_bytes = static_cast<std::uintmax_t>(vfs.f_bavail) * vfs.f_frsize;
    std::uintmax_t needed = std::max<std::uintmax_t>(minimum_free, vfs.f_frsize);
    if (free_bytes < needed)
      return Error::bad_input(fmt::format("--out {}: its file system is full ({} bytes free{}); free space or name "
                                          "another directory",
                                          shown, free_bytes,
                                          minimum_free ? fmt::format(", the wheel needs {}", minimum_free) : ""));
  }
  return Ok{};
}

Result<std::filesystem::path> copy_to_out(const std::filesystem::path& wheel, const std::filesystem::path& out_dir,
                                          const std::string& filename) {
  if (filename.empty() || filename.find('/') != std::string::npos || filename[0] == '.')
    return Error::bad_input(fmt::format("invalid wheel file name '{}'", filename));
  auto target = out_dir / filename;
  auto tmp = AtomicFile::open(target);
  if (!tmp) return tmp.error();
  auto hex = copy_hashing(wheel, &*tmp, nullptr);
  if (!hex) return hex.error();
  if (auto c = tmp->commit(); !c) return c.error();
  return target;
}

}  // namespace archbuild::store
