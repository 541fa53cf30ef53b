// The shared build store end to end: Debian's docker-registry on 127.0.0.1 (basic auth, storage in
// a temp dir) and two archbuild "hosts" (two cache directories). Host A builds the example and
// pushes it, signed; host B gets host A's wheel with no stage run; `plan` says the store has the
// key; with the registry stopped, a third host builds locally after a warning, and
// --store-required makes that exit 3. The password appears in no output.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/registry.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("build store: host B gets host A's wheel with no stage run, and a store that is down gives a local build",
          "[cli][wheel][nvcc][registry]") {
  std::string why = t::registry_missing();
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) why = u;
  if (!why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  const std::string password = "s3cret-61d0-never-printed";
  auto reg = std::make_unique<t::Registry>(dir / "registry", "builder", password);
  auto repos = t::run("/bin/bash", {std::string(ARCHBUILD_SOURCE_DIR) + "/tests/support/make-example-repos",
                                    (dir / "repos").string()});
  REQUIRE(repos.status == 0);
  std::string b64 = t::run("/usr/bin/python3", {"-c", "import base64,sys; print(base64.b64encode(sys.argv[1].encode()).decode())",
                                                "builder:" + password}).out;
  b64.erase(b64.find_last_not_of("\n") + 1);
  dir.write("docker/config.json", json{{"auths", {{reg->host(), {{"auth", b64}}}}}}.dump());
  auto priv = dir / "sign.pem", pub = dir / "sign.pub.pem";
  REQUIRE(t::run("/usr/bin/openssl", {"genpkey", "-algorithm", "ed25519", "-out", priv.string()}).status == 0);
  REQUIRE(t::run("/usr/bin/openssl", {"pkey", "-in", priv.string(), "-pubout", "-out", pub.string()}).status == 0);
  std::string url = "file://" + (dir / "repos" / "minitorch").string();
  std::string store = "oci+http://" + reg->host() + "/builds/minitorch";
  auto run = [&](const std::string& host, const std::string& command, std::vector<std::string> extra) {
    t::RunOptions o;
    o.unset_env = {"CCACHE_DIR", "ARCHBUILD_REMOTE_CACHE", "ARCHBUILD_STORE", "ARCHBUILD_STORE_TRUST"};
    o.env["DOCKER_CONFIG"] = (dir / "docker").string();
    std::vector<std::string> args = {"--cache-dir", (dir / host).string(), command, "--sm", "90", "--recipe",
                                      std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml", "--source-url",
                                      url, "--python", "/usr/bin/python3", "--store", store, "--json"};
    if (command == "wheel") args.insert(args.end(), {"--out", (dir / (host + "-out")).string()});
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = t::archbuild(args, o);
    CHECK(r.out.find(password) == std::string::npos);
    CHECK(r.err.find(password) == std::string::npos);
    CHECK(r.err.find(b64) == std::string::npos);
    return r;
  };
  auto a = run("host-a", "wheel", {"--store-sign-key", priv.string()});
  INFO("host A: " << a.err);
  REQUIRE(a.status == 0);
  json da = json::parse(a.out);
  CHECK(da["store"]["has_key"] == false);
  CHECK(da["store"]["pushed"] == true);
  CHECK(da["store"]["signed"] == true);
  CHECK_FALSE(da["stages_run"].empty());

  // `plan` where the tree is fetched (its key is final): the store has it.
  auto p = run("host-a", "plan", {});
  INFO("plan: " << p.err);
  REQUIRE(p.status == 0);
  json dp = json::parse(p.out);
  CHECK(dp["key"] == da["key"]);
  CHECK(dp["store"]["key_final"] == true);
  CHECK(dp["store"]["has_key"] == true);
  CHECK(dp["store"]["digest"] == da["store"]["digest"]);

  // `matrix --store`: the job whose key host A pushed is no job; the other is looked up and stays.
  {
    t::RunOptions o;
    o.unset_env = {"CCACHE_DIR", "ARCHBUILD_REMOTE_CACHE", "ARCHBUILD_STORE", "ARCHBUILD_STORE_TRUST"};
    o.env["DOCKER_CONFIG"] = (dir / "docker").string();
    std::vector<std::string> args = {"--cache-dir", (dir / "host-m").string(), "matrix", "--recipe",
                                     std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml",
                                     "--source-url", url, "--python", "/usr/bin/python3", "--store", store, "--cuda", "13.0"};
    auto m = t::archbuild([&] { auto v = args; v.insert(v.end(), {"--sm", "90,100", "--format", "json"}); return v; }(), o);
    INFO("matrix: " << m.err);
    REQUIRE(m.status == 0);
    json dm = json::parse(m.out);
    REQUIRE(dm["stored"].size() == 1);
    CHECK(dm["stored"][0]["sm"] == "9.0");
    CHECK(dm["stored"][0]["key"] == da["key"]);
    CHECK(dm["stored"][0]["digest"] == da["store"]["digest"]);
    REQUIRE(dm["include"].size() == 1);
    CHECK(dm["include"][0]["sm"] == "10.0");
    CHECK(dm["include"][0]["store"]["checked"] == true);
    CHECK(dm["include"][0]["store"]["has_key"] == false);
    auto g = t::archbuild([&] { auto v = args; v.insert(v.end(), {"--sm", "90", "--format", "github"}); return v; }(), o);
    INFO("matrix --format github: " << g.err);
    CHECK(g.status == 0);  // every job stored: nothing to build is success
    CHECK(json::parse(g.out) == json{{"include", json::array()}});
    CHECK(g.err.find("the build store has key") != std::string::npos);
    // --store-trust, as `wheel` takes it: signed by a trusted key, stored; by another, a job.
    auto other = dir / "other.pem", other_pub = dir / "other.pub.pem";
    REQUIRE(t::run("/usr/bin/openssl", {"genpkey", "-algorithm", "ed25519", "-out", other.string()}).status == 0);
    REQUIRE(t::run("/usr/bin/openssl", {"pkey", "-in", other.string(), "-pubout", "-out", other_pub.string()}).status == 0);
    auto trusted = t::archbuild(
        [&] { auto v = args; v.insert(v.end(), {"--sm", "90", "--format", "json", "--store-trust", pub.string()}); return v; }(), o);
    INFO("matrix --store-trust (the signer): " << trusted.err);
    REQUIRE(trusted.status == 0);
    CHECK(json::parse(trusted.out)["stored"].size() == 1);
    auto untrusted = t::archbuild(
        [&] { auto v = args; v.insert(v.end(), {"--sm", "90", "--format", "json", "--store-trust", other_pub.string()}); return v; }(), o);
    INFO("matrix --store-trust (another key): " << untrusted.err);
    REQUIRE(untrusted.status == 0);
    json du = json::parse(untrusted.out);
    CHECK(du["stored"].empty());
    REQUIRE(du["include"].size() == 1);
    CHECK(du["include"][0]["store"]["has_key"] == true);
    CHECK(du["include"][0]["store"].contains("refused"));
    CHECK(untrusted.err.find("not among --store-trust") != std::string::npos);
  }

  // `publish --key`: the store's result into a mirror with the trust and checks of a pull.
  {
    t::RunOptions o;
    o.unset_env = {"CCACHE_DIR", "ARCHBUILD_REMOTE_CACHE", "ARCHBUILD_STORE", "ARCHBUILD_STORE_TRUST"};
    o.env["DOCKER_CONFIG"] = (dir / "docker").string();
    auto publish = [&](const std::string& mirror, std::vector<std::string> extra) {
      std::vector<std::string> args = {"--cache-dir", (dir / "host-p").string(), "publish", "--mirror",
                                       (dir / mirror).string(), "--store", store, "--json"};
      args.insert(args.end(), extra.begin(), extra.end());
      return t::archbuild(args, o);
    };
    auto other = dir / "publish-other.pem", other_pub = dir / "publish-other.pub.pem";
    REQUIRE(t::run("/usr/bin/openssl", {"genpkey", "-algorithm", "ed25519", "-out", other.string()}).status == 0);
    REQUIRE(t::run("/usr/bin/openssl", {"pkey", "-in", other.string(), "-pubout", "-out", other_pub.string()}).status == 0);
    auto refused = publish("mirror-refused", {"--key", da["key"].get<std::string>(), "--store-trust", other_pub.string()});
    INFO("publish --key, another key trusted: " << refused.err);
    CHECK(refused.status == 1);
    CHECK_FALSE(fs::exists(dir / "mirror-refused" / "files"));
    auto absent = publish("mirror-absent", {"--key", std::string(64, 'f')});
    CHECK(absent.status == 1);
    CHECK(absent.err.find("has no key") != std::string::npos);
    CHECK(publish("mirror-bad", {"--key", "../../x"}).status == 2);
    auto ok = publish("mirror", {"--key", da["key"].get<std::string>(), "--store-trust", pub.string()});
    INFO("publish --key: " << ok.err);
    REQUIRE(ok.status == 0);
    json dk = json::parse(ok.out);
    REQUIRE(dk["keys"].size() == 1);
    CHECK(dk["keys"][0]["signed_by"] == pub.string());
    CHECK(dk["files"][0]["sha256"] == da["sha256"]);
    CHECK(dk["files"][0]["status"] == "added");
    CHECK(t::archbuild({"publish", "--verify", "--mirror", (dir / "mirror").string()}).status == 0);
  }

  auto b = run("host-b", "wheel", {"--store-trust", pub.string()});
  INFO("host B: " << b.err);
  REQUIRE(b.status == 0);
  json db = json::parse(b.out);
  CHECK(db["store"]["pulled"] == true);
  CHECK(db["store"]["signed_by"] == pub.string());
  CHECK(db["stages_run"].empty());
  CHECK(db["sha256"] == da["sha256"]);
  CHECK(db["key"] == da["key"]);
  CHECK(fs::is_regular_file(db["wheel"].get<std::string>()));
  CHECK(db["validation"].is_object());  // validated here, not only on host A
  {
    // Here: the import test ran; the smoke kernel, which nothing here can run (no GPU), was not
    // compiled again (host A's validation, pulled with the wheel, compiled it).
    std::map<std::string, json> checks;
    for (const auto& c : db["validation"]["checks"]) checks[c["name"].get<std::string>()] = c;
    CHECK(checks["import"]["status"] == "pass");
    CHECK(checks["smoke-compile"]["status"] == "skip");
    CHECK_THAT(checks["smoke-compile"]["summary"].get<std::string>(), Catch::Contains("not compiled here"));
    std::map<std::string, json> at_a;
    for (const auto& c : da["validation"]["checks"]) at_a[c["name"].get<std::string>()] = c;
    CHECK(at_a["smoke-compile"]["status"] == "pass");
  }
  CHECK(!fs::exists(dir / "host-b" / "src" / db["key"].get<std::string>()));  // no checkout, no build tree

  // The registry stops: a third host warns and builds; --store-required refuses (exit 3).
  reg->stop();
  auto req = run("host-c", "wheel", {"--no-validate", "--store-required"});
  CHECK(req.status == 3);
  CHECK(req.err.find("--store-required") != std::string::npos);
  auto c = run("host-c", "wheel", {"--no-validate"});
  INFO("host C: " << c.err);
  REQUIRE(c.status == 0);
  json dc = json::parse(c.out);
  CHECK(c.err.find("the build store cannot be read") != std::string::npos);
  CHECK(dc["store"]["reachable"] == false);
  CHECK_FALSE(dc["stages_run"].empty());
  CHECK(dc["sha256"] == da["sha256"]);

  // A store that answers the lookup but refuses the push (a read-only registry): the wheel is in
  // --out and the cache, the run succeeds, and the message says to run the same command again;
  // run again once the store takes pushes, the finished key is pushed without a stage.
  auto ro = std::make_unique<t::Registry>(dir / "registry-2", "", "", true);
  store = "oci+http://" + ro->host() + "/builds/minitorch";
  auto d = run("host-c", "wheel", {});
  INFO("host C, read-only store: " << d.err);
  REQUIRE(d.status == 0);
  json dd = json::parse(d.out);
  CHECK(dd["store"]["pushed"] == false);
  CHECK(dd["store"].contains("push_error"));
  CHECK(d.err.find("run the same `archbuild wheel` again to push it") != std::string::npos);
  CHECK(fs::is_regular_file(dd["wheel"].get<std::string>()));
  ro->stop();
  ro.reset();
  auto rw = std::make_unique<t::Registry>(dir / "registry-2");
  store = "oci+http://" + rw->host() + "/builds/minitorch";
  auto e = run("host-c", "wheel", {});
  INFO("host C, the store writable again: " << e.err);
  REQUIRE(e.status == 0);
  json de = json::parse(e.out);
  CHECK(de["store"]["pushed"] == true);
  CHECK(de["stages_run"].empty());
  CHECK(de["sha256"] == da["sha256"]);
}
