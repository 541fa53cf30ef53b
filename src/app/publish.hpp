// `publish --key KEY…`: what the shared build store holds, published into a mirror by build key
// (docs/store.md, docs/mirror.md). Each key is taken as `wheel` takes a key it pulls: the
// signature when keys are trusted (--store-trust, $ARCHBUILD_STORE_TRUST), every blob's digest,
// the wheel's sha256 against what was pushed (remote::BuildStore::pull); then the wheel is checked
// here as `validate --no-import --no-smoke` checks it (structure, RECORD, coverage of the targets
// its manifest's arch list names, link closure): a mirror host needs neither the build's Python
// nor a GPU. All keys are pulled and checked before anything is published: one refused key
// publishes nothing.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/session.hpp"
#include "app/store.hpp"
#include "mirror/mirror.hpp"

namespace archbuild::app {

struct KeyPublished {
  std::string key;
  std::string file;       // the wheel's file name, as the store holds it
  std::string digest;     // the store artifact's manifest digest
  std::string signed_by;  // the trusted key's file; empty when no key is trusted
  nlohmann::json to_json() const;
};

struct StorePublish {
  std::vector<KeyPublished> keys;
  std::vector<mirror::Published> published;  // the keys' wheels and `wheels`, as mirror::publish says
};

// `wheels`: files published beside the keys' wheels. Errors (thrown as Failure): no store
// configured (exit 2), the store unreachable (3), a key it does not hold, refused by trust or
// failing the checks (1), and mirror::publish's own.
StorePublish publish_from_store(const StoreArgs& store, const std::vector<std::string>& keys,
                                const std::vector<std::filesystem::path>& wheels, const std::filesystem::path& mirror_dir,
                                const mirror::PublishOptions& options, const Session& s);

}  // namespace archbuild::app
