#include "mirror/views.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "arch/arch_data.hpp"
#include "core/path_kind.hpp"
#include "core/text.hpp"
#include "mirror/variants.hpp"
#include "store/atomic_file.hpp"
#include "store/lock.hpp"
#include "validate/wheel_check.hpp"

namespace archbuild::mirror {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// From a view's project page to files/: gpu/sm_XY/simple/<project>/ is four levels down.
constexpr const char* kFilesFromView = "../../../../files/";

// "sm_90a" / "compute_120" back to an image.
std::optional<arch::CodeImage> parse_image(std::string_view s) {
  arch::CodeImage im;
  if (s.starts_with("sm_")) {
    im.kind = arch::CodeKind::sass;
    s.remove_prefix(3);
  } else if (s.starts_with("compute_")) {
    im.kind = arch::CodeKind::ptx;
    s.remove_prefix(8);
  } else {
    return std::nullopt;
  }
  if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) {
    im.variant = s.back() == 'a' ? arch::Variant::a : arch::Variant::f;
    s.remove_suffix(1);
  }
  if (s.size() < 2 || s.size() > 4 || !std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  im.cc = arch::Cc::from_sm(std::stoi(std::string(s)));
  return im;
}

// The facts of every entry that has them.
std::map<std::string, GpuFacts> facts_of(const Manifest& m) {
  std::map<std::string, GpuFacts> out;
  for (const auto& [file, e] : m.files)
    if (auto f = GpuFacts::from_json(e.gpu)) out.emplace(file, std::move(*f));
  return out;
}

// What makes two files alternatives of each other in a view: the same project, public version,
// build tag and wheel tags (pip picks among different tags itself).
std::string group_of(const Entry& e) {
  auto n = validate::parse_wheel_name(e.file);
  if (!n) return e.file;
  return fmt::format("{}|{}|{}|{}", e.project, public_version(e.version), n->build.value_or(""), text::join(n->tags(), ","));
}

// A requirement on a project of the mirror, as far as views need it: the name and the `==`/`===`
// versions it pins (other operators: any file of the project satisfies it).
struct Requirement {
  std::string project;
  std::vector<std::string> exact;
};

std::optional<Requirement> parse_requirement(std::string_view line) {
  std::string s(line);
  if (auto semi = s.find(';'); semi != std::string::npos) {
    // An extra's requirement is not installed by `pip install NAME`: it does not bind the view.
    if (s.find("extra", semi) != std::string::npos) return std::nullopt;
    s.resize(semi);
  }
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  std::size_t start = i;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == '_' || s[i] == '-')) ++i;
  if (i == start) return std::nullopt;
  Requirement r;
  r.project = validate::normalize_name(s.substr(start, i - start));
  std::string rest = s.substr(i);
  if (auto b = rest.find('['); b != std::string::npos)
    if (auto e = rest.find(']', b); e != std::string::npos) rest.erase(b, e - b + 1);
  std::erase_if(rest, [](char c) { return c == '(' || c == ')' || std::isspace(static_cast<unsigned char>(c)); });
  for (const auto& spec : text::split_any(rest, ",")) {
    if (spec.starts_with("===")) r.exact.push_back(spec.substr(3));
    else if (spec.starts_with("==")) r.exact.push_back(spec.substr(2));
  }
  return r;
}

bool satisfies(const Entry& e, const std::string& pinned) {
  auto lower = [](std::string s) { return text::lower(std::move(s)); };
  if (pinned.ends_with(".*")) {
    auto prefix = pinned.substr(0, pinned.size() - 1);
    return (public_version(e.version) + ".").starts_with(prefix);
  }
  if (pinned.find('+') != std::string::npos) return lower(e.version) == lower(pinned);
  return lower(public_version(e.version)) == lower(pinned);
}

// Orders the builds of one group on one GPU: better fit, then the image nearest the GPU (the
// highest CC among the images its files load), then the build made for fewer GPUs (fewer
// images), then the later published, then the file name.
struct Ranked {
  Fit fit = Fit::none;
  int nearest = 0;  // the lowest, over its files, of the loaded image's CC (sm number)
  std::size_t images = 0;
  const Entry* entry = nullptr;
  bool operator<(const Ranked& o) const {
    if (fit != o.fit) return fit < o.fit;
    if (nearest != o.nearest) return nearest > o.nearest;
    if (images != o.images) return images < o.images;
    if (entry->published_at != o.entry->published_at) return entry->published_at > o.entry->published_at;
    return entry->file < o.entry->file;
  }
};

Ranked rank(const Entry& e, const GpuFacts& f, arch::Cc cc) {
  Ranked r;
  r.entry = &e;
  r.fit = fit_on(f, cc);
  r.nearest = 1 << 20;
  for (const auto& file : f.files) {
    r.images += file.images.size();
    auto v = arch::run_verdict(file.images, cc);
    if (v.image) r.nearest = std::min(r.nearest, v.image->cc.sm());
  }
  if (f.files.empty()) r.nearest = 0;
  return r;
}

std::string view_project_page(const std::string& project, const std::vector<Entry>& entries) {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html>\n<head>\n<meta name=\"pypi:repository-version\" content=\"1.1\">\n"
      "<title>Links for {0}</title>\n</head>\n<body>\n<h1>Links for {0}</h1>\n",
      html_escape(project));
  for (const auto& e : entries)
    out += fmt::format("<a href=\"{}{}#sha256={}\">{}</a><br>\n", kFilesFromView, html_escape(percent_encode(e.file)), e.sha256,
                       html_escape(e.file));
  return out + "</body>\n</html>\n";
}

std::string view_project_json(const std::string& project, const std::vector<Entry>& entries) {
  json files = json::array();
  std::set<std::string> versions;
  for (const auto& e : entries) {
    files.push_back({{"filename", e.file},
                     {"url", kFilesFromView + percent_encode(e.file)},
                     {"hashes", {{"sha256", e.sha256}}},
                     {"size", e.size},
                     {"upload-time", e.published_at}});
    versions.insert(e.version);
  }
  return json{{"meta", {{"api-version", "1.1"}}}, {"name", project}, {"files", files}, {"versions", versions}}.dump(1) + "\n";
}

std::string view_root_json(const View& v) {
  json projects = json::array();
  for (const auto& [p, entries] : v.projects) projects.push_back({{"name", p}});
  return json{{"meta", {{"api-version", "1.1"}}}, {"projects", projects}}.dump(1) + "\n";
}

std::string views_json(const std::vector<View>& views) {
  json all = json::object();
  for (const auto& v : views) {
    json projects = json::object();
    for (const auto& [p, entries] : v.projects) {
      json files = json::array();
      for (const auto& e : entries) files.push_back(e.file);
      projects[p] = files;
    }
    all[view_name(v.cc)] = {{"cc", v.cc.str()}, {"projects", projects}};
  }
  return json{{"format", 1}, {"views", all}}.dump(1) + "\n";
}

// Every page of a view: its path under DIR and its content.
std::map<fs::path, std::string> pages_of(const View& v, const std::set<std::string>& only) {
  std::map<fs::path, std::string> out;
  fs::path root = fs::path("gpu") / view_name(v.cc) / "simple";
  std::vector<std::string> names;
  for (const auto& [p, entries] : v.projects) {
    names.push_back(p);
    if (!only.empty() && !only.count(p)) continue;
    out[root / p / "index.html"] = view_project_page(p, entries);
    out[root / p / "index.json"] = view_project_json(p, entries);
  }
  out[root / "index.html"] = root_page(names);
  out[root / "index.json"] = view_root_json(v);
  return out;
}

}  // namespace

std::optional<std::string> read_text(const fs::path& p) {
  // A page, the manifest or a wheel is a regular file: a FIFO put in the mirror would block open().
  if (!paths::expect_regular_file(p, "mirror file")) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Pages are rewritten only when their content changes: publishing the same file again leaves
// every page (and its mtime) as it was, and a publish repairs pages a crash left stale.
Result<bool> write_if_changed(const fs::path& p, const std::string& content) {
  if (auto old = read_text(p); old && *old == content) return false;
  auto w = store::write_file_atomic(p, content);
  if (!w) return w.error();
  return true;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

json GpuFacts::to_json() const {
  json files_j = json::array();
  for (const auto& f : files) {
    json images = json::array();
    for (const auto& i : f.images) images.push_back(i.name());
    files_j.push_back({{"path", f.path}, {"images", images}});
  }
  return {{"files", files_j}, {"requires", requires_dist}};
}

std::optional<GpuFacts> GpuFacts::from_json(const json& j) {
  if (!j.is_object() || !j.contains("files") || !j["files"].is_array()) return std::nullopt;
  GpuFacts f;
  for (const auto& fj : j["files"]) {
    if (!fj.is_object() || !fj.contains("images") || !fj["images"].is_array()) return std::nullopt;
    File file;
    file.path = fj.value("path", std::string());
    for (const auto& i : fj["images"]) {
      if (!i.is_string()) return std::nullopt;
      auto im = parse_image(i.get<std::string>());
      if (!im) return std::nullopt;
      file.images.push_back(*im);
    }
    f.files.push_back(std::move(file));
  }
  if (j.contains("requires") && j["requires"].is_array())
    for (const auto& r : j["requires"])
      if (r.is_string()) f.requires_dist.push_back(r.get<std::string>());
  return f;
}

Result<GpuFacts> read_gpu_facts(const fs::path& wheel) {
  auto contents = validate::read_wheel(wheel);
  if (!contents) return contents.error();
  GpuFacts f;
  for (const auto& e : contents->elf)
    if (e.has_device_code()) f.files.push_back({e.path, e.code_images()});
  auto name = validate::parse_wheel_name(wheel.filename().string());
  auto di = validate::chosen_dist_info(*contents, name ? std::optional(*name) : std::nullopt);
  if (const auto* meta = contents->text(di + "/METADATA")) {
    auto headers = validate::parse_headers(*meta);
    if (auto it = headers.find("Requires-Dist"); it != headers.end()) f.requires_dist = it->second;
  }
  return f;
}

std::string_view to_string(Fit f) {
  switch (f) {
    case Fit::native: return "native";
    case Fit::family_sass: return "family-sass";
    case Fit::ptx: return "ptx-jit";
    case Fit::cpu: return "cpu";
    case Fit::none: break;
  }
  return "none";
}

Fit fit_on(const GpuFacts& facts, arch::Cc cc) {
  if (facts.files.empty()) return Fit::cpu;
  auto worst = arch::RunResult::native;
  for (const auto& f : facts.files) worst = std::max(worst, arch::run_verdict(f.images, cc).result);  // best to worst
  switch (worst) {
    case arch::RunResult::native: return Fit::native;
    case arch::RunResult::compatible_sass: return Fit::family_sass;
    case arch::RunResult::ptx_jit: return Fit::ptx;
    case arch::RunResult::no_kernel_image: break;
  }
  return Fit::none;
}

std::string view_name(arch::Cc cc) { return fmt::format("sm_{}", cc.sm()); }

std::string public_version(std::string_view version) {
  auto plus = version.find('+');
  return std::string(version.substr(0, plus));
}

int compare_local(std::string_view a, std::string_view b) {
  auto segments = [](std::string_view s) { return text::split_any(std::string(s), ".-_"); };
  auto sa = segments(a), sb = segments(b);
  auto numeric = [](const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  };
  for (std::size_t i = 0; i < sa.size() && i < sb.size(); ++i) {
    bool na = numeric(sa[i]), nb = numeric(sb[i]);
    if (na != nb) return na ? 1 : -1;  // PEP 440: a numeric segment is greater than an alphanumeric one
    if (na) {
      auto x = sa[i].find_first_not_of('0'), y = sb[i].find_first_not_of('0');
      std::string ta = x == std::string::npos ? "" : sa[i].substr(x), tb = y == std::string::npos ? "" : sb[i].substr(y);
      if (ta.size() != tb.size()) return ta.size() < tb.size() ? -1 : 1;
      if (ta != tb) return ta < tb ? -1 : 1;
    } else if (auto la = text::lower(sa[i]), lb = text::lower(sb[i]); la != lb) {
      return la < lb ? -1 : 1;
    }
  }
  if (sa.size() != sb.size()) return sa.size() < sb.size() ? -1 : 1;
  return 0;
}

const Entry* plain_pick(const std::vector<Entry>& same) {
  const Entry* best = nullptr;
  auto local = [](const Entry& e) {
    auto plus = e.version.find('+');
    return plus == std::string::npos ? std::string() : e.version.substr(plus + 1);
  };
  for (const auto& e : same)
    if (!best || (local(*best).empty() && !local(e).empty()) ||
        (!local(e).empty() && compare_local(local(e), local(*best)) > 0))
      best = &e;
  return best;
}

std::vector<View> derive_views(const Manifest& m, const arch::ArchData& gpus) {
  auto facts = facts_of(m);
  // Which projects each project's Requires-Dist binds (only projects of this mirror).
  std::map<std::string, std::vector<Requirement>> needs;  // by file
  std::set<std::string> projects;
  for (const auto& [file, e] : m.files) projects.insert(e.project);
  for (const auto& [file, f] : facts)
    for (const auto& line : f.requires_dist)
      if (auto r = parse_requirement(line); r && projects.count(r->project) && r->project != m.files.at(file).project)
        needs[file].push_back(*r);

  std::vector<View> views;
  for (const auto& known : gpus.ccs()) {
    if (known.renamed_to) continue;  // 10.1 is 11.0's old name: one view
    const arch::Cc cc = known.cc;
    bool gpu_build = false;
    for (const auto& [file, f] : facts) gpu_build = gpu_build || (!f.files.empty() && fit_on(f, cc) != Fit::none);
    if (!gpu_build) continue;
    View v;
    v.cc = cc;
    // Projects whose requirements bind other projects go after those (a few passes: chains of
    // torch -> torchvision -> a package built on it; a cycle is left out).
    std::set<std::string> done;
    for (std::size_t pass = 0; pass <= projects.size(); ++pass) {
      for (const auto& project : projects) {
        if (done.count(project)) continue;
        bool ready = true;
        for (const auto& [file, e] : m.files)
          if (e.project == project && needs.count(file))
            for (const auto& r : needs[file]) ready = ready && done.count(r.project);
        if (!ready && pass < projects.size()) continue;
        done.insert(project);
        std::map<std::string, std::vector<Ranked>> groups;
        for (const auto& [file, e] : m.files) {
          if (e.project != project || !facts.count(file)) continue;
          Ranked r = rank(e, facts.at(file), cc);
          if (r.fit == Fit::none) continue;
          bool bound = true;  // a dependent only where what it requires is
          if (needs.count(file))
            for (const auto& req : needs[file]) {
              auto it = v.projects.find(req.project);
              bool any = it != v.projects.end() && !it->second.empty();
              if (any && !req.exact.empty())
                any = std::any_of(it->second.begin(), it->second.end(), [&](const Entry& d) {
                  return std::all_of(req.exact.begin(), req.exact.end(), [&](const std::string& x) { return satisfies(d, x); });
                });
              bound = bound && any;
            }
          if (bound) groups[group_of(e)].push_back(r);
        }
        std::vector<Entry> chosen;
        for (auto& [g, candidates] : groups) chosen.push_back(*std::min_element(candidates.begin(), candidates.end())->entry);
        std::sort(chosen.begin(), chosen.end(), [](const Entry& a, const Entry& b) { return a.file < b.file; });
        if (!chosen.empty()) v.projects[project] = std::move(chosen);
      }
      if (done.size() == projects.size()) break;
    }
    views.push_back(std::move(v));
  }
  return views;
}

Result<std::size_t> fill_gpu_facts(const fs::path& dir, Manifest& m) {
  std::size_t added = 0;
  for (auto& [file, e] : m.files) {
    if (GpuFacts::from_json(e.gpu)) continue;
    auto path = dir / "files" / file;
    if (auto is = paths::expect_regular_file(path, "mirror file"); !is) continue;  // verify reports a missing file
    auto f = read_gpu_facts(path);
    if (!f) return Error::not_fine(fmt::format("files/{}: its device code cannot be read: {}", file, f.error().message));
    e.gpu = f->to_json();
    ++added;
  }
  return added;
}

std::set<std::string> dependents_of(const Manifest& m, const std::set<std::string>& projects) {
  std::set<std::string> out = projects;
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [file, e] : m.files) {
      if (out.count(e.project)) continue;
      auto f = GpuFacts::from_json(e.gpu);
      if (!f) continue;
      for (const auto& line : f->requires_dist)
        if (auto r = parse_requirement(line); r && out.count(r->project)) {
          out.insert(e.project);
          grew = true;
          break;
        }
    }
  }
  return out;
}

Result<std::vector<std::string>> write_views(const fs::path& dir, const Manifest& m, const arch::ArchData& gpus,
                                             const std::set<std::string>& only) {
  auto views = derive_views(m, gpus);
  std::vector<std::string> written;
  std::set<std::string> names;
  for (const auto& v : views) {
    names.insert(view_name(v.cc));
    bool any = false;
    // A view new on disk (or deleted by hand) gets every page: CPU builds of other projects are
    // offered in it too.
    std::error_code missing;
    const bool fresh = !fs::is_regular_file(dir / "gpu" / view_name(v.cc) / "simple" / "index.html", missing);
    auto pages = pages_of(v, fresh ? std::set<std::string>{} : only);
    // Project pages before the view's root page: a pip reading the root finds every page it links.
    for (const auto& [rel, content] : pages) {
      if (rel.filename() == "index.html" && rel.parent_path().filename() == "simple") continue;
      if (rel.filename() == "index.json" && rel.parent_path().filename() == "simple") continue;
      auto w = write_if_changed(dir / rel, content);
      if (!w) return w.error();
      any = any || *w;
    }
    for (const char* root : {"index.html", "index.json"}) {
      auto rel = fs::path("gpu") / view_name(v.cc) / "simple" / root;
      auto w = write_if_changed(dir / rel, pages.at(rel));
      if (!w) return w.error();
      any = any || *w;
    }
    // A touched project the view no longer offers.
    std::error_code ec;
    for (const auto& p : only)
      if (!v.projects.count(p)) any = fs::remove_all(dir / "gpu" / view_name(v.cc) / "simple" / p, ec) > 0 || any;
    if (any) written.push_back(view_name(v.cc));
  }
  // Views no longer derived (a rebuild only: a publish adds files, it never takes a GPU away).
  std::error_code ec;
  if (only.empty() && fs::is_directory(dir / "gpu", ec))
    for (const auto& d : fs::directory_iterator(dir / "gpu", ec))
      if (d.is_directory() && !names.count(d.path().filename().string())) fs::remove_all(d.path(), ec);
  if (!views.empty() || fs::exists(dir / "gpu", ec))
    if (auto w = write_if_changed(dir / "gpu" / "views.json", views_json(views)); !w) return w.error();
  return written;
}

Result<std::vector<std::string>> rebuild_views(const fs::path& dir, const arch::ArchData& gpus, bool variants) {
  if (auto is_dir = paths::expect_directory(dir, "--mirror"); !is_dir) return is_dir.error();
  auto lock = store::FileLock::acquire(dir / ".lock");
  if (!lock) return lock.error();
  auto m = read_manifest(dir);
  if (!m) return m.error();
  auto filled = fill_gpu_facts(dir, *m);
  if (!filled) return filled.error();
  if (*filled > 0)
    if (auto w = store::write_file_atomic(dir / "manifest.json", to_json(*m).dump(1) + "\n"); !w) return w.error();
  auto written = write_views(dir, *m, gpus);
  if (written && (variants || has_variants(dir)))
    if (auto v = write_variants(dir, *m, gpus); !v) return v.error();
  return written;
}

void verify_views(const fs::path& dir, const Manifest& m, const arch::ArchData& gpus, VerifyReport& r) {
  std::error_code ec;
  bool any_facts = std::any_of(m.files.begin(), m.files.end(), [](const auto& kv) { return GpuFacts::from_json(kv.second.gpu).has_value(); });
  if (!any_facts && !fs::exists(dir / "gpu", ec)) return;  // a mirror of an archbuild without views
  for (const auto& [file, e] : m.files)
    if (!GpuFacts::from_json(e.gpu))
      r.problems.push_back({"gpu-facts-missing", file, "manifest.json has no device code for it (publish --rebuild-views reads it)"});
  auto views = derive_views(m, gpus);
  if (views.empty() && !fs::exists(dir / "gpu", ec)) return;  // no build with device code: nothing derived
  std::set<std::string> names;
  auto check = [&](const fs::path& rel, const std::string& want) {
    ++r.pages_checked;
    auto have = read_text(dir / rel);
    if (!have)
      r.problems.push_back({"view-missing", rel.string(), "not there (publish --rebuild-views writes it)"});
    else if (*have != want)
      r.problems.push_back({"view-stale", rel.string(), "differs from what manifest.json derives (publish --rebuild-views)"});
  };
  for (const auto& v : views) {
    names.insert(view_name(v.cc));
    for (const auto& [rel, content] : pages_of(v, {})) check(rel, content);
    auto simple = dir / "gpu" / view_name(v.cc) / "simple";
    if (fs::is_directory(simple, ec))
      for (const auto& d : fs::directory_iterator(simple, ec))
        if (d.is_directory() && !v.projects.count(d.path().filename().string()))
          r.problems.push_back({"view-extra", fs::relative(d.path(), dir).string(), "a project page the view does not offer"});
  }
  check(fs::path("gpu") / "views.json", views_json(views));
  if (fs::is_directory(dir / "gpu", ec))
    for (const auto& d : fs::directory_iterator(dir / "gpu", ec))
      if (d.is_directory() && !names.count(d.path().filename().string()))
        r.problems.push_back({"view-extra", fs::relative(d.path(), dir).string(), "no published build runs on this GPU"});
}

ViewChoice choose_view(const Manifest& m, const std::vector<arch::Cc>& ccs, const arch::ArchData& gpus) {
  ViewChoice c;
  if (ccs.empty()) {
    c.why = "no GPU to choose a view for";
    return c;
  }
  auto views = derive_views(m, gpus);
  auto facts = facts_of(m);
  std::vector<arch::Cc> missing;
  for (const auto& cc : ccs) {
    auto v = std::find_if(views.begin(), views.end(), [&](const View& x) { return x.cc == cc; });
    if (v == views.end()) {
      missing.push_back(cc);
      continue;
    }
    bool all = !v->projects.empty();
    for (const auto& [p, entries] : v->projects)
      for (const auto& e : entries)
        for (const auto& other : ccs) all = all && facts.count(e.file) && fit_on(facts.at(e.file), other) != Fit::none;
    if (all) {
      c.cc = cc;
      for (const auto& [p, entries] : v->projects) c.projects.push_back(p);
      return c;
    }
  }
  auto listed = [](const std::vector<arch::Cc>& v, const char* sep) {
    std::vector<std::string> out;
    for (const auto& cc : v) out.push_back(cc.str());
    return text::join(out, sep);
  };
  std::vector<std::string> dirs;
  for (const auto& cc : missing) dirs.push_back("gpu/" + view_name(cc));
  c.why = !missing.empty()
              ? fmt::format("no published build runs on CC {} (the mirror has no view {})", listed(missing, ", "),
                            text::join(dirs, ", "))
              : fmt::format("no published build runs on every GPU here (CC {}): each view offers a build that leaves one "
                            "of them out",
                            listed(ccs, " and "));
  return c;
}

Result<ViewAdvice> advise_view(std::string url, const std::vector<arch::Cc>& ccs, const std::string& pip,
                               const arch::ArchData& gpus) {
  ViewAdvice m;
  const std::string given = url;
  while (url.ends_with("/")) url.pop_back();
  if (url.ends_with("/simple")) url.resize(url.size() - 7);  // the plain index's URL given: its mirror
  const bool remote = url.starts_with("http://") || url.starts_with("https://");
  if (remote) {
    if (ccs.size() != 1) {
      m.why = "a host with several kinds of GPU: which view runs on all of them is read from the mirror's manifest, "
              "which only a local mirror (file:// or a path) gives here";
      return m;
    }
    m.ok = true;
    m.view = view_name(ccs[0]);
    m.index_url = url + "/gpu/" + m.view + "/simple";
    m.pip = fmt::format("{} install --index-url {} PACKAGE", pip, m.index_url);
    m.why = "not checked: the mirror is not local";
    return m;
  }
  std::filesystem::path dir = url.starts_with("file://") ? url.substr(7) : url;
  auto manifest = read_manifest(dir);
  if (!manifest) return manifest.error();
  if (manifest->files.empty())
    return Error::bad_input(fmt::format("mirror {}: no manifest.json with published files", text::quoted(given)));
  m.checked = true;
  auto choice = choose_view(*manifest, ccs, gpus);
  if (!choice.cc) {
    m.why = choice.why;
    return m;
  }
  m.ok = true;
  m.view = view_name(*choice.cc);
  m.projects = choice.projects;
  m.index_url = "file://" + std::filesystem::absolute(dir / "gpu" / m.view / "simple").lexically_normal().string();
  m.pip = fmt::format("{} install --index-url {} {}", pip, m.index_url, text::join(m.projects, " "));
  return m;
}

std::string file_url_of(const fs::path& p) { return "file://" + fs::absolute(p).lexically_normal().string(); }

Result<PublishSummary> summarise_publish(const fs::path& dir, const std::vector<Published>& published,
                                         const arch::ArchData& gpus) {
  PublishSummary out;
  auto m = read_manifest(dir);
  if (!m) return m.error();
  std::set<std::string> projects;
  std::set<std::pair<std::string, std::string>> versions;  // project, public version
  for (const auto& p : published) {
    projects.insert(p.entry.project);
    versions.insert({p.entry.project, public_version(p.entry.version)});
  }
  auto views = derive_views(*m, gpus);
  for (const auto& pv : versions) {
    std::vector<Entry> same;
    for (const auto& [file, e] : m->files)
      if (e.project == pv.first && public_version(e.version) == pv.second) same.push_back(e);
    const auto* pick = plain_pick(same);
    if (!pick) continue;
    std::vector<std::string> runs;
    auto facts = GpuFacts::from_json(pick->gpu);
    for (const auto& v : views)
      if (facts && fit_on(*facts, v.cc) != Fit::none) runs.push_back(view_name(v.cc));
    out.simple.push_back({{"project", pv.first}, {"version", pv.second}, {"picks", pick->file}, {"runs_on", runs}});
    if (same.size() > 1)
      out.lines.push_back(fmt::format(
          "simple/ lists every build of {} {}; `pip install {}=={}` from it gets {} (the highest local label, PEP 440), "
          "which runs on {}: install from the GPU's view below",
          pv.first, pv.second, pv.first, pv.second, pick->file, runs.empty() ? "no GPU of a view" : text::join(runs, ", ")));
  }
  for (const auto& v : views) {
    std::vector<std::string> here;
    for (const auto& p : projects)
      if (v.projects.count(p)) here.push_back(p);
    if (here.empty()) continue;
    auto url = file_url_of(dir / "gpu" / view_name(v.cc) / "simple");
    std::vector<std::string> offered;
    for (const auto& p : here)
      for (const auto& e : v.projects.at(p)) offered.push_back(e.file);
    out.views.push_back({{"sm", v.cc.str()}, {"view", view_name(v.cc)}, {"index_url", url}, {"files", offered}});
    out.lines.push_back(fmt::format("{:<7} pip install --index-url {} {}", view_name(v.cc), url, text::join(here, " ")));
  }
  out.variants = summarise_variants(dir, projects, gpus);
  if (!out.variants.is_null()) {
    std::vector<std::string> names;
    for (const auto& f : out.variants["files"]) names.push_back(f["file"].get<std::string>());
    out.lines.push_back(fmt::format(
        "PEP 825 variant wheels (for a variant-aware installer; pip ignores them): --index-url {}{}",
        out.variants["index_url"].get<std::string>(), names.empty() ? " (none of these builds)" : ": " + text::join(names, ", ")));
  }
  if (out.views.empty())
    out.lines.push_back(fmt::format("no GPU view offers it (no device code): pip install --index-url {} {}",
                                    file_url_of(dir / "simple"),
                                    text::join(std::vector<std::string>(projects.begin(), projects.end()), " ")));
  return out;
}

}  // namespace archbuild::mirror
