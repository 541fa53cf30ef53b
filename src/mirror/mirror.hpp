// An internal wheel mirror in a directory the user names: a PEP 503 "simple" index that pip
// installs from (`pip install --index-url file://DIR/simple NAME==VERSION`), PEP 691 JSON pages
// beside it, the wheels under DIR/files/, and DIR/manifest.json (file -> sha256, size,
// published-at), the source of truth every page is generated from.
//
//   DIR/simple/index.html, index.json          every project
//   DIR/simple/<normalized-name>/index.html    links ../../files/<wheel>#sha256=<hex>
//   DIR/simple/<normalized-name>/index.json
//   DIR/files/<wheel>
//   DIR/manifest.json
//   DIR/.lock                                  serialises publishes (and verify)
//
// Published files are immutable: a file name already there with another hash is refused and
// nothing changes; the same file again is a no-op. Immutability holds for what pip reads as one
// release file (PEP 503 project, PEP 440 version: 1.0 == 1.0.0, build tag, tags), whatever the
// spelling of its name: `my.pkg-1.0.0` after `My_Pkg-1.0` with other bytes is refused too. A
// manifest's project is used as a folder only when it is the normalised name of its file's
// distribution. Pages, the manifest and the wheels are
// written to a temp file and renamed, so a pip reading during a publish sees the old page or
// the new one, never half of one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arch/arch_data.hpp"
#include "core/error.hpp"

namespace archbuild::mirror {

struct Entry {
  std::string file;          // the wheel's file name
  std::string project;       // PEP 503-normalised distribution name
  std::string version;
  std::string sha256;        // 64 hex digits
  std::uint64_t size = 0;
  std::string published_at;  // UTC, ISO 8601 ("2026-11-21T16:20:07Z")
  nlohmann::json gpu;        // its device code and Requires-Dist (mirror/views.hpp GpuFacts); null: not read yet
};

struct Manifest {
  std::map<std::string, Entry> files;  // by file name
};

// DIR/manifest.json; a missing one is an empty mirror. A malformed one is an error (not_fine:
// the mirror is damaged) naming the file and what is wrong.
Result<Manifest> read_manifest(const std::filesystem::path& dir);
nlohmann::json to_json(const Manifest& m);

struct Published {
  Entry entry;
  bool added = false;  // false: the same file was already there (no-op)
};

struct PublishOptions {
  // Called once when another process holds DIR/.lock ("pid 1234").
  std::function<void(const std::string& holder)> on_wait;
  // Also offer every build as a PEP 825 variant wheel (mirror/variants.hpp); a mirror that
  // already offers variants keeps offering them without it.
  bool variants = false;
};

// Publishes the wheels (all or nothing). Errors: a path that is not a readable wheel file or a
// name that is not PEP 427 (bad_input, exit 2); a file name published with another hash
// (not_fine, exit 1) — then nothing in DIR changes.
// `gpus`: the session's GPU data, for the views (views.hpp).
Result<std::vector<Published>> publish(const std::filesystem::path& dir, const std::vector<std::filesystem::path>& wheels,
                                       const arch::ArchData& gpus, const PublishOptions& options = {});

struct Problem {
  std::string kind;    // hash-mismatch, size-mismatch, missing-file, extra-file, page-missing,
                       // page-link-missing, page-link-extra, page-link-hash, manifest,
                       // duplicate-release (one release file for pip under two spellings),
                       // view-*, gpu-facts-missing (views.hpp), variant-* (variants.hpp)
  std::string file;    // the wheel or page concerned
  std::string detail;  // one line
};

struct VerifyReport {
  std::size_t files_checked = 0;
  std::size_t pages_checked = 0;
  std::vector<Problem> problems;
  bool ok() const { return problems.empty(); }
};

// Re-hashes every file against the manifest and every page's links against the manifest.
// Errors: DIR is not a mirror (bad_input), an unreadable or malformed manifest (not_fine).
Result<VerifyReport> verify(const std::filesystem::path& dir, const arch::ArchData& gpus);
nlohmann::json to_json(const VerifyReport& r);

// ---- pieces, exposed for tests ----
std::string project_page(const std::string& project, const std::vector<Entry>& entries);
std::string root_page(const std::vector<std::string>& projects);
// `href` of a file from its project page: "../../files/<percent-encoded name>#sha256=<hex>".
std::string file_href(const Entry& e);
std::string percent_encode(std::string_view s);
std::string percent_decode(std::string_view s);

}  // namespace archbuild::mirror
