// `archbuild doctor`: why an installed torch fails (or would fail) on a GPU, and the shortest way
// out. The diagnosis is a pure function over facts the command gathers (the torch an interpreter
// imports and the device code of its lib/ folder, the target CCs, the driver, the toolkit in
// CUDA_HOME); whatever needs a process — the Python probe, resolution's host discovery — is
// done by the caller or injected.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "arch/compat.hpp"
#include "binary/inspect.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "doctor/releases.hpp"
#include "toolchain/toolchain.hpp"
#include "validate/coverage.hpp"

namespace archbuild::doctor {

// ---- the torch under examination ------------------------------------------------------------

struct TorchFacts {
  std::string python;                        // sys.executable of the interpreter asked
  std::optional<Version> python_version;     // 3.11.2
  std::filesystem::path dir;                 // the package folder (…/site-packages/torch)
  bool version_read = false;                 // torch.version (or version.py) could be read
  std::string version;                       // torch.__version__: "2.5.1+cu124"
  std::optional<std::string> cuda;           // torch.version.cuda; unset = None (no CUDA build)
  std::optional<std::string> hip;            // torch.version.hip (a ROCm build)
  std::optional<std::string> import_error;   // `import torch` failed: why
  std::optional<bool> cuda_available;        // torch.cuda.is_available()
  // The archs torch was compiled for ("sm_90", "compute_120") and where that came from, or why
  // there is no list (torch.cuda.get_arch_list() is empty when CUDA cannot initialise).
  std::optional<std::vector<std::string>> arch_list;
  std::string arch_list_source;
  std::string arch_list_missing;
  // lib/ read directly (works without a GPU and without importing torch).
  bool lib_inspected = false;
  std::string lib_error;                     // why lib/ could not be read
  std::vector<binary::FileReport> lib_files;

  std::optional<Version> release() const;    // 2.5.1 from "2.5.1+cu124"
  bool cuda_build() const { return cuda.has_value(); }
};

// The script the command runs with the interpreter (`PY -c SCRIPT`). It reads torch/version.py
// without importing torch, then imports torch for the arch list, and prints each stage as a line
// "@@archbuild-doctor@@{json}" (a crash during the import still leaves the first). Run as
// `PY -c SCRIPT --no-import` it prints the first line only.
extern const char* const kTorchProbeScript;
// Merges the probe's lines into facts; an error (exit 3) when no line came or there is no torch.
// `status` is the interpreter's exit status (a crash while importing becomes import_error).
Result<TorchFacts> parse_torch_probe(const std::string& stdout_text, int status, const std::string& python);
// Whether the probe ran and found no torch package (the case for install advice).
bool probe_found_no_torch(const std::string& stdout_text);

// "2.5.1+cu124" / "2.7.0a0+git1234" -> 2.5.1 / 2.7.0
std::optional<Version> torch_release(std::string_view version);
// "sm_90a" / "compute_120" -> the image; nullopt for anything else.
std::optional<arch::CodeImage> image_from_name(std::string_view name);

// ---- what the diagnosis looks at ----------------------------------------------------------

struct Target {
  arch::Cc cc;
  std::string source;  // "--sm" or "GPU 0: NVIDIA GeForce RTX 5090"
};

// A build resolution would pick: the exact `archbuild wheel` command, or why there is none.
struct BuildSuggestion {
  bool ok = false;
  std::string recipe;   // "torch-2.9"
  std::string command;  // "archbuild wheel --sm 120 --recipe torch-2.9"
  std::string detail;   // what it builds ("torch 2.9.1 with CUDA 13.0"), or why it is refused
  std::string reason;   // refused: why, without the resolver's way out (advice that words its own takes this)
  std::string needs;    // the choice stands but something must be installed first
  std::optional<Version> cuda;  // the CUDA release it builds with (ok only)
  // This machine's build libraries where they matter to the advice: a provider preferred or
  // passed over (NVPL on sbsa), or an expected one missing (plan's own lines).
  std::vector<std::string> libraries;
};
// Resolution for these CCs, on a given torch release line or (unset) on any, with a given CUDA
// release or (unset) the one resolution prefers. Injected: the command resolves through plan/
// with the host discovered by processes.
using BuildAdvisor = std::function<BuildSuggestion(const std::vector<arch::Cc>& targets,
                                                   const std::optional<Version>& torch_line,
                                                   const std::optional<Version>& cuda)>;

// The build whose CUDA runtime `driver` starts: the advisor's own choice when the driver starts
// it, else the newest CUDA release the driver starts that a recipe builds these CCs with; when
// none does, not ok, naming the driver the build needs. No driver: the advisor's choice.
BuildSuggestion build_for_driver(const BuildAdvisor& advisor, const std::vector<arch::Cc>& ccs,
                                 const std::optional<Version>& line, const std::optional<Version>& driver,
                                 const Releases& releases, const std::vector<toolchain::Toolchain>& toolchains);

struct Facts {
  TorchFacts torch;
  std::vector<Target> targets;
  std::string no_targets_reason;             // why `targets` is empty (no GPU detected …)
  std::optional<std::string> driver_version; // from detection: "580.65.06"
  std::string driver_source;                 // "nvml", "nvidia-smi" …
  std::string driver_missing;                // why there is no driver version
  std::optional<toolchain::Toolkit> toolkit; // the one torch.utils.cpp_extension would use
  std::string toolkit_missing;               // why there is none (CUDA_HOME points at no nvcc …)
  std::vector<toolchain::Toolchain> toolchains;
  Releases releases;
  // Which official lists apply (the platform's `official_wheels`: "x86_64", "aarch64"; "": none,
  // a Jetson with JetPack's CUDA).
  std::string official_wheels = "x86_64";
  std::string pip;                           // how to call pip in fixes: "/usr/bin/python3 -m pip"
};

// ---- what it finds ------------------------------------------------------------------------

struct Fix {
  std::string kind;     // "official-wheel", "build", "driver", "toolkit", "mirror" (app::diagnose's)
  std::string text;     // one line: what to do and why it works
  std::string command;  // what to run, when there is one command
  std::string also;     // one more line (the other official wheels that would do)
};

struct Finding {
  std::string id;                  // no-kernel-image, ptx-only, driver-too-old, toolkit-cannot-compile, cpu-only,
                                   // coverage-unknown
  std::optional<arch::Cc> cc;      // the target it is about, when one
  std::string summary;             // one line
  std::vector<std::string> evidence;
  std::vector<Fix> fixes;          // shortest first
  std::vector<std::string> notes;  // what was considered and ruled out
};

struct TargetStatus {
  Target target;
  std::optional<arch::RunResult> result;     // unset: nothing to judge from
  std::optional<arch::CodeImage> image;      // what the driver would load
  std::string basis;                         // "lib/" or the arch list's source
  std::vector<validate::FileVerdict> files;  // per file of lib/ with device code
};

struct Report {
  std::vector<TargetStatus> targets;
  std::vector<Finding> findings;  // most fundamental first: no CUDA, driver, code, toolkit
  std::vector<std::string> notes;
};

Report diagnose(const Facts& facts, const BuildAdvisor& advisor);

// "--sm 86,120" spelling of CCs (sm numbers, comma separated).
std::string sm_option(const std::vector<arch::Cc>& ccs);

}  // namespace archbuild::doctor
