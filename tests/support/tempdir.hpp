// A temporary directory removed when the test ends.
#pragma once

#include <filesystem>
#include <string>

namespace archbuild::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& rel) const { return path_ / rel; }
  // Writes `content` to path()/rel, creating parent folders; returns the full path.
  std::filesystem::path write(const std::string& rel, const std::string& content) const;

 private:
  std::filesystem::path path_;
};

std::string read_file(const std::filesystem::path& p);

}  // namespace archbuild::test
