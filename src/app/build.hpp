// Building: one recipe for one interpreter (build), for each interpreter of --python
// (build_wheels), with everything around the stages — the shared build store pulled from and
// pushed to, prepare()'s stops, the options the environment gives (the compiler cache, its
// remote storage), the validate stage, the second run of --check-reproducible. Results are
// values; what a human sees on stdout while it runs (a validation's checks, each wheel) goes
// through Show, notes and warnings through the Session.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/inputs.hpp"
#include "app/session.hpp"
#include "app/store.hpp"
#include "plan/plan.hpp"
#include "remote/build_store.hpp"
#include "store/layout.hpp"
#include "validate/report.hpp"

namespace archbuild::app {

struct BuildArgs {
  ResolveArgs resolve;
  std::string out = "dist";
  unsigned jobs = 0;
  bool offline = false;
  std::string compiler_cache = "ccache";
  std::string remote_cache;  // --remote-cache URL (or $ARCHBUILD_REMOTE_CACHE)
  std::string progress = "auto";
  bool no_validate = false;
  bool check_reproducible = false;
  std::string trace;  // --trace FILE: the build's Chrome trace, written after it
  StoreArgs store;    // --store URL …: the shared build store (docs/store.md)
};

// One build's result.
struct BuildOutcome {
  enum class From { built, reused, pulled };
  nlohmann::json doc;          // what --json prints for it (with "error" and "exit" when it failed)
  std::optional<Error> error;  // why it failed
  std::string key;             // empty when it failed before the plan
  std::filesystem::path wheel; // the wheel in --out (absolute); empty when it failed
  std::string sha256;
  From from = From::built;
  nlohmann::json build_report;  // the manifest's summary of where the hours went (null: none)
  bool ok() const { return !error; }
};

// What a human sees on stdout while the builds run; unset under --json.
struct Show {
  std::function<void(const validate::Report&)> report;  // a validation's checks and verdict
  std::function<void(const BuildOutcome&)> built;       // a finished build (its wheel)
};

// Everything after resolution for one interpreter (resolved.python): its key, build venv, stages
// and result. Errors before a result document exists throw Failure.
BuildOutcome build(const BuildArgs& args, const plan::Resolution& resolved, const plan::PlanOptions& budget,
                   std::optional<remote::BuildStore>& build_store, const Session& s, const Show& show);

// --python 3.11,3.12 (or paths): every interpreter resolved before anything is built (a refusal
// throws Failure naming it, its resolution printed through `refused`), each interpreter once.
struct Interpreter {
  std::string asked;  // as given; "" for the default interpreter
  plan::Resolution resolution;
};
using ShowRefusal = std::function<void(const plan::Resolution&)>;
std::vector<Interpreter> resolve_pythons(const BuildArgs& args, const Session& s, const ShowRefusal& refused);

// One wheel per interpreter, one after another; a failed interpreter does not stop the others.
struct WheelsOutcome {
  std::vector<BuildOutcome> builds;
  bool several = false;        // more than one interpreter: doc and error are the list's
  nlohmann::json doc;          // --json: one build's own document, or {"ok", "wheels"[, "error", "exit"]}
  std::optional<Error> error;  // one interpreter: its error; several: the summary, with the worst status
};
WheelsOutcome build_wheels(const BuildArgs& args, const Session& s, const Show& show, const ShowRefusal& refused);

// The Chrome trace of one build (Perfetto, chrome://tracing; one lane per job), written by
// `report --trace FILE` and by `wheel --trace FILE` after its build: its .ninja_log and compile
// records (`jobs` lanes) to `file`, atomically. Error (exit 2): the build left nothing to trace,
// or `file` cannot be written.
Result<Ok> write_build_trace(const store::Layout& layout, const std::string& key, unsigned jobs,
                             const std::filesystem::path& file);

}  // namespace archbuild::app
