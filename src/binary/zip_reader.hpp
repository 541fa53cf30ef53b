// Opening a zip (a wheel) as pip reads it (Python's zipfile): through the central directory at
// its end. libarchive's streaming zip reader walks the local headers from the start and never
// reads the central directory, so a truncated file or an end record pointing elsewhere read as
// a good zip there while pip refuses it. Every zip reader (binary/inspect, validate/wheel_check,
// stages/reproducible) opens through here so that they agree.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "binary/archive_api.hpp"
#include "binary/bytes.hpp"
#include "core/error.hpp"

namespace archbuild::binary {

struct ZipReaderFree {
  void operator()(archive* a) const;
};
using ZipReader = std::unique_ptr<archive, ZipReaderFree>;

// `data` must outlive the reader. Errors (bad_input) are one phrase without the path, for the
// caller to prefix: "its central directory cannot be found (…)".
Result<ZipReader> open_zip(Bytes data);
Result<ZipReader> open_zip(const std::filesystem::path& file);

// The reader's last error ("unknown error" when libarchive gives none).
std::string zip_error(archive* a);
// Why archive_read_next_header failed. The first call reads the whole central directory: a
// failure there says so ("its central directory cannot be read: Damaged Zip archive").
std::string zip_header_error(archive* a, bool first);

}  // namespace archbuild::binary
