// What `validate` and `smoke` share: what proving a wheel on this host needs (app/validation.hpp)
// and printing a validate::Report.
#pragma once

#include "app/inputs.hpp"
#include "app/validation.hpp"
#include "cli/context.hpp"
#include "validate/validate.hpp"

namespace archbuild::cli {

using app::capture_exec;
using app::find_python;
using app::host_gpus;
using app::import_script;
using app::smoke_setup;

// Human output: one line per check (details of failures and warnings, all details with -v),
// then the verdict line. Nothing is printed with --json (print_json(report.to_json()) instead).
void print_report(const validate::Report& r, const Context& ctx);

}  // namespace archbuild::cli
