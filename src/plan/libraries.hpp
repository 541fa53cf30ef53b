// The libraries of a plan: for each library the recipe expects or allows (cuDNN, NCCL, cuSPARSELt,
// MAGMA, a LAPACK), where it comes from and its version, or why it is off — decided purely from
// the gathered facts (library_probe.hpp), the recipe and --without. The result sets the build's
// USE_* switches (keyed) and the variables PyTorch reads to find it (paths, not keyed), and says
// what the configure log's feature summary must show afterwards.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "plan/library_probe.hpp"
#include "recipe/library_spec.hpp"

namespace archbuild::plan {

enum class LibraryState {
  found,    // on: the build must show it on
  missing,  // expected but not found: the build does not start (exit 3)
  absent,   // optional and not found: off, recorded
  without,  // --without NAME: off, recorded
  off,      // the recipe's [build.env] or --env switches it off: recorded
  source,   // not on the host, but the tree builds it from a [[fetch]] of the same name (NCCL)
};
std::string_view to_string(LibraryState s);

struct LibraryChoice {
  std::string name;      // as the recipe / --without names it: "cudnn", "lapack"
  std::string library;   // the spec that provides it ("mkl"), or the first provider
  std::string title;     // "cuDNN", "MKL or OpenBLAS"
  bool expected = false; // else optional
  LibraryState state = LibraryState::missing;
  std::optional<LibraryCandidate> from;
  std::string reason;    // off / without: why; missing: where it was looked for
  std::string advice;    // how to provide it
  std::string summary;     // the feature-summary name that must read ON (found)
  std::string summary_on;  // or the line that must appear
  // A word on a preferred provider: "BLAS=NVPL as the official sbsa builds", or why it was not
  // used and what was chosen instead. Empty when nothing was preferred.
  std::string note;
};

struct LibraryPlan {
  std::vector<LibraryChoice> choices;
  std::map<std::string, std::string> keyed_env;    // USE_CUDNN=1, USE_SYSTEM_NCCL=1, BLAS=MKL, USE_MAGMA=0 …
  std::map<std::string, std::string> path_env;     // CUDNN_LIB_DIR=…, NCCL_ROOT=… (not keyed)
  std::vector<std::string> without;                // as given, sorted
  bool empty() const { return choices.empty(); }
};

struct LibraryInputs {
  std::vector<recipe::LibrarySpec> specs;          // shipped + the recipe's definitions
  std::string machine;  // the build's machine: providers that exist only elsewhere (NVPL) drop out
  recipe::LibraryRequirements requirements;        // the recipe's [libraries]
  LibraryFacts facts;
  std::vector<std::string> without;                // --without
  std::map<std::string, std::string> fixed_env;    // the recipe's [build.env] and --env (they win)
  std::map<std::string, std::string> fixed_from;   // name -> "the recipe's [build.env]" / "--env"
  // The recipe's active [[fetch]]es by name → path ("nccl" → "third_party/nccl"): a library of
  // that name the host lacks is built from that source, not missing.
  std::map<std::string, std::string> from_fetch;
  // Variables the official builds of the platform set (recipe [platform.NAME] official_env): a
  // provider they select (its `on`: BLAS=NVPL) is looked for first when neither the recipe nor
  // --env fixes them; absent, the next provider found is used and the choice's note says so.
  std::map<std::string, std::string> preferred_env;
  std::string preferred_from;  // "the official sbsa builds (recipe [platform.sbsa] official_env)"
};

// Errors (exit 2): a name in [libraries] or --without that no spec defines.
Result<LibraryPlan> plan_libraries(const LibraryInputs& in);

// The expected libraries the host lacks, as one exit-3 error with how to provide each (or
// --without NAME); nullopt when none is missing.
std::optional<Error> missing_libraries(const LibraryPlan& p);

// CMake's truth: ON/1/TRUE/YES/Y → true; OFF/0/FALSE/NO/N/""/…-NOTFOUND → false; else nullopt.
std::optional<bool> cmake_truth(std::string value);

nlohmann::json to_json(const LibraryChoice& c);
nlohmann::json to_json(const LibraryPlan& p);
// The key's part: name, state, origin and version — never a path.
nlohmann::json key_json(const LibraryPlan& p);
// One line for humans: "cudnn       found 9.19.0 in the toolkit (CUDA 13.0) /usr/local/cuda/lib64".
std::string describe(const LibraryChoice& c);

}  // namespace archbuild::plan
