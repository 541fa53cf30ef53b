// archbuild's compiler launchers for a Meson build (recipe::LauncherRoute::meson_native_file):
// Meson reads no CMAKE_<LANG>_COMPILER_LAUNCHER and has no launcher setting of its own, but it
// takes a compiler given as a list and runs the whole list, as it does for `ccache cc`
// (mesonbuild/envconfig.py: BinaryTable.parse_entry). So the native file's c, cpp and cuda are
// the same chains CMake gets (`archbuild cuda-launch …` and/or ccache) followed by the compiler:
// the compiler cache, the build-path rewrite and memory admission reach Meson's compiles as they
// reach CMake's. Meson runs the list for its compiler checks and to link as well, so those are
// admitted and recorded too (a link without a source).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace archbuild::stages {

// The variable naming the native file in the steps' environment; the driver's config setting
// passes `--native-file=$ARCHBUILD_MESON_NATIVE_FILE` to `meson setup`, which expands it, so the
// build key holds no cache path.
inline constexpr std::string_view meson_native_file_var = "ARCHBUILD_MESON_NATIVE_FILE";

// The native file's text for the steps' environment `env`: for C, CXX and CUDA, the launcher
// chain of CMAKE_<LANG>_COMPILER_LAUNCHER (a CMake list; absent: none) and then the compiler
// (CC, CXX, $CUDA_HOME/bin/nvcc). A language whose compiler the environment does not name is
// left to Meson's own detection.
std::string meson_native_text(const std::map<std::string, std::string>& env);

}  // namespace archbuild::stages
