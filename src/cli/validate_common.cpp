#include "cli/validate_common.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::cli {

void print_report(const validate::Report& r, const Context& ctx) {
  std::size_t width = 0;
  for (const auto& c : r.checks) width = std::max(width, c.name.size());
  std::size_t counts[4] = {0, 0, 0, 0};
  for (const auto& c : r.checks) {
    ++counts[static_cast<int>(c.status)];
    out(fmt::format("  {:<4}  {:<{}}  {}", validate::to_string(c.status), c.name, width, c.summary));
    bool show = ctx.verbosity > 0 || c.status == validate::Status::fail || c.status == validate::Status::warn;
    if (show)
      for (const auto& d : c.details)
        if (d != c.summary) out(fmt::format("  {:<4}  {:<{}}    {}", "", "", width, d));
  }
  std::vector<std::string> tally;
  auto count = [&](validate::Status s, const char* word) {
    if (auto n = counts[static_cast<int>(s)]) tally.push_back(fmt::format("{} {}", n, word));
  };
  count(validate::Status::pass, "passed");
  count(validate::Status::warn, "warned");
  count(validate::Status::skip, "skipped");
  count(validate::Status::fail, "failed");
  out(fmt::format("{}: {}", r.failed() ? "NOT VALID" : r.incomplete() ? "incomplete" : "valid",
                  text::join(tally, ", ")));
}

}  // namespace archbuild::cli
