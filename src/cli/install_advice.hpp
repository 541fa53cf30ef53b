// What `install-command` and `doctor` share: the GPUs and driver to advise for (--sm, --gpu,
// --driver, else detection), the build resolver doctor offers, and the install advice printed
// for humans or as JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "arch/arch_data.hpp"
#include "cli/context.hpp"
#include "doctor/doctor.hpp"
#include "doctor/install.hpp"
#include "toolchain/jetpack.hpp"
#include "toolchain/platform.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::cli {

struct TargetArgs {
  std::vector<std::string> sm;   // --sm 61,120
  std::vector<std::string> gpu;  // --gpu "RTX 5090" (repeatable)
  std::string driver;            // --driver 570.86
  std::string platform;          // --platform sbsa (toolchains/platforms.toml); "": decided
  std::string jetpack;           // --jetpack 6.2 (toolchains/jetpack.toml): a Jetson's CUDA and platform
};

// Adds --sm, --gpu, --driver and --platform to a command.
void add_target_options(CLI::App& cmd, TargetArgs& args);

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
};

// Targets from --sm and --gpu (bad values: Failure, exit 2), else this host's GPUs; the driver
// from --driver, else detection. Detection runs only when something is still unknown.
HostTargets gather_targets(const TargetArgs& args, const arch::ArchData& data);

// Toolchain discovery's questions (nvcc --version, g++ --version …), asked through run/.
toolchain::Probe tool_probe();

// Resolution as `archbuild wheel` would do it, with the host discovered on the first question.
// `platform`: named in the command (--platform NAME) when it is not this machine's own;
// `jetpack`: that Jetson's JetPack, whose CUDA picks the recipe the command names;
// `cuda_unknown`: why no build can be named (a Jetson elsewhere whose CUDA archbuild cannot know).
doctor::BuildAdvisor make_build_advisor(const std::vector<toolchain::Toolchain>& toolchains,
                                        std::optional<Version> python, const std::string& platform = "",
                                        const std::optional<toolchain::JetPack>& jetpack = std::nullopt,
                                        const std::string& cuda_unknown = "");

nlohmann::json install_advice_json(const doctor::InstallAdvice& a, const HostTargets& h);
void print_install_advice(const doctor::InstallAdvice& a, const HostTargets& h, const Context& ctx);
// Exit: 0 an official wheel fits, 1 only a build helps, 3 no target.
Exit install_advice_exit(const doctor::InstallAdvice& a, const HostTargets& h);

}  // namespace archbuild::cli
