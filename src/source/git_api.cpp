#include "source/git_api.hpp"

namespace archbuild {

// The soname and the package come from CMake (the libgit2 found at configure time).
constinit const LazyLibrary libgit2{ARCHBUILD_LIBGIT2_SONAME, "to fetch and check out sources",
                                    ARCHBUILD_LIBGIT2_PROVIDED_BY};

}  // namespace archbuild
