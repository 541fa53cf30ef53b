// Asking an interpreter about its torch: one runner for the questions (the interpreter found on
// PATH or at its path, run from "/" so a `torch` folder in the current directory does not shadow
// the installed one), three answers — doctor's facts (an import), env's version (no import), and
// inspect's lib/ folder (found without importing) — and the toolkit cpp_extension would build with.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "doctor/doctor.hpp"
#include "extenv/extenv.hpp"

namespace archbuild::app {

// doctor: the facts of the torch `python` imports (its lib/ not read yet). nullopt: the
// interpreter runs but has no torch (then install advice is what helps). No interpreter, or a
// probe that fails: Failure (exit 3).
std::optional<doctor::TorchFacts> probe_torch(const std::string& python);

// doctor: lib/ of the torch read (its files with device code), or why not, into `t`.
void inspect_torch_lib(doctor::TorchFacts& t);

// env: the torch the interpreter would import, from its version file (no import).
std::optional<extenv::TorchSeen> torch_version_seen(const std::string& python);

// inspect --python: the lib/ folder of the torch `python` would import, found without importing
// it (an import may need a GPU driver and takes seconds).
std::filesystem::path torch_lib_dir(const std::string& python);

// The toolkit torch.utils.cpp_extension would build with: CUDA_HOME, CUDA_PATH, the nvcc on
// PATH, /usr/local/cuda (its _find_cuda_home order), into f.toolkit or f.toolkit_missing.
void find_toolkit(doctor::Facts& f);

}  // namespace archbuild::app
