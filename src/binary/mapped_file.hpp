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

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace archbuild::binary
