// The shipped facts a command reads — GPUs (data/gpus.toml), platforms and JetPack releases
// (toolchains/*.toml), the CUDA toolchains and the recipes — read from one data root, each at most
// once per session and only when asked, and passed down by value or reference: resolution, recipe
// parsing, detection and the mirror's views read no process-wide data of their own.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "arch/arch_data.hpp"
#include "doctor/releases.hpp"
#include "recipe/library_spec.hpp"
#include "recipe/recipe.hpp"
#include "toolchain/jetpack.hpp"
#include "toolchain/platform.hpp"
#include "toolchain/toolchain.hpp"
#include "validate/closure.hpp"

namespace archbuild::app {

class Facts {
 public:
  explicit Facts(std::filesystem::path root);

  const std::filesystem::path& root() const { return root_; }
  // Each throws Failure (exit 2, the file's line and column) when its file is broken.
  const arch::ArchData& arch() const;
  const toolchain::Platforms& platforms() const;
  const toolchain::JetPacks& jetpacks() const;
  const std::vector<toolchain::Toolchain>& toolchains() const;
  // Every recipe of root/recipes, abstract ones included, sorted by name: read from disk once.
  const std::vector<recipe::Recipe>& recipes() const;
  // data/torch-releases.toml, with a line for each torch recipe it has no row for.
  const doctor::Releases& releases() const;
  // data/build-libraries.toml: the optional libraries a build may pick up.
  const std::vector<recipe::LibrarySpec>& library_specs() const;
  // data/validate/libraries.toml: where a wheel's libraries come from (its closure, its layout).
  const validate::LibraryFacts& wheel_libraries() const;
  // This machine's library folders (its multiarch name, its default platform's toolkit targets/),
  // from the platforms and JetPacks above.
  const toolchain::HostLibraryDirs& host_library_dirs() const;
  // Where recipe names are looked up, with this data's GPUs to check arch lists against.
  recipe::Search search() const;
  // How many times each file set was read (a test checks "once").
  struct Reads {
    int arch = 0, platforms = 0, jetpacks = 0, toolchains = 0, recipes = 0, releases = 0, library_specs = 0, wheel_libraries = 0;
  };
  const Reads& reads() const { return reads_; }

 private:
  std::filesystem::path root_;
  mutable std::optional<arch::ArchData> arch_;
  mutable std::optional<toolchain::Platforms> platforms_;
  mutable std::optional<toolchain::JetPacks> jetpacks_;
  mutable std::optional<std::vector<toolchain::Toolchain>> toolchains_;
  mutable std::optional<std::vector<recipe::Recipe>> recipes_;
  mutable std::optional<doctor::Releases> releases_;
  mutable std::optional<std::vector<recipe::LibrarySpec>> library_specs_;
  mutable std::optional<validate::LibraryFacts> wheel_libraries_;
  mutable std::optional<toolchain::HostLibraryDirs> host_library_dirs_;
  mutable Reads reads_;
};

}  // namespace archbuild::app
