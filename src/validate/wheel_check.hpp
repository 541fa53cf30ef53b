// The wheel as a file (PEP 427): its name, its .dist-info metadata, RECORD hashes and sizes,
// member names, and the local version label archbuild gives its wheels. Reads the archive once
// (every member hashed, ELF members inspected for device code); nothing is extracted to disk
// and no member name is ever used as a path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "binary/elf.hpp"
#include "binary/inspect.hpp"
#include "core/error.hpp"
#include "validate/report.hpp"

namespace archbuild::validate {

// {distribution}-{version}(-{build tag})?-{python tag}-{abi tag}-{platform tag}.whl
struct WheelName {
  std::string file;          // the file name as given
  std::string distribution;  // "minitorch" (as written in the name: '_' for '-')
  std::string version;       // "0.1.0+cu130.sm90"
  std::optional<std::string> build;  // starts with a digit
  // Compressed tag sets expanded ("py2.py3" -> {"py2", "py3"}).
  std::vector<std::string> python_tags, abi_tags, platform_tags;

  std::string local_label() const;  // after '+': "cu130.sm90"; "" without one
  std::string dist_info() const;    // "minitorch-0.1.0+cu130.sm90.dist-info"
  std::vector<std::string> tags() const;  // every python-abi-platform combination, sorted
};

// Errors (bad_input) say which part is wrong and what a valid name looks like.
Result<WheelName> parse_wheel_name(std::string_view file_name);

// PEP 503 normalisation: lower case, runs of '-', '_', '.' become one '-'.
std::string normalize_name(std::string_view name);
// Whether `name` is already PEP 503-normalised: [a-z0-9] runs joined by single '-' (a name a
// mirror may use as a folder: no '/', no "..", nothing absolute).
bool is_normalized_name(std::string_view name);

// A PEP 440 version as the versions that compare equal to it share it: normalised (lower case,
// no 'v', alpha/beta/c/pre/preview -> a/b/rc, rev/r -> post, implicit numbers 0, leading zeros
// dropped, local label separators '.') and with the release's trailing zeros dropped, so that
// "1.0", "1.0.0" and "v1.0.0.0" give "1". A string that is not PEP 440 is returned lower-cased.
std::string version_key(std::string_view version);

// The RECORD form of a SHA-256: "sha256=" + urlsafe base64 without '=' padding.
std::string record_hash(std::string_view raw_digest);  // 32 raw bytes -> "sha256=…"

struct Member {
  enum class Type : std::uint8_t { file, directory, link, other };
  std::string name;
  Type type = Type::file;
  std::uint64_t size = 0;  // bytes actually read
  std::string hash;        // record_hash of the content (files only)
  // A host ELF member's machine as binary::machine_name says it ("x86-64", "aarch64"), read from
  // its header even where the member itself is not kept (publish); empty for anything else.
  std::string machine;
};

struct WheelContents {
  std::string path;
  std::vector<Member> members;                // in archive order
  std::map<std::string, std::string> texts;   // small .dist-info members by full name
  std::vector<binary::FileReport> elf;        // host ELF members (path = member name)
  std::vector<std::string> foreign_elf;       // cubins, 32-bit ELF: not host code
  std::vector<std::string> elf_errors;        // "member: why" for ELF members the reader refused
  // DT_NEEDED, RUNPATH and symbol-version needs of the dynamically linked host ELF members.
  std::map<std::string, binary::DynamicInfo> dynamic;

  const Member* member(std::string_view name) const;
  // The top-level *.dist-info folders, sorted.
  std::vector<std::string> dist_info_dirs() const;
  const std::string* text(const std::string& name) const;
};

struct ReadOptions {
  std::uint64_t max_member_size = std::uint64_t{8} << 30;  // an ELF member read into memory
  std::uint64_t max_text_size = std::uint64_t{16} << 20;   // a .dist-info file kept as text
};

// Errors (bad_input, exit 2): missing, unreadable, not a zip, a member that cannot be read.
Result<WheelContents> read_wheel(const std::filesystem::path& path, const ReadOptions& options = {});
Result<WheelContents> read_wheel(binary::Bytes data, const std::string& path, const ReadOptions& options = {});

// "Key: value" header lines up to the first blank line (WHEEL, METADATA); repeated keys keep
// every value, continuation lines are folded.
std::map<std::string, std::vector<std::string>> parse_headers(std::string_view text);

struct RecordRow {
  std::size_t line = 0;
  std::string path, hash, size;
};
// RECORD is CSV (RFC 4180 quoting). Errors name the line.
Result<std::vector<RecordRow>> parse_record(std::string_view text);

// The dist-info folder to read: the one the name implies, else the only one there is.
std::string chosen_dist_info(const WheelContents& w, const std::optional<WheelName>& name);

// ---- the checks ------------------------------------------------------------------------------
Check check_name(const std::string& file_name, const Result<WheelName>& parsed);
Check check_metadata(const WheelContents& w, const std::optional<WheelName>& name);
Check check_record(const WheelContents& w, const std::optional<WheelName>& name);
Check check_members(const WheelContents& w);
// The four above, in that order: the wheel's structure as a file. validate starts with them and
// publish refuses a wheel any of them fails (a published name is taken for good).
std::vector<Check> structure_checks(const std::string& file_name, const Result<WheelName>& parsed,
                                    const WheelContents& w);

// The local label (the plan's "cu130.sm90.ptx90"): archbuild's wheels name the CUDA ("cu130")
// and each image ("sm90", "sm120a", "ptx120"); the images named must be in the libraries.
// `expected` (the pipeline's own label) must match exactly. A label without arch parts is not
// archbuild's: skipped, unless `expected` is set.
struct LabelParts {
  std::optional<std::string> cuda;       // "13.0" from cu130
  std::vector<std::string> images;       // "sm_90", "compute_120" (as inspect names them)
  std::vector<std::string> unknown;      // parts that are neither
};
LabelParts parse_label(std::string_view label);
Check check_local_label(const WheelContents& w, const std::optional<WheelName>& name,
                        const std::optional<std::string>& expected);

// The import name: `module` when given (the recipe's), else top_level.txt, else the name.
std::string import_name(const WheelContents& w, const std::optional<WheelName>& name,
                        const std::optional<std::string>& module);

}  // namespace archbuild::validate
