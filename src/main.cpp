// CLI11 wiring only: each command lives in cli/<command>.cpp.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string_view>

#include <CLI/CLI.hpp>

#include "cli/context.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

namespace {

// Each command with the function that adds it, in --help's order.
struct Command {
  std::string_view name;
  void (*add)(CLI::App&, archbuild::cli::Context&);
};
namespace cli = archbuild::cli;
constexpr Command kCommands[] = {
    {"arch", cli::add_arch_command},
    {"gpus", cli::add_gpus_command},
    {"detect", cli::add_detect_command},
    {"wheel", cli::add_wheel_command},
    {"inspect", cli::add_inspect_command},
    {"recipes", cli::add_recipes_command},
    {"resolve", cli::add_resolve_command},
    {"plan", cli::add_plan_command},
    {"validate", cli::add_validate_command},
    {"smoke", cli::add_smoke_command},
    {"doctor", cli::add_doctor_command},
    {"install-command", cli::add_install_command},
    {"publish", cli::add_publish_command},
    {"matrix", cli::add_matrix_command},
    {"cuda-launch", cli::add_cuda_launch_command},
    {"env", cli::add_env_command},
    {"report", cli::add_report_command},
};

// The command on the command line: the first argument that is neither an option nor the value
// of a global option that takes one (as `--cache-dir DIR`).
std::string_view named_command(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--cache-dir" || a == "--color") {
      ++i;
      continue;
    }
    if (a.empty() || a[0] == '-') continue;
    return a;
  }
  return {};
}

// --json anywhere before `--`: a usage error found before (or instead of) parsing it still
// prints its one document.
bool json_asked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") return false;
    if (a == "--json") return true;
  }
  return false;
}

// A standard stream the caller closed (`>&-`) is given /dev/full (stdout, stderr) or /dev/null
// (stdin) before anything is opened: the next file archbuild opened would otherwise take its
// number, and the output meant for stdout would be written into it (a lock, a wheel). Writes to
// /dev/full fail, so the output's loss is then said and the status says so. True: stdout was closed.
bool fill_closed_std_streams() {
  bool stdout_closed = false;
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == 1) stdout_closed = true;
    int opened = ::open(fd == 0 ? "/dev/null" : "/dev/full", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
  return stdout_closed;
}

// What the command printed must have reached stdout: a write that failed (`> /dev/full`, a closed
// stdout) is not success. Exit 3 (the device the output needs is missing), said on stderr; a
// command that already failed keeps its own status.
int with_output_written(int status, bool stdout_closed) {
  errno = 0;
  std::cout.flush();
  int e = errno;
  if (std::cout.good()) return status;  // nothing printed to a closed stdout is nothing lost
  std::cerr << "archbuild: error: standard output "
            << (stdout_closed ? std::string("is closed") : "cannot be written" + (e ? ": " + std::string(std::strerror(e)) : ""))
            << "; what this command printed is lost\n";
  return status == 0 ? static_cast<int>(archbuild::Exit::missing_tool) : status;
}

int run_command(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  const bool stdout_closed = fill_closed_std_streams();
  return with_output_written(run_command(argc, argv), stdout_closed);
}

namespace {

int run_command(int argc, char** argv) {
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

  // Only the command named is built when one is: the others' options are 1.5 ms of every run
  // (mostly first touches of heap pages), which cuda-launch pays once per compile. No command
  // (--help) or a name that is none builds them all, so help and errors list every command;
  // --version alone needs none.
  const std::string_view named = named_command(argc, argv);
  const bool known = std::any_of(std::begin(kCommands), std::end(kCommands),
                                 [&](const Command& c) { return c.name == named; });
  const bool version_only = argc == 2 && std::string_view(argv[1]) == "--version";
  for (const auto& c : kCommands)
    if (!version_only && (!known || c.name == named)) c.add(app, ctx);
  cli::refuse_empty_values(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    // Usage errors are bad input (exit 2), printed as one line plus CLI11's hint.
    std::cerr << "archbuild: error: " << archbuild::text::printable(e.what()) << "\n"
              << "Run with --help for the options.\n";
    if (ctx.json || json_asked(argc, argv))
      cli::print_json({{"error", text::printable(e.what())}, {"exit", static_cast<int>(Exit::bad_input)}});
    return static_cast<int>(Exit::bad_input);
  } catch (const Failure& f) {
    cli::error_line(ctx, f.error.message);
    if (ctx.json)
      cli::print_json({{"error", text::printable(f.error.message)}, {"exit", static_cast<int>(f.error.exit)}});
    return static_cast<int>(f.error.exit);
  } catch (const std::exception& e) {
    // Not bad input: no rule decided this. Its own status, and a request for a report, so that a
    // script never takes archbuild's bug for its own mistake.
    const std::string message = std::string("internal error: ") + e.what() +
                                " (a bug in archbuild: please report it with the command line and `archbuild --version`)";
    cli::error_line(ctx, message);
    if (ctx.json || json_asked(argc, argv))
      cli::print_json({{"error", text::printable(message)}, {"exit", static_cast<int>(Exit::internal)}});
    return static_cast<int>(Exit::internal);
  }
  return static_cast<int>(ctx.exit);
}

}  // namespace
