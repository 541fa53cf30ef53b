#include "contract/contract.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/text.hpp"
#include "core/toml_load.hpp"
#include "recipe/driver.hpp"

namespace archbuild::contract {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kPinDir = ".ci/docker/ci_commit_pins";

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(l);
  }
  return lines;
}

// How a file of the tree is named in messages: under its checkout or mirror.
std::string shown(const FileAccess& files, const std::string& rel) {
  return files.origin.empty() ? rel : files.origin + "/" + rel;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string dir_of(const std::string& rel) {
  auto slash = rel.rfind('/');
  return slash == std::string::npos ? "" : rel.substr(0, slash + 1);
}

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

}  // namespace

std::string Where::str() const { return line > 0 ? fmt::format("{}:{}", file, line) : file; }

std::string_view to_string(Backend b) {
  switch (b) {
    case Backend::scikit_build_core: return "scikit-build-core";
    case Backend::setuptools: return "setuptools";
    case Backend::cmake_only: return "cmake";
    case Backend::other: return "other";
    case Backend::none: return "none";
  }
  return "none";
}

FileAccess directory_access(const fs::path& root) {
  FileAccess a;
  a.origin = root.string();
  a.read = [root](const std::string& rel) -> std::optional<std::string> {
    std::error_code ec;
    fs::path p = root / rel;
    if (!fs::is_regular_file(p, ec)) return std::nullopt;
    std::ifstream in(p, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  };
  a.list = [root](const std::string& rel) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root / rel, ec))
      if (e.is_regular_file(ec)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  return a;
}

// ---- requirements (PEP 508, as pip's requirement files write them) ----------------------

Result<std::optional<Requirement>> parse_requirement(const std::string& raw, const Where& where) {
  std::string s = trim(raw);
  if (s.empty()) return std::optional<Requirement>();
  Requirement r;
  r.where = where;
  std::size_t i = 0;
  auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'; };
  while (i < s.size() && name_char(s[i])) ++i;
  r.name = s.substr(0, i);
  if (r.name.empty() || !std::isalnum(static_cast<unsigned char>(r.name.front())))
    return Error::bad_input(fmt::format("{}: '{}' is not a requirement (expected NAME[extras] SPECIFIER ; MARKER, "
                                        "e.g. setuptools>=70.1)", where.str(), s));
  auto skip_ws = [&] { while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i; };
  skip_ws();
  if (i < s.size() && s[i] == '[') {
    auto close = s.find(']', i);
    if (close == std::string::npos)
      return Error::bad_input(fmt::format("{}: '{}': unclosed '[' of the extras", where.str(), s));
    r.extras = trim(s.substr(i + 1, close - i - 1));
    i = close + 1;
  }
  std::string rest = s.substr(i);
  auto semi = rest.find(';');
  std::string spec = trim(rest.substr(0, semi));
  if (semi != std::string::npos) r.marker = trim(rest.substr(semi + 1));
  if (spec.size() >= 2 && spec.front() == '(' && spec.back() == ')') spec = trim(spec.substr(1, spec.size() - 2));
  if (!spec.empty() && std::string("<>=!~@").find(spec.front()) == std::string::npos)
    return Error::bad_input(fmt::format("{}: '{}': '{}' is not a version specifier (expected e.g. >=1.0,<2 or @ URL)",
                                        where.str(), s, spec));
  // "a >= 1.0, < 2" and "a>=1.0,<2" are one specifier.
  if (spec.empty() || spec.front() != '@') spec.erase(std::remove(spec.begin(), spec.end(), ' '), spec.end());
  r.specifier = spec;
  return std::optional<Requirement>(r);
}

namespace {

Result<Ok> read_requirements(const FileAccess& files, const std::string& file, std::vector<Requirement>& out,
                             std::vector<std::string>* notes, std::set<std::string>& open) {
  auto text = files.read(file);
  if (!text) return Error::bad_input(fmt::format("{}: no such file", shown(files, file)));
  open.insert(file);
  auto lines = split_lines(*text);
  for (std::size_t n = 0; n < lines.size(); ++n) {
    int line_no = static_cast<int>(n) + 1;
    std::string line = lines[n];
    // A trailing backslash joins the next line (pip's rule).
    while (!line.empty() && line.back() == '\\' && n + 1 < lines.size()) {
      line.pop_back();
      line += lines[++n];
    }
    // A comment starts at '#' at the line's start or after whitespace (not inside a URL#fragment).
    for (std::size_t i = 0; i < line.size(); ++i)
      if (line[i] == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
        line.resize(i);
        break;
      }
    line = trim(line);
    if (line.empty()) continue;
    Where where{file, line_no};
    if (line.front() == '-') {
      std::string opt = line, arg;
      auto sep = line.find_first_of(" \t=");
      if (sep != std::string::npos) opt = line.substr(0, sep), arg = trim(line.substr(sep + 1));
      else if (line.rfind("-r", 0) == 0 || line.rfind("-c", 0) == 0) opt = line.substr(0, 2), arg = line.substr(2);
      if (opt == "-r" || opt == "--requirement") {
        if (arg.empty()) return Error::bad_input(fmt::format("{}: -r without a file name", where.str()));
        std::string inc = fs::path(dir_of(file) + arg).lexically_normal().generic_string();
        if (open.count(inc))
          return Error::bad_input(fmt::format("{}: -r {} includes itself (a cycle)", where.str(), arg));
        if (!files.read(inc))
          return Error::bad_input(fmt::format("{}: -r {}: {} is not in the tree", where.str(), arg, inc));
        if (auto r = read_requirements(files, inc, out, notes, open); !r) return r.error();
      } else if (notes) {
        notes->push_back(fmt::format("{}: option {} not read (only -r is followed)", where.str(), opt));
      }
      continue;
    }
    auto req = parse_requirement(line, where);
    if (!req) return req.error();
    if (*req) out.push_back(**req);
  }
  open.erase(file);
  return Ok{};
}

}  // namespace

Result<std::vector<Requirement>> parse_requirements_file(const FileAccess& files, const std::string& file,
                                                         std::vector<std::string>* notes) {
  std::vector<Requirement> out;
  std::set<std::string> open;
  if (auto r = read_requirements(files, file, out, notes, open); !r) return r.error();
  return out;
}

// ---- cmake_minimum_required -------------------------------------------------------------

Result<std::optional<CmakeMinimum>> parse_cmake_minimum(const std::string& text, const std::string& file) {
  // Comments blanked (newlines kept, for line numbers): "# …" and bracket comments "#[[ … ]]".
  std::string clean = text;
  for (std::size_t i = 0; i < clean.size(); ++i) {
    if (clean[i] == '"') {  // a quoted argument may hold '#'
      for (++i; i < clean.size() && clean[i] != '"'; ++i)
        if (clean[i] == '\\') ++i;
      continue;
    }
    if (clean[i] != '#') continue;
    std::size_t end;
    if (clean.compare(i, 3, "#[[") == 0) {
      end = clean.find("]]", i);
      end = end == std::string::npos ? clean.size() : end + 2;
    } else {
      end = clean.find('\n', i);
      if (end == std::string::npos) end = clean.size();
    }
    for (std::size_t j = i; j < end; ++j)
      if (clean[j] != '\n') clean[j] = ' ';
    i = end - 1;
  }
  // Command names are case-insensitive in CMake; the VERSION keyword is not.
  static const std::regex call(R"((^|[^A-Za-z0-9_])cmake_minimum_required\s*\(([^)]*)\))", std::regex::icase);
  std::smatch m;
  if (!std::regex_search(clean, m, call)) return std::optional<CmakeMinimum>();
  auto pos = static_cast<std::size_t>(m.position(2));
  int line = 1 + static_cast<int>(std::count(clean.begin(), clean.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
  Where where{file, line};
  std::istringstream args(m[2].str());
  std::vector<std::string> tokens;
  for (std::string t; args >> t;) tokens.push_back(t);
  auto v = std::find(tokens.begin(), tokens.end(), "VERSION");
  if (v == tokens.end() || v + 1 == tokens.end())
    return Error::bad_input(fmt::format("{}: cmake_minimum_required without VERSION (expected "
                                        "cmake_minimum_required(VERSION 3.18[...3.30]))", where.str()));
  std::string range = *(v + 1);
  auto dots = range.find("...");
  CmakeMinimum cm;
  cm.where = where;
  auto min = Version::parse(range.substr(0, dots));
  if (!min)
    return Error::bad_input(fmt::format("{}: cmake_minimum_required(VERSION {}): '{}' is not a version "
                                        "(expected e.g. 3.18 or 3.18...3.30)", where.str(), range, range.substr(0, dots)));
  cm.min = *min;
  if (dots != std::string::npos) {
    auto max = Version::parse(range.substr(dots + 3));
    if (!max)
      return Error::bad_input(fmt::format("{}: cmake_minimum_required(VERSION {}): '{}' is not a version "
                                          "(expected e.g. 3.18...3.30)", where.str(), range, range.substr(dots + 3)));
    cm.max = *max;
  }
  return std::optional<CmakeMinimum>(cm);
}

std::optional<Version> release_part(const std::string& version) {
  static const std::regex release(R"(^\s*v?([0-9]+(\.[0-9]+)*))");
  std::smatch m;
  if (!std::regex_search(version, m, release)) return std::nullopt;
  return Version::parse(m[1].str());
}

// ---- pyproject.toml ---------------------------------------------------------------------

namespace {

// A string, or a CMake-style spelling of a boolean or an integer (cmake.define's values).
std::optional<std::string> define_value(const toml::node& v) {
  if (const auto* s = v.as_string()) return s->get();
  if (const auto* b = v.as_boolean()) return std::string(b->get() ? "ON" : "OFF");  // CMake's spelling
  if (const auto* i = v.as_integer()) return std::to_string(i->get());
  return std::nullopt;
}

template <class At>
Result<ScikitBuild> read_scikit_build(const toml::table& sk, const std::string& file, const At& at) {
  ScikitBuild b;
  b.where = {file, line_of(sk)};
  auto string_of = [&](const toml::node& n, const std::string& what) -> Result<std::string> {
    if (const auto* s = n.as_string()) return s->get();
    return Error::bad_input(fmt::format("{}: [tool.scikit-build].{} must be a string", at(n), what));
  };
  if (const auto* bd = sk.get("build-dir")) {
    auto v = string_of(*bd, "build-dir");
    if (!v) return v.error();
    b.build_dir = *v;
    b.build_dir_where = {file, line_of(*bd)};
  }
  if (const auto* bt = sk["cmake"]["build-type"].node()) {
    auto v = string_of(*bt, "cmake.build-type");
    if (!v) return v.error();
    b.build_type = *v;
    b.build_type_where = {file, line_of(*bt)};
  }
  if (const auto* defs = sk["cmake"]["define"].as_table())
    for (const auto& [k, v] : *defs) {
      auto value = define_value(v);
      if (!value)
        return Error::bad_input(fmt::format("{}: cmake.define.{} must be a string, boolean or integer", at(v), k.str()));
      b.defines[std::string(k.str())] = *value;
    }
  if (const auto* ex = sk.get("experimental")) b.experimental = ex->value_or(false);
  if (const auto* md = sk["metadata"].as_table())
    for (const auto& [field, entry] : *md) {
      const auto* t = entry.as_table();
      if (!t) continue;
      std::string provider = (*t)["provider"].value_or(std::string());
      if (t->contains("provider-path") || provider.rfind("scikit_build_core.", 0) != 0) {
        b.legacy_metadata = std::string(field.str());
        b.legacy_metadata_where = {file, line_of(entry)};
        break;
      }
    }
  std::set<std::string> env_names;
  if (const auto* overrides = sk.get("overrides")) {
    const auto* arr = overrides->as_array();
    if (!arr) return Error::bad_input(fmt::format("{}: [tool.scikit-build].overrides must be an array of tables "
                                                  "([[tool.scikit-build.overrides]])", at(*overrides)));
    for (const auto& el : *arr) {
      const auto* o = el.as_table();
      if (!o) return Error::bad_input(fmt::format("{}: [[tool.scikit-build.overrides]] holds a non-table", at(el)));
      BuildTypeOverride bo;
      bo.where = {file, line_of(el)};
      if (const auto* cond = (*o)["if"].as_table())
        for (const auto& [name, value] : *cond) {
          if (name.str() != "env") {
            bo.other_if.emplace_back(name.str());
            continue;
          }
          if (const auto* env = value.as_table())
            for (const auto& [var, want] : *env) {
              env_names.insert(std::string(var.str()));
              if (const auto* flag = want.as_boolean()) bo.if_env[std::string(var.str())] = flag->get() ? "true" : "false";
              else bo.if_env[std::string(var.str())] = want.value_or(std::string());
            }
        }
      if (const auto* bt = (*o)["cmake"]["build-type"].node()) {
        auto v = string_of(*bt, "overrides.cmake.build-type");
        if (!v) return v.error();
        bo.build_type = *v;
        b.build_type_overrides.push_back(std::move(bo));
      }
    }
  }
  b.override_env.assign(env_names.begin(), env_names.end());
  return b;
}

Result<Ok> read_pyproject(const FileAccess& files, const std::string& text, Contract& c) {
  const std::string file = "pyproject.toml";
  auto parsed = tomlx::parse_string(text, shown(files, file));
  if (!parsed) return parsed.error();
  const toml::table& doc = *parsed;
  auto at = [&](const toml::node& n) { return tomlx::where(n, shown(files, file)); };
  if (const auto* bs_node = doc.get("build-system")) {
    const auto* bs = bs_node->as_table();
    if (!bs) return Error::bad_input(fmt::format("{}: [build-system] must be a table", at(*bs_node)));
    if (const auto* req = bs->get("requires")) {
      const auto* arr = req->as_array();
      if (!arr) return Error::bad_input(fmt::format("{}: [build-system].requires must be an array of strings", at(*req)));
      for (const auto& el : *arr) {
        const auto* s = el.as_string();
        if (!s) return Error::bad_input(fmt::format("{}: [build-system].requires holds a non-string", at(el)));
        auto r = parse_requirement(s->get(), Where{file, line_of(el)});
        if (!r) return r.error();
        if (*r) c.requirements.push_back(**r);
      }
    }
    if (const auto* be = bs->get("build-backend")) {
      const auto* s = be->as_string();
      if (!s) return Error::bad_input(fmt::format("{}: [build-system].build-backend must be a string", at(*be)));
      c.backend = s->get();
      c.backend_where = {file, line_of(*be)};
    }
    if (const auto* bp = bs->get("backend-path")) {
      const auto* arr = bp->as_array();
      if (!arr) return Error::bad_input(fmt::format("{}: [build-system].backend-path must be an array of strings", at(*bp)));
      for (const auto& el : *arr)
        if (const auto* s = el.as_string()) c.backend_path.push_back(s->get());
        else return Error::bad_input(fmt::format("{}: [build-system].backend-path holds a non-string", at(el)));
    }
  }
  if (const auto* sk = doc["tool"]["scikit-build"].as_table()) {
    auto skb = read_scikit_build(*sk, file, at);
    if (!skb) return skb.error();
    c.skbuild = std::move(*skb);
  }
  if (const auto* dm = doc["tool"]["dynamic-metadata"].as_array(); dm && !dm->empty())
    c.dynamic_metadata_where = {file, line_of(*dm->get(0))};
  return Ok{};
}

Backend backend_kind(const Contract& c) {
  if (c.backend) {
    if (*c.backend == "scikit_build_core.build") return Backend::scikit_build_core;
    // An in-tree backend (backend-path) that configures scikit-build-core: it defers to it.
    if (!c.backend_path.empty() && c.skbuild) return Backend::scikit_build_core;
    if (c.backend->rfind("setuptools.build_meta", 0) == 0) return Backend::setuptools;
    return Backend::other;
  }
  // PEP 517: no build-backend means setuptools' legacy backend, which runs setup.py.
  if (c.has_setup_py) return Backend::setuptools;
  if (c.has_cmakelists) return Backend::cmake_only;
  return Backend::none;
}

void read_pins(const FileAccess& files, const std::string& dir, const std::string& suffix, Contract& c) {
  for (const auto& name : files.list(dir)) {
    if (!ends_with(name, suffix)) continue;
    std::string rel = dir + "/" + name;
    auto text = files.read(rel);
    if (!text) continue;
    std::vector<std::pair<int, std::string>> values;
    auto lines = split_lines(*text);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      std::string l = trim(lines[i]);
      if (!l.empty() && l.front() != '#') values.emplace_back(static_cast<int>(i) + 1, l);
    }
    // A pin is one ref on one line; the folder also holds requirement lists, which are not pins.
    if (values.size() != 1 || values.front().second.find_first_of(" \t") != std::string::npos) {
      c.notes.push_back(fmt::format("{}: {} lines, not a single ref: not read as a pin", rel, values.size()));
      continue;
    }
    c.pins.push_back({name.substr(0, name.size() - suffix.size()), values.front().second, {rel, values.front().first}});
  }
}

}  // namespace

Result<Contract> read_contract(const FileAccess& files) {
  Contract c;
  auto pyproject = files.read("pyproject.toml");
  c.has_pyproject = pyproject.has_value();
  c.has_setup_py = files.read("setup.py").has_value();
  auto cmakelists = files.read("CMakeLists.txt");
  c.has_cmakelists = cmakelists.has_value();
  if (pyproject)
    if (auto r = read_pyproject(files, *pyproject, c); !r) return r.error();
  c.kind = backend_kind(c);
  for (const char* f : {"requirements-build.txt", "requirements.txt"}) {
    if (!files.read(f)) continue;
    auto reqs = parse_requirements_file(files, f, &c.notes);
    if (!reqs) return Error::bad_input(files.origin.empty() ? reqs.error().message
                                                            : files.origin + "/" + reqs.error().message);
    c.requirements.insert(c.requirements.end(), reqs->begin(), reqs->end());
  }
  if (cmakelists) {
    auto cm = parse_cmake_minimum(*cmakelists, "CMakeLists.txt");
    if (!cm) return Error::bad_input(files.origin.empty() ? cm.error().message : files.origin + "/" + cm.error().message);
    c.cmake_minimum = *cm;
  }
  if (auto v = files.read("version.txt")) {
    auto lines = split_lines(*v);
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (auto t = trim(lines[i]); !t.empty()) {
        c.version = t;
        c.version_where = {"version.txt", static_cast<int>(i) + 1};
        break;
      }
  }
  read_pins(files, kPinDir, ".txt", c);
  read_pins(files, "third_party", "_pin.txt", c);
  return c;
}

// ---- showing it -------------------------------------------------------------------------

namespace {

std::string requirement_text(const Requirement& r) {
  std::string s = r.name;
  if (!r.extras.empty()) s += "[" + r.extras + "]";
  if (!r.specifier.empty()) s += (r.specifier.front() == '@' ? " " : "") + r.specifier;
  if (!r.marker.empty()) s += " ; " + r.marker;
  return s;
}

// Whether the tree has a file a driver needs (recipe::Builds::needs_file).
bool has_file(const Contract& c, const std::string& file) {
  if (file.empty()) return true;
  if (file == "setup.py") return c.has_setup_py;
  if (file == "pyproject.toml") return c.has_pyproject;
  if (file == "CMakeLists.txt") return c.has_cmakelists;
  return false;
}

// The drivers (recipe build.driver values) that can build this tree, as their entries say
// (recipe::Builds): those naming its backend, then those first for its kind, then the others.
std::vector<recipe::Driver> drivers_for(const Contract& c) {
  const std::string kind(to_string(c.kind));
  auto names = [](const std::vector<std::string>& list, const std::string& x) {
    return std::find(list.begin(), list.end(), x) != list.end();
  };
  std::vector<recipe::Driver> out;
  auto add_where = [&](auto&& pred) {
    for (const auto& d : recipe::drivers()) {
      const auto& b = recipe::driver_spec(d).builds;
      if (pred(b) && has_file(c, b.needs_file) && std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
    }
  };
  if (c.kind != Backend::none) {
    if (c.backend) add_where([&](const recipe::Builds& b) { return names(b.backends, *c.backend); });
    add_where([&](const recipe::Builds& b) { return names(b.first_for, kind); });
    add_where([&](const recipe::Builds& b) { return names(b.also_for, kind); });
  }
  return out;
}

std::string drivers_text(const Contract& c) {
  std::vector<std::string> names;
  for (auto d : drivers_for(c)) names.push_back("\"" + std::string(recipe::to_string(d)) + "\"");
  return names.empty() ? "none" : text::join(names, " or ");
}

}  // namespace

json to_json(const ScikitBuild& b) {
  auto opt = [](const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); };
  json overrides = json::array();
  for (const auto& o : b.build_type_overrides)
    overrides.push_back({{"if_env", o.if_env}, {"other_if", o.other_if}, {"build_type", o.build_type},
                         {"where", o.where.str()}});
  return {{"where", b.where.str()},
          {"build_dir", opt(b.build_dir)},
          {"build_type", opt(b.build_type)},
          {"build_type_overrides", overrides},
          {"override_env", b.override_env},
          {"cmake_define", b.defines},
          {"experimental", b.experimental},
          {"legacy_metadata", b.legacy_metadata ? json{{"field", *b.legacy_metadata}, {"where", b.legacy_metadata_where.str()}}
                                                : json(nullptr)}};
}

std::string build_type_rule(const ScikitBuild& b) {
  if (b.build_type) return fmt::format("{} ({})", *b.build_type, b.build_type_where.str());
  std::vector<std::string> by;
  for (const auto& o : b.build_type_overrides) {
    std::vector<std::string> conds;
    for (const auto& [name, want] : o.if_env)
      conds.push_back(want == "true" ? name : want == "false" ? "not " + name : fmt::format("{} ~ {}", name, want));
    conds.insert(conds.end(), o.other_if.begin(), o.other_if.end());
    by.push_back(fmt::format("{} if {} ({})", o.build_type, text::join(conds, " and "), o.where.str()));
  }
  by.push_back("else $CMAKE_BUILD_TYPE, else Release");
  return text::join(by, "; ");
}

json to_json(const Contract& c) {
  json j;
  j["files"] = {{"pyproject.toml", c.has_pyproject}, {"setup.py", c.has_setup_py}, {"CMakeLists.txt", c.has_cmakelists}};
  json drivers = json::array();
  for (auto d : drivers_for(c)) drivers.push_back(std::string(recipe::to_string(d)));
  j["backend"] = {{"name", c.backend ? json(*c.backend) : json(nullptr)},
                  {"where", c.backend ? json(c.backend_where.str()) : json(nullptr)},
                  {"backend_path", c.backend_path},
                  {"kind", std::string(to_string(c.kind))},
                  {"drivers", drivers}};
  j["scikit_build"] = c.skbuild ? to_json(*c.skbuild) : json(nullptr);
  j["dynamic_metadata"] = c.dynamic_metadata_where.line ? json(c.dynamic_metadata_where.str()) : json(nullptr);
  json reqs = json::array();
  for (const auto& r : c.requirements)
    reqs.push_back({{"name", r.name}, {"extras", r.extras}, {"specifier", r.specifier}, {"marker", r.marker},
                    {"file", r.where.file}, {"line", r.where.line}, {"text", requirement_text(r)},
                    {"installed", installed_for_build(r)}});
  j["requirements"] = reqs;
  j["cmake_minimum"] = c.cmake_minimum ? json{{"min", c.cmake_minimum->min.str()},
                                              {"max", c.cmake_minimum->max ? json(c.cmake_minimum->max->str()) : json(nullptr)},
                                              {"where", c.cmake_minimum->where.str()}}
                                       : json(nullptr);
  j["version"] = c.version ? json{{"value", *c.version}, {"where", c.version_where.str()}} : json(nullptr);
  json pins = json::array();
  for (const auto& p : c.pins) pins.push_back({{"name", p.name}, {"ref", p.ref}, {"file", p.where.file}});
  j["pins"] = pins;
  j["notes"] = c.notes;
  return j;
}

bool installed_for_build(const Requirement& r) { return r.where.file != "requirements.txt"; }

std::vector<std::string> describe(const Contract& c) {
  std::vector<std::string> out;
  std::string backend = c.backend ? fmt::format("{} ({})", *c.backend, c.backend_where.str())
                                  : c.has_setup_py ? "none declared: setup.py (setuptools' legacy backend)"
                                  : c.has_cmakelists ? "none: CMakeLists.txt only" : "none";
  out.push_back(fmt::format("backend        {}; drivers that build it: {}", backend, drivers_text(c)));
  if (!c.backend_path.empty()) out.push_back(fmt::format("backend path   {}", text::join(c.backend_path, ", ")));
  if (c.skbuild) {
    const ScikitBuild& b = *c.skbuild;
    out.push_back(fmt::format("scikit-build   [tool.scikit-build] ({}){}{}", b.where.str(),
                              b.build_dir ? ", build-dir " + *b.build_dir : "",
                              b.defines.empty() ? "" : fmt::format(", {} cmake.define", b.defines.size())));
    out.push_back("  build type   " + build_type_rule(b));
  }
  out.push_back(fmt::format("requirements   {}", c.requirements.empty() ? "none declared" : ""));
  for (const auto& r : c.requirements)
    out.push_back(fmt::format("  {:<28} {}{}", requirement_text(r), r.where.str(),
                              installed_for_build(r) ? "" : "  (not installed: runtime and test set)"));
  if (c.cmake_minimum)
    out.push_back(fmt::format("cmake minimum  {}{} ({})", c.cmake_minimum->min.str(),
                              c.cmake_minimum->max ? "..." + c.cmake_minimum->max->str() : "", c.cmake_minimum->where.str()));
  else
    out.push_back("cmake minimum  none declared");
  out.push_back(fmt::format("version        {}", c.version ? fmt::format("{} ({})", *c.version, c.version_where.str())
                                                          : "no version.txt"));
  out.push_back(fmt::format("pins           {}", c.pins.empty() ? "none" : ""));
  for (const auto& p : c.pins) out.push_back(fmt::format("  {} = {}    {}", p.name, p.ref, p.where.file));
  for (const auto& n : c.notes) out.push_back("note: " + n);
  return out;
}

// ---- checks against the plan ------------------------------------------------------------

namespace {

Finding driver_matches_backend(const Contract& c, const Expectation& e) {
  const rules::Id rule = rules::Id::driver_backend;
  auto ok = drivers_for(c);
  std::string driver(recipe::to_string(e.driver));
  if (std::find(ok.begin(), ok.end(), e.driver) != ok.end())
    return {rule, true, Exit::ok, fmt::format("driver {} builds a {} tree", driver, to_string(c.kind))};
  std::string where = c.backend ? c.backend_where.str() : c.has_pyproject ? "pyproject.toml" : "the tree";
  std::string what = c.backend ? "the build backend is " + *c.backend : "the tree has no build backend";
  // Why not, as the driver's entry says it (recipe::Builds).
  const auto& builds = recipe::driver_spec(e.driver).builds;
  std::string why;
  if (auto by_kind = builds.refusal_by_kind.find(std::string(to_string(c.kind))); by_kind != builds.refusal_by_kind.end())
    why = by_kind->second;
  else if (!has_file(c, builds.needs_file))
    why = builds.refusal_without_file;
  else if (!builds.refusal_otherwise.empty())
    why = builds.refusal_otherwise;
  else
    why = fmt::format("the {} driver cannot build a {} tree", driver, to_string(c.kind));
  return {rule, false, Exit::bad_input,
          fmt::format("{}: {}, but the recipe {} says driver = \"{}\": {}; set driver = {} in the recipe", where, what,
                      e.recipe_file, driver, why, drivers_text(c))};
}

Finding version_agrees(const Contract& c, const Expectation& e) {
  const rules::Id rule = rules::Id::version;
  if (!c.version) return {rule, true, Exit::ok, "no version.txt: not checked"};
  auto tree = release_part(*c.version);
  if (!tree) return {rule, true, Exit::ok, fmt::format("{}: '{}' has no release number: not checked", c.version_where.str(), *c.version)};
  if (*tree == e.version)
    return {rule, true, Exit::ok, fmt::format("{} ({}) is release {}", *c.version, c.version_where.str(), e.version.str())};
  return {rule, false, Exit::bad_input,
          fmt::format("{}: the tree is version {} (release {}), but the recipe {} builds {}: the recipe's tag and version "
                      "disagree; fix its version or source.tag",
                      c.version_where.str(), *c.version, tree->str(), e.recipe_file, e.version.str())};
}

Finding cmake_new_enough(const Contract& c, const Expectation& e) {
  const rules::Id rule = rules::Id::cmake_minimum;
  if (!c.cmake_minimum) return {rule, true, Exit::ok, "no cmake_minimum_required"};
  const auto& cm = *c.cmake_minimum;
  if (!e.cmake) return {rule, true, Exit::ok, fmt::format("cmake >= {} ({}); the plan's cmake version is unknown: not checked",
                                                          cm.min.str(), cm.where.str())};
  if (*e.cmake >= cm.min)
    return {rule, true, Exit::ok, fmt::format("cmake {} >= {} ({})", e.cmake->str(), cm.min.str(), cm.where.str())};
  return {rule, false, Exit::missing_tool,
          fmt::format("{}: cmake_minimum_required(VERSION {}) is above the cmake this build runs ({}{}): install cmake >= {} "
                      "and put it first on PATH (e.g. pip install 'cmake>={}')",
                      cm.where.str(), cm.min.str(), e.cmake->str(), e.cmake_path.empty() ? "" : " at " + e.cmake_path,
                      cm.min.str(), cm.min.str())};
}

// scikit-build-core refuses the provisional [tool.scikit-build.metadata.<field>] form with a
// provider of the tree's own unless experimental = true, and refuses it next to
// [[tool.dynamic-metadata]] (scikit-build/scikit-build-core@120c8dc7:
// src/scikit_build_core/settings/skbuild_read_settings.py): the build would stop in its first
// seconds, after the venv and the fetch.
Finding skbuild_metadata_accepted(const Contract& c, const Expectation& e) {
  const rules::Id rule = rules::Id::skbuild_metadata;
  if (!recipe::driver_spec(e.driver).skbuild_settings || !c.skbuild || !c.skbuild->legacy_metadata)
    return {rule, true, Exit::ok, "no provisional [tool.scikit-build.metadata] provider"};
  const ScikitBuild& b = *c.skbuild;
  std::string table = fmt::format("[tool.scikit-build.metadata.{}]", *b.legacy_metadata);
  if (c.dynamic_metadata_where.line)
    return {rule, false, Exit::bad_input,
            fmt::format("{}: {} next to [[tool.dynamic-metadata]] ({}): scikit-build-core refuses the two together; "
                        "keep only [[tool.dynamic-metadata]]",
                        b.legacy_metadata_where.str(), table, c.dynamic_metadata_where.str())};
  if (b.experimental) return {rule, true, Exit::ok, table + " with experimental = true"};
  return {rule, false, Exit::bad_input,
          fmt::format("{}: {} names a provider of the tree's own, which scikit-build-core refuses without "
                      "experimental = true; declare it as [[tool.dynamic-metadata]] with provider = {{ path = \"DIR\", "
                      "module = \"NAME\" }}",
                      b.legacy_metadata_where.str(), table)};
}

}  // namespace

std::vector<Finding> check(const Contract& c, const Expectation& e) {
  // Each rule is one small function; a new rule is one more line here.
  return {driver_matches_backend(c, e), version_agrees(c, e), cmake_new_enough(c, e), skbuild_metadata_accepted(c, e)};
}

json to_json(const std::vector<Finding>& findings) {
  json j = json::array();
  for (const auto& f : findings)
    j.push_back({{"rule", rules::str(f.rule)}, {"ok", f.ok}, {"exit", static_cast<int>(f.exit)}, {"message", f.message}});
  return j;
}

std::optional<Error> first_contradiction(const std::vector<Finding>& findings, const std::string& origin) {
  for (const auto& f : findings)
    if (!f.ok)
      return Error{f.exit, origin.empty() ? f.message : fmt::format("{} (tree: {})", f.message, origin)};
  return std::nullopt;
}

}  // namespace archbuild::contract
