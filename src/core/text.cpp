#include "core/text.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <numeric>

#include <fmt/format.h>

namespace archbuild::text {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

bool starts_with_icase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && equals_icase(s.substr(0, prefix.size()), prefix);
}

bool equals_icase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::vector<std::string> split_any(std::string_view s, std::string_view separators) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (separators.find(c) != std::string_view::npos) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::string x = lower(a), y = lower(b);
  std::vector<std::size_t> prev(y.size() + 1), cur(y.size() + 1);
  std::iota(prev.begin(), prev.end(), 0);
  for (std::size_t i = 1; i <= x.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= y.size(); ++j) {
      std::size_t sub = prev[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[y.size()];
}

std::vector<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates,
                                 std::size_t limit) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& c : candidates) scored.emplace_back(edit_distance(word, c), c);
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& l, const auto& r) { return l.first < r.first; });
  std::vector<std::string> out;
  // Only the closest (ties included), and only when close enough to be a plausible typo.
  const std::size_t cap = std::max<std::size_t>(2, word.size() / 2 + 1);
  for (const auto& [d, c] : scored) {
    if (out.size() >= limit || d > scored.front().first) break;
    if (d <= cap && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

namespace {

// The escaping both quoted() and printable() use: control characters and bytes that are not
// well-formed UTF-8 as \xNN (\n \t \r by name), up to `max` input bytes. `in_quotes`: a
// quote and a backslash are escaped too; otherwise a newline is kept (a message of lines).
// Bidirectional controls (U+061C, U+200E/F, U+202A..U+202E, U+2066..U+2069) reorder what a
// terminal shows after them (a "right-to-left override" turns a name around): escaped as \u{…}.
bool bidi_control(char32_t cp) {
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

std::string escape(std::string_view s, std::size_t max, bool in_quotes, bool keep_newlines) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  std::size_t n = std::min(s.size(), max);
  for (std::size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    // A UTF-8 sequence passes whole when it is well formed and fits before the cut.
    std::size_t len = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 1;
    if (c >= 0x80 && len > 1 && i + len <= n) {
      bool ok = true;
      for (std::size_t k = 1; k < len; ++k) ok = ok && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      // U+0080..U+009F are C1 controls (0x9b is a CSI to some terminals): escaped as bytes.
      ok = ok && !(c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0);
      if (ok && len == 3) {
        char32_t cp = (char32_t(c & 0x0F) << 12) | (char32_t(static_cast<unsigned char>(s[i + 1]) & 0x3F) << 6) |
                      char32_t(static_cast<unsigned char>(s[i + 2]) & 0x3F);
        if (bidi_control(cp)) {
          out += fmt::format("\\u{{{:04x}}}", static_cast<std::uint32_t>(cp));
          i += len - 1;
          continue;
        }
      }
      if (ok && len == 2 && bidi_control((char32_t(c & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F))) {
        out += "\\u{061c}";
        i += len - 1;
        continue;
      }
      if (ok) {
        out.append(s.substr(i, len));
        i += len - 1;
        continue;
      }
    }
    if (in_quotes && (c == '"' || c == '\\')) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += keep_newlines ? "\n" : "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string cut_note(std::string_view s, std::size_t max) {
  return s.size() > max ? "…(" + std::to_string(s.size() - max) + " more bytes)" : std::string();
}

}  // namespace

std::string quoted(std::string_view s, std::size_t max) {
  return "\"" + escape(s, max, true, false) + "\"" + cut_note(s, max);
}

std::string printable(std::string_view s, std::size_t max) { return escape(s, max, false, true) + cut_note(s, max); }

std::string one_line(std::string_view s) { return escape(s, s.size(), false, false); }

}  // namespace archbuild::text
