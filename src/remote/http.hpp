// One HTTP exchange over libcurl, in-process (only run/ starts processes; no `curl` command).
// TLS is verified against the system's CAs ($SSL_CERT_FILE / $SSL_CERT_DIR honoured); short
// connect and stall limits so a store that is down or slow costs seconds, never a hang.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace archbuild::remote {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;              // "Name: value"
  std::optional<std::string> body;               // sent from memory
  std::optional<std::filesystem::path> body_file;  // or from a file (wheels: hundreds of MB)
  std::optional<std::filesystem::path> save_to;  // the response body to this file (else in memory)
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lower-case; the last response's (after redirects)
  std::string body;                            // empty when saved to a file
  std::string header(const std::string& lower_name) const;
};

struct HttpLimits {
  std::chrono::seconds connect{5};  // a host that does not answer: a warning in seconds
  long stall_seconds = 20;          // below 1 byte/s this long: given up
};

// Error (exit 3, "the store is unreachable") when no HTTP answer came (refused, DNS, TLS, a
// stall); any HTTP status is a response. The message never contains a header's value.
Result<HttpResponse> http(const HttpRequest& request, const HttpLimits& limits = {});

}  // namespace archbuild::remote
