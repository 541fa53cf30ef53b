// Where a build's hours went (stages/build_report.hpp): a real .ninja_log and `ninja -t graph`
// of a small known DAG (tests/data/report), the critical path through it, the time below full
// parallelism, the launcher's records joined by output, and the Chrome trace as valid JSON.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "stages/build_report.hpp"

namespace fs = std::filesystem;
using namespace archbuild;
using nlohmann::json;

namespace {

const fs::path kData = fs::path(ARCHBUILD_TEST_DATA) / "report";

stages::ReportInput fixture(unsigned jobs = 2) {
  stages::ReportInput in;
  std::ifstream log(kData / "ninja_log");
  auto entries = stages::parse_ninja_log(log, "ninja_log");
  REQUIRE(entries);
  in.entries = *entries;
  std::ifstream dot(kData / "ninja.dot");
  in.graph = stages::parse_ninja_graph(dot);
  in.jobs = jobs;
  return in;
}

std::vector<std::string> outputs(const json& targets) {
  std::vector<std::string> out;
  for (const auto& t : targets) out.push_back(t["output"]);
  return out;
}

}  // namespace

TEST_CASE("report: a real .ninja_log and ninja graph give the critical path of the known DAG", "[report]") {
  auto in = fixture();
  REQUIRE(in.entries.size() == 6);
  // The graph: multi-input edges (ellipse nodes), single-input edges drawn directly, the phony.
  REQUIRE(in.graph);
  CHECK(in.graph->inputs.at("app") == std::vector<std::string>{"lib.a", "c.o"});
  CHECK(in.graph->inputs.at("c.o") == std::vector<std::string>{"c.c", "gen.h"});
  CHECK(in.graph->inputs.at("a.o") == std::vector<std::string>{"a.c"});
  CHECK(in.graph->inputs.at("all") == std::vector<std::string>{"app"});

  json r = stages::build_report(in);
  // a.o 511 ms + lib.a 192 ms + app 195 ms = 898 ms; the other chain, gen.h + c.o + app, is 811.
  CHECK(outputs(r["critical_path"]["targets"]) == std::vector<std::string>{"a.o", "lib.a", "app"});
  CHECK(r["critical_path"]["seconds"].get<double>() == Approx(0.898));
  CHECK(r["targets"] == 6);
  CHECK(r["wall_s"].get<double>() == Approx(1.046));
  CHECK(r["busy_s"].get<double>() == Approx(1.726));
  // One job ran alone 0-23 ms (a.o before b.o started), 703-851 (c.o) and 851-1046 (app).
  CHECK(r["below_full_parallelism_s"].get<double>() == Approx(0.366));
  CHECK(r["slowest"][0]["output"] == "a.o");
  CHECK(r["slowest"][0]["seconds"].get<double>() == Approx(0.511));
  CHECK(r["compiles"]["count"] == 0);
  CHECK(!stages::report_lines(r).empty());
}

TEST_CASE("report: without a graph there is no critical path, and the reason is given", "[report]") {
  auto in = fixture();
  in.graph.reset();
  json r = stages::build_report(in);
  CHECK(r["critical_path"].is_null());
  CHECK(r["critical_path_note"] == "no ninja graph was kept for this build");
}

TEST_CASE("report: only the last ninja run of the log counts, an edge's outputs are one entry", "[report]") {
  std::istringstream log(
      "# ninja log v5\n"
      "0\t100\t1\ta.o\th1\n"
      "0\t300\t1\tb.o\th2\n"
      // a second run: times start again
      "0\t50\t1\tgen.h\th3\n"
      "0\t50\t1\tgen.cpp\th3\n"
      "50\t80\t1\tgen.o\th4\n");
  auto entries = stages::parse_ninja_log(log, "log");
  REQUIRE(entries);
  REQUIRE(entries->size() == 2);
  CHECK((*entries)[0].outputs == std::vector<std::string>{"gen.h", "gen.cpp"});
  CHECK((*entries)[1].outputs == std::vector<std::string>{"gen.o"});
}

TEST_CASE("report: a file that is not a ninja log is exit 2 with its line", "[report]") {
  std::istringstream none("start end\n");
  auto a = stages::parse_ninja_log(none, "x/ninja_log");
  REQUIRE(!a);
  CHECK(a.error().exit == Exit::bad_input);
  CHECK(a.error().message.find("x/ninja_log:1:") == 0);
  std::istringstream bad("# ninja log v5\n0\t1\t2\ta.o\n");
  auto b = stages::parse_ninja_log(bad, "y");
  REQUIRE(!b);
  CHECK(b.error().message.find("y:2: expected 5 tab-separated fields") == 0);
}

TEST_CASE("report: the launcher's records give peak memory and waits per compile", "[report][admission]") {
  auto in = fixture();
  in.compiles = {{"a.c", 300 * 1024, 1500, 0, "a.o", 256, "C++", "CXX"},
                 {"b.c", 100 * 1024, 0, 0, "b.o", 200, "measured", "CXX"},
                 {"c.c", 50 * 1024, 0, 0, "c.o", 256, "C++", "CXX"}};
  json r = stages::build_report(in, 2);
  CHECK(r["compiles"]["count"] == 3);
  CHECK(r["compiles"]["waited"] == 1);
  CHECK(r["compiles"]["waited_s"].get<double>() == Approx(1.5));
  CHECK(r["compiles"]["expected_from_measured"] == 1);
  CHECK(r["compiles"]["peak_mb_max"].get<double>() == Approx(300.0));
  REQUIRE(r["peaks"].size() == 2);
  CHECK(r["peaks"][0]["source"] == "a.c");
  CHECK(r["slowest"][0]["peak_mb"].get<double>() == Approx(300.0));  // a.o joined by output
  CHECK(stages::waits_line(r) == "3 compiles admitted by memory, 1 waited (1.5 s in all, longest 1.5 s)");
}

TEST_CASE("report: the Chrome trace is valid JSON, one complete event per edge, lanes never overlap", "[report]") {
  auto in = fixture();
  in.compiles = {{"a.c", 300 * 1024, 0, 0, "a.o", 256, "C++", "CXX"}};
  // Through text, as Perfetto reads the file.
  json trace = json::parse(stages::chrome_trace(in, "build").dump());
  REQUIRE(trace["traceEvents"].is_array());
  std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> lanes;
  int complete = 0;
  for (const auto& e : trace["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    if (e["ph"] != "X") continue;
    ++complete;
    REQUIRE(e["ts"].is_number_integer());
    REQUIRE(e["dur"].is_number_integer());
    REQUIRE(e["pid"] == 1);
    lanes[e["tid"].get<int>()].push_back({e["ts"].get<std::int64_t>(), e["ts"].get<std::int64_t>() + e["dur"].get<std::int64_t>()});
    if (e["name"] == "a.o") CHECK(e["args"]["peak_mb"].get<double>() == Approx(300.0));
  }
  CHECK(complete == 6);
  CHECK(lanes.size() == 2);  // -j2
  for (auto& [lane, spans] : lanes) {
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i) CHECK(spans[i].first >= spans[i - 1].second);
  }
}
