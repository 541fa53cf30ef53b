#include "stages/portable.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "binary/elf.hpp"
#include "core/text.hpp"
#include "stages/reproducible.hpp"
#include "validate/wheel_check.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool origin_relative(const std::string& entry) {
  return entry.starts_with("$ORIGIN") || entry.starts_with("${ORIGIN}");
}

// Where a member lands in site-packages: platlib/purelib data folders install at its root.
std::optional<std::string> site_path(const std::string& member) {
  auto slash = member.find('/');
  if (slash == std::string::npos) return member;
  std::string top = member.substr(0, slash);
  if (!top.ends_with(".data")) return member;
  for (const char* scheme : {"/platlib/", "/purelib/"})
    if (member.compare(slash, std::char_traits<char>::length(scheme), scheme) == 0)
      return member.substr(slash + std::char_traits<char>::length(scheme));
  return std::nullopt;  // scripts, headers, data: not on the loader's path
}

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// "$ORIGIN/../nvidia/cu13/lib" for a file in "minitorch" and the folder "nvidia/cu13/lib".
std::string origin_entry(const std::string& elf_dir, const std::string& dir) {
  std::string rel = elf_dir.empty() ? dir : fs::path(dir.empty() ? "." : dir).lexically_relative(elf_dir).generic_string();
  return rel.empty() || rel == "." ? "$ORIGIN" : "$ORIGIN/" + rel;
}

// The file `soname` a $ORIGIN entry of a file in `elf_dir` points at, relative to the root.
std::optional<std::string> origin_target(const std::string& elf_dir, const std::string& entry, const std::string& soname) {
  std::string rest = entry.substr(entry.starts_with("${ORIGIN}") ? 9 : 7);
  fs::path p = (fs::path(elf_dir.empty() ? "." : elf_dir) / fs::path(rest.empty() ? "." : rest.substr(rest.front() == '/' ? 1 : 0)) /
                soname)
                   .lexically_normal();
  std::string s = p.generic_string();
  if (s.starts_with("..")) return std::nullopt;
  return s;
}

template <class T>
void push_unique(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

struct ElfPlan {
  std::size_t member = 0;
  std::string path;  // in site-packages
  binary::DynamicInfo dyn;
  std::vector<std::string> old_search;
  std::vector<std::string> new_search;
  bool host_bound = false;
};

struct Mapped {
  const validate::LibraryPackage* package = nullptr;
  std::set<std::string> sonames;
  std::set<std::string> files;
};

}  // namespace

TagChoice choose_platform_tag(const std::string& arch, const std::map<std::string, validate::NeededVersion>& high,
                              const validate::LibraryFacts& facts) {
  std::string plain = "linux_" + arch;
  if (facts.policies.empty()) return {plain, "no manylinux policy known (data/validate/libraries.toml)"};
  Version glibc = facts.policies.front().glibc;
  if (auto it = high.find("GLIBC"); it != high.end() && glibc < it->second.version) glibc = it->second.version;
  auto admits = [&](const validate::SymbolPolicy& p) -> std::optional<std::string> {
    for (const auto& [fam, limit] : p.limits)
      if (auto it = high.find(fam); it != high.end() && limit < it->second.version)
        return fmt::format("{} needs {}_{} (manylinux_{}_{} allows {}_{})", it->second.file, fam,
                           it->second.version.str(), p.glibc.major(), p.glibc.minor(), fam, limit.str());
    return std::nullopt;
  };
  auto tag = [&](const Version& g) { return fmt::format("manylinux_{}_{}_{}", g.major(), g.minor(), arch); };
  auto needs = [&] {
    auto it = high.find("GLIBC");
    return it == high.end() ? std::string("no versioned glibc symbol")
                            : fmt::format("GLIBC_{} ({})", it->second.version.str(), it->second.file);
  };
  const validate::SymbolPolicy* pol = facts.policy_for(glibc);
  if (!pol)
    return {tag(glibc), fmt::format("needs {}; no libstdc++ policy known above glibc {}: GLIBC judged only", needs(),
                                    facts.policies.back().glibc.str())};
  std::string refused;
  for (const auto& p : facts.policies) {
    if (p.glibc < pol->glibc) continue;
    auto no = admits(p);
    if (!no) {
      Version g = glibc < p.glibc ? p.glibc : glibc;
      return {tag(g), fmt::format("needs {}; libstdc++/libgcc within the manylinux_{}_{} policy", needs(),
                                  p.glibc.major(), p.glibc.minor())};
    }
    refused = *no;
  }
  return {plain, refused + ": above every manylinux policy known"};
}

namespace {

std::string with_platform(const std::string& tag_line_value, const std::string& platform) {
  auto dash = tag_line_value.rfind('-');
  return dash == std::string::npos ? tag_line_value : tag_line_value.substr(0, dash + 1) + platform;
}


std::string requirement_name(const std::string& r) {
  return validate::normalize_name(r.substr(0, r.find_first_of("=<>!~ ;[(@")));
}

}  // namespace

std::string add_requirements(const std::string& metadata, const std::vector<std::string>& add,
                             const std::vector<std::string>& replace) {
  std::set<std::string> have, dropped;
  for (const auto& r : replace) dropped.insert(requirement_name(r));
  std::istringstream in(metadata);
  std::string line, kept;
  std::size_t header_end = std::string::npos, pos = 0;
  while (std::getline(in, line)) {
    std::size_t next = pos + line.size() + 1;
    std::string l = line;
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (l.empty()) {
      header_end = pos;
      break;
    }
    if (l.starts_with("Requires-Dist:")) {
      auto name = requirement_name(std::string(text::trim(l.substr(14))));
      if (dropped.count(name)) {
        pos = next;
        continue;
      }
      have.insert(name);
    }
    kept += metadata.substr(pos, std::min(next, metadata.size()) - pos);
    pos = next;
  }
  std::string lines;
  for (const auto& r : add) {
    if (have.count(requirement_name(r))) continue;
    have.insert(requirement_name(r));
    lines += "Requires-Dist: " + r + "\n";
  }
  if (header_end == std::string::npos) {
    if (!kept.empty() && kept.back() != '\n') kept += '\n';
    return kept + lines;
  }
  return kept + lines + metadata.substr(header_end);
}

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// ---- make_portable's phases, in the order it runs them

// What the wheel installs into site-packages: every path, and each file name's first path.
struct SiteTree {
  std::set<std::string> paths;
  std::map<std::string, std::string> by_name;
};

SiteTree site_tree(const std::vector<ZipMember>& members) {
  SiteTree t;
  for (const auto& m : members)
    if (!m.directory)
      if (auto s = site_path(m.name)) {
        t.paths.insert(*s);
        t.by_name.emplace(fs::path(*s).filename().string(), *s);
      }
  return t;
}

// The dynamically linked ELF files that land in site-packages, with their search paths.
std::vector<ElfPlan> dynamic_elfs(const std::vector<ZipMember>& members) {
  std::vector<ElfPlan> elfs;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto& m = members[i];
    if (m.directory) continue;
    auto path = site_path(m.name);
    binary::Bytes bytes(reinterpret_cast<const std::uint8_t*>(m.data.data()), m.data.size());
    if (!path || !binary::looks_like_elf(bytes)) continue;
    auto dyn = binary::read_dynamic(bytes);
    if (!dyn || (dyn->needed.empty() && dyn->runpath.empty() && dyn->rpath.empty())) continue;
    ElfPlan e;
    e.member = i;
    e.path = *path;
    e.dyn = std::move(*dyn);
    e.old_search = e.dyn.runpath.empty() ? e.dyn.rpath : e.dyn.runpath;
    elfs.push_back(std::move(e));
  }
  return elfs;
}

// The machine the wheel is for, from its platform tag: a package without a wheel for it
// (data/validate/libraries.toml `machines`) cannot be required there.
std::string wheel_machine(const fs::path& wheel) {
  std::string machine;
  if (auto n = validate::parse_wheel_name(wheel.filename().string()))
    for (const auto& t : n->platform_tags)
      for (const char* m : {"x86_64", "aarch64"})
        if (t.ends_with(std::string("_") + m)) machine = m;
  return machine;
}

// Where each needed library comes from: the wheel itself, an nvidia-* package, or the build host.
struct Dependencies {
  std::map<std::string, std::string> no_wheel;             // soname -> package without a wheel here
  std::map<std::string, Mapped> mapped;                    // by package name
  std::map<std::string, std::set<std::string>> host_libs;  // soname -> files
};

// Maps every file's DT_NEEDED and decides its new search path (e.new_search, e.host_bound).
Dependencies map_dependencies(std::vector<ElfPlan>& elfs, const SiteTree& tree, const validate::LibraryFacts& facts,
                              const PortableOptions& options, const std::string& machine) {
  const bool official = options.layout == recipe::WheelLayout::official;
  std::string cuda_major = options.cuda ? std::to_string(options.cuda->major()) : "";
  Dependencies d;
  for (auto& e : elfs) {
    std::string dir = parent_of(e.path);
    std::vector<std::string> package_entries;
    for (const auto& soname : e.dyn.needed) {
      if (facts.system.count(soname)) continue;
      bool in_tree = std::any_of(e.old_search.begin(), e.old_search.end(), [&](const std::string& s) {
        if (!origin_relative(s)) return false;
        auto t = origin_target(dir, s, soname);
        return t && tree.paths.count(*t);
      });
      if (in_tree) continue;
      if (auto it = tree.by_name.find(soname); official && it != tree.by_name.end()) {
        // The wheel carries it where no $ORIGIN entry of this file reaches (a build-tree RUNPATH).
        push_unique(package_entries, origin_entry(dir, parent_of(it->second)));
        continue;
      }
      const validate::LibraryPackage* pkg = official ? facts.package_of(soname, cuda_major) : nullptr;
      if (pkg && !pkg->has_wheel_for(machine)) {
        d.no_wheel[soname] = pkg->name;
        pkg = nullptr;
      }
      if (!pkg) {
        d.host_libs[soname].insert(e.path);
        e.host_bound = true;
        continue;
      }
      auto& mp = d.mapped[pkg->name];
      mp.package = pkg;
      mp.sonames.insert(soname);
      mp.files.insert(e.path);
      push_unique(package_entries, origin_entry(dir, pkg->dir));
    }
    if (!official) {
      e.new_search = e.old_search;
      continue;
    }
    // The wheel's own folders first, then the packages'; the build host's folders only where
    // something is still found nowhere else (host-bound: they are what finds it here).
    for (const auto& s : e.old_search)
      if (origin_relative(s) || e.host_bound) push_unique(e.new_search, s);
    for (const auto& s : package_entries) push_unique(e.new_search, s);
  }
  return d;
}

// RUNPATH through patchelf (the new string rarely fits in the old one's place): the members
// rewritten, each change in out["runpath"].
Result<Ok> rewrite_runpaths(std::vector<ElfPlan>& elfs, std::vector<ZipMember>& members, const PortableOptions& options,
                            run::Runner& runner, json& out) {
  const bool official = options.layout == recipe::WheelLayout::official;
  std::vector<ElfPlan*> changed;
  for (auto& e : elfs)
    // A DT_RPATH becomes DT_RUNPATH (patchelf's default): LD_LIBRARY_PATH can still override it.
    if (e.new_search != e.old_search ||
        (official && !e.dyn.rpath.empty() && e.dyn.runpath.empty() && !e.new_search.empty()))
      changed.push_back(&e);
  if (changed.empty()) return Ok{};
  if (options.patchelf.empty())
    return Error::missing_tool(fmt::format("patchelf is needed to rewrite the RUNPATH of {} ({} file{}); install it "
                                           "(Debian: apt-get install patchelf) or set [wheel] layout = \"host\"",
                                           changed.front()->path, changed.size(), changed.size() == 1 ? "" : "s"));
  std::error_code ec;
  fs::remove_all(options.scratch, ec);
  fs::create_directories(options.scratch, ec);
  if (ec) return Error::bad_input(fmt::format("cannot create {}: {}", options.scratch.string(), ec.message()));
  int n = 0;
  for (ElfPlan* e : changed) {
    // Numbered scratch names: member names are never used as paths.
    fs::path file = options.scratch / fmt::format("{}.elf", n++);
    {
      std::ofstream f(file, std::ios::binary | std::ios::trunc);
      f.write(members[e->member].data.data(), static_cast<std::streamsize>(members[e->member].data.size()));
      if (!f) return Error::bad_input(fmt::format("cannot write {}", file.string()));
    }
    run::Command cmd;
    cmd.argv = e->new_search.empty()
                   ? std::vector<std::string>{options.patchelf.string(), "--remove-rpath", file.string()}
                   : std::vector<std::string>{options.patchelf.string(), "--set-rpath",
                                              text::join(e->new_search, ":"), file.string()};
    cmd.log = options.log;
    cmd.append_log = true;
    auto r = runner.run(cmd);
    if (!r.ok())
      return Error::build_failed(fmt::format("patchelf could not rewrite the RUNPATH of {}: {} (log: {})", e->path,
                                             r.describe(), options.log.string()));
    members[e->member].data = read_file(file);
    out["runpath"][e->path] = {{"was", e->old_search}, {"now", e->new_search}};
  }
  fs::remove_all(options.scratch, ec);
  return Ok{};
}

// What the wheel now requires (out["libraries"], ["triton"], ["pins"], ["requires_dist"]).
std::vector<std::string> requirements_of(const Dependencies& deps, const PortableOptions& options, json& out) {
  std::vector<std::string> requirements;
  std::string cuda = options.cuda ? fmt::format("{}.{}", options.cuda->major(), options.cuda->minor()) : "";
  for (const auto& [name, mp] : deps.mapped) {
    // The exact version the build linked when the build venv had the package (official wheels pin
    // exactly), else the data file's pattern for this CUDA, else none.
    std::string req = name;
    json version;
    if (auto b = options.built_against.find(validate::normalize_name(name)); b != options.built_against.end()) {
      req = name + "==" + b->second;
      version = {{"pin", b->second}, {"from", "the build venv"}};
    } else if (auto v = mp.package->versions.find(cuda); v != mp.package->versions.end()) {
      req = name + "==" + v->second;
      version = {{"pin", v->second}, {"from", "data/validate/libraries.toml"}};
    } else {
      version = fmt::format("unpinned: not in the build venv, and the data file names no version for CUDA {}",
                            cuda.empty() ? "(none)" : cuda);
    }
    requirements.push_back(req);
    out["libraries"].push_back({{"package", name},
                                {"dir", mp.package->dir},
                                {"sonames", mp.sonames},
                                {"files", mp.files},
                                {"requirement", req},
                                {"version", version}});
  }
  if (options.triton) {
    // The marker official wheels give it: triton ships Linux wheels only.
    std::string req = fmt::format("triton=={}; platform_system == \"Linux\"", options.triton->str());
    requirements.push_back(req);
    out["triton"] = {{"requirement", req}, {"from", "the recipe's [wheel] triton"}};
  }
  for (const auto& pin : options.pins) requirements.push_back(pin);
  if (!options.pins.empty()) out["pins"] = options.pins;
  out["requires_dist"] = requirements;
  return requirements;
}

// What stays on the build host, and why (out["host_libraries"], ["host_bound"],
// ["host_bound_reason"]); "" when nothing does.
std::string host_bound_reason(const Dependencies& deps, const PortableOptions& options, const std::string& machine,
                              json& out) {
  std::vector<std::string> host_names;
  for (const auto& [soname, files] : deps.host_libs) {
    out["host_libraries"].push_back({{"soname", soname}, {"files", files}});
    host_names.push_back(soname);
  }
  if (deps.host_libs.empty()) return "";
  std::vector<std::string> packageless, wheelless;
  for (const auto& n : host_names) {
    auto w = deps.no_wheel.find(n);
    if (w == deps.no_wheel.end()) packageless.push_back(n);
    else wheelless.push_back(fmt::format("{} ({} has no {} wheel)", n, w->second, machine));
  }
  std::vector<std::string> parts;
  if (!packageless.empty())
    parts.push_back(fmt::format("{} {} no nvidia-* package in data/validate/libraries.toml", text::join(packageless, ", "),
                                packageless.size() == 1 ? "has" : "have"));
  if (!wheelless.empty())
    parts.push_back(fmt::format("{}: no pip package provides {} there (data/validate/libraries.toml machines)",
                                text::join(wheelless, ", "), wheelless.size() == 1 ? "it" : "them"));
  std::string reason = options.layout == recipe::WheelLayout::host
                           ? fmt::format("the recipe's [wheel] layout = \"host\": {} from the build host", text::join(host_names, ", "))
                           : text::join(parts, "; ");
  out["host_bound"] = true;
  out["host_bound_reason"] = reason;
  return reason;
}

// The platform tag (out["tag"], ["tag_reason"]): the new platform, or "" to keep the wheel's.
std::string platform_tag(const validate::WheelName& name, const std::vector<ElfPlan>& elfs, const Dependencies& deps,
                         const std::string& host_reason, const validate::LibraryFacts& facts, json& out) {
  std::vector<validate::ElfFile> files;
  for (const auto& e : elfs) files.push_back({e.path, e.dyn});
  bool linux_only = !name.platform_tags.empty() &&
                    std::all_of(name.platform_tags.begin(), name.platform_tags.end(),
                                [](const std::string& t) { return t.starts_with("linux_"); });
  if (elfs.empty()) {
    out["tag"] = text::join(name.platform_tags, ".");
    out["tag_reason"] = "no dynamically linked ELF file: tag kept";
    return "";
  }
  if (!linux_only || name.platform_tags.size() != 1) {
    out["tag"] = text::join(name.platform_tags, ".");
    out["tag_reason"] = "not a plain linux_<arch> tag: kept as the build wrote it (validate judges it)";
    return "";
  }
  std::string arch = name.platform_tags.front().substr(6);
  auto choice = deps.host_libs.empty() ? choose_platform_tag(arch, validate::highest_versions(files), facts)
                                       : TagChoice{"linux_" + arch, "host-bound: " + host_reason};
  out["tag"] = choice.platform;
  out["tag_reason"] = choice.reason;
  return choice.platform != name.platform_tags.front() ? choice.platform : "";
}

// METADATA and WHEEL of the one dist-info folder.
void rewrite_dist_info(std::vector<ZipMember>& members, const std::string& dist_info,
                       const std::vector<std::string>& requirements, const std::vector<std::string>& pins,
                       const std::string& new_platform) {
  for (auto& m : members) {
    if (m.name == dist_info + "METADATA" && !requirements.empty()) m.data = add_requirements(m.data, requirements, pins);
    if (m.name == dist_info + "WHEEL" && !new_platform.empty()) {
      std::istringstream in(m.data);
      std::string line, text;
      while (std::getline(in, line)) {
        if (line.starts_with("Tag:")) line = "Tag: " + with_platform(std::string(text::trim(line.substr(4))), new_platform);
        text += line + "\n";
      }
      m.data = text;
    }
  }
}

}  // namespace

Result<PortableResult> make_portable(const fs::path& wheel, const validate::LibraryFacts& facts,
                                     const PortableOptions& options, run::Runner& runner) {
  auto read = read_zip_members(wheel);
  if (!read) return read.error();
  std::vector<ZipMember> members = std::move(*read);
  PortableResult result;
  result.wheel = wheel;
  json& out = result.portability;
  out = {{"layout", std::string(recipe::to_string(options.layout))}, {"host_bound", false},
         {"libraries", json::array()}, {"host_libraries", json::array()}, {"requires_dist", json::array()},
         {"runpath", json::object()}};

  std::vector<ElfPlan> elfs = dynamic_elfs(members);
  const std::string machine = wheel_machine(wheel);
  const Dependencies deps = map_dependencies(elfs, site_tree(members), facts, options, machine);
  if (auto r = rewrite_runpaths(elfs, members, options, runner, out); !r) return r.error();
  const std::vector<std::string> requirements = requirements_of(deps, options, out);
  const std::string host_reason = host_bound_reason(deps, options, machine, out);

  auto name = validate::parse_wheel_name(wheel.filename().string());
  if (!name) return name.error();
  const std::string new_platform = platform_tag(*name, elfs, deps, host_reason, facts, out);
  rewrite_dist_info(members, name->dist_info() + "/", requirements, options.pins, new_platform);
  if (requirements.empty() && new_platform.empty() && out["runpath"].empty()) return result;

  fs::path target = wheel;
  if (!new_platform.empty()) {
    std::string file = wheel.filename().string();
    std::string old_suffix = "-" + name->platform_tags.front() + ".whl";
    target = wheel.parent_path() / (file.substr(0, file.size() - old_suffix.size()) + "-" + new_platform + ".whl");
  }
  if (auto w = write_zip_members(target, members); !w) return w.error();
  if (target != wheel) {
    std::error_code ec;
    fs::remove(wheel, ec);
  }
  result.wheel = target;
  return result;
}

}  // namespace archbuild::stages
