// Reproducible wheels: the wheel the build wrote, rewritten deterministically with
// libarchive — members sorted, one fixed timestamp, fixed permissions and owners, deflate,
// RECORD regenerated — so the same member contents give the same bytes whatever the build's
// member order, file times, umask or user. Member names are never used as paths.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace archbuild::stages {

// The earliest time a zip can hold (DOS epoch 1980-01-01T00:00:00Z); earlier epochs clamp here.
inline constexpr std::int64_t zip_epoch_min = 315532800;
// The last time a zip can hold (DOS year 2107, 2107-12-31T23:59:58Z, two-second steps): a commit
// dated later gives this SOURCE_DATE_EPOCH, and the build says so.
inline constexpr std::int64_t zip_epoch_max = 4354819198;

// Why `value` cannot be SOURCE_DATE_EPOCH (`--env SOURCE_DATE_EPOCH=…`): not decimal seconds,
// or outside what a wheel's zip can hold; nullopt when it can. Said before the first stage, not
// as a Python traceback at package.
std::optional<std::string> source_date_epoch_problem(std::string_view value);

// Rewrites the wheel `in` as `out` (written to `out` + ".tmp", then renamed; `in` may be `out`):
//  - members sorted by name (bytewise), the `<name>.dist-info/RECORD` last;
//  - every mtime = max(epoch, zip_epoch_min), written as UTC (the zip's DOS time too);
//  - files 0644, or 0755 when the input member had any x bit; directories 0755; uid/gid 0, no
//    owner names; deflate;
//  - RECORD regenerated: `path,sha256=<urlsafe b64, no padding>,<size>` per file (CSV quoting),
//    then `<dist-info>/RECORD,,`; lines in member order.
// Errors (bad_input, exit 2): unreadable or not a zip; a member name that is empty, absolute,
// has a '..' component or a backslash (libarchive's reader already turns a backslash into '/',
// so "..\\x" is refused as "../x"); duplicate names; links or special members; no (or more than
// one) top-level *.dist-info folder. Nothing is left at `out` on error.
Result<Ok> normalize_wheel(const std::filesystem::path& in, const std::filesystem::path& out, std::int64_t epoch);

// Names (sorted) of the members of wheels `a` and `b` whose content or executable bit differs,
// or that exist in only one (`--check-reproducible` reports them).
Result<std::vector<std::string>> compare_members(const std::filesystem::path& a, const std::filesystem::path& b);
// The same; an unreadable wheel throws Failure (exit 2) for CLI code.
std::vector<std::string> differing_members(const std::filesystem::path& a, const std::filesystem::path& b);

// A wheel's members as read (names checked as normalize_wheel says), for steps that rewrite
// members before normalize_wheel (stages/portable).
struct ZipMember {
  std::string name;
  bool directory = false;
  bool executable = false;
  std::string data;
};
Result<std::vector<ZipMember>> read_zip_members(const std::filesystem::path& wheel);
// Writes `members` in the given order as `out` (via `out` + ".tmp"); normalize_wheel afterwards
// makes it deterministic and regenerates RECORD.
Result<Ok> write_zip_members(const std::filesystem::path& out, const std::vector<ZipMember>& members);

// RECORD's hash form of 32 raw digest bytes: "sha256=" + urlsafe base64 without '=' padding.
std::string record_digest(const std::string& raw_digest);

}  // namespace archbuild::stages
