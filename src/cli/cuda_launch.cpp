// `archbuild cuda-launch --tree DIR -- [ccache] nvcc ARGS…`: the CUDA compiler launcher the
// wheel pipeline puts in CMAKE_CUDA_COMPILER_LAUNCHER (hidden from --help: builds run it, people
// do not). It adds what keeps DIR out of the object (stages/build_path.hpp) and execs the rest.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/context.hpp"
#include "run/exec.hpp"
#include "stages/build_path.hpp"

namespace archbuild::cli {

namespace {

struct CudaLaunchArgs {
  std::filesystem::path tree;
  std::vector<std::string> command;
};

}  // namespace

void add_cuda_launch_command(CLI::App& app, Context& /*ctx*/) {
  auto args = std::make_shared<CudaLaunchArgs>();
  auto* cmd = app.add_subcommand("cuda-launch", "CUDA compiler launcher used by `wheel` (keeps the build path out of objects)");
  cmd->group("");  // internal: hidden from --help
  cmd->add_option("--tree", args->tree, "The build tree whose path is replaced by " + std::string(stages::build_path_alias))
      ->required();
  cmd->add_option("command", args->command, "The compile command: [launcher…] nvcc arguments…")->required();
  cmd->callback([args] {
    std::error_code ec;
    auto cwd = std::filesystem::current_path(ec);
    auto argv = stages::cuda_compile_args(args->command, cwd, args->tree);
    throw Failure(run::exec_replace(argv));
  });
}

}  // namespace archbuild::cli
