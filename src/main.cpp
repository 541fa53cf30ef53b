// CLI11 wiring only: each command lives in cli/<command>.cpp.
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/context.hpp"
#include "core/error.hpp"

int main(int argc, char** argv) {
  using namespace archbuild;
  cli::Context ctx;
  CLI::App app{"archbuild: PyTorch wheels built for your GPU's compute capability, and proof they run there",
               "archbuild"};
  app.set_version_flag("--version", std::string("archbuild ") + ARCHBUILD_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--cache-dir", ctx.cache_dir, "Cache directory (default $XDG_CACHE_HOME/archbuild)");
  app.add_option("--color", ctx.color, "Colour on stderr")->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_flag_function("-v,--verbose", [&](std::int64_t n) { ctx.verbosity += static_cast<int>(n); },
                        "More detail on stderr");
  app.add_flag_function("-q,--quiet", [&](std::int64_t n) { ctx.verbosity -= static_cast<int>(n); },
                        "Less on stderr");
  app.add_flag("--json", ctx.json, "Print one JSON document on stdout");

  cli::add_arch_command(app, ctx);
  cli::add_gpus_command(app, ctx);
  cli::add_detect_command(app, ctx);
  cli::add_wheel_command(app, ctx);
  cli::add_inspect_command(app, ctx);
  cli::add_recipes_command(app, ctx);
  cli::add_resolve_command(app, ctx);
  cli::add_plan_command(app, ctx);
  cli::add_validate_command(app, ctx);
  cli::add_smoke_command(app, ctx);
  cli::add_doctor_command(app, ctx);
  cli::add_install_command(app, ctx);
  cli::add_publish_command(app, ctx);
  cli::add_matrix_command(app, ctx);
  cli::add_cuda_launch_command(app, ctx);
  cli::add_env_command(app, ctx);
  cli::add_report_command(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    // Usage errors are bad input (exit 2), printed as one line plus CLI11's hint.
    std::cerr << "archbuild: error: " << e.what() << "\n"
              << "Run with --help for the options.\n";
    return static_cast<int>(Exit::bad_input);
  } catch (const Failure& f) {
    cli::error_line(ctx, f.error.message);
    if (ctx.json) cli::print_json({{"error", f.error.message}, {"exit", static_cast<int>(f.error.exit)}});
    return static_cast<int>(f.error.exit);
  } catch (const std::exception& e) {
    cli::error_line(ctx, std::string("internal error: ") + e.what());
    return static_cast<int>(Exit::bad_input);
  }
  return static_cast<int>(ctx.exit);
}
