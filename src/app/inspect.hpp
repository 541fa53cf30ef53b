// `archbuild inspect`: the device code of files, wheels, folders or an interpreter's torch, read
// offline (binary/), and, for --sm, which targets each file runs on (validate/coverage).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "app/session.hpp"
#include "binary/inspect.hpp"
#include "validate/coverage.hpp"

namespace archbuild::app {

struct InspectRequest {
  std::vector<std::string> paths;  // PATH…
  std::vector<std::string> sm;     // --sm: judge coverage of these
  std::string python;              // --python: that interpreter's torch/lib
  bool verify = false;             // --verify: every entry decompressed and checked
  unsigned threads = 0;            // --threads (0: one per core)
};

struct Inspected {
  std::vector<binary::FileReport> files;
  std::vector<std::string> skipped;
  std::optional<validate::Coverage> coverage;  // with --sm
  std::size_t problems = 0;                    // --verify mismatches, all files
  // With --sm and a target not covered: the one line naming each uncovered target and (the first
  // three of) the files that lack it; empty when covered.
  std::string not_covered;
};

// Bad --sm, nothing to inspect, no torch for --python (exit 3) and malformed or unreadable input
// (exit 2) throw Failure before anything is printed.
Inspected inspect(const InspectRequest& q, const Session& s);

}  // namespace archbuild::app
