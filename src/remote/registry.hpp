// A client of the OCI distribution spec (v1.1, as `oras`, `skopeo` and Spack's OCI buildcache
// speak it) for one repository: manifests by tag or digest, blobs by digest (monolithic upload),
// and the registry's auth: Basic with the user's credentials, or the bearer-token handshake the
// registry's `WWW-Authenticate` asks for (token endpoint with the credentials, scope per action).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "remote/credentials.hpp"
#include "remote/http.hpp"

namespace archbuild::remote {

// oci://HOST[:PORT]/REPOSITORY (HTTPS, verified) or oci+http://HOST[:PORT]/REPOSITORY (plain
// HTTP, only when written so: a test registry on 127.0.0.1).
struct StoreUrl {
  bool plain_http = false;
  std::string host;        // host[:port]
  std::string repository;  // lower-case path components [a-z0-9._-/]
  std::string text() const;
  std::string base() const;  // https://host/v2/repository
};

// The longest store URL read (a DNS name is at most 253 characters; a repository name far less
// than the rest): a longer one is refused by its length before it is parsed.
inline constexpr std::size_t kMaxStoreUrl = 2048;

// Error (exit 2): what is wrong and the form that is valid.
Result<StoreUrl> parse_store_url(const std::string& url);

struct Descriptor {
  std::string media_type;
  std::string digest;  // sha256:<hex>
  std::uintmax_t size = 0;
};

struct Manifest {
  std::string bytes;   // exactly as the registry holds it (its digest is over these)
  std::string digest;  // sha256:<hex> of bytes
};

class Registry {
 public:
  Registry(StoreUrl url, std::optional<Credentials> credentials, HttpLimits limits = {});
  const StoreUrl& url() const { return url_; }

  // The manifest under a tag or digest; nullopt when absent (404). A digest reference and the
  // registry's Docker-Content-Digest header are checked against the bytes.
  Result<std::optional<Manifest>> get_manifest(const std::string& reference);
  Result<bool> has_manifest(const std::string& reference);
  Result<Ok> put_manifest(const std::string& reference, const std::string& bytes, const std::string& media_type);
  Result<bool> has_blob(const std::string& digest);
  // Uploads a file or bytes as the blob `digest` (skipped when the registry has it).
  Result<Ok> push_blob(const Descriptor& d, const std::optional<std::filesystem::path>& file, const std::string& bytes = {});
  // Downloads the blob to `dest` and checks its size and digest (a mismatch: exit 1, the file removed).
  Result<Ok> pull_blob(const Descriptor& d, const std::filesystem::path& dest);

 private:
  Result<HttpResponse> send(HttpRequest request, bool push);
  Result<Ok> authenticate(const std::string& challenge, bool push);
  Error refused(const std::string& what, const HttpResponse& r) const;

  StoreUrl url_;
  std::optional<Credentials> credentials_;
  HttpLimits limits_;
  std::string authorization_;  // "Authorization: …" once known (never printed)
  bool authorization_push_ = false;
};

std::string sha256_digest(std::string_view bytes);

}  // namespace archbuild::remote
