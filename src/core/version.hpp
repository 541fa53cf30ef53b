// Dotted numeric versions ("12.8", "2.7.1", "570.26.05"): recipes, toolchains, compilers, drivers
// all compare them. Header-only so that every module can use it without a link dependency.
#pragma once

#include <algorithm>
#include <charconv>
#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace archbuild {

struct Version {
  std::vector<int> parts;

  // "12.8" / "2.7.1" / "13"; nullopt unless every part is a non-negative decimal number.
  static std::optional<Version> parse(std::string_view s) {
    Version v;
    if (s.empty()) return std::nullopt;
    std::size_t start = 0;
    while (true) {
      std::size_t dot = s.find('.', start);
      std::string_view part = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
      if (part.empty() || part.size() > 9 ||
          !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
      int n = 0;
      std::from_chars(part.data(), part.data() + part.size(), n);
      v.parts.push_back(n);
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
    return v;
  }

  int major() const { return parts.empty() ? 0 : parts[0]; }
  int minor() const { return parts.size() < 2 ? 0 : parts[1]; }
  std::size_t size() const { return parts.size(); }

  std::string str() const {
    std::string out;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (i) out += '.';
      out += std::to_string(parts[i]);
    }
    return out;
  }
  // The first n parts ("12.8.93" -> "12.8" for n = 2).
  Version prefix(std::size_t n) const {
    Version v;
    v.parts.assign(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(std::min(n, parts.size())));
    return v;
  }
  // True when `p`'s parts are the leading parts of this version ("2.7" matches "2.7.1").
  bool starts_with(const Version& p) const {
    return p.parts.size() <= parts.size() && std::equal(p.parts.begin(), p.parts.end(), parts.begin());
  }

  // Missing trailing parts count as 0: 12.8 == 12.8.0 < 12.8.1.
  std::strong_ordering operator<=>(const Version& o) const {
    std::size_t n = std::max(parts.size(), o.parts.size());
    for (std::size_t i = 0; i < n; ++i) {
      int a = i < parts.size() ? parts[i] : 0;
      int b = i < o.parts.size() ? o.parts[i] : 0;
      if (a != b) return a <=> b;
    }
    return std::strong_ordering::equal;
  }
  bool operator==(const Version& o) const { return (*this <=> o) == 0; }
};

}  // namespace archbuild
