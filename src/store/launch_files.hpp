// Where the files of a build's compiler launchers lie that only some drivers use, beside
// Layout's own (store/layout.hpp): the store decides these paths too.
#pragma once

#include <filesystem>
#include <string_view>

#include "store/layout.hpp"

namespace archbuild::store {

// The build's launchers as a Meson native file (recipe::LauncherRoute::meson_native_file,
// stages/meson_native.hpp): build/<key>/meson-native.ini.
std::filesystem::path meson_native_file(const Layout& layout, std::string_view key);

}  // namespace archbuild::store
