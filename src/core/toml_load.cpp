#include "core/toml_load.hpp"

#include "core/path_kind.hpp"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::tomlx {

namespace {

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

}  // namespace

Result<toml::table> parse_string(std::string_view text, const std::string& source_name) {
  try {
    return toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    return Error::bad_input(
        fmt::format("{}:{}:{}: invalid TOML: {}", source_name, b.line, b.column, e.description()));
  }
}

Result<toml::table> parse_file(const std::filesystem::path& path) {
  if (auto is_file = paths::expect_regular_file(path, "TOML file"); !is_file) return is_file.error();
  try {
    return toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    return Error::bad_input(
        fmt::format("{}:{}:{}: invalid TOML: {}", path.string(), b.line, b.column, e.description()));
  }
}

std::string where(const toml::node& node, const std::string& file) {
  const auto& src = node.source();
  if (src.begin.line == 0) return file;
  return fmt::format("{}:{}:{}", file, src.begin.line, src.begin.column);
}

TableReader::TableReader(const toml::table& table, std::string file, std::string context)
    : table_(table), file_(std::move(file)), context_(std::move(context)) {}

void TableReader::fail(Error e) {
  if (!failure_) failure_ = std::move(e);
}

const toml::node* TableReader::lookup(std::string_view key, bool required) {
  known_.emplace_back(key);
  const toml::node* n = table_.get(key);
  if (!n && required)
    fail(Error::bad_input(fmt::format("{}: {}: missing required key '{}'", where(table_, file_), context_, key))
             .with_kind(ErrorKind::missing_key));
  return n;
}

const toml::node* TableReader::node(std::string_view key) { return lookup(key, false); }

Error TableReader::error_at(std::string_view key, const std::string& message) const {
  const toml::node* n = table_.get(key);
  return Error::bad_input(fmt::format("{}: {}", where(n ? *n : table_, file_), message));
}

Error TableReader::error_at(const toml::node& node, const std::string& message) const {
  return Error::bad_input(fmt::format("{}: {}", where(node, file_), message));
}

std::optional<std::string> TableReader::string(std::string_view key, bool required) {
  const toml::node* n = lookup(key, required);
  if (!n) return std::nullopt;
  if (auto v = n->value<std::string>(); v && n->is_string()) return *v;
  fail(error_at(*n, fmt::format("{} '{}' must be a string, not {}", context_, key, type_name(*n))));
  return std::nullopt;
}

std::optional<std::int64_t> TableReader::integer(std::string_view key, bool required) {
  const toml::node* n = lookup(key, required);
  if (!n) return std::nullopt;
  if (n->is_integer()) return n->value<std::int64_t>();
  fail(error_at(*n, fmt::format("{} '{}' must be an integer, not {}", context_, key, type_name(*n))));
  return std::nullopt;
}

std::optional<bool> TableReader::boolean(std::string_view key, bool required) {
  const toml::node* n = lookup(key, required);
  if (!n) return std::nullopt;
  if (n->is_boolean()) return n->value<bool>();
  fail(error_at(*n, fmt::format("{} '{}' must be true or false, not {}", context_, key,
                                type_name(*n))));
  return std::nullopt;
}

std::optional<std::vector<std::string>> TableReader::strings(std::string_view key, bool required) {
  const toml::node* n = lookup(key, required);
  if (!n) return std::nullopt;
  const toml::array* arr = n->as_array();
  if (!arr) {
    fail(error_at(*n, fmt::format("{} '{}' must be an array of strings, not {}", context_, key,
                                  type_name(*n))));
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& el : *arr) {
    if (!el.is_string()) {
      fail(error_at(el, fmt::format("{} '{}' must hold only strings, found {}", context_, key,
                                    type_name(el))));
      return std::nullopt;
    }
    out.push_back(*el.value<std::string>());
  }
  return out;
}

const toml::table* TableReader::table(std::string_view key, bool required) {
  const toml::node* n = lookup(key, required);
  if (!n) return nullptr;
  if (const auto* t = n->as_table()) return t;
  fail(error_at(*n, fmt::format("{} '{}' must be a table, not {}", context_, key, type_name(*n))));
  return nullptr;
}

const toml::array* TableReader::array(std::string_view key, bool required) {
  const toml::node* n = lookup(key, required);
  if (!n) return nullptr;
  if (const auto* a = n->as_array()) return a;
  fail(error_at(*n, fmt::format("{} '{}' must be an array, not {}", context_, key, type_name(*n))));
  return nullptr;
}

std::optional<Error> TableReader::finish() const {
  if (failure_) return failure_;
  for (const auto& [k, v] : table_) {
    std::string key(k.str());
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    std::vector<std::string> valid = known_;
    std::sort(valid.begin(), valid.end());
    valid.erase(std::unique(valid.begin(), valid.end()), valid.end());
    auto near = text::nearest(key, valid, 1);
    std::string hint = near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near.front());
    const auto& ks = k.source();
    std::string at = ks.begin.line ? fmt::format("{}:{}:{}", file_, ks.begin.line, ks.begin.column)
                                   : where(v, file_);
    return Error::bad_input(fmt::format("{}: unknown key '{}' in {}{}; valid keys: {}",
                                        at, key, context_, hint,
                                        text::join(valid, ", ")));
  }
  return std::nullopt;
}

void TableReader::raise_if_failed() const {
  if (failure_) throw Failure(*failure_);
}

}  // namespace archbuild::tomlx
