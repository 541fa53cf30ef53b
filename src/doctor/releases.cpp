#include "doctor/releases.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "arch/parse.hpp"
#include "core/data_dir.hpp"
#include "core/toml_load.hpp"

namespace archbuild::doctor {

namespace fs = std::filesystem;

std::string Release::pin() const { return latest ? latest->str() : line.str() + ".*"; }

std::string requirements(const Release& r) {
  auto req = [](const std::string& name, const std::string& version) {
    std::string s = name + "==" + version;
    return version.find('*') == std::string::npos ? s : "\"" + s + "\"";
  };
  std::string out = req("torch", r.pin());
  if (r.torchvision) out += " " + req("torchvision", r.torchvision->str() + ".*");
  if (r.torchaudio) out += " " + req("torchaudio", r.torchaudio->str() + ".*");
  return out;
}

const std::vector<WheelVariant>& Release::variants_for(const std::string& wheels) const {
  static const std::vector<WheelVariant> none;
  if (wheels == "x86_64") return variants;
  auto it = other_variants.find(wheels);
  return it == other_variants.end() ? none : it->second;
}

std::string WheelVariant::cu() const { return fmt::format("cu{}{}", cuda.major(), cuda.minor()); }

namespace {

Error at(const toml::node& n, const std::string& file, const std::string& msg) {
  return Error::bad_input(fmt::format("{}: {}", tomlx::where(n, file), msg));
}

// "X.Y" with exactly two numeric parts.
std::optional<Version> two_part(std::string_view s) {
  auto v = Version::parse(s);
  if (!v || v->size() != 2) return std::nullopt;
  return v;
}

// `cuda` and `arch_list` of one table: the release's own (x86_64) or its [torch."X.Y".<arch>].
Result<std::vector<WheelVariant>> read_variants(tomlx::TableReader& rd, const std::string& key, const std::string& file,
                                                const arch::ArchData& data) {
  std::vector<WheelVariant> out;
  auto cudas = rd.strings("cuda", true);
  const toml::table* lists = rd.table("arch_list");
  if (rd.failure()) return *rd.failure();
  for (const auto& c : *cudas) {
    auto v = two_part(c);
    if (!v) return rd.error_at("cuda", fmt::format("torch.{}.cuda: \"{}\" is not a CUDA version like \"12.8\"", key, c));
    if (std::any_of(out.begin(), out.end(), [&](const WheelVariant& w) { return w.cuda == *v; }))
      return rd.error_at("cuda", fmt::format("torch.{}.cuda lists {} twice", key, c));
    out.push_back({*v, std::nullopt, {}});
  }
  if (lists) {
    for (const auto& [k, n] : *lists) {
      std::string cuda(k.str());
      auto v = two_part(cuda);
      auto it = std::find_if(out.begin(), out.end(), [&](const WheelVariant& w) { return v && w.cuda == *v; });
      if (it == out.end())
        return at(n, file, fmt::format("torch.{}.arch_list.\"{}\": not one of its cuda variants ({})", key, cuda,
                                       fmt::join(*cudas, ", ")));
      auto s = n.value<std::string>();
      if (!n.is_string() || !s)
        return at(n, file, fmt::format("torch.{}.arch_list.\"{}\" must be a TORCH_CUDA_ARCH_LIST string", key, cuda));
      auto parsed = arch::parse_arch_list(*s, data, {arch::Grammar::build, {}});
      if (!parsed) return at(n, file, fmt::format("torch.{}.arch_list.\"{}\": {}", key, cuda, parsed.error().message));
      it->arch_list = *s;
      it->archs = std::move(*parsed);
    }
  }
  return out;
}

Result<Release> read_release(const std::string& key, const toml::node& node, const std::string& file,
                             const arch::ArchData& data) {
  auto line = two_part(key);
  if (!line) return at(node, file, fmt::format("torch.\"{}\": the key must be a release line like \"2.7\"", key));
  const toml::table* t = node.as_table();
  if (!t) return at(node, file, fmt::format("torch.\"{}\" must be a table", key));
  tomlx::TableReader rd(*t, file, fmt::format("[torch.\"{}\"]", key));
  Release r;
  r.line = *line;
  if (auto n = rd.string("note")) r.note = *n;
  if (auto l = rd.string("latest")) {
    r.latest = Version::parse(*l);
    if (!r.latest || r.latest->size() != 3 || !r.latest->starts_with(*line))
      return rd.error_at("latest", fmt::format("torch.\"{}\".latest: \"{}\" is not a patch release of {} like \"{}.0\"",
                                               key, *l, key, key));
  }
  for (auto [name, slot] : {std::pair{"torchvision", &r.torchvision}, std::pair{"torchaudio", &r.torchaudio}})
    if (auto s = rd.string(name)) {
      *slot = two_part(*s);
      if (!*slot)
        return rd.error_at(name, fmt::format("torch.\"{}\".{}: \"{}\" is not a release line like \"0.22\"", key, name, *s));
    }
  auto own = read_variants(rd, fmt::format("\"{}\"", key), file, data);
  if (!own) return own.error();
  r.variants = std::move(*own);
  // Other architectures' official wheels: [torch."X.Y".aarch64] with its own cuda / arch_list.
  if (const toml::table* other = rd.table("aarch64")) {
    tomlx::TableReader sub(*other, file, fmt::format("[torch.\"{}\".aarch64]", key));
    auto vs = read_variants(sub, fmt::format("\"{}\".aarch64", key), file, data);
    if (!vs) return vs.error();
    if (auto e = sub.finish()) return *e;
    r.other_variants["aarch64"] = std::move(*vs);
  }
  if (rd.failure()) return *rd.failure();
  if (auto e = rd.finish()) return *e;
  return r;
}

}  // namespace

Result<Releases> Releases::load(const fs::path& path, const arch::ArchData& data) {
  auto parsed = tomlx::parse_file(path);
  if (!parsed) return parsed.error();
  const std::string file = path.string();
  tomlx::TableReader rd(*parsed, file, "torch-releases");
  Releases out;
  out.file = path;
  if (auto s = rd.string("index_url", true)) {
    if (s->find("{cu}") == std::string::npos)
      return rd.error_at("index_url", fmt::format("index_url \"{}\" must contain {{cu}} (becomes cu128 …)", *s));
    out.index_url = *s;
  }
  const toml::table* compat = rd.table("minor_version_compat", true);
  const toml::table* torch = rd.table("torch", true);
  if (rd.failure()) return *rd.failure();
  for (const auto& [k, n] : *compat) {
    std::string key(k.str());
    auto major = Version::parse(key);
    auto s = n.value<std::string>();
    if (!major || major->size() != 1)
      return at(n, file, fmt::format("minor_version_compat: key \"{}\" must be a CUDA major like \"12\"", key));
    if (!n.is_string() || !s || !Version::parse(*s))
      return at(n, file, fmt::format("minor_version_compat.\"{}\" must be a driver version like \"525.60.13\"", key));
    out.minor_compat[major->major()] = *s;
  }
  for (const auto& [k, n] : *torch) {
    auto r = read_release(std::string(k.str()), n, file, data);
    if (!r) return r.error();
    if (out.find(r->line)) return at(n, file, fmt::format("torch.\"{}\" is listed twice", k.str()));
    out.releases.push_back(std::move(*r));
  }
  if (auto e = rd.finish()) return *e;
  std::sort(out.releases.begin(), out.releases.end(),
            [](const Release& a, const Release& b) { return a.line < b.line; });
  return out;
}

Result<Releases> Releases::load_shipped(const arch::ArchData& data) {
  auto out = load(data_root() / "data" / "torch-releases.toml", data);
  if (!out) return out;
  auto recipes = recipe::load_shipped();
  if (!recipes) return recipes.error();
  out->add_recipe_lines(*recipes);
  return out;
}

void Releases::add_recipe_lines(const std::vector<recipe::Recipe>& recipes) {
  for (const auto& r : recipes) {
    if (r.package != "torch" || r.abstract || find(r.version)) continue;
    Release line;
    line.line = r.version.prefix(2);
    line.recorded = false;
    releases.push_back(std::move(line));
  }
  std::sort(releases.begin(), releases.end(), [](const Release& a, const Release& b) { return a.line < b.line; });
}

const Release* Releases::find(const Version& line) const {
  Version l = line.prefix(2);
  for (const auto& r : releases)
    if (r.line == l) return &r;
  return nullptr;
}

std::string Releases::index_for(const WheelVariant& v) const {
  std::string s = index_url;
  auto pos = s.find("{cu}");
  if (pos != std::string::npos) s.replace(pos, 4, v.cu());
  return s;
}

std::optional<Version> Releases::minor_compat_driver(int cuda_major) const {
  auto it = minor_compat.find(cuda_major);
  if (it == minor_compat.end()) return std::nullopt;
  return Version::parse(it->second);
}

}  // namespace archbuild::doctor
