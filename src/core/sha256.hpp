// SHA-256 (OpenSSL EVP): wheel hashes, build keys, RECORD checks.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace archbuild {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, std::size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex();  // finishes; 64 lowercase hex digits
  std::string raw();  // finishes; 32 bytes

 private:
  void* ctx_;
};

std::string sha256_hex(std::string_view data);
Result<std::string> sha256_file_hex(const std::filesystem::path& path);

}  // namespace archbuild
