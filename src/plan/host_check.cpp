#include "plan/host_check.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/text.hpp"
#include "plan/plan.hpp"

namespace archbuild::plan {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

HostCheck check_host(const Plan& plan, const HostFigures& host) {
  const auto& r = plan->resolution.recipe;
  HostCheck c;
  c.need_disk_gib = static_cast<double>(r.disk_gib);
  if (host.free_bytes) c.free_disk_gib = static_cast<double>(*host.free_bytes) / kGiB;
  // Admitted builds run a job per core but admission keeps them within the budget: what must fit
  // is the static rule's count of the same per-job figure (at least one job).
  c.jobs = plan->jobs.admitted ? plan->jobs.static_jobs : plan->jobs.jobs;
  c.job_memory_gib = plan->jobs.gib_per_job;  // the jobs rule's figure ([build.memory]'s nvcc job)
  c.mem_available_gib = static_cast<double>(host.mem_available) / kGiB;
  if (c.need_disk_gib > 0 && c.free_disk_gib && *c.free_disk_gib < c.need_disk_gib)
    c.problems.push_back(fmt::format("{:.1f} GiB free in {}, but a {} build needs {:g} GiB there (recipe [host] "
                                     "disk_gib); free space or choose another --cache-dir",
                                     *c.free_disk_gib, host.cache_dir.string(), r.package, c.need_disk_gib));
  if (c.job_memory_gib > 0 && c.jobs * c.job_memory_gib > c.mem_available_gib) {
    auto fit = static_cast<unsigned>(std::floor(c.mem_available_gib / c.job_memory_gib));
    c.problems.push_back(
        fmt::format("{} jobs x {:g} GiB per compile job (recipe [build.memory] nvcc job) = {:g} GiB, but {:.1f} GiB of "
                    "memory is available; {}",
                    c.jobs, c.job_memory_gib, c.jobs * c.job_memory_gib, c.mem_available_gib,
                    fit >= 1 ? fmt::format("use --jobs {} or fewer", fit)
                             : std::string("not even one job fits: free memory or build on a larger host")));
  }
  c.ok = c.problems.empty();
  return c;
}

nlohmann::json HostCheck::to_json() const {
  return {{"ok", ok},
          {"disk", {{"need_gib", need_disk_gib}, {"free_gib", free_disk_gib ? nlohmann::json(*free_disk_gib) : nlohmann::json(nullptr)}}},
          {"memory", {{"jobs", jobs}, {"job_memory_gib", job_memory_gib}, {"available_gib", mem_available_gib}}},
          {"problems", problems}};
}

std::optional<Error> HostCheck::error() const {
  if (ok) return std::nullopt;
  return Error::missing_tool("host check: " + text::join(problems, "; "));
}

}  // namespace archbuild::plan
