#include "cli/context.hpp"

#include <cstdio>
#include <iostream>
#include <unistd.h>

#include "core/text.hpp"

namespace archbuild::cli {

bool Context::color_enabled() const {
  if (color == "always") return true;
  if (color == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  return (!no_color || !*no_color) && isatty(STDERR_FILENO) != 0;
}

void add_json_flag(CLI::App& cmd, Context& ctx) {
  cmd.add_flag("--json", ctx.json, "Print one JSON document on stdout");
}

void print_json(const nlohmann::json& doc) { std::cout << doc.dump(2) << std::endl; }

void out(const std::string& line) { std::cout << line << '\n'; }

void note(const Context& ctx, const std::string& line) {
  if (ctx.verbosity >= 0) std::cerr << line << '\n';
}

// Warnings and errors often carry what the user typed (or a file's content): whatever a message
// forgot to quote, no escape sequence reaches the terminal and no line runs to megabytes.
void warn(const Context& ctx, const std::string& line) {
  if (ctx.color_enabled())
    std::cerr << "\033[33mwarning:\033[0m " << text::printable(line) << '\n';
  else
    std::cerr << "warning: " << text::printable(line) << '\n';
}

void error_line(const Context& ctx, const std::string& line) {
  if (ctx.color_enabled())
    std::cerr << "\033[31marchbuild: error:\033[0m " << text::printable(line) << '\n';
  else
    std::cerr << "archbuild: error: " << text::printable(line) << '\n';
}

}  // namespace archbuild::cli
