// The stages of a build, in the order they run: the one name table. Their names are those of the
// logs, the key record's stamps (keys/<key>.json "stages"), the plan's steps and the JSON
// documents; a name that is none of them is an error where it is read, never a stage.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace archbuild::recipe {

enum class Stage : std::uint8_t { fetch, configure, build, package, validate };

inline constexpr std::array<Stage, 5> kStages = {Stage::fetch, Stage::configure, Stage::build, Stage::package,
                                                 Stage::validate};

std::string_view to_string(Stage s);  // "fetch", "configure", …
std::optional<Stage> stage_named(std::string_view name);
// The stage `name` read from `where` (a record, a plan): bad input naming both and the stages
// there are when it is none.
Result<Stage> stage_read(std::string_view name, std::string_view where);

}  // namespace archbuild::recipe
