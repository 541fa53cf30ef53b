// The torch release lines as the data says them, for tests that must not name the newest one: a
// new recipe (recipes/torch-X.Y.toml) or a new row of data/torch-releases.toml changes what they
// expect, not the tests.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace archbuild::test {

struct TorchLine {
  std::string recipe;   // "torch-2.15"
  std::string version;  // "2.15.0", the recipe's `version`
  std::string line;     // "2.15"
};

// Every torch recipe's line under root/recipes (torch-X.Y.toml with its own `version`), oldest first.
std::vector<TorchLine> torch_lines(const std::filesystem::path& root = ARCHBUILD_SOURCE_DIR);
// The newest of them: what resolution picks when nothing narrows it.
TorchLine newest_torch(const std::filesystem::path& root = ARCHBUILD_SOURCE_DIR);

// The newest row of root/data/torch-releases.toml that records official wheels (a `cuda` list).
struct OfficialLine {
  std::string line;                        // "2.15"
  std::string latest;                      // "2.15.0" (`latest`; else the line and ".*")
  std::optional<std::string> torchvision;  // "0.30"
  std::optional<std::string> torchaudio;
  std::string requirements() const;        // pip's: torch==2.15.0 "torchvision==0.30.*"
};
OfficialLine newest_official(const std::filesystem::path& root = ARCHBUILD_SOURCE_DIR);

// Every torch recipe of root/recipes copied into `to`/recipes, with data/ and toolchains/: a data
// root (ARCHBUILD_DATA_DIR) a test may add to.
void copy_data_root(const std::filesystem::path& to, const std::filesystem::path& root = ARCHBUILD_SOURCE_DIR);

}  // namespace archbuild::test
