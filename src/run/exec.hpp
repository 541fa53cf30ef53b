// Replacing archbuild's own process with another program (the compile launcher hands each
// compile on this way, so its exit status, output and signals are the compiler's own).
#pragma once

#include <string>
#include <vector>

#include "core/error.hpp"

namespace archbuild::run {

// execvp(argv[0], argv) with archbuild's environment: returns only when the program cannot be
// started (exit 3 when it is not found, 2 for an empty argv).
Error exec_replace(const std::vector<std::string>& argv);

}  // namespace archbuild::run
