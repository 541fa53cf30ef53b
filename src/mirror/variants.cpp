#include "mirror/variants.hpp"

#include <stdlib.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "arch/arch_data.hpp"
#include "core/path_kind.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "stages/reproducible.hpp"
#include "store/atomic_file.hpp"
#include "validate/wheel_check.hpp"

namespace archbuild::mirror {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const fs::path kVariants = "variants";

// A property value of NVIDIA's provider for one image (plugin.py: "{major}{minor}_real",
// "{major}0_virtual").
std::string sm_value(const arch::CodeImage& im) {
  if (im.kind == arch::CodeKind::ptx) return fmt::format("{}0_virtual", im.cc.major);
  return fmt::format("{}_real", im.cc.sm());
}

// "90_real" -> "sm90", "120_virtual" -> "ptx120": the label's part for a value.
std::string label_part(const std::string& value) {
  auto us = value.find('_');
  return (value.substr(us + 1) == "real" ? "sm" : "ptx") + value.substr(0, us);
}

std::vector<arch::Cc> known_gpus(const arch::ArchData& data) {
  std::vector<arch::Cc> out;
  for (const auto& k : data.ccs())
    if (!k.renamed_to) out.push_back(k.cc);  // 10.1 is 11.0's old name
  return out;
}

json variant_json(const std::string& label, const json& properties) {
  return {{"$schema", kVariantSchema},
          {"default-priorities", {{"namespace", {kVariantNamespace}}}},
          {"variants", {{label, properties}}}};
}

std::string dumped(const json& j) { return j.dump(2) + "\n"; }

// METADATA with its Version header (the first, in the header block) set to `version`.
std::string with_version(const std::string& metadata, const std::string& version) {
  std::string out;
  std::size_t at = 0;
  bool done = false;
  while (at < metadata.size()) {
    auto nl = metadata.find('\n', at);
    auto end = nl == std::string::npos ? metadata.size() : nl + 1;
    std::string line = metadata.substr(at, end - at);
    std::string bare = line;
    while (!bare.empty() && (bare.back() == '\n' || bare.back() == '\r')) bare.pop_back();
    if (bare.empty()) done = true;  // the headers end at the first blank line
    if (!done && bare.starts_with("Version:")) {
      out += "Version: " + version + line.substr(bare.size());
      done = true;
    } else {
      out += line;
    }
    at = end;
  }
  return out;
}

struct Hashed {
  std::string sha256;
  std::uint64_t size = 0;
};

std::optional<Hashed> hash_of(const fs::path& p) {
  if (!paths::expect_regular_file(p, "mirror file")) return std::nullopt;
  auto h = sha256_file_hex(p);
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (!h || ec) return std::nullopt;
  return Hashed{*h, size};
}

Hashed hash_text(const std::string& s) {
  Sha256 h;
  h.update(s);
  return {h.hex(), s.size()};
}

// Every page of DIR/variants/simple/ for `only` (empty: every project) and the root pages, from
// the variant wheels' hashes (files missing from `hashes` are left off).
std::map<fs::path, std::string> variant_pages(const VariantSet& set, const Manifest& m,
                                              const std::map<std::string, Hashed>& hashes,
                                              const std::set<std::string>& only) {
  std::map<std::string, std::vector<Entry>> projects;
  std::map<std::string, std::string> newest;  // index file -> the latest publication of its builds
  for (const auto& w : set.wheels) {
    const auto& src = m.files.at(w.source);
    auto& latest = newest[variants_json_name(w.project, w.version)];
    latest = std::max(latest, src.published_at);
    auto h = hashes.find(w.file);
    if (h == hashes.end()) continue;
    projects[w.project].push_back({w.file, w.project, w.version, h->second.sha256, h->second.size, src.published_at, {}});
  }
  for (const auto& [name, content] : set.index_files) {
    const auto& project = set.index_project.at(name);
    auto h = hash_text(content);
    // The version is the file's: <name>-<version>-variants.json.
    auto version = name.substr(0, name.size() - std::string("-variants.json").size());
    version = version.substr(version.rfind('-') + 1);
    projects[project].push_back({name, project, version, h.sha256, h.size, newest[name], {}});
  }
  std::map<fs::path, std::string> out;
  const fs::path root = kVariants / "simple";
  std::vector<std::string> names;
  json root_projects = json::array();
  for (auto& [project, entries] : projects) {
    names.push_back(project);
    root_projects.push_back({{"name", project}});
    if (!only.empty() && !only.count(project)) continue;
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.file < b.file; });
    out[root / project / "index.html"] = project_page(project, entries);
    json files = json::array();
    std::set<std::string> versions;
    for (const auto& e : entries) {
      files.push_back({{"filename", e.file},
                       {"url", "../../files/" + percent_encode(e.file)},
                       {"hashes", {{"sha256", e.sha256}}},
                       {"size", e.size},
                       {"upload-time", e.published_at}});
      versions.insert(e.version);
    }
    out[root / project / "index.json"] =
        json{{"meta", {{"api-version", "1.1"}}}, {"name", project}, {"files", files}, {"versions", versions}}.dump(1) + "\n";
  }
  out[root / "index.html"] = root_page(names);
  out[root / "index.json"] = json{{"meta", {{"api-version", "1.1"}}}, {"projects", root_projects}}.dump(1) + "\n";
  return out;
}

json read_record(const fs::path& dir) {
  auto text = read_text(dir / kVariants / "files.json");
  json j = text ? json::parse(*text, nullptr, false) : json();
  if (j.is_discarded() || !j.is_object() || !j.contains("files") || !j["files"].is_object())
    return {{"format", 1}, {"files", json::object()}};
  return j;
}

std::string replace_all(std::string s, char from, char to) {
  std::replace(s.begin(), s.end(), from, to);
  return s;
}

bool is_temp(const std::string& name) { return name.starts_with(".") || name.ends_with(".tmp"); }

}  // namespace

std::vector<std::string> provider_sm_values(arch::Cc cc) {
  std::vector<std::string> out;
  for (int m = cc.minor; m >= 0; --m) out.push_back(fmt::format("{}{}_real", cc.major, m));
  out.push_back(fmt::format("{}0_virtual", cc.major));
  return out;
}

// A Requires-Dist line that pins a local version ("torch==2.9.0+cu130.sm90"): the variant index
// holds every release under its public version only, so that requirement is never met there.
static std::optional<std::string> local_pin(const std::string& line) {
  auto semi = line.find(';');
  // An extra's requirement is not installed by `pip install NAME` (as views.cpp reads it).
  if (semi != std::string::npos && line.find("extra", semi) != std::string::npos) return std::nullopt;
  auto spec = line.substr(0, semi);
  for (auto at = spec.find("=="); at != std::string::npos; at = spec.find("==", at + 2)) {
    auto end = spec.find_first_of(",)", at);
    auto version = spec.substr(at + 2, end == std::string::npos ? std::string::npos : end - at - 2);
    if (version.find('+') != std::string::npos) return text::trim(spec);
  }
  return std::nullopt;
}

VariantOf variant_of(const Entry& e, const GpuFacts& facts, const arch::ArchData& data) {
  VariantOf v;
  for (const auto& line : facts.requires_dist)
    if (auto pin = local_pin(line)) {
      v.why = fmt::format("its Requires-Dist pins a build ({}), which the variant index, holding every release under "
                          "its public version, never has",
                          *pin);
      return v;
    }
  if (facts.files.empty()) {  // a CPU build: PEP 825's null variant, which every host accepts last
    v.label = "null";
    v.properties = json::object();
    return v;
  }
  auto name = validate::parse_wheel_name(e.file);
  auto cuda = name ? validate::parse_label(name->local_label()).cuda : std::nullopt;
  if (!cuda) {
    v.why = "its CUDA release is not known (archbuild's local label names it: cu130): without nvidia :: "
            "cuda_version_lower_bound a variant-aware installer could take it for a driver too old";
    return v;
  }
  std::set<std::string> candidates;
  for (const auto& f : facts.files)
    for (const auto& im : f.images) candidates.insert(sm_value(im));
  const auto gpus = known_gpus(data);
  std::vector<std::string> values;  // std::set's order: sorted lexically, as PEP 825 keeps value lists
  for (const auto& value : candidates) {
    bool listed = false, runs = true;
    for (const auto& cc : gpus) {
      auto supported = provider_sm_values(cc);
      if (std::find(supported.begin(), supported.end(), value) == supported.end()) continue;
      listed = true;
      runs = runs && fit_on(facts, cc) != Fit::none;
    }
    if (listed && runs) values.push_back(value);
  }
  if (values.empty()) {
    v.why = "no sm_arch value of NVIDIA's provider names only GPUs it runs on";
    return v;
  }
  std::string label = "cu" + [&] { auto c = *cuda; std::erase(c, '.'); return c; }();
  for (const auto& value : values) label += "_" + label_part(value);
  v.label = label;
  v.properties = {{kVariantNamespace, {{"cuda_version_lower_bound", {*cuda}}, {"sm_arch", values}}}};
  return v;
}

std::string variant_file_name(const std::string& file, const std::string& label) {
  auto stem = file.substr(0, file.size() - 4);  // ".whl"
  auto parts = text::split_any(stem, "-");
  if (parts.size() >= 2) parts[1] = public_version(parts[1]);
  return text::join(parts, "-") + "-" + label + ".whl";
}

std::string variants_json_name(const std::string& project, const std::string& public_version) {
  return replace_all(validate::normalize_name(project), '-', '_') + "-" + public_version + "-variants.json";
}

VariantSet derive_variants(const Manifest& m, const arch::ArchData& data) {
  std::vector<const Entry*> order;
  for (const auto& [file, e] : m.files) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->published_at != b->published_at ? a->published_at < b->published_at : a->file < b->file;
  });
  VariantSet out;
  std::map<std::string, std::string> taken;                  // variant file -> its build
  std::map<std::string, json> groups;                        // index file -> variants
  for (const Entry* e : order) {
    auto facts = GpuFacts::from_json(e->gpu);
    if (!facts) {
      out.left_out.push_back(e->file + ": manifest.json has no device code for it");
      continue;
    }
    auto v = variant_of(*e, *facts, data);
    if (!v.label) {
      out.left_out.push_back(e->file + ": " + v.why);
      continue;
    }
    auto file = variant_file_name(e->file, *v.label);
    if (auto it = taken.find(file); it != taken.end()) {
      out.left_out.push_back(fmt::format("{}: its variant {} is {}'s, published first", e->file, file, it->second));
      continue;
    }
    taken[file] = e->file;
    VariantWheel w{file, e->file, e->project, public_version(e->version), *v.label, variant_json(*v.label, v.properties)};
    auto index = variants_json_name(e->project, w.version);
    groups[index][*v.label] = v.properties;
    out.index_project[index] = e->project;
    out.wheels.push_back(std::move(w));
  }
  std::sort(out.wheels.begin(), out.wheels.end(), [](const VariantWheel& a, const VariantWheel& b) { return a.file < b.file; });
  for (const auto& [index, variants] : groups) {
    json j = variant_json("null", json::object());
    j["variants"] = variants;
    out.index_files[index] = dumped(j);
  }
  return out;
}

Result<Ok> write_variant_wheel(const fs::path& src, const fs::path& dst, const VariantWheel& v) {
  auto members = stages::read_zip_members(src);
  if (!members) return members.error();
  std::set<std::string> dist_infos;
  for (const auto& mem : *members)
    if (auto slash = mem.name.find('/'); slash != std::string::npos && mem.name.substr(0, slash).ends_with(".dist-info"))
      dist_infos.insert(mem.name.substr(0, slash + 1));
  if (dist_infos.size() != 1)
    return Error::not_fine(fmt::format("{}: {} top-level .dist-info folders (a wheel has one)", src.string(), dist_infos.size()));
  auto name = validate::parse_wheel_name(v.source);
  if (!name) return name.error();
  const std::string old_di = *dist_infos.begin();
  const std::string new_di = name->distribution + "-" + v.version + ".dist-info/";
  std::erase_if(*members, [&](const stages::ZipMember& mem) { return mem.name == old_di + "variant.json"; });
  for (auto& mem : *members) {
    if (!mem.name.starts_with(old_di)) continue;
    mem.name = new_di + mem.name.substr(old_di.size());
    if (mem.name == new_di + "METADATA") mem.data = with_version(mem.data, v.version);
  }
  members->push_back({new_di + "variant.json", false, false, dumped(v.variant_json)});
  auto raw = dst.parent_path() / ("." + dst.filename().string() + ".raw");
  if (auto w = stages::write_zip_members(raw, *members); !w) return w.error();
  auto n = stages::normalize_wheel(raw, dst, stages::zip_epoch_min);
  std::error_code ec;
  fs::remove(raw, ec);
  return n;
}

bool has_variants(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / kVariants, ec);
}

Result<std::vector<std::string>> write_variants(const fs::path& dir, const Manifest& m, const arch::ArchData& gpus,
                                                const std::set<std::string>& only) {
  auto set = derive_variants(m, gpus);
  const fs::path files = dir / kVariants / "files";
  std::error_code ec;
  fs::create_directories(files, ec);
  if (ec) return Error::bad_input(fmt::format("--mirror {}: cannot create variants/files/: {}", text::quoted(dir.string()), ec.message()));
  auto in = [&](const std::string& project) { return only.empty() || only.count(project) > 0; };
  json record = read_record(dir);
  json kept = json::object();
  std::map<std::string, Hashed> hashes;
  std::vector<std::string> written;
  for (const auto& w : set.wheels) {
    const auto& src = m.files.at(w.source);
    const json rec = record["files"].value(w.file, json());
    if (!in(w.project)) {
      if (rec.is_object()) kept[w.file] = rec;
      continue;
    }
    auto target = files / w.file;
    std::optional<Hashed> have;
    // Recorded from this build: trusted by its size on a publish, re-hashed on a rebuild.
    if (rec.is_object() && rec.value("source", "") == w.source && rec.value("source_sha256", "") == src.sha256) {
      if (!only.empty()) {
        if (auto size = fs::file_size(target, ec); !ec && size == rec.value("size", std::uint64_t{0}))
          have = Hashed{rec.value("sha256", ""), size};
      } else if (auto h = hash_of(target); h && h->sha256 == rec.value("sha256", "")) {
        have = h;
      }
    }
    if (!have) {
      if (auto made = write_variant_wheel(dir / "files" / w.source, target, w); !made) return made.error();
      have = hash_of(target);
      if (!have) return Error::not_fine(fmt::format("variants/files/{}: cannot be read back", w.file));
      written.push_back(w.file);
    }
    hashes[w.file] = *have;
    kept[w.file] = {{"source", w.source}, {"source_sha256", src.sha256}, {"sha256", have->sha256}, {"size", have->size}};
  }
  for (const auto& [name, content] : set.index_files)
    if (in(set.index_project.at(name)))
      if (auto w = write_if_changed(files / name, content); !w) return w.error();
  // Project pages before the root pages (a pip reading the root finds every page it links).
  auto pages = variant_pages(set, m, hashes, only.empty() ? std::set<std::string>{} : only);
  for (const auto& [rel, content] : pages)
    if (rel.parent_path() != kVariants / "simple")
      if (auto w = write_if_changed(dir / rel, content); !w) return w.error();
  for (const char* root : {"index.html", "index.json"})
    if (auto w = write_if_changed(dir / kVariants / "simple" / root, pages.at(kVariants / "simple" / root)); !w) return w.error();
  // What is no longer derived: the touched projects' pages that offer nothing now, and in a
  // rebuild every file and page of no variant.
  std::set<std::string> projects, derived_files;
  for (const auto& w : set.wheels) projects.insert(w.project), derived_files.insert(w.file);
  for (const auto& [name, content] : set.index_files) derived_files.insert(name);
  for (const auto& p : only)
    if (!projects.count(p)) fs::remove_all(dir / kVariants / "simple" / p, ec);
  if (only.empty()) {
    std::vector<fs::path> gone;  // listed first: removing while a directory is read may skip entries
    for (const auto& d : fs::directory_iterator(files, ec))
      if (!derived_files.count(d.path().filename().string())) gone.push_back(d.path());
    for (const auto& d : fs::directory_iterator(dir / kVariants / "simple", ec))
      if (d.is_directory() && !projects.count(d.path().filename().string())) gone.push_back(d.path());
    for (const auto& p : gone) fs::remove_all(p, ec);
  }
  if (auto w = write_if_changed(dir / kVariants / "files.json", json{{"format", 1}, {"files", kept}}.dump(1) + "\n"); !w)
    return w.error();
  return written;
}

void verify_variants(const fs::path& dir, const Manifest& m, const arch::ArchData& gpus, VerifyReport& r) {
  if (!has_variants(dir)) return;
  auto set = derive_variants(m, gpus);
  auto problem = [&](std::string kind, std::string file, std::string detail) {
    r.problems.push_back({std::move(kind), std::move(file), std::move(detail)});
  };
  // Each variant wheel is made again in a temporary folder: the file offered must be those bytes.
  std::error_code tmp_ec;
  std::string tmpl = (fs::temp_directory_path(tmp_ec) / "archbuild-variants-XXXXXX").string();
  const char* made_dir = tmp_ec ? nullptr : ::mkdtemp(tmpl.data());
  std::map<std::string, Hashed> hashes;
  std::set<std::string> derived;
  for (const auto& w : set.wheels) {
    derived.insert(w.file);
    auto rel = (kVariants / "files" / w.file).string();
    auto have = hash_of(dir / kVariants / "files" / w.file);
    ++r.files_checked;
    if (!have) {
      problem("variant-missing", rel, fmt::format("the variant of files/{} is not there (publish --rebuild-views writes it)", w.source));
      continue;
    }
    hashes[w.file] = *have;
    if (!made_dir) continue;
    auto again = fs::path(made_dir) / w.file;
    auto made = write_variant_wheel(dir / "files" / w.source, again, w);
    auto want = made ? hash_of(again) : std::nullopt;
    if (!want)
      problem("variant-stale", rel, fmt::format("cannot be made again from files/{}: {}", w.source, made ? "unreadable" : made.error().message));
    else if (want->sha256 != have->sha256)
      problem("variant-stale", rel, fmt::format("sha256 {} but files/{} gives {} (publish --rebuild-views)", have->sha256, w.source, want->sha256));
    std::error_code ec;
    fs::remove(again, ec);
  }
  if (made_dir) {
    std::error_code ec;
    fs::remove_all(made_dir, ec);
  } else {
    problem("variant-stale", "variants/files", "no temporary folder to make the variant wheels again in: their bytes were not checked");
  }
  auto check = [&](const fs::path& rel, const std::string& want) {
    ++r.pages_checked;
    auto have = read_text(dir / rel);
    if (!have)
      problem("variant-missing", rel.string(), "not there (publish --rebuild-views writes it)");
    else if (*have != want)
      problem("variant-stale", rel.string(), "differs from what manifest.json derives (publish --rebuild-views)");
  };
  for (const auto& [name, content] : set.index_files) {
    derived.insert(name);
    check(kVariants / "files" / name, content);
  }
  std::set<std::string> projects;
  for (const auto& w : set.wheels) projects.insert(w.project);
  for (const auto& [rel, content] : variant_pages(set, m, hashes, {})) check(rel, content);
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(dir / kVariants / "files", ec)) {
    auto name = d.path().filename().string();
    if (!is_temp(name) && !derived.count(name))
      problem("variant-extra", (kVariants / "files" / name).string(), "no published build derives it");
  }
  for (const auto& d : fs::directory_iterator(dir / kVariants / "simple", ec))
    if (d.is_directory() && !projects.count(d.path().filename().string()))
      problem("variant-extra", fs::relative(d.path(), dir).string(), "a project page the variants do not offer");
}

nlohmann::json summarise_variants(const fs::path& dir, const std::set<std::string>& projects, const arch::ArchData& gpus) {
  if (!has_variants(dir)) return nullptr;
  auto m = read_manifest(dir);
  if (!m) return nullptr;  // the publish that just wrote it read it: a damaged manifest is verify's to say
  auto set = derive_variants(*m, gpus);
  nlohmann::json files = nlohmann::json::array();
  for (const auto& w : set.wheels)
    if (projects.empty() || projects.count(w.project)) files.push_back({{"file", w.file}, {"label", w.label}, {"from", w.source}});
  return {{"index_url", file_url_of(dir / "variants" / "simple")}, {"files", files}, {"left_out", set.left_out}};
}

}  // namespace archbuild::mirror
