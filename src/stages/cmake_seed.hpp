#pragma once
// The CMake seed: list-valued build variables given to CMake as cache entries through a file that
// CMAKE_TOOLCHAIN_FILE names (CMake >= 3.21 reads that variable from the environment on a first
// configure), for trees whose CMake reads USE_*/BUILD_*/CMAKE_* from the environment as one CMake
// list and so keeps only what precedes a value's first ';' (recipe [build] forwards_env_as_list).
// archbuild's compiler launchers are such lists ("archbuild;cuda-launch;…").
#include <map>
#include <optional>
#include <string>

namespace archbuild::stages {

// The prefixes such a tree forwards from the environment into its CMake cache.
bool forwarded_to_cmake(const std::string& name);

// The seed file's text for `env`: a cache entry (FORCE) for each forwarded variable whose value
// holds a ';', after an include() of the toolchain file `env` already names; nullopt when no
// variable needs one.
std::optional<std::string> cmake_seed_text(const std::map<std::string, std::string>& env);

}  // namespace archbuild::stages
