// Builds that outgrow one machine: two archbuild "hosts" (separate cache directories) share one
// ccache remote storage on a redis-server this test starts on 127.0.0.1 and stops; the second
// host's compiles are served from it.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A port the kernel says is free on 127.0.0.1 now.
int free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

bool accepts(int port) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

}  // namespace

TEST_CASE("remote compiler cache: the second host's compiles are remote hits", "[cli][wheel][nvcc][redis]") {
  std::string why;
  std::string redis = t::which("redis-server"), ccache = t::which("ccache");
  if (!fs::exists("/usr/local/cuda/bin/nvcc")) why = "no nvcc at /usr/local/cuda/bin/nvcc";
  else if (redis.empty()) why = "no redis-server on PATH (Debian package redis-server)";
  else if (ccache.empty()) why = "no ccache on PATH";
  else if (!fs::exists("/usr/bin/python3")) why = "no /usr/bin/python3";
  if (!why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  t::TempDir dir;
  int port = free_port();
  // Loopback only, nothing written to disk; the Background destructor stops it.
  t::Background server(redis, {"--bind", "127.0.0.1", "--port", std::to_string(port), "--save", "",
                               "--appendonly", "no", "--dir", dir.path().string()});
  for (int i = 0; i < 200 && !accepts(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  REQUIRE(accepts(port));

  auto repos = t::run("/bin/bash", {std::string(ARCHBUILD_SOURCE_DIR) + "/tests/support/make-example-repos",
                                    (dir / "repos").string()});
  REQUIRE(repos.status == 0);
  std::string url = "file://" + (dir / "repos" / "minitorch").string();
  std::string remote = "redis://127.0.0.1:" + std::to_string(port);
  auto host = [&](const std::string& name) {
    t::RunOptions o;
    o.unset_env = {"CCACHE_DIR", "ARCHBUILD_REMOTE_CACHE"};
    auto r = t::archbuild({"--cache-dir", (dir / name).string(), "wheel", "--sm", "90", "--recipe",
                           std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml", "--source-url", url,
                           "--python", "/usr/bin/python3", "--out", (dir / (name + "-out")).string(), "--no-validate",
                           "--remote-cache", remote, "--json"},
                          o);
    INFO(name << ": " << r.err);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  };
  auto first = host("host-a");
  REQUIRE(first["compiler_cache"].is_object());
  CHECK(first["compiler_cache"]["misses"].get<long>() > 0);
  CHECK(first["compiler_cache"]["remote_hits"] == 0);
  auto second = host("host-b");
  REQUIRE(second["compiler_cache"].is_object());
  CHECK(second["reused"] == false);  // its own cache: it really built
  CHECK(second["compiler_cache"]["remote_hits"].get<long>() == first["compiler_cache"]["misses"].get<long>());
  CHECK(second["compiler_cache"]["misses"] == 0);
  CHECK(second["sha256"].is_string());
  WARN("remote cache: host A " << first["compiler_cache"].dump() << "; host B " << second["compiler_cache"].dump());
}
