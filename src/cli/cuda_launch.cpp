// `archbuild cuda-launch --tree DIR -- [ccache] nvcc ARGS…`: the CUDA compiler launcher the
// wheel pipeline puts in CMAKE_CUDA_COMPILER_LAUNCHER (hidden from --help: builds run it, people
// do not). It adds what keeps DIR out of the object (stages/build_path.hpp) and execs the rest.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/context.hpp"
#include "run/admission.hpp"
#include "run/exec.hpp"
#include "stages/build_path.hpp"

namespace archbuild::cli {

namespace {

struct CudaLaunchArgs {
  std::filesystem::path tree;
  std::vector<std::string> command;
  std::filesystem::path admission;  // shared admission state of the build; empty: exec at once
  std::uint64_t budget_mb = 0;
  std::uint64_t expect_mb = 0;       // the recipe's figure for this kind of compile
  std::filesystem::path peaks;       // measured peaks of earlier builds, appended to
};

// Admitted by memory, run as a child (exec could not measure its peak), recorded. Returns the
// compiler's exit status.
int launch_admitted(const CudaLaunchArgs& args, const std::vector<std::string>& argv, const std::filesystem::path& cwd) {
  std::string source = stages::compile_source(argv, cwd, args.tree).value_or("");
  std::uint64_t need = args.expect_mb;
  if (!args.peaks.empty() && !source.empty())
    if (auto measured = run::measured_peak_mb(args.peaks, source)) need = *measured;
  run::AdmissionRequest req{args.admission, args.budget_mb, need};
  auto admitted = run::admit(req).take();
  auto ran = run::run_measured(argv).take();
  if (!args.peaks.empty())
    run::append_record(args.peaks, {source, ran.max_rss_kb, static_cast<std::uint64_t>(admitted.waited().count()),
                                    ran.exit_code});
  return ran.exit_code;
}

}  // namespace

void add_cuda_launch_command(CLI::App& app, Context& /*ctx*/) {
  auto args = std::make_shared<CudaLaunchArgs>();
  auto* cmd = app.add_subcommand("cuda-launch", "Compiler launcher used by `wheel` (keeps the build path out of objects; admits compiles by memory)");
  cmd->group("");  // internal: hidden from --help
  cmd->add_option("--tree", args->tree, "The build tree whose path is replaced by " + std::string(stages::build_path_alias))
      ->required();
  cmd->add_option("command", args->command, "The compile command: [launcher…] nvcc arguments…")->required();
  cmd->add_option("--admission", args->admission, "Shared admission directory of the build (admit by memory)");
  cmd->add_option("--memory-budget-mb", args->budget_mb, "Memory all admitted compiles may use together (MB)");
  cmd->add_option("--expect-mb", args->expect_mb, "Expected peak of this compile when none was measured (MB)");
  cmd->add_option("--peaks", args->peaks, "File of measured peaks: read for the expectation, appended after the compile");
  cmd->callback([args] {
    std::error_code ec;
    auto cwd = std::filesystem::current_path(ec);
    auto argv = stages::cuda_compile_args(args->command, cwd, args->tree);
    if (args->admission.empty()) throw Failure(run::exec_replace(argv));
    int code = launch_admitted(*args, argv, cwd);
    std::fflush(nullptr);
    std::exit(code);
  });
}

}  // namespace archbuild::cli
