// Memory-admitted parallelism: the build runs as many jobs as cores, and each
// compile, through the launcher, is admitted only when its expected peak memory fits what is
// left of a budget shared by every compile of the build.
//
// Crash safety: an admitted compile holds an exclusive flock on its own slot file (its share
// written inside). The kernel drops the lock when the process dies however it dies, so a share
// whose file is no longer locked is stale: the next admission removes it. Waiting compiles hold
// a wait file the same way, with their expected peak and duration: with jobs = cores, the
// compiles ninja has started wait together, and admission packs them largest work first
// (LPT), not in ninja's order, which would leave the last large compile to run alone at the
// end. A short exclusive lock on DIR/admission.lock makes check-and-take atomic between compiles.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "recipe/recipe.hpp"

namespace archbuild::run {

struct AdmissionRequest {
  std::filesystem::path dir;      // shared state of one build (created when missing)
  std::uint64_t budget_mb = 0;    // memory all admitted compiles may expect to use together
  std::uint64_t need_mb = 0;      // this compile's expected peak; above the budget it runs alone
  std::chrono::milliseconds poll{100};  // the fallback: releases wake waiters through inotify
  std::uint64_t expect_ms = 0;    // its expected duration (measured before); 0: unknown
};

// An admitted share; released (file removed, lock dropped) on destruction or process death.
class Admission {
 public:
  Admission() = default;
  Admission(Admission&& other) noexcept;
  Admission& operator=(Admission&& other) noexcept;
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;
  ~Admission();

  std::chrono::milliseconds waited() const { return waited_; }
  std::uint64_t share_mb() const { return share_mb_; }

 private:
  friend Result<Admission> admit(const AdmissionRequest& request);
  void release();
  int fd_ = -1;
  std::filesystem::path slot_;
  std::chrono::milliseconds waited_{0};
  std::uint64_t share_mb_ = 0;
};

// Blocks until the request is chosen: among the waiting compiles, largest expected work (peak x
// duration) first, each that fits what the admitted shares leave of the budget; the first that
// does not fit keeps its share reserved ahead of smaller ones; a compile larger than the budget
// runs when nothing else is admitted. Errors (exit 2): DIR cannot be created or locked.
Result<Admission> admit(const AdmissionRequest& request);

// The shares admitted now (live slots only), in MB: for reports and tests.
std::uint64_t admitted_mb(const std::filesystem::path& dir);

// One finished compile as the launcher records it: a line
// "SOURCE\tPEAK_KB\tWAITED_MS\tEXIT[\tOUTPUT\tEXPECT_MB\tBASIS\tLANG[\tWALL_MS\tTHREADS]]\n"
// appended to the build's records (O_APPEND writes under PIPE_BUF do not interleave). The
// first four or eight fields alone are the older forms, still read.
struct CompileRecord {
  std::string source;
  std::uint64_t peak_kb = 0;
  std::uint64_t waited_ms = 0;
  int exit_code = 0;
  std::string output;          // -o as given (relative to the build dir: ninja's name for it)
  std::uint64_t expect_mb = 0; // what admission expected
  std::string basis;           // where that came from: "measured", "pattern GLOB", "C++", "CUDA x2 threads"
  std::string lang;            // "C", "CXX", "CUDA"
  std::uint64_t wall_ms = 0;   // how long the compile ran (0: not recorded)
  unsigned threads = 1;        // nvcc --threads it ran with (the peak depends on it)
};

// Appends `r`; best effort (a full disk must not fail the compile). Tabs and newlines in the
// source are replaced by spaces.
void append_record(const std::filesystem::path& file, const CompileRecord& r);

// Every record of `file` (missing file: none; malformed lines skipped).
std::vector<CompileRecord> read_records(const std::filesystem::path& file);

// The last successful measurement of `source` in `file`: peak in MB rounded up, duration and
// nvcc threads; nullopt if none.
struct Measurement {
  std::uint64_t mb = 0;
  std::uint64_t wall_ms = 0;  // 0: not recorded
  unsigned threads = 1;
};
std::optional<Measurement> measured(const std::filesystem::path& file, const std::string& source);

// The build's admission settings, written by the pipeline into DIR/config.json and read by
// every launcher of the build (the launcher's command line stays the same when they change,
// so CMake's recorded launchers, and the configure stamp, do not).
struct AdmissionConfig {
  std::uint64_t budget_mb = 0;
  recipe::CompileMemory figures;
  std::filesystem::path peaks;    // the recipe's measured peaks (read)
  std::filesystem::path records;  // this build's CompileRecords (appended)
  nlohmann::json to_json() const;
};
std::filesystem::path config_path(const std::filesystem::path& admission_dir);
Result<Ok> write_config(const std::filesystem::path& admission_dir, const AdmissionConfig& config);
// Error (exit 2): missing or malformed.
Result<AdmissionConfig> read_config(const std::filesystem::path& admission_dir);

// nvcc's --threads N (-t N, --threads=N) in argv or $NVCC_APPEND_FLAGS / $NVCC_PREPEND_FLAGS
// (given as `nvcc_flags_env`); 1 when absent. 0 ("as many as there are CPUs") counts as `cpus`.
unsigned nvcc_threads(const std::vector<std::string>& argv, const std::string& nvcc_flags_env, unsigned cpus);

struct Expected {
  std::uint64_t mb = 0;
  std::string basis;
};
// A compile's expected peak: the source's measured peak, else the first pattern its source
// matches, else the figure for its language (CUDA: recipe::nvcc_job_mb at `threads`). A CUDA
// peak measured at other nvcc threads is rescaled (rescale_peak_mb).
Expected expected_peak(const recipe::CompileMemory& figures, const std::string& lang, const std::string& source,
                       unsigned threads, std::optional<Measurement> measured);

// A CUDA compile's peak measured with `from` nvcc threads, predicted for `to`. Model: the
// compile's memory splits into a one-thread part and a part per further thread in the same
// proportion as the recipe's figures (cuda_mb : cuda_thread_mb), so the peak scales as
// nvcc_job_mb(to) / nvcc_job_mb(from); rounded up.
std::uint64_t rescale_peak_mb(const recipe::CompileMemory& figures, std::uint64_t peak_mb, unsigned from, unsigned to);

// Folds `records` (this build's) into the recipe's peaks file: one line per source, the latest
// successful measurement winning; written whole to a temporary and renamed. Best effort.
void merge_peaks(const std::filesystem::path& peaks, const std::vector<CompileRecord>& records);

}  // namespace archbuild::run
