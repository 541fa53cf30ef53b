#include "remote/registry.hpp"

#include <array>
#include <chrono>
#include <cctype>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/sha256.hpp"
#include "core/text.hpp"
#include "remote/signature.hpp"

namespace archbuild::remote {

using nlohmann::json;

namespace {

const char* const accept_manifests =
    "Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

std::string percent_encode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

// A 5xx answer to a request that changes nothing (GET, HEAD) is asked again, after a growing
// wait: while another host's upload of the same blob is committed, distribution's storage can
// answer a HEAD of that blob with 500. A refusal that lasts through the waits is the answer.
constexpr std::array<std::chrono::milliseconds, 3> kRetryWaits{std::chrono::milliseconds(100),
                                                               std::chrono::milliseconds(300),
                                                               std::chrono::milliseconds(900)};

bool worth_asking_again(const HttpRequest& q, const HttpResponse& r) {
  return (q.method == "GET" || q.method == "HEAD") && r.status >= 500 && r.status <= 599 && r.status != 501;
}

// key="value" pairs of a WWW-Authenticate challenge (RFC 7235), after its scheme. Read by hand:
// the header is the registry's bytes, and std::regex recurses per character.
std::map<std::string, std::string> challenge_params(const std::string& header) {
  std::map<std::string, std::string> out;
  auto word = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t i = 0; i < header.size();) {
    if (!word(header[i])) {
      ++i;
      continue;
    }
    std::size_t start = i;
    while (i < header.size() && word(header[i])) ++i;
    if (i + 1 >= header.size() || header[i] != '=' || header[i + 1] != '"') continue;
    std::size_t open = i + 2, close = header.find('"', open);
    if (close == std::string::npos) break;
    out[header.substr(start, i - start)] = header.substr(open, close - open);
    i = close + 1;
  }
  return out;
}

}  // namespace

std::string sha256_digest(std::string_view bytes) { return "sha256:" + sha256_hex(bytes); }

std::string StoreUrl::text() const { return fmt::format("{}://{}/{}", plain_http ? "oci+http" : "oci", host, repository); }

std::string StoreUrl::base() const { return fmt::format("{}://{}/v2/{}", plain_http ? "http" : "https", host, repository); }

namespace {

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// One repository path component: [a-z0-9]+([._-][a-z0-9]+)* (the distribution spec's grammar).
bool repository_component(std::string_view c) {
  if (c.empty() || !lower_alnum(c.front()) || !lower_alnum(c.back())) return false;
  for (std::size_t i = 0; i < c.size(); ++i)
    if (!lower_alnum(c[i]) && !((c[i] == '.' || c[i] == '_' || c[i] == '-') && lower_alnum(c[i + 1]))) return false;
  return true;
}

// HOST[:PORT]: [A-Za-z0-9.-]+, then 1-5 digits after a colon.
bool host_and_port(std::string_view h) {
  auto colon = h.find(':');
  auto host = h.substr(0, colon);
  if (host.empty()) return false;
  for (char c : host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return false;
  if (colon == std::string_view::npos) return true;
  auto port = h.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  for (char c : port)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

// Read by hand, not with std::regex: libstdc++'s matcher recurses once per character, and a
// 50 KB host overflowed the stack (SIGSEGV, no message). The length is bounded first.
Result<StoreUrl> parse_store_url(const std::string& url) {
  auto refuse = [&](std::string why) {
    return Error::bad_input(fmt::format("--store {}: {}not a store URL; valid: oci://HOST[:PORT]/REPOSITORY (HTTPS), or "
                                        "oci+http://HOST[:PORT]/REPOSITORY for a registry without TLS (REPOSITORY: "
                                        "lower-case path components, e.g. oci://ghcr.io/acme/torch-builds)",
                                        text::quoted(url), why));
  };
  if (url.size() > kMaxStoreUrl)
    return refuse(fmt::format("{} characters, more than a store URL has (at most {}); ", url.size(), kMaxStoreUrl));
  std::string_view rest(url);
  StoreUrl s;
  if (rest.substr(0, 11) == "oci+http://") {
    s.plain_http = true;
    rest.remove_prefix(11);
  } else if (rest.substr(0, 6) == "oci://") {
    rest.remove_prefix(6);
  } else {
    return refuse("");
  }
  auto slash = rest.find('/');
  if (slash == std::string_view::npos || !host_and_port(rest.substr(0, slash))) return refuse("");
  auto repository = rest.substr(slash + 1);
  for (std::size_t from = 0;;) {
    auto next = repository.find('/', from);
    if (!repository_component(repository.substr(from, next == std::string_view::npos ? next : next - from)))
      return refuse("");
    if (next == std::string_view::npos) break;
    from = next + 1;
  }
  s.host = std::string(rest.substr(0, slash));
  s.repository = std::string(repository);
  return s;
}

Registry::Registry(StoreUrl url, std::optional<Credentials> credentials, HttpLimits limits)
    : url_(std::move(url)), credentials_(std::move(credentials)), limits_(limits) {}

Error Registry::refused(const std::string& what, const HttpResponse& r) const {
  // The registry's error code, never its whole body (it may echo a request).
  std::string code;
  json doc = json::parse(r.body, nullptr, false);
  if (doc.is_object() && doc.contains("errors") && doc["errors"].is_array() && !doc["errors"].empty() &&
      doc["errors"][0].is_object())
    code = fmt::format(" ({}: {})", doc["errors"][0].value("code", std::string()),
                       text::printable(doc["errors"][0].value("message", std::string())));
  Exit exit = r.status >= 500 ? Exit::missing_tool : (r.status == 401 || r.status == 403) ? Exit::bad_input : Exit::not_fine;
  std::string hint;
  if (r.status == 401 || r.status == 403)
    hint = credentials_ ? fmt::format("; the credentials from {} were refused", credentials_->origin)
                        : fmt::format("; no credentials for {} (docker login {}, or an \"auths\" entry in docker's config.json)",
                                      url_.host, url_.host);
  return Error{exit, fmt::format("{}: {} answered HTTP {}{}{}", what, url_.text(), r.status, code, hint)};
}

Result<Ok> Registry::authenticate(const std::string& challenge, bool push) {
  std::string scheme = challenge.substr(0, challenge.find(' '));
  for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string basic = credentials_ ? base64_encode(credentials_->username + ":" + credentials_->secret) : std::string();
  if (scheme == "basic") {
    if (!credentials_) return Ok{};  // the retry answers 401 with the hint
    if (credentials_->identity_token)
      return Error::bad_input(fmt::format(
          "{}: the registry asks for Basic auth, and the credentials from {} are an identity token, which is only "
          "exchanged at a bearer token service (log in with a password: docker login {})",
          url_.text(), credentials_->origin, url_.host));
    authorization_ = "Authorization: Basic " + basic;
    authorization_push_ = true;
    return Ok{};
  }
  if (scheme != "bearer") return Error::bad_input(fmt::format("{}: unknown auth scheme {}", url_.text(), text::quoted(scheme)));
  auto p = challenge_params(challenge);
  if (p["realm"].empty()) return Error::bad_input(fmt::format("{}: a bearer challenge without a realm", url_.text()));
  std::string scope = fmt::format("repository:{}:{}", url_.repository, push ? "pull,push" : "pull");
  std::string token_url = p["realm"] + (p["realm"].find('?') == std::string::npos ? "?" : "&") + "scope=" + percent_encode(scope);
  if (!p["service"].empty()) token_url += "&service=" + percent_encode(p["service"]);
  HttpRequest t;
  t.url = token_url;
  if (credentials_ && credentials_->identity_token) {
    // An identity token is an OAuth2 refresh token: POSTed to the realm as a form, as docker
    // does (distribution's token spec, "OAuth2 Token"), never sent as a password.
    t.url = p["realm"];
    t.method = "POST";
    t.headers.push_back("Content-Type: application/x-www-form-urlencoded");
    std::string form = "grant_type=refresh_token&client_id=archbuild&scope=" + percent_encode(scope) +
                       "&refresh_token=" + percent_encode(credentials_->secret);
    if (!p["service"].empty()) form += "&service=" + percent_encode(p["service"]);
    t.body = form;
  } else if (credentials_) {
    t.headers.push_back("Authorization: Basic " + basic);
  }
  auto r = http(t, limits_);
  if (!r) return r.error();
  if (r->status != 200) return refused("the token endpoint", *r);
  json doc = json::parse(r->body, nullptr, false);
  std::string token = doc.is_object() ? doc.value("token", doc.value("access_token", std::string())) : std::string();
  if (token.empty()) return Error::bad_input(fmt::format("{}: the token endpoint gave no token", url_.text()));
  authorization_ = "Authorization: Bearer " + token;
  authorization_push_ = push;
  return Ok{};
}

Result<HttpResponse> Registry::send(HttpRequest request, bool push) {
  auto once = [&]() {
    HttpRequest q = request;
    if (!authorization_.empty()) q.headers.push_back(authorization_);
    auto r = http(q, limits_);
    for (auto wait : kRetryWaits) {
      if (!r || !worth_asking_again(q, *r)) break;
      std::this_thread::sleep_for(wait);
      r = http(q, limits_);
    }
    return r;
  };
  // A pull token does not allow a push: ask again for the wider scope.
  if (push && !authorization_.empty() && !authorization_push_) authorization_.clear();
  auto r = once();
  if (!r || r->status != 401) return r;
  std::string challenge = r->header("www-authenticate");
  if (challenge.empty()) return r;
  if (auto a = authenticate(challenge, push); !a) return a.error();
  if (authorization_.empty()) return r;
  return once();
}

Result<std::optional<Manifest>> Registry::get_manifest(const std::string& reference) {
  HttpRequest q;
  q.url = url_.base() + "/manifests/" + reference;
  q.headers.push_back(accept_manifests);
  auto r = send(q, false);
  if (!r) return r.error();
  if (r->status == 404) return std::optional<Manifest>();
  if (r->status != 200) return refused("reading manifest " + reference, *r);
  Manifest m{r->body, sha256_digest(r->body)};
  std::string claimed = r->header("docker-content-digest");
  if ((reference.starts_with("sha256:") && reference != m.digest) || (!claimed.empty() && claimed != m.digest))
    return Error::not_fine(fmt::format("{}: the manifest of {} does not match its digest (got {}): refused", url_.text(),
                                       reference, m.digest));
  return std::optional<Manifest>(m);
}

Result<bool> Registry::has_manifest(const std::string& reference) {
  HttpRequest q;
  q.method = "HEAD";
  q.url = url_.base() + "/manifests/" + reference;
  q.headers.push_back(accept_manifests);
  auto r = send(q, false);
  if (!r) return r.error();
  if (r->status == 404) return false;
  if (r->status != 200) return refused("looking up manifest " + reference, *r);
  return true;
}

Result<Ok> Registry::put_manifest(const std::string& reference, const std::string& bytes, const std::string& media_type) {
  HttpRequest q;
  q.method = "PUT";
  q.url = url_.base() + "/manifests/" + reference;
  q.headers.push_back("Content-Type: " + media_type);
  q.body = bytes;
  auto r = send(q, true);
  if (!r) return r.error();
  if (r->status != 201 && r->status != 200) return refused("pushing manifest " + reference, *r);
  return Ok{};
}

Result<bool> Registry::has_blob(const std::string& digest) {
  HttpRequest q;
  q.method = "HEAD";
  q.url = url_.base() + "/blobs/" + digest;
  auto r = send(q, false);
  if (!r) return r.error();
  if (r->status == 404) return false;
  if (r->status != 200) return refused("looking up blob " + digest, *r);
  return true;
}

Result<Ok> Registry::push_blob(const Descriptor& d, const std::optional<std::filesystem::path>& file, const std::string& bytes) {
  auto has = has_blob(d.digest);
  if (!has) return has.error();
  if (*has) return Ok{};
  HttpRequest start;
  start.method = "POST";
  start.url = url_.base() + "/blobs/uploads/";
  auto r = send(start, true);
  if (!r) return r.error();
  if (r->status != 202) return refused("starting the upload of blob " + d.digest, *r);
  std::string location = r->header("location");
  if (location.empty()) return Error::not_fine(fmt::format("{}: an upload without a Location", url_.text()));
  if (location.starts_with("/")) location = fmt::format("{}://{}{}", url_.plain_http ? "http" : "https", url_.host, location);
  HttpRequest put;
  put.method = "PUT";
  put.url = location + (location.find('?') == std::string::npos ? "?" : "&") + "digest=" + percent_encode(d.digest);
  put.headers.push_back("Content-Type: application/octet-stream");
  if (file) put.body_file = *file;
  else put.body = bytes;
  auto done = send(put, true);
  if (!done) return done.error();
  if (done->status != 201) return refused("uploading blob " + d.digest, *done);
  return Ok{};
}

Result<Ok> Registry::pull_blob(const Descriptor& d, const std::filesystem::path& dest) {
  HttpRequest q;
  q.url = url_.base() + "/blobs/" + d.digest;
  q.save_to = dest;
  auto r = send(q, false);
  std::error_code ec;
  if (!r || r->status != 200) {
    std::filesystem::remove(dest, ec);
    if (!r) return r.error();
    return refused("reading blob " + d.digest, *r);
  }
  auto size = std::filesystem::file_size(dest, ec);
  auto sha = sha256_file_hex(dest);
  if (!sha || "sha256:" + *sha != d.digest || size != d.size) {
    std::filesystem::remove(dest, ec);
    return Error::not_fine(fmt::format("{}: blob {} does not match its digest (got sha256:{}, {} bytes): tampered with or "
                                       "damaged in the registry; refused",
                                       url_.text(), d.digest, sha ? *sha : std::string("?"), size));
  }
  return Ok{};
}

}  // namespace archbuild::remote
