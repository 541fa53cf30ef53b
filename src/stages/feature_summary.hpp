// The configure log's feature summary, read after configure: PyTorch prints what it ended up
// using ("--     USE_CUDNN           : ON", cmake/Summary.cmake) and switches an optional library
// off with only a warning when it cannot find it. A library the plan found (so expected on) that
// the summary shows off fails the stage, quoting the line.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/libraries.hpp"

namespace archbuild::stages {

struct FeatureSummary {
  struct Entry {
    std::string value;
    std::string line;  // as logged
  };
  std::map<std::string, Entry> values;  // "USE_CUDNN" -> {"ON", "--     USE_CUDNN : ON"}
  std::vector<std::string> lines;       // every line, for the summary_on checks
  bool found = false;                   // any "-- NAME : VALUE" line with a USE_ name
};

// "-- NAME : VALUE" lines (CMake's message(STATUS) prefix); the last one of a name wins (a
// reconfigure appends a new summary).
FeatureSummary parse_feature_summary(const std::vector<std::string>& lines);
FeatureSummary parse_feature_summary_text(const std::string& text);

struct FeatureFinding {
  std::string library;       // the plan's name ("cudnn")
  std::string feature;       // "USE_CUDNN" or the summary_on line
  std::optional<bool> on;    // nullopt: the log does not say
  std::string line;          // the line that says it (or, for summary_on, "")
  bool ok = true;            // false: expected on, shown off
};

// For every library the plan found: the summary must show it on.
std::vector<FeatureFinding> check_features(const plan::LibraryPlan& libraries, const FeatureSummary& summary);
nlohmann::json to_json(const std::vector<FeatureFinding>& findings);

}  // namespace archbuild::stages
