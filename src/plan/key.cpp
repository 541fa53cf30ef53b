#include "plan/key.hpp"

#include "plan/plan.hpp"
#include "recipe/driver.hpp"

namespace archbuild::plan {

using nlohmann::json;

namespace {

json nullable(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }
json object_of(const std::map<std::string, std::string>& m) {
  json j = json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

// ---- the defaults of the fields added after format 1 (key.hpp's rule)
bool is_default(bool b) { return !b; }
template <class T>
bool is_default(const std::vector<T>& v) {
  return v.empty();
}
bool is_default(const KeyInputs::Wheel& w) { return w == KeyInputs::Wheel{}; }
bool is_default(const KeyInputs::Platform& p) { return p.name.empty() || p.name == "x86_64"; }
template <class T>
bool is_default(const std::optional<T>& o) {
  return !o;
}

json to_json(bool b) { return b; }
json to_json(const std::vector<std::pair<std::string, std::string>>& settings) {
  json a = json::array();  // an array keeps the argv order
  for (const auto& [name, value] : settings) a.push_back({{"name", name}, {"value", value}});
  return a;
}
json to_json(const KeyInputs::Wheel& w) { return {{"layout", w.layout}, {"triton", nullable(w.triton)}}; }
json to_json(const KeyInputs::Platform& p) {
  return {{"name", p.name}, {"machine", p.machine}, {"cuda_target", p.cuda_target}};
}
json to_json(const std::vector<KeyInputs::Library>& libs) {
  json a = json::array();
  for (const auto& l : libs)
    a.push_back({{"name", l.name}, {"library", l.library}, {"state", l.state}, {"origin", nullable(l.origin)},
                 {"version", nullable(l.version)}});
  return a;
}
json to_json(const std::vector<KeyInputs::InstalledWheel>& wheels) {
  json a = json::array();
  for (const auto& w : wheels) a.push_back({{"name", w.name}, {"version", w.version}, {"sha256", w.sha256}});
  return a;
}

json to_json(const std::vector<KeyInputs::Fetch>& fetches);
json to_json(const std::vector<KeyInputs::Patch>& patches) {
  json a = json::array();  // in the order applied
  for (const auto& p : patches) a.push_back({{"sha256", p.sha256}, {"strip", p.strip}});
  return a;
}
json to_json(const std::optional<KeyInputs::BuildVenv>& v);

// The one place the rule is applied: an added field goes in only where it is not its default.
template <class T>
void put_added(json& doc, const char* name, const T& value) {
  if (!is_default(value)) doc[name] = to_json(value);
}

json to_json(const std::vector<KeyInputs::Fetch>& fetches) {
  json a = json::array();
  for (const auto& f : fetches) {
    json j = {{"name", f.name},           {"path", f.path},         {"url", f.url},
              {"pin_files", f.pin_files}, {"pin_file", nullable(f.pin_file)}, {"ref", nullable(f.ref)},
              {"commit", nullable(f.commit)}};
    put_added(j, "submodules", f.submodules);
    a.push_back(j);
  }
  return a;
}
json to_json(const std::optional<KeyInputs::BuildVenv>& v) {
  json j = {{"interpreter_version", v->interpreter_version},
            {"system_site_packages", v->system_site_packages},
            {"packages", object_of(v->packages)},
            {"cmake", nullable(v->cmake)}};
  put_added(j, "wheels", v->wheels);
  return j;
}

}  // namespace

json KeyInputs::to_json() const {
  json k;
  k["format"] = format;
  k["package"] = package;
  k["module"] = module;
  k["version"] = version;
  k["driver"] = driver;
  if (const auto* local = std::get_if<LocalTree>(&source))
    k["source"] = {{"local_content", local->content_hash}};
  else {
    const auto& repo = std::get<Repository>(source);
    k["source"] = {{"url", repo.url}, {"tag", repo.tag}, {"commit", nullable(repo.commit)}, {"submodules", repo.submodules}};
  }
  k["cuda"] = {{"release", cuda.release}, {"nvcc", cuda.nvcc}};
  k["host_compiler"] = {{"kind", host_compiler.kind}, {"version", host_compiler.version}};
  k["python"] = python;
  k["arch_list"] = {{"env", arch_list.env}, {"value", arch_list.value}};
  k["env"] = object_of(env);
  json s = json::array();
  for (const auto& st : steps) s.push_back({{"stage", st.stage}, {"tool", st.tool}, {"args", st.args}, {"cwd", st.cwd}});
  k["steps"] = s;
  k["build_dir"] = build_dir;
  k["wheel_dir"] = wheel_dir;
  put_added(k, "config_settings", config_settings);
  put_added(k, "wheel", wheel);
  put_added(k, "platform", platform);
  put_added(k, "libraries", libraries);
  put_added(k, "fetches", fetches);
  put_added(k, "build_venv", build_venv);
  put_added(k, "patches", patches);
  return k;
}

std::string KeyInputs::key() const { return build_key(to_json()); }

KeyInputs key_inputs_of(const PlanData& p) {
  const Resolution& res = p.resolution;
  const recipe::Recipe& r = res.recipe;
  KeyInputs k;
  k.package = r.package;
  k.module = r.module;
  k.version = p.version;
  k.driver = std::string(recipe::to_string(r.driver));
  if (p.local)
    k.source = KeyInputs::LocalTree{p.local->content_hash};
  else
    k.source = KeyInputs::Repository{p.url, p.tag, p.commit, p.submodules};
  k.cuda = {res.toolchain.cuda.str(), res.toolkit->compiler_version().str()};
  k.host_compiler = {std::string(toolchain::to_string(res.compiler->kind)), res.compiler->version.str()};
  k.python = res.python->release().str();
  k.arch_list = {r.arch.env, res.arch_list};
  for (const auto& [name, v] : p.env)
    if (v.keyed) k.env[name] = v.value;
  for (const auto& s : p.steps) k.steps.push_back({std::string(recipe::to_string(s.stage)), s.tool, s.args, s.cwd});
  k.build_dir = p.build_dir;
  k.wheel_dir = p.wheel_dir;

  k.config_settings = p.config_settings;
  k.wheel.layout = std::string(recipe::to_string(r.wheel_layout));
  if (r.wheel_triton) k.wheel.triton = r.wheel_triton->str();
  k.platform = {res.platform.name, res.platform.machine, res.platform.cuda_target};
  for (const auto& c : p.libraries.choices)
    k.libraries.push_back({c.name, c.library, std::string(to_string(c.state)),
                           c.from ? std::optional<std::string>(std::string(to_string(c.from->origin))) : std::nullopt,
                           c.from ? c.from->version : std::nullopt});
  for (const auto& f : p.fetches) {
    if (!f.active()) continue;  // the variable that switched it off is keyed already
    auto opt = [](const std::string& s) { return s.empty() ? std::nullopt : std::optional<std::string>(s); };
    k.fetches.push_back({f.name, f.path, f.url, f.pin_files, opt(f.pin_file), opt(f.ref), opt(f.commit), f.submodules});
  }
  for (const auto& pp : p.patches) k.patches.push_back({pp.patch.sha256, pp.patch.strip});
  if (p.venv) {
    KeyInputs::BuildVenv v;
    v.interpreter_version = p.venv->interpreter_version;
    v.system_site_packages = p.venv->system_site_packages;
    for (const auto& name : binary_shaping_packages())
      if (auto it = p.venv->packages.find(name); it != p.venv->packages.end()) v.packages[name] = it->second;
    v.cmake = p.venv->cmake_version;
    for (const auto& w : p.venv->wheels) v.wheels.push_back({w.name, w.version, w.sha256});
    k.build_venv = std::move(v);
  }
  return k;
}

}  // namespace archbuild::plan
