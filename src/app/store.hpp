// The shared build store as commands configure it (docs/store.md): its settings from the options
// or the environment, and the lookup `plan`, `wheel` and `matrix` show and act on.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "remote/build_store.hpp"

namespace archbuild::app {

struct StoreArgs {
  std::string url;                 // --store (else $ARCHBUILD_STORE)
  bool required = false;           // --store-required (else $ARCHBUILD_STORE_REQUIRED=1)
  std::string sign_key;            // --store-sign-key (else $ARCHBUILD_STORE_SIGN_KEY)
  std::vector<std::string> trust;  // --store-trust (else $ARCHBUILD_STORE_TRUST, comma-separated)
};

// nullopt when no store is configured. Bad input (a URL, a key file, docker's config) throws Failure, exit 2.
std::optional<remote::BuildStore> open_store(const StoreArgs& args);

// Whether the store has a key: what `plan` prints and what `wheel` acts on.
struct StoreLookup {
  enum class State { absent, present, unreachable } state = State::absent;
  std::optional<remote::Manifest> manifest;
  std::string problem;  // unreachable: why
  nlohmann::json to_json(const remote::BuildStore& store) const;
  std::string line(const remote::BuildStore& store, const std::string& key) const;
  // A store that must be read (--store-required) and cannot be: prepare's stop.
  bool stops(const remote::BuildStore& store) const { return state == State::unreachable && store.config().required; }
};
StoreLookup look_up(remote::BuildStore& store, const std::string& key);

}  // namespace archbuild::app
