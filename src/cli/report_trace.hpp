// The Chrome trace of one build (Perfetto, chrome://tracing; one lane per job), written by
// `report --trace FILE` and by `wheel --trace FILE` after its build: one writer for both.
#pragma once

#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "store/layout.hpp"

namespace archbuild::cli {

// Writes the trace of build `key` (its .ninja_log and compile records; `jobs` lanes) to `file`
// atomically. Error (exit 2): the build left nothing to trace, or `file` cannot be written.
Result<Ok> write_build_trace(const store::Layout& layout, const std::string& key, unsigned jobs,
                             const std::filesystem::path& file);

}  // namespace archbuild::cli
