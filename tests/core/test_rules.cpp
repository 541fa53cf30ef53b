// The rule registry (core/rules.hpp): one entry per id, and docs/commands.md's "Rules" table is
// the same table.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "core/rules.hpp"

using namespace archbuild;

namespace {

std::string exits_text(const rules::Spec& s) {
  auto code = [](Exit e) { return e == Exit::ok ? std::string("—") : std::to_string(static_cast<int>(e)); };
  return code(s.exit) + (s.also ? ", " + code(*s.also) : "");
}

// The rows of docs/commands.md's rules table: "| `id` | step | checks | exit |".
std::map<std::string, std::vector<std::string>> documented_rules() {
  std::ifstream in(std::string(ARCHBUILD_SOURCE_DIR) + "/docs/commands.md");
  REQUIRE(in);
  std::map<std::string, std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    std::string cell;
    while (std::getline(ss, cell, '|')) {
      auto b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    if (cells.size() != 4 || cells[0].size() < 3 || cells[0].back() != '`') continue;
    std::string id = cells[0].substr(1, cells[0].size() - 2);
    CHECK_FALSE(rows.count(id));  // documented once
    rows[id] = {cells[1], cells[2], cells[3]};
  }
  return rows;
}

}  // namespace

TEST_CASE("rules: every id is registered once, in the order of the enum, with a kebab-case name") {
  std::set<std::string_view> names;
  std::size_t i = 0;
  for (const auto& s : rules::all()) {
    CHECK(static_cast<std::size_t>(s.id) == i++);
    CHECK(&rules::spec(s.id) == &s);
    CHECK(names.insert(s.name).second);
    CHECK(s.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz-") == std::string_view::npos);
    CHECK_FALSE(s.checks.empty());
    CHECK(rules::from_name(s.name) == s.id);
    // A second status only where the first one stops something.
    if (s.also) CHECK(s.exit != Exit::ok);
  }
  CHECK(rules::spec(rules::Id::host).id == rules::Id::host);  // the last enumerator is in the table
  CHECK_FALSE(rules::from_name("no-such-rule"));
  CHECK(rules::name(rules::Id::toolkit_arch) == "toolkit-arch");
}

TEST_CASE("rules: docs/commands.md documents every rule as the registry has it, and no other") {
  auto doc = documented_rules();
  for (const auto& s : rules::all()) {
    INFO(s.name);
    auto it = doc.find(std::string(s.name));
    REQUIRE(it != doc.end());
    CHECK(it->second[0] == rules::to_string(s.step));
    CHECK(it->second[1] == s.checks);
    CHECK(it->second[2] == exits_text(s));
  }
  for (const auto& [id, row] : doc) {
    INFO(id);
    CHECK(rules::from_name(id));
  }
}
