// Where the shipped data files (data/, recipes/, toolchains/) are read from.
#pragma once

#include <filesystem>

namespace archbuild {

// ARCHBUILD_DATA_DIR if set; else <prefix>/share/archbuild next to the running executable;
// else the source tree archbuild was built from. The directory holds data/, recipes/, toolchains/.
std::filesystem::path data_root();

// The running archbuild executable (/proc/self/exe); empty when it cannot be read.
std::filesystem::path self_executable();

}  // namespace archbuild
