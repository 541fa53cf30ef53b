// Whether this host can run the plan's build before hours are spent on it: free disk where the
// cache puts the tree and its objects, and memory for the jobs the plan runs. Pure over the
// gathered figures (the caller measures: statvfs of the cache, MemAvailable); the figures a
// build needs come from the recipe's [host] disk_gib and the jobs rule's memory per job ([build.memory]'s nvcc job).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace archbuild::plan {

class Plan;

struct HostFigures {
  std::filesystem::path cache_dir;
  std::optional<std::uint64_t> free_bytes;  // nullopt: could not be measured
  std::uint64_t mem_available = 0;          // bytes
};

struct HostCheck {
  bool ok = true;
  double need_disk_gib = 0;     // 0: the recipe states none
  std::optional<double> free_disk_gib;
  unsigned jobs = 1;
  double job_memory_gib = 0;    // the jobs rule's figure
  double mem_available_gib = 0;
  std::vector<std::string> problems;  // each names the figures and the way out
  nlohmann::json to_json() const;
  // The problems as one exit-3 error; nullopt when ok.
  std::optional<Error> error() const;
};

HostCheck check_host(const Plan& plan, const HostFigures& host);

}  // namespace archbuild::plan
