#include "remote/into_cache.hpp"

#include <fmt/format.h>

#include "store/key_record.hpp"
#include "store/wheels.hpp"

namespace archbuild::remote {

Result<nlohmann::json> pull_into_cache(BuildStore& store, const Manifest& manifest, const std::string& key,
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

}  // namespace archbuild::remote
