// `archbuild validate --installed DIST --python PY`: the checks that do not need the .whl file,
// run on a distribution already installed in PY's site-packages (e.g. torch in a venv with its
// nvidia-* packages): coverage of the targets, the link closure and platform versions of every
// ELF file its RECORD lists (read with binary/elf, nothing is run), then the import and feature
// checks with PY itself. The interpreter is asked (through the injected Exec) where the
// distribution lives and which files are its own.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "validate/closure.hpp"
#include "validate/import_test.hpp"
#include "validate/report.hpp"

namespace archbuild::validate {

struct InstalledDist {
  std::string name, version;
  std::filesystem::path root;       // site-packages (dist.locate_file(''))
  std::vector<std::string> files;   // root-relative, '/'-separated (RECORD), none outside root
  std::vector<std::string> requires_dist;
  std::vector<std::string> top_level;
  std::vector<std::string> platform_tags;  // from the .dist-info/WHEEL Tag lines
};

// PY -I -c '<prints the distribution as JSON>' DIST
std::vector<std::string> installed_probe_argv(const std::filesystem::path& python, const std::string& dist);
// Error (bad_input) when the distribution is not installed there.
Result<InstalledDist> interpret_installed_probe(const Outcome& o, const std::string& dist,
                                                const std::filesystem::path& python);

struct InstalledOptions {
  std::filesystem::path python;
  std::optional<std::string> module;  // default: top_level.txt's first, else the name
  std::filesystem::path script;       // import_check.py; empty: no import
  Gpus gpus;
  std::optional<std::string> cuda;    // the toolkit torch.version.cuda must equal
  const LibraryFacts* libraries = nullptr;  // as ValidateOptions::libraries: required
  toolchain::HostLibraryDirs host_dirs;     // as ValidateOptions::host_dirs
  std::chrono::milliseconds import_timeout{std::chrono::minutes(5)};
};

// Error only when the interpreter cannot say where the distribution is (exit 2 or 3).
Result<Report> validate_installed(const std::string& dist, const std::vector<arch::Arch>& targets,
                                  const InstalledOptions& options, const Exec& exec);

}  // namespace archbuild::validate
