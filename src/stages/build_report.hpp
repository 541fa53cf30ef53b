// Where a build's hours went: from ninja's .ninja_log (when each target ran), its
// graph (`ninja -t graph`: what each target waited for) and the launcher's measurements
// (run/admission.hpp: peak memory and admission wait per compile): the slowest targets, the
// peak memory per compile, the critical path, and the time the build ran below full
// parallelism. Pure functions over parsed files: the pipeline keeps the files (store/ names
// them), `archbuild report` reads them again.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "run/admission.hpp"

namespace archbuild::stages {

// One edge of the last ninja run: its outputs share start, end and command hash in the log.
struct NinjaEntry {
  std::int64_t start_ms = 0;  // since that ninja run started
  std::int64_t end_ms = 0;
  std::vector<std::string> outputs;
  std::string hash;
  std::int64_t ms() const { return end_ms - start_ms; }
};

// The entries of a .ninja_log (format v5 to v7: "start\tend\tmtime\tpath\thash"). The log keeps
// every run appended; a run starts where an entry ends before the one written just before it
// (ninja writes entries as they finish), and only the last run is returned. Error (exit 2): no
// "# ninja log vN" header, or a line that is not five fields ("NAME:LINE: ...").
Result<std::vector<NinjaEntry>> parse_ninja_log(std::istream& in, const std::string& name);

// `ninja -t graph` (Graphviz): for each file, the inputs of the edge that produces it.
struct NinjaGraph {
  std::map<std::string, std::vector<std::string>> inputs;
};
NinjaGraph parse_ninja_graph(std::istream& in);

struct ReportInput {
  std::vector<NinjaEntry> entries;
  std::optional<NinjaGraph> graph;            // none: no critical path
  std::vector<run::CompileRecord> compiles;   // the launcher's, joined to entries by output
  unsigned jobs = 1;                          // full parallelism
};

// The summary (what the manifest keeps, `report --json` prints):
//   targets, wall_s, busy_s, jobs, average_parallelism, below_full_parallelism_s,
//   slowest [{output, seconds, peak_mb}], critical_path {seconds, targets [{output, seconds}]}
//   or null (critical_path_note says why), compiles {count, waited, waited_s, longest_wait_s,
//   expected_from_measured, peak_mb_max}, peaks [{output, source, peak_mb, expected_mb, basis}].
nlohmann::json build_report(const ReportInput& input, std::size_t top = 10);

// The Chrome trace format (chrome://tracing, Perfetto): one complete event per edge, one lane
// (tid) per concurrently running job, lanes reused lowest first.
nlohmann::json chrome_trace(const ReportInput& input, const std::string& title);

// The summary for people, one line each.
std::vector<std::string> report_lines(const nlohmann::json& report);

// "12 compiles, 3 waited for memory (41.2 s in all, longest 20.0 s)".
std::string waits_line(const nlohmann::json& report);

}  // namespace archbuild::stages
