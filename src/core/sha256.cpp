#include "core/sha256.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "core/crypto_api.hpp"
#include "core/path_kind.hpp"

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
  // Only a regular file, opened without waiting: a FIFO put where a wheel was would block a read.
  auto fd = paths::open_regular_file(path, "file");
  if (!fd) return fd.error();
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(*fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(*fd);
      return Error::bad_input(fmt::format("{}: read error: {}", path.string(), std::strerror(e)));
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(n));
  }
  ::close(*fd);
  return h.hex();
}

}  // namespace archbuild
