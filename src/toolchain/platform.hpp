// The platforms a wheel is built for (toolchains/platforms.toml): x86_64, Arm servers (sbsa) and
// Jetson (L4T). Each names its machine, its wheel tag's architecture, its toolkit's targets/
// folder, where its CUDA libraries come from and which official wheel lists apply; the CCs it can
// have are rules over the data (no GPU is written in C++).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "arch/arch_data.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "toolchain/jetpack.hpp"

namespace archbuild::toolchain {

struct Platform {
  std::string name;             // "sbsa"
  std::string description;
  std::string machine;          // `uname -m`: "aarch64"
  std::string wheel_arch;       // "aarch64"
  std::string cuda_target;      // "sbsa-linux" (the toolkit's targets/<dir>)
  bool pip_cuda = true;         // nvidia-* pip packages; false: the host's CUDA (JetPack)
  std::string official_wheels;  // "aarch64": the lists of torch-releases.toml; "": none runs here
  bool is_default = false;      // the platform of its machine when nothing else decides
  std::optional<arch::Cc> min_cc;
  std::vector<arch::Cc> only_ccs;       // integrated GPUs: nothing else
  std::vector<arch::Cc> exclusive_ccs;  // no other platform has these
  std::optional<Version> cuda_below;    // its toolkits end before this CUDA release (Jetson: 13.0)
  std::string cuda_below_why;           // the data's reason, for the rule's message
  std::string device;                   // how detect reads its GPUs (for messages)
  std::string ci_runner;                // GitHub-hosted runner label for `matrix`; "": none

  bool has_official_wheels() const { return !official_wheels.empty(); }
};

struct Platforms {
  std::filesystem::path file;
  std::vector<Platform> list;

  static Result<Platforms> load(const std::filesystem::path& file);
  // data_root()/toolchains/platforms.toml, read once per process.
  static const Platforms& shipped();

  const Platform* find(std::string_view name) const;
  std::vector<std::string> names() const;
  // The default platform of a machine ("aarch64" -> sbsa); nullptr when none is.
  const Platform* default_for(std::string_view machine, bool tegra = false) const;
  // Why `cc` cannot be a GPU of `p` (a line naming the platforms that have it), or nullopt.
  std::optional<std::string> refuses(const Platform& p, arch::Cc cc) const;
  // The platforms that list `cc` (only_ccs, exclusive_ccs): 8.7 -> jetson, sbsa; empty: any may.
  std::vector<const Platform*> owners_of(arch::Cc cc) const;
  // The one platform a CC belongs to when only one can have it (5.3 -> jetson, 12.1 -> sbsa);
  // nullptr for a CC of several (8.7: Orin on JetPack 5/6 or 7.2) or of any.
  const Platform* owner_of(arch::Cc cc) const;
};

// This machine: `uname -m`, and whether it runs L4T (/etc/nv_tegra_release exists).
struct Machine {
  std::string arch;   // "x86_64", "aarch64"
  bool tegra = false;
  std::string l4t;    // the first line of /etc/nv_tegra_release, when present
  // The platform the JetPack of that L4T release builds for (toolchains/jetpack.toml: sbsa from
  // JetPack 7); empty: not a Jetson, or an L4T release the data does not place (then jetson).
  std::string l4t_platform;
};
// /etc/nv_tegra_release, or the file $ARCHBUILD_NV_TEGRA_RELEASE names (tests: a Jetson's line on
// any host); `jetpacks` places its L4T release.
Machine this_machine(const JetPacks& jetpacks);
// A machine from `uname -m` and the release file's first line (nullopt: no such file).
Machine machine_of(std::string arch, const std::optional<std::string>& nv_tegra_release, const JetPacks& jetpacks);
// This machine's platform when nothing else decides: a Jetson's is its JetPack's (l4t_platform),
// else the machine's host-CUDA platform; any other machine's its default.
const Platform* default_platform(const Platforms& ps, const Machine& m);

// Where a machine keeps its libraries: the Debian multiarch name ("aarch64-linux-gnu") and its
// platform's toolkit targets/ folder ("sbsa-linux"). Empty: not known (those folders are not
// looked in).
struct HostLibraryDirs {
  std::string multiarch;
  std::string cuda_target;
};
// This machine's (this_machine, its default platform; "x86_64-linux" when it is no platform).
HostLibraryDirs host_library_dirs(const Platforms& ps, const JetPacks& jetpacks);
// A platform's: "<machine>-linux-gnu" and its cuda_target.
HostLibraryDirs library_dirs_of(const Platform& p);

// The platform a command works for: `asked` (--platform) when given (bad input when unknown),
// else the one the GPUs decide (a GPU's `platform` in data/gpus.toml, else a CC only one platform
// has; GPUs of two platforms: bad input), else this machine's default. `why` says which decided.
struct PlatformChoice {
  const Platform* platform = nullptr;
  std::string why;  // "--platform", "GPU Jetson AGX Orin (data/gpus.toml)", "this machine (aarch64)"
};
struct PlatformGpu {
  arch::Cc cc;
  std::string platform;  // the GPU's own (data/gpus.toml), "" when only its CC is known
  std::string label;     // "--gpu Jetson AGX Orin", "--sm"
};
Result<PlatformChoice> choose_platform(const Platforms& ps, const std::optional<std::string>& asked,
                                       const std::vector<PlatformGpu>& gpus, const Machine& machine);

}  // namespace archbuild::toolchain
