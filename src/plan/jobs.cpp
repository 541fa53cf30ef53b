// How many compiles run at once: the host's cores and memory, the static jobs rule (the
// recipe's [build.memory] nvcc job at its nvcc threads) and the memory budget admission works
// within. One memory model: the same [build.memory] figures give the static rule's per-job
// figure and admission's expected peaks.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "core/text.hpp"
#include "plan/plan.hpp"

namespace archbuild::plan {

HostResources HostResources::current() {
  HostResources h;
  h.cores = std::max(1u, std::thread::hardware_concurrency());
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") {
      h.mem_available = kib * 1024;
      break;
    }
  }
  return h;
}

std::string Jobs::rule() const {
  if (from_option) return fmt::format("{} (--jobs)", jobs);
  if (admitted) return fmt::format("{} = {} cores; each compile admitted by memory (see admission)", jobs, cores);
  unsigned by_mem = static_cast<unsigned>(std::floor(mem_gib / gib_per_job));
  const std::string from = per_job_from.empty() ? "" : " (" + per_job_from + ")";
  if (threads_per_job > 1)
    return fmt::format("{} = min({} cores / {} nvcc threads = {}, {:.1f} GiB available / {:g} GiB per nvcc job{} = {}), "
                       "at least 1", jobs, cores, threads_per_job, cores / threads_per_job, mem_gib, gib_per_job, from, by_mem);
  return fmt::format("{} = min({} cores, {:.1f} GiB available / {:g} GiB per nvcc job{} = {}), at least 1", jobs,
                     cores, mem_gib, gib_per_job, from, by_mem);
}

Jobs jobs_rule(const HostResources& host, std::optional<unsigned> requested, double gib_per_job,
               unsigned threads_per_job) {
  Jobs j;
  j.gib_per_job = gib_per_job > 0 ? gib_per_job : 4;
  j.cores = std::max(1u, host.cores);
  j.mem_gib = static_cast<double>(host.mem_available) / (1024.0 * 1024.0 * 1024.0);
  j.gib_per_job = gib_per_job > 0 ? gib_per_job : Jobs::kDefaultGibPerJob;
  // More threads per job than cores only oversubscribes.
  j.threads_per_job = std::clamp(threads_per_job, 1u, j.cores);
  if (requested && *requested > 0) {
    j.jobs = *requested;
    j.from_option = true;
    return j;
  }
  auto by_mem = static_cast<unsigned>(std::floor(j.mem_gib / j.gib_per_job));
  j.jobs = std::max(1u, std::min(j.cores / j.threads_per_job, by_mem));
  return j;
}

std::string per_job_from(const recipe::CompileMemory& m, unsigned threads) {
  threads = std::max(1u, threads);
  if (threads == 1) return fmt::format("[build.memory] cuda_mb {}", m.cuda_mb);
  return fmt::format("[build.memory] cuda_mb {} + {} x cuda_thread_mb {}", m.cuda_mb, threads - 1, m.cuda_thread_mb);
}

Jobs jobs_rule(const HostResources& host, std::optional<unsigned> requested, const recipe::Recipe& r) {
  // The threads each job gets (NVCC_THREADS: at most the cores) decide its memory.
  const unsigned threads = std::clamp(r.nvcc_threads.value_or(1), 1u, std::max(1u, host.cores));
  Jobs j = jobs_rule(host, requested, static_cast<double>(recipe::nvcc_job_mb(r.memory, threads)) / 1024.0, threads);
  j.per_job_from = per_job_from(r.memory, j.threads_per_job);
  return j;
}

std::string Admission::rule() const {
  if (!on) return "off: the static jobs rule bounds memory";
  std::string rule = fmt::format(
      "budget {:.1f} GiB ({}); a compile starts when its expected peak fits what is left, a larger one runs alone. "
      "Expected peak: measured in earlier builds of the recipe, else C {} MB, C++ {} MB, CUDA {} MB + {} MB per "
      "further nvcc thread",
      budget_mb / 1024.0, budget_from, figures.c_mb, figures.cxx_mb, figures.cuda_mb, figures.cuda_thread_mb);
  for (const auto& p : figures.patterns) rule += fmt::format(", {} {} MB", p.glob, p.mb);
  return rule;
}

Result<std::optional<std::uint64_t>> parse_memory_budget(const std::string& given, std::uint64_t available) {
  auto bad = [&](const std::string& why) {
    return Error::bad_input(fmt::format("--memory-budget '{}': {}; expected a size like 48G, 4096M or 1.5T (binary "
                                        "units), a share of available memory like 75%, or off",
                                        given, why));
  };
  std::string t = text::lower(text::trim(given));
  if (t == "off") return std::optional<std::uint64_t>{};
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(t, &used);
  } catch (const std::exception&) {
    return bad("not a number");
  }
  // Plain decimals only: stod would also take "1e3", "0x10", "inf".
  if (t.substr(0, used).find_first_not_of("0123456789.") != std::string::npos) return bad("not a plain number");
  if (!std::isfinite(value) || value <= 0) return bad("the size must be above 0");
  std::string unit = t.substr(used);
  double mb = 0;
  if (unit == "%") {
    if (value > 100) return bad("a share above 100%");
    mb = value / 100.0 * static_cast<double>(available) / (1024.0 * 1024.0);
  } else if (unit.empty()) {
    return bad("a unit is needed");
  } else {
    static const std::vector<std::pair<std::vector<std::string>, double>> units = {
        {{"k", "kb", "kib"}, 1.0 / 1024}, {{"m", "mb", "mib"}, 1}, {{"g", "gb", "gib"}, 1024}, {{"t", "tb", "tib"}, 1024.0 * 1024}};
    bool known = false;
    for (const auto& [names, factor] : units)
      if (std::find(names.begin(), names.end(), unit) != names.end()) {
        mb = value * factor;
        known = true;
      }
    if (!known) return bad(fmt::format("unknown unit '{}'", unit));
  }
  if (mb < 1) return bad("less than 1 MB");
  if (mb > 1e12) return bad("too large");
  return std::optional<std::uint64_t>{static_cast<std::uint64_t>(mb)};
}

}  // namespace archbuild::plan
