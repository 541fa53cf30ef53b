// A tiny pure-Python wheel written with libarchive (correct RECORD), for the mirror tests: pip
// installs it, so a mirror can be proven with the real pip.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/sha256.hpp"
#include "validate/wheel_check.hpp"

namespace archbuild::test {

using Members = std::vector<std::pair<std::string, std::string>>;  // name, content

// The members of a tiny pure-Python wheel holding package `module` whose VALUE is `value`,
// RECORD last and correct.
inline Members wheel_members(const std::string& dist, const std::string& version, const std::string& module,
                             const std::string& value = "one") {
  std::string di = dist + "-" + version + ".dist-info/";
  Members members = {
      {module + "/__init__.py", "VALUE = \"" + value + "\"\n"},
      {di + "METADATA", "Metadata-Version: 2.1\nName: " + dist + "\nVersion: " + version + "\n"},
      {di + "WHEEL", "Wheel-Version: 1.0\nGenerator: archbuild-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
      {di + "top_level.txt", module + "\n"},
  };
  std::string record;
  for (const auto& [name, content] : members) {
    Sha256 h;
    h.update(content);
    record += name + "," + validate::record_hash(h.raw()) + "," + std::to_string(content.size()) + "\n";
  }
  record += di + "RECORD,,\n";
  members.emplace_back(di + "RECORD", record);
  return members;
}

// A zip of regular-file members, in this order (names written as given, even hostile ones).
inline void write_zip(const std::filesystem::path& path, const Members& members) {
  std::filesystem::create_directories(path.parent_path());
  archive* a = archive_write_new();
  archive_write_set_format_zip(a);
  if (archive_write_open_filename(a, path.c_str()) != ARCHIVE_OK) throw std::runtime_error("cannot write wheel");
  for (const auto& [name, content] : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    archive_entry_set_mtime(e, 1700000000, 0);
    archive_write_header(a, e);
    archive_write_data(a, content.data(), content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

// Writes DIR/<dist>-<version>-py3-none-any.whl (wheel_members).
inline std::filesystem::path make_wheel(const std::filesystem::path& dir, const std::string& dist,
                                        const std::string& version, const std::string& module,
                                        const std::string& value = "one") {
  auto path = dir / (dist + "-" + version + "-py3-none-any.whl");
  write_zip(path, wheel_members(dist, version, module, value));
  return path;
}

}  // namespace archbuild::test
