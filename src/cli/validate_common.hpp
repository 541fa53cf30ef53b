// What `validate`, `smoke` (and the `wheel` pipeline) share to prove a wheel: the process
// runner validate/ is given (run::capture), the GPUs of this host, the toolkit that compiles
// the smoke kernel, the python of the import test, and printing a validate::Report.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli/context.hpp"
#include "core/version.hpp"
#include "plan/plan.hpp"
#include "validate/validate.hpp"

namespace archbuild::cli {

// --sm LIST as targets (native: this host's GPUs); Failure with exit 2 naming --sm, or 3.
std::vector<arch::Arch> sm_option(const std::vector<std::string>& sm);
// --cuda MAJOR.MINOR (nullopt when empty); Failure with exit 2 otherwise.
std::optional<Version> cuda_option(const std::string& cuda);

// run::capture behind validate's Exec.
validate::Exec capture_exec();

// The GPUs detect_host finds, as validate wants them (with why there are none).
validate::Gpus host_gpus();

// data_root()/data/smoke/smoke.cu and data_root()/data/validate/import_check.py; Failure (exit
// 3) naming the path when the installation lacks them.
std::filesystem::path smoke_source();
std::filesystem::path import_script();

// The toolkit (and host compiler) for the smoke kernel, discovered on this host through
// run::capture. `cuda`: --cuda (strict) or the wheel's CUDA (`cuda_is_preference`).
Result<validate::SmokeSetup> smoke_setup(const std::vector<arch::Arch>& targets, const std::optional<Version>& cuda,
                                         bool cuda_is_preference, const Context& ctx);

// The interpreter for the import test: `python` as given (a path, a name on PATH, or X.Y for
// pythonX.Y); unset: pythonX.Y for the wheel's cpXY tag when on PATH, else python3. Error
// (missing_tool) naming what was looked for.
Result<std::filesystem::path> find_python(const std::string& python, const std::optional<Version>& wheel_python);

// The import test of a dependent (torchvision, an extension) built against a torch wheel: that
// wheel installed from its file first and imported first (--also), and the recipe's CUDA
// operation ([validate] cuda_op) run on a GPU. Nothing for a build without installed wheels
// beyond the recipe's operation.
void import_beside_torch(const plan::Plan& plan, validate::ImportSetup& imp);

// Human output: one line per check (details of failures and warnings, all details with -v),
// then the verdict line. Nothing is printed with --json (print_json(report.to_json()) instead).
void print_report(const validate::Report& r, const Context& ctx);

}  // namespace archbuild::cli
