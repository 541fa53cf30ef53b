// The import test: a fresh venv (`python -m venv`), the wheel's requirements (Requires-Dist,
// through pip with the caller's configuration: PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX,
// pip.conf reach it unchanged), then `pip install --no-index --no-deps WHEEL`, then data/validate/import_check.py imports the package from the venv and, when a GPU of a
// target CC is present, checks get_arch_list(), the device capability and one real CUDA
// operation through the package. Without such a GPU that part is "skip" with the reason — never
// "pass". Processes go through the injected Exec; the plan and the interpretation are functions
// of their own so tests check them without starting anything.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "core/version.hpp"
#include "validate/report.hpp"
#include "validate/wheel_check.hpp"

namespace archbuild::validate {

struct ImportSetup {
  std::filesystem::path python;  // the interpreter that makes the venv
  std::string module;            // what to import (the recipe's `module`)
  // Requirements installed before the wheel (its Requires-Dist without extras); validate_wheel
  // fills them in from METADATA when empty.
  std::vector<std::string> requirements;
  // Wheel files installed before the requirements (a dependent's custom torch): the wheel's
  // `torch==<exact>` is then satisfied by that file, never by an index.
  std::vector<std::filesystem::path> local_wheels;
  // More arguments for import_check.py (--also torch: import the torch a dependent was built
  // against first, and use its cuda module; --op-what/--op: the recipe's CUDA operation).
  std::vector<std::string> script_args;
  // The CUDA the wheel was built with ("13.0", from its +cuXYZ label): torch.version.cuda must
  // equal it.
  std::optional<std::string> cuda;
  std::filesystem::path script;  // data_root()/data/validate/import_check.py
  Gpus gpus;
  // The venv is made here (and kept); unset: a temporary folder removed afterwards.
  std::optional<std::filesystem::path> work_dir;
  std::chrono::milliseconds venv_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds install_timeout{std::chrono::minutes(10)};  // torch wheels are GBs
  std::chrono::milliseconds import_timeout{std::chrono::minutes(5)};
};

// ---- the interpreter --------------------------------------------------------------------

struct PythonInfo {
  Version version;
  std::string executable;
  std::optional<Version> pip;  // the interpreter's own pip, when it has one
  // pip >= 22.3 installs into another environment (--python): the venv is then made without
  // its own pip (no ensurepip copy, ~3 s saved per venv).
  bool pip_installs_elsewhere() const;
};
// python -c '<prints {"version", "executable", "venv", "ensurepip", "pip"} as JSON>'
std::vector<std::string> python_probe_argv(const std::filesystem::path& python);
// Error (missing_tool) naming the missing module and what provides it (python3-venv).
Result<PythonInfo> interpret_python_probe(const Outcome& o, const std::filesystem::path& python);

// Whether the wheel's python tags accept this interpreter (cp311, py3, py311); the message says
// which interpreter would when not.
std::optional<std::string> python_tag_mismatch(const WheelName& name, const Version& python);
// The X.Y the wheel's python tags name ("cp311" -> 3.11), when they name exactly one.
std::optional<Version> wheel_python(const WheelName& name);

// ---- the steps --------------------------------------------------------------------------

std::filesystem::path venv_python(const std::filesystem::path& venv);  // VENV/bin/python
// PYTHON -m venv [--without-pip] VENV
std::vector<std::string> venv_argv(const std::filesystem::path& python, const std::filesystem::path& venv,
                                   bool with_pip = true);
// pip for VENV: the venv's own (VENV/bin/python -m pip), or, given `outer`, that interpreter's
// pip told to install there (OUTER -m pip --python VENV/bin/python).
std::vector<std::string> pip_argv(const std::filesystem::path& venv,
                                  const std::optional<std::filesystem::path>& outer = std::nullopt);
std::vector<std::string> pip_install_argv(const std::filesystem::path& venv, const std::filesystem::path& wheel,
                                          const std::optional<std::filesystem::path>& outer = std::nullopt);
// pip install --no-cache-dir --disable-pip-version-check --no-input REQ…
std::vector<std::string> pip_requirements_argv(const std::filesystem::path& venv,
                                               const std::vector<std::string>& requirements,
                                               const std::optional<std::filesystem::path>& outer = std::nullopt);
// Whether pip failed because the requirements cannot be had here (no index reachable, nothing
// in the wheelhouse): the import test is then incomplete, not failed.
bool requirements_unavailable(const Outcome& o);
// VENV/bin/python -I SCRIPT MODULE [--gpu]
std::vector<std::string> import_argv(const std::filesystem::path& venv, const std::filesystem::path& script,
                                     const std::string& module, bool gpu);

// What import_check.py printed: the last line that is a JSON object; nullopt when none.
std::optional<nlohmann::json> parse_import_output(const std::string& out);

// "import": the module imported, from inside the venv.
Check interpret_import(const Outcome& o, const std::string& module, const std::filesystem::path& venv);
// "import": the module imported, from inside `root` (the venv, or the site-packages of an
// installed distribution).
Check interpret_import_in(const Outcome& o, const std::string& module, const std::filesystem::path& root,
                          const std::string& where);
// "features": the recipe's feature checks for the module (torch: torch.version.cuda against
// `cuda`, cuDNN, NCCL, LAPACK, NumPy interop; with a GPU the release smoke test's matmul,
// conv2d with autocast, an asserted CUDA error), one detail line each; nullopt when the script
// knows none for the module.
std::optional<Check> interpret_features(const nlohmann::json& result, const std::optional<std::string>& cuda);
// "import-gpu": capability, get_arch_list() and the CUDA operation on `gpu`.
Check interpret_import_gpu(const nlohmann::json& result, const std::vector<arch::Arch>& targets, const Gpu& gpu);

// Every step; checks "import" and "import-gpu".
Report import_test(const std::filesystem::path& wheel, const std::optional<WheelName>& name,
                   const std::vector<arch::Arch>& targets, const ImportSetup& setup, const Exec& exec);

}  // namespace archbuild::validate
