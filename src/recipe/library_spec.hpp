// The optional libraries a build must not silently lack (data/build-libraries.toml): how each is
// found (headers, library files, version macros, the variables naming its prefix, its nvidia-*
// pip package), which USE_* switch turns it on or off, and the line of the configure log's
// feature summary that says whether the build used it. A recipe's [libraries] names which it
// expects; [[libraries.define]] adds definitions of the same schema (tests, other projects).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "core/error.hpp"

namespace archbuild::recipe {

struct LibrarySpec {
  std::string name;      // "cudnn"
  std::string provides;  // a group it satisfies ("lapack"), or empty
  std::string title;     // "cuDNN"
  std::vector<std::string> headers;  // the first decides the include folder
  std::vector<std::string> libs;     // any of them
  std::string version_header;
  std::vector<std::string> version_macros;
  std::vector<std::string> env_roots;
  std::string env_lib_dir, env_include_dir;
  std::string pip_package, pip_dir;  // "nvidia-cudnn-cu13", "nvidia/cudnn"
  std::vector<std::string> system;   // extra prefixes or folders; "{multiarch}" is this machine's
                                     // Debian folder name (x86_64-linux-gnu, aarch64-linux-gnu)
  std::vector<std::string> machines; // the machines it exists for (`uname -m`); empty: every one
  std::string switch_env;            // "USE_CUDNN"
  std::map<std::string, std::string> on, off, paths;
  std::string summary;               // "USE_CUDNN"
  std::string summary_on;            // a line present only when on (MAGMA)
  std::string advice;
};

// Whether the library exists for a machine (`uname -m`; "" asks about none in particular).
bool exists_for(const LibrarySpec& s, std::string_view machine);

// What a recipe expects: names of libraries or groups ("lapack").
struct LibraryRequirements {
  std::vector<std::string> expected;
  std::vector<std::string> optional;
  std::vector<LibrarySpec> define;  // extra definitions, over the shipped ones by name
  bool empty() const { return expected.empty() && optional.empty(); }
};

// One [[library]] (or [[libraries.define]]) table; errors name FILE:LINE:COLUMN.
Result<LibrarySpec> read_library_spec(const toml::table& t, const std::string& file);
// data/build-libraries.toml (or another file of that schema).
Result<std::vector<LibrarySpec>> load_library_specs(const std::filesystem::path& file);
Result<std::vector<LibrarySpec>> load_shipped_library_specs();

// The shipped specs with the recipe's definitions over them (same name: the recipe's wins).
std::vector<LibrarySpec> merge_specs(std::vector<LibrarySpec> shipped, const std::vector<LibrarySpec>& define);

}  // namespace archbuild::recipe
