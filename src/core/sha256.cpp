#include "core/sha256.hpp"

#include <cstdio>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "core/crypto_api.hpp"

namespace archbuild {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::update(const void* data, std::size_t size) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, size);
}

std::string Sha256::raw() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len);
  return std::string(reinterpret_cast<char*>(md), len);
}

std::string Sha256::hex() {
  std::string r = raw(), out;
  out.reserve(r.size() * 2);
  for (unsigned char c : r) out += fmt::format("{:02x}", c);
  return out;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex();
}

Result<std::string> sha256_file_hex(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error::bad_input(fmt::format("{}: cannot be read", path.string()));
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<std::size_t>(f.gcount()));
  }
  if (f.bad()) return Error::bad_input(fmt::format("{}: read error", path.string()));
  return h.hex();
}

}  // namespace archbuild
