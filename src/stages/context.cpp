#include "stages/context.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "run/interrupt.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

json Context::launchers() const {
  json l = json::object();
  for (const char* lang : {"C", "CXX", "CUDA"}) {
    auto it = env.find(fmt::format("CMAKE_{}_COMPILER_LAUNCHER", lang));
    l[lang] = it == env.end() ? "" : it->second;
  }
  // The CMake seed carries them where the tree would cut them (stages/cmake_seed.hpp): a tree
  // configured without it holds cut launchers in its cache.
  if (auto it = env.find("CMAKE_TOOLCHAIN_FILE"); it != env.end()) l["CMAKE_TOOLCHAIN_FILE"] = it->second;
  return l;
}

unsigned Context::current_jobs() const {
  if (auto it = env.find("MAX_JOBS"); it != env.end()) {
    int n = std::atoi(it->second.c_str());
    if (n > 0) return static_cast<unsigned>(n);
  }
  return plan->jobs.jobs;
}

source::SourceOptions Context::source_options() const {
  source::SourceOptions so;
  so.offline = options.offline;
  so.retry = options.retry;
  so.note = [this](const std::string& n) { reporter.message(run::Level::info, n); };
  so.cancelled = [] { return run::interrupt_requested(); };
  return so;
}

source::MirrorFor Context::mirror_for() const {
  return [this](const std::string& url) { return source::MirrorSlot{layout.git_mirror(url), layout.git_mirror_lock(url)}; };
}

void warn_unrecorded(Context& ctx, const Result<Ok>& written, std::string_view what) {
  if (written) return;
  std::string m = fmt::format("could not record {} in {}: {}", what, ctx.record.path().string(), written.error().message);
  ctx.result.notes.push_back(m);
  ctx.reporter.message(run::Level::warning, m);
}

Error stage_error(const std::string& stage, const run::CommandResult& r, const fs::path& log, run::Reporter& reporter) {
  if (r.interrupted)
    return Error::build_failed(fmt::format("{} stage interrupted ({}); run the same command again to resume at {}",
                                           stage, r.describe(), stage));
  auto lines = run::tail(log, 30);
  if (!lines.empty()) {
    reporter.message(run::Level::error, fmt::format("last {} lines of {}:", lines.size(), log.string()));
    for (const auto& l : lines) reporter.message(run::Level::error, "  " + l);
  }
  return Error::build_failed(fmt::format("{} stage failed: {}; full log: {}", stage, r.describe(), log.string()));
}

}  // namespace archbuild::stages
