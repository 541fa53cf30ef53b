#include "stages/feature_summary.hpp"

#include <regex>

#include "core/text.hpp"

namespace archbuild::stages {

FeatureSummary parse_feature_summary(const std::vector<std::string>& lines) {
  static const std::regex entry(R"(^--\s+([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*?)\s*$)");
  FeatureSummary s;
  s.lines = lines;
  for (const auto& raw : lines) {
    std::string line = raw;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::smatch m;
    if (!std::regex_match(line, m, entry)) continue;
    std::string name = m[1].str();
    s.values[name] = {m[2].str(), line};
    if (name.starts_with("USE_")) s.found = true;
  }
  return s;
}

FeatureSummary parse_feature_summary_text(const std::string& text) {
  std::vector<std::string> lines;
  std::string cur;
  for (char c : text) {
    if (c == '\n') {
      lines.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  return parse_feature_summary(lines);
}

std::vector<FeatureFinding> check_features(const plan::LibraryPlan& libraries, const FeatureSummary& summary) {
  std::vector<FeatureFinding> out;
  for (const auto& c : libraries.choices) {
    if (c.state != plan::LibraryState::found) continue;
    FeatureFinding f;
    f.library = c.name;
    if (!c.summary.empty()) {
      f.feature = c.summary;
      if (auto it = summary.values.find(c.summary); it != summary.values.end()) {
        f.on = plan::cmake_truth(it->second.value);
        f.line = it->second.line;
      }
    } else {
      f.feature = c.summary_on;
      if (summary.found) {
        f.on = false;
        for (const auto& l : summary.lines)
          if (l.find(c.summary_on) != std::string::npos) {
            f.on = true;
            f.line = l;
            break;
          }
      }
    }
    f.ok = f.on != false;
    out.push_back(std::move(f));
  }
  return out;
}

nlohmann::json to_json(const std::vector<FeatureFinding>& findings) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& f : findings)
    a.push_back({{"library", f.library},
                 {"feature", f.feature},
                 {"on", f.on ? nlohmann::json(*f.on) : nlohmann::json(nullptr)},
                 {"line", f.line},
                 {"ok", f.ok}});
  return a;
}

}  // namespace archbuild::stages
