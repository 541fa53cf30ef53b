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
#include "support/registry.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using t::free_local_port;
using t::local_port_accepts;

}  // namespace

TEST_CASE("remote compiler cache: the second host's compiles are remote hits", "[cli][wheel][nvcc][redis]") {
  std::string why;
  std::string redis = t::which("redis-server"), ccache = t::which("ccache");
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) why = u;
  else if (redis.empty()) why = "no redis-server on PATH (Debian package redis-server)";
  else if (ccache.empty()) why = "no ccache on PATH";
  else if (!fs::exists("/usr/bin/python3")) why = "no /usr/bin/python3";
  if (!why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  int port = free_local_port();
  // Loopback only, nothing written to disk; the Background destructor stops it.
  t::Background server(redis, {"--bind", "127.0.0.1", "--port", std::to_string(port), "--save", "",
                               "--appendonly", "no", "--dir", dir.path().string()});
  for (int i = 0; i < 200 && !local_port_accepts(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  REQUIRE(local_port_accepts(port));

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
  CHECK(second["sha256"] == first["sha256"]);  // two cache paths, one wheel
  WARN("remote cache: host A " << first["compiler_cache"].dump() << "; host B " << second["compiler_cache"].dump());
}

// sccache in place of ccache (the caller's SCCACHE_* settings reach it): the CUDA compile goes
// through archbuild's launcher and then sccache, and the wheel is the one a build without any
// compiler cache gives. The sccache server listens on a free loopback port and is stopped here.
TEST_CASE("sccache: compiles go through it and the wheel is the uncached one", "[cli][wheel][nvcc][sccache]") {
  std::string why;
  std::string sccache = t::which("sccache");
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) why = u;
  else if (sccache.empty()) why = "no sccache on PATH (Debian package sccache)";
  else if (!fs::exists("/usr/bin/python3")) why = "no /usr/bin/python3";
  if (!why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  auto repos = t::run("/bin/bash", {std::string(ARCHBUILD_SOURCE_DIR) + "/tests/support/make-example-repos",
                                    (dir / "repos").string()});
  REQUIRE(repos.status == 0);
  t::RunOptions env;
  env.env = {{"SCCACHE_SERVER_PORT", std::to_string(free_local_port())}, {"SCCACHE_DIR", (dir / "sccache").string()},
             {"SCCACHE_IDLE_TIMEOUT", "60"}};
  env.unset_env = {"CCACHE_DIR", "ARCHBUILD_REMOTE_CACHE", "RUSTC_WRAPPER"};
  struct StopServer {
    std::string sccache;
    t::RunOptions env;
    ~StopServer() { t::run(sccache, {"--stop-server"}, env); }
  } stop{sccache, env};
  auto build = [&](const std::string& name, const std::string& cache) {
    auto r = t::archbuild({"--cache-dir", (dir / name).string(), "wheel", "--sm", "90", "--recipe",
                           std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml", "--source-url",
                           "file://" + (dir / "repos" / "minitorch").string(), "--python", "/usr/bin/python3",
                           "--out", (dir / (name + "-out")).string(), "--no-validate", "--compiler-cache", cache,
                           "--json"},
                          env);
    INFO(name << ": " << r.err);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  };
  auto with = build("with-sccache", "sccache");
  auto without = build("without", "none");
  CHECK(with["sha256"] == without["sha256"]);
  auto stats = t::run(sccache, {"--show-stats", "--stats-format", "json"}, env);
  REQUIRE(stats.status == 0);
  auto s = json::parse(stats.out)["stats"];
  INFO(stats.out);
  CHECK(s["compile_requests"].get<long>() >= 3);  // kernels.cu, minidep's and minitorch's C++
  long cuda = 0;
  for (const auto& counts : {s["cache_misses"]["counts"], s["cache_hits"]["counts"]})
    if (counts.contains("CUDA")) cuda += counts["CUDA"].get<long>();
  CHECK(cuda >= 1);
  CHECK(s["compile_fails"] == 0);
}
