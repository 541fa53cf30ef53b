#include "remote/build_store.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/sha256.hpp"
#include "core/text.hpp"
#include "store/key_record.hpp"

namespace archbuild::remote {

using nlohmann::json;

namespace {

const char* const oci_manifest = "application/vnd.oci.image.manifest.v1+json";
const char* const empty_type = "application/vnd.oci.empty.v1+json";
const char* const title = "org.opencontainers.image.title";
const char* const wheel_type = "application/vnd.archbuild.wheel.v1+zip";
const char* const manifest_type = "application/vnd.archbuild.manifest.v1+json";
const char* const validation_type = "application/vnd.archbuild.validation.v1+json";
const char* const report_type = "application/vnd.archbuild.build-report.v1+json";
const char* const signature_blob_type = "application/vnd.archbuild.signature.v1+json";

// The OCI empty descriptor ("{}"): the config of an artifact that has none (image-spec v1.1).
json empty_config() { return {{"mediaType", empty_type}, {"digest", sha256_digest("{}")}, {"size", 2}}; }

json descriptor(const std::string& media_type, const std::string& digest, std::uintmax_t size, const std::string& name) {
  return {{"mediaType", media_type}, {"digest", digest}, {"size", size}, {"annotations", {{title, name}}}};
}

// A title becomes a file name in the staging directory: one plain component only.
bool safe_name(const std::string& name) {
  return !name.empty() && name.size() < 200 && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && !name.starts_with(".");
}

Error refuse(const StoreUrl& url, const std::string& key, const std::string& why) {
  return Error::not_fine(fmt::format("the store's result for key {} is not used: {} ({})", key.substr(0, 16), why, url.text()));
}

std::string signature_tag(const std::string& digest) { return "sha256-" + digest.substr(7) + ".sig"; }

// A small JSON blob the registry gave (its digest checked), read whole.
json read_json_file(const std::filesystem::path& file) {
  std::ifstream f(file, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str(), nullptr, false);
}

}  // namespace

Result<BuildStore> BuildStore::open(const StoreConfig& config, const CaptureFn& capture) {
  auto url = parse_store_url(config.url);
  if (!url) return url.error();
  std::vector<TrustedKey> trusted;
  for (const auto& f : config.trust) {
    auto k = load_trusted_key(f);
    if (!k) return k.error();
    trusted.push_back(*k);
  }
  if (config.sign_key) {  // a key that cannot sign is bad input now, not after the build
    auto probe = sign_digest(*config.sign_key, "sha256:probe");
    if (!probe) return probe.error();
  }
  auto creds = find_credentials(url->host, config.docker_config ? config.docker_config : docker_config_path(), capture);
  if (!creds) return creds.error();
  return BuildStore(config, Registry(*url, *creds), std::move(trusted));
}

Result<std::optional<Manifest>> BuildStore::lookup(const std::string& key) { return registry_.get_manifest(key); }

Result<std::string> BuildStore::check_signature(const std::string& key, const Manifest& manifest,
                                                const std::filesystem::path& staging) {
  auto sig = registry_.get_manifest(signature_tag(manifest.digest));
  if (!sig) return sig.error();
  if (!*sig) return refuse(url(), key, "it is unsigned, and --store-trust asks for a signature");
  json doc = json::parse((*sig)->bytes, nullptr, false);
  if (!doc.is_object() || !doc.contains("layers") || !doc["layers"].is_array() || doc["layers"].empty())
    return refuse(url(), key, "its signature artifact is malformed");
  const json& l = doc["layers"][0];
  Descriptor d{l.value("mediaType", std::string()), l.value("digest", std::string()), l.value("size", std::uintmax_t(0))};
  if (d.size > 65536) return refuse(url(), key, "its signature blob is too large");
  auto file = staging / "signature.json";
  if (auto p = registry_.pull_blob(d, file); !p) return p.error();
  json s = read_json_file(file);
  if (!s.is_object() || s.value("manifest_digest", std::string()) != manifest.digest)
    return refuse(url(), key, "its signature is for another artifact");
  std::string key_id = s.value("key_id", std::string());
  for (const auto& k : trusted_) {
    if (k.key_id != key_id) continue;
    if (verify_digest(k, manifest.digest, s.value("signature", std::string()))) return k.file.string();
    return refuse(url(), key, fmt::format("its signature does not verify with {} (wrongly signed or tampered with)", k.file.string()));
  }
  return refuse(url(), key, fmt::format("it is signed by key {}, which is not among --store-trust's", key_id.substr(0, 16)));
}

Result<std::string> BuildStore::check_trust(const std::string& key, const Manifest& manifest,
                                            const std::filesystem::path& staging) {
  if (trusted_.empty()) return std::string();
  std::error_code ec;
  std::filesystem::create_directories(staging, ec);
  if (ec) return Error::bad_input(fmt::format("cannot make {}: {}", staging.string(), ec.message()));
  return check_signature(key, manifest, staging);
}

Result<Pulled> BuildStore::pull(const std::string& key, const Manifest& manifest, const std::filesystem::path& staging) {
  std::error_code ec;
  std::filesystem::remove_all(staging, ec);
  std::filesystem::create_directories(staging, ec);
  if (ec) return Error::bad_input(fmt::format("cannot make {}: {}", staging.string(), ec.message()));
  json doc = json::parse(manifest.bytes, nullptr, false);
  if (!doc.is_object() || doc.value("artifactType", std::string()) != artifact_type || !doc.contains("layers") ||
      !doc["layers"].is_array())
    return refuse(url(), key, fmt::format("its tag is not an archbuild build artifact (artifactType {})", artifact_type));
  if (doc.value("/annotations/dev.archbuild.key"_json_pointer, std::string()) != key)
    return refuse(url(), key, "the artifact under its tag names another key");
  Pulled p;
  p.digest = manifest.digest;
  if (!trusted_.empty()) {
    auto who = check_signature(key, manifest, staging);
    if (!who) return who.error();
    p.signed_by = *who;
  }
  std::map<std::string, std::filesystem::path> by_type;
  for (const auto& l : doc["layers"]) {
    Descriptor d{l.value("mediaType", std::string()), l.value("digest", std::string()), l.value("size", std::uintmax_t(0))};
    std::string name = l.value("/annotations/org.opencontainers.image.title"_json_pointer, std::string());
    if (!safe_name(name)) return refuse(url(), key, fmt::format("a blob has the title {}", text::quoted(name)));
    if (!d.digest.starts_with("sha256:")) return refuse(url(), key, "a blob is not addressed by sha256");
    auto file = staging / name;
    if (auto r = registry_.pull_blob(d, file); !r) {
      Error e = r.error();
      if (e.exit == Exit::not_fine) e.message = fmt::format("the store's result for key {} is not used: {}", key.substr(0, 16), e.message);
      return e;
    }
    by_type[d.media_type] = file;
    if (d.media_type == wheel_type) {
      p.wheel = file;
      p.filename = name;
      p.sha256 = d.digest.substr(7);
    }
  }
  if (p.wheel.empty() || !by_type.contains(manifest_type)) return refuse(url(), key, "it has no wheel or no manifest");
  auto read_json = [&](const char* type) {
    if (!by_type.contains(type)) return json(nullptr);
    return read_json_file(by_type[type]);
  };
  p.manifest = read_json(manifest_type);
  p.validation = read_json(validation_type);
  p.build_report = read_json(report_type);
  // The wheel is the one the pushed manifest names (its digest was checked as it came in).
  if (!p.manifest.is_object() || p.manifest.value("build_key", std::string()) != key ||
      p.manifest.value("/wheel/sha256"_json_pointer, std::string()) != p.sha256 ||
      p.manifest.value("/wheel/filename"_json_pointer, std::string()) != p.filename)
    return refuse(url(), key, "its wheel is not the one its manifest names (sha256, file name or key differ)");
  return p;
}

Result<Pushed> BuildStore::push(const std::string& key, const std::filesystem::path& wheel, const std::string& filename,
                                const json& manifest, const json& validation, const json& build_report) {
  Pushed out;
  // Another host may have pushed the key meanwhile: its artifact stays (one consistent result).
  auto there = registry_.get_manifest(key);
  if (!there) return there.error();
  if (*there) {
    out.digest = (*there)->digest;
    return out;
  }
  json layers = json::array();
  auto sha = sha256_file_hex(wheel);
  if (!sha) return sha.error();
  std::error_code ec;
  Descriptor w{wheel_type, "sha256:" + *sha, std::filesystem::file_size(wheel, ec)};
  if (auto r = registry_.push_blob(w, wheel); !r) return r.error();
  layers.push_back(descriptor(wheel_type, w.digest, w.size, filename));
  auto add_json = [&](const char* type, const json& value, const char* name) -> Result<Ok> {
    if (value.is_null()) return Ok{};
    std::string bytes = value.dump(2);
    Descriptor d{type, sha256_digest(bytes), bytes.size()};
    if (auto r = registry_.push_blob(d, std::nullopt, bytes); !r) return r.error();
    layers.push_back(descriptor(type, d.digest, d.size, name));
    return Ok{};
  };
  if (auto r = add_json(manifest_type, manifest, "manifest.json"); !r) return r.error();
  if (auto r = add_json(validation_type, validation, "validation.json"); !r) return r.error();
  if (auto r = add_json(report_type, build_report, "build-report.json"); !r) return r.error();
  if (auto r = registry_.push_blob({empty_type, sha256_digest("{}"), 2}, std::nullopt, "{}"); !r) return r.error();
  json m = {{"schemaVersion", 2},
            {"mediaType", oci_manifest},
            {"artifactType", artifact_type},
            {"config", empty_config()},
            {"layers", layers},
            {"annotations",
             {{"dev.archbuild.key", key},
              {"dev.archbuild.wheel.sha256", *sha},
              {"org.opencontainers.image.created", store::utc_now_iso()}}}};
  std::string bytes = m.dump();
  out.digest = sha256_digest(bytes);
  // The signature goes first: a consumer that asks for one never sees this artifact unsigned.
  if (config_.sign_key) {
    auto s = sign_digest(*config_.sign_key, out.digest);
    if (!s) return s.error();
    std::string sig = json{{"algorithm", s->algorithm}, {"manifest_digest", out.digest}, {"key_id", s->key_id},
                           {"signature", s->signature}}.dump();
    Descriptor d{signature_blob_type, sha256_digest(sig), sig.size()};
    if (auto r = registry_.push_blob(d, std::nullopt, sig); !r) return r.error();
    json sm = {{"schemaVersion", 2},
               {"mediaType", oci_manifest},
               {"artifactType", signature_type},
               {"config", empty_config()},
               {"layers", json::array({descriptor(signature_blob_type, d.digest, d.size, "signature.json")})},
               {"subject", {{"mediaType", oci_manifest}, {"digest", out.digest}, {"size", bytes.size()}}}};
    if (auto r = registry_.put_manifest(signature_tag(out.digest), sm.dump(), oci_manifest); !r) return r.error();
    out.signed_ = true;
  }
  if (auto r = registry_.put_manifest(key, bytes, oci_manifest); !r) return r.error();
  out.pushed = true;
  return out;
}

}  // namespace archbuild::remote
