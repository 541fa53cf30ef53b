#include "run/exec.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace archbuild::run {

Error exec_replace(const std::vector<std::string>& argv) {
  if (argv.empty()) return Error::bad_input("no command to run");
  std::vector<char*> raw;
  raw.reserve(argv.size() + 1);
  for (const auto& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
  raw.push_back(nullptr);
  ::execvp(raw[0], raw.data());
  int err = errno;
  std::string what = fmt::format("cannot run {}: {}", argv[0], std::strerror(err));
  return err == ENOENT ? Error::missing_tool(what) : Error::bad_input(what);
}

}  // namespace archbuild::run
