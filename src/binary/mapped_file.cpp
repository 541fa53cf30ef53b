#include "binary/mapped_file.hpp"

#include "binary/open_file.hpp"
#include "core/path_kind.hpp"
#include "core/text.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace archbuild::binary {

std::string hex(std::uint64_t v) { return fmt::format("{:#x}", v); }

Result<OpenedFile> open_regular_file(const std::filesystem::path& path) {
  // What the path is, said before opening it: open() of a FIFO waits for a writer forever.
  if (auto is_file = paths::expect_regular_file(path, "file"); !is_file) return is_file.error();
  // O_NONBLOCK: the path may have been swapped for a FIFO since; fstat below refuses it then.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return Error::bad_input(fmt::format("file {}: cannot open: {}", text::quoted(path.string()), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error::bad_input(fmt::format("file {}: not a regular file", text::quoted(path.string())));
  }
  // Reads of a regular file never block; the flag is cleared all the same for the readers.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return OpenedFile{fd, static_cast<std::uint64_t>(st.st_size)};
}

Result<MappedFile> MappedFile::open(const std::filesystem::path& path) {
  auto opened = open_regular_file(path);
  if (!opened) return opened.error();
  int fd = opened->fd;
  MappedFile m;
  m.size_ = static_cast<std::size_t>(opened->size);
  if (m.size_ > 0) {
    void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return Error::bad_input(fmt::format("{}: cannot map: {}", path.string(), std::strerror(e)));
    }
    m.data_ = p;
  }
  ::close(fd);
  return m;
}

MappedFile::MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, size_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace archbuild::binary
