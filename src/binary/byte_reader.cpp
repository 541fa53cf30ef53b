#include "binary/byte_reader.hpp"

#include "binary/open_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace archbuild::binary {

namespace {

// A container header with its first entry header (16 + 64) and then some: one read.
constexpr std::size_t kWindow = 256;

}  // namespace

ByteReader::ByteReader(Bytes memory) : memory_(memory), size_(memory.size()) {}

Result<ByteReader> ByteReader::open(const std::filesystem::path& path) {
  auto opened = open_regular_file(path);
  if (!opened) return opened.error();
  ByteReader r;
  r.fd_ = opened->fd;
  r.size_ = opened->size;
  return r;
}

Result<ByteReader> ByteReader::sibling() const {
  if (fd_ < 0) return ByteReader(memory_);
  int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Error::bad_input(fmt::format("cannot duplicate a file descriptor: {}", std::strerror(errno)));
  ByteReader r;
  r.fd_ = fd;
  r.size_ = size_;
  return r;
}

ByteReader::ByteReader(ByteReader&& other) noexcept
    : memory_(other.memory_),
      fd_(other.fd_),
      size_(other.size_),
      window_(std::move(other.window_)),
      window_offset_(other.window_offset_),
      window_length_(other.window_length_) {
  other.fd_ = -1;
  other.window_length_ = 0;
}

ByteReader& ByteReader::operator=(ByteReader&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    memory_ = other.memory_;
    fd_ = other.fd_;
    size_ = other.size_;
    window_ = std::move(other.window_);
    window_offset_ = other.window_offset_;
    window_length_ = other.window_length_;
    other.fd_ = -1;
    other.window_length_ = 0;
  }
  return *this;
}

ByteReader::~ByteReader() {
  if (fd_ >= 0) ::close(fd_);
}

void ByteReader::read(std::uint64_t offset, std::size_t length, std::uint8_t* out) const {
  if (!fits(offset, length, size_))
    throw Malformed(fmt::format("range of {} bytes at offset {} runs past the end of the data", length, offset));
  if (fd_ < 0) {
    std::memcpy(out, memory_.data() + offset, length);
    return;
  }
  while (length > 0) {
    ssize_t n = ::pread(fd_, out, length, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Malformed(fmt::format("cannot read {} bytes at offset {}: {}", length, offset,
                                  n < 0 ? std::strerror(errno) : "the file is shorter than it was"));
    out += n;
    offset += static_cast<std::uint64_t>(n);
    length -= static_cast<std::size_t>(n);
  }
}

Bytes ByteReader::window_at(std::uint64_t offset, std::size_t at_least, std::size_t read_size) {
  if (!fits(offset, at_least, size_))
    throw Malformed(fmt::format("read past the end of the data at offset {}", offset));
  if (fd_ < 0) return memory_.subspan(static_cast<std::size_t>(offset));
  if (offset < window_offset_ || offset + at_least > window_offset_ + window_length_) {
    read_size = std::min(std::max(read_size, at_least), kWindowMax);
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(read_size, size_ - offset));
    if (window_.size() < want) window_.resize(want < kWindow ? kWindow : kWindowMax);
    window_length_ = 0;
    read(offset, want, window_.data());
    window_offset_ = offset;
    window_length_ = want;
  }
  return Bytes(window_.data() + (offset - window_offset_), window_length_ - (offset - window_offset_));
}

Bytes ByteReader::view(std::uint64_t offset, std::size_t length) {
  if (fd_ >= 0 && length > kViewMax)
    throw Malformed(fmt::format("view of {} bytes is over the limit of {}", length, kViewMax));
  return window_at(offset, length, std::max(length, kWindow)).first(length);
}

}  // namespace archbuild::binary
