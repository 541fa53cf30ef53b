// keys/<key>.json: what the cache knows about one build key — the manifest (provenance, written
// by the pipeline), the stage stamps and the finished wheel. Every change rewrites the file
// atomically; callers hold the key's lock (lock.hpp) around read-modify-write.
//
// Fields this class owns (the rest of the document is the caller's):
//   "key":    the build key
//   "stages": {"<stage>": {"done": true, "at": "2025-01-31T12:00:00Z", …extra}}
//   "wheel":  {"sha256": "…", "filename": "minitorch-0.1.0+cu130.sm90-….whl", "size": 12345}
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "store/layout.hpp"
#include "store/wheels.hpp"

namespace archbuild::store {

struct WheelRef {
  std::string sha256;
  std::string filename;
  std::uintmax_t size = 0;
};

class KeyRecord {
 public:
  KeyRecord(const Layout& layout, std::string key);
  const std::string& key() const { return key_; }
  const std::filesystem::path& path() const { return path_; }

  bool exists() const;
  // The document; {} when there is none yet. Not valid JSON → error naming the file and the
  // way out (the file is only ever written atomically, so this means outside interference).
  Result<nlohmann::json> read() const;
  Result<Ok> write(const nlohmann::json& doc) const;
  // read → edit → write (atomic). Sets "key".
  Result<Ok> update(const std::function<void(nlohmann::json&)>& edit) const;

  // ---- stamps: a failed run resumes at the failed stage
  Result<bool> done(std::string_view stage) const;
  Result<Ok> mark_done(std::string_view stage, const nlohmann::json& extra = nlohmann::json::object()) const;
  Result<Ok> clear_stage(std::string_view stage) const;
  Result<Ok> clear_stages() const;
  // The first stage of `order` not stamped done: where a run starts (it runs that one and all
  // after it; stamps of later stages from an older run do not count). nullopt: all done.
  Result<std::optional<std::string>> resume_point(const std::vector<std::string>& order) const;

  // ---- the finished wheel
  Result<Ok> set_wheel(const StoredWheel& stored, const std::string& filename) const;
  Result<std::optional<WheelRef>> wheel() const;
  // Why the manifest's "wheel" entry cannot be used (a damaged manifest: wheel() then says no
  // wheel, and the key is rebuilt); nullopt when there is none or it is fine.
  std::optional<std::string> wheel_damage() const;
  Result<Ok> clear_wheel() const;

  // How the document reaches the disk (unset: write_file_atomic): a test gives one that fails.
  using Writer = std::function<Result<Ok>(const std::filesystem::path&, std::string_view)>;
  void set_writer(Writer w) { writer_ = std::move(w); }

 private:
  std::string key_;
  std::filesystem::path path_;
  Writer writer_;
};

// UTC time as "YYYY-MM-DDTHH:MM:SSZ" (stamps, manifests).
std::string utc_now_iso();

}  // namespace archbuild::store
