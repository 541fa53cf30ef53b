#include "core/data_dir.hpp"

#include <cstdlib>
#include <system_error>

namespace archbuild {

namespace fs = std::filesystem;

fs::path data_root() {
  if (const char* env = std::getenv("ARCHBUILD_DATA_DIR"); env && *env) return fs::path(env);
  std::error_code ec;
  fs::path exe = self_executable();
  if (!exe.empty()) {
    fs::path installed = exe.parent_path().parent_path() / "share" / "archbuild";
    if (fs::exists(installed / "data" / "gpus.toml", ec)) return installed;
  }
  return fs::path(ARCHBUILD_SOURCE_ROOT);
}

fs::path self_executable() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

}  // namespace archbuild
