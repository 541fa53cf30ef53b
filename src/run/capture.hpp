// Run a short-lived tool and capture its output (nvcc --version, python -c …). Argv vector,
// never a shell; the environment is inherited plus `env` unless `clean_env` is set.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace archbuild::run {

struct CaptureOptions {
  std::map<std::string, std::string> env;  // added to / overriding the environment
  bool clean_env = false;                  // start from an empty environment (plus `env`)
  std::optional<std::filesystem::path> cwd;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  std::optional<std::string> input;        // written to the program's stdin (unset: /dev/null)
};

struct Captured {
  int status = -1;     // exit status; -1 when killed by a signal or timed out
  bool timed_out = false;
  // archbuild was asked to stop (a signal under an InterruptGuard: Ctrl-C in `wheel`) and
  // killed the program: the caller stops as well.
  bool interrupted = false;
  std::string out;
  std::string err;
};

// Error (exit 3) only when the program cannot be started (not found, not executable).
Result<Captured> capture(const std::vector<std::string>& argv, const CaptureOptions& options = {});

// Absolute path of `name` on PATH (or `name` itself when it contains a '/'), if executable.
std::optional<std::filesystem::path> find_program(const std::string& name);

}  // namespace archbuild::run
