#include "stages/build_path.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace archbuild::stages {

namespace fs = std::filesystem;

namespace {

bool has_any(const std::string& s, std::string_view chars) { return s.find_first_of(chars) != std::string::npos; }

std::optional<std::size_t> source_index(const std::vector<std::string>& argv) {
  for (std::size_t i = 1; i + 1 < argv.size(); ++i)
    if (argv[i] == "-c" || argv[i] == "-dc" || argv[i] == "--compile" || argv[i] == "--device-c") return i + 1;
  // Not an option: the rewrite's own -Xcudafe=--orig_src_path_name=….cu ends in .cu too (a compile
  // and link in one, as Meson's compiler checks run nvcc, has no -c to find the source by).
  for (std::size_t i = argv.size(); i-- > 1;)
    if (!argv[i].starts_with("-") && fs::path(argv[i]).extension() == ".cu") return i;
  return std::nullopt;
}

}  // namespace

std::string prefix_map_flag(const fs::path& tree) {
  return fmt::format("-ffile-prefix-map={}={}", tree.string(), build_path_alias);
}

std::vector<std::string> cuda_compile_args(std::vector<std::string> argv, const fs::path& cwd, const fs::path& tree) {
  auto at = source_index(argv);
  if (!at) return argv;
  fs::path source(argv[*at]);
  if (source.is_relative()) source = cwd / source;
  source = source.lexically_normal();
  fs::path rel = source.lexically_relative(tree.lexically_normal());
  if (rel.empty() || *rel.begin() == "..") return argv;
  if (has_any(source.string(), ",") || has_any(tree.string(), ",")) return argv;
  argv.push_back(fmt::format("-Xcudafe=--orig_src_path_name={}/{}", build_path_alias, rel.generic_string()));
  argv.push_back("-Xcompiler=" + prefix_map_flag(tree.lexically_normal()));
  bool has_output = std::find(argv.begin(), argv.end(), "-o") != argv.end() ||
                    std::any_of(argv.begin(), argv.end(), [](const std::string& a) { return a.starts_with("--output-file"); });
  bool has_objtemp = std::find(argv.begin(), argv.end(), "-objtemp") != argv.end() ||
                     std::find(argv.begin(), argv.end(), "--objdir-as-tempdir") != argv.end();
  if (has_output && !has_objtemp) argv.push_back("--objdir-as-tempdir");
  return argv;
}

std::optional<std::string> compile_source(const std::vector<std::string>& argv, const fs::path& cwd,
                                          const fs::path& tree) {
  auto at = source_index(argv);
  if (!at) return std::nullopt;
  fs::path source(argv[*at]);
  if (source.is_relative()) source = cwd / source;
  source = source.lexically_normal();
  fs::path rel = source.lexically_relative(tree.lexically_normal());
  if (rel.empty() || *rel.begin() == "..") return argv[*at];
  return rel.generic_string();
}

std::optional<std::string> cuda_launcher(const fs::path& archbuild_exe, const fs::path& tree, const std::string& existing) {
  return compile_launcher(archbuild_exe, tree, "CUDA", {}, existing);
}

std::optional<std::string> compile_launcher(const fs::path& archbuild_exe, const fs::path& tree, std::string_view lang,
                                            const fs::path& admission, const std::string& existing) {
  if (archbuild_exe.empty() || has_any(archbuild_exe.string(), ";") || has_any(tree.string(), ";,") ||
      has_any(admission.string(), ";"))
    return std::nullopt;
  std::string list = fmt::format("{};cuda-launch", archbuild_exe.string());
  if (lang != "CUDA") list += fmt::format(";--lang;{}", lang);
  list += fmt::format(";--tree;{}", tree.lexically_normal().string());
  if (!admission.empty()) list += fmt::format(";--admission;{}", admission.lexically_normal().string());
  list += ";--";
  if (!existing.empty()) list += ";" + existing;
  return list;
}

}  // namespace archbuild::stages
