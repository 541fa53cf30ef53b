#include "core/rules.hpp"

#include <array>

namespace archbuild::rules {

namespace {

constexpr Exit bad = Exit::bad_input;
constexpr Exit missing = Exit::missing_tool;
constexpr Exit none = Exit::ok;

// docs/commands.md "Rules" is this table in words (a test compares them).
const std::array kRules = {
    Spec{Id::targets, "targets", Step::resolve, "the target architectures asked for (--sm, --gpu, native)", bad},
    Spec{Id::platform, "platform", Step::resolve, "the platform built for (--platform, else this machine's) can have every target", bad},
    Spec{Id::torch_version, "torch-version", Step::resolve, "--torch names a release some recipe is for", bad},
    Spec{Id::torch_pairing, "torch-pairing", Step::resolve, "a dependent (torchvision) is asked for with the torch it pairs with", bad},
    Spec{Id::recipe_cuda, "recipe-cuda", Step::resolve, "the recipe supports --cuda", bad},
    Spec{Id::toolchain_data, "toolchain-data", Step::resolve, "a toolchains/cuda-X.Y.toml describes the CUDA release", bad},
    Spec{Id::toolkit_arch, "toolkit-arch", Step::resolve, "the CUDA release compiles every target", bad},
    Spec{Id::platform_cuda, "platform-cuda", Step::resolve, "the platform builds with this CUDA release (toolchains/platforms.toml cuda_below)", bad},
    Spec{Id::arch_syntax, "arch-syntax", Step::resolve, "the release's arch-list parser accepts every target as spelled", bad},
    Spec{Id::python_version, "python-version", Step::resolve, "the recipe supports the Python asked for (or the default python3)", bad},
    Spec{Id::source_url, "source-url", Step::resolve, "there is a source to build: --source, --source-url or the recipe's", bad},
    Spec{Id::nvcc_arch_list, "nvcc-arch-list", Step::resolve, "an installed nvcc lists the targets (else another installed CUDA is chosen)", none},
    Spec{Id::platform_host, "platform-host", Step::resolve, "this machine is the platform's (no cross build)", missing},
    Spec{Id::toolkit_installed, "toolkit-installed", Step::resolve, "the chosen CUDA release is installed", missing},
    Spec{Id::host_compiler, "host-compiler", Step::resolve, "a GCC or Clang the CUDA release accepts (exit 2: a CUDAHOSTCXX it cannot honour)", missing, bad},
    Spec{Id::python_default, "python-default", Step::resolve, "another python3 of the same release has the modules the default lacks", none},
    Spec{Id::python_installed, "python-installed", Step::resolve, "an interpreter of the Python release is installed", missing},
    Spec{Id::python_modules, "python-modules", Step::resolve, "the interpreter imports what the driver needs (or the build venv installs it)", missing},
    Spec{Id::tool_installed, "tool-installed", Step::resolve, "the programs the build runs are on PATH", missing},
    Spec{Id::arch_list, "arch-list", Step::resolve, "the arch list in the syntax of the release's reader", none},
    Spec{Id::driver_backend, "driver-backend", Step::contract, "the recipe's driver builds the tree's build backend", bad},
    Spec{Id::version, "version", Step::contract, "the tree's version.txt is the recipe's release (a stop as release-line)", bad},
    Spec{Id::cmake_minimum, "cmake-minimum", Step::contract, "the cmake the build runs meets the tree's cmake_minimum_required", missing},
    Spec{Id::skbuild_metadata, "skbuild-metadata", Step::contract, "scikit-build-core accepts the tree's [tool.scikit-build.metadata]", bad},
    Spec{Id::cache_dir, "cache-dir", Step::prepare, "the cache directory is one a build can use", bad},
    Spec{Id::out, "out", Step::prepare, "--out can take the wheel", bad},
    Spec{Id::store_required, "store-required", Step::prepare, "a --store-required store can be read", missing},
    Spec{Id::release_line, "release-line", Step::prepare, "the tree's release line is the recipe's", bad},
    Spec{Id::source_pin, "source-pin", Step::prepare, "the recipe's tag names its pinned commit in the cached mirror", Exit::build_failed},
    Spec{Id::submodules, "submodules", Step::prepare, "a local tree's submodules are checked out (a .gitmodules path is not empty)", bad},
    Spec{Id::patch, "patch", Step::prepare, "each patch applies to the mirrored commit (a submodule's part to the submodule's commit) or to the local tree's files as its copy will hold them (one already contained is said, not applied)", bad},
    Spec{Id::build_venv, "build-venv", Step::prepare, "the build venv can be made from the tree's requirements", missing},
    Spec{Id::tree_download, "tree-download", Step::prepare, "every download the tree's own build makes has a [[fetch]]", missing},
    Spec{Id::fetch_pin, "fetch-pin", Step::prepare, "each [[fetch]]'s pin is resolved (exit 2: the recipe's pin_file does not fit the tree)", missing, bad},
    Spec{Id::libraries, "libraries", Step::prepare, "the libraries the recipe expects are on this host", missing},
    Spec{Id::host, "host", Step::prepare, "the host has the disk and memory the recipe's [host] figures need", missing},
};

}  // namespace

std::span<const Spec> all() { return kRules; }

const Spec& spec(Id id) { return kRules[static_cast<std::size_t>(id)]; }

std::string_view name(Id id) { return spec(id).name; }

std::optional<Id> from_name(std::string_view name) {
  for (const auto& s : kRules)
    if (s.name == name) return s.id;
  return std::nullopt;
}

std::string_view to_string(Step s) {
  switch (s) {
    case Step::resolve: return "resolve";
    case Step::contract: return "contract";
    case Step::prepare: return "prepare";
  }
  return "";
}

}  // namespace archbuild::rules
