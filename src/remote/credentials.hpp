// Registry credentials the way docker, oras and skopeo find them: $DOCKER_CONFIG/config.json
// (else ~/.docker/config.json): `credHelpers[host]`, then `credsStore`, then `auths[host]`
// ("auth": base64 user:password, or "username"/"password", or "identitytoken"). A helper is
// `docker-credential-<name> get` with the host on stdin, run through run::capture.
// Nothing here prints or returns a secret in a message.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "run/capture.hpp"

namespace archbuild::remote {

struct Credentials {
  std::string username;
  std::string secret;        // password or identity token
  bool identity_token = false;  // an OAuth2 refresh token (username "<token>")
  std::string origin;        // where it came from, for messages: "auths in /home/u/.docker/config.json"
};

using CaptureFn = std::function<Result<run::Captured>(const std::vector<std::string>&, const run::CaptureOptions&)>;

// The config file docker reads: $DOCKER_CONFIG/config.json, else $HOME/.docker/config.json.
std::optional<std::filesystem::path> docker_config_path();

// Credentials for `host` (host[:port] as in the store URL), nullopt when none is configured.
// Error (exit 2) for a config file that is not JSON or a helper that fails.
Result<std::optional<Credentials>> find_credentials(const std::string& host,
                                                    const std::optional<std::filesystem::path>& config,
                                                    const CaptureFn& capture);

}  // namespace archbuild::remote
