#include "remote/http.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "remote/curl_api.hpp"

namespace archbuild::remote {

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

namespace {

struct Transfer {
  HttpResponse* response = nullptr;
  std::FILE* out = nullptr;
  bool write_failed = false;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  if (t->out) {
    if (std::fwrite(data, 1, len, t->out) != len) {
      t->write_failed = true;
      return 0;
    }
  } else {
    t->response->body.append(data, len);
  }
  return len;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  if (line.starts_with("HTTP/")) {  // a new response (after a redirect or 100): its own headers
    t->response->headers.clear();
    return line.size();
  }
  auto colon = line.find(':');
  if (colon == std::string::npos) return line.size();
  std::string name = line.substr(0, colon);
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string value = line.substr(colon + 1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.erase(value.begin());
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  t->response->headers[name] = value;
  return line.size();
}

size_t on_read(char* buffer, size_t size, size_t n, void* user) {
  return std::fread(buffer, 1, size * n, static_cast<std::FILE*>(user));
}

// Scheme, host and port only: the message names where, never a query or credential.
std::string where(const std::string& url) {
  auto scheme = url.find("://");
  auto path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  return url.substr(0, path);
}

}  // namespace

Result<HttpResponse> http(const HttpRequest& request, const HttpLimits& limits) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  auto setopt = curl_setopt_fn();
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), [](CURL* c) { curl_easy_cleanup(c); });
  if (!curl) return Error::missing_tool("libcurl: cannot create a transfer");
  HttpResponse response;
  Transfer t{&response};
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(nullptr, std::fclose), in(nullptr, std::fclose);
  if (request.save_to) {
    out.reset(std::fopen(request.save_to->c_str(), "wb"));
    if (!out) return Error::bad_input(fmt::format("cannot write {}", request.save_to->string()));
    t.out = out.get();
  }
  CURL* c = curl.get();
  setopt(c, CURLOPT_URL, request.url.c_str());
  setopt(c, CURLOPT_NOSIGNAL, 1L);
  setopt(c, CURLOPT_FOLLOWLOCATION, 1L);  // blobs are often served from object storage
  setopt(c, CURLOPT_MAXREDIRS, 5L);
#if LIBCURL_VERSION_NUM >= 0x075500  // the _STR options came in curl 7.85 (Debian 11, the bundle's root, has 7.74)
  setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
  setopt(c, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  setopt(c, CURLOPT_REDIR_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  setopt(c, CURLOPT_CONNECTTIMEOUT, static_cast<long>(limits.connect.count()));
  setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  setopt(c, CURLOPT_LOW_SPEED_TIME, limits.stall_seconds);
  setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  setopt(c, CURLOPT_WRITEDATA, &t);
  setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  setopt(c, CURLOPT_HEADERDATA, &t);
  // libcurl reads no CA variables itself (the curl tool does): the ones every TLS client honours.
  if (const char* f = std::getenv("SSL_CERT_FILE"); f && *f) setopt(c, CURLOPT_CAINFO, f);
  if (const char* d = std::getenv("SSL_CERT_DIR"); d && *d) setopt(c, CURLOPT_CAPATH, d);
  struct curl_slist* headers = nullptr;
  for (const auto& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, [](curl_slist* l) { curl_slist_free_all(l); });
  if (request.method == "HEAD") {
    setopt(c, CURLOPT_NOBODY, 1L);
  } else if (request.body_file) {
    in.reset(std::fopen(request.body_file->c_str(), "rb"));
    if (!in) return Error::bad_input(fmt::format("cannot read {}", request.body_file->string()));
    std::error_code ec;
    auto size = std::filesystem::file_size(*request.body_file, ec);
    setopt(c, CURLOPT_UPLOAD, 1L);
    setopt(c, CURLOPT_READFUNCTION, on_read);
    setopt(c, CURLOPT_READDATA, in.get());
    setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
    setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  } else if (request.body) {
    setopt(c, CURLOPT_POSTFIELDS, request.body->data());
    setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body->size()));
    setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  } else if (request.method != "GET") {
    setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    if (request.method == "POST" || request.method == "PUT") {
      setopt(c, CURLOPT_POSTFIELDS, "");
      setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(0));
    }
  }
  // Without it curl sends "Expect: 100-continue" and waits a second on registries that ignore it.
  header_list.reset(curl_slist_append(header_list.release(), "Expect:"));
  setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  CURLcode rc = curl_easy_perform(c);
  if (t.write_failed) return Error::bad_input(fmt::format("cannot write {}", request.save_to->string()));
  if (rc != CURLE_OK)
    return Error::missing_tool(fmt::format("{} {}: {}", request.method, where(request.url), curl_easy_strerror(rc)));
  curl_getinfo_fn()(c, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

}  // namespace archbuild::remote
