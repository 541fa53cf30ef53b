// Opening a file the readers take whole: a regular file, read-only, with its size (shared by
// MappedFile and ByteReader so both refuse the same inputs with the same message).
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/error.hpp"

namespace archbuild::binary {

struct OpenedFile {
  int fd = -1;  // the caller closes it
  std::uint64_t size = 0;
};

Result<OpenedFile> open_regular_file(const std::filesystem::path& path);

}  // namespace archbuild::binary
