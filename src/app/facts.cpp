#include "app/facts.hpp"

#include <utility>

namespace archbuild::app {

namespace fs = std::filesystem;

namespace {

template <typename T>
T take_or_throw(Result<T> r) {
  if (!r) throw Failure(r.error());
  return std::move(*r);
}

}  // namespace

Facts::Facts(fs::path root) : root_(std::move(root)) {}

const arch::ArchData& Facts::arch() const {
  if (!arch_) {
    ++reads_.arch;
    arch_ = take_or_throw(arch::ArchData::load(root_ / "data" / "gpus.toml"));
  }
  return *arch_;
}

const toolchain::Platforms& Facts::platforms() const {
  if (!platforms_) {
    ++reads_.platforms;
    platforms_ = take_or_throw(toolchain::Platforms::load(root_ / "toolchains" / "platforms.toml"));
  }
  return *platforms_;
}

const toolchain::JetPacks& Facts::jetpacks() const {
  if (!jetpacks_) {
    ++reads_.jetpacks;
    jetpacks_ = take_or_throw(toolchain::JetPacks::load(root_ / "toolchains" / "jetpack.toml"));
  }
  return *jetpacks_;
}

const std::vector<toolchain::Toolchain>& Facts::toolchains() const {
  if (!toolchains_) {
    ++reads_.toolchains;
    toolchains_ = take_or_throw(toolchain::load_toolchains(root_ / "toolchains", arch()));
  }
  return *toolchains_;
}

const toolchain::HostLibraryDirs& Facts::host_library_dirs() const {
  if (!host_library_dirs_) host_library_dirs_ = toolchain::host_library_dirs(platforms(), jetpacks());
  return *host_library_dirs_;
}

recipe::Search Facts::search() const { return recipe::Search{{root_ / "recipes"}, &arch()}; }

const std::vector<recipe::Recipe>& Facts::recipes() const {
  if (!recipes_) {
    ++reads_.recipes;
    const auto s = search();
    recipes_ = take_or_throw(recipe::load_dir(s.dirs.front(), s));
  }
  return *recipes_;
}

const doctor::Releases& Facts::releases() const {
  if (!releases_) {
    ++reads_.releases;
    auto r = take_or_throw(doctor::Releases::load(root_ / "data" / "torch-releases.toml", arch()));
    r.add_recipe_lines(recipes());
    releases_ = std::move(r);
  }
  return *releases_;
}

const std::vector<recipe::LibrarySpec>& Facts::library_specs() const {
  if (!library_specs_) {
    ++reads_.library_specs;
    library_specs_ = take_or_throw(recipe::load_library_specs(root_ / "data" / "build-libraries.toml"));
  }
  return *library_specs_;
}

const validate::LibraryFacts& Facts::wheel_libraries() const {
  if (!wheel_libraries_) {
    ++reads_.wheel_libraries;
    wheel_libraries_ = take_or_throw(validate::load_library_facts(root_ / "data" / "validate" / "libraries.toml"));
  }
  return *wheel_libraries_;
}

}  // namespace archbuild::app
