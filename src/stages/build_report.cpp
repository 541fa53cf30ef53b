#include "stages/build_report.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace archbuild::stages {

using nlohmann::json;

namespace {

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> f;
  std::size_t at = 0;
  for (;;) {
    auto tab = line.find('\t', at);
    f.push_back(line.substr(at, tab == std::string::npos ? std::string::npos : tab - at));
    if (tab == std::string::npos) return f;
    at = tab + 1;
  }
}

double seconds(std::int64_t ms) { return static_cast<double>(ms) / 1000.0; }
double round3(double v) { return std::round(v * 1000.0) / 1000.0; }
double mb(std::uint64_t kb) { return std::round(static_cast<double>(kb) / 1024.0 * 10.0) / 10.0; }

// The launcher's record for each output (the last one: a rerun's).
std::map<std::string, const run::CompileRecord*> records_by_output(const std::vector<run::CompileRecord>& compiles) {
  std::map<std::string, const run::CompileRecord*> by;
  for (const auto& r : compiles)
    if (!r.output.empty()) by[r.output] = &r;
  return by;
}

// The longest chain of logged edges through the graph (what the build could not have finished
// faster than, at any parallelism). Files that no logged edge made (sources, phony targets,
// targets up to date from an earlier run) are looked through to what made their inputs.
json critical_path(const ReportInput& in) {
  const NinjaGraph& g = *in.graph;
  std::map<std::string, std::size_t> edge_of;
  for (std::size_t i = 0; i < in.entries.size(); ++i)
    for (const auto& o : in.entries[i].outputs) edge_of[o] = i;
  // The logged edges an unlogged file stands for, memoised.
  std::map<std::string, std::set<std::size_t>> through;
  std::function<const std::set<std::size_t>&(const std::string&)> logged_deps = [&](const std::string& file)
      -> const std::set<std::size_t>& {
    auto [it, fresh] = through.try_emplace(file);
    if (!fresh) return it->second;
    std::set<std::size_t> deps;
    if (auto in_it = g.inputs.find(file); in_it != g.inputs.end())
      for (const auto& input : in_it->second) {
        if (auto e = edge_of.find(input); e != edge_of.end()) {
          deps.insert(e->second);
        } else {
          const auto& sub = logged_deps(input);
          deps.insert(sub.begin(), sub.end());
        }
      }
    through[file] = std::move(deps);
    return through[file];
  };
  std::vector<std::int64_t> best(in.entries.size(), -1);
  std::vector<std::optional<std::size_t>> prev(in.entries.size());
  std::vector<char> active(in.entries.size(), 0);
  std::function<std::int64_t(std::size_t)> longest = [&](std::size_t i) -> std::int64_t {
    if (best[i] >= 0) return best[i];
    if (active[i]) return 0;  // a cycle cannot be in a graph ninja ran; never loop on a bad file
    active[i] = 1;
    std::int64_t before = 0;
    for (const auto& out : in.entries[i].outputs)
      for (std::size_t d : logged_deps(out)) {
        if (d == i) continue;
        std::int64_t v = longest(d);
        if (v > before) {
          before = v;
          prev[i] = d;
        }
      }
    active[i] = 0;
    best[i] = before + std::max<std::int64_t>(0, in.entries[i].ms());
    return best[i];
  };
  std::optional<std::size_t> last;
  for (std::size_t i = 0; i < in.entries.size(); ++i)
    if (!last || longest(i) > best[*last]) last = i;
  json targets = json::array();
  std::vector<std::size_t> chain;
  for (auto at = last; at; at = prev[*at]) chain.push_back(*at);
  std::reverse(chain.begin(), chain.end());
  for (std::size_t i : chain)
    targets.push_back({{"output", in.entries[i].outputs.front()}, {"seconds", round3(seconds(in.entries[i].ms()))}});
  return {{"seconds", last ? round3(seconds(best[*last])) : 0.0}, {"targets", targets}};
}

// Time within [first start, last end] during which fewer than `jobs` edges ran.
std::int64_t below_full_ms(const std::vector<NinjaEntry>& entries, unsigned jobs) {
  std::vector<std::pair<std::int64_t, int>> events;
  for (const auto& e : entries) {
    events.push_back({e.start_ms, +1});
    events.push_back({e.end_ms, -1});
  }
  std::sort(events.begin(), events.end());
  std::int64_t below = 0;
  int running = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    running += events[i].second;
    if (i + 1 < events.size() && running < static_cast<int>(jobs)) below += events[i + 1].first - events[i].first;
  }
  return below;
}

}  // namespace

Result<std::vector<NinjaEntry>> parse_ninja_log(std::istream& in, const std::string& name) {
  std::string line;
  if (!std::getline(in, line) || !std::regex_match(line, std::regex(R"(# ninja log v[5-7])")))
    return Error::bad_input(fmt::format("{}:1: not a .ninja_log (expected '# ninja log v5' to 'v7' on the first line)", name));
  std::vector<std::vector<NinjaEntry>> runs(1);
  std::int64_t last_end = -1;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    auto f = split_tabs(line);
    if (f.size() != 5)
      return Error::bad_input(fmt::format("{}:{}: expected 5 tab-separated fields (start, end, mtime, output, hash), got {}",
                                          name, number, f.size()));
    NinjaEntry e;
    try {
      e.start_ms = std::stoll(f[0]);
      e.end_ms = std::stoll(f[1]);
    } catch (const std::exception&) {
      return Error::bad_input(fmt::format("{}:{}: start and end must be milliseconds", name, number));
    }
    e.outputs = {f[3]};
    e.hash = f[4];
    if (e.end_ms < last_end) runs.emplace_back();
    last_end = e.end_ms;
    auto& run = runs.back();
    // The outputs of one edge are consecutive lines with the same times and hash.
    if (!run.empty() && run.back().start_ms == e.start_ms && run.back().end_ms == e.end_ms && run.back().hash == e.hash)
      run.back().outputs.push_back(f[3]);
    else
      run.push_back(std::move(e));
  }
  std::vector<NinjaEntry> last = std::move(runs.back());
  return last;
}

NinjaGraph parse_ninja_graph(std::istream& in) {
  static const std::regex node(R"re(^"([^"]+)" \[label="(.*?)"(, shape=ellipse)?\]\s*$)re");
  static const std::regex arrow(R"re(^"([^"]+)" -> "([^"]+)"(.*)$)re");
  std::map<std::string, std::string> label;
  std::set<std::string> edges;
  std::vector<std::pair<std::string, std::string>> arrows;
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, arrow)) {
      arrows.emplace_back(m[1].str(), m[2].str());
    } else if (std::regex_match(line, m, node)) {
      if (m[3].matched) edges.insert(m[1].str());
      else label[m[1].str()] = m[2].str();
    }
  }
  NinjaGraph g;
  std::map<std::string, std::vector<std::string>> edge_inputs;
  std::map<std::string, std::vector<std::string>> edge_outputs;
  for (const auto& [from, to] : arrows) {
    if (edges.count(from)) edge_outputs[from].push_back(label[to]);
    else if (edges.count(to)) edge_inputs[to].push_back(label[from]);
    else g.inputs[label[to]].push_back(label[from]);  // one input, one output: drawn directly
  }
  for (const auto& [edge, outs] : edge_outputs)
    for (const auto& o : outs) {
      auto& v = g.inputs[o];
      v.insert(v.end(), edge_inputs[edge].begin(), edge_inputs[edge].end());
    }
  return g;
}

json build_report(const ReportInput& in, std::size_t top) {
  json r;
  std::int64_t first = 0, end = 0, busy = 0;
  if (!in.entries.empty()) {
    first = in.entries.front().start_ms;
    for (const auto& e : in.entries) {
      first = std::min(first, e.start_ms);
      end = std::max(end, e.end_ms);
      busy += std::max<std::int64_t>(0, e.ms());
    }
  }
  const std::int64_t wall = end - first;
  const auto by_output = records_by_output(in.compiles);
  auto peak_of = [&](const NinjaEntry& e) -> json {
    for (const auto& o : e.outputs)
      if (auto it = by_output.find(o); it != by_output.end()) return mb(it->second->peak_kb);
    return nullptr;
  };
  r["targets"] = in.entries.size();
  r["jobs"] = in.jobs;
  r["wall_s"] = round3(seconds(wall));
  r["busy_s"] = round3(seconds(busy));
  r["average_parallelism"] = wall > 0 ? round3(static_cast<double>(busy) / static_cast<double>(wall)) : 0.0;
  r["below_full_parallelism_s"] = round3(seconds(below_full_ms(in.entries, in.jobs)));

  std::vector<const NinjaEntry*> sorted;
  for (const auto& e : in.entries) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->ms() > b->ms(); });
  json slowest = json::array();
  for (std::size_t i = 0; i < sorted.size() && i < top; ++i)
    slowest.push_back({{"output", sorted[i]->outputs.front()}, {"seconds", round3(seconds(sorted[i]->ms()))},
                       {"peak_mb", peak_of(*sorted[i])}});
  r["slowest"] = slowest;

  if (in.graph && !in.entries.empty()) {
    r["critical_path"] = critical_path(in);
  } else {
    r["critical_path"] = nullptr;
    r["critical_path_note"] = in.entries.empty() ? "no target ran" : "no ninja graph was kept for this build";
  }

  std::uint64_t waited = 0, waited_ms = 0, longest = 0, measured = 0, peak_max = 0;
  for (const auto& c : in.compiles) {
    if (c.waited_ms > 0) ++waited;
    waited_ms += c.waited_ms;
    longest = std::max(longest, c.waited_ms);
    if (c.basis == "measured") ++measured;
    peak_max = std::max(peak_max, c.peak_kb);
  }
  r["compiles"] = {{"count", in.compiles.size()},
                   {"waited", waited},
                   {"waited_s", round3(seconds(static_cast<std::int64_t>(waited_ms)))},
                   {"longest_wait_s", round3(seconds(static_cast<std::int64_t>(longest)))},
                   {"expected_from_measured", measured},
                   {"peak_mb_max", mb(peak_max)}};
  std::vector<const run::CompileRecord*> by_peak;
  for (const auto& c : in.compiles) by_peak.push_back(&c);
  std::stable_sort(by_peak.begin(), by_peak.end(), [](auto* a, auto* b) { return a->peak_kb > b->peak_kb; });
  json peaks = json::array();
  for (std::size_t i = 0; i < by_peak.size() && i < top; ++i) {
    const auto& c = *by_peak[i];
    peaks.push_back({{"output", c.output}, {"source", c.source}, {"peak_mb", mb(c.peak_kb)},
                     {"expected_mb", c.expect_mb}, {"basis", c.basis}, {"waited_s", round3(seconds(c.waited_ms))}});
  }
  r["peaks"] = peaks;
  return r;
}

json chrome_trace(const ReportInput& in, const std::string& title) {
  std::vector<const NinjaEntry*> sorted;
  for (const auto& e : in.entries) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->start_ms < b->start_ms; });
  const auto by_output = records_by_output(in.compiles);
  std::vector<std::int64_t> lane_free;  // when each lane's last edge ended
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", title}}}});
  for (const NinjaEntry* e : sorted) {
    std::size_t lane = 0;
    while (lane < lane_free.size() && lane_free[lane] > e->start_ms) ++lane;
    if (lane == lane_free.size()) {
      lane_free.push_back(0);
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", lane + 1},
                        {"args", {{"name", fmt::format("job {}", lane + 1)}}}});
    }
    lane_free[lane] = e->end_ms;
    json args = {{"outputs", e->outputs}};
    for (const auto& o : e->outputs)
      if (auto it = by_output.find(o); it != by_output.end()) {
        args["peak_mb"] = mb(it->second->peak_kb);
        args["expected_mb"] = it->second->expect_mb;
        args["expected_from"] = it->second->basis;
        args["waited_ms"] = it->second->waited_ms;
        if (!it->second->source.empty()) args["source"] = it->second->source;
        break;
      }
    events.push_back({{"name", e->outputs.front()},
                      {"cat", "ninja"},
                      {"ph", "X"},
                      {"ts", e->start_ms * 1000},
                      {"dur", std::max<std::int64_t>(0, e->ms()) * 1000},
                      {"pid", 1},
                      {"tid", lane + 1},
                      {"args", args}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

std::string waits_line(const json& r) {
  const json& c = r.at("compiles");
  return fmt::format("{} compiles admitted by memory, {} waited ({:.1f} s in all, longest {:.1f} s)",
                     c.at("count").get<std::uint64_t>(), c.at("waited").get<std::uint64_t>(),
                     c.at("waited_s").get<double>(), c.at("longest_wait_s").get<double>());
}

std::vector<std::string> report_lines(const json& r) {
  std::vector<std::string> out;
  out.push_back(fmt::format("{} targets in {:.1f} s wall, {:.1f} s of work: {:.2f} running on average of {} jobs",
                            r.at("targets").get<std::uint64_t>(), r.at("wall_s").get<double>(), r.at("busy_s").get<double>(),
                            r.at("average_parallelism").get<double>(), r.at("jobs").get<unsigned>()));
  out.push_back(fmt::format("below full parallelism ({} jobs) for {:.1f} s", r.at("jobs").get<unsigned>(),
                            r.at("below_full_parallelism_s").get<double>()));
  if (r.at("critical_path").is_object()) {
    const json& cp = r.at("critical_path");
    out.push_back(fmt::format("critical path {:.1f} s ({} targets):", cp.at("seconds").get<double>(), cp.at("targets").size()));
    for (const auto& t : cp.at("targets"))
      out.push_back(fmt::format("  {:>9.2f} s  {}", t.at("seconds").get<double>(), t.at("output").get<std::string>()));
  } else {
    out.push_back("critical path: unknown (" + r.value("critical_path_note", std::string("no graph")) + ")");
  }
  out.push_back("slowest targets:");
  for (const auto& t : r.at("slowest"))
    out.push_back(fmt::format("  {:>9.2f} s  {}{}", t.at("seconds").get<double>(), t.at("output").get<std::string>(),
                              t.at("peak_mb").is_null() ? "" : fmt::format("  (peak {} MB)", t.at("peak_mb").get<double>())));
  if (r.at("compiles").at("count").get<std::uint64_t>() > 0) {
    out.push_back(waits_line(r) + fmt::format("; {} expected from earlier measurements",
                                              r.at("compiles").at("expected_from_measured").get<std::uint64_t>()));
    out.push_back("largest peak memory per compile:");
    for (const auto& p : r.at("peaks"))
      out.push_back(fmt::format("  {:>8.1f} MB  {} (expected {} MB: {})", p.at("peak_mb").get<double>(),
                                p.at("source").get<std::string>().empty() ? p.at("output").get<std::string>()
                                                                           : p.at("source").get<std::string>(),
                                p.at("expected_mb").get<std::uint64_t>(), p.at("basis").get<std::string>()));
  }
  return out;
}

}  // namespace archbuild::stages
