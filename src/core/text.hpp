// Small string helpers shared by the parsers (no module-specific logic here).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace archbuild::text {

std::string lower(std::string_view s);
std::string trim(std::string_view s);
bool starts_with_icase(std::string_view s, std::string_view prefix);
bool equals_icase(std::string_view a, std::string_view b);
// Split on any of the separator characters, dropping empty pieces.
std::vector<std::string> split_any(std::string_view s, std::string_view separators);
// Levenshtein distance, case-insensitive (for "did you mean" suggestions).
std::size_t edit_distance(std::string_view a, std::string_view b);
// The candidates closest to `word` (at most `limit`, only those within a sane distance).
std::vector<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates,
                                 std::size_t limit = 3);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
// What a user typed (or a path, a file's content), fit for an error line: in double quotes,
// control characters and non-UTF-8 bytes escaped (\n, \x1b), a quote or backslash escaped, and
// cut to `max` input bytes with "…(N more bytes)" after it, so no escape sequence reaches the
// terminal and a 100 KB argument gives a short line.
std::string quoted(std::string_view s, std::size_t max = 200);
// A whole message line for the terminal (the last guard in error_line/warn): as quoted() but
// without quotes, newlines kept, cut to `max` bytes.
std::string printable(std::string_view s, std::size_t max = 4096);
// One line of a command's output (cli's out()): as printable(), uncut, and a newline inside it
// escaped too (\n), so a value (a recipe's description, an --env value) can neither move the
// terminal's cursor nor print a line of its own ("would stop: …").
std::string one_line(std::string_view s);

}  // namespace archbuild::text
