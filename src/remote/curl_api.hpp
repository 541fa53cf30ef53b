// libcurl, opened on first use (core/lazy_library.hpp) like libgit2 and libcrypto: only a command
// given --store loads it. The two variadic functions (curl_easy_setopt, curl_easy_getinfo) cannot
// be LazySymbols; they are resolved by hand with their variadic types and called as such.
#pragma once

#include <curl/curl.h>

#include "core/lazy_library.hpp"

#define ARCHBUILD_CURL_FUNCTIONS(X) \
  X(curl_global_init)               \
  X(curl_easy_init)                 \
  X(curl_easy_cleanup)              \
  X(curl_easy_perform)              \
  X(curl_easy_strerror)             \
  X(curl_slist_append)              \
  X(curl_slist_free_all)

namespace archbuild {

extern const LazyLibrary libcurl;

#define ARCHBUILD_LAZY_SYMBOL(name) constinit inline LazySymbol<decltype(&::name)> name{libcurl, #name};
ARCHBUILD_CURL_FUNCTIONS(ARCHBUILD_LAZY_SYMBOL)
#undef ARCHBUILD_LAZY_SYMBOL

namespace remote {
using CurlSetopt = CURLcode (*)(CURL*, CURLoption, ...);
using CurlGetinfo = CURLcode (*)(CURL*, CURLINFO, ...);
// The variadic pair; throws Failure (exit 3) when libcurl is missing.
CurlSetopt curl_setopt_fn();
CurlGetinfo curl_getinfo_fn();
}  // namespace remote

}  // namespace archbuild
