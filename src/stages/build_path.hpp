// Keeping the build path out of the binaries, so the same plan built in two cache directories
// (two hosts, or --check-reproducible) gives the same bytes. Every build tree is known inside
// the binaries by one fixed name, build_path_alias (Nix builds under /build for the same reason):
//  - C and C++: -ffile-prefix-map=<tree>=<alias> in CFLAGS/CXXFLAGS (__FILE__, debug info);
//  - CUDA: nvcc has no prefix map of its own, and cudafe++ names anonymous-namespace kernels and
//    the module id after the absolute source path (_GLOBAL__N__<hash of path>_...). CMake has no
//    per-source flag hook, so the CUDA compiler launcher is archbuild itself (`archbuild
//    cuda-launch`), which adds per compile what nvcc needs (cuda_compile_args) and then execs the
//    rest of the launcher chain (ccache, nvcc).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace archbuild::stages {

inline constexpr std::string_view build_path_alias = "/archbuild/src";

// "-ffile-prefix-map=<tree>=/archbuild/src".
std::string prefix_map_flag(const std::filesystem::path& tree);

// The compile command `argv` (the launcher chain after archbuild: [ccache] nvcc args…, run in
// `cwd`) with what makes its object independent of where `tree` lives, appended:
//   -Xcudafe=--orig_src_path_name=<alias>/<source relative to tree>  (names and module id)
//   -Xcompiler=-ffile-prefix-map=<tree>=<alias>                       (__FILE__, host debug info)
//   --objdir-as-tempdir  (nvcc's intermediate files beside the object, not /tmp/tmpxft_<pid>_…:
//              their name is the host object's STT_FILE symbol; the long form, as sccache reads
//              the short -objtemp as "-o bjtemp")
// The source is the argument after -c/-dc (--compile/--device-c), else the last *.cu argument.
// Unchanged when there is no source, the source is outside `tree`, or a path holds a comma
// (nvcc splits option values at commas).
std::vector<std::string> cuda_compile_args(std::vector<std::string> argv, const std::filesystem::path& cwd,
                                           const std::filesystem::path& tree);

// The compile's source relative to `tree` ("aten/src/foo.cu"), the key of its measured peak
// memory; the source as written when it lies outside `tree`; nullopt without a source.
std::optional<std::string> compile_source(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                                          const std::filesystem::path& tree);

// The CMAKE_CUDA_COMPILER_LAUNCHER value (a CMake list) that puts `archbuild cuda-launch` for
// `tree` in front of `existing` (ccache, or empty). nullopt when a path holds a ';' or ',' (a
// CMake list or an nvcc option value could not carry it): the build then runs without it and
// --check-reproducible names what differs.
std::optional<std::string> cuda_launcher(const std::filesystem::path& archbuild_exe, const std::filesystem::path& tree,
                                         const std::string& existing);

// The same for any language (C, CXX, CUDA) with memory admission through `admission` (the
// build's admission directory; empty: none): `archbuild cuda-launch [--lang L] --tree T
// [--admission A] -- existing…`. nullopt when a path holds ';' or ','.
std::optional<std::string> compile_launcher(const std::filesystem::path& archbuild_exe, const std::filesystem::path& tree,
                                            std::string_view lang, const std::filesystem::path& admission,
                                            const std::string& existing);

}  // namespace archbuild::stages
