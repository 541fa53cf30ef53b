// archbuild report KEY [--trace FILE] [--top N] [--json]: where a build's hours went — the
// slowest targets, the peak memory per compile, the critical path and the time below full
// parallelism — from what the build kept (its .ninja_log, ninja's graph, the launcher's
// measurements; stages/build_report.hpp). --trace writes the Chrome trace format (Perfetto,
// chrome://tracing), one lane per job.
#include <fstream>

#include <fmt/format.h>

#include "cli/context.hpp"
#include "app/build.hpp"
#include "core/text.hpp"
#include "stages/pipeline.hpp"
#include "store/atomic_file.hpp"
#include "store/key_record.hpp"
#include "store/layout.hpp"

namespace archbuild::cli {

namespace {

struct ReportArgs {
  std::string key;
  std::string trace;
  std::size_t top = 10;
};

// The full key a prefix names among the cache's keys (exit 2 when none or several).
std::string full_key(const store::Layout& layout, const std::string& given) {
  if (given.empty() || given.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw Failure(Error::bad_input(fmt::format("'{}' is not a build key (hex digits, as `archbuild plan` prints)", given)));
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(layout.keys_dir(), ec)) {
    std::string name = e.path().stem().string();
    if (e.path().extension() == ".json" && name.rfind(given, 0) == 0) found.push_back(name);
  }
  if (found.size() == 1) return found.front();
  if (found.empty())
    throw Failure(Error::bad_input(fmt::format("no build of key {} in {}", given, layout.keys_dir().string())));
  throw Failure(Error::bad_input(fmt::format("key prefix {} names {} builds; give more digits", given, found.size())));
}

}  // namespace

namespace {

void run_report(const ReportArgs& args, Context& ctx) {
  auto dir = store::choose_cache_dir(ctx.cache_dir).take();
  store::Layout layout(dir.dir);
  std::string key = full_key(layout, args.key);
  store::KeyRecord record(layout, key);
  unsigned jobs = 1;
  nlohmann::json patches = nlohmann::json::array();  // what the fetch stage applied, in order
  nlohmann::json start;  // clean, or the earlier key whose build tree it continued
  if (auto doc = record.read()) {
    jobs = doc->value("/plan/jobs/jobs"_json_pointer, 1u);
    patches = doc->value("/stages/fetch/patches"_json_pointer, nlohmann::json::array());
    start = doc->value("/stages/fetch/build_start"_json_pointer, nlohmann::json());
  }
  auto input = stages::load_report_input(layout, key, jobs).take();
  auto report = stages::build_report(input, args.top);
  report["key"] = key;
  report["patches"] = patches;
  if (start.is_object()) report["build_start"] = start;
  if (!args.trace.empty()) {
    if (auto w = app::write_build_trace(layout, key, jobs, args.trace); !w) throw Failure(w.error());
    report["trace"] = args.trace;
    if (!ctx.json) note(ctx, fmt::format("trace written to {} (open it in https://ui.perfetto.dev or chrome://tracing)", args.trace));
  }
  if (ctx.json) {
    print_json(report);
    return;
  }
  out(fmt::format("build {}", key));
  if (start.is_object())
    out(start.value("mode", "") == "incremental"
            ? fmt::format("build tree: incremental from key {}", start.value("from_key", ""))
            : fmt::format("build tree: clean ({})", start.value("why", "")));
  for (const auto& p : patches)
    out(fmt::format("patch {} sha256 {} ({}{})", p.value("name", ""), p.value("sha256", ""), p.value("state", ""),
                    p.value("from", "").empty() ? "" : ", from " + p.value("from", "")));
  for (const auto& line : stages::report_lines(report)) out(line);
}

}  // namespace

void add_report_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "Where a build's hours went: slowest targets, peak memory per compile, critical path, idle parallelism");
  cmd->add_option("key", args->key, "The build key (or a unique prefix), as `archbuild plan` prints it")->required();
  cmd->add_option("--trace", args->trace, "Write the build as Chrome trace JSON (Perfetto, chrome://tracing), one lane per job");
  cmd->add_option("--top", args->top, "How many slowest targets and largest compiles to list (default 10)")
      ->check(CLI::Range(1u, 100000u));
  add_json_flag(*cmd, ctx);
  cmd->callback([args, &ctx] { run_report(*args, ctx); });
}

}  // namespace archbuild::cli
