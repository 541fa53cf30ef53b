#include "support/registry.hpp"

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace archbuild::test {

namespace fs = std::filesystem;

int free_local_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

bool local_port_accepts(int port) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

std::string registry_missing() {
  if (!fs::exists("/usr/bin/docker-registry")) return "no /usr/bin/docker-registry (Debian package docker-registry)";
  if (!fs::exists("/usr/bin/python3")) return "no /usr/bin/python3 (for the htpasswd file)";
  return "";
}

namespace {

// A CA and a server certificate for 127.0.0.1 signed by it, made with the openssl command.
void make_certificates(const fs::path& dir) {
  auto openssl = [&](std::vector<std::string> args) {
    auto r = run("/usr/bin/openssl", args);
    if (r.status != 0) throw std::runtime_error("openssl " + args.front() + " failed: " + r.err);
  };
  auto p = [&](const char* name) { return (dir / name).string(); };
  openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj",
           "/CN=archbuild test CA", "-keyout", p("ca.key"), "-out", p("ca.pem")});
  openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout",
           p("server.key"), "-out", p("server.csr")});
  std::ofstream(dir / "server.ext") << "subjectAltName=IP:127.0.0.1\n";
  openssl({"x509", "-req", "-in", p("server.csr"), "-CA", p("ca.pem"), "-CAkey", p("ca.key"), "-CAcreateserial",
           "-days", "2", "-extfile", p("server.ext"), "-out", p("server.pem")});
}

}  // namespace

Registry::Registry(const fs::path& dir, const std::string& user, const std::string& password, bool read_only, bool tls)
    : dir_(dir) {
  fs::create_directories(dir_ / "storage");
  port_ = free_local_port();
  std::string config = "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: " +
                       (dir_ / "storage").string() + "\n  delete:\n    enabled: true\n" +
                       (read_only ? "  maintenance:\n    readonly:\n      enabled: true\n" : "") +
                       "http:\n  addr: " + host() + "\n  secret: archbuild-test\n";
  if (tls) {
    make_certificates(dir_);
    config += "  tls:\n    certificate: " + (dir_ / "server.pem").string() + "\n    key: " + (dir_ / "server.key").string() + "\n";
  }
  if (!user.empty()) {
    // bcrypt (the only hash the registry's htpasswd accepts), cost 4: quick to check per request.
    auto h = run("/usr/bin/python3", {"-W", "ignore", "-c",
                                      "import crypt,sys; print(sys.argv[1] + ':' + crypt.crypt(sys.argv[2], "
                                      "crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))",
                                      user, password});
    if (h.status != 0) throw std::runtime_error("cannot make an htpasswd line: " + h.err);
    std::ofstream(dir_ / "htpasswd") << h.out;
    config += "auth:\n  htpasswd:\n    realm: archbuild-test\n    path: " + (dir_ / "htpasswd").string() + "\n";
  }
  std::ofstream(dir_ / "config.yml") << config;
  server_ = std::make_unique<Background>("/usr/bin/docker-registry", std::vector<std::string>{"serve", (dir_ / "config.yml").string()});
  for (int i = 0; i < 400 && !local_port_accepts(port_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  if (!local_port_accepts(port_)) throw std::runtime_error("docker-registry did not start on " + host());
}

Registry::~Registry() { stop(); }

void Registry::stop() {
  if (!server_) return;
  server_->kill(15);
  server_->wait();
  server_.reset();
}

fs::path Registry::blob_file(const std::string& digest) const {
  std::string hex = digest.substr(digest.find(':') + 1);
  return dir_ / "storage" / "docker" / "registry" / "v2" / "blobs" / "sha256" / hex.substr(0, 2) / hex / "data";
}

}  // namespace archbuild::test
