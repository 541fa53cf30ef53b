#include "stages/context.hpp"

#include <sys/statvfs.h>

#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

#include "run/interrupt.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// Below this much free space a failed stage is said to be the full disk's doing (a compile of
// PyTorch writes objects of tens of MiB).
constexpr std::uint64_t kFullDiskBytes = std::uint64_t{64} << 20;
}  // namespace

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
  // A full cache disk shows as whatever the tool printed (an nvcc command line): said plainly,
  // from the file system's own count, whatever the log's wording.
  std::string full;
  struct statvfs fsinfo {};
  if (::statvfs(log.parent_path().c_str(), &fsinfo) == 0) {
    auto free_bytes = static_cast<std::uint64_t>(fsinfo.f_bavail) * fsinfo.f_frsize;
    bool no_inode = fsinfo.f_files > 0 && fsinfo.f_favail == 0;  // btrfs counts none: 0 of 0
    if (free_bytes < kFullDiskBytes || no_inode)
      full = fmt::format("; No space left on device: the cache's file system has {} free{} (free some, or "
                         "--cache-dir on another disk), then run again to resume",
                         free_bytes >= (1u << 20) ? fmt::format("{} MiB", free_bytes >> 20) : fmt::format("{} bytes", free_bytes),
                         no_inode ? " and no free inode" : "");
  }
  return Error::build_failed(fmt::format("{} stage failed: {}{}; full log: {}", stage, r.describe(), full, log.string()));
}

}  // namespace archbuild::stages
