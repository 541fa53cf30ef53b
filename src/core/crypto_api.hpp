// libcrypto (OpenSSL 3), opened on first use (core/lazy_library.hpp): the EVP functions archbuild
// calls, as objects of the same names in namespace archbuild. Include this after <openssl/evp.h>
// wherever EVP_* is called; calling a function missing from the list fails to link.
#pragma once

#include <openssl/evp.h>

#include "core/lazy_library.hpp"

// X(name): one line per libcrypto function archbuild calls. None is variadic.
#define ARCHBUILD_CRYPTO_FUNCTIONS(X) \
  X(EVP_DigestFinal_ex)               \
  X(EVP_DigestInit_ex)                \
  X(EVP_DigestUpdate)                 \
  X(EVP_EncodeBlock)                  \
  X(EVP_MD_CTX_free)                  \
  X(EVP_MD_CTX_new)                   \
  X(EVP_sha256)

namespace archbuild {

extern const LazyLibrary libcrypto;

#define ARCHBUILD_LAZY_SYMBOL(name) constinit inline LazySymbol<decltype(&::name)> name{libcrypto, #name};
ARCHBUILD_CRYPTO_FUNCTIONS(ARCHBUILD_LAZY_SYMBOL)
#undef ARCHBUILD_LAZY_SYMBOL

}  // namespace archbuild
