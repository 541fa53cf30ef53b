// What validation found: a list of named checks, each pass / fail / skip / warn with its
// evidence. A value: `archbuild validate` and `archbuild smoke` print it, the wheel pipeline
// stores `to_json()` in the manifest.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arch/arch.hpp"
#include "core/error.hpp"

namespace archbuild::validate {

enum class Status : std::uint8_t { pass, warn, skip, fail };
std::string_view to_string(Status s);  // "pass", "warn", "skip", "fail"

struct Check {
  std::string name;                  // "coverage", "record", "import", "smoke-run", …
  Status status = Status::pass;
  std::string summary;               // one line: what was found
  std::vector<std::string> details;  // evidence, one line each (file names, hashes, output)
  nlohmann::json evidence = nlohmann::json::object();  // the same, structured
  // Skipped because a needed tool or device is missing (python, nvcc, a GPU with --require-gpu):
  // exit 3 when nothing failed.
  bool missing_tool = false;
};

struct Report {
  std::string subject;  // the wheel's path, or "smoke sm_90"
  std::vector<Check> checks;

  bool failed() const;     // some check failed
  bool incomplete() const; // some check could not run for a missing tool or device
  // 1 when a check failed, else 3 when a needed tool or device was missing, else 0.
  Exit exit() const;
  const Check* find(std::string_view name) const;
  std::vector<std::string> failed_names() const;
  void add(Check c) { checks.push_back(std::move(c)); }
  void append(const Report& other);  // other's checks, after this one's
  // {"subject", "valid", "exit", "checks": [{"name", "status", "summary", "details",
  //   "evidence", "missing_tool"?}]}
  nlohmann::json to_json() const;
};

// ---- processes, injected (only run/ starts them: the CLI passes run::capture) ---------------

struct Command {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to / overriding the inherited environment
  std::optional<std::filesystem::path> cwd;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

struct Outcome {
  int status = -1;  // exit status; -1 when killed or timed out
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs a command; an Error (exit 3) only when the program cannot be started.
using Exec = std::function<Result<Outcome>(const Command&)>;

// ---- the GPUs of this host, as the caller detected them --------------------------------------

struct Gpu {
  int index = 0;  // as detection numbered it
  std::string name;
  arch::Cc cc;
  // What CUDA_VISIBLE_DEVICES names it by (a UUID, a MIG device's UUID, the job's own mask entry);
  // empty: `index` in PCI bus order.
  std::string select;
  bool pci_order = true;  // with `select` an index: set CUDA_DEVICE_ORDER=PCI_BUS_ID with it
};

struct Gpus {
  std::vector<Gpu> gpus;
  std::string driver_version;  // "580.65.06"; empty when detection did not say
  std::string why_none;  // when empty: why (what detection tried)
};

// Adds to a child's `env` what makes `gpu` its CUDA device 0 — and only that: the job's own
// CUDA_DEVICE_ORDER is left as it is unless `gpu` is named by a PCI-order index.
void select_gpu(std::map<std::string, std::string>& env, const Gpu& gpu);

// The first GPU whose CC is one of `targets`; nullopt with `reason` saying why there is none
// ("no GPU: …" or "the GPU here is … (8.6), not a target (9.0)").
std::optional<Gpu> matching_gpu(const Gpus& gpus, const std::vector<arch::Arch>& targets, std::string* reason);

// A working folder: `keep_in` when given (created, kept), else a fresh one under the system's
// temp folder (mkdtemp), removed with everything in it when the Scratch ends.
class Scratch {
 public:
  static Result<Scratch> make(const std::optional<std::filesystem::path>& keep_in, std::string_view prefix);
  Scratch(Scratch&& other) noexcept;
  Scratch& operator=(Scratch&&) = delete;
  Scratch(const Scratch&) = delete;
  ~Scratch();
  const std::filesystem::path& path() const { return path_; }

 private:
  Scratch(std::filesystem::path p, bool remove) : path_(std::move(p)), remove_(remove) {}
  std::filesystem::path path_;
  bool remove_ = false;
};

// Helpers for messages.
std::string targets_text(const std::vector<arch::Arch>& targets);  // "9.0, 12.0"
// The last non-empty lines of a process's output (stderr first), for evidence.
std::vector<std::string> tail_lines(const Outcome& o, std::size_t n = 12);

}  // namespace archbuild::validate
