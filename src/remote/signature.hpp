// Signatures over what a store holds: Ed25519, or ECDSA P-256 with SHA-256 (OpenSSL's libcrypto,
// opened on first use), over
// the artifact's manifest digest ("sha256:<hex>"): the digest names every blob's digest, so one
// signature covers the wheel, its manifest and reports. Keys are PEM files (`openssl genpkey
// -algorithm ed25519`, or `-algorithm ec -pkeyopt ec_paramgen_curve:P-256`; the public half:
// `openssl pkey -pubout`).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace archbuild::remote {

std::string base64_encode(std::string_view data);
std::optional<std::string> base64_decode(std::string_view data);

struct Signed {
  std::string signature;  // base64
  std::string key_id;     // sha256 hex of the public key's DER form
  std::string algorithm;  // "ed25519" or "ecdsa-p256-sha256"
};

// Error (exit 2) naming the file when it is not an Ed25519 or ECDSA P-256 private key in PEM.
Result<Signed> sign_digest(const std::filesystem::path& private_key, std::string_view manifest_digest);

struct TrustedKey {
  std::filesystem::path file;
  std::string key_id;
  std::string der;  // the public key, DER (SubjectPublicKeyInfo)
};

// Error (exit 2) naming the file when it is not a PEM public key (or a private key: its public half is used).
Result<TrustedKey> load_trusted_key(const std::filesystem::path& public_key);

// Whether `signature` (base64) over `manifest_digest` verifies with `key`.
bool verify_digest(const TrustedKey& key, std::string_view manifest_digest, std::string_view signature);

}  // namespace archbuild::remote
