// Coverage verdicts: for each target CC, whether every file with device code has an image a GPU
// of that CC can load (arch::run_verdict), and which files fall short.
#pragma once

#include <string>
#include <vector>

#include "arch/arch.hpp"
#include "arch/compat.hpp"
#include "binary/inspect.hpp"

namespace archbuild::validate {

struct FileVerdict {
  std::string path;
  arch::RunVerdict verdict;
  std::vector<arch::CodeImage> carried;  // the runtime SASS/PTX images the file has
  bool relocatable_only = false;         // device code, but only -rdc input (needs device linking)
};

struct TargetCoverage {
  arch::Cc cc;
  arch::RunResult worst = arch::RunResult::no_kernel_image;  // over the files with device code
  bool covered = false;            // every file with device code has a runnable image (native, SASS or PTX JIT)
  std::vector<FileVerdict> files;  // one per file with device code, in input order
};

struct Coverage {
  std::vector<TargetCoverage> targets;
  std::size_t files_with_device_code = 0;
  bool covered = false;  // every target covered, and at least one file carries device code
};

// A target is covered when each file with device code can run on it (PTX JIT counts, with its
// slow first launch); with no device code at all nothing is covered.
Coverage coverage(const std::vector<binary::FileReport>& files, const std::vector<arch::Cc>& targets);

// The distinct CCs of a parsed --sm list, in order (variants and PTX wishes do not change which
// GPU runs the code).
std::vector<arch::Cc> target_ccs(const std::vector<arch::Arch>& archs);

}  // namespace archbuild::validate
