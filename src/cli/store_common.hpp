// --store and its companions on `wheel` and `plan` (docs/store.md): the options, the environment
// they default from, the lookup both commands show, and putting a pulled result into the cache.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/context.hpp"
#include "remote/build_store.hpp"
#include "store/layout.hpp"

namespace archbuild::cli {

struct StoreArgs {
  std::string url;                 // --store (else $ARCHBUILD_STORE)
  bool required = false;           // --store-required (else $ARCHBUILD_STORE_REQUIRED=1)
  std::string sign_key;            // --store-sign-key (else $ARCHBUILD_STORE_SIGN_KEY)
  std::vector<std::string> trust;  // --store-trust (else $ARCHBUILD_STORE_TRUST, comma-separated)
};

void add_store_options(CLI::App& cmd, StoreArgs& args, bool pushes);

// nullopt when no store is configured. Bad input (a URL, a key file, docker's config) throws Failure, exit 2.
std::optional<remote::BuildStore> open_store(const StoreArgs& args);

// Whether the store has a key: what `plan` prints and what `wheel` acts on.
struct StoreLookup {
  enum class State { absent, present, unreachable } state = State::absent;
  std::optional<remote::Manifest> manifest;
  std::string problem;  // unreachable: why
  nlohmann::json to_json(const remote::BuildStore& store) const;
  std::string line(const remote::BuildStore& store, const std::string& key) const;
};
StoreLookup look_up(remote::BuildStore& store, const std::string& key);

// A pulled, checked result made the cache's finished key (the wheel content-addressed, the key's
// manifest as host A wrote it plus where it came from, validated here first through `validate`).
// Error: the result is not used (exit 1, why); the caller warns and builds.
using ValidateFn = std::function<Result<nlohmann::json>(const std::filesystem::path& wheel)>;
Result<nlohmann::json> pull_into_cache(remote::BuildStore& store, const remote::Manifest& manifest, const std::string& key,
                                       const store::Layout& layout, const ValidateFn& validate);

}  // namespace archbuild::cli
