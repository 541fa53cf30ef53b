// archbuild matrix --sm LIST [--recipe NAME|FILE|PACKAGE] [--format text|json|github] [--json]
// Expands targets × recipes × CUDA into the build jobs resolution accepts, for nightly CI: each
// CC of --sm on its own, each candidate recipe (abstract ones skipped), each CUDA it supports.
// Every job is resolved against this host as discovered, except that a missing tool (the
// toolkit, a compiler, Python) does not refuse a job — the CI runner installs it. Refusals
// (bad input: toolkit-arch, arch-syntax, …) are listed with the rule that failed.
//
// --format github prints exactly the `strategy.matrix` value, on one line, for fromJSON():
//   {"include":[{"sm":"9.0","recipe":"torch-2.9","torch":"2.9.1","cuda":"13.0","arch_list":"9.0"}]}
// --format json (or --json): {"include":[…], "refused":[{"sm","recipe","cuda","rule","message"}],
//   "needs_install":[{"sm","recipe","cuda","message"}]}
// --platform x86_64,sbsa: jobs for each platform, each with "platform" and "runs_on" (the
//   platform's hosted runner label, toolchains/platforms.toml) in its object.
// --store URL (or $ARCHBUILD_STORE; docs/store.md): each accepted job whose tools are here gets
//   its key computed as `wheel` computes it (the tree fetched into the cache's mirrors, the build
//   venv) and looked up; a job the store has is listed under "stored" (key, digest) instead of
//   "include", so a night whose keys are all stored starts no build job. A job whose key cannot
//   be computed here (a tool missing) stays in "include" with "store": {"checked": false, "why"}.
// --format keys prints the stored jobs' keys, comma-separated, on one line: what the nightly
//   workflow's publish job gives `publish --key` so that keys other hosts pushed reach the mirror.
// Exit: 0 at least one job, or every accepted job in the store; 1 no job accepted; 2 bad input.
#include <fmt/format.h>

#include "app/matrix.hpp"
#include "cli/context.hpp"
#include "cli/store_common.hpp"
#include "core/text.hpp"

namespace archbuild::cli {

namespace {

struct MatrixArgs {
  app::MatrixRequest request;
  std::string format = "text";
};

void run_matrix(const MatrixArgs& a, Context& ctx) {
  if (a.format == "json") ctx.json = true;
  const app::Matrix m = app::expand_matrix(a.request, ctx);
  ctx.exit = m.exit();
  if (a.format == "github") {
    // One line, nothing else on stdout: `echo "matrix=$(archbuild matrix … --format github)"`.
    // Every key stored: an empty include, which the workflow skips (a job count of 0).
    out(m.github().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    if (m.exit() != Exit::ok) warn(ctx, "matrix: no combination was accepted (see --format json for the refusals)");
    return;
  }
  if (a.format == "keys") {
    std::vector<std::string> keys;
    for (const auto& j : m.stored) keys.push_back(j.key);
    out(text::join(keys, ","));
    return;
  }
  if (ctx.json) {
    print_json(m.to_json());
    return;
  }
  out(fmt::format("{} job(s):", m.include.size()));
  for (const auto& j : m.include)
    out(fmt::format("  sm {:<7} {:<16} torch {:<7} CUDA {:<5} arch list {}{}", j.sm, j.recipe, j.torch, j.cuda, j.arch_list,
                    j.platform.empty() ? std::string() : fmt::format("  on {} ({})", j.platform, j.runs_on)));
  if (!m.refused.empty()) {
    out(fmt::format("{} refused:", m.refused.size()));
    for (const auto& j : m.refused)
      out(fmt::format("  sm {:<7} {:<16} CUDA {:<5} {:<14} {}", j.sm, j.recipe, j.cuda, j.rule, j.message));
  }
  if (!m.needs.empty() && ctx.verbosity <= 0)
    note(ctx, fmt::format("note: {} job(s) need a tool this host lacks (a CUDA toolkit, Python modules); accepted, "
                          "since CI installs them (-v lists them)",
                          m.needs.size()));
  for (const auto& j : m.needs)
    if (ctx.verbosity > 0)
      note(ctx, fmt::format("note: sm {} {} CUDA {}: {} (accepted: CI installs it)", j.sm, j.recipe, j.cuda, j.message));
  if (!m.stored.empty()) {
    out(fmt::format("{} in the build store (no job):", m.stored.size()));
    for (const auto& j : m.stored)
      out(fmt::format("  sm {:<7} {:<16} torch {:<7} CUDA {:<5} key {}", j.sm, j.recipe, j.torch, j.cuda, j.key.substr(0, 16)));
  }
  if (m.exit() != Exit::ok) warn(ctx, "matrix: no combination was accepted");
}

}  // namespace

void add_matrix_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<MatrixArgs>();
  auto* cmd = app.add_subcommand("matrix", "Expand targets x recipes x CUDA into CI build jobs (GitHub Actions matrix)");
  cmd->add_option("--sm", args->request.sm, "Target compute capabilities, each its own job: 90, 12.0, lists 80,90,120")
      ->required();
  cmd->add_option("--recipe", args->request.recipe,
                  "A recipe name (torch-2.7), a package (torchvision) or a recipe file; default: every torch recipe");
  cmd->add_option("--format", args->format, "text (default), json (= --json), github: the strategy.matrix value, or keys: the stored keys for "
                  "`publish --key`")
      ->check(CLI::IsMember({"text", "json", "github", "keys"}));
  cmd->add_option("--platform", args->request.platforms,
                  "Platforms to emit jobs for, each on its CI runner (toolchains/platforms.toml): x86_64,sbsa; "
                  "default: this machine's")
      ->delimiter(',')
      ->type_name("LIST");
  cmd->add_option("--cuda", args->request.cuda, "Only the jobs of this CUDA release (X.Y)");
  cmd->add_option("--source-url", args->request.source_url,
                  "Clone URL or local path of the source (a mirror): where --store computes the jobs' keys from");
  cmd->add_option("--python", args->request.python, "Interpreter of the jobs' keys (X.Y or a path), as `wheel --python`");
  add_store_options(*cmd, args->request.store, false);
  add_json_flag(*cmd, ctx);
  cmd->callback([args, &ctx] { run_matrix(*args, ctx); });
}

}  // namespace archbuild::cli
