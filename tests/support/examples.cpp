#include "support/examples.hpp"

namespace archbuild::test {

namespace fs = std::filesystem;

fs::path copy_examples(const TempDir& dir, const fs::path& source) {
  fs::path to = dir / "examples";
  fs::create_directories(to);
  for (const char* p : {"minitorch", "minitorch-dep"})
    fs::copy(source / "examples" / p, to / p, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  std::error_code ec;
  for (const char* out : {"build", "dist"}) fs::remove_all(to / "minitorch" / out, ec);
  return to / "minitorch";
}

}  // namespace archbuild::test
