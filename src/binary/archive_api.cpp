#include "binary/archive_api.hpp"

namespace archbuild {

// The soname and the package come from CMake (the libarchive found at configure time).
constinit const LazyLibrary libarchive{ARCHBUILD_LIBARCHIVE_SONAME, "to read and write zips (wheels)",
                                       ARCHBUILD_LIBARCHIVE_PROVIDED_BY};

}  // namespace archbuild
