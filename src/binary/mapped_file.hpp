// A read-only memory mapping of a whole file. Mapping (not reading) is what lets inspect touch
// only the pages holding headers: a 500 MB library costs the few pages the readers look at.
#pragma once

#include <filesystem>

#include "binary/bytes.hpp"
#include "core/error.hpp"

namespace archbuild::binary {

class MappedFile {
 public:
  // Errors (exit 2) name the path: missing, unreadable, not a regular file.
  static Result<MappedFile> open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  Bytes bytes() const { return {static_cast<const std::uint8_t*>(data_), size_}; }
  std::size_t size() const { return size_; }

  // Brings the pages of [offset, offset + length) in before a scan reads them all: one
  // system call (MADV_POPULATE_READ, Linux 5.14) instead of a page fault per few pages, which
  // was most of a scan's time. Best effort: the mapping works without it.
  void populate(std::uint64_t offset, std::uint64_t length) const;

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace archbuild::binary
