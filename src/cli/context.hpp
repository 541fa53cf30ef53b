// What every command shares: global options, output conventions (stdout for results, one JSON
// document with --json; stderr for humans), and the exit status.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/session.hpp"
#include "core/error.hpp"

namespace archbuild::cli {

// The shared options (--cache-dir, --color, -v/-q, --json) are the app's Session, which the
// operations are given; the command adds its exit status.
struct Context : app::Session {
  Exit exit = Exit::ok;  // set by the command that ran
};

// Adds the per-command --json flag (same meaning as the global one).
void add_json_flag(CLI::App& cmd, Context& ctx);

// Every option and argument of `app` and its commands that takes a value refuses an empty one
// (exit 2, one line naming it and what it takes): "" is never read as "not given", and no
// command has to remember it (a path "" is the current directory to the file system).
void refuse_empty_values(CLI::App& app);

// --driver VER: an NVIDIA driver has two or three numbers (570.86, 580.65.06); a fourth is a
// typo, not a newer driver. What is no version at all is left to the command's own message.
const CLI::Validator& driver_version_check();

// A name typed by the user (--gpu "RTX 5090", --platform sbsa): no control characters, which
// no name has and which would otherwise be echoed into an error line as they are.
const CLI::Validator& name_check();

// Results: one JSON document on stdout.
void print_json(const nlohmann::json& doc);
// Human text for results on stdout; notes, warnings and errors on stderr.
void out(const std::string& line);
using app::error_line;
using app::note;
using app::warn;

// Every command registers itself with one of these (defined in cli/<command>.cpp).
void add_arch_command(CLI::App& app, Context& ctx);
void add_gpus_command(CLI::App& app, Context& ctx);
void add_detect_command(CLI::App& app, Context& ctx);
void add_wheel_command(CLI::App& app, Context& ctx);
void add_inspect_command(CLI::App& app, Context& ctx);
void add_recipes_command(CLI::App& app, Context& ctx);
void add_resolve_command(CLI::App& app, Context& ctx);
void add_plan_command(CLI::App& app, Context& ctx);
void add_validate_command(CLI::App& app, Context& ctx);
void add_smoke_command(CLI::App& app, Context& ctx);
void add_doctor_command(CLI::App& app, Context& ctx);
void add_install_command(CLI::App& app, Context& ctx);
void add_publish_command(CLI::App& app, Context& ctx);
void add_matrix_command(CLI::App& app, Context& ctx);
void add_cuda_launch_command(CLI::App& app, Context& ctx);
void add_env_command(CLI::App& app, Context& ctx);
void add_report_command(CLI::App& app, Context& ctx);

}  // namespace archbuild::cli
