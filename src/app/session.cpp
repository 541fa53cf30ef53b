#include "app/session.hpp"

#include <cstdlib>
#include <unistd.h>

#include "core/data_dir.hpp"
#include "core/text.hpp"

namespace archbuild::app {

const Facts& Session::facts() const {
  if (!shared_facts) shared_facts = std::make_shared<const Facts>(data_root());
  return *shared_facts;
}

bool Session::color_enabled() const {
  if (color == "always") return true;
  if (color == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  return (!no_color || !*no_color) && err == &std::cerr && isatty(STDERR_FILENO) != 0;
}

void note(const Session& s, const std::string& line) {
  if (s.verbosity >= 0) *s.err << line << '\n';
}

void warn(const Session& s, const std::string& line) {
  if (s.color_enabled())
    *s.err << "\033[33mwarning:\033[0m " << text::printable(line) << '\n';
  else
    *s.err << "warning: " << text::printable(line) << '\n';
}

void error_line(const Session& s, const std::string& line) {
  if (s.color_enabled())
    *s.err << "\033[31marchbuild: error:\033[0m " << text::printable(line) << '\n';
  else
    *s.err << "archbuild: error: " << text::printable(line) << '\n';
}

}  // namespace archbuild::app
