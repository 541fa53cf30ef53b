// Advice for a GPU and its driver: which official torch wheel runs there (install-command), why
// an installed torch fails there and the shortest fix (doctor), and — when only a build helps —
// the `archbuild wheel` command, resolved as `wheel` would resolve it. The targets and driver come
// from the options (--sm, --gpu, --driver, --platform, --jetpack), else detection.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/facts.hpp"
#include "arch/arch_data.hpp"
#include "core/error.hpp"
#include "doctor/doctor.hpp"
#include "doctor/install.hpp"
#include "mirror/views.hpp"
#include "toolchain/jetpack.hpp"
#include "toolchain/platform.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::app {

struct TargetArgs {
  std::vector<std::string> sm;   // --sm 61,120
  std::vector<std::string> gpu;  // --gpu "RTX 5090" (repeatable)
  std::string driver;            // --driver 570.86
  std::string platform;          // --platform sbsa (toolchains/platforms.toml); "": decided
  std::string jetpack;           // --jetpack 6.2 (toolchains/jetpack.toml): a Jetson's CUDA and platform
};

struct HostTargets {
  std::vector<doctor::Target> targets;
  std::string no_targets_reason;      // why `targets` is empty
  std::optional<std::string> driver;  // --driver, else the detected one
  std::string driver_source;          // "--driver", "nvml" …
  std::string driver_missing;         // why there is none
  // The platform advised for: --platform, else the one the GPUs decide, else this machine's.
  std::optional<toolchain::Platform> platform;
  std::string platform_why;
  bool platform_is_this_machine = true;
  // --jetpack: the Jetson's JetPack release (its CUDA names the recipe a build there uses); for a
  // Jetson that is not this machine without --jetpack, the newest release for its GPUs.
  std::optional<toolchain::JetPack> jetpack;
  std::string jetpack_why;      // "--jetpack", or why this release is assumed
  std::string jetpack_missing;  // a Jetson elsewhere whose GPUs no JetPack of the data supports
  // When the newest JetPack chose the platform of GPUs several platforms have (Orin): the other
  // path, a note ("an Orin kept on JetPack 6.2 …: --jetpack 6.2"); empty otherwise.
  std::string jetpack_other;
};

// Targets from --sm and --gpu (bad values: Failure, exit 2), else this host's GPUs; the driver
// from --driver, else detection. Detection runs only when something is still unknown.
HostTargets gather_targets(const TargetArgs& args, const Facts& facts);

// Resolution as `archbuild wheel` would do it, with the host discovered on the first question.
// `platform`: named in the command (--platform NAME) when it is not this machine's own;
// `jetpack`: that Jetson's JetPack, whose CUDA picks the recipe the command names;
// `cuda_unknown`: why no build can be named (a Jetson elsewhere whose CUDA archbuild cannot know).
doctor::BuildAdvisor make_build_advisor(const Facts& facts, std::optional<Version> python, const std::string& platform = "",
                                        const std::optional<toolchain::JetPack>& jetpack = std::nullopt,
                                        const std::string& cuda_unknown = "");

// install-command (and doctor without torch): the official wheels that fit, else the build.
struct InstallAnswer {
  HostTargets host;
  doctor::InstallAdvice advice;
  // Asked only where a mirror was given and there are targets: the mirror's view for them.
  std::optional<mirror::ViewAdvice> mirror;
  // 0 an official wheel fits, 1 only a build helps, 3 no target.
  Exit exit() const;
};
// `pip`: how the commands call pip ("pip", "PY -m pip"); the releases and toolchains: `facts`'.
// `mirror_url`: an archbuild mirror (docs/mirror.md; empty: none) whose GPU view for the targets
// is named; one that cannot be read is its error (a Failure).
InstallAnswer advise_install(const TargetArgs& args, const std::string& pip, const Facts& facts,
                             const std::string& mirror_url = "");
InstallAnswer advise_install(const HostTargets& host, const std::string& pip, const Facts& facts,
                             const std::string& mirror_url = "");

// doctor: the torch of `python` against the targets; without a torch, install advice instead.
struct Diagnosis {
  std::string python;  // as asked ("python3" by default)
  HostTargets host;
  doctor::Facts facts;
  std::optional<doctor::Report> report;  // the torch was found
  std::optional<InstallAnswer> install;  // no torch: what to install
  // Asked only where a mirror was given and the torch cannot run on some target (a
  // no-kernel-image or cpu-only finding): the mirror's view for the targets. Where it has one,
  // each such finding's first fix is to install from it (kind "mirror"); where not, a note says why.
  std::optional<mirror::ViewAdvice> mirror;
};
// Bad --sm / --gpu / --driver is bad input (exit 2) before anything runs; no interpreter: exit 3.
// `mirror_url`: an archbuild mirror (docs/mirror.md; empty: none); one that cannot be read is
// its error (a Failure).
Diagnosis diagnose(const std::string& python, const TargetArgs& args, const Facts& facts,
                   const std::string& mirror_url = "");

}  // namespace archbuild::app
