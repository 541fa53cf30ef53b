// archbuild wheel --sm LIST [--python X.Y,X.Y…] [resolve options] [--out DIR] [--jobs N] [--offline]
//   [--compiler-cache ccache|sccache|none] [--progress auto|tty|plain|json] [--no-validate] [--json]
// Resolve → plan → fetch → configure → build → package → validate → the wheel in --out
// (app::build_wheels); with --with, or a recipe that builds against torch, the set (app::build_set).
#include <fmt/format.h>

#include "app/build.hpp"
#include "app/set.hpp"
#include "cli/resolve_common.hpp"
#include "cli/store_common.hpp"
#include "cli/validate_common.hpp"
#include "core/text.hpp"

namespace archbuild::cli {

namespace {

struct WheelArgs {
  app::BuildArgs build;
  std::vector<std::string> with;  // --with torchvision,torchaudio (app/set)
};

void run_wheel(const WheelArgs& args, Context& ctx) {
  app::Show show;
  show.report = [&ctx](const validate::Report& r) { print_report(r, ctx); };
  show.built = [](const app::BuildOutcome& o) { out(o.wheel.string()); };
  auto refused = [&ctx](const plan::Resolution& r) { print_resolution(r, ctx); };
  if (app::asks_for_set(args.build.resolve, args.with, ctx.facts())) {
    app::SetOutcome set = app::build_set(args.build, args.with, ctx, show, refused);
    if (ctx.json) print_json(set.doc);
    if (set.error) ctx.exit = set.error->exit;
    return;
  }
  app::WheelsOutcome w = app::build_wheels(args.build, ctx, show, refused);
  if (!w.several && w.error && !ctx.json) throw Failure(*w.error);
  if (ctx.json) print_json(w.doc);
  if (!w.error) return;
  if (!w.several) error_line(ctx, w.error->message);
  ctx.exit = w.error->exit;
}

}  // namespace

void add_wheel_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<WheelArgs>();
  auto* cmd = app.add_subcommand("wheel", "Build a wheel for the target archs: fetch, configure, build, package, validate");
  add_resolve_options(*cmd, args->build.resolve);
  cmd->get_option("--python")
      ->description("The build interpreters, comma-separated: versions (3.12: python3.12 on PATH, pyenv's "
                    "~/.pyenv/versions/3.12.*, /usr/bin) or paths; one wheel each, the compiled objects reused "
                    "through the compiler cache (default: python3 on PATH)");
  cmd->add_option("--out", args->build.out, "Directory for the finished wheel (default: dist)");
  cmd->add_option("--jobs,-j", args->build.jobs, "Parallel jobs (default: from cores and memory; see `archbuild plan`)")
      ->check(CLI::Range(1u, 1024u));
  cmd->add_flag("--offline", args->build.offline, "Use only the cache's git mirrors, and give the build venv's pip no index (--find-links only); never connect");
  add_plan_options(*cmd, args->build.resolve);
  cmd->add_option("--compiler-cache", args->build.compiler_cache, "Compiler launcher: ccache (default), sccache or none")
      ->check(CLI::IsMember({"ccache", "sccache", "none"}));
  cmd->add_option("--remote-cache", args->build.remote_cache,
                  "Shared compiler cache for all build hosts, e.g. redis://cache.internal:6379 (default: "
                  "$ARCHBUILD_REMOTE_CACHE)");
  cmd->add_option("--progress", args->build.progress, "Progress on stderr: auto, tty, plain or json")
      ->check(CLI::IsMember({"auto", "tty", "plain", "json"}));
  cmd->add_flag("--no-validate", args->build.no_validate, "Skip the validate stage");
  cmd->add_flag("--check-reproducible", args->build.check_reproducible,
                "Build the same plan a second time in another cache directory and compare the wheels (exit 1 and "
                "the differing members when they differ)");
  cmd->add_option("--trace", args->build.trace, "After the build, write it as Chrome trace JSON (as `report --trace`)");
  cmd->add_option("--with", args->with, "Build these against the torch of this command, after it: torchvision,torchaudio "
                  "(recipe names, packages or files; each paired with the torch by its recipe)");
  add_store_options(*cmd, args->build.store, true);
  add_json_flag(*cmd, ctx);
  cmd->callback([args, &ctx] {
    try {
      run_wheel(*args, ctx);
    } catch (const Failure& f) {
      if (!ctx.json) throw;
      // Before any build: the document of a failed wheel all the same (the key is not known yet).
      error_line(ctx, f.error.message);
      print_json({{"ok", false}, {"key", nullptr}, {"error", text::printable(f.error.message)},
                  {"exit", static_cast<int>(f.error.exit)}});
      ctx.exit = f.error.exit;
    }
  });
}

}  // namespace archbuild::cli
