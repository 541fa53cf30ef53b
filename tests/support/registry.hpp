// Debian's docker-registry (the CNCF distribution registry) on 127.0.0.1, a free port, its storage
// in the caller's temp dir; optional htpasswd (bcrypt) basic auth. Stopped by the destructor.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "support/process.hpp"

namespace archbuild::test {

// Why a registry cannot be started here ("" when it can): for WARN("##archbuild-skip## …").
std::string registry_missing();

class Registry {
 public:
  // user/password: basic auth through an htpasswd file made with Python's crypt (bcrypt).
  // read_only: the registry's maintenance mode (reads answer, every push is refused).
  // tls: HTTPS with a certificate for 127.0.0.1 from a CA made here (ca_file()).
  Registry(const std::filesystem::path& dir, const std::string& user = "", const std::string& password = "",
           bool read_only = false, bool tls = false);
  ~Registry();
  int port() const { return port_; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  std::filesystem::path storage() const { return dir_ / "storage"; }
  std::filesystem::path ca_file() const { return dir_ / "ca.pem"; }  // with tls
  // The file holding a blob's bytes in the registry's storage (to tamper with in a test).
  std::filesystem::path blob_file(const std::string& digest) const;
  void stop();

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  std::unique_ptr<Background> server_;
};

int free_local_port();
bool local_port_accepts(int port);

}  // namespace archbuild::test
