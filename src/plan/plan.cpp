#include "plan/plan.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "contract/contract.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "plan/key.hpp"
#include "recipe/driver.hpp"

namespace archbuild::plan {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> Step::argv() const {
  std::vector<std::string> v{program.string()};
  v.insert(v.end(), args.begin(), args.end());
  return v;
}

std::string local_version(const recipe::Recipe& r, const toolchain::Toolchain& tc, const std::vector<arch::Arch>& archs) {
  // PEP 440 local label: alphanumerics separated by dots, e.g. 2.7.1+cu128.sm120.
  std::vector<std::string> parts{tc.cu_tag()};
  for (const auto& a : archs) {
    std::string v(arch::suffix(a.variant));
    if (a.sass) parts.push_back(fmt::format("sm{}{}", a.cc.sm(), v));
    if (a.ptx) parts.push_back(fmt::format("ptx{}{}", a.cc.sm(), v));
  }
  return fmt::format("{}+{}", r.version.str(), text::join(parts, "."));
}

namespace {

// "2.16.0a0" from a version.txt line, "2.15.1" from a tag "v2.15.1"; nullopt unless PEP 440-ish
// (digits and dots, then an optional a/b/rc/.dev/.post part): anything else keeps the recipe's.
std::optional<std::string> release_of(std::string s) {
  s = text::trim(s);
  if (!s.empty() && (s[0] == 'v' || s[0] == 'V')) s.erase(0, 1);
  if (auto plus = s.find('+'); plus != std::string::npos) s.erase(plus);
  static const std::regex pep440(R"(^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$)");
  if (!std::regex_match(s, pep440)) return std::nullopt;
  return s;
}

}  // namespace

std::string source_version(const recipe::Recipe& r, const SourceChoice& s, const toolchain::Toolchain& tc,
                           const std::vector<arch::Arch>& archs) {
  std::string base = local_version(r, tc, archs);
  std::string labels = base.substr(base.find('+') + 1);
  std::string release = r.version.str();
  std::string first_line = s.tree_version ? text::trim(s.tree_version->substr(0, s.tree_version->find('\n'))) : "";
  switch (s.kind) {
    case SourceChoice::Kind::recipe_tag: return base;
    case SourceChoice::Kind::ref:
      if (s.ref_is_tag && !s.other_repository) {
        bool pinned_elsewhere = r.source.commit && !s.commit.starts_with(text::lower(*r.source.commit));
        if (s.ref == r.source.tag && !pinned_elsewhere) return base;
        if (s.ref != r.source.tag)
          if (auto v = release_of(s.ref)) return fmt::format("{}+{}", *v, labels);
      }
      if (s.ref_is_tag)  // the tag's release, and the commit that says whose tree it is
        if (auto v = release_of(s.ref)) return fmt::format("{}+git{}.{}", *v, s.commit.substr(0, 7), labels);
      if (auto v = release_of(first_line)) release = *v;
      return fmt::format("{}+git{}.{}", release, s.commit.substr(0, 7), labels);
    case SourceChoice::Kind::local:
      if (auto v = release_of(first_line)) release = *v;
      return fmt::format("{}+src{}.{}", release, s.content_hash.substr(0, 7), labels);
  }
  return base;
}

const std::vector<std::string>& build_env_allowlist() {
  static const std::vector<std::string> names = {
      "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_*", "TMPDIR", "TZ",
      "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
      "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
      "PIP_*", "UV_*",
      "CUDNN_*", "NCCL_*", "CUSPARSELT_*", "MAGMA_HOME", "MKLROOT", "MKL_*", "BLAS", "OpenBLAS_HOME",
      "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH",
      // Where pip.conf is read from (with HOME and PIP_CONFIG_FILE): pip's own configuration.
      "XDG_CONFIG_HOME",
      // Where qemu-user finds an emulated program's loader and libraries (an aarch64 build run
      // on an x86_64 host through binfmt): without it the build's own aarch64 tools do not start.
      "QEMU_LD_PREFIX"};
  return names;
}

bool env_allowed(const std::vector<std::string>& allowlist, const std::string& name) {
  for (const auto& a : allowlist) {
    if (!a.empty() && a.back() == '*') {
      if (name.size() >= a.size() - 1 && name.compare(0, a.size() - 1, a, 0, a.size() - 1) == 0) return true;
    } else if (a == name) {
      return true;
    }
  }
  return false;
}

std::vector<FetchPlan> fetch_plans(const Resolution& res, const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> merged = res.recipe.env;
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<FetchPlan> out;
  for (const auto& f : res.recipe.fetches) {
    FetchPlan p;
    p.name = f.name;
    p.path = f.path;
    p.url = f.url;
    p.pin_files = recipe::pin_files_for(f, res.toolchain.cuda);
    p.submodules = f.submodules;
    p.disabled_by = recipe::fetch_disabled_by(f, merged);
    out.push_back(std::move(p));
  }
  return out;
}

namespace {

json fetches_json(const std::vector<FetchPlan>& fetches, bool for_key) {
  json a = json::array();
  for (const auto& f : fetches) {
    if (for_key && !f.active()) continue;  // the variable that disabled it is keyed already
    json j = {{"name", f.name}, {"path", f.path}, {"url", f.url}, {"pin_files", f.pin_files},
              {"pin_file", f.pin_file.empty() ? json(nullptr) : json(f.pin_file)},
              {"ref", f.ref.empty() ? json(nullptr) : json(f.ref)},
              {"commit", f.commit.empty() ? json(nullptr) : json(f.commit)}};
    if (f.submodules || !for_key) j["submodules"] = f.submodules;
    if (!for_key) j["disabled_by"] = f.disabled_by.empty() ? json(nullptr) : json(f.disabled_by);
    a.push_back(j);
  }
  return a;
}

}  // namespace

const std::vector<std::string>& binary_shaping_packages() {
  // numpy: its C ABI is compiled in; cmake, ninja, setuptools, scikit-build-core drive the build
  // and its flags; torch: what an extension (torchvision) builds against.
  static const std::vector<std::string> names = {"numpy", "cmake", "ninja", "setuptools", "scikit-build-core", "torch"};
  return names;
}

std::string build_key(const json& key_inputs) {
  // nlohmann's objects are sorted maps: dump() is canonical (sorted keys, no whitespace).
  return sha256_hex("archbuild build key v1\n" + key_inputs.dump());
}

std::map<std::string, std::string> Plan::environment() const {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : d_->env) out[k] = v.value;
  return out;
}

namespace {

std::vector<std::string> versions(const std::vector<Version>& vs) {
  std::vector<std::string> out;
  for (const auto& v : vs) out.push_back(v.str());
  return out;
}

json arch_json(const std::vector<arch::Arch>& archs) {
  json a = json::array();
  for (const auto& x : archs)
    a.push_back({{"cc", x.cc_name()}, {"sass", x.sass}, {"ptx", x.ptx}});
  return a;
}

// [{"name": "build-dir", "value": "build"}, …]: an array keeps the argv order.
json config_settings_json(const std::vector<std::pair<std::string, std::string>>& settings) {
  json a = json::array();
  for (const auto& [name, value] : settings) a.push_back({{"name", name}, {"value", value}});
  return a;
}

// Why the tree's build-dir cannot be the plan's build tree ("" when it can): the build tree lies
// in the key's source tree, where resume and the half-configured check look for it.
std::string build_dir_unusable(const std::string& dir) {
  if (dir.empty()) return "empty: a temporary directory, nothing would resume";
  if (dir.find('{') != std::string::npos) return "it has placeholders the plan does not expand";
  fs::path p = fs::path(dir).lexically_normal();
  if (p.is_absolute()) return "absolute: outside the key's source tree";
  if (p == "." || p == "./") return "the source tree itself";
  for (const auto& part : p)
    if (part == "..") return "it leads out of the source tree";
  return "";
}

struct Pep517Settings {
  std::vector<std::pair<std::string, std::string>> settings;
  std::string build_dir;
  std::vector<std::string> notes;
};

// The config settings a driver with skbuild_settings passes (scikit-build-core): only what the tree's
// [tool.scikit-build] leaves open, since scikit-build-core takes a config setting over the tree's
// table and its [[tool.scikit-build.overrides]] alike (contract::ScikitBuild). PyTorch >= 2.14
// sets build-dir = "build" itself and leaves cmake.build-type unset on purpose: overrides map
// DEBUG and REL_WITH_DEB_INFO to it, scikit-build-core >= 1.0 reads CMAKE_BUILD_TYPE, the default
// is Release (cyyever/pytorch@0011014f:pyproject.toml, a fork of pytorch/pytorch after the
// switch, PR #180247; pytorch/pytorch@002e962d:cmake/EnvVarForwarding.cmake names the same
// overrides). So the build type is never passed: --env DEBUG=1 reaches the tree's overrides.
// build-dir is passed where the tree sets none (scikit-build-core builds in a temporary directory
// otherwise: nothing would resume, ccache would see new paths every time); a relative build-dir
// is taken from the working directory, which `python -m build` makes the source tree
// (scikit-build/scikit-build-core@dd7671e4:src/scikit_build_core/build/wheel.py), so the key
// holds the relative form.
Pep517Settings skbuild_config_settings(const std::optional<contract::ScikitBuild>& tree, const std::string& build_dir) {
  Pep517Settings out{{}, build_dir, {}};
  if (tree && tree->build_dir) {
    if (std::string why = build_dir_unusable(*tree->build_dir); why.empty()) {
      fs::path own = fs::path(*tree->build_dir).lexically_normal();
      if (!own.has_filename()) own = own.parent_path();  // "build/"
      out.build_dir = own.generic_string();
      out.notes.push_back(fmt::format("build-dir: not passed: the tree's own, {} ({})", out.build_dir,
                                      tree->build_dir_where.str()));
    } else {
      out.settings.push_back({"build-dir", build_dir});
      out.notes.push_back(fmt::format("build-dir: passed over the tree's \"{}\" ({}): {}", *tree->build_dir,
                                      tree->build_dir_where.str(), why));
    }
  } else {
    out.settings.push_back({"build-dir", build_dir});
    out.notes.push_back(tree ? "build-dir: passed: the tree sets none (scikit-build-core would build in a temporary directory)"
                             : "build-dir: passed: the tree's [tool.scikit-build] is not read yet");
  }
  out.notes.push_back("cmake.build-type: not passed: " +
                      (tree ? "the tree's: " + contract::build_type_rule(*tree)
                            : std::string("the backend's: the tree's overrides, else $CMAKE_BUILD_TYPE, else Release")));
  return out;
}

// The driver's step arguments for this plan: "{build_dir}" and "{wheel_dir}" are the plan's,
// "{config_settings}" is -C NAME=VALUE for each config setting (recipe/driver.hpp).
std::vector<std::string> step_args(const std::vector<std::string>& args, const PlanData& p) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    if (a == "{build_dir}") {
      out.push_back(p.build_dir);
    } else if (a == "{wheel_dir}") {
      out.push_back(p.wheel_dir);
    } else if (a == "{config_settings}") {
      for (const auto& [name, value] : p.config_settings) {
        out.push_back("-C");
        out.push_back(fmt::format("{}={}", name, value));
      }
    } else {
      out.push_back(a);
    }
  }
  return out;
}

// The driver's config settings: what the tree's [tool.scikit-build] leaves open where the driver
// reads it, then the ones it always passes (their "{build_dir}" the plan's).
void plan_config_settings(const recipe::DriverSpec& d, const PlanOptions& options, PlanData& p) {
  if (d.skbuild_settings) {
    auto pep = skbuild_config_settings(options.skbuild, p.build_dir);
    p.build_dir = pep.build_dir;
    p.config_settings = std::move(pep.settings);
    p.config_notes = std::move(pep.notes);
  }
  for (const auto& c : d.config_settings) {
    std::string value = c.value;
    if (auto at = value.find("{build_dir}"); at != std::string::npos) value.replace(at, 11, p.build_dir);
    p.config_settings.push_back({c.name, value});
    p.config_notes.push_back(fmt::format("{}: passed: {}", c.name, c.why));
  }
}

// The recipe's libraries (plan/libraries.hpp) decided from the gathered facts; their switches
// enter the environment keyed, where they lie unkeyed.
Result<Ok> plan_recipe_libraries(const Resolution& res, const PlanOptions& options, PlanData& p) {
  const recipe::Recipe& r = res.recipe;
  if (r.libraries.empty() && options.without.empty()) return Ok{};
  LibraryInputs in;
  in.machine = res.platform.machine;
  // What the platform's official builds select (BLAS=NVPL on sbsa) is preferred where found.
  if (auto it = r.platforms.find(res.platform.name); it != r.platforms.end()) {
    in.preferred_env = it->second.official_env;
    in.preferred_from = fmt::format("the official {} builds (recipe [platform.{}] official_env)", res.platform.name,
                                    res.platform.name);
  }
  if (!options.library_specs) return Error{Exit::internal, "plan::PlanOptions without library specs (library_specs)"};
  in.specs = recipe::merge_specs(*options.library_specs, r.libraries.define);
  in.requirements = r.libraries;
  in.facts = options.library_facts;
  in.without = options.without;
  for (const auto& [k, v] : p.env)
    if (v.keyed) in.fixed_env[k] = v.value;
  for (const auto& [k, v] : options.env) in.fixed_from[k] = "--env";
  std::map<std::string, std::string> merged = r.env;
  for (const auto& [k, v] : in.fixed_env) merged[k] = v;
  for (const auto& f : r.fetches)
    if (recipe::fetch_disabled_by(f, merged).empty()) in.from_fetch[f.name] = f.path;
  auto lp = plan_libraries(in);
  if (!lp) return lp.error();
  for (const auto& [k, v] : lp->keyed_env) p.env[k] = EnvVar{v, true, ""};
  for (const auto& [k, v] : lp->path_env)
    p.env[k] = EnvVar{v, false, "a path; the key holds the library's origin and version"};
  p.libraries = std::move(*lp);
  return Ok{};
}

}  // namespace

json wheels_json(const std::vector<InstalledWheel>& wheels, bool for_key) {
  json a = json::array();
  for (const auto& w : wheels) {
    json j = {{"name", w.name}, {"version", w.version}, {"sha256", w.sha256}};
    if (!for_key) j["file"] = w.file.string();
    a.push_back(j);
  }
  return a;
}

json venv_json(const BuildVenv& v) {
  return {{"dir", v.dir.string()},
          {"python", v.python.string()},
          {"hash", v.hash},
          {"interpreter", v.interpreter},
          {"interpreter_version", v.interpreter_version},
          {"requirements", v.requirements},
          {"from_host", v.from_host},
          {"from_venv", v.from_venv},
          {"from_system", v.from_system},
          {"sources", v.sources},
          {"system_site_packages", v.system_site_packages},
          {"packages", v.packages},
          {"cmake", v.cmake.empty() ? json(nullptr) : json(v.cmake.string())},
          {"cmake_version", v.cmake_version ? json(*v.cmake_version) : json(nullptr)},
          {"pip_options", v.pip_options},
          {"wheels", wheels_json(v.wheels, false)},
          {"reused", v.reused}};
}

json to_json(const recipe::Recipe& r) {
  json j;
  j["name"] = r.name;
  j["file"] = r.file.string();
  std::vector<std::string> chain;
  for (const auto& c : r.chain) chain.push_back(c.string());
  j["chain"] = chain;
  j["description"] = r.description;
  j["package"] = r.package;
  j["module"] = r.module;
  j["version"] = r.version.str();
  j["torch"] = r.torch ? json(r.torch->str()) : json(nullptr);
  if (!r.torch_also.empty()) {
    j["torch_also"] = json::array();
    for (const auto& v : r.torch_also) j["torch_also"].push_back(v.str());
  }
  j["abstract"] = r.abstract;
  j["cuda"] = versions(r.cuda);
  j["python"] = versions(r.python);
  j["source"] = {{"url", r.source.url},
                 {"path", r.source.path.empty() ? json(nullptr) : json(r.source.path.string())},
                 {"tag", r.source.tag},
                 {"commit", r.source.commit ? json(*r.source.commit) : json(nullptr)},
                 {"submodules", r.source.submodules}};
  j["build"] = {{"driver", std::string(recipe::to_string(r.driver))},
                {"tools", r.tools},
                {"python_modules", recipe::python_modules(r)},
                {"python_modules_from", r.python_modules ? "recipe" : "driver default"},
                {"env", r.env},
                {"version_env", r.version_env},
                {"build_number_env", r.build_number_env},
                {"build_number", r.build_number},
                {"wheel_dir", r.wheel_dir},
                {"min_gcc", r.min_gcc ? json(r.min_gcc->str()) : json(nullptr)},
                {"nvcc_job_mb", recipe::nvcc_job_mb(r.memory, r.nvcc_threads.value_or(1))},
                {"nvcc_threads", r.nvcc_threads ? json(*r.nvcc_threads) : json(nullptr)},
                {"cmake_max", r.cmake_max ? json(r.cmake_max->str()) : json(nullptr)},
                {"forwards_env_as_list", r.forwards_env_as_list}};
  j["libraries"] = {{"expected", r.libraries.expected}, {"optional", r.libraries.optional}};
  j["host"] = {{"disk_gib", r.disk_gib}};
  std::vector<std::string> accepts;
  if (r.arch.two_digit_major) accepts.push_back("two-digit-major");
  if (r.arch.variant_a) accepts.push_back("a");
  if (r.arch.variant_f) accepts.push_back("f");
  j["arch"] = {{"env", r.arch.env},
               {"format", r.arch.format == recipe::ArchFormat::torch   ? "torch"
                          : r.arch.format == recipe::ArchFormat::cmake ? "cmake"
                                                                       : "sm"},
               {"values", r.arch.values},
               {"grammar", r.arch.grammar == arch::Grammar::build       ? "build"
                           : r.arch.grammar == arch::Grammar::extension ? "extension"
                                                                        : "cmake"},
               {"accepts", accepts},
               {"official", r.official}};
  json fetches = json::array();
  for (const auto& f : r.fetches)
    fetches.push_back({{"name", f.name}, {"path", f.path}, {"url", f.url}, {"pin_files", f.pin_files},
                       {"unless_env", f.unless_env}, {"submodules", f.submodules}});
  j["fetches"] = fetches;
  return j;
}

json to_json(const Resolution& r) {
  json j;
  j["status"] = r.status == Exit::ok ? "ok" : r.status == Exit::missing_tool ? "missing-tool" : "refused";
  j["exit"] = static_cast<int>(r.status);
  if (!r.message.empty()) j["message"] = r.message;
  json rules = json::array();
  for (const auto& x : r.rules)
    rules.push_back({{"rule", archbuild::rules::str(x.id)}, {"subject", x.subject}, {"ok", x.ok}, {"detail", x.detail}});
  j["rules"] = rules;
  j["notes"] = r.notes;
  j["targets"] = arch_json(r.archs);
  if (r.status == Exit::bad_input) return j;
  j["platform"] = {{"name", r.platform.name},
                   {"machine", r.platform.machine},
                   {"wheel_arch", r.platform.wheel_arch},
                   {"cuda_target", r.platform.cuda_target},
                   {"cuda_libraries", r.platform.pip_cuda ? "pip" : "host"},
                   {"why", r.platform_why}};
  // What the recipe's [platform.NAME] adds to the build environment (already in the plan's env).
  if (auto it = r.recipe.platforms.find(r.platform.name); it != r.recipe.platforms.end()) {
    j["platform"]["env"] = it->second.env;
    j["platform"]["official_env"] = it->second.official_env;
  }
  j["recipe"] = {{"name", r.recipe.name}, {"file", r.recipe.file.string()}, {"package", r.recipe.package},
                 {"version", r.recipe.version.str()}, {"tag", r.recipe.source.tag}, {"url", r.url()}};
  j["cuda"] = {{"release", r.toolchain.cuda.str()},
               {"min_driver", r.toolchain.min_driver_text},
               {"toolchain_file", r.toolchain.file.string()}};
  if (r.toolkit)
    j["toolkit"] = {{"root", r.toolkit->root.string()},
                    {"nvcc", r.toolkit->nvcc.string()},
                    {"version", r.toolkit->version.str()},
                    {"nvcc_version", r.toolkit->nvcc_version ? json(r.toolkit->nvcc_version->str()) : json(nullptr)},
                    {"found_by", r.toolkit->found_by}};
  else
    j["toolkit"] = nullptr;
  if (r.compiler)
    j["compiler"] = {{"kind", std::string(toolchain::to_string(r.compiler->kind))},
                     {"path", r.compiler->path.string()},
                     {"c_path", r.compiler->c_path.string()},
                     {"version", r.compiler->version.str()},
                     {"found_by", r.compiler->found_by}};
  else
    j["compiler"] = nullptr;
  if (r.python)
    j["python"] = {{"path", r.python->path.string()}, {"version", r.python->version.str()}, {"found_by", r.python->found_by}};
  else
    j["python"] = nullptr;
  json tools = json::object();
  for (const auto& [k, v] : r.tools) tools[k] = v.string();
  j["tools"] = tools;
  j["arch_list"] = {{"env", r.recipe.arch.env}, {"value", r.arch_list}};
  return j;
}

json Plan::to_json() const {
  const PlanData& p = *d_;
  json j;
  j["resolution"] = plan::to_json(p.resolution);
  j["recipe"] = plan::to_json(p.resolution.recipe);
  j["source"] = {{"url", p.url}, {"tag", p.tag}, {"ref", p.ref}, {"commit", p.commit ? json(*p.commit) : json(nullptr)},
                 {"submodules", p.submodules}};
  if (p.local)
    j["source"]["local"] = {{"dir", p.local->dir.string()}, {"content_sha256", p.local->content_hash},
                            {"files", p.local->files}, {"head", p.local->head ? json(*p.local->head) : json(nullptr)}};
  j["version"] = p.version;
  json env = json::object(), unkeyed = json::object();
  for (const auto& [k, v] : p.env) {
    env[k] = v.value;
    if (!v.keyed) unkeyed[k] = v.why;
  }
  j["env"] = env;
  j["env_not_in_key"] = unkeyed;
  j["passthrough_env"] = p.passthrough;
  json steps = json::array();
  for (const auto& s : p.steps)
    steps.push_back({{"stage", std::string(recipe::to_string(s.stage))}, {"argv", s.argv()}, {"cwd", s.cwd}});
  j["steps"] = steps;
  j["build_dir"] = p.build_dir;
  j["build_start"] = plan::to_json(p.build_start);
  j["wheel_dir"] = p.wheel_dir.empty() ? json(nullptr) : json(p.wheel_dir);
  j["wheel_stage"] = p.wheel_stage ? json(std::string(recipe::to_string(*p.wheel_stage))) : json(nullptr);
  j["configure_stage"] = std::string(recipe::to_string(p.configure_stage));
  json notes = json::object();
  for (const auto& [stage, note] : p.stage_notes) notes[std::string(recipe::to_string(stage))] = note;
  j["stage_notes"] = notes;
  j["config_settings"] = config_settings_json(p.config_settings);
  j["config_settings_notes"] = p.config_notes;
  j["fetches"] = fetches_json(p.fetches, false);
  j["patches"] = json::array();
  for (const auto& pp : p.patches)
    j["patches"].push_back({{"name", pp.patch.name()}, {"file", pp.patch.file.string()}, {"sha256", pp.patch.sha256},
                            {"strip", pp.patch.strip}, {"from", pp.patch.from.empty() ? json(nullptr) : json(pp.patch.from)},
                            {"origin", pp.patch.origin}, {"why", pp.why}});
  j["jobs"] = {{"jobs", p.jobs.jobs}, {"cores", p.jobs.cores}, {"mem_available_gib", p.jobs.mem_gib},
               {"gib_per_job", p.jobs.gib_per_job}, {"per_job_from", p.jobs.per_job_from}, {"threads_per_job", p.jobs.threads_per_job}, {"from_option", p.jobs.from_option}, {"admitted", p.jobs.admitted}, {"rule", p.jobs.rule()}};
  j["libraries"] = plan::to_json(p.libraries);
  j["build_venv"] = p.venv ? venv_json(*p.venv) : json(nullptr);
  {
    const Admission& a = p.admission;
    json patterns = json::array();
    for (const auto& pt : a.figures.patterns) patterns.push_back({{"glob", pt.glob}, {"mb", pt.mb}});
    j["admission"] = {{"on", a.on},
                      {"budget_mb", a.on ? json(a.budget_mb) : json(nullptr)},
                      {"budget_from", a.on ? json(a.budget_from) : json(nullptr)},
                      {"expected_mb", {{"c", a.figures.c_mb}, {"cxx", a.figures.cxx_mb}, {"cuda", a.figures.cuda_mb},
                                       {"cuda_per_thread", a.figures.cuda_thread_mb}, {"patterns", patterns}}},
                      {"rule", a.rule()}};
  }
  j["key"] = p.key;
  j["key_inputs"] = p.key_inputs;
  return j;
}

namespace {

// make_plan's phases, in its order: each fills its part of the plan (PlanData) from the
// resolution and the options, or refuses.

// The source: the recipe's tag, the commit --ref named when planned, or a scanned local tree.
Result<Ok> plan_source(const Resolution& res, const SourceChoice& sc, PlanData& p) {
  const recipe::Recipe& r = res.recipe;
  p.url = res.url();
  p.tag = r.source.tag;
  p.ref = r.source.tag;
  p.commit = r.source.commit;
  p.submodules = r.source.submodules;
  if (sc.kind == SourceChoice::Kind::ref) {
    // The fetch checks out the commit the ref named when planned: a branch that moves later is a
    // new plan with a new key, never a silent change under this one.
    p.tag = sc.commit;
    p.commit = sc.commit;
    p.ref = sc.ref;
  } else if (sc.kind == SourceChoice::Kind::local) {
    p.url.clear();
    p.tag.clear();
    p.commit.reset();
    p.ref.clear();
    p.local = sc;
  }
  if (res.local_dir() && !p.local)
    return Error::bad_input(fmt::format("{}: the source is the local tree {}, but it was not scanned before planning",
                                        r.name, res.local_dir()->string()));
  if (p.url.empty() && !p.local)
    return Error::bad_input(fmt::format("{} has no source.url or source.path; give --source-url URL or --source DIR", r.name));
  p.version = source_version(r, sc, res.toolchain, res.archs);
  return Ok{};
}

// How many compiles run at once: the static rule, or every core under --memory-budget's admission.
void plan_jobs(const HostResources& host, const PlanOptions& options, const recipe::Recipe& r, PlanData& p) {
  p.jobs = jobs_rule(host, options.jobs, r);
  if (!options.memory_budget_mb) return;
  Admission& a = p.admission;
  a.on = true;
  a.figures = r.memory;
  if (*options.memory_budget_mb > 0) {
    a.budget_mb = *options.memory_budget_mb;
    a.budget_from = "--memory-budget " + options.memory_budget_text;
  } else {
    a.budget_mb = std::max<std::uint64_t>(1, host.mem_available / (1024 * 1024) * 9 / 10);
    a.budget_from = fmt::format("90% of {:.1f} GiB available", p.jobs.mem_gib);
  }
  if (!p.jobs.from_option) {
    p.jobs.static_jobs = p.jobs.jobs;
    p.jobs.jobs = p.jobs.cores;
    p.jobs.admitted = true;
  }
}

void keyed(PlanData& p, const std::string& k, std::string v) { p.env[k] = EnvVar{std::move(v), true, ""}; }
void unkeyed(PlanData& p, const std::string& k, std::string v, std::string why) {
  p.env[k] = EnvVar{std::move(v), false, std::move(why)};
}

// The recipe's environment, keyed: its env, the arch list, the version and build number.
void plan_recipe_env(const Resolution& res, PlanData& p) {
  const recipe::Recipe& r = res.recipe;
  for (const auto& [k, v] : r.env) keyed(p, k, v);
  keyed(p, r.arch.env, res.arch_list);
  if (!r.version_env.empty()) keyed(p, r.version_env, p.version);
  if (!r.build_number_env.empty()) keyed(p, r.build_number_env, std::to_string(r.build_number));
}

// Where the toolchain is, unkeyed (the key holds the versions): CUDA, the compilers, the jobs,
// PATH, the build venv.
void plan_toolchain_env(const Resolution& res, const PlanOptions& options, PlanData& p) {
  const auto& tk = *res.toolkit;
  const auto& cc = *res.compiler;
  unkeyed(p, "CUDA_HOME", tk.root.string(), "a path; the key holds the CUDA version");
  unkeyed(p, "CUDACXX", tk.nvcc.string(), "a path; the key holds nvcc's version");
  unkeyed(p, "CUDAHOSTCXX", cc.path.string(), "a path; the key holds the compiler's kind and version");
  unkeyed(p, "CXX", cc.path.string(), "the same compiler as CUDAHOSTCXX, so C++ and CUDA objects agree");
  if (!cc.c_path.empty()) unkeyed(p, "CC", cc.c_path.string(), "the C compiler of the same installation");
  unkeyed(p, "MAX_JOBS", std::to_string(p.jobs.jobs), "parallelism does not change the output");
  unkeyed(p, "CMAKE_BUILD_PARALLEL_LEVEL", std::to_string(p.jobs.jobs), "parallelism does not change the output");
  if (res.recipe.nvcc_threads)
    unkeyed(p, "NVCC_THREADS", std::to_string(p.jobs.threads_per_job), "parallelism does not change the output");
  // PATH: the chosen toolkit, Python, compiler and tools first, then the system's.
  std::vector<std::string> dirs;
  auto add_dir = [&](const fs::path& d) {
    std::string s = d.string();
    if (!s.empty() && std::find(dirs.begin(), dirs.end(), s) == dirs.end()) dirs.push_back(s);
  };
  // The build venv's bin/ first: its python, and the cmake every step runs (PyTorch's setup.py
  // takes the newest `cmake`/`cmake3` on PATH: tools/setup_helpers/cmake.py, commit 5bffd765).
  if (options.venv) {
    if (!options.venv->cmake.empty()) add_dir(options.venv->cmake.parent_path());
    add_dir(options.venv->python.parent_path());
  }
  add_dir(tk.nvcc.parent_path());
  add_dir(res.python->path.parent_path());
  add_dir(cc.path.parent_path());
  for (const auto& [name, path] : res.tools) add_dir(path.parent_path());
  for (const char* sys : {"/usr/local/bin", "/usr/bin", "/bin"}) add_dir(sys);
  unkeyed(p, "PATH", text::join(dirs, ":"), "paths; the key holds the versions of what they lead to");
  if (options.venv) {
    p.venv = options.venv;
    unkeyed(p, "VIRTUAL_ENV", options.venv->dir.string(), "a path; the key holds the venv's interpreter and package versions");
  }
}

// The caller's environment: the pass-through names, and --env (keyed; never over what the plan
// decides itself).
Result<Ok> plan_user_env(const recipe::Recipe& r, const PlanOptions& options, PlanData& p) {
  p.passthrough = build_env_allowlist();
  for (const auto& [k, v] : options.env) {
    bool valid = !k.empty() && !std::isdigit(static_cast<unsigned char>(k[0])) &&
                 std::all_of(k.begin(), k.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!valid) return Error::bad_input(fmt::format("--env {}={}: '{}' is not a variable name (letters, digits, _)", k, v, k));
    if (p.env.count(k) && !r.env.count(k))
      return Error::bad_input(fmt::format("--env {}: archbuild sets {} from the plan ({}); change what decides it "
                                          "(--sm, --cuda, --python, --jobs) instead",
                                          k, k, p.env[k].keyed ? p.env[k].value : p.env[k].why));
    keyed(p, k, v);
  }
  return Ok{};
}

// What the build would download, under the environment just fixed: the caller's resolution of
// each active one (a resolution for a disabled one is dropped).
void plan_fetches(const Resolution& res, const PlanOptions& options, PlanData& p) {
  std::map<std::string, std::string> keyed_env;
  for (const auto& [k, v] : p.env) keyed_env[k] = v.value;
  p.fetches = fetch_plans(res, keyed_env);
  for (auto& f : p.fetches) {
    auto it = options.fetches.find(f.name);
    if (!f.active() || it == options.fetches.end()) continue;
    f.pin_file = it->second.pin_file;
    f.ref = it->second.ref;
    f.commit = it->second.commit;
  }
}

}  // namespace

std::vector<PatchPlan> select_patches(const Resolution& res, const SourceChoice& source,
                                      const std::vector<recipe::Patch>& extra) {
  std::vector<PatchPlan> out;
  const recipe::Recipe& r = res.recipe;
  // The torch release the tree holds: its version.txt where the tree is not the recipe's tag
  // (a dependent's `when.torch` is about the torch it serves, not its own version).
  Version torch = r.torch_version();
  std::string torch_from;
  if (!r.torch && source.kind != SourceChoice::Kind::recipe_tag && source.tree_version) {
    std::string first = text::trim(source.tree_version->substr(0, source.tree_version->find('\n')));
    if (auto v = contract::release_part(first)) {
      torch = *v;
      torch_from = " (the tree's version.txt)";
    }
  }
  for (const auto& patch : r.patches) {
    const auto& w = patch.when;
    std::vector<std::string> held;
    if (w.torch) {
      if (!w.torch->contains(torch)) continue;
      held.push_back(fmt::format("torch {}{} in {}", torch.str(), torch_from, w.torch->text));
    }
    if (w.cuda) {
      if (!w.cuda->contains(res.toolchain.cuda)) continue;
      held.push_back(fmt::format("CUDA {} in {}", res.toolchain.cuda.str(), w.cuda->text));
    }
    if (!w.platform.empty()) {
      if (std::find(w.platform.begin(), w.platform.end(), res.platform.name) == w.platform.end()) continue;
      held.push_back("platform " + res.platform.name);
    }
    if (!w.arch.empty()) {
      std::vector<std::string> hit;
      for (const auto& a : res.archs)
        for (const auto& cc : w.arch)
          if (cc.size() == 2 && a.cc.major == cc.parts[0] && a.cc.minor == cc.parts[1]) hit.push_back(a.cc.str());
      if (hit.empty()) continue;
      held.push_back("target " + text::join(hit, ", "));
    }
    out.push_back({patch, held.empty() ? "always" : text::join(held, "; ")});
  }
  for (const auto& patch : extra) out.push_back({patch, "--patch"});
  return out;
}

namespace {

// The driver's steps (recipe/driver.hpp: setup.py commands before torch 2.9, PEP 517 through
// python -m build after, scikit-build-core where pyproject.toml names it, …).
void plan_steps(const Resolution& res, const PlanOptions& options, PlanData& p) {
  const recipe::Recipe& r = res.recipe;
  const recipe::DriverSpec& driver = recipe::driver_spec(r.driver);
  const fs::path py = options.venv ? options.venv->python : res.python->path;
  auto tool = [&](const std::string& t) -> fs::path {
    if (t == "python") return py;
    if (t == "cmake" && options.venv && !options.venv->cmake.empty()) return options.venv->cmake;
    auto it = res.tools.find(t);
    return it == res.tools.end() ? fs::path(t) : it->second;
  };
  p.wheel_dir = driver.makes_wheel ? r.wheel_dir : std::string();
  plan_config_settings(driver, options, p);
  for (const auto& s : driver.steps) p.steps.push_back({s.stage, s.tool, tool(s.tool), step_args(s.args, p), "."});
  p.wheel_stage = driver.wheel_stage;
  p.configure_stage = driver.configure_stage;
  p.stage_notes = driver.stage_notes;
}

}  // namespace

Result<Plan> make_plan(const Resolution& res, const PlanOptions& options) {
  if (res.status != Exit::ok) return Error{res.status, res.message};
  if (!res.toolkit || !res.compiler || !res.python)
    return Error::missing_tool("the resolution has no toolkit, host compiler or Python to plan with");
  const recipe::Recipe& r = res.recipe;
  auto d = std::make_shared<PlanData>();
  PlanData& p = *d;
  p.resolution = res;
  if (auto e = plan_source(res, options.source, p); !e) return e.error();
  plan_jobs(options.resources ? *options.resources : HostResources::current(), options, r, p);
  plan_recipe_env(res, p);
  plan_toolchain_env(res, options, p);
  if (auto e = plan_user_env(r, options, p); !e) return e.error();
  if (auto e = plan_recipe_libraries(res, options, p); !e) return e.error();
  plan_fetches(res, options, p);
  p.patches = select_patches(res, options.source, options.patches);
  plan_steps(res, options, p);

  // The key: everything that shapes the wheel, nothing that only locates things (plan/key.hpp).
  p.key_inputs = key_inputs_of(p).to_json();
  p.key = build_key(p.key_inputs);
  // Clean until prepare finds an earlier build tree in the slot (decide_build_start).
  p.build_start = decide_build_start(p, false, std::nullopt);
  return Plan(std::move(d));
}

}  // namespace archbuild::plan
