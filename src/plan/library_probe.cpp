#include "plan/library_probe.hpp"
#include "toolchain/platform.hpp"

#include <fstream>
#include <regex>
#include <sstream>

#include "core/text.hpp"

namespace archbuild::plan {

namespace fs = std::filesystem;

std::string_view to_string(LibraryOrigin o) {
  switch (o) {
    case LibraryOrigin::env: return "env";
    case LibraryOrigin::cmake_prefix_path: return "cmake-prefix-path";
    case LibraryOrigin::pip: return "pip";
    case LibraryOrigin::toolkit: return "toolkit";
    case LibraryOrigin::system: return "system";
  }
  return "?";
}

std::optional<std::string> version_from_header(const std::string& text, const std::vector<std::string>& macros) {
  std::vector<std::string> parts;
  for (const auto& m : macros) {
    // A line's start as "start of text or after a newline", not std::regex::multiline, which
    // GCC 10's libstdc++ (the bundle's, built on Debian 11) lacks; [^\n]* ends at the line's end.
    std::regex def("(?:^|\\n)[ \\t]*#[ \\t]*define[ \\t]+" + m + "[ \\t]+([^\\n]*)");
    std::smatch sm;
    if (!std::regex_search(text, sm, def)) return std::nullopt;
    std::string value = text::trim(sm[1].str());
    if (auto c = value.find("//"); c != std::string::npos) value = text::trim(value.substr(0, c));
    if (!value.empty() && value.front() == '"') {
      std::smatch v;
      static const std::regex dotted(R"((\d+(\.\d+)+))");
      if (!std::regex_search(value, v, dotted)) return std::nullopt;
      parts.push_back(v[1].str());
      continue;
    }
    static const std::regex number(R"(^\(?(\d+)[uUlL]*\)?$)");
    std::smatch n;
    if (!std::regex_match(value, n, number)) return std::nullopt;
    parts.push_back(n[1].str());
  }
  if (parts.empty()) return std::nullopt;
  return text::join(parts, ".");
}

namespace {

// A place to look: its include and library folders (any of them may hold the files).
struct Place {
  LibraryOrigin origin;
  std::string via;
  fs::path root;
  std::vector<fs::path> include_dirs;
  std::vector<fs::path> lib_dirs;
};

// The build platform's multiarch folders and its toolkit's targets/ folder (toolchains/platforms.toml).
Place prefix_place(LibraryOrigin origin, std::string via, const fs::path& p, const toolchain::HostLibraryDirs& dirs) {
  Place out{origin, std::move(via), p, {p / "include"}, {p / "lib64", p / "lib"}};
  if (!dirs.multiarch.empty()) {
    out.include_dirs.push_back(p / "include" / dirs.multiarch);
    out.lib_dirs.push_back(p / "lib" / dirs.multiarch);
  }
  if (!dirs.cuda_target.empty()) out.lib_dirs.push_back(p / "targets" / dirs.cuda_target / "lib");
  out.include_dirs.push_back(p);
  out.lib_dirs.push_back(p);
  return out;
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec) && !fs::is_directory(p, ec);
}

std::optional<LibraryCandidate> look(const recipe::LibrarySpec& s, const Place& place) {
  LibraryCandidate c;
  c.library = s.name;
  c.origin = place.origin;
  c.via = place.via;
  c.root = place.root;
  for (const auto& d : place.include_dirs)
    if (is_file(d / s.headers.front())) {
      c.include_dir = d;
      break;
    }
  if (c.include_dir.empty()) return std::nullopt;
  for (const auto& d : place.lib_dirs) {
    for (const auto& l : s.libs)
      if (is_file(d / l)) {
        c.lib_dir = d;
        c.lib_file = d / l;
        break;
      }
    if (!c.lib_dir.empty()) break;
  }
  if (c.lib_dir.empty()) return std::nullopt;
  if (!s.version_header.empty()) {
    for (const auto& d : place.include_dirs) {
      std::ifstream in(d / s.version_header);
      if (!in) continue;
      std::stringstream text;
      text << in.rdbuf();
      c.version = version_from_header(text.str(), s.version_macros);
      break;
    }
  }
  return c;
}

std::vector<Place> places_for(const recipe::LibrarySpec& s, const LibrarySearch& search) {
  std::vector<Place> out;
  auto env = [&](const std::string& name) -> std::optional<std::string> {
    auto it = search.env.find(name);
    if (it == search.env.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  for (const auto& root : s.env_roots)
    if (auto v = env(root)) out.push_back(prefix_place(LibraryOrigin::env, root, *v, search.dirs));
  if (!s.env_lib_dir.empty() && !s.env_include_dir.empty()) {
    auto lib = env(s.env_lib_dir);
    auto inc = env(s.env_include_dir);
    if (lib && inc)
      out.push_back({LibraryOrigin::env, s.env_include_dir + " + " + s.env_lib_dir, fs::path(*inc).parent_path(),
                     {*inc}, {*lib}});
  }
  if (auto v = env("CMAKE_PREFIX_PATH"))
    for (const auto& p : text::split_any(*v, ":;"))
      if (!p.empty()) out.push_back(prefix_place(LibraryOrigin::cmake_prefix_path, "CMAKE_PREFIX_PATH", p, search.dirs));
  if (!s.pip_dir.empty())
    for (const auto& sp : search.site_packages)
      out.push_back(prefix_place(LibraryOrigin::pip, s.pip_package, sp / s.pip_dir, search.dirs));
  if (search.toolkit_root)
    out.push_back(prefix_place(LibraryOrigin::toolkit, search.toolkit_label, *search.toolkit_root, search.dirs));
  // The system: its own prefixes and the spec's extra folders, each as a prefix or a folder.
  Place sys{LibraryOrigin::system, "system", "", {}, {}};
  std::vector<fs::path> prefixes;
  for (std::string p : s.system) {
    // Debian's per-machine folders (/usr/lib/aarch64-linux-gnu/openblas-pthread): the build's.
    static const std::string kMultiarch = "{multiarch}";
    if (p.find(kMultiarch) != std::string::npos && search.dirs.multiarch.empty()) continue;
    for (auto at = p.find(kMultiarch); at != std::string::npos; at = p.find(kMultiarch, at))
      p.replace(at, kMultiarch.size(), search.dirs.multiarch);
    prefixes.emplace_back(p);
  }
  prefixes.insert(prefixes.end(), search.system_prefixes.begin(), search.system_prefixes.end());
  for (const auto& p : prefixes) {
    auto pp = prefix_place(LibraryOrigin::system, "system", p, search.dirs);
    sys.include_dirs.insert(sys.include_dirs.end(), pp.include_dirs.begin(), pp.include_dirs.end());
    sys.lib_dirs.insert(sys.lib_dirs.end(), pp.lib_dirs.begin(), pp.lib_dirs.end());
  }
  out.push_back(sys);
  return out;
}

}  // namespace

LibraryFacts probe_libraries(const std::vector<recipe::LibrarySpec>& specs, const LibrarySearch& search) {
  LibraryFacts f;
  f.probed = true;
  for (const auto& s : specs)
    for (const auto& place : recipe::exists_for(s, search.machine) ? places_for(s, search) : std::vector<Place>{})
      if (auto c = look(s, place)) {
        // The system's root is the prefix its include folder belongs to.
        if (c->root.empty()) c->root = c->include_dir.filename() == "include" ? c->include_dir.parent_path() : c->include_dir;
        f.found.push_back(std::move(*c));
      }
  return f;
}

}  // namespace archbuild::plan
