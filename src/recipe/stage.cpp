#include "recipe/stage.hpp"

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::recipe {

std::string_view to_string(Stage s) {
  switch (s) {
    case Stage::fetch: return "fetch";
    case Stage::configure: return "configure";
    case Stage::build: return "build";
    case Stage::package: return "package";
    case Stage::validate: return "validate";
  }
  return "";
}

std::optional<Stage> stage_named(std::string_view name) {
  for (Stage s : kStages)
    if (to_string(s) == name) return s;
  return std::nullopt;
}

Result<Stage> stage_read(std::string_view name, std::string_view where) {
  if (auto s = stage_named(name)) return *s;
  std::vector<std::string> names;
  for (Stage s : kStages) names.emplace_back(to_string(s));
  return Error::bad_input(fmt::format("{} names the stage {}, which archbuild does not have (its stages: {})", where,
                                      text::quoted(name), text::join(names, ", ")));
}

}  // namespace archbuild::recipe
