// The tree's build contract: what a checked-out source tree declares about its own build —
// the build backend, the build requirements, the CMake minimum, its version and the pins of what
// its build downloads. A pure reader over file access (a checkout directory, or the blobs of a
// commit in a bare mirror through source/), so `plan` can show it before anything is checked out.
//
// The contract is a function of the commit (the build key covers it): it is read, shown and
// checked against the plan; a contradiction stops the build, it never changes the plan.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/rules.hpp"
#include "core/version.hpp"
#include "recipe/recipe.hpp"

namespace archbuild::contract {

// How the reader sees a tree: paths are relative to its top, with '/' separators.
struct FileAccess {
  std::function<std::optional<std::string>(const std::string& relpath)> read;  // nullopt: no such file
  std::function<std::vector<std::string>(const std::string& reldir)> list;     // file names (no dirs)
  std::string origin;  // for messages: the checkout dir, or "<mirror> at <commit>"
};

// A plain directory (a checkout).
FileAccess directory_access(const std::filesystem::path& root);

struct Where {
  std::string file;  // relative to the tree
  int line = 0;      // 1-based; 0: the whole file
  std::string str() const;  // "pyproject.toml:12"
};

// One PEP 508 requirement as written: `name[extras] specifier ; marker`.
struct Requirement {
  std::string name;       // as written ("typing-extensions")
  std::string extras;     // "uv" for build[uv]
  std::string specifier;  // ">=77.0.0,<82", or "@ url"
  std::string marker;     // platform_machine != "s390x"
  Where where;
};

struct CmakeMinimum {
  Version min;
  std::optional<Version> max;  // VERSION 3.18...3.30: the policy maximum
  Where where;
};

struct Pin {
  std::string name;  // "triton", "nccl-cu13", "eigen"
  std::string ref;   // a commit, a tag or a version, as the file holds it
  Where where;
};

// Which of archbuild's drivers can build what the tree declares.
enum class Backend {
  scikit_build_core,  // scikit_build_core.build, or an in-tree backend with [tool.scikit-build]
  setuptools,         // setuptools.build_meta (or no pyproject and a setup.py)
  cmake_only,         // a CMakeLists.txt and nothing Python builds
  other,              // a backend archbuild has no driver for (named in `backend`)
  none,               // nothing buildable found
};
std::string_view to_string(Backend b);

// One [[tool.scikit-build.overrides]] entry that sets cmake.build-type.
struct BuildTypeOverride {
  std::map<std::string, std::string> if_env;  // if.env.NAME as written: "true", "false", or a regex
  std::vector<std::string> other_if;          // its other conditions, by name (platform-system …)
  std::string build_type;
  Where where;
};

// What [tool.scikit-build] decides of a scikit-build-core build. scikit-build-core takes each
// setting from SKBUILD_* variables, then the config settings (-C), then this table with its
// matching [[tool.scikit-build.overrides]] applied; cmake.build-type set nowhere is
// $CMAKE_BUILD_TYPE, else "Release" (scikit-build/scikit-build-core@120c8dc7:
// src/scikit_build_core/settings/skbuild_read_settings.py, skbuild_model.py). So a setting a
// driver passes silences what the tree decides, overrides by environment included.
struct ScikitBuild {
  Where where;
  std::optional<std::string> build_dir;  // build-dir
  Where build_dir_where;
  std::optional<std::string> build_type;  // cmake.build-type outside any override
  Where build_type_where;
  std::vector<BuildTypeOverride> build_type_overrides;  // in file order (a later match wins)
  std::vector<std::string> override_env;  // every NAME an override's if.env reads, sorted
  std::map<std::string, std::string> defines;  // cmake.define
  bool experimental = false;
  // [tool.scikit-build.metadata.<field>] with a provider of its own (provider-path, or not
  // scikit_build_core.*): the provisional form, refused without experimental = true.
  std::optional<std::string> legacy_metadata;  // the field ("version")
  Where legacy_metadata_where;
};

struct Contract {
  bool has_pyproject = false, has_setup_py = false, has_cmakelists = false;
  std::optional<std::string> backend;  // [build-system].build-backend as written
  Where backend_where;
  std::vector<std::string> backend_path;  // [build-system].backend-path (an in-tree backend)
  std::optional<ScikitBuild> skbuild;     // [tool.scikit-build], when present
  Where dynamic_metadata_where;           // the first [[tool.dynamic-metadata]] (line 0: none)
  Backend kind = Backend::none;
  // [build-system].requires, then requirements-build.txt, then requirements.txt (with what
  // they include through -r), each with its file and line.
  std::vector<Requirement> requirements;
  std::optional<CmakeMinimum> cmake_minimum;  // of the top CMakeLists.txt
  std::optional<std::string> version;         // version.txt as written ("2.15.0a0")
  Where version_where;
  std::vector<Pin> pins;  // .ci/docker/ci_commit_pins/*.txt, third_party/*_pin.txt
  std::vector<std::string> notes;  // what was skipped and why
};

// Reads the contract. Errors (exit 2) name file:line[:column]: invalid TOML, a requires entry
// that is not a string, an unreadable cmake_minimum_required, a -r cycle.
Result<Contract> read_contract(const FileAccess& files);

// Parsers, exposed for tests. `file` names the source in Where and messages.
Result<std::optional<Requirement>> parse_requirement(const std::string& text, const Where& where);
// Whether the build venv installs it: [build-system].requires and requirements-build.txt build
// the tree; requirements.txt's own lines are its runtime and test set (PyTorch's has
// hypothesis, lintrunner …), read and shown but not installed.
bool installed_for_build(const Requirement& r);
Result<std::vector<Requirement>> parse_requirements_file(const FileAccess& files, const std::string& file,
                                                         std::vector<std::string>* notes = nullptr);
Result<std::optional<CmakeMinimum>> parse_cmake_minimum(const std::string& text, const std::string& file);
// The release part of a version string: "2.15.0a0" -> 2.15.0, "0.1.0+git" -> 0.1.0.
std::optional<Version> release_part(const std::string& version);

nlohmann::json to_json(const Contract& c);
nlohmann::json to_json(const ScikitBuild& b);
// How the tree decides its build type: "Debug if DEBUG (pyproject.toml:30); …; else
// $CMAKE_BUILD_TYPE, else Release", or its static cmake.build-type.
std::string build_type_rule(const ScikitBuild& b);
// Human lines for `plan`: "backend   setuptools.build_meta (pyproject.toml:14)" …
std::vector<std::string> describe(const Contract& c);

// What the plan expects of the tree (taken from the plan by the caller).
struct Expectation {
  recipe::Driver driver = recipe::Driver::setup_py;
  std::string recipe_file;            // for messages
  Version version;                    // the recipe's release
  std::optional<Version> cmake;       // the cmake the build runs, when known
  std::string cmake_path;
};

// One check of the contract against the plan.
struct Finding {
  rules::Id rule;  // driver-backend, version, cmake-minimum, skbuild-metadata
  bool ok = true;
  Exit exit = Exit::ok;  // when not ok
  std::string message;   // one line, naming the file:line and what would be valid
};
std::vector<Finding> check(const Contract& c, const Expectation& e);
nlohmann::json to_json(const std::vector<Finding>& findings);
// The first contradiction as an error (its rule's exit status), or nullopt.
std::optional<Error> first_contradiction(const std::vector<Finding>& findings, const std::string& origin = "");

}  // namespace archbuild::contract
