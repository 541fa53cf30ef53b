#include "support/torch_lines.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <regex>
#include <stdexcept>
#include <string_view>

#include "core/version.hpp"

namespace archbuild::test {

namespace fs = std::filesystem;

namespace {

Version version_of(const std::string& s) {
  auto v = Version::parse(s);
  if (!v) throw std::runtime_error("not a version: " + s);
  return *v;
}

}  // namespace

std::vector<TorchLine> torch_lines(const fs::path& root) {
  static const std::regex name(R"(torch-(\d+\.\d+)\.toml)");
  std::vector<TorchLine> out;
  for (const auto& e : fs::directory_iterator(root / "recipes")) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (!std::regex_match(file, m, name)) continue;
    auto t = toml::parse_file(e.path().string());
    auto v = t["version"].value<std::string>();
    if (!v) throw std::runtime_error(e.path().string() + " has no version of its own");
    out.push_back({e.path().stem().string(), *v, version_of(*v).prefix(2).str()});
  }
  std::sort(out.begin(), out.end(),
            [](const TorchLine& a, const TorchLine& b) { return version_of(a.version) < version_of(b.version); });
  if (out.empty()) throw std::runtime_error("no torch recipe under " + (root / "recipes").string());
  return out;
}

TorchLine newest_torch(const fs::path& root) { return torch_lines(root).back(); }

std::string OfficialLine::requirements() const {
  std::string out = "torch==" + latest;
  if (torchvision) out += " \"torchvision==" + *torchvision + ".*\"";
  if (torchaudio) out += " \"torchaudio==" + *torchaudio + ".*\"";
  return out;
}

OfficialLine newest_official(const fs::path& root) {
  auto t = toml::parse_file((root / "data" / "torch-releases.toml").string());
  std::optional<OfficialLine> best;
  for (const auto& [key, node] : *t["torch"].as_table()) {
    const auto* row = node.as_table();
    if (!row || !row->contains("cuda")) continue;
    const std::string line(key.str());
    if (best && version_of(line) < version_of(best->line)) continue;
    OfficialLine o;
    o.line = line;
    o.latest = (*row)["latest"].value_or(line + ".*");
    if (auto v = (*row)["torchvision"].value<std::string>()) o.torchvision = *v;
    if (auto v = (*row)["torchaudio"].value<std::string>()) o.torchaudio = *v;
    best = o;
  }
  if (!best) throw std::runtime_error("no torch row with wheels in data/torch-releases.toml");
  return *best;
}

void copy_data_root(const fs::path& to, const fs::path& root) {
  for (const char* d : {"data", "toolchains", "recipes"})
    fs::copy(root / d, to / d, fs::copy_options::recursive);
}

}  // namespace archbuild::test
