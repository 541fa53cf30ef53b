#include "binary/zip_reader.hpp"

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

namespace archbuild::binary {

void ZipReaderFree::operator()(archive* a) const { archive_read_free(a); }

std::string zip_error(archive* a) {
  const char* why = archive_error_string(a);
  return why ? why : "unknown error";
}

std::string zip_header_error(archive* a, bool first) {
  return first ? "its central directory cannot be read: " + zip_error(a) : zip_error(a);
}

namespace {

// Only the seekable (central directory) reader is registered: with the streaming one beside it,
// libarchive would fall back to the local headers when the central directory is unusable.
template <class Open>
Result<ZipReader> open_with(Open open) {
  ZipReader a(archive_read_new());
  if (!a) return Error::bad_input("cannot allocate a zip reader");
  archive_read_support_format_zip_seekable(a.get());
  if (open(a.get()) == ARCHIVE_OK) return a;
  // No format bid ("Unrecognized archive format", libarchive's ARCHIVE_ERRNO_FILE_FORMAT, which
  // is EILSEQ on Linux): no end-of-central-directory record where a zip has one, or one that
  // points past itself.
  if (archive_errno(a.get()) == EILSEQ)
    return Error::bad_input(
        "its central directory cannot be found (no valid end-of-central-directory record at the end of the file: "
        "truncated, damaged, or not a zip)");
  return Error::bad_input(zip_error(a.get()));
}

}  // namespace

std::uint64_t expansion_limit(std::uint64_t archive_bytes) {
  return std::max(kMinExpansionLimit, archive_bytes * kMaxExpansion);
}

Result<Ok> check_expansion(std::uint64_t expanded, std::uint64_t archive_bytes) {
  if (expanded <= expansion_limit(archive_bytes)) return Ok{};
  return Error::bad_input(fmt::format("its members expand to more than {} bytes, over {} times the archive's {} bytes "
                                      "(a zip bomb?); refusing it",
                                      expansion_limit(archive_bytes), kMaxExpansion, archive_bytes));
}

Result<ZipReader> open_zip(Bytes data) {
  return open_with([&](archive* a) { return archive_read_open_memory(a, data.data(), data.size()); });
}

Result<ZipReader> open_zip(const std::filesystem::path& file) {
  return open_with([&](archive* a) { return archive_read_open_filename(a, file.c_str(), 1 << 16); });
}

}  // namespace archbuild::binary
