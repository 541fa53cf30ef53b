// Clean or incremental: whether a local tree's build continues the build tree of the last key
// built from the same folder and configuration (its slot), and why not where it does not.
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "core/sha256.hpp"
#include "plan/plan.hpp"

namespace archbuild::plan {

using nlohmann::json;

bool is_configuration_file(std::string_view path) {
  auto slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  static constexpr std::array<std::string_view, 9> names = {
      "CMakeLists.txt", "setup.py", "setup.cfg", "pyproject.toml", "meson.build",
      "meson_options.txt", "meson.options", "version.txt", "CMakePresets.json"};
  if (std::find(names.begin(), names.end(), name) != names.end()) return true;
  return name.ends_with(".cmake") || name.ends_with(".in");
}

namespace {

// Every occurrence of `what` in `text` replaced by `by`.
void replace_all(std::string& text, std::string_view what, std::string_view by) {
  if (what.empty()) return;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + by.size()))
    text.replace(at, what.size(), by);
}

std::string short_key(const std::string& key) { return key.substr(0, 12); }

}  // namespace

std::string incremental_slot(const PlanData& p) {
  if (!p.local) return "";
  json j;
  j["key_inputs"] = p.key_inputs;
  json env = json::object();
  for (const auto& [k, v] : p.env) env[k] = v.value;
  j["env"] = env;
  json steps = json::array();
  for (const auto& s : p.steps) steps.push_back({std::string(recipe::to_string(s.stage)), s.argv(), s.cwd});
  j["steps"] = steps;
  j["folder"] = p.local->dir.string();
  j["head"] = p.local->head ? json(*p.local->head) : json(nullptr);
  std::string text = j.dump();
  // The content, in full and as the version's label: the one input the slot leaves out.
  replace_all(text, p.local->content_hash, "<content>");
  replace_all(text, "src" + p.local->content_hash.substr(0, 7), "src<content>");
  return sha256_hex(text).substr(0, 24);
}

BuildStart decide_build_start(const PlanData& p, bool clean_asked, const std::optional<EarlierBuild>& earlier) {
  BuildStart b;
  b.slot = p.build_start.slot.empty() ? incremental_slot(p) : p.build_start.slot;
  auto clean = [&](std::string why) {
    b.mode = BuildStart::Mode::clean;
    b.why = std::move(why);
    return b;
  };
  if (!p.local) return clean("a repository's checkout is built in its own build tree (incremental builds are a local tree's)");
  if (clean_asked) return clean("--clean");
  if (!earlier) return clean("no earlier build of this folder with this configuration");
  const std::string k = short_key(earlier->key);
  if (earlier->key == p.key) {
    b.mode = BuildStart::Mode::incremental;
    b.from_key = earlier->key;
    return b;
  }
  if (!earlier->configured) return clean(fmt::format("the earlier build (key {}) did not finish configuring", k));
  if (earlier->shape_hash != p.local->shape_hash)
    return clean(fmt::format("files were added, removed or renamed, or changed mode or link target, since key {} "
                             "(a build tree may keep what it made of them)", k));
  std::vector<std::string> changed;
  for (const auto& [path, digest] : p.local->config_files) {
    auto it = earlier->config_files.find(path);
    if (it == earlier->config_files.end() || it->second != digest) changed.push_back(path);
  }
  for (const auto& [path, digest] : earlier->config_files)
    if (!p.local->config_files.count(path)) changed.push_back(path);
  if (!changed.empty()) {
    std::sort(changed.begin(), changed.end());
    std::string list;
    for (std::size_t i = 0; i < changed.size() && i < 3; ++i) list += (i ? ", " : "") + changed[i];
    if (changed.size() > 3) list += fmt::format(" and {} more", changed.size() - 3);
    return clean(fmt::format("a configuration file changed since key {} ({}): a configured build tree keeps the "
                             "values of its first configure", k, list));
  }
  b.mode = BuildStart::Mode::incremental;
  b.from_key = earlier->key;
  return b;
}

Plan with_build_start(const Plan& plan, BuildStart start) {
  auto d = std::make_shared<PlanData>(*plan);
  d->build_start = std::move(start);
  return Plan(std::move(d));
}

json to_json(const BuildStart& b) {
  json j = {{"mode", b.mode == BuildStart::Mode::incremental ? "incremental" : "clean"},
            {"slot", b.slot.empty() ? json(nullptr) : json(b.slot)}};
  if (b.mode == BuildStart::Mode::incremental) j["from_key"] = b.from_key;
  else j["why"] = b.why;
  return j;
}

}  // namespace archbuild::plan
