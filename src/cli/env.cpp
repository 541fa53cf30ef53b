// archbuild env --sm LIST [--for PROJECT] [--format shell|dotenv|json|github] [--constraints FILE]
// [--python PY]: the environment that builds a CUDA extension for exactly those archs with the
// installed toolkit. Gathers the facts (toolkit, compilers, the Python's torch, recipes, memory)
// and prints extenv's answer; the decisions are extenv's.
#include <fstream>

#include <fmt/format.h>

#include "cli/context.hpp"
#include "app/inputs.hpp"
#include "app/torch.hpp"
#include "doctor/doctor.hpp"
#include "extenv/extenv.hpp"
#include "plan/resolve.hpp"
#include "store/atomic_file.hpp"

namespace archbuild::cli {

namespace {

namespace fs = std::filesystem;

struct EnvArgs {
  std::vector<std::string> sm;
  std::string project;
  std::string format = "shell";
  std::string constraints;
  std::string python = "python3";
};

// --for NAME|FILE|PACKAGE: a recipe; a package name means its newest recipe.
recipe::Recipe project_recipe(const std::string& arg, const app::Facts& facts) {
  auto rs = plan::select_recipes(arg, facts.recipes(), facts.search());
  if (!rs) throw Failure(Error{rs.error().exit, "--for: " + rs.error().message});
  const recipe::Recipe* best = nullptr;
  for (const auto& r : *rs)
    if (!best || r.version > best->version) best = &r;
  if (!best) throw Failure(Error::bad_input(fmt::format("--for {}: no recipe", arg)));
  return *best;
}

void run_env(const EnvArgs& a, Context& ctx) {
  const app::Facts& facts = ctx.facts();
  auto targets = app::sm_targets(a.sm, facts.arch());
  if (!targets) throw Failure(targets.error());
  extenv::Request req;
  req.targets = *targets;
  if (!a.project.empty()) req.project = project_recipe(a.project, facts);

  extenv::Inputs in;
  in.recipes = facts.recipes();
  in.toolchains = facts.toolchains();
  in.arch = &facts.arch();
  auto host_env = toolchain::HostEnv::current();
  auto probe = app::tool_probe();
  auto toolkits = toolchain::discover_toolkits(host_env, probe);
  if (!toolkits.empty()) in.toolkit = toolkits.front();
  in.compilers = toolchain::discover_compilers(host_env, probe);
  in.torch = app::torch_version_seen(a.python);
  in.host = plan::HostResources::current();

  auto env = extenv::compute(req, in).take();
  for (const auto& n : env.notes) note(ctx, n);
  note(ctx, fmt::format("TORCH_CUDA_ARCH_LIST in the {} grammar of {}", env.grammar, env.grammar_of));

  if (!a.constraints.empty()) {
    std::string text = extenv::constraints(env).take();
    if (auto e = store::write_file_atomic(a.constraints, text); !e)
      throw Failure(Error::bad_input(fmt::format("--constraints {}: {}", a.constraints, e.error().message)));
    note(ctx, fmt::format("wrote {}: {}", a.constraints, text.substr(0, text.size() - 1)));
  }

  std::string format = ctx.json ? "json" : a.format;
  if (format == "json") {
    auto doc = extenv::to_json(env);
    doc["constraints"] = a.constraints.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.constraints);
    print_json(doc);
  } else if (format == "dotenv") {
    std::cout << extenv::to_dotenv(env);
  } else if (format == "github") {
    std::cout << extenv::to_github(env);
  } else {
    std::cout << extenv::to_shell(env);
  }
}

}  // namespace

void add_env_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<EnvArgs>();
  auto* cmd = app.add_subcommand("env", "The environment that builds a CUDA extension for exactly these archs "
                                        "(TORCH_CUDA_ARCH_LIST, FLASH_ATTN_CUDA_ARCHS, MAX_JOBS, CUDA_HOME …)");
  cmd->add_option("--sm", args->sm, "Target archs: 90, 8.6, sm_120, 80,90")->required()->type_name("LIST");
  cmd->add_option("--for", args->project,
                  "The project: a recipe (flash-attn-2.8, torch-2.14), a package (flash-attn, torch) or a recipe file")
      ->type_name("PROJECT");
  cmd->add_option("--format", args->format, "shell (export lines), dotenv, json or github ($GITHUB_ENV)")
      ->check(CLI::IsMember({"shell", "dotenv", "json", "github"}));
  cmd->add_option("--constraints", args->constraints,
                  "Write torch==<installed version> to FILE for `pip install --no-build-isolation -c FILE`")
      ->type_name("FILE");
  cmd->add_option("--python", args->python, "The interpreter whose torch the extension builds against (default python3)")
      ->type_name("PY");
  add_json_flag(*cmd, ctx);
  cmd->callback([args, &ctx] { run_env(*args, ctx); });
}

}  // namespace archbuild::cli
