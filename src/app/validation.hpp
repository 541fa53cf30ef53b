// What `validate`, `smoke` and the `wheel` pipeline share to prove a wheel on this host: the
// process runner validate/ is given (run::capture), the GPUs of this host, the toolkit that
// compiles the smoke kernel, the interpreter of the import test.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "arch/compat.hpp"

#include "app/session.hpp"
#include "core/version.hpp"
#include "plan/plan.hpp"
#include "validate/validate.hpp"

namespace archbuild::app {

// run::capture behind validate's Exec (nothing started once an interrupt was asked for).
validate::Exec capture_exec();

// The GPUs detect_host finds, as validate wants them (with why there are none).
validate::Gpus host_gpus(const arch::ArchData& data);

// data_root()/data/smoke/smoke.cu and data_root()/data/validate/import_check.py; Failure (exit
// 3) naming the path when the installation lacks them.
std::filesystem::path smoke_source();
std::filesystem::path import_script();

// The toolkit (and host compiler) for the smoke kernel, discovered on this host through
// run::capture. `cuda`: --cuda (strict) or the wheel's CUDA (`cuda_is_preference`).
Result<validate::SmokeSetup> smoke_setup(const std::vector<arch::Arch>& targets, const std::optional<Version>& cuda,
                                         bool cuda_is_preference, const Session& s);

// The interpreter for the import test: `python` as given (a path, a name on PATH, or X.Y for
// pythonX.Y); unset: pythonX.Y for the wheel's cpXY tag when on PATH, else python3. Error
// (missing_tool) naming what was looked for.
Result<std::filesystem::path> find_python(const std::string& python, const std::optional<Version>& wheel_python);

// The import test of a dependent (torchvision, an extension) built against a torch wheel: that
// wheel installed from its file first and imported first (--also), and the recipe's CUDA
// operation ([validate] cuda_op) run on a GPU. Nothing for a build without installed wheels
// beyond the recipe's operation.
void import_beside_torch(const plan::Plan& plan, validate::ImportSetup& imp);

// `archbuild validate`: a wheel file, or a distribution installed in an interpreter, proven on
// this host (the options of validate/ assembled here: the session's library facts and library
// folders, the recipe's import name, the interpreter, this host's GPUs, the smoke kernel's toolkit).
struct ValidateRequest {
  std::string wheel;                  // WHEEL
  std::string installed;              // --installed DIST (instead of WHEEL)
  std::vector<std::string> sm;        // --sm
  std::string python, module, cuda;   // --python, --module, --cuda
  bool no_import = false, no_smoke = false;
};
struct Validated {
  validate::Report report;
  std::vector<arch::Arch> targets;
  std::string subject;  // the wheel's file name, or "DIST (installed)"
};
// Bad options and an unreadable wheel throw Failure (exit 2) before anything runs; a missing
// interpreter or nvcc is a skipped check (missing_tool), not an error.
Validated validate_here(const ValidateRequest& q, const Session& s);

}  // namespace archbuild::app
