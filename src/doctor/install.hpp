// Install advice without a build: which official wheels run on every GPU of a host
// (SASS or PTX, by the CUDA C++ Programming Guide's binary and PTX compatibility rules) and whose CUDA runtime its driver can start (minor-version
// compatibility, §5), newest first, with the exact pip and uv commands — or, when none fits,
// why, and the `archbuild wheel` command that builds one. A pure function over the release
// data; the build suggestion is injected like doctor's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "arch/compat.hpp"
#include "core/version.hpp"
#include "doctor/doctor.hpp"
#include "doctor/releases.hpp"
#include "toolchain/platform.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::doctor {

struct InstallQuery {
  std::vector<Target> targets;          // one per GPU (or per --sm / --gpu value)
  std::optional<std::string> driver;    // "580.65.06"; unset: not known
  std::string driver_source;            // "--driver", "nvml", "nvidia-smi"
  Releases releases;
  std::vector<toolchain::Toolchain> toolchains;
  std::string pip = "pip";              // "python3 -m pip" when an interpreter was named
  // The platform asked about (toolchains/platforms.toml): picks the official lists
  // (x86_64, aarch64) or none (a Jetson with JetPack's CUDA); unset: x86_64.
  std::optional<toolchain::Platform> platform;
  std::string platform_why;             // what chose it ("--platform", "GPU …", "this machine")
  bool platform_is_this_machine = true; // false: the pip line is to be run on another host
};

// One official wheel (release line + CUDA variant) that runs on every target.
struct InstallOption {
  Version line;                           // 2.14
  std::string version;                    // what is pinned: "2.14.0" or "2.14.*"
  Version cuda;                           // 12.6
  std::string cu;                         // "cu126"
  std::string index_url;
  std::string arch_list;                  // the variant's TORCH_CUDA_ARCH_LIST
  std::vector<arch::RunVerdict> verdicts; // per distinct target CC (InstallAdvice::ccs)
  bool sass = false;                      // SASS for every target (no PTX JIT)
  std::string driver_start;               // oldest driver whose runtime starts it ("525.60.13")
  std::string driver_full;                // CUDA's own minimum ("560.28.03"); empty: not in toolchains/
  std::string torchvision, torchaudio;    // pins ("0.29.*"); empty: none matches
  std::string pip, uv;                    // the commands
};

struct InstallAdvice {
  std::vector<arch::Cc> ccs;              // distinct target CCs, in target order
  std::vector<InstallOption> options;     // best first: SASS before PTX-only, newest line, newest CUDA
  std::vector<std::string> ruled_out;     // one line per release newer than the best (or every one)
  std::vector<std::string> notes;
  // The build: when no official wheel fits, or the newest release has none for these GPUs.
  std::optional<BuildSuggestion> build;
  std::string build_why;                  // what the build gives that no wheel does
  bool fits() const { return !options.empty(); }
};

InstallAdvice advise_install(const InstallQuery& q, const BuildAdvisor& advisor);

}  // namespace archbuild::doctor
