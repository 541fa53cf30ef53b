// The shared build store (docs/store.md): a build key's result as one OCI artifact on a registry,
// tagged by the key. Blobs, each with its media type and title:
//   the wheel                        application/vnd.archbuild.wheel.v1+zip
//   the key's manifest (provenance)  application/vnd.archbuild.manifest.v1+json
//   the validation report            application/vnd.archbuild.validation.v1+json
//   the build report                 application/vnd.archbuild.build-report.v1+json (when kept)
// An Ed25519 signature over the artifact's manifest digest is its own artifact, tagged
// `sha256-<hex>.sig` (cosign's tag scheme) with the signed one as `subject`.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "remote/credentials.hpp"
#include "remote/registry.hpp"
#include "remote/signature.hpp"

namespace archbuild::remote {

inline constexpr const char* artifact_type = "application/vnd.archbuild.build.v1";
inline constexpr const char* signature_type = "application/vnd.archbuild.signature.v1";

struct StoreConfig {
  std::string url;                               // oci://HOST[:PORT]/REPOSITORY
  bool required = false;                         // a store that cannot be read fails the command
  std::optional<std::filesystem::path> sign_key;  // Ed25519 private key: what is pushed is signed
  std::vector<std::filesystem::path> trust;      // public keys: a pulled result must be signed by one
  std::optional<std::filesystem::path> docker_config;  // default: docker_config_path()
};

struct Pulled {
  std::filesystem::path wheel;  // in the staging directory, under its file name
  std::string filename;
  std::string sha256;
  nlohmann::json manifest;      // the key's manifest as host A wrote it
  nlohmann::json validation;
  nlohmann::json build_report;
  std::string digest;           // the artifact's manifest digest
  std::string signed_by;        // the trusted key's file; empty when no signature was asked for
};

struct Pushed {
  bool pushed = false;          // false: the store had the key already (another host's push)
  std::string digest;
  bool signed_ = false;
};

class BuildStore {
 public:
  // Bad input (exit 2): the URL, a key file, docker's config.json.
  static Result<BuildStore> open(const StoreConfig& config, const CaptureFn& capture);
  const StoreUrl& url() const { return registry_.url(); }
  const StoreConfig& config() const { return config_; }

  // The key's artifact, nullopt when the store does not have it. Error: unreachable (exit 3) or refused.
  Result<std::optional<Manifest>> lookup(const std::string& key);
  // Downloads and checks everything: the signature (when keys are trusted), each blob's digest,
  // the wheel's sha256 against the pushed manifest. Error (exit 1): refused, with why.
  Result<Pulled> pull(const std::string& key, const Manifest& manifest, const std::filesystem::path& staging);
  // The signature check `pull` makes, alone (for `matrix`: a key `wheel` would refuse is no key):
  // the trusted key's file, "" when no key is trusted. Error (exit 1): refused, with why.
  Result<std::string> check_trust(const std::string& key, const Manifest& manifest, const std::filesystem::path& staging);
  // Pushes a validated result (skipped when the key is there already: first push wins).
  Result<Pushed> push(const std::string& key, const std::filesystem::path& wheel, const std::string& filename,
                      const nlohmann::json& manifest, const nlohmann::json& validation, const nlohmann::json& build_report);

 private:
  BuildStore(StoreConfig config, Registry registry, std::vector<TrustedKey> trusted)
      : config_(std::move(config)), registry_(std::move(registry)), trusted_(std::move(trusted)) {}
  Result<std::string> check_signature(const std::string& key, const Manifest& manifest, const std::filesystem::path& staging);

  StoreConfig config_;
  Registry registry_;
  std::vector<TrustedKey> trusted_;
};

}  // namespace archbuild::remote
