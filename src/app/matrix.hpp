// The CI matrix: targets × recipes × CUDA (× platforms) expanded into the build jobs resolution
// accepts, each CC of --sm on its own, each candidate recipe (abstract ones skipped), each CUDA
// it supports. Every job is resolved against this host as discovered, except that a missing tool
// (the toolkit, a compiler, Python) does not refuse a job — the CI runner installs it. With a
// build store, each accepted job whose tools are here gets its key computed as `wheel` computes
// it and looked up: a stored key is no job.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/session.hpp"
#include "app/store.hpp"
#include "core/error.hpp"

namespace archbuild::app {

struct MatrixRequest {
  std::vector<std::string> sm;
  std::string recipe;
  std::vector<std::string> platforms;  // --platform x86_64,sbsa; empty: this machine's
  std::string cuda;                    // --cuda X.Y: only jobs of that CUDA release
  std::string source_url;              // --source-url: where the jobs' keys are computed from
  std::string python;                  // --python X.Y|PATH: the interpreter of the key
  StoreArgs store;
};

// One accepted job (the object of the GitHub Actions matrix's "include").
struct MatrixJob {
  std::string sm;  // "9.0", "12.0a", "9.0+PTX": --sm reads it back
  std::string recipe, torch, cuda, arch_list;
  std::string platform, runs_on;  // only off a plain x86_64 matrix, so existing workflows' objects stay
  std::string key, digest;        // a job the build store has (Matrix::stored)
  // With a build store, a job it lacks: what the lookup said ({"checked": false, "why"}, or the
  // lookup with "checked": true and the key).
  std::optional<nlohmann::json> store;
  nlohmann::json to_json() const;
};

// A combination resolution refuses, with the rule that failed.
struct MatrixRefusal {
  std::string sm, recipe, cuda, rule, message, platform;
  nlohmann::json to_json() const;
};

// An accepted job whose tools this host lacks (CI installs them).
struct MatrixNeed {
  std::string sm, recipe, cuda, message;
  nlohmann::json to_json() const;
};

struct Matrix {
  std::vector<MatrixJob> include;
  std::vector<MatrixRefusal> refused;
  std::vector<MatrixNeed> needs;
  std::vector<MatrixJob> stored;
  std::optional<std::string> store_url;  // the build store asked, when there is one
  bool all_stored() const { return include.empty() && !stored.empty(); }
  // 0: at least one job, or every accepted job in the store; 1: no job accepted.
  Exit exit() const { return include.empty() && !all_stored() ? Exit::not_fine : Exit::ok; }
  // {"include", "refused", "needs_install"[, "stored", "store"]}: --format json.
  nlohmann::json to_json() const;
  // {"include": […]}: --format github, the strategy.matrix value.
  nlohmann::json github() const;
};

// Bad input (--sm, --cuda, --platform, the store's settings) and a required store that cannot
// be read throw Failure.
Matrix expand_matrix(const MatrixRequest& request, const Session& s);

}  // namespace archbuild::app
