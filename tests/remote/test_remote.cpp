// remote/: the build store on Debian's docker-registry, started on 127.0.0.1 by each test with its
// storage in a temp dir (support/registry): push and pull, a tampered blob, signatures, basic auth
// through docker's config.json (and a credential helper), a store that is down.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/sha256.hpp"
#include "remote/build_store.hpp"
#include "remote/credentials.hpp"
#include "remote/registry.hpp"
#include "remote/signature.hpp"
#include "run/capture.hpp"
#include "support/process.hpp"
#include "support/registry.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using namespace archbuild;
using nlohmann::json;

namespace {

const std::string key = "fb87f13419d89d55c35c22cc171210f9a7a0a00a76de855471c1ae596b8b845f";
const std::string filename = "minitorch-0.1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl";

remote::CaptureFn capture() {
  return [](const std::vector<std::string>& argv, const run::CaptureOptions& o) { return run::capture(argv, o); };
}

// A result as host A's pipeline leaves it: the wheel and the key's manifest naming it.
struct Result_ {
  fs::path wheel;
  json manifest;
};
Result_ make_result(const t::TempDir& dir) {
  auto wheel = dir.write("a/" + filename, "not really a zip, but bytes with a digest");
  json m = {{"build_key", key}, {"wheel", {{"filename", filename}, {"sha256", *sha256_file_hex(wheel)}}}};
  return {wheel, m};
}

remote::BuildStore open(const t::Registry& reg, remote::StoreConfig c = {}, const remote::CaptureFn& run = capture()) {
  c.url = "oci+http://" + reg.host() + "/builds/minitorch";
  if (!c.docker_config) c.docker_config = fs::path("/nonexistent/config.json");
  auto s = remote::BuildStore::open(c, run);
  if (!s) FAIL(s.error().message);
  return std::move(*s);
}

void push(remote::BuildStore& s, const Result_& r) {
  auto p = s.push(key, r.wheel, filename, r.manifest, json{{"ok", true}}, nullptr);
  INFO((p ? "" : p.error().message));
  REQUIRE(p);
  CHECK(p->pushed);
}

// keys/ed25519 pairs made with the openssl command (as a user makes them).
std::pair<fs::path, fs::path> make_key(const t::TempDir& dir, const std::string& name) {
  auto priv = dir / (name + ".pem"), pub = dir / (name + ".pub.pem");
  REQUIRE(t::run("/usr/bin/openssl", {"genpkey", "-algorithm", "ed25519", "-out", priv.string()}).status == 0);
  REQUIRE(t::run("/usr/bin/openssl", {"pkey", "-in", priv.string(), "-pubout", "-out", pub.string()}).status == 0);
  return {priv, pub};
}

#define NEED_REGISTRY()                                      \
  if (auto why = t::registry_missing(); !why.empty()) {     \
    WARN("##archbuild-skip## " << why);                     \
    return;                                                  \
  }

}  // namespace

TEST_CASE("store URL: oci:// is HTTPS, oci+http:// is asked for explicitly, anything else is refused", "[remote]") {
  auto a = remote::parse_store_url("oci://ghcr.io/acme/torch-builds");
  REQUIRE(a);
  CHECK_FALSE(a->plain_http);
  CHECK(a->base() == "https://ghcr.io/v2/acme/torch-builds");
  auto b = remote::parse_store_url("oci+http://127.0.0.1:5000/builds");
  REQUIRE(b);
  CHECK(b->base() == "http://127.0.0.1:5000/v2/builds");
  for (std::string bad : {"http://127.0.0.1:5000/builds", "oci://host", "oci://host/Upper", "oci://host/a//b", "ghcr.io/a"}) {
    auto r = remote::parse_store_url(bad);
    INFO(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == Exit::bad_input);
    CHECK(r.error().message.find("oci://HOST[:PORT]/REPOSITORY") != std::string::npos);
  }
}

TEST_CASE("credentials: docker's config.json auths, a credential helper, none", "[remote]") {
  t::TempDir dir;
  auto config = dir.write("config.json", json{{"auths", {{"reg.example:5000", {{"auth", remote::base64_encode("ann:s3cret:x")}}},
                                                         {"https://other.example/v1/", {{"username", "bob"}, {"password", "pw"}}}}}}
                                             .dump());
  auto a = remote::find_credentials("reg.example:5000", config, capture());
  REQUIRE(a);
  REQUIRE(*a);
  CHECK((*a)->username == "ann");
  CHECK((*a)->secret == "s3cret:x");
  auto b = remote::find_credentials("other.example", config, capture());
  REQUIRE(b);
  REQUIRE(*b);
  CHECK((*b)->username == "bob");
  auto none = remote::find_credentials("third.example", config, capture());
  REQUIRE(none);
  CHECK_FALSE(*none);
  // A helper reads the host on stdin and answers JSON (docker-credential-helpers' protocol).
  auto helper = dir.write("bin/docker-credential-fake",
                          "#!/bin/sh\nread host\n[ \"$host\" = reg.example:5000 ] || { echo 'credentials not found'; exit 1; }\n"
                          "echo '{\"ServerURL\":\"reg.example:5000\",\"Username\":\"helper-user\",\"Secret\":\"helper-pw\"}'\n");
  fs::permissions(helper, fs::perms::owner_all);
  auto with_helper = dir.write("helper.json", json{{"credHelpers", {{"reg.example:5000", "fake"}}}}.dump());
  remote::CaptureFn on_path = [&](const std::vector<std::string>& argv, const run::CaptureOptions& o) {
    std::vector<std::string> v = argv;
    v[0] = (dir / "bin" / argv[0]).string();
    return run::capture(v, o);
  };
  auto h = remote::find_credentials("reg.example:5000", with_helper, on_path);
  REQUIRE(h);
  REQUIRE(*h);
  CHECK((*h)->username == "helper-user");
  CHECK((*h)->secret == "helper-pw");
  auto store = dir.write("store.json", json{{"credsStore", "fake"}}.dump());
  auto miss = remote::find_credentials("nothere.example", store, on_path);
  REQUIRE(miss);
  CHECK_FALSE(*miss);
  auto bad = dir.write("bad.json", "{not json");
  auto e = remote::find_credentials("reg.example:5000", bad, capture());
  REQUIRE_FALSE(e);
  CHECK(e.error().exit == Exit::bad_input);
}

TEST_CASE("signature: Ed25519 or ECDSA P-256 over the manifest digest verifies with its key only", "[remote]") {
  t::TempDir dir;
  auto [priv, pub] = make_key(dir, "a");
  auto [other_priv, other_pub] = make_key(dir, "b");
  auto s = remote::sign_digest(priv, "sha256:abc");
  REQUIRE(s);
  auto k = remote::load_trusted_key(pub);
  REQUIRE(k);
  CHECK(k->key_id == s->key_id);
  CHECK(remote::verify_digest(*k, "sha256:abc", s->signature));
  CHECK_FALSE(remote::verify_digest(*k, "sha256:abd", s->signature));
  auto o = remote::load_trusted_key(other_pub);
  REQUIRE(o);
  CHECK_FALSE(remote::verify_digest(*o, "sha256:abc", s->signature));
  // ECDSA on P-256 over SHA-256 (cosign's key type) too; another curve or RSA is refused by name.
  auto ec = dir / "ec.pem", ec_pub = dir / "ec.pub.pem";
  REQUIRE(t::run("/usr/bin/openssl", {"genpkey", "-algorithm", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-out",
                                      ec.string()}).status == 0);
  REQUIRE(t::run("/usr/bin/openssl", {"pkey", "-in", ec.string(), "-pubout", "-out", ec_pub.string()}).status == 0);
  auto es = remote::sign_digest(ec, "sha256:abc");
  INFO((es ? "" : es.error().message));
  REQUIRE(es);
  CHECK(es->algorithm == "ecdsa-p256-sha256");
  CHECK(s->algorithm == "ed25519");
  auto ek = remote::load_trusted_key(ec_pub);
  REQUIRE(ek);
  CHECK(remote::verify_digest(*ek, "sha256:abc", es->signature));
  CHECK_FALSE(remote::verify_digest(*ek, "sha256:abd", es->signature));
  CHECK_FALSE(remote::verify_digest(*k, "sha256:abc", es->signature));  // another key's
  auto p384 = dir / "p384.pem";
  REQUIRE(t::run("/usr/bin/openssl", {"genpkey", "-algorithm", "ec", "-pkeyopt", "ec_paramgen_curve:P-384", "-out",
                                      p384.string()}).status == 0);
  auto refused = remote::sign_digest(p384, "sha256:abc");
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("Ed25519 or ECDSA P-256"));
  auto not_key = dir.write("x.pem", "hello");
  auto bad = remote::load_trusted_key(not_key);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().exit == Exit::bad_input);
}

TEST_CASE("build store: host B pulls host A's result, every digest checked, and a second push keeps the first", "[remote][registry]") {
  NEED_REGISTRY();
  t::TempDir dir;
  t::Registry reg(dir / "registry");
  auto r = make_result(dir);
  auto a = open(reg);
  auto miss = a.lookup(key);
  REQUIRE(miss);
  CHECK_FALSE(*miss);
  push(a, r);
  auto b = open(reg);
  auto m = b.lookup(key);
  REQUIRE(m);
  REQUIRE(*m);
  auto pulled = b.pull(key, **m, dir / "b-staging");
  INFO((pulled ? "" : pulled.error().message));
  REQUIRE(pulled);
  CHECK(pulled->filename == filename);
  CHECK(t::read_file(pulled->wheel) == t::read_file(r.wheel));
  CHECK(pulled->manifest == r.manifest);
  CHECK(pulled->validation == json{{"ok", true}});
  // Another host pushing the same key: the artifact already there stays (one consistent result).
  auto again = b.push(key, r.wheel, filename, r.manifest, json{{"ok", true}, {"other", 1}}, nullptr);
  REQUIRE(again);
  CHECK_FALSE(again->pushed);
  CHECK(again->digest == (*m)->digest);
}

// Two hosts finishing the same key at the same moment, each with its own bytes (a build that is
// not reproducible): whichever manifest the tag ends on, it names only blobs that are there and
// match, so a third host pulls one whole result, never a mix. Several rounds, each a new key.
TEST_CASE("build store: two hosts pushing one key at once end with one consistent artifact", "[remote][registry]") {
  NEED_REGISTRY();
  t::TempDir dir;
  t::Registry reg(dir / "registry");
  auto [priv, pub] = make_key(dir, "signer");
  for (int round = 0; round < 6; ++round) {
    const std::string k = sha256_hex("round " + std::to_string(round));
    std::vector<fs::path> wheels;
    std::vector<json> manifests;
    for (const char* host : {"a", "b"}) {
      auto w = dir.write(fmt::format("{}{}/{}", host, round, filename), fmt::format("host {} round {} bytes", host, round));
      wheels.push_back(w);
      manifests.push_back({{"build_key", k}, {"wheel", {{"filename", filename}, {"sha256", *sha256_file_hex(w)}}}});
    }
    remote::StoreConfig signing;
    signing.sign_key = priv;
    auto a = open(reg, signing), b = open(reg, signing);
    Result<remote::Pushed> pa = Error::bad_input("not run"), pb = Error::bad_input("not run");
    std::thread ta([&] { pa = a.push(k, wheels[0], filename, manifests[0], json{{"ok", true}}, nullptr); });
    std::thread tb([&] { pb = b.push(k, wheels[1], filename, manifests[1], json{{"ok", true}}, nullptr); });
    ta.join();
    tb.join();
    INFO("round " << round << ": " << (pa ? "" : pa.error().message) << (pb ? "" : pb.error().message));
    REQUIRE(pa);
    REQUIRE(pb);
    CHECK((pa->pushed || pb->pushed));
    remote::StoreConfig trusting;
    trusting.trust = {pub};
    auto c = open(reg, trusting);
    auto m = c.lookup(k);
    REQUIRE(m);
    REQUIRE(*m);
    auto pulled = c.pull(k, **m, dir / fmt::format("pull{}", round));
    INFO((pulled ? "" : pulled.error().message));
    REQUIRE(pulled);
    // One host's whole result: its wheel, its manifest, its signature.
    const bool from_a = pulled->sha256 == manifests[0]["wheel"]["sha256"];
    CHECK((from_a || pulled->sha256 == manifests[1]["wheel"]["sha256"]));
    CHECK(pulled->manifest == manifests[from_a ? 0 : 1]);
    CHECK(t::read_file(pulled->wheel) == t::read_file(wheels[from_a ? 0 : 1]));
  }
}

TEST_CASE("build store: a blob edited in the registry's storage is refused by its digest", "[remote][registry]") {
  NEED_REGISTRY();
  t::TempDir dir;
  t::Registry reg(dir / "registry");
  auto r = make_result(dir);
  auto a = open(reg);
  push(a, r);
  std::string digest = "sha256:" + *sha256_file_hex(r.wheel);
  auto blob = reg.blob_file(digest);
  REQUIRE(fs::exists(blob));
  std::ofstream(blob, std::ios::binary) << "not really a zip, but bytes with a digesT";  // same size
  auto m = a.lookup(key);
  REQUIRE(m);
  REQUIRE(*m);
  auto pulled = a.pull(key, **m, dir / "staging");
  REQUIRE_FALSE(pulled);
  CHECK(pulled.error().exit == Exit::not_fine);
  CHECK(pulled.error().message.find("does not match its digest") != std::string::npos);
  CHECK(pulled.error().message.find("is not used") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "staging" / filename));
}

TEST_CASE("build store: where signatures are required, unsigned and wrongly signed results are refused", "[remote][registry]") {
  NEED_REGISTRY();
  t::TempDir dir;
  t::Registry reg(dir / "registry");
  auto r = make_result(dir);
  auto [priv, pub] = make_key(dir, "host-a");
  auto [stranger, stranger_pub] = make_key(dir, "stranger");
  remote::StoreConfig trusting;
  trusting.trust = {pub};
  {
    auto unsigned_push = open(reg);
    push(unsigned_push, r);
    auto b = open(reg, trusting);
    auto m = b.lookup(key);
    REQUIRE(m);
    REQUIRE(*m);
    auto pulled = b.pull(key, **m, dir / "staging");
    REQUIRE_FALSE(pulled);
    CHECK(pulled.error().message.find("unsigned") != std::string::npos);
  }
  // Host A signs with `sign_key` and pushes `other_key`; a host trusting `pub` pulls it.
  auto signed_pull = [&](const fs::path& sign_key, char k) {
    remote::StoreConfig signing;
    signing.sign_key = sign_key;
    auto a = open(reg, signing);
    std::string other_key(64, k);
    json m2 = r.manifest;
    m2["build_key"] = other_key;
    auto p = a.push(other_key, r.wheel, filename, m2, json{{"ok", true}}, nullptr);
    REQUIRE(p);
    CHECK(p->signed_);
    auto b = open(reg, trusting);
    auto m = b.lookup(other_key);
    REQUIRE(m);
    REQUIRE(*m);
    return b.pull(other_key, **m, dir / "staging");
  };
  auto trusted = signed_pull(priv, 'e');
  INFO((trusted ? "" : trusted.error().message));
  REQUIRE(trusted);
  CHECK(trusted->signed_by == pub.string());
  auto untrusted = signed_pull(stranger, 'f');
  REQUIRE_FALSE(untrusted);
  CHECK(untrusted.error().message.find("not among --store-trust") != std::string::npos);
  // A signature by the trusted key, but over another digest, put where the first one's is.
  auto m = open(reg).lookup(std::string(64, 'e'));
  REQUIRE(m);
  REQUIRE(*m);
  auto other = remote::sign_digest(priv, "sha256:" + std::string(64, '0'));
  REQUIRE(other);
  std::string sig = json{{"algorithm", "ed25519"}, {"manifest_digest", (*m)->digest}, {"key_id", other->key_id},
                         {"signature", other->signature}}.dump();
  remote::Registry raw(*remote::parse_store_url("oci+http://" + reg.host() + "/builds/minitorch"), std::nullopt);
  remote::Descriptor d{"application/vnd.archbuild.signature.v1+json", remote::sha256_digest(sig), sig.size()};
  REQUIRE(raw.push_blob(d, std::nullopt, sig));
  json sm = {{"schemaVersion", 2}, {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
             {"config", {{"mediaType", "application/vnd.oci.empty.v1+json"}, {"digest", remote::sha256_digest("{}")}, {"size", 2}}},
             {"layers", json::array({{{"mediaType", d.media_type}, {"digest", d.digest}, {"size", d.size}}})}};
  REQUIRE(raw.put_manifest("sha256-" + (*m)->digest.substr(7) + ".sig", sm.dump(), "application/vnd.oci.image.manifest.v1+json"));
  auto wrong = open(reg, trusting).pull(std::string(64, 'e'), **m, dir / "staging");
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message.find("does not verify") != std::string::npos);
}

TEST_CASE("build store: basic auth through docker's config.json, and the password is in no message", "[remote][registry]") {
  NEED_REGISTRY();
  t::TempDir dir;
  const std::string password = "pw-7f3c9a-never-printed";
  t::Registry reg(dir / "registry", "builder", password);
  auto r = make_result(dir);
  // Without credentials: refused, and the message says where credentials come from.
  auto anonymous = open(reg);
  auto denied = anonymous.lookup(key);
  REQUIRE_FALSE(denied);
  CHECK(denied.error().message.find("HTTP 401") != std::string::npos);
  CHECK(denied.error().message.find("docker login") != std::string::npos);
  // Wrong password: refused, naming where the credentials came from, not what they are.
  auto wrong = dir.write("wrong/config.json",
                         json{{"auths", {{reg.host(), {{"auth", remote::base64_encode("builder:" + password + "x")}}}}}}.dump());
  remote::StoreConfig cw;
  cw.docker_config = wrong;
  auto w = open(reg, cw);
  auto refused = w.lookup(key);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("were refused") != std::string::npos);
  CHECK(refused.error().message.find(password) == std::string::npos);
  auto config = dir.write("docker/config.json",
                          json{{"auths", {{reg.host(), {{"auth", remote::base64_encode("builder:" + password)}}}}}}.dump());
  remote::StoreConfig c;
  c.docker_config = config;
  auto a = open(reg, c);
  push(a, r);
  auto m = a.lookup(key);
  REQUIRE(m);
  REQUIRE(*m);
  auto pulled = a.pull(key, **m, dir / "staging");
  INFO((pulled ? "" : pulled.error().message));
  REQUIRE(pulled);
  // The same credentials from a credential helper (docker-credential-<name> get, the host on stdin).
  auto helper = dir.write("bin/docker-credential-test",
                          "#!/bin/sh\nread host\nprintf '{\"Username\":\"builder\",\"Secret\":\"%s\"}' \"$PW\"\n");
  fs::permissions(helper, fs::perms::owner_all);
  auto helper_config = dir.write("helper/config.json", json{{"credHelpers", {{reg.host(), "test"}}}}.dump());
  remote::CaptureFn on_path = [&](const std::vector<std::string>& argv, const run::CaptureOptions& o) {
    std::vector<std::string> v = argv;
    v[0] = (dir / "bin" / argv[0]).string();
    run::CaptureOptions with = o;
    with.env["PW"] = password;
    return run::capture(v, with);
  };
  remote::StoreConfig ch;
  ch.docker_config = helper_config;
  auto via_helper = open(reg, ch, on_path);
  auto found = via_helper.lookup(key);
  INFO((found ? "" : found.error().message));
  REQUIRE(found);
  CHECK(*found);
}

TEST_CASE("build store: oci:// is verified TLS with the system's CAs, and SSL_CERT_FILE names another", "[remote][registry]") {
  NEED_REGISTRY();
  t::TempDir dir;
  t::Registry reg(dir / "registry", "", "", false, true);
  remote::StoreConfig c;
  c.url = "oci://" + reg.host() + "/builds/minitorch";
  c.docker_config = fs::path("/nonexistent/config.json");
  ::unsetenv("SSL_CERT_FILE");
  ::unsetenv("SSL_CERT_DIR");
  auto s = remote::BuildStore::open(c, capture());
  REQUIRE(s);
  // A CA the system does not trust: refused (a store that cannot be read), never used unverified.
  auto untrusted = s->lookup(key);
  REQUIRE_FALSE(untrusted);
  CHECK(untrusted.error().exit == Exit::missing_tool);
  CHECK_THAT(untrusted.error().message, Catch::Contains("certificate"));
  ::setenv("SSL_CERT_FILE", reg.ca_file().c_str(), 1);
  auto trusted = s->lookup(key);
  ::unsetenv("SSL_CERT_FILE");
  INFO((trusted ? "" : trusted.error().message));
  REQUIRE(trusted);
  CHECK_FALSE(*trusted);  // answered over verified TLS: the key is not there
  auto r = make_result(dir);
  ::setenv("SSL_CERT_FILE", reg.ca_file().c_str(), 1);
  auto pushed = s->push(key, r.wheel, filename, r.manifest, json{{"ok", true}}, nullptr);
  ::unsetenv("SSL_CERT_FILE");
  REQUIRE(pushed);
  CHECK(pushed->pushed);
}

TEST_CASE("build store: a registry that is down is an error at once, exit 3", "[remote][registry]") {
  NEED_REGISTRY();
  t::TempDir dir;
  auto reg = std::make_unique<t::Registry>(dir / "registry");
  auto s = open(*reg);
  reg->stop();
  auto m = s.lookup(key);
  REQUIRE_FALSE(m);
  CHECK(m.error().exit == Exit::missing_tool);
  CHECK(m.error().message.find("127.0.0.1") != std::string::npos);
}

// Starts a stand-in HTTP server (Python, argv: PORT LOG) and waits until it accepts.
std::unique_ptr<t::Background> stand_in(const t::TempDir& dir, const fs::path& script, int port) {
  auto srv = std::make_unique<t::Background>("/usr/bin/python3",
                                             std::vector<std::string>{script.string(), std::to_string(port),
                                                                      (dir / "log").string()});
  for (int i = 0; i < 200 && !t::local_port_accepts(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  REQUIRE(t::local_port_accepts(port));
  return srv;
}

// The bearer-token handshake GHCR, Docker Hub and Harbor ask for: a 401 with
// `WWW-Authenticate: Bearer realm=…,service=…,scope=…`, the token endpoint asked with the user's
// credentials (Basic) and the scope, the request again with the token. A stand-in server in
// Python (the real registry's token auth needs a token service with certificates).
TEST_CASE("registry: the bearer-token handshake, with the credentials sent only to the token endpoint", "[remote]") {
  if (!fs::exists("/usr/bin/python3")) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  t::TempDir dir;
  int port = t::free_local_port();
  auto server = dir.write("server.py", R"PY(
import base64, http.server, sys
port, log = int(sys.argv[1]), open(sys.argv[2], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        log.write(f"{self.path} {auth}\n")
        if self.path.startswith("/token"):
            ok = auth == "Basic " + base64.b64encode(b"ann:pw").decode()
            body = b'{"token":"tok-123"}' if ok else b'{}'
            self.send_response(200 if ok else 401); self.end_headers(); self.wfile.write(body); return
        if auth not in ("Bearer tok-123", "Bearer tok-oauth"):
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Bearer realm="http://127.0.0.1:{port}/token",service="test",scope="repository:builds:pull"')
            self.end_headers(); return
        self.send_response(404); self.end_headers()
    def do_POST(self):
        # OAuth2: an identity (refresh) token exchanged for an access token, form-encoded.
        import urllib.parse
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
        log.write(f"POST {self.path} {self.headers.get('Authorization', '')} {sorted(form.items())}\n")
        ok = form.get("grant_type") == ["refresh_token"] and form.get("refresh_token") == ["rt-456"]
        self.send_response(200 if ok else 401); self.end_headers()
        self.wfile.write(b'{"access_token":"tok-oauth"}' if ok else b'{}')
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
)PY");
  auto srv = stand_in(dir, server, port);
  remote::Credentials c{"ann", "pw", false, "test"};
  remote::Registry reg(*remote::parse_store_url("oci+http://127.0.0.1:" + std::to_string(port) + "/builds"), c);
  auto m = reg.get_manifest(key);
  INFO((m ? "" : m.error().message));
  REQUIRE(m);
  CHECK_FALSE(*m);  // the server's 404 after the handshake: the key is not there
  std::string log = t::read_file(dir / "log");
  CHECK(log.find("/token?scope=repository%3Abuilds%3Apull&service=test Basic ") != std::string::npos);
  CHECK(log.find("/v2/builds/manifests/" + key + " Bearer tok-123") != std::string::npos);
  // The password went to the token endpoint only, never to the registry's own paths.
  for (const auto& line : {std::string("/v2/builds/manifests/" + key + " Basic")}) CHECK(log.find(line) == std::string::npos);
  remote::Registry wrong(*remote::parse_store_url("oci+http://127.0.0.1:" + std::to_string(port) + "/builds"),
                         remote::Credentials{"ann", "nope", false, "test"});
  auto refused = wrong.get_manifest(key);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("token endpoint") != std::string::npos);
  CHECK(refused.error().message.find("nope") == std::string::npos);

  // docker config's "identitytoken" (an OAuth2 refresh token): exchanged at the realm by a POSTed
  // form for an access token, never sent as a password.
  remote::Registry oauth(*remote::parse_store_url("oci+http://127.0.0.1:" + std::to_string(port) + "/builds"),
                         remote::Credentials{"<token>", "rt-456", true, "test"});
  auto o = oauth.get_manifest(key);
  INFO((o ? "" : o.error().message));
  REQUIRE(o);
  CHECK_FALSE(*o);
  log = t::read_file(dir / "log");
  CHECK(log.find("POST /token  [('client_id', ['archbuild']), ('grant_type', ['refresh_token']), ('refresh_token', "
                 "['rt-456']), ('scope', ['repository:builds:pull']), ('service', ['test'])]") != std::string::npos);
  CHECK(log.find("/v2/builds/manifests/" + key + " Bearer tok-oauth") != std::string::npos);
  CHECK(log.find(" Basic PHRva2VuPjpydC00NTY=") == std::string::npos);  // base64("<token>:rt-456")
  remote::Registry stale(*remote::parse_store_url("oci+http://127.0.0.1:" + std::to_string(port) + "/builds"),
                         remote::Credentials{"<token>", "rt-expired", true, "test"});
  auto st = stale.get_manifest(key);
  REQUIRE_FALSE(st);
  CHECK(st.error().message.find("token endpoint") != std::string::npos);
  CHECK(st.error().message.find("rt-expired") == std::string::npos);
}

// A registry's 5xx to a GET or HEAD is asked again after a growing wait (distribution answers a
// HEAD of a blob another host is committing with 500); one that lasts is the answer, exit 3; a
// PUT is never repeated. A stand-in server answers 500 to the first N requests of each path.
TEST_CASE("registry: a 500 to a lookup is asked again, one that lasts is the answer, a PUT is sent once", "[remote]") {
  if (!fs::exists("/usr/bin/python3")) {
    WARN("##archbuild-skip## no /usr/bin/python3");
    return;
  }
  t::TempDir dir;
  int port = t::free_local_port();
  auto server = dir.write("server.py", R"PY(
import http.server, sys
port, log = int(sys.argv[1]), open(sys.argv[2], "a", buffering=1)
seen = {}
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def answer(self):
        seen[self.path] = seen.get(self.path, 0) + 1
        log.write(f"{self.command} {self.path}\n")
        fails = 2 if "flaky" in self.path else 99 if "broken" in self.path else 0
        if seen[self.path] <= fails:
            self.send_response(500); self.end_headers(); return
        self.send_response(404); self.end_headers()
    do_GET = do_HEAD = do_PUT = answer
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
)PY");
  auto srv = stand_in(dir, server, port);
  auto url = [&](const std::string& repo) {
    return *remote::parse_store_url("oci+http://127.0.0.1:" + std::to_string(port) + "/" + repo);
  };
  auto count = [&](const std::string& line) {
    std::string log = t::read_file(dir / "log");
    std::size_t n = 0;
    for (auto at = log.find(line); at != std::string::npos; at = log.find(line, at + 1)) ++n;
    return n;
  };
  // Two 500s, then the answer: the lookup succeeds (404: not there), after three requests.
  remote::Registry flaky(url("flaky"), std::nullopt);
  auto m = flaky.has_manifest(key);
  INFO((m ? "" : m.error().message));
  REQUIRE(m);
  CHECK_FALSE(*m);
  CHECK(count("HEAD /v2/flaky/manifests/" + key) == 3);
  // A 500 that lasts: the refusal, exit 3, after the first request and three more.
  remote::Registry broken(url("broken"), std::nullopt);
  auto b = broken.get_manifest(key);
  REQUIRE_FALSE(b);
  CHECK(b.error().exit == Exit::missing_tool);
  CHECK(b.error().message.find("HTTP 500") != std::string::npos);
  CHECK(count("GET /v2/broken/manifests/" + key) == 4);
  // A PUT that gets a 500 is not repeated (it is no lookup).
  auto put = broken.put_manifest(key, "{}", "application/vnd.oci.image.manifest.v1+json");
  REQUIRE_FALSE(put);
  CHECK(count("PUT /v2/broken/manifests/" + key) == 1);
}
