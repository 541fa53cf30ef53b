// What `install-command` and `doctor` share on the command line: the target options (--sm,
// --gpu, --driver, --platform, --jetpack) and the install advice printed for humans or as JSON.
// The advice itself is app/advise.hpp's.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/advise.hpp"
#include "cli/context.hpp"
#include "mirror/views.hpp"

namespace archbuild::cli {

using app::HostTargets;
using app::TargetArgs;

// Adds --sm, --gpu, --driver, --platform and --jetpack to a command.
void add_target_options(CLI::App& cmd, TargetArgs& args);

nlohmann::json install_advice_json(const app::InstallAnswer& a);
void print_install_advice(const app::InstallAnswer& a, const Context& ctx);

// --mirror URL as given, else $ARCHBUILD_MIRROR (empty: neither), for install-command and doctor.
std::string mirror_url_of(const std::string& option);
// Adds --mirror to a command.
void add_mirror_option(CLI::App& cmd, std::string& url, const std::string& what);
// The "mirror" member of install-command's and doctor's documents.
nlohmann::json view_advice_json(const mirror::ViewAdvice& m, const std::string& url);

}  // namespace archbuild::cli
