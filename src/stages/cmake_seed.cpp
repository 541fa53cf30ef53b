#include "stages/cmake_seed.hpp"

#include <fmt/format.h>

namespace archbuild::stages {

namespace {

// A CMake quoted argument: \ " and $ are the characters it interprets.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"' || c == '$') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

bool forwarded_to_cmake(const std::string& name) {
  for (const char* prefix : {"CMAKE_", "USE_", "BUILD_"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

std::optional<std::string> cmake_seed_text(const std::map<std::string, std::string>& env) {
  std::string sets;
  for (const auto& [name, value] : env)
    if (name != "CMAKE_TOOLCHAIN_FILE" && forwarded_to_cmake(name) && value.find(';') != std::string::npos)
      sets += fmt::format("set({} {} CACHE STRING \"archbuild\" FORCE)\n", name, quoted(value));
  if (sets.empty()) return std::nullopt;
  std::string text =
      "# Written by archbuild: list values that the tree's own environment forwarding would cut at their\n"
      "# first ';'. Read by CMake through CMAKE_TOOLCHAIN_FILE (also in try_compile projects).\n";
  if (auto it = env.find("CMAKE_TOOLCHAIN_FILE"); it != env.end() && !it->second.empty())
    text += fmt::format("include({})\n", quoted(it->second));
  return text + sets;
}

}  // namespace archbuild::stages
