// Replacing archbuild's own process with another program (the compile launcher hands each
// compile on this way, so its exit status, output and signals are the compiler's own).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace archbuild::run {

// execvp(argv[0], argv) with archbuild's environment: returns only when the program cannot be
// started (exit 3 when it is not found, 2 for an empty argv).
Error exec_replace(const std::vector<std::string>& argv);

struct Measured {
  int exit_code = 0;            // the program's status; 128 + signal when a signal ended it
  std::uint64_t max_rss_kb = 0; // wait4's ru_maxrss: the largest process of its waited tree
};

// Runs argv as a child with archbuild's environment, output and stdin, and waits for it (the
// launcher's way when it must measure a compile's peak memory, which exec cannot).
// Errors: exit 3 when the program is not found.
Result<Measured> run_measured(const std::vector<std::string>& argv);

}  // namespace archbuild::run
