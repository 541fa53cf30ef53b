// The official PyTorch wheels as data (data/torch-releases.toml, each list cited there): per release
// line its CUDA variants and their arch lists, so that "which official wheel runs on this GPU"
// is computed with the run-compatibility rule, never written in code. A line a recipe names and
// the file does not is a line without official wheels.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "arch/arch_data.hpp"
#include "arch/compat.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "recipe/recipe.hpp"

namespace archbuild::doctor {

struct WheelVariant {
  Version cuda;                          // 12.8
  std::optional<std::string> arch_list;  // TORCH_CUDA_ARCH_LIST as written; unset: not recorded
  std::vector<arch::Arch> archs;         // parsed (empty when not recorded)

  std::string cu() const;                // "cu128"
  bool recorded() const { return arch_list.has_value(); }
  std::vector<arch::CodeImage> images() const { return arch::images_of(archs); }
};

struct Release {
  Version line;                       // 2.7
  std::vector<WheelVariant> variants; // as listed in `cuda` (x86_64 wheels)
  // Other architectures' official wheels ([torch."X.Y".aarch64]), by the platform's
  // `official_wheels` name.
  std::map<std::string, std::vector<WheelVariant>> other_variants;
  // The variants of one platform's lists ("x86_64", "aarch64"); empty when none shipped or recorded.
  const std::vector<WheelVariant>& variants_for(const std::string& wheels) const;
  std::string note;
  std::optional<Version> latest;       // the newest patch: 2.7.1 (what install advice pins)
  std::optional<Version> torchvision;  // the matching release line: 0.22
  std::optional<Version> torchaudio;   // 2.7; 2.11 serves 2.11 – 2.14
  // false: a line only a torch recipe names (recipes/), with no row in torch-releases.toml: no
  // official wheel recorded (yet), so nothing to install, only to build.
  bool recorded = true;

  // "2.7.1" when the newest patch is recorded, else "2.7.*" (pip's prefix match).
  std::string pin() const;
};

// What pip installs for a release: "torch==2.14.0 \"torchvision==0.29.*\" \"torchaudio==2.11.*\""
// (the matching packages when recorded; a * is quoted for the shell).
std::string requirements(const Release& r);

struct Releases {
  std::filesystem::path file;
  std::string index_url;                      // with "{cu}" in it
  std::map<int, std::string> minor_compat;    // CUDA major -> oldest driver (as written)
  std::vector<Release> releases;              // oldest line first

  static Result<Releases> load(const std::filesystem::path& file, const arch::ArchData& data);
  // data_root()/data/torch-releases.toml, and a line without wheels (`recorded` false) for each
  // torch recipe of data_root()/recipes/ the file has no row for: a new torch line is its recipe,
  // and the newest line is the newest either knows.
  static Result<Releases> load_shipped(const arch::ArchData& data = arch::ArchData::shipped());
  // The lines of these torch recipes the releases lack, added without wheels (`recorded` false).
  void add_recipe_lines(const std::vector<recipe::Recipe>& recipes);

  const Release* find(const Version& line) const;           // by X.Y
  std::string index_for(const WheelVariant& v) const;       // the pip index of a variant
  std::optional<Version> minor_compat_driver(int cuda_major) const;
};

}  // namespace archbuild::doctor
