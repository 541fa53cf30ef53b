// A read-only memory mapping of a whole file: the ELF header and section table cost the few
// pages they lie on. Bulk reads (the fatbin scan) go through ByteReader instead (why there).
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

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace archbuild::binary
