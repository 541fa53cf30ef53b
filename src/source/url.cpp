#include <cctype>

#include "source/source.hpp"

namespace archbuild::source {

bool is_full_commit(const std::string& s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string resolve_submodule_url(const std::string& parent_url, const std::string& url) {
  auto relative = [](const std::string& u) { return u.rfind("./", 0) == 0 || u.rfind("../", 0) == 0; };
  if (!relative(url)) return url;
  std::string base = parent_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::string rest = url;
  // The scheme's "//" is not a path separator to strip into.
  std::size_t floor = 0;
  if (auto scheme = base.find("://"); scheme != std::string::npos) floor = scheme + 3;
  char sep = '/';
  while (relative(rest)) {
    if (rest.rfind("./", 0) == 0) {
      rest = rest.substr(2);
      continue;
    }
    rest = rest.substr(3);
    // scp-like "host:org/repo": the ':' separates too.
    std::size_t cut = base.find_last_of(floor ? "/" : "/:");
    if (cut == std::string::npos || cut < floor) {
      base.clear();  // stepped above the root
      break;
    }
    sep = base[cut];
    base.resize(cut);
  }
  if (base.empty()) return rest;
  return base + sep + rest;
}

}  // namespace archbuild::source
