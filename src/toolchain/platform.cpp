#include "toolchain/platform.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "core/data_dir.hpp"
#include "core/text.hpp"
#include "core/toml_load.hpp"
#include "toolchain/jetpack.hpp"

namespace archbuild::toolchain {

namespace fs = std::filesystem;

namespace {

std::optional<arch::Cc> parse_cc(std::string_view s) {
  auto dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 2 != s.size()) return std::nullopt;
  int major = 0;
  for (char c : s.substr(0, dot)) {
    if (c < '0' || c > '9') return std::nullopt;
    major = major * 10 + (c - '0');
  }
  char m = s[dot + 1];
  if (m < '0' || m > '9') return std::nullopt;
  return arch::Cc{major, m - '0'};
}

bool contains(const std::vector<arch::Cc>& v, arch::Cc cc) { return std::find(v.begin(), v.end(), cc) != v.end(); }

}  // namespace

Result<Platforms> Platforms::load(const fs::path& path) {
  auto parsed = tomlx::parse_file(path);
  if (!parsed) return parsed.error();
  const std::string file = path.string();
  tomlx::TableReader top(*parsed, file, "platforms");
  const toml::table* table = top.table("platform", true);
  if (top.failure()) return *top.failure();
  if (auto e = top.finish()) return *e;
  Platforms out;
  out.file = path;
  for (const auto& [k, node] : *table) {
    std::string name(k.str());
    const toml::table* t = node.as_table();
    if (!t) return Error::bad_input(fmt::format("{}: platform.{} must be a table", tomlx::where(node, file), name));
    tomlx::TableReader rd(*t, file, fmt::format("[platform.{}]", name));
    Platform p;
    p.name = name;
    p.description = rd.string("description", true).value_or("");
    p.machine = rd.string("machine", true).value_or("");
    p.wheel_arch = rd.string("wheel_arch", true).value_or("");
    p.cuda_target = rd.string("cuda_target", true).value_or("");
    auto libs = rd.string("cuda_libraries", true);
    p.official_wheels = rd.string("official_wheels", true).value_or("");
    p.is_default = rd.boolean("default").value_or(false);
    p.device = rd.string("device").value_or("");
    p.ci_runner = rd.string("ci_runner").value_or("");
    auto read_ccs = [&](const char* key, std::vector<arch::Cc>& into) -> std::optional<Error> {
      for (const auto& s : rd.strings(key).value_or(std::vector<std::string>{})) {
        auto cc = parse_cc(s);
        if (!cc) return rd.error_at(key, fmt::format("platform.{}.{}: '{}' is not a compute capability like 8.7", name, key, s));
        into.push_back(*cc);
      }
      return std::nullopt;
    };
    if (auto e = read_ccs("only_ccs", p.only_ccs)) return *e;
    if (auto e = read_ccs("exclusive_ccs", p.exclusive_ccs)) return *e;
    if (auto s = rd.string("min_cc")) {
      p.min_cc = parse_cc(*s);
      if (!p.min_cc) return rd.error_at("min_cc", fmt::format("platform.{}.min_cc: '{}' is not a compute capability like 7.5", name, *s));
    }
    if (auto s = rd.string("cuda_below")) {
      p.cuda_below = Version::parse(*s);
      if (!p.cuda_below)
        return rd.error_at("cuda_below", fmt::format("platform.{}.cuda_below: '{}' is not a CUDA release like 13.0", name, *s));
      p.cuda_below_why = rd.string("cuda_below_why", true).value_or("");
    }
    if (rd.failure()) return *rd.failure();
    if (auto e = rd.finish()) return *e;
    if (*libs != "pip" && *libs != "host")
      return rd.error_at("cuda_libraries", fmt::format("platform.{}.cuda_libraries: '{}'; valid: \"pip\", \"host\"", name, *libs));
    p.pip_cuda = *libs == "pip";
    out.list.push_back(std::move(p));
  }
  for (const auto& p : out.list)
    if (p.is_default &&
        std::count_if(out.list.begin(), out.list.end(), [&](const Platform& o) { return o.is_default && o.machine == p.machine; }) > 1)
      return Error::bad_input(fmt::format("{}: more than one default platform for machine {}", file, p.machine));
  return out;
}

const Platforms& Platforms::shipped() {
  static const Platforms ps = [] {
    auto r = load(data_root() / "toolchains" / "platforms.toml");
    if (!r) throw Failure(r.error());
    return std::move(*r);
  }();
  return ps;
}

const Platform* Platforms::find(std::string_view name) const {
  for (const auto& p : list)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> Platforms::names() const {
  std::vector<std::string> n;
  for (const auto& p : list) n.push_back(p.name);
  return n;
}

const Platform* Platforms::default_for(std::string_view machine, bool tegra) const {
  // A Jetson (L4T) is the machine's platform whose CUDA comes from the host.
  if (tegra)
    for (const auto& p : list)
      if (p.machine == machine && !p.pip_cuda) return &p;
  for (const auto& p : list)
    if (p.machine == machine && p.is_default) return &p;
  return nullptr;
}

std::vector<const Platform*> Platforms::owners_of(arch::Cc cc) const {
  std::vector<const Platform*> owners;
  for (const auto& p : list)
    if (contains(p.only_ccs, cc) || contains(p.exclusive_ccs, cc)) owners.push_back(&p);
  return owners;
}

const Platform* Platforms::owner_of(arch::Cc cc) const {
  auto owners = owners_of(cc);
  return owners.size() == 1 ? owners.front() : nullptr;
}

std::optional<std::string> Platforms::refuses(const Platform& p, arch::Cc cc) const {
  if (!p.only_ccs.empty() && !contains(p.only_ccs, cc)) {
    std::vector<std::string> ccs;
    for (const auto& c : p.only_ccs) ccs.push_back(c.str());
    return fmt::format("platform {} has only the GPUs of CC {} ({}), not {}", p.name, text::join(ccs, ", "), file.filename().string(),
                       cc.str());
  }
  auto owners = owners_of(cc);
  if (owners.size() == 1 && owners.front() != &p)
    return fmt::format("CC {} is a GPU of platform {} only ({}), not of {}", cc.str(), owners.front()->name,
                       owners.front()->description, p.name);
  if (owners.size() > 1 && std::find(owners.begin(), owners.end(), &p) == owners.end()) {
    std::vector<std::string> names;
    for (const auto* o : owners) names.push_back(o->name);
    return fmt::format("CC {} is a GPU of platforms {} only ({}), not of {}", cc.str(), text::join(names, ", "),
                       file.filename().string(), p.name);
  }
  if (p.min_cc && cc < *p.min_cc)
    return fmt::format("platform {} drives no GPU older than CC {} (CC {} is not on it)", p.name, p.min_cc->str(), cc.str());
  return std::nullopt;
}

Machine machine_of(std::string arch, const std::optional<std::string>& nv_tegra_release, const JetPacks& jetpacks) {
  Machine m;
  m.arch = std::move(arch);
  if (nv_tegra_release) {
    m.tegra = true;
    m.l4t = std::string(text::trim(nv_tegra_release->substr(0, nv_tegra_release->find('\n'))));
    m.l4t_platform = platform_of_l4t(jetpacks, m.l4t);
  }
  return m;
}

Machine this_machine(const JetPacks& jetpacks) {
  struct utsname u {};
  std::string arch = uname(&u) == 0 ? std::string(u.machine) : std::string();
  const char* override_path = std::getenv("ARCHBUILD_NV_TEGRA_RELEASE");
  std::ifstream in(override_path && *override_path ? override_path : "/etc/nv_tegra_release");
  std::optional<std::string> line;
  if (in) std::getline(in, line.emplace());
  return machine_of(std::move(arch), line, jetpacks);
}

const Platform* default_platform(const Platforms& ps, const Machine& m) {
  if (m.tegra && !m.l4t_platform.empty())
    if (const auto* p = ps.find(m.l4t_platform); p && p->machine == m.arch) return p;
  return ps.default_for(m.arch, m.tegra);
}

HostLibraryDirs host_library_dirs(const Platforms& ps, const JetPacks& jetpacks) {
  auto m = this_machine(jetpacks);
  HostLibraryDirs d{(m.arch.empty() ? std::string("x86_64") : m.arch) + "-linux-gnu", "x86_64-linux"};
  if (const auto* p = default_platform(ps, m)) d.cuda_target = p->cuda_target;
  return d;
}

HostLibraryDirs library_dirs_of(const Platform& p) {
  return {p.machine.empty() ? std::string() : p.machine + "-linux-gnu", p.cuda_target};
}

Result<PlatformChoice> choose_platform(const Platforms& ps, const std::optional<std::string>& asked,
                                       const std::vector<PlatformGpu>& gpus, const Machine& machine) {
  PlatformChoice c;
  if (asked) {
    c.platform = ps.find(*asked);
    if (!c.platform)
      return Error::bad_input(fmt::format("--platform {}: not a platform of {}; valid: {}", text::quoted(*asked),
                                          ps.file.filename().string(), text::join(ps.names(), ", ")));
    c.why = "--platform";
    for (const auto& g : gpus) {
      std::optional<std::string> no;
      if (!g.platform.empty() && g.platform != c.platform->name)
        no = fmt::format("{} sits on platform {} (data/gpus.toml)", g.label, g.platform);
      else if (auto r = ps.refuses(*c.platform, g.cc))
        no = fmt::format("{}: {}", g.label, *r);
      if (no) return Error::bad_input(fmt::format("--platform {}: {}", c.platform->name, *no));
    }
    return c;
  }
  // The GPUs decide where only one platform has them.
  for (const auto& g : gpus) {
    const Platform* p = nullptr;
    std::string why;
    if (!g.platform.empty()) {
      p = ps.find(g.platform);
      why = fmt::format("{} (a GPU of platform {}, data/gpus.toml)", g.label, g.platform);
    } else if ((p = ps.owner_of(g.cc))) {
      why = fmt::format("{} (CC {} exists only on platform {})", g.label, g.cc.str(), p->name);
    }
    if (!p) continue;
    if (c.platform && c.platform != p)
      return Error::bad_input(fmt::format("the GPUs asked about sit on two platforms: {} and {}; ask about one at a time "
                                          "or give --platform",
                                          c.why, why));
    if (!c.platform) {
      c.platform = p;
      c.why = why;
    }
  }
  if (c.platform) return c;
  c.platform = default_platform(ps, machine);
  if (!c.platform)
    return Error::bad_input(fmt::format("this machine ({}) is none of the platforms of {}; give --platform ({})",
                                        machine.arch.empty() ? "unknown" : machine.arch, ps.file.filename().string(),
                                        text::join(ps.names(), ", ")));
  // A GPU of several platforms (Orin: jetson or sbsa) that this machine's platform cannot have: the
  // GPUs did not decide, so the asker must (--platform; --jetpack where a JetPack decides).
  for (const auto& g : gpus)
    if (ps.owners_of(g.cc).size() > 1)
      if (auto r = ps.refuses(*c.platform, g.cc))
        return Error::bad_input(fmt::format("{}: {}; give --platform", g.label, *r));
  c.why = machine.tegra ? fmt::format("this machine ({}, L4T: {}{})", machine.arch, machine.l4t,
                                      machine.l4t_platform.empty() ? "" : ", a JetPack release of platform " + machine.l4t_platform)
                        : fmt::format("this machine ({})", machine.arch);
  return c;
}

}  // namespace archbuild::toolchain
