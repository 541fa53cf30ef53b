// libarchive, opened on first use (core/lazy_library.hpp): the functions archbuild calls to read
// and write zips (binary/inspect, validate/wheel_check, stages/reproducible), as objects of the
// same names in namespace archbuild. Include this instead of <archive.h> and <archive_entry.h>;
// calling a function missing from the list fails to link.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include "core/lazy_library.hpp"

// X(name): one line per libarchive function archbuild calls. None is variadic.
#define ARCHBUILD_ARCHIVE_FUNCTIONS(X)       \
  X(archive_entry_filetype)                  \
  X(archive_entry_free)                      \
  X(archive_entry_new)                       \
  X(archive_entry_pathname)                  \
  X(archive_entry_pathname_utf8)             \
  X(archive_entry_perm)                      \
  X(archive_entry_set_filetype)              \
  X(archive_entry_set_gid)                   \
  X(archive_entry_set_mtime)                 \
  X(archive_entry_set_pathname)              \
  X(archive_entry_set_pathname_utf8)         \
  X(archive_entry_set_perm)                  \
  X(archive_entry_set_size)                  \
  X(archive_entry_set_uid)                   \
  X(archive_entry_size)                      \
  X(archive_entry_size_is_set)               \
  X(archive_errno)                           \
  X(archive_error_string)                    \
  X(archive_read_data)                       \
  X(archive_read_free)                       \
  X(archive_read_new)                        \
  X(archive_read_next_header)                \
  X(archive_read_open_filename)              \
  X(archive_read_open_memory)                \
  X(archive_read_support_format_zip)         \
  X(archive_read_support_format_zip_seekable) \
  X(archive_write_close)                     \
  X(archive_write_data)                      \
  X(archive_write_finish_entry)              \
  X(archive_write_free)                      \
  X(archive_write_header)                    \
  X(archive_write_new)                       \
  X(archive_write_open_filename)             \
  X(archive_write_set_bytes_in_last_block)   \
  X(archive_write_set_format_zip)            \
  X(archive_write_set_options)

namespace archbuild {

extern const LazyLibrary libarchive;

#define ARCHBUILD_LAZY_SYMBOL(name) constinit inline LazySymbol<decltype(&::name)> name{libarchive, #name};
ARCHBUILD_ARCHIVE_FUNCTIONS(ARCHBUILD_LAZY_SYMBOL)
#undef ARCHBUILD_LAZY_SYMBOL

}  // namespace archbuild
