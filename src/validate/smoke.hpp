// The bundled smoke kernel (data/smoke/smoke.cu): compiled with the resolved toolkit's nvcc for
// exactly the targets, SASS only (no PTX: a wrong arch fails loudly instead of JIT-ing),
// inspected to confirm the SASS, and run when a GPU of a target CC is present. Its output (one
// JSON object per line) is checked here: each kernel's result and the __CUDA_ARCH__ it reports.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "binary/inspect.hpp"
#include "core/version.hpp"
#include "toolchain/toolchain.hpp"
#include "validate/report.hpp"

namespace archbuild::validate {

// The driver a toolkit's runtime needs (the smoke binary links it): its own minimum and the
// oldest driver its CUDA major starts on at all (minor-version compatibility; SASS-only code
// needs no newer JIT).
struct DriverNeed {
  Version min;            // toolchains/cuda-X.Y.toml min_driver
  std::string min_text;   // as written: "580.65.06"
  std::optional<Version> floor;
  std::string floor_text;
  std::string source;     // "toolchains/cuda-13.0.toml"
};

// Why `driver` cannot start the runtime of the toolkit `release` ("" when it can, or is unknown).
std::string driver_too_old(const std::string& driver, const DriverNeed& need, const std::string& release);

struct SmokeSetup {
  std::filesystem::path nvcc;
  std::optional<std::filesystem::path> host_compiler;  // nvcc -ccbin
  std::string toolkit;                 // for messages: "CUDA 13.0 at /usr/local/cuda"
  std::filesystem::path source;        // data_root()/data/smoke/smoke.cu
  // The binary is written (and kept) here; unset: a temporary folder removed afterwards.
  std::optional<std::filesystem::path> work_dir;
  Gpus gpus;                           // as detected by the caller
  std::optional<DriverNeed> driver;    // the toolkit's driver facts, when known
  std::string release;                 // the toolkit's CUDA release: "13.0"
  bool require_gpu = false;            // a skipped run is then "missing device" (exit 3)
  bool run = true;                     // false: compile + inspect only
  // Nothing is compiled unless a GPU here can run it: a wheel pulled from the build store was
  // smoke-compiled where it was built (its report says so); here only the run would add proof.
  bool only_where_a_gpu_runs_it = false;
  std::chrono::milliseconds compile_timeout{std::chrono::minutes(10)};
  std::chrono::milliseconds run_timeout{std::chrono::minutes(2)};
};

// SASS only, one -gencode per target: "-gencode=arch=compute_90a,code=sm_90a".
std::vector<std::string> smoke_gencode(const std::vector<arch::Arch>& targets);
// nvcc [-ccbin HOST] -O2 -std=c++17 -gencode=… -o OUTPUT SOURCE
std::vector<std::string> smoke_compile_argv(const SmokeSetup& setup, const std::vector<arch::Arch>& targets,
                                            const std::filesystem::path& output);

// What nvcc's run means (smoke-compile).
Check interpret_compile(const Outcome& o, const SmokeSetup& setup, const std::vector<arch::Arch>& targets);
// The binary carries SASS for exactly the targets and no PTX (smoke-sass).
Check check_smoke_sass(const binary::FileReport& file, const std::vector<arch::Arch>& targets);

// One line of the smoke program's output.
struct KernelResult {
  std::string kernel;
  bool ok = false;
  std::optional<int> cuda_arch;
  std::optional<double> ms, max_error, tolerance;
  std::string error;  // a CUDA error, when the kernel did not run
};
struct SmokeOutput {
  std::optional<std::string> device;  // null: the program found no device
  std::optional<std::string> cc;      // "9.0"
  std::string device_error;
  std::string device_code;            // cudaGetErrorName: "cudaErrorInsufficientDriver"
  std::vector<KernelResult> kernels;
  std::vector<std::string> unparsed;  // lines that are not the expected JSON
};
SmokeOutput parse_smoke_output(const std::string& out);

// The kernels smoke.cu runs; each must report ok and the expected __CUDA_ARCH__.
const std::vector<std::string>& smoke_kernels();

// __CUDA_ARCH__ the driver's choice among the SASS for `targets` reports on a GPU of `gpu`
// (sm_90 -> 900, sm_120 -> 1200); nullopt when none runs there.
std::optional<int> expected_cuda_arch(const std::vector<arch::Arch>& targets, arch::Cc gpu);

// The run's outcome on `gpu` (smoke-run).
Check interpret_run(const Outcome& o, const std::vector<arch::Arch>& targets, const Gpu& gpu);

// Compile, inspect, run (when a GPU of a target CC is present): checks smoke-compile,
// smoke-sass, smoke-run. A run that cannot happen is "skip" with "run skipped: …" (and
// missing_tool with require_gpu).
Report smoke(const std::vector<arch::Arch>& targets, const SmokeSetup& setup, const Exec& exec);

// ---- which toolkit compiles it ------------------------------------------------------------

struct ToolkitChoice {
  toolchain::Toolkit toolkit;
  std::optional<toolchain::Compiler> compiler;  // a host compiler the release accepts
  std::vector<std::string> notes;
};

// `cuda` given (--cuda, or the wheel's CUDA): the installed toolkit of that release (missing_tool
// when there is none, unless `cuda_is_preference`: then the first one that compiles every target).
// Otherwise the first discovered toolkit that compiles every target (by the release's facts
// and nvcc's own list). Refusals: bad_input when no known CUDA release compiles a target,
// missing_tool when none installed does.
Result<ToolkitChoice> choose_toolkit(const std::vector<toolchain::Toolkit>& found,
                                     const std::vector<toolchain::Toolchain>& facts,
                                     const std::vector<toolchain::Compiler>& compilers,
                                     const std::optional<Version>& cuda, bool cuda_is_preference,
                                     const std::vector<arch::Arch>& targets);

}  // namespace archbuild::validate
