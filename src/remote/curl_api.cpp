#include "remote/curl_api.hpp"

namespace archbuild {

constinit const LazyLibrary libcurl{ARCHBUILD_LIBCURL_SONAME, "to talk to a build store (--store)",
                                    ARCHBUILD_LIBCURL_PROVIDED_BY};

namespace remote {

CurlSetopt curl_setopt_fn() {
  static CurlSetopt f = reinterpret_cast<CurlSetopt>(libcurl.symbol("curl_easy_setopt").take());
  return f;
}

CurlGetinfo curl_getinfo_fn() {
  static CurlGetinfo f = reinterpret_cast<CurlGetinfo>(libcurl.symbol("curl_easy_getinfo").take());
  return f;
}

}  // namespace remote
}  // namespace archbuild
