// Wheel variants of a mirror (docs/mirror.md, "Wheel variants"): with `publish --variants`, each
// build is also offered as a PEP 825 variant wheel, in an index of its own,
//
//   DIR/variants/simple/index.html, index.json, <project>/index.html, index.json
//   DIR/variants/files/<dist>-<public version>(-<build>)?-<py>-<abi>-<platform>-<label>.whl
//   DIR/variants/files/<name>-<public version>-variants.json   PEP 825's index-level metadata
//   DIR/variants/files.json                                      what was derived from what
//
// as PEP 825 ("Wheel Variants: Package Format", Draft, format 0.1.1) lays it out: read at
// python/peps@ba4deeb7969588d937da609008d05bb83a47b1ab:peps/pep-0825.rst and its JSON schema
// peps/pep-0825/variant-schema-0.1.1.json. The properties are in the namespace of wheelnext's
// NVIDIA variant provider, read at wheelnext/nvidia-variant-provider@ffea5d3bf372d7a3b4504b4ee295282417af767c:
// nvidia_variant_provider/plugin.py: namespace `nvidia`, features `cuda_version_lower_bound`
// ("13.0": the driver's CUDA version is at least it) and `sm_arch` (several values, one must be
// supported: "90_real", "120_virtual"); a host of CC X.Y supports "X<m>_real" for m = Y … 0 and
// "X0_virtual", in that order.
//
// A variant wheel is its build's wheel with the release's public version (METADATA's Version,
// the .dist-info folder: PEP 825's installers choose the version before the variant, and each
// build's local label would make it a version of its own) and `.dist-info/variant.json`; every
// other member is the build's, byte for byte. Variants are derived data, like the GPU views:
// from files/ and manifest.json alone, written deterministically (stages/reproducible), checked by
// `publish --verify`, rebuilt by `publish --rebuild-views`.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arch/arch_data.hpp"
#include "core/error.hpp"
#include "mirror/mirror.hpp"
#include "mirror/views.hpp"

namespace archbuild::mirror {

// PEP 825's schema URL for format 0.1.1 (the PEP's own example: "will be replaced with the final
// URL on packaging.python.org").
inline constexpr const char* kVariantSchema = "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json";
inline constexpr const char* kVariantNamespace = "nvidia";

// The `sm_arch` values NVIDIA's provider lists as supported on a host of `cc`, best first.
std::vector<std::string> provider_sm_values(arch::Cc cc);

// A build's variant properties and label, or why it has none.
struct VariantOf {
  std::optional<std::string> label;  // "cu130_sm90", "cu130_ptx120_sm80"; "null" for a CPU build
  nlohmann::json properties;         // {"nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": [...]}}; {} for null
  std::string why;                   // when none
};
// `sm_arch`: each image's value (SASS sm_XY[a|f] -> "XY_real", PTX compute_XY -> "X0_virtual"), kept
// only where every GPU of `gpus` (the session's data/gpus.toml) whose host lists it runs the build (arch::run_verdict):
// a variant-aware installer never gets a build that does not run. `cuda_version_lower_bound`:
// the CUDA release archbuild's local label names ("cu130"); a GPU build without one has no variant,
// nor has a build whose Requires-Dist pins a local version (the variant index has none).
VariantOf variant_of(const Entry& e, const GpuFacts& facts, const arch::ArchData& gpus);

// "<dist>-<public version>(-<build>)?-<tags>-<label>.whl" from the build's file name.
std::string variant_file_name(const std::string& file, const std::string& label);
// PEP 825's "{name}-{version}-variants.json", name and version as a wheel's file name has them.
std::string variants_json_name(const std::string& project, const std::string& public_version);

struct VariantWheel {
  std::string file;     // the variant wheel's name
  std::string source;   // the build's file in files/
  std::string project;  // PEP 503 name
  std::string version;  // the public version
  std::string label;
  nlohmann::json variant_json;  // its .dist-info/variant.json
};
struct VariantSet {
  std::vector<VariantWheel> wheels;                 // by file name
  std::map<std::string, std::string> index_files;   // <name>-<version>-variants.json -> content
  std::map<std::string, std::string> index_project; // <name>-<version>-variants.json -> project
  std::vector<std::string> left_out;                // "file: why", builds offered as no variant
};
// From the manifest's facts alone. Two builds of one variant file name (one release, label and
// tags): the first published keeps it, so a variant file never changes once offered.
VariantSet derive_variants(const Manifest& m, const arch::ArchData& gpus);

// Writes the variant wheel `v` of `src` at `dst` (deterministic: stages::normalize_wheel).
Result<Ok> write_variant_wheel(const std::filesystem::path& src, const std::filesystem::path& dst, const VariantWheel& v);

// Brings DIR/variants/ up to date for `projects` (empty: every project, and what is no longer
// derived is removed). A variant wheel is written only where files.json does not already record
// it from the same build. Returns the variant wheels written.
Result<std::vector<std::string>> write_variants(const std::filesystem::path& dir, const Manifest& m,
                                                const arch::ArchData& gpus, const std::set<std::string>& projects = {});

// What DIR/variants/ offers of `projects` (every project when empty), for publish's report:
// {index_url, files: [{file, label, from}], left_out}; null when DIR offers no variants.
nlohmann::json summarise_variants(const std::filesystem::path& dir, const std::set<std::string>& projects,
                                  const arch::ArchData& gpus);

// Whether DIR offers variants (publish --variants made DIR/variants/).
bool has_variants(const std::filesystem::path& dir);

// Adds to `r` what in DIR/variants/ differs from what the manifest derives: variant-missing,
// variant-stale (a page, an index-level file, or a variant wheel that is not what its build gives,
// rebuilt in a temporary folder and compared), variant-extra.
void verify_variants(const std::filesystem::path& dir, const Manifest& m, const arch::ArchData& gpus, VerifyReport& r);

}  // namespace archbuild::mirror
