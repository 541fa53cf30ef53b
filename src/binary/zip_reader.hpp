// Opening a zip (a wheel) as pip reads it (Python's zipfile): through the central directory at
// its end. libarchive's streaming zip reader walks the local headers from the start and never
// reads the central directory, so a truncated file or an end record pointing elsewhere read as
// a good zip there while pip refuses it. Every zip reader (binary/inspect, validate/wheel_check,
// stages/reproducible) opens through here so that they agree.
#pragma once

#include <cstdint>
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

// How many bytes a zip's members may expand to, in all: kMaxExpansion per byte of the archive,
// and at least kMinExpansionLimit. Sizes the archive declares are the sender's word; this bound is
// carried by the bytes themselves. A wheel's libraries compress 2-5x (deflate's own ceiling,
// 1032x, is reached only by runs of one byte), so a real wheel is far below it, while a 3 MB
// archive can no longer make a reader hold or hash 3 GiB: every zip reader stops at it.
inline constexpr std::uint64_t kMaxExpansion = 100;
inline constexpr std::uint64_t kMinExpansionLimit = std::uint64_t{64} << 20;
std::uint64_t expansion_limit(std::uint64_t archive_bytes);
// Ok while `expanded` (the members' bytes read so far) is within expansion_limit; else
// bad_input, one phrase for the caller to prefix with the path: "its members expand to more than
// … bytes, over 100 times the archive's … bytes (a zip bomb?); refusing it".
Result<Ok> check_expansion(std::uint64_t expanded, std::uint64_t archive_bytes);

// The reader's last error ("unknown error" when libarchive gives none).
std::string zip_error(archive* a);
// Why archive_read_next_header failed. The first call reads the whole central directory: a
// failure there says so ("its central directory cannot be read: Damaged Zip archive").
std::string zip_header_error(archive* a, bool first);

}  // namespace archbuild::binary
