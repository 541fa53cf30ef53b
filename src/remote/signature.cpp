#include "remote/signature.hpp"

#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "core/crypto_api.hpp"
#include "core/sha256.hpp"

// The libcrypto functions only signatures need (core/crypto_api.hpp has the hashing ones), as
// objects of the same names in their own namespace (core's list may grow the same names).
#define ARCHBUILD_SIGNATURE_FUNCTIONS(X) \
  X(CRYPTO_free)                         \
  X(EVP_DecodeBlock)                     \
  X(EVP_DigestSign)                      \
  X(EVP_DigestSignInit)                  \
  X(EVP_DigestVerify)                    \
  X(EVP_DigestVerifyInit)                \
  X(EVP_PKEY_free)                       \
  X(PEM_read_PUBKEY)                     \
  X(PEM_read_PrivateKey)                 \
  X(d2i_PUBKEY)                          \
  X(i2d_PUBKEY)

namespace archbuild::remote {
namespace ossl {
#define ARCHBUILD_LAZY_SYMBOL(name) constinit inline LazySymbol<decltype(&::name)> name{libcrypto, #name};
ARCHBUILD_SIGNATURE_FUNCTIONS(ARCHBUILD_LAZY_SYMBOL)
#undef ARCHBUILD_LAZY_SYMBOL
// OpenSSL 3 renamed these (the old names are macros there, not exported); the bundle built in
// Debian 11 links OpenSSL 1.1, where only the old names exist.
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
constinit inline LazySymbol<decltype(&::EVP_PKEY_get_base_id)> pkey_base_id{libcrypto, "EVP_PKEY_get_base_id"};
constinit inline LazySymbol<decltype(&::EVP_PKEY_get_bits)> pkey_bits{libcrypto, "EVP_PKEY_get_bits"};
#else
constinit inline LazySymbol<decltype(&::EVP_PKEY_base_id)> pkey_base_id{libcrypto, "EVP_PKEY_base_id"};
constinit inline LazySymbol<decltype(&::EVP_PKEY_bits)> pkey_bits{libcrypto, "EVP_PKEY_bits"};
#endif
}  // namespace ossl

namespace {

using Key = std::unique_ptr<EVP_PKEY, void (*)(EVP_PKEY*)>;
using Ctx = std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)>;

Key no_key() { return Key(nullptr, [](EVP_PKEY* k) { ossl::EVP_PKEY_free(k); }); }
Ctx new_ctx() { return Ctx(EVP_MD_CTX_new(), [](EVP_MD_CTX* c) { EVP_MD_CTX_free(c); }); }

Key read_pem(const std::filesystem::path& file, bool private_key) {
  Key key = no_key();
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(file.c_str(), "rb"), std::fclose);
  if (!f) return key;
  key.reset(private_key ? ossl::PEM_read_PrivateKey(f.get(), nullptr, nullptr, nullptr)
                        : ossl::PEM_read_PUBKEY(f.get(), nullptr, nullptr, nullptr));
  return key;
}

std::string public_der(EVP_PKEY* key) {
  unsigned char* der = nullptr;
  int n = ossl::i2d_PUBKEY(key, &der);
  if (n <= 0) return {};
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(n));
  ossl::CRYPTO_free(der, __FILE__, __LINE__);
  return out;
}

// The key types a store signature may use: Ed25519 (signs the message itself), and ECDSA on
// P-256 over SHA-256 (cosign's and most KMS' default key type). nullopt: not one of them.
struct Scheme {
  const char* algorithm;
  bool sha256;  // EVP_DigestSign hashes with SHA-256 first (ECDSA)
};
std::optional<Scheme> scheme_of(EVP_PKEY* key) {
  if (!key) return std::nullopt;
  int id = ossl::pkey_base_id(key);
  if (id == EVP_PKEY_ED25519) return Scheme{"ed25519", false};
  if (id == EVP_PKEY_EC && ossl::pkey_bits(key) == 256) return Scheme{"ecdsa-p256-sha256", true};
  return std::nullopt;
}

}  // namespace

std::string base64_encode(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(data.data()),
                          static_cast<int>(data.size()));
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(std::string_view data) {
  std::string in;
  for (char c : data)
    if (c != '\n' && c != '\r' && c != ' ') in += c;
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out(in.size() / 4 * 3 + 1, '\0');
  int n = ossl::EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t pad = in.ends_with("==") ? 2 : in.ends_with("=") ? 1 : 0;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

Result<Signed> sign_digest(const std::filesystem::path& private_key, std::string_view manifest_digest) {
  Key key = read_pem(private_key, true);
  auto scheme = scheme_of(key.get());
  if (!scheme)
    return Error::bad_input(fmt::format("--store-sign-key {}: not an Ed25519 or ECDSA P-256 private key in PEM (make "
                                        "one with `openssl genpkey -algorithm ed25519 -out FILE`)",
                                        private_key.string()));
  Ctx ctx = new_ctx();
  const auto* msg = reinterpret_cast<const unsigned char*>(manifest_digest.data());
  size_t len = 0;
  std::string sig;
  if (ossl::EVP_DigestSignInit(ctx.get(), nullptr, scheme->sha256 ? EVP_sha256() : nullptr, nullptr, key.get()) == 1 &&
      ossl::EVP_DigestSign(ctx.get(), nullptr, &len, msg, manifest_digest.size()) == 1) {
    sig.resize(len);
    if (ossl::EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, msg, manifest_digest.size()) == 1)
      sig.resize(len);
    else
      sig.clear();
  }
  if (sig.empty()) return Error::bad_input(fmt::format("--store-sign-key {}: signing failed", private_key.string()));
  return Signed{base64_encode(sig), sha256_hex(public_der(key.get())), scheme->algorithm};
}

Result<TrustedKey> load_trusted_key(const std::filesystem::path& public_key) {
  Key key = read_pem(public_key, false);
  if (!key) key = read_pem(public_key, true);
  if (!scheme_of(key.get()))
    return Error::bad_input(fmt::format("--store-trust {}: not an Ed25519 or ECDSA P-256 public key in PEM (from the "
                                        "signing key: `openssl pkey -in KEY -pubout -out FILE`)",
                                        public_key.string()));
  TrustedKey t;
  t.file = public_key;
  t.der = public_der(key.get());
  t.key_id = sha256_hex(t.der);
  return t;
}

bool verify_digest(const TrustedKey& trusted, std::string_view manifest_digest, std::string_view signature) {
  auto sig = base64_decode(signature);
  if (!sig) return false;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(trusted.der.data());
  Key key = no_key();
  key.reset(ossl::d2i_PUBKEY(nullptr, &p, static_cast<long>(trusted.der.size())));
  auto scheme = scheme_of(key.get());
  if (!scheme) return false;
  Ctx ctx = new_ctx();
  return ossl::EVP_DigestVerifyInit(ctx.get(), nullptr, scheme->sha256 ? EVP_sha256() : nullptr, nullptr, key.get()) == 1 &&
         ossl::EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig->data()), sig->size(),
                                reinterpret_cast<const unsigned char*>(manifest_digest.data()), manifest_digest.size()) == 1;
}

}  // namespace archbuild::remote
