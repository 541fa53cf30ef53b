// `archbuild validate`: everything that proves a wheel — coverage of each target by every
// library with device code (plus unrequested archs and PTX-only coverage), the wheel's
// metadata, RECORD and member names, the local version label, the import test in a fresh venv
// and the bundled smoke kernel. One Report; the wheel pipeline stores its to_json() in the
// manifest.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "validate/closure.hpp"
#include "validate/coverage.hpp"
#include "validate/import_test.hpp"
#include "validate/report.hpp"
#include "validate/smoke.hpp"
#include "validate/wheel_check.hpp"

namespace archbuild::validate {

struct ValidateOptions {
  // Import name (the recipe's `module`); unset: top_level.txt, else the distribution name.
  std::optional<std::string> module;
  // The import test (its `module` is filled in from the wheel when empty); unset: not run —
  // put the reason in `preset` (e.g. skip + missing_tool for no python).
  std::optional<ImportSetup> import_test;
  // The smoke kernel; unset: not run (same).
  std::optional<SmokeSetup> smoke;
  // The pipeline's own label ("cu130.sm90"): the wheel's must equal it.
  std::optional<std::string> expected_label;
  // Checks the caller already decided (skipped for a missing tool, or by an option), appended
  // in order after the wheel's own checks.
  std::vector<Check> preset;
  ReadOptions read;
  // Where libraries come from on a clean target: the session's data/validate/libraries.toml
  // (app::Facts). Required for a wheel's closure check: none is an internal error.
  const LibraryFacts* libraries = nullptr;
  // Where this host has a library (the closure check's message); unset: host_library.
  std::function<std::optional<std::string>(const std::string&, const std::vector<std::string>&)> host;
  toolchain::HostLibraryDirs host_dirs;  // this machine's library folders (app::Facts), for host_library
  // What the package stage recorded (the manifest's `portability`, stages/portable): libraries
  // it left on the build host are a named "host-bound" finding (warn), not closure failures.
  // Unset: `portability` of <wheel>.manifest.json beside the wheel, when there is one.
  std::optional<nlohmann::json> portability;
};

// Coverage checks over the ELF files of a wheel (or any set of files):
//   coverage            fail when a target has no kernel image in some file with device code
//   ptx-jit             warn when a target runs only through the PTX JIT (slow first launch)
//   unrequested-archs   warn with the images (and bytes) no target needs
std::vector<Check> coverage_checks(const std::vector<binary::FileReport>& files,
                                   const std::vector<std::string>& elf_errors, const std::vector<arch::Arch>& targets);

// "closure" and "platform-tag" over the dynamically linked ELF files of a wheel, and
// "host-bound" (warn) where options.portability names libraries left on the build host.
std::vector<Check> closure_checks(const WheelContents& w, const std::optional<WheelName>& name,
                                  const LibraryFacts& facts, const ValidateOptions& options);

// Reads the wheel once and runs every check. Error (bad_input, exit 2) only when the file
// cannot be read as a zip at all; everything else is in the Report (its exit(): 1 a check
// failed, 3 a needed tool or device missing, else 0).
Result<Report> validate_wheel(const std::filesystem::path& wheel, const std::vector<arch::Arch>& targets,
                              const ValidateOptions& options, const Exec& exec);

}  // namespace archbuild::validate
