#include "store/atomic_file.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include "core/path_kind.hpp"

namespace archbuild::store {

namespace {
Error io_error(const std::string& what, const std::filesystem::path& p, int err) {
  return Error::build_failed(fmt::format("{}: {}: {}", p.string(), what, std::strerror(err)));
}
}  // namespace

std::string temp_prefix(const std::filesystem::path& target) {
  return "." + target.filename().string() + ".tmp-";
}

void sync_dir(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

Result<std::filesystem::path> make_temp_dir_beside(const std::filesystem::path& target) {
  std::error_code ec;
  std::filesystem::create_directories(target.parent_path(), ec);
  std::string tmpl = (target.parent_path() / (temp_prefix(target) + "XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) return io_error("cannot create a temp directory beside it", target, errno);
  return std::filesystem::path(buf.data());
}

Result<AtomicFile> AtomicFile::open(const std::filesystem::path& target) {
  if (auto writable = paths::expect_writable_file(target, "file to write"); !writable) return writable.error();
  std::error_code ec;
  std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) return Error::build_failed(fmt::format("{}: cannot create its directory: {}", target.string(), ec.message()));
  std::string tmpl = (target.parent_path() / (temp_prefix(target) + "XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = ::mkostemp(buf.data(), O_CLOEXEC);
  if (fd < 0) return io_error("cannot create a temp file beside it", target, errno);
  ::fchmod(fd, 0644);  // mkostemp makes 0600; cache files are ordinary files
  AtomicFile f;
  f.target_ = target;
  f.temp_ = buf.data();
  f.fd_ = fd;
  return f;
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept : target_(std::move(o.target_)), temp_(std::move(o.temp_)), fd_(o.fd_) {
  o.fd_ = -1;
  o.temp_.clear();
}

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    discard();
    target_ = std::move(o.target_);
    temp_ = std::move(o.temp_);
    fd_ = o.fd_;
    o.fd_ = -1;
    o.temp_.clear();
  }
  return *this;
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) {
    std::error_code ec;
    std::filesystem::remove(temp_, ec);
    temp_.clear();
  }
}

Result<Ok> AtomicFile::write(std::string_view data) { return write(data.data(), data.size()); }

Result<Ok> AtomicFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) return Error::build_failed(fmt::format("{}: write after commit", target_.string()));
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write", temp_, errno);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return Ok{};
}

Result<Ok> AtomicFile::commit(Durability durability) {
  if (fd_ < 0) return Error::build_failed(fmt::format("{}: committed twice", target_.string()));
  // Asked again at the rename: retarget() may have named another path, and something may have
  // appeared there while the data was written.
  if (auto writable = paths::expect_writable_file(target_, "file to write"); !writable) return writable.error();
  const bool sync = durability == Durability::synced;
  if (sync && ::fsync(fd_) != 0) return io_error("cannot fsync", temp_, errno);
  ::close(fd_);
  fd_ = -1;
  if (::rename(temp_.c_str(), target_.c_str()) != 0) return io_error("cannot rename into place", target_, errno);
  temp_.clear();
  if (sync) sync_dir(target_.parent_path());
  return Ok{};
}

Result<Ok> write_file_atomic(const std::filesystem::path& target, std::string_view content,
                             AtomicFile::Durability durability) {
  auto f = AtomicFile::open(target);
  if (!f) return f.error();
  if (auto w = f->write(content); !w) return w.error();
  return f->commit(durability);
}

Result<Ok> copy_file_atomic(const std::filesystem::path& from, const std::filesystem::path& target) {
  auto f = AtomicFile::open(target);
  if (!f) return f.error();
  auto in = paths::open_regular_file(from, "file to copy");
  if (!in) return in.error();
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(*in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(*in);
      return io_error("cannot read", from, e);
    }
    if (n == 0) break;
    if (auto w = f->write(buf.data(), static_cast<std::size_t>(n)); !w) {
      ::close(*in);
      return w.error();
    }
  }
  ::close(*in);
  return f->commit();
}

}  // namespace archbuild::store
