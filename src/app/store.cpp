#include "app/store.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "core/text.hpp"
#include "run/capture.hpp"

namespace archbuild::app {

namespace {

std::string store_env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

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

}  // namespace archbuild::app
