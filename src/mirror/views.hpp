// GPU views of a mirror (docs/mirror.md): beside simple/, one PEP 503 + PEP 691 index per
// compute capability some published wheel runs on,
//
//   DIR/gpu/sm_<XY>/simple/index.html, index.json
//   DIR/gpu/sm_<XY>/simple/<project>/index.html, index.json   links ../../../../files/<wheel>
//   DIR/gpu/views.json                                         the views and what each offers
//
// in which every (project, public version, build tag, wheel tags) has at most one file: the build
// that runs best on that GPU, so `pip install NAME==V` and a plain `pip install NAME` from the
// view install a build that runs there. Views are derived data: from manifest.json's "gpu" facts
// (each wheel's device code, read at publish as validate reads it) alone, rebuilt by
// `publish --rebuild-views`, checked by `publish --verify`.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arch/arch_data.hpp"
#include "arch/compat.hpp"
#include "core/error.hpp"
#include "mirror/mirror.hpp"

namespace archbuild::mirror {

// What publish records of a wheel (manifest.json, each file's "gpu"): per host ELF member with
// device code, the images loaded at run time; and the wheel's Requires-Dist lines.
struct GpuFacts {
  struct File {
    std::string path;                     // the member
    std::vector<arch::CodeImage> images;  // empty: relocatable (-rdc) code only, runs nowhere
  };
  std::vector<File> files;  // empty: no device code (a CPU build)
  std::vector<std::string> requires_dist;
  nlohmann::json to_json() const;
  static std::optional<GpuFacts> from_json(const nlohmann::json& j);  // nullopt: malformed or absent
};

// Reads a wheel's device code and Requires-Dist (validate::read_wheel, binary's fatbin reader).
// Errors: bad_input, as read_wheel's.
Result<GpuFacts> read_gpu_facts(const std::filesystem::path& wheel);

// How a build runs on a GPU of `cc`: the worst over its files with device code (each file's best
// image, arch::run_verdict: SASS for the CC > same-family SASS > PTX JIT); `cpu` when it carries no
// device code at all; `none` when some file has no image the GPU loads.
enum class Fit { native, family_sass, ptx, cpu, none };
std::string_view to_string(Fit f);  // "native", "family-sass", "ptx-jit", "cpu", "none"
Fit fit_on(const GpuFacts& facts, arch::Cc cc);

// "sm_90" for 9.0, "sm_120" for 12.0: a view's folder name under gpu/.
std::string view_name(arch::Cc cc);

// Text for an HTML page's attribute or body (the index pages and the views share it).
std::string html_escape(std::string_view s);
// A mirror file's text (nullopt: missing, unreadable or not a regular file), and a page written
// atomically only where its content changed (false: it was already this).
std::optional<std::string> read_text(const std::filesystem::path& p);
Result<bool> write_if_changed(const std::filesystem::path& p, const std::string& content);

// The views the manifest derives: for each CC of `gpus` (the session's data/gpus.toml) at least
// one wheel with device code runs on, each project's files in it. Entries without facts are left
// out (fill them first).
struct View {
  arch::Cc cc;
  std::map<std::string, std::vector<Entry>> projects;  // project -> its chosen files
};
std::vector<View> derive_views(const Manifest& m, const arch::ArchData& gpus);

// Reads the facts of every manifest entry that has none from DIR/files/ (a manifest of an older
// archbuild, or files adopted from files/). Returns how many were added (the manifest changed).
Result<std::size_t> fill_gpu_facts(const std::filesystem::path& dir, Manifest& m);

// Writes the views' pages whose content changed and gpu/views.json, each page atomically (temp +
// rename), and removes views that are no longer derived. `projects`: only these projects' pages
// (the ones a publish touched); empty: every page (a rebuild). Returns the views written to.
Result<std::vector<std::string>> write_views(const std::filesystem::path& dir, const Manifest& m,
                                             const arch::ArchData& gpus, const std::set<std::string>& projects = {});

// `publish --rebuild-views`: under DIR/.lock, the facts of entries that lack them read from
// files/ (the manifest rewritten when any were), then every view written and stale ones removed;
// the variant wheels too (mirror/variants.hpp) where DIR offers them or `variants` asks for them.
Result<std::vector<std::string>> rebuild_views(const std::filesystem::path& dir, const arch::ArchData& gpus,
                                               bool variants = false);

// Adds to `r` every view page that is missing, differs from what the manifest derives, or is
// not derived (view-missing, view-stale, view-extra), and counts the pages checked.
void verify_views(const std::filesystem::path& dir, const Manifest& m, const arch::ArchData& gpus, VerifyReport& r);

// The projects whose Requires-Dist names one of `projects` (their views may change with them).
std::set<std::string> dependents_of(const Manifest& m, const std::set<std::string>& projects);

// What an unpinned `pip install NAME==V` picks from plain simple/, which lists every build:
// the highest local version label under PEP 440 ordering.
const Entry* plain_pick(const std::vector<Entry>& same_public_version);
int compare_local(std::string_view a, std::string_view b);  // PEP 440 local labels: <0, 0, >0
std::string public_version(std::string_view version);        // before '+'

// The view a host whose GPUs are `ccs` installs from: one whose every chosen file runs on all
// of them (the first CC's own view first). nullopt with `why` when none does.
struct ViewChoice {
  std::optional<arch::Cc> cc;
  std::vector<std::string> projects;  // what the view offers
  std::string why;                    // when none: which GPU the views leave out
};
ViewChoice choose_view(const Manifest& m, const std::vector<arch::Cc>& ccs, const arch::ArchData& gpus);

// The view a host whose GPUs are `ccs` installs from, for a mirror given as a URL (`install-command
// --mirror`, `doctor --mirror`, $ARCHBUILD_MIRROR): file://DIR or DIR is read, its manifest
// decides (choose_view); over http(s) nothing is read, so one GPU's view is named unchecked and
// several kinds of GPU are refused. A URL ending in /simple names its mirror. `pip`: how pip is
// run ("pip", "PY -m pip"). Errors: a local mirror whose manifest cannot be read or has no files.
struct ViewAdvice {
  bool ok = false;       // a view runs on every GPU (or, unchecked, is named)
  bool checked = false;  // read from the mirror's manifest
  std::string index_url, view, why;
  std::vector<std::string> projects;  // what the view offers (checked only)
  std::string pip;                    // the command that installs from it
};
Result<ViewAdvice> advise_view(std::string url, const std::vector<arch::Cc>& ccs, const std::string& pip,
                               const arch::ArchData& gpus);

// What a publish says about the projects it touched: each GPU view's pip command, and what plain
// simple/ (every build) gives `pip install NAME==V` — the highest local label (PEP 440), with
// where it runs; when no view offers them (no device code), the plain index's command.
struct PublishSummary {
  nlohmann::json views = nlohmann::json::array();   // {sm, view, index_url, files}
  nlohmann::json simple = nlohmann::json::array();  // {project, version, picks, runs_on}
  nlohmann::json variants;                          // mirror/variants.hpp summarise_variants (null: none)
  std::vector<std::string> lines;                   // the same, for people
};
Result<PublishSummary> summarise_publish(const std::filesystem::path& dir, const std::vector<Published>& published,
                                         const arch::ArchData& gpus);
// file://<absolute, normalised path>
std::string file_url_of(const std::filesystem::path& p);

}  // namespace archbuild::mirror
