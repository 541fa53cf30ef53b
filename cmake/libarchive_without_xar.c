// Linked first into the bundle's own libarchive (cmake/glibc-floor.cmake), before libarchive.a:
// libarchive's xar writer, the same stub libarchive itself compiles when it is built without
// libxml2 (archive_write_set_format_xar.c, !HAVE_LIBXML_XMLWRITER_H).
//
// Why: the zip writer archbuild uses pulls in archive_write_set_format.o, whose by-name table
// references every writer; xar's is the only one that needs libxml2, and Debian 11's libxml2 and
// its ICU import pow and log@GLIBC_2.29 (and ~30 MB of ICU data). With this definition found
// first, the linker never takes the xar member from libarchive.a. archbuild writes zips only.
#include <archive.h>

// archive_private.h's value: "not an errno".
#define ARCHIVE_ERRNO_MISC (-1)

int archive_write_set_format_xar(struct archive* a) {
  archive_set_error(a, ARCHIVE_ERRNO_MISC, "Xar not supported on this platform");
  return ARCHIVE_WARN;
}
