#include "cli/context.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "core/text.hpp"
#include "core/version.hpp"

namespace archbuild::cli {

void add_json_flag(CLI::App& cmd, Context& ctx) {
  cmd.add_flag("--json", ctx.json, "Print one JSON document on stdout");
}

void refuse_empty_values(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size_max() == 0) continue;  // a flag
    // What it takes, as its help says it (up to the first ';').
    std::string takes = opt->get_description();
    if (auto semi = takes.find("; "); semi != std::string::npos) takes.resize(semi);
    opt->check(CLI::Validator(
        [takes](std::string& value) {
          return value.empty() ? "the value is empty; it takes: " + takes : std::string();
        },
        ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_empty_values(*sub);
}

const CLI::Validator& driver_version_check() {
  static const CLI::Validator check(
      [](std::string& value) {
        auto v = Version::parse(value);
        if (v && v->size() > 3)
          return text::printable(value, 64) + " has " + std::to_string(v->size()) +
                 " numbers: a driver version has two or three, like 570.86 or 580.65.06";
        return std::string();
      },
      "");
  return check;
}

const CLI::Validator& name_check() {
  static const CLI::Validator check(
      [](std::string& value) {
        bool control = std::any_of(value.begin(), value.end(), [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
        });
        return control ? text::quoted(value, 200) + " holds a control character; give a name as text, e.g. \"RTX 5090\""
                       : std::string();
      },
      "");
  return check;
}

// Strings in a document may be bytes that are not UTF-8 (a file name, an environment value):
// JSON cannot carry them, so each invalid byte becomes U+FFFD instead of an exception that
// ended the command as an "internal error".
void print_json(const nlohmann::json& doc) {
  std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

// Every line printed goes through text::one_line: a value read from a recipe, the environment or
// a file can neither reach the terminal as an escape sequence nor start a line of its own.
void out(const std::string& line) { std::cout << text::one_line(line) << '\n'; }

}  // namespace archbuild::cli
