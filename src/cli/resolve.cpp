// archbuild resolve --sm LIST [--recipe NAME|FILE] [--torch X.Y] [--cuda X.Y] [--python X.Y]
// [--ptx] [--json]: choose recipe, toolkit, host compiler and arch list, printing every rule.
#include "cli/resolve_common.hpp"

namespace archbuild::cli {

namespace {

void run_resolve(const ResolveArgs& args, Context& ctx) {
  plan::Resolution r = app::resolve_from_args(args, ctx);
  if (ctx.json) {
    auto doc = plan::to_json(r);
    // As every command's failing document: "error" and "exit" beside the resolution's own.
    if (r.status != Exit::ok) {
      doc["error"] = r.message;
      doc["exit"] = static_cast<int>(r.status);
    }
    print_json(doc);
  }
  else
    print_resolution(r, ctx);
  if (r.status != Exit::ok) {
    error_line(ctx, r.message);
    ctx.exit = r.status;
  }
}

}  // namespace

void add_resolve_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ResolveArgs>();
  auto* cmd = app.add_subcommand(
      "resolve", "Choose the recipe, CUDA toolkit, host compiler and arch list for target GPUs, with every rule checked");
  add_resolve_options(*cmd, *args);
  add_json_flag(*cmd, ctx);
  cmd->callback([args, &ctx] { run_resolve(*args, ctx); });
}

}  // namespace archbuild::cli
