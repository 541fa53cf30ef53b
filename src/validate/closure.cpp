#include "validate/closure.hpp"
#include "toolchain/platform.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "core/data_dir.hpp"
#include "core/text.hpp"
#include "core/toml_load.hpp"

namespace archbuild::validate {

namespace fs = std::filesystem;

namespace {

const char* const kFamilies[] = {"GLIBC", "GLIBCXX", "CXXABI", "GCC"};

Error at(const toml::node& node, const std::string& file, const std::string& message) {
  return Error::bad_input(fmt::format("{}: {}", tomlx::where(node, file), message));
}

// "torch/lib" + "$ORIGIN/../../nvidia/cu13/lib" -> "nvidia/cu13/lib"; nullopt when the entry is
// not $ORIGIN-relative or climbs above the root.
std::optional<std::string> origin_dir(const std::string& file, const std::string& entry) {
  std::string rest;
  if (entry.starts_with("$ORIGIN"))
    rest = entry.substr(7);
  else if (entry.starts_with("${ORIGIN}"))
    rest = entry.substr(9);
  else
    return std::nullopt;
  fs::path dir = fs::path(file).parent_path();
  fs::path joined = (dir / fs::path(rest.empty() ? "." : rest.substr(rest.front() == '/' ? 1 : 0))).lexically_normal();
  std::string s = joined.generic_string();
  while (!s.empty() && s.back() == '/') s.pop_back();
  if (s == ".") s.clear();
  if (s == ".." || s.starts_with("../")) return std::nullopt;
  return s;
}

std::string join_path(const std::string& dir, const std::string& name) { return dir.empty() ? name : dir + "/" + name; }

// Declared by name, or through the metapackage extra that installs it (`cuda-toolkit[cublas]`).
bool declared(const std::vector<Requirement>& reqs, const LibraryPackage& package) {
  std::string n = normalize_name(package.name);
  std::string meta = package.meta_name.empty() ? "" : normalize_name(package.meta_name);
  return std::any_of(reqs.begin(), reqs.end(), [&](const Requirement& r) {
    if (r.extra) return false;
    if (r.name == n) return true;
    return !meta.empty() && r.name == meta &&
           std::find(r.extras.begin(), r.extras.end(), package.meta_extra) != r.extras.end();
  });
}

// The CUDA major a file was linked against, from a soname only one major's packages ship
// (libcudart.so.12 -> "12"); empty when none says.
std::string cuda_major_of(const ElfFile& f, const LibraryFacts& facts) {
  for (const auto& s : f.dyn.needed) {
    auto all = facts.packages_of(s);
    if (all.size() == 1 && !all.front()->cuda.empty()) return all.front()->cuda;
  }
  return "";
}

Resolved resolve_one(const ElfFile& f, const std::string& soname, const std::vector<std::string>& search,
                     const ClosureInput& in, const LibraryFacts& facts,
                     const std::map<std::string, std::vector<std::string>>& tree_by_name) {
  Resolved r;
  r.soname = soname;
  if (soname.find('/') != std::string::npos) {
    r.where = fmt::format("needed by path {}: the loader opens that path, on the build host only", soname);
    return r;
  }
  std::vector<std::string> absolute;
  std::string declared_missing;
  for (const auto& entry : search) {
    if (!entry.empty() && entry.front() == '/') {
      absolute.push_back(entry);
      continue;
    }
    auto dir = origin_dir(f.path, entry);
    if (!dir) continue;
    std::string candidate = join_path(*dir, soname);
    if (in.tree.count(candidate)) {
      r.from = From::tree;
      r.where = candidate;
      return r;
    }
    // cudnn-cu12 and -cu13 share a folder: the declared one, else the file's own CUDA major's.
    const LibraryPackage* pkg = nullptr;
    for (const LibraryPackage* p : facts.packages_of(soname)) {
      if (p->dir != *dir || (pkg && declared(in.requirements, *pkg))) continue;
      if (!pkg || declared(in.requirements, *p) || p->cuda == cuda_major_of(f, facts)) pkg = p;
    }
    if (pkg) {
      if (!declared(in.requirements, *pkg)) {
        declared_missing = pkg->name;
        continue;
      }
      if (in.installed && !in.installed(candidate)) {
        r.where = fmt::format("{} is a Requires-Dist but {} is not installed", pkg->name, candidate);
        return r;
      }
      r.from = From::package;
      r.where = fmt::format("{}: {}", pkg->name, pkg->dir);
      return r;
    }
  }
  if (facts.system.count(soname)) {
    r.from = From::system;
    r.where = "system";
    return r;
  }
  std::vector<std::string> why;
  if (!declared_missing.empty())
    why.push_back(fmt::format("the RUNPATH reaches {}'s folder but {} is not a Requires-Dist", declared_missing,
                              declared_missing));
  if (auto it = tree_by_name.find(soname); it != tree_by_name.end())
    why.push_back(fmt::format("the tree has it at {}, which no RUNPATH entry of {} reaches", it->second.front(),
                              f.path));
  else if (const LibraryPackage* pkg = facts.package_of(soname, cuda_major_of(f, facts));
           pkg && declared_missing.empty())
    why.push_back(fmt::format("{} ships it in {}: declare it and add $ORIGIN-relative RUNPATH to that folder",
                              pkg->name, pkg->dir));
  auto host = in.host ? in.host(soname, absolute) : host_library(soname, absolute, in.host_dirs);
  if (host)
    why.insert(why.begin(), fmt::format("found only at {}: not portable", fs::path(*host).parent_path().string()));
  else
    why.insert(why.begin(), "not found in the tree, a declared package or the system set (nor on this host)");
  r.where = text::join(why, "; ");
  return r;
}

}  // namespace

// ---- facts -------------------------------------------------------------------------------

std::vector<const LibraryPackage*> LibraryFacts::packages_of(const std::string& soname) const {
  std::vector<const LibraryPackage*> out;
  for (const auto& p : packages)
    if (std::find(p.sonames.begin(), p.sonames.end(), soname) != p.sonames.end()) out.push_back(&p);
  return out;
}

const LibraryPackage* LibraryFacts::package_of(const std::string& soname, const std::string& cuda_major) const {
  auto all = packages_of(soname);
  if (all.empty()) return nullptr;
  for (const LibraryPackage* p : all)
    if (!cuda_major.empty() && p->cuda == cuda_major) return p;
  return all.front();
}

const SymbolPolicy* LibraryFacts::policy_for(const Version& glibc) const {
  if (policies.empty()) return nullptr;
  const SymbolPolicy* best = nullptr;
  for (const auto& p : policies)
    if (p.glibc <= glibc) best = &p;
  if (best == &policies.back() && policies.back().glibc != glibc) return nullptr;  // above what is known
  return best;
}

fs::path shipped_library_facts() { return data_root() / "data" / "validate" / "libraries.toml"; }

Result<LibraryFacts> load_library_facts(const fs::path& file) {
  auto parsed = tomlx::parse_file(file);
  if (!parsed) return parsed.error();
  const std::string f = file.string();
  tomlx::TableReader rd(*parsed, f, "libraries");
  LibraryFacts facts;
  if (const toml::table* sys = rd.table("system", true)) {
    tomlx::TableReader s(*sys, f, "[system]");
    if (auto libs = s.strings("libraries", true)) facts.system.insert(libs->begin(), libs->end());
    s.raise_if_failed();
    if (auto e = s.finish()) return *e;
  }
  if (const toml::array* pkgs = rd.array("package", true)) {
    for (const auto& el : *pkgs) {
      if (!el.is_table()) return at(el, f, "[[package]] entries must be tables with name, dir and sonames");
      tomlx::TableReader p(*el.as_table(), f, "[[package]]");
      LibraryPackage pkg;
      pkg.name = p.string("name", true).value_or("");
      pkg.dir = p.string("dir", true).value_or("");
      pkg.sonames = p.strings("sonames", true).value_or(std::vector<std::string>{});
      pkg.cuda = p.string("cuda").value_or("");
      if (auto meta = p.string("meta")) {
        static const std::regex meta_re("^([A-Za-z0-9][A-Za-z0-9._-]*)\\[([A-Za-z0-9_-]+)\\]$");
        std::smatch m;
        if (!std::regex_match(*meta, m, meta_re))
          return p.error_at("meta", fmt::format("meta \"{}\" must name a metapackage and one extra, like "
                                                "\"cuda-toolkit[cublas]\"",
                                                *meta));
        pkg.meta_name = m[1].str();
        pkg.meta_extra = m[2].str();
      }
      if (auto ms = p.strings("machines")) {
        for (const auto& m : *ms)
          if (m != "x86_64" && m != "aarch64")
            return p.error_at("machines", fmt::format("machines: \"{}\" is not a machine archbuild builds for; expected "
                                                      "x86_64 or aarch64 (`uname -m`)",
                                                      m));
        pkg.machines = *ms;
      }
      if (const toml::table* vs = p.table("versions"))
        for (const auto& [cuda, v] : *vs) {
          auto text = v.value<std::string>();
          if (!v.is_string() || !text || text->empty())
            return at(v, f, fmt::format("versions.\"{}\" must be a version string, like \"13.0.*\"", cuda.str()));
          pkg.versions[std::string(cuda.str())] = *text;
        }
      p.raise_if_failed();
      if (auto e = p.finish()) return *e;
      if (pkg.dir.empty() || pkg.dir.front() == '/' || pkg.dir.find("..") != std::string::npos)
        return p.error_at("dir", fmt::format("dir \"{}\" must be a folder relative to site-packages, like "
                                             "\"nvidia/cu13/lib\"",
                                             pkg.dir));
      for (const auto& s : pkg.sonames)
        for (const LibraryPackage* other : facts.packages_of(s))
          if (other->cuda == pkg.cuda)
            return p.error_at("sonames", fmt::format("{} is already shipped by {}{}", s, other->name,
                                                     pkg.cuda.empty() ? "" : " for CUDA " + pkg.cuda));
      facts.packages.push_back(std::move(pkg));
    }
  }
  if (const toml::array* pols = rd.array("policy", true)) {
    for (const auto& el : *pols) {
      if (!el.is_table()) return at(el, f, "[[policy]] entries must be tables with glibc, GLIBCXX, CXXABI, GCC");
      tomlx::TableReader p(*el.as_table(), f, "[[policy]]");
      SymbolPolicy pol;
      auto read = [&](const char* key, Version& into) -> std::optional<Error> {
        auto s = p.string(key, true);
        if (!s) return std::nullopt;
        auto v = Version::parse(*s);
        if (!v) return p.error_at(key, fmt::format("{} \"{}\" is not a dotted version like 3.4.24", key, *s));
        into = *v;
        return std::nullopt;
      };
      if (auto e = read("glibc", pol.glibc)) return *e;
      for (const char* fam : {"GLIBCXX", "CXXABI", "GCC"})
        if (auto e = read(fam, pol.limits[fam])) return *e;
      p.raise_if_failed();
      if (auto e = p.finish()) return *e;
      if (!facts.policies.empty() && !(facts.policies.back().glibc < pol.glibc))
        return p.error_at("glibc", "[[policy]] entries must be in ascending glibc order");
      facts.policies.push_back(std::move(pol));
    }
  }
  rd.raise_if_failed();
  if (auto e = rd.finish()) return *e;
  return facts;
}

// ---- requirements ------------------------------------------------------------------------

std::vector<Requirement> parse_requirements(const std::vector<std::string>& requires_dist) {
  static const std::regex name_re("^\\s*([A-Za-z0-9][A-Za-z0-9._-]*)");
  static const std::regex extra_re("\\bextra\\s*==");
  std::vector<Requirement> out;
  for (const auto& t : requires_dist) {
    std::smatch m;
    if (!std::regex_search(t, m, name_re)) continue;
    Requirement r;
    r.text = text::trim(t);
    r.name = normalize_name(m[1].str());
    std::string rest = t.substr(m.position(0) + m.length(0));
    auto b = rest.find_first_not_of(" \t");
    if (b != std::string::npos && rest[b] == '[') {
      auto close = rest.find(']', b);
      for (const auto& e : text::split_any(rest.substr(b + 1, close == std::string::npos ? std::string::npos : close - b - 1), ","))
        if (auto x = text::trim(e); !x.empty()) r.extras.push_back(normalize_name(x));
    }
    auto semi = t.find(';');
    r.extra = semi != std::string::npos && std::regex_search(t.substr(semi), extra_re);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Requirement> wheel_requirements(const WheelContents& w, const std::optional<WheelName>& name) {
  std::string di = chosen_dist_info(w, name);
  const std::string* meta = di.empty() ? nullptr : w.text(di + "/METADATA");
  if (!meta) return {};
  auto headers = parse_headers(*meta);
  auto it = headers.find("Requires-Dist");
  return it == headers.end() ? std::vector<Requirement>{} : parse_requirements(it->second);
}

// ---- resolution --------------------------------------------------------------------------

std::string_view to_string(From f) {
  switch (f) {
    case From::tree:
      return "tree";
    case From::package:
      return "package";
    case From::system:
      return "system";
    case From::missing:
      break;
  }
  return "missing";
}

std::optional<std::string> host_library(const std::string& soname, const std::vector<std::string>& dirs,
                                        const toolchain::HostLibraryDirs& host) {
  std::vector<std::string> all = dirs;
  // This machine's folders: its multiarch name and its toolkit's targets/ (toolchains/platforms.toml).
  const std::string none;
  for (const std::string& d : {host.multiarch.empty() ? none : "/lib/" + host.multiarch,
                               host.multiarch.empty() ? none : "/usr/lib/" + host.multiarch, std::string("/lib64"),
                               std::string("/usr/lib64"), std::string("/usr/local/lib"), std::string("/usr/local/cuda/lib64"),
                               host.cuda_target.empty() ? none : "/usr/local/cuda/targets/" + host.cuda_target + "/lib",
                               std::string("/usr/local/cuda/extras/CUPTI/lib64")})
    if (!d.empty()) all.push_back(d);
  std::error_code ec;
  for (const auto& d : all) {
    fs::path p = fs::path(d) / soname;
    if (fs::exists(p, ec)) {
      auto c = fs::canonical(p, ec);
      return (ec ? p : c).string();
    }
  }
  return std::nullopt;
}

std::vector<FileClosure> resolve_closure(const ClosureInput& in, const LibraryFacts& facts) {
  std::map<std::string, std::vector<std::string>> by_name;  // file name -> tree paths
  for (const auto& p : in.tree) by_name[fs::path(p).filename().string()].push_back(p);
  std::vector<FileClosure> out;
  for (const auto& f : in.files) {
    FileClosure c;
    c.path = f.path;
    c.rpath = f.dyn.runpath.empty() && !f.dyn.rpath.empty();
    c.search = c.rpath ? f.dyn.rpath : f.dyn.runpath;
    for (const auto& n : f.dyn.needed) c.needed.push_back(resolve_one(f, n, c.search, in, facts, by_name));
    out.push_back(std::move(c));
  }
  return out;
}

std::map<std::string, NeededVersion> highest_versions(const std::vector<ElfFile>& files) {
  std::map<std::string, NeededVersion> out;
  for (const auto& f : files)
    for (const auto& need : f.dyn.version_needs)
      for (const auto& v : need.versions) {
        auto us = v.find('_');
        if (us == std::string::npos) continue;
        std::string fam = v.substr(0, us);
        if (std::find(std::begin(kFamilies), std::end(kFamilies), fam) == std::end(kFamilies)) continue;
        auto ver = Version::parse(v.substr(us + 1));  // GLIBC_PRIVATE, CXXABI_TM_1: not versions
        if (!ver) continue;
        auto it = out.find(fam);
        if (it == out.end() || it->second.version < *ver) out[fam] = {*ver, f.path};
      }
  return out;
}

std::optional<Version> manylinux_glibc(const std::string& tag) {
  static const std::regex re("^manylinux_([0-9]+)_([0-9]+)_.+$");
  std::smatch m;
  if (std::regex_match(tag, m, re)) return Version::parse(m[1].str() + "." + m[2].str());
  if (tag.starts_with("manylinux2014_")) return Version::parse("2.17");
  if (tag.starts_with("manylinux2010_")) return Version::parse("2.12");
  if (tag.starts_with("manylinux1_")) return Version::parse("2.5");
  return std::nullopt;
}

namespace {
// A tag's machine (PEP 425/600 spelling) and the ELF e_machine name of its files.
struct TagMachine {
  std::string_view tag;
  std::string_view elf;
};
constexpr TagMachine kTagMachines[] = {{"x86_64", "x86-64"}, {"aarch64", "aarch64"}};
}  // namespace

std::optional<std::string> platform_machine(const std::string& tag) {
  static const std::regex re("^(?:linux|(?:manylinux|musllinux)(?:_[0-9]+_[0-9]+|1|2010|2014))_([A-Za-z0-9_]+)$");
  std::smatch m;
  if (!std::regex_match(tag, m, re)) return std::nullopt;
  for (const auto& tm : kTagMachines)
    if (m[1].str() == tm.tag) return std::string(tm.elf);
  return m[1].str();
}

std::vector<ElfMachine> elf_machines(const std::vector<Member>& members) {
  std::vector<ElfMachine> out;
  for (const auto& m : members)
    if (!m.machine.empty()) out.push_back({m.name, m.machine});
  return out;
}

std::vector<ElfMachine> elf_machines(const std::vector<binary::FileReport>& files) {
  std::vector<ElfMachine> out;
  for (const auto& f : files) out.push_back({f.path, f.machine});
  return out;
}

std::vector<std::string> machine_problems(const std::vector<std::string>& platform_tags,
                                          const std::vector<ElfMachine>& files) {
  std::vector<std::string> problems;
  for (const auto& tag : platform_tags) {
    auto want = platform_machine(tag);
    if (!want) continue;
    std::vector<const ElfMachine*> wrong;
    for (const auto& f : files)
      if (f.machine != *want) wrong.push_back(&f);
    if (wrong.empty()) continue;
    problems.push_back(fmt::format("{} is {} ELF, but the tag {} is for {}{}", wrong.front()->path,
                                   wrong.front()->machine, tag, *want,
                                   wrong.size() > 1 ? fmt::format(" (and {} more files)", wrong.size() - 1) : ""));
  }
  return problems;
}

// ---- checks ------------------------------------------------------------------------------

Check check_closure(const std::vector<FileClosure>& closure) {
  Check c;
  c.name = "closure";
  nlohmann::json files = nlohmann::json::array();
  std::vector<std::string> problems;
  std::size_t needed = 0;
  std::map<From, std::size_t> counts;
  for (const auto& f : closure) {
    nlohmann::json libs = nlohmann::json::array();
    for (const auto& n : f.needed) {
      ++needed;
      ++counts[n.from];
      libs.push_back({{"soname", n.soname}, {"from", to_string(n.from)}, {"where", n.where}});
      if (n.from == From::missing) problems.push_back(fmt::format("{} needs {}: {}", f.path, n.soname, n.where));
    }
    files.push_back({{"path", f.path}, {f.rpath ? "rpath" : "runpath", f.search}, {"needed", libs}});
  }
  c.evidence = {{"files", files}};
  if (closure.empty()) {
    c.status = Status::skip;
    c.summary = "no dynamically linked ELF files";
    return c;
  }
  if (!problems.empty()) {
    c.status = Status::fail;
    c.summary = problems.front();
    if (problems.size() > 1) c.summary += fmt::format(" (and {} more)", problems.size() - 1);
    constexpr std::size_t kShown = 20;
    for (std::size_t i = 0; i < problems.size() && i < kShown; ++i) c.details.push_back(problems[i]);
    if (problems.size() > kShown) c.details.push_back(fmt::format("… and {} more", problems.size() - kShown));
    return c;
  }
  c.summary = fmt::format("every library {} ELF file{} need{} is found on a clean target: {} in the tree, {} from "
                          "declared packages, {} from the system",
                          closure.size(), closure.size() == 1 ? "" : "s", closure.size() == 1 ? "s" : "",
                          counts[From::tree], counts[From::package], counts[From::system]);
  return c;
}

Check check_platform_tag(const std::vector<std::string>& platform_tags, const std::vector<ElfFile>& files,
                         const std::vector<FileClosure>& closure, const LibraryFacts& facts,
                         const std::vector<ElfMachine>& machines) {
  Check c;
  c.name = "platform-tag";
  auto high = highest_versions(files);
  nlohmann::json needs = nlohmann::json::object();
  std::vector<std::string> needs_text;
  for (const char* fam : kFamilies)
    if (auto it = high.find(fam); it != high.end()) {
      needs[fam] = {{"version", it->second.version.str()}, {"file", it->second.file}};
      needs_text.push_back(fmt::format("{}_{} ({})", fam, it->second.version.str(), it->second.file));
    }
  c.evidence = {{"tags", platform_tags}, {"needs", needs}};
  std::string needs_line = needs_text.empty() ? "no versioned glibc/libstdc++ symbols" : text::join(needs_text, ", ");
  bool portable = std::all_of(closure.begin(), closure.end(), [](const FileClosure& f) {
    return std::all_of(f.needed.begin(), f.needed.end(), [](const Resolved& r) { return r.from != From::missing; });
  });
  std::vector<std::string> problems = machine_problems(platform_tags, machines);
  std::vector<std::string> judged;
  for (const auto& tag : platform_tags) {
    auto glibc = manylinux_glibc(tag);
    if (!glibc) continue;
    judged.push_back(tag);
    if (auto it = high.find("GLIBC"); it != high.end() && *glibc < it->second.version)
      problems.push_back(fmt::format("{} needs GLIBC_{}, above its tag {} (glibc {})", it->second.file,
                                     it->second.version.str(), tag, glibc->str()));
    if (const SymbolPolicy* pol = facts.policy_for(*glibc)) {
      for (const auto& [fam, limit] : pol->limits)
        if (auto it = high.find(fam); it != high.end() && limit < it->second.version)
          problems.push_back(fmt::format("{} needs {}_{}, above what {} allows ({}_{})", it->second.file, fam,
                                         it->second.version.str(), tag, fam, limit.str()));
    } else {
      c.details.push_back(fmt::format("no libstdc++ policy known for glibc {}: only GLIBC judged", glibc->str()));
    }
    if (!portable) problems.push_back(fmt::format("{} promises a self-contained link closure, which it lacks", tag));
  }
  if (!problems.empty()) {
    c.status = Status::fail;
    c.summary = text::join(problems, "; ");
    c.details.insert(c.details.begin(), "needs " + needs_line);
    return c;
  }
  if (!judged.empty()) {
    c.summary = fmt::format("{} holds: needs {}", text::join(judged, "."), needs_line);
    return c;
  }
  // A plain linux_* tag is always true; say what manylinux tag the wheel could carry.
  std::string could;
  if (!portable) {
    could = "no manylinux tag: the link closure is not portable";
  } else if (auto it = high.find("GLIBC"); it != high.end()) {
    could = fmt::format("manylinux_{}_{} would be true", it->second.version.major(), it->second.version.minor());
    c.evidence["could_be"] = fmt::format("manylinux_{}_{}", it->second.version.major(), it->second.version.minor());
  }
  c.summary = fmt::format("{}: needs {}{}", platform_tags.empty() ? std::string("no platform tag")
                                                                  : text::join(platform_tags, "."),
                          needs_line, could.empty() ? "" : "; " + could);
  return c;
}

}  // namespace archbuild::validate
