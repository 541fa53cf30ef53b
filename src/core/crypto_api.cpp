#include "core/crypto_api.hpp"

namespace archbuild {

// The soname and the package come from CMake (the libcrypto found at configure time).
constinit const LazyLibrary libcrypto{ARCHBUILD_LIBCRYPTO_SONAME, "to compute sha256 hashes (build keys, wheel RECORDs)",
                                      ARCHBUILD_LIBCRYPTO_PROVIDED_BY};

}  // namespace archbuild
