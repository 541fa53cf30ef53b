// `archbuild cuda-launch [--lang C|CXX|CUDA] --tree DIR [--admission ADIR] -- [ccache] COMPILER ARGS…`:
// the compiler launcher the wheel pipeline puts in CMAKE_<LANG>_COMPILER_LAUNCHER (hidden from
// --help: builds run it, people do not). For CUDA it adds what keeps DIR out of the object
// (stages/build_path.hpp); with --admission it waits until the compile's expected peak memory
// fits the build's budget (run/admission.hpp), runs it and records its measured peak; without,
// it execs the rest.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/context.hpp"
#include "run/admission.hpp"
#include "run/exec.hpp"
#include "stages/build_path.hpp"

namespace archbuild::cli {

namespace {

struct CudaLaunchArgs {
  std::filesystem::path tree;
  std::string lang = "CUDA";         // C, CXX or CUDA: only CUDA compiles are rewritten
  std::vector<std::string> command;
  std::filesystem::path admission;  // shared admission state of the build; empty: exec at once
  std::uint64_t budget_mb = 0;       // overrides DIR/config.json
  std::uint64_t expect_mb = 0;       // the figure for this compile when none was measured
  std::filesystem::path peaks;       // measured peaks, read and appended (instead of config.json's)
};

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The compile's output as written after -o / --output-file (ninja's name for the target).
std::string compile_output(const std::vector<std::string>& argv) {
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if ((argv[i] == "-o" || argv[i] == "--output-file") && i + 1 < argv.size()) return argv[i + 1];
    if (argv[i].starts_with("--output-file=")) return argv[i].substr(14);
  }
  return "";
}

// Admitted by memory, run as a child (exec could not measure its peak), recorded. Returns the
// compiler's exit status.
int launch_admitted(const CudaLaunchArgs& args, const std::vector<std::string>& argv, const std::filesystem::path& cwd) {
  run::AdmissionConfig config;
  if (std::filesystem::exists(run::config_path(args.admission))) config = run::read_config(args.admission).take();
  if (args.budget_mb) config.budget_mb = args.budget_mb;
  if (!args.peaks.empty()) config.peaks = config.records = args.peaks;
  std::string source = stages::compile_source(argv, cwd, args.tree).value_or("");
  std::optional<run::Measurement> measured;
  if (!config.peaks.empty() && !source.empty()) measured = run::measured(config.peaks, source);
  unsigned threads = 1;
  if (args.lang == "CUDA")
    threads = run::nvcc_threads(argv, env_or_empty("NVCC_PREPEND_FLAGS") + " " + env_or_empty("NVCC_APPEND_FLAGS"),
                                std::thread::hardware_concurrency());
  run::Expected expected = run::expected_peak(config.figures, args.lang, source, threads, measured);
  if (!measured && args.expect_mb) expected = {args.expect_mb, "--expect-mb"};
  run::AdmissionRequest req{args.admission, config.budget_mb, expected.mb};
  req.expect_ms = measured ? measured->wall_ms : 0;  // admission packs the longest work first
  auto admitted = run::admit(req).take();
  const auto start = std::chrono::steady_clock::now();
  auto ran = run::run_measured(argv).take();
  const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  if (!config.records.empty())
    run::append_record(config.records, {source, ran.max_rss_kb, static_cast<std::uint64_t>(admitted.waited().count()),
                                        ran.exit_code, compile_output(argv), expected.mb, expected.basis, args.lang,
                                        static_cast<std::uint64_t>(wall.count()), threads});
  return ran.exit_code;
}

}  // namespace

void add_cuda_launch_command(CLI::App& app, Context& /*ctx*/) {
  auto args = std::make_shared<CudaLaunchArgs>();
  auto* cmd = app.add_subcommand("cuda-launch", "Compiler launcher used by `wheel` (keeps the build path out of CUDA objects; admits compiles by memory)");
  cmd->group("");  // internal: hidden from --help
  cmd->add_option("--tree", args->tree, "The build tree whose path is replaced by " + std::string(stages::build_path_alias))
      ->required();
  cmd->add_option("--lang", args->lang, "The compile's language: C, CXX or CUDA (default; only CUDA compiles are rewritten)")
      ->check(CLI::IsMember({"C", "CXX", "CUDA"}));
  cmd->add_option("command", args->command, "The compile command: [launcher…] compiler arguments…")->required();
  cmd->add_option("--admission", args->admission, "Shared admission directory of the build (admit by memory; settings in its config.json)");
  cmd->add_option("--memory-budget-mb", args->budget_mb, "Memory all admitted compiles may use together (MB)");
  cmd->add_option("--expect-mb", args->expect_mb, "Expected peak of this compile when none was measured (MB)");
  cmd->add_option("--peaks", args->peaks, "File of measured peaks: read for the expectation, appended after the compile");
  cmd->callback([args] {
    std::error_code ec;
    auto cwd = std::filesystem::current_path(ec);
    auto argv = args->lang == "CUDA" ? stages::cuda_compile_args(args->command, cwd, args->tree) : args->command;
    if (args->admission.empty()) throw Failure(run::exec_replace(argv));
    int code = launch_admitted(*args, argv, cwd);
    std::fflush(nullptr);
    std::exit(code);
  });
}

}  // namespace archbuild::cli
