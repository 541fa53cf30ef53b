// Strict TOML reading: every error names file:line:column and what was expected, and unknown
// keys are errors (a typo must never be silently ignored). Shared by every data file loader.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "core/error.hpp"

namespace archbuild::tomlx {

// Parse a file; a syntax error becomes "FILE:LINE:COL: MESSAGE" (exit 2).
Result<toml::table> parse_file(const std::filesystem::path& path);
Result<toml::table> parse_string(std::string_view text, const std::string& source_name);

// "FILE:LINE:COL" of a node (falls back to the file name when the node has no source).
std::string where(const toml::node& node, const std::string& file);

// Reads keys of one table, remembering which it used, so that `finish()` can reject the rest.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string file, std::string context);

  std::optional<std::string> string(std::string_view key, bool required = false);
  std::optional<std::int64_t> integer(std::string_view key, bool required = false);
  std::optional<bool> boolean(std::string_view key, bool required = false);
  std::optional<std::vector<std::string>> strings(std::string_view key, bool required = false);
  const toml::table* table(std::string_view key, bool required = false);
  const toml::array* array(std::string_view key, bool required = false);
  // Marks a key as known without reading it (the caller handles it itself).
  const toml::node* node(std::string_view key);

  // Error naming the location of `key` (or of the table when the key is absent).
  Error error_at(std::string_view key, const std::string& message) const;
  Error error_at(const toml::node& node, const std::string& message) const;
  // First unknown key, as an error listing the valid ones; nullopt when all keys were read.
  std::optional<Error> finish() const;
  // Throws Failure on the first error recorded by the typed getters (wrong type, missing key).
  void raise_if_failed() const;
  const std::optional<Error>& failure() const { return failure_; }

  const std::string& file() const { return file_; }
  const toml::table& raw() const { return table_; }

 private:
  const toml::node* lookup(std::string_view key, bool required);
  void fail(Error e);

  const toml::table& table_;
  std::string file_;
  std::string context_;
  std::vector<std::string> known_;
  std::optional<Error> failure_;
};

}  // namespace archbuild::tomlx
