// JetPack releases (toolchains/jetpack.toml): the L4T release, the CUDA toolkit and the Jetson
// GPUs of each, and the platform a build for it targets — so advice for a Jetson that is not this
// machine can name the recipe its CUDA allows (`--jetpack 6.2` → CUDA 12.6).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arch/arch.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

namespace archbuild::toolchain {

struct JetPack {
  Version version;           // 6.2
  Version l4t;               // 36.4.3
  Version cuda;              // 12.6
  std::vector<arch::Cc> ccs; // the Jetson GPUs it supports
  std::string platform;      // "jetson" or "sbsa" (toolchains/platforms.toml)
  std::string ubuntu;        // "24.04"; empty: not stated on a page the data read
  std::string url;           // NVIDIA's release page
  std::string note;          // said with the advice, when set
  std::string no_toolchain;  // why toolchains/ has no file for its CUDA; empty: it has one

  bool supports(arch::Cc cc) const;
  std::string ccs_text() const;  // "8.7" / "7.2, 8.7"
};

struct JetPacks {
  std::filesystem::path file;
  std::vector<JetPack> list;  // ascending version

  static Result<JetPacks> load(const std::filesystem::path& file);
  // data_root()/toolchains/jetpack.toml, read once per process.
  static const JetPacks& shipped();

  // "6.2" is 6.2 itself (not a 6.2.x after it); "5.1" the newest 5.1.x when no 5.1 row exists;
  // bad input naming the known releases when none matches.
  Result<JetPack> find(std::string_view version) const;
  // The release of an L4T version: exact, else the newest of the same major.minor (36.4.4 → 6.2).
  const JetPack* for_l4t(const Version& l4t) const;
  // The newest release of `platform` that supports every one of `ccs`; nullptr when none does.
  const JetPack* newest_for(std::string_view platform, const std::vector<arch::Cc>& ccs) const;
  // The newest release of any platform that supports every one of `ccs` (Orin: 7.2, sbsa).
  const JetPack* newest_for(const std::vector<arch::Cc>& ccs) const;
};

// The JetPack release of a Jetson's L4T line (this_machine().l4t): nullopt when the line names no
// version or no release of `jetpacks` has it.
std::optional<JetPack> jetpack_of_l4t(const JetPacks& jetpacks, std::string_view nv_tegra_release);

// The CUDA a build for a Jetson must use, with why; nullopt: follow the toolkit installed here.
// Another machine's Jetson builds with its JetPack's CUDA. This machine builds with the toolkit
// installed on it (JetPack 6 lets CUDA be upgraded), and with JetPack's CUDA when none is
// installed: the advice then names the toolkit to install, not a recipe for a CUDA it lacks.
struct JetsonBuildCuda {
  Version cuda;
  std::string why;
};
std::optional<JetsonBuildCuda> jetson_build_cuda(const JetPack& jetpack, bool this_machine, std::size_t toolkits_installed);

// The L4T version in /etc/nv_tegra_release's first line: "# R36 (release), REVISION: 4.3, …" → 36.4.3.
std::optional<Version> l4t_version(std::string_view nv_tegra_release);

// The platform of a Jetson running this L4T line: its JetPack's (for_l4t), else that of the newest
// release of the same L4T major (an R38.x the data lacks is sbsa, an R36.5 jetson); "" when the
// line names no version or no release shares its major.
std::string platform_of_l4t(const JetPacks& jetpacks, std::string_view nv_tegra_release);

}  // namespace archbuild::toolchain
