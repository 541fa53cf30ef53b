#include "stages/build_start.hpp"

#include <optional>

#include <fmt/format.h>

#include "stages/local_tree.hpp"
#include "store/key_record.hpp"

namespace archbuild::stages {

using nlohmann::json;

plan::BuildStart effective_build_start(const plan::BuildStart& planned, const store::Layout& layout,
                                       const std::string& slot, const std::string& key, const json& launchers) {
  plan::BuildStart start = planned;
  if (start.mode != plan::BuildStart::Mode::incremental) return start;
  auto clean = [&](std::string why) {
    start.mode = plan::BuildStart::Mode::clean;
    start.why = std::move(why);
    start.from_key.clear();
    return start;
  };
  const std::string k = start.from_key.substr(0, 12);
  auto now = slot.empty() ? std::nullopt : earlier_build(layout, slot);
  if (!now || now->key != start.from_key)
    return clean(fmt::format("the work place of this folder and configuration in {} does not hold key {}'s build "
                             "tree", layout.root().string(), k));
  if (start.from_key == key) return start;  // this key's own tree: the pipeline's resume rules apply
  if (!now->configured) return clean(fmt::format("the earlier build (key {}) did not finish configuring", k));
  auto doc = store::KeyRecord(layout, start.from_key).read();
  json was = doc ? doc->value("/stages/configure/launchers"_json_pointer, json()) : json();
  if (was != launchers)
    return clean(fmt::format("the compiler launchers differ from those key {}'s build tree was configured with", k));
  return start;
}

}  // namespace archbuild::stages
