#include "stages/meson_native.hpp"

#include <vector>

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::stages {

namespace {

// A Meson string literal: single quotes, with backslash and quote escaped.
std::string meson_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

std::vector<std::string> cmake_list(const std::string& list) {
  std::vector<std::string> out;
  std::string item;
  for (char c : list) {
    if (c == ';') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

std::string meson_native_text(const std::map<std::string, std::string>& env) {
  auto get = [&](const std::string& name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  std::string nvcc = get("CUDA_HOME").empty() ? std::string() : get("CUDA_HOME") + "/bin/nvcc";
  struct Lang {
    const char* cmake;  // CMAKE_<LANG>_COMPILER_LAUNCHER
    const char* meson;  // the [binaries] entry
    std::string compiler;
  };
  const Lang langs[] = {{"C", "c", get("CC")}, {"CXX", "cpp", get("CXX")}, {"CUDA", "cuda", nvcc}};
  std::string text =
      "# archbuild's compiler launchers for Meson (written for each run; stages/meson_native.hpp)\n[binaries]\n";
  for (const auto& l : langs) {
    if (l.compiler.empty()) continue;
    std::vector<std::string> entry;
    for (const auto& part : cmake_list(get(fmt::format("CMAKE_{}_COMPILER_LAUNCHER", l.cmake))))
      entry.push_back(meson_string(part));
    entry.push_back(meson_string(l.compiler));
    text += fmt::format("{} = [{}]\n", l.meson, text::join(entry, ", "));
  }
  return text;
}

}  // namespace archbuild::stages
