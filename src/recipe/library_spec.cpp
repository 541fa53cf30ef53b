#include "recipe/library_spec.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/data_dir.hpp"
#include "core/toml_load.hpp"

namespace archbuild::recipe {

namespace {

bool valid_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-';
  });
}

bool valid_env(const std::string& s) {
  return !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::optional<Error> env_map(tomlx::TableReader& rd, std::string_view key, std::map<std::string, std::string>& out,
                             const std::string& file) {
  const toml::table* t = rd.table(key);
  if (rd.failure()) return rd.failure();
  if (!t) return std::nullopt;
  for (const auto& [k, node] : *t) {
    std::string name(k.str());
    auto v = node.value<std::string>();
    if (!valid_env(name) || !node.is_string() || !v)
      return Error::bad_input(fmt::format("{}: library {}.{}: expected NAME = \"value\" with NAME a variable name",
                                          tomlx::where(node, file), key, name));
    out[name] = *v;
  }
  return std::nullopt;
}

}  // namespace

Result<LibrarySpec> read_library_spec(const toml::table& t, const std::string& file) {
  tomlx::TableReader rd(t, file, "[[library]]");
  LibrarySpec s;
  if (auto v = rd.string("name", true)) s.name = *v;
  if (rd.failure()) return *rd.failure();
  if (!valid_name(s.name))
    return rd.error_at("name", fmt::format("library name \"{}\": expected lower-case letters, digits or '-', e.g. cudnn", s.name));
  if (auto v = rd.string("provides")) s.provides = *v;
  s.title = rd.string("title").value_or(s.name);
  if (auto v = rd.strings("headers", true)) s.headers = *v;
  if (auto v = rd.strings("libs", true)) s.libs = *v;
  if (rd.failure()) return *rd.failure();
  if (s.headers.empty() || s.libs.empty())
    return rd.error_at(s.headers.empty() ? "headers" : "libs",
                       fmt::format("library {}: headers and libs must each name at least one file", s.name));
  if (const toml::table* v = rd.table("version")) {
    tomlx::TableReader vr(*v, file, "library version");
    if (auto h = vr.string("header", true)) s.version_header = *h;
    if (auto m = vr.strings("macros", true)) s.version_macros = *m;
    if (auto e = vr.finish()) return *e;
  }
  if (auto v = rd.strings("env_roots")) s.env_roots = *v;
  if (auto v = rd.string("env_lib_dir")) s.env_lib_dir = *v;
  if (auto v = rd.string("env_include_dir")) s.env_include_dir = *v;
  if (const toml::table* p = rd.table("pip")) {
    tomlx::TableReader pr(*p, file, "library pip");
    if (auto v = pr.string("package", true)) s.pip_package = *v;
    if (auto v = pr.string("dir", true)) s.pip_dir = *v;
    if (auto e = pr.finish()) return *e;
  }
  if (auto v = rd.strings("system")) s.system = *v;
  if (auto v = rd.strings("machines")) s.machines = *v;
  if (auto v = rd.string("switch")) {
    if (!valid_env(*v)) return rd.error_at("switch", fmt::format("switch \"{}\" is not a variable name, e.g. USE_CUDNN", *v));
    s.switch_env = *v;
  }
  for (auto [key, map] : {std::pair{"on", &s.on}, {"off", &s.off}, {"paths", &s.paths}})
    if (auto e = env_map(rd, key, *map, file)) return *e;
  if (auto v = rd.string("summary")) s.summary = *v;
  if (auto v = rd.string("summary_on")) s.summary_on = *v;
  if (auto v = rd.string("advice")) s.advice = *v;
  if (auto e = rd.finish()) return *e;
  if (s.summary.empty() && s.summary_on.empty())
    return rd.error_at("name", fmt::format("library {}: give summary (the feature-summary name, e.g. USE_CUDNN) or "
                                           "summary_on (a configure line present only when it is on)", s.name));
  return s;
}

Result<std::vector<LibrarySpec>> load_library_specs(const std::filesystem::path& file) {
  auto parsed = tomlx::parse_file(file);
  if (!parsed) return parsed.error();
  tomlx::TableReader rd(*parsed, file.string(), file.filename().string());
  std::vector<LibrarySpec> out;
  if (const toml::array* arr = rd.array("library", true)) {
    for (const auto& el : *arr) {
      const toml::table* t = el.as_table();
      if (!t) return rd.error_at(el, "[[library]] entries must be tables");
      auto s = read_library_spec(*t, file.string());
      if (!s) return s.error();
      if (std::any_of(out.begin(), out.end(), [&](const LibrarySpec& o) { return o.name == s->name; }))
        return rd.error_at(el, fmt::format("library {} is defined twice", s->name));
      out.push_back(std::move(*s));
    }
  }
  if (auto e = rd.finish()) return *e;
  return out;
}

Result<std::vector<LibrarySpec>> load_shipped_library_specs() {
  return load_library_specs(data_root() / "data" / "build-libraries.toml");
}

std::vector<LibrarySpec> merge_specs(std::vector<LibrarySpec> shipped, const std::vector<LibrarySpec>& define) {
  for (const auto& d : define) {
    auto it = std::find_if(shipped.begin(), shipped.end(), [&](const LibrarySpec& s) { return s.name == d.name; });
    if (it != shipped.end()) *it = d;
    else shipped.push_back(d);
  }
  return shipped;
}

bool exists_for(const LibrarySpec& s, std::string_view machine) {
  return machine.empty() || s.machines.empty() || std::find(s.machines.begin(), s.machines.end(), machine) != s.machines.end();
}

}  // namespace archbuild::recipe
