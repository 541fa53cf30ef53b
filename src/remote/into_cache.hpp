// A result pulled from the build store made the cache's finished key: the wheel content-addressed,
// the key's manifest as its builder wrote it plus where it came from, validated on this host first.
// The cache is written through store/ (store::put_wheel, store::KeyRecord), as every writer of it.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "remote/build_store.hpp"
#include "store/layout.hpp"

namespace archbuild::remote {

// This host's checks of a pulled wheel (its validation document), or why it fails them.
using ValidateFn = std::function<Result<nlohmann::json>(const std::filesystem::path& wheel)>;

// Pulls `key` (its manifest as looked up) into `layout`, validated through `validate` when given:
// where it came from ({url, digest, signed_by, pulled_at}). Error: the result is not used (exit 1,
// why); the caller warns and builds.
Result<nlohmann::json> pull_into_cache(BuildStore& store, const Manifest& manifest, const std::string& key,
                                       const store::Layout& layout, const ValidateFn& validate);

}  // namespace archbuild::remote
