#include "remote/credentials.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "remote/signature.hpp"

namespace archbuild::remote {

using nlohmann::json;

namespace {

// docker writes "auths" keys as the host, or as a URL (https://index.docker.io/v1/): both match.
bool same_registry(std::string_view entry, const std::string& host) {
  if (entry.starts_with("https://")) entry.remove_prefix(8);
  else if (entry.starts_with("http://")) entry.remove_prefix(7);
  if (auto slash = entry.find('/'); slash != std::string_view::npos) entry = entry.substr(0, slash);
  return entry == host;
}

Result<std::optional<Credentials>> from_helper(const std::string& helper, const std::string& host,
                                               const std::filesystem::path& config, const CaptureFn& capture) {
  std::string program = "docker-credential-" + helper;
  run::CaptureOptions o;
  o.input = host;
  o.timeout = std::chrono::seconds(30);
  auto r = capture({program, "get"}, o);
  if (!r)
    return Error::bad_input(fmt::format("{} names the credential helper {} for {}, which cannot be run: {}", config.string(),
                                        text::quoted(helper), host, r.error().message));
  // A helper answers "credentials not found" with a non-zero status: no credentials, not an error.
  if (r->status != 0) {
    if (r->out.find("not found") != std::string::npos || r->err.find("not found") != std::string::npos)
      return std::optional<Credentials>();
    return Error::bad_input(fmt::format("credential helper {} failed for {} (exit {}); its output is not shown "
                                        "(it may hold a secret)",
                                        program, host, r->status));
  }
  json doc = json::parse(r->out, nullptr, false);
  if (!doc.is_object() || !doc.contains("Secret"))
    return Error::bad_input(fmt::format("credential helper {} gave no JSON with \"Username\" and \"Secret\" for {}", program, host));
  Credentials c;
  c.username = doc.value("Username", std::string());
  c.secret = doc.value("Secret", std::string());
  c.identity_token = c.username == "<token>";
  c.origin = fmt::format("credential helper {}", program);
  return std::optional<Credentials>(c);
}

}  // namespace

std::optional<std::filesystem::path> docker_config_path() {
  if (const char* d = std::getenv("DOCKER_CONFIG"); d && *d) return std::filesystem::path(d) / "config.json";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".docker" / "config.json";
  return std::nullopt;
}

Result<std::optional<Credentials>> find_credentials(const std::string& host,
                                                    const std::optional<std::filesystem::path>& config,
                                                    const CaptureFn& capture) {
  if (!config) return std::optional<Credentials>();
  std::error_code ec;
  if (!std::filesystem::exists(*config, ec)) return std::optional<Credentials>();
  std::ifstream f(*config, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  json doc = json::parse(ss.str(), nullptr, false);
  if (!doc.is_object())
    return Error::bad_input(fmt::format("{}: not a JSON object (docker's config.json: {{\"auths\": {{...}}}})", config->string()));
  if (doc.contains("credHelpers") && doc["credHelpers"].is_object())
    for (const auto& [entry, helper] : doc["credHelpers"].items())
      if (same_registry(entry, host) && helper.is_string()) return from_helper(helper.get<std::string>(), host, *config, capture);
  if (doc.contains("auths") && doc["auths"].is_object()) {
    for (const auto& [entry, a] : doc["auths"].items()) {
      if (!same_registry(entry, host) || !a.is_object()) continue;
      Credentials c;
      c.origin = fmt::format("\"auths\" in {}", config->string());
      if (a.contains("identitytoken") && a["identitytoken"].is_string()) {
        c.username = "<token>";
        c.secret = a["identitytoken"].get<std::string>();
        c.identity_token = true;
        return std::optional<Credentials>(c);
      }
      if (a.contains("auth") && a["auth"].is_string() && !a["auth"].get<std::string>().empty()) {
        auto decoded = base64_decode(a["auth"].get<std::string>());
        auto colon = decoded ? decoded->find(':') : std::string::npos;
        if (colon == std::string::npos)
          return Error::bad_input(fmt::format("{}: auths.{}.auth is not base64 of \"user:password\"", config->string(), entry));
        c.username = decoded->substr(0, colon);
        c.secret = decoded->substr(colon + 1);
        return std::optional<Credentials>(c);
      }
      if (a.contains("username") && a.contains("password")) {
        c.username = a.value("username", std::string());
        c.secret = a.value("password", std::string());
        return std::optional<Credentials>(c);
      }
    }
  }
  // docker's credsStore holds every registry's credentials not in auths.
  if (doc.contains("credsStore") && doc["credsStore"].is_string() && !doc["credsStore"].get<std::string>().empty())
    return from_helper(doc["credsStore"].get<std::string>(), host, *config, capture);
  return std::optional<Credentials>();
}

}  // namespace archbuild::remote
