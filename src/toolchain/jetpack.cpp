#include "toolchain/jetpack.hpp"

#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "core/data_dir.hpp"
#include "core/text.hpp"
#include "core/toml_load.hpp"

namespace archbuild::toolchain {

namespace fs = std::filesystem;

bool JetPack::supports(arch::Cc cc) const { return std::find(ccs.begin(), ccs.end(), cc) != ccs.end(); }

std::string JetPack::ccs_text() const {
  std::vector<std::string> parts;
  for (const auto& cc : ccs) parts.push_back(cc.str());
  return text::join(parts, ", ");
}

Result<JetPacks> JetPacks::load(const fs::path& path) {
  auto parsed = tomlx::parse_file(path);
  if (!parsed) return parsed.error();
  const std::string file = path.string();
  tomlx::TableReader top(*parsed, file, "jetpack");
  const toml::array* rows = top.array("jetpack", true);
  if (top.failure()) return *top.failure();
  if (auto e = top.finish()) return *e;
  JetPacks out;
  out.file = path;
  for (const auto& node : *rows) {
    const toml::table* t = node.as_table();
    if (!t) return Error::bad_input(fmt::format("{}: [[jetpack]] entries must be tables", tomlx::where(node, file)));
    tomlx::TableReader rd(*t, file, "[[jetpack]]");
    JetPack j;
    auto version = [&](const char* key, std::size_t parts) -> std::optional<Version> {
      auto s = rd.string(key, true);
      auto v = s ? Version::parse(*s) : std::nullopt;
      if (v && v->size() < parts) return std::nullopt;
      return v;
    };
    auto v = version("version", 2), l4t = version("l4t", 3), cuda = version("cuda", 2);
    if (rd.failure()) return *rd.failure();
    if (!v) return rd.error_at("version", "version must be a JetPack release like \"6.2\"");
    if (!l4t) return rd.error_at("l4t", "l4t must be a Jetson Linux release like \"36.4.3\"");
    if (!cuda) return rd.error_at("cuda", "cuda must be a CUDA release like \"12.6\"");
    j.version = *v;
    j.l4t = *l4t;
    j.cuda = *cuda;
    for (const auto& s : rd.strings("ccs", true).value_or(std::vector<std::string>{})) {
      auto cc = Version::parse(s);
      if (!cc || cc->size() != 2 || cc->minor() > 9)
        return rd.error_at("ccs", fmt::format("ccs: '{}' is not a compute capability like 8.7", s));
      j.ccs.push_back(arch::Cc{cc->major(), cc->minor()});
    }
    j.platform = rd.string("platform", true).value_or("");
    j.ubuntu = rd.string("ubuntu").value_or("");
    j.url = rd.string("url", true).value_or("");
    j.note = rd.string("note").value_or("");
    j.no_toolchain = rd.string("no_toolchain").value_or("");
    if (rd.failure()) return *rd.failure();
    if (auto e = rd.finish()) return *e;
    if (j.platform != "jetson" && j.platform != "sbsa")
      return rd.error_at("platform", fmt::format("platform: '{}'; valid: \"jetson\", \"sbsa\"", j.platform));
    out.list.push_back(std::move(j));
  }
  std::sort(out.list.begin(), out.list.end(), [](const JetPack& a, const JetPack& b) { return a.version < b.version; });
  return out;
}

const JetPacks& JetPacks::shipped() {
  static const JetPacks js = [] {
    auto r = load(data_root() / "toolchains" / "jetpack.toml");
    if (!r) throw Failure(r.error());
    return std::move(*r);
  }();
  return js;
}

Result<JetPack> JetPacks::find(std::string_view version) const {
  auto asked = Version::parse(version);
  const JetPack* best = nullptr;
  if (asked)
    for (const auto& j : list) {
      if (j.version == *asked) return j;             // 6.2 is 6.2, not a later 6.2.x
      if (j.version.starts_with(*asked)) best = &j;  // ascending: the newest match wins
    }
  if (best) return *best;
  std::vector<std::string> known;
  for (const auto& j : list) known.push_back(fmt::format("{} (CUDA {})", j.version.str(), j.cuda.str()));
  return Error::bad_input(fmt::format("--jetpack {}: not a JetPack release of {}; known: {}", version, file.filename().string(),
                                      text::join(known, ", ")));
}

const JetPack* JetPacks::for_l4t(const Version& l4t) const {
  const JetPack* same_minor = nullptr;
  for (const auto& j : list) {
    if (j.l4t == l4t) return &j;
    if (j.l4t.major() == l4t.major() && j.l4t.minor() == l4t.minor()) same_minor = &j;
  }
  return same_minor;
}

const JetPack* JetPacks::newest_for(std::string_view platform, const std::vector<arch::Cc>& ccs) const {
  const JetPack* best = nullptr;
  for (const auto& j : list)
    if (j.platform == platform && std::all_of(ccs.begin(), ccs.end(), [&](arch::Cc cc) { return j.supports(cc); }))
      best = &j;  // ascending: the last match is the newest
  return best;
}

const JetPack* JetPacks::newest_for(const std::vector<arch::Cc>& ccs) const {
  const JetPack* best = nullptr;
  for (const auto& j : list)
    if (std::all_of(ccs.begin(), ccs.end(), [&](arch::Cc cc) { return j.supports(cc); })) best = &j;
  return best;
}

std::optional<Version> l4t_version(std::string_view line) {
  static const std::regex re(R"(R(\d+)\s*\(release\),\s*REVISION:\s*(\d+)\.(\d+))");
  std::string s(line);
  std::smatch m;
  if (!std::regex_search(s, m, re)) return std::nullopt;
  return Version::parse(m[1].str() + "." + m[2].str() + "." + m[3].str());
}

std::optional<JetPack> jetpack_of_l4t(const JetPacks& jetpacks, std::string_view nv_tegra_release) {
  auto l4t = l4t_version(nv_tegra_release);
  if (!l4t) return std::nullopt;
  const JetPack* j = jetpacks.for_l4t(*l4t);
  return j ? std::optional<JetPack>(*j) : std::nullopt;
}

std::string platform_of_l4t(const JetPacks& jetpacks, std::string_view nv_tegra_release) {
  auto l4t = l4t_version(nv_tegra_release);
  if (!l4t) return "";
  if (const JetPack* j = jetpacks.for_l4t(*l4t)) return j->platform;
  std::string platform;
  for (const auto& j : jetpacks.list)
    if (j.l4t.major() == l4t->major()) platform = j.platform;  // ascending: the newest of that major
  return platform;
}

std::optional<JetsonBuildCuda> jetson_build_cuda(const JetPack& jetpack, bool this_machine, std::size_t toolkits_installed) {
  std::string says = fmt::format("JetPack {} (L4T {}) installs CUDA {} ({}){}", jetpack.version.str(), jetpack.l4t.str(),
                                 jetpack.cuda.str(), jetpack.url, jetpack.note.empty() ? "" : "; " + jetpack.note);
  if (!this_machine) return JetsonBuildCuda{jetpack.cuda, says};
  if (toolkits_installed > 0) return std::nullopt;
  return JetsonBuildCuda{jetpack.cuda, "no CUDA toolkit is installed on this Jetson; " + says};
}

}  // namespace archbuild::toolchain
