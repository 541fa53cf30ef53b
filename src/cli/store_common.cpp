#include "cli/store_common.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "core/text.hpp"
#include "run/capture.hpp"
#include "store/key_record.hpp"
#include "store/wheels.hpp"

namespace archbuild::cli {

namespace {

std::string store_env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

void add_store_options(CLI::App& cmd, StoreArgs& args, bool pushes) {
  cmd.add_option("--store", args.url,
                 pushes ? "Shared build store on an OCI registry, oci://HOST[:PORT]/REPOSITORY (oci+http:// for one without "
                          "TLS): the key is pulled from it when there, pushed to it after a validated build (default: "
                          "$ARCHBUILD_STORE; docs/store.md)"
                        : "Shared build store on an OCI registry, oci://HOST[:PORT]/REPOSITORY: whether it has the key "
                          "(default: $ARCHBUILD_STORE)");
  cmd.add_flag("--store-required", args.required,
               "A store that cannot be reached fails the command (exit 3) instead of a warning and a local build "
               "(default: $ARCHBUILD_STORE_REQUIRED=1)");
  if (pushes)
    cmd.add_option("--store-sign-key", args.sign_key,
                   "Ed25519 or ECDSA P-256 private key (PEM) that signs what is pushed (default: $ARCHBUILD_STORE_SIGN_KEY)");
  cmd.add_option("--store-trust", args.trust,
                 "Ed25519 or ECDSA P-256 public keys (PEM): a pulled result must be signed by one of them, else it is not used "
                 "(default: $ARCHBUILD_STORE_TRUST, comma-separated)")
      ->delimiter(',');
}

std::optional<remote::BuildStore> open_store(const StoreArgs& args) {
  remote::StoreConfig c;
  c.url = !args.url.empty() ? args.url : store_env("ARCHBUILD_STORE");
  if (c.url.empty()) return std::nullopt;
  c.required = args.required || store_env("ARCHBUILD_STORE_REQUIRED") == "1";
  std::string sign = !args.sign_key.empty() ? args.sign_key : store_env("ARCHBUILD_STORE_SIGN_KEY");
  if (!sign.empty()) c.sign_key = sign;
  std::vector<std::string> trust = args.trust;
  if (trust.empty())
    for (const auto& t : text::split_any(store_env("ARCHBUILD_STORE_TRUST"), ","))
      if (!text::trim(t).empty()) trust.push_back(text::trim(t));
  for (const auto& t : trust) c.trust.emplace_back(t);
  auto store = remote::BuildStore::open(c, [](const std::vector<std::string>& argv, const run::CaptureOptions& o) {
    return run::capture(argv, o);
  });
  if (!store) throw Failure(store.error());
  return std::move(*store);
}

StoreLookup look_up(remote::BuildStore& store, const std::string& key) {
  StoreLookup l;
  auto m = store.lookup(key);
  if (!m) {
    l.state = StoreLookup::State::unreachable;
    l.problem = m.error().message;
  } else if (*m) {
    l.state = StoreLookup::State::present;
    l.manifest = *m;
  }
  return l;
}

nlohmann::json StoreLookup::to_json(const remote::BuildStore& store) const {
  return {{"url", store.url().text()},
          {"has_key", state == State::present},
          {"reachable", state != State::unreachable},
          {"digest", manifest ? nlohmann::json(manifest->digest) : nlohmann::json(nullptr)},
          {"problem", problem.empty() ? nlohmann::json(nullptr) : nlohmann::json(problem)}};
}

std::string StoreLookup::line(const remote::BuildStore& store, const std::string& key) const {
  switch (state) {
    case State::present:
      return fmt::format("{} has key {} ({}): `wheel` pulls it, no stage runs", store.url().text(), key.substr(0, 16),
                         manifest->digest.substr(0, 19));
    case State::absent: return fmt::format("{} does not have key {}: `wheel` builds it and pushes it", store.url().text(), key.substr(0, 16));
    case State::unreachable: break;
  }
  return fmt::format("{} cannot be read ({}): `wheel` {}", store.url().text(), problem,
                     store.config().required ? "stops (--store-required)" : "builds locally");
}

Result<nlohmann::json> pull_into_cache(remote::BuildStore& store, const remote::Manifest& manifest, const std::string& key,
                                       const store::Layout& layout, const ValidateFn& validate) {
  if (auto c = layout.create(); !c) return c.error();
  auto staging = layout.store_pull_dir(key);
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{staging};
  auto pulled = store.pull(key, manifest, staging);
  if (!pulled) return pulled.error();
  // Validated here too: this host's toolkit, driver and GPUs are not host A's.
  nlohmann::json validation = pulled->validation;
  if (validate) {
    auto v = validate(pulled->wheel);
    if (!v) {
      Error e = v.error();
      e.message = fmt::format("the store's wheel for key {} fails validation here: {}", key.substr(0, 16), e.message);
      return e;
    }
    validation = *v;
  }
  auto stored = store::put_wheel(layout, pulled->wheel);
  if (!stored) return stored.error();
  nlohmann::json from = {{"url", store.url().text()},
                         {"digest", pulled->digest},
                         {"signed_by", pulled->signed_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(pulled->signed_by)},
                         {"pulled_at", store::utc_now_iso()}};
  nlohmann::json m = pulled->manifest;
  m["store"] = from;
  m["validation"] = validation;
  if (!pulled->build_report.is_null()) m["build_report"] = pulled->build_report;
  store::KeyRecord record(layout, key);
  if (auto r = record.update([&](nlohmann::json& d) {
        d["manifest"] = m;
        d["validation"] = validation;
        d["build_report"] = pulled->build_report;
      });
      !r)
    return r.error();
  if (auto r = record.set_wheel(*stored, pulled->filename); !r) return r.error();
  return from;
}

}  // namespace archbuild::cli
