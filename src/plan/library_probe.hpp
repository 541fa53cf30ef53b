// Where the optional libraries are on this host: the one part of the library decision that reads
// the filesystem. It gathers facts (every place a library was found, with its version); what the
// plan does with them is plan/libraries.hpp, a pure function over these facts.
//
// Places, in the order the plan prefers them: the variables the user set (a library's own roots
// such as CUDNN_ROOT / NCCL_ROOT / MAGMA_HOME / MKLROOT, its LIB_DIR + INCLUDE_DIR pair, then each
// CMAKE_PREFIX_PATH entry) — only what the allowlist lets reach the build, plus --env; the nvidia-*
// pip packages in the build environment's site-packages (a list: the build venv's, once there is
// one); the CUDA toolkit (cuDNN and NCCL are often installed beside it); the system folders.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "recipe/library_spec.hpp"
#include "toolchain/platform.hpp"

namespace archbuild::plan {

enum class LibraryOrigin { env, cmake_prefix_path, pip, toolkit, system };
std::string_view to_string(LibraryOrigin o);  // "env", "cmake-prefix-path", "pip", "toolkit", "system"

struct LibraryCandidate {
  std::string library;           // the spec's name
  LibraryOrigin origin = LibraryOrigin::system;
  std::string via;               // "CUDNN_ROOT", "CMAKE_PREFIX_PATH", "nvidia-cudnn-cu13", "CUDA 13.0", "system"
  std::filesystem::path root;    // the prefix (or the folder of the headers' parent)
  std::filesystem::path include_dir;
  std::filesystem::path lib_dir;
  std::filesystem::path lib_file;
  std::optional<std::string> version;  // from the version header's macros
};

struct LibrarySearch {
  std::map<std::string, std::string> env;  // what reaches the build: allowlisted caller variables + --env
  std::optional<std::filesystem::path> toolkit_root;
  std::string toolkit_label;                // "CUDA 13.0"
  std::vector<std::filesystem::path> site_packages;
  std::vector<std::filesystem::path> system_prefixes = {"/usr/local", "/usr"};
  std::string machine;  // the build's machine (`uname -m`): a library for other machines is not looked for
  // The build platform's library folders (multiarch, the toolkit's targets/): empty ones are
  // not looked in.
  toolchain::HostLibraryDirs dirs;
};

struct LibraryFacts {
  std::vector<LibraryCandidate> found;  // in preference order, per library
  bool probed = false;                  // false: nobody looked (every library then counts as missing)
};

LibraryFacts probe_libraries(const std::vector<recipe::LibrarySpec>& specs, const LibrarySearch& search);

// "9.19.0" from the text of a version header: each macro's "#define NAME VALUE"; numbers joined
// with '.', or the first dotted number inside a single string value (OPENBLAS_VERSION).
std::optional<std::string> version_from_header(const std::string& text, const std::vector<std::string>& macros);

}  // namespace archbuild::plan
