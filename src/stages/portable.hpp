// The package stage's repair ("Portable by default"): the wheel is made to depend on
// what it links, the way PyTorch's official wheels do. For every ELF file of the wheel, each
// DT_NEEDED that data/validate/libraries.toml maps to an nvidia-* pip package gets
//  - a RUNPATH entry relative to $ORIGIN into that package's installed folder (the wheel's own
//    $ORIGIN entries kept, the build host's absolute folders dropped), set with patchelf through
//    the Runner (the new string rarely fits in the old DT_RUNPATH, so no in-place rewrite);
//  - a `Requires-Dist: <package>==<version>` in METADATA (the data file's version for the
//    toolkit's CUDA X.Y; unpinned where it names none).
// A library the wheel itself carries but no $ORIGIN entry reaches gets one (as auditwheel does);
// the recipe's triton release becomes `Requires-Dist: triton==X` (official wheels add it through
// PYTORCH_EXTRA_INSTALL_REQUIREMENTS) in either layout: it is Python, not linked. A dependent
// built against a torch wheel (--with, --torch-wheel) gets `Requires-Dist: torch==<exact>`
// instead of whatever torch requirement the project declared.
// The platform tag tells the truth (PEP 600): manylinux_X_Y from the highest GLIBC_ version any
// file needs (libstdc++/libgcc within that policy) when every library is accounted for, else
// linux_<arch> with the reason. The wheel file and WHEEL's Tag lines are renamed together;
// RECORD is left to normalize_wheel. A needed library with no package (or layout "host")
// leaves the wheel host-bound: its RUNPATH is kept and the result says so for the manifest and
// for `validate` (a named "host-bound" finding).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/version.hpp"
#include "recipe/recipe.hpp"
#include "run/runner.hpp"
#include "validate/closure.hpp"

namespace archbuild::stages {

struct PortableOptions {
  recipe::WheelLayout layout = recipe::WheelLayout::official;
  std::optional<Version> cuda;        // the toolkit built against: picks the data file's versions
  std::optional<Version> triton;      // the recipe's [wheel] triton: `triton==X` for torch.compile
  // The build venv's distributions (normalized name -> exact version): an nvidia-* package the
  // build linked from there is required at exactly that version.
  std::map<std::string, std::string> built_against;
  // Exact pins of what the build compiled against ("torch==2.14.0+cu130.sm90", from the build
  // venv's installed wheels): each replaces every requirement of its name the project declared,
  // so pip cannot pair the wheel with another build of that torch.
  std::vector<std::string> pins;
  std::filesystem::path patchelf;     // empty: not found (only an error when a RUNPATH must change)
  std::filesystem::path scratch;      // a folder for the ELF files patchelf rewrites
  std::filesystem::path log;          // patchelf's output
};

struct PortableResult {
  std::filesystem::path wheel;  // the repaired wheel (renamed when its platform tag changed)
  // For the manifest: {"layout", "host_bound", "host_bound_reason", "libraries": [{soname,
  // package, dir, requirement, files}], "host_libraries": [{soname, files}], "requires_dist",
  // "runpath": {file: [entries]}, "tag", "tag_reason"}.
  nlohmann::json portability;
};

// PEP 600: the lowest manylinux_X_Y whose glibc covers every GLIBC_ version needed and whose
// libstdc++/libgcc policy (data/validate/libraries.toml) covers the rest; the data's policies
// start at glibc 2.17, the floor. Above the last policy only GLIBC is judged (as validate does).
// None admits the libstdc++ needed: linux_<arch>, the reason naming the file and version.
struct TagChoice {
  std::string platform;  // "manylinux_2_17_x86_64" or "linux_x86_64"
  std::string reason;
};
TagChoice choose_platform_tag(const std::string& arch, const std::map<std::string, validate::NeededVersion>& needs,
                              const validate::LibraryFacts& facts);

// Repairs `wheel` in place (a new name when the tag changes; the old file is removed). A wheel
// without dynamically linked ELF files is returned as it is. Errors: bad_input for an unreadable
// wheel, missing_tool when patchelf is needed and absent, build_failed when patchelf fails.
// METADATA with `add` after the last header line (names already required skipped), and every
// Requires-Dist of a name in `replace` dropped first (exposed for tests).
std::string add_requirements(const std::string& metadata, const std::vector<std::string>& add,
                             const std::vector<std::string>& replace = {});

Result<PortableResult> make_portable(const std::filesystem::path& wheel, const validate::LibraryFacts& facts,
                                     const PortableOptions& options, run::Runner& runner);

}  // namespace archbuild::stages
