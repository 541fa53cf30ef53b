#include "prepare/prepare.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>

#include "contract/contract.hpp"
#include "core/data_dir.hpp"
#include "core/text.hpp"
#include "core/toml_load.hpp"
#include "plan/libraries.hpp"
#include "plan/library_probe.hpp"
#include "recipe/driver.hpp"
#include "recipe/library_spec.hpp"
#include "run/interrupt.hpp"
#include "source/local.hpp"
#include "source/source.hpp"
#include "stages/local_tree.hpp"
#include "stages/pipeline.hpp"
#include "stages/venv.hpp"
#include "store/wheels.hpp"

namespace archbuild::prepare {

namespace fs = std::filesystem;

std::optional<Error> Prepared::first_stop() const {
  if (stops.empty()) return std::nullopt;
  return stops.front().error;
}

std::vector<Stop> launch_stops(const std::optional<fs::path>& cache_dir, const fs::path& out) {
  std::vector<Stop> stops;
  if (auto dir = store::choose_cache_dir(cache_dir); !dir) stops.push_back({rules::Id::cache_dir, dir.error()});
  if (auto c = store::check_out_dir(fs::absolute(out)); !c) stops.push_back({rules::Id::out, c.error()});
  return stops;
}

Stop store_required_stop(const std::string& problem) {
  return {rules::Id::store_required, Error::missing_tool(fmt::format("--store-required: {}", problem))};
}

// ---- the parts -------------------------------------------------------------------------------

Result<plan::LibraryFacts> gather_libraries(const plan::Resolution& r, const std::vector<recipe::LibrarySpec>& specs,
                                            const std::map<std::string, std::string>& env_args,
                                            const std::vector<fs::path>& site_packages) {
  plan::LibrarySearch search;
  const auto& allow = plan::build_env_allowlist();
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq);
    if (plan::env_allowed(allow, name)) search.env[name] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : env_args) search.env[k] = v;
  if (r.toolkit) {
    search.toolkit_root = r.toolkit->root;
    search.toolkit_label = "CUDA " + r.toolkit->version.str();
  }
  search.site_packages = site_packages;
  search.machine = r.platform.machine;
  search.dirs = toolchain::library_dirs_of(r.platform);
  return plan::probe_libraries(recipe::merge_specs(specs, r.recipe.libraries.define), search);
}

std::vector<fs::path> venv_site_packages(const std::optional<plan::BuildVenv>& venv) {
  if (!venv) return {};
  auto parts = text::split_any(venv->interpreter_version, ".");
  if (parts.size() < 2) return {};
  return {venv->dir / "lib" / ("python" + parts[0] + "." + parts[1]) / "site-packages"};
}

plan::HostFigures host_figures(const fs::path& cache_dir) {
  plan::HostFigures h;
  h.cache_dir = cache_dir;
  // The cache may not exist yet: measure the nearest folder that does.
  std::error_code ec;
  fs::path p = cache_dir;
  while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  auto sp = fs::space(p.empty() ? fs::path("/") : p, ec);
  if (!ec) h.free_bytes = sp.available;
  h.mem_available = plan::HostResources::current().mem_available;
  return h;
}

std::map<std::string, std::string> planned_env(const plan::Resolution& r, const plan::PlanOptions& po) {
  std::map<std::string, std::string> env = po.env;
  if (auto draft = plan::make_plan(r, po))
    for (const auto& [k, v] : (*draft)->env) env[k] = v.value;
  return env;
}

std::optional<Version> tree_release_line(const fs::path& dir) {
  std::ifstream in(dir / "version.txt");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  auto v = contract::release_part(text::trim(line));
  if (!v || v->size() < 2) return std::nullopt;
  return v->prefix(2);
}

namespace {

source::SourceOptions source_options(bool offline, const Services& s) {
  source::SourceOptions so;
  so.offline = offline;
  so.cancelled = [] { return run::interrupt_requested(); };
  so.note = s.note;
  return so;
}

source::MirrorSlot mirror_slot(const store::Layout& layout, const std::string& url) {
  // The cache is made only when a mirror is touched (`plan` on a fresh host writes nothing).
  if (auto e = layout.create(); !e) throw Failure(e.error());
  return source::MirrorSlot{layout.git_mirror(url), layout.git_mirror_lock(url)};
}

const store::Layout& need_cache(const Cache& cache, const std::string& what) {
  if (!cache.layout) throw Failure(Error::bad_input(fmt::format("{} needs a cache directory: {}", what, cache.missing_because)));
  return *cache.layout;
}

// Where the plan's tree can be read before planning: the local tree, or the commit's blobs in
// the mirror (nullopt: not mirrored yet).
// The tree's files, and the commit they are of (empty for a local tree).
struct TreeFiles {
  contract::FileAccess access;
  std::string commit;
};

std::optional<TreeFiles> tree_files(const plan::Resolution& r, const plan::SourceChoice& sc, const Cache& cache) {
  if (sc.kind == plan::SourceChoice::Kind::local) return TreeFiles{contract::directory_access(sc.dir), ""};
  if (!cache.layout || r.url().empty()) return std::nullopt;
  std::string ref = sc.kind == plan::SourceChoice::Kind::ref ? sc.commit : r.recipe.source.commit.value_or(r.recipe.source.tag);
  auto files = source::open_commit_files(cache.layout->git_mirror(r.url()), ref);
  if (!files) return std::nullopt;
  return TreeFiles{{files->read, files->list, fmt::format("{}@{}", r.url(), files->commit.substr(0, 12))}, files->commit};
}

// The recipe's tag (or pinned commit) fetched into the cache's mirror unless it is there (the
// venv and the contract are read from it). Nothing for a local tree or --ref (already done).
void ensure_mirrored(const plan::Resolution& r, const plan::SourceChoice& sc, const store::Layout& layout, bool offline,
                     const Services& s) {
  if (sc.kind != plan::SourceChoice::Kind::recipe_tag || r.url().empty()) return;
  if (!recipe::driver_spec(r.recipe.driver).runs_python) return;
  std::string ref = r.recipe.source.commit.value_or(r.recipe.source.tag);
  if (source::open_commit_files(layout.git_mirror(r.url()), ref)) return;
  auto info = source::resolve_ref(r.url(), ref, mirror_slot(layout, r.url()), source_options(offline, s));
  if (!info) throw Failure(info.error());
}

// The recipe's tag against its pinned commit, decided from the cache's mirror where the tag is
// there (`plan` reads only that; `wheel` fetches the tag itself, not every ref, where it is
// not): a tag naming another commit — a --source-url of another tree, a tag moved upstream — is
// the fetch stage's own refusal, with its message and exit, before anything is made for it.
std::optional<Stop> source_pin_rule(const plan::Resolution& r, const plan::SourceChoice& sc, const Cache& cache,
                                    const Request& q, const Services& s) {
  if (sc.kind != plan::SourceChoice::Kind::recipe_tag || r.url().empty() || !r.recipe.source.commit || !cache.layout)
    return std::nullopt;
  const std::string& tag = r.recipe.source.tag;
  std::string commit;
  if (auto files = source::open_commit_files(cache.layout->git_mirror(r.url()), tag)) {
    commit = files->commit;
  } else if (q.for_build) {
    auto info = source::resolve_ref(r.url(), tag, mirror_slot(*cache.layout, r.url()), source_options(q.offline, s));
    if (!info) throw Failure(info.error());
    commit = info->commit;
  } else {
    return std::nullopt;  // not mirrored yet: `plan` says the tree awaits its fetch
  }
  if (source::pin_matches(commit, *r.recipe.source.commit)) return std::nullopt;
  return Stop{rules::Id::source_pin, source::pin_mismatch(r.url(), tag, commit, *r.recipe.source.commit)};
}

// A local tree whose .gitmodules names folders that are missing or empty (cloned without
// --recursive): its configure would run `git submodule update` (a download mid-build) or stop
// with "Submodule … appears incomplete" (cmake/PreBuildSteps.cmake). archbuild copies the tree
// as it is and fetches nothing into it, so it stops here, naming each, before any venv.
std::optional<Stop> submodules_rule(const plan::Resolution& r, const plan::SourceChoice& sc) {
  if (sc.kind != plan::SourceChoice::Kind::local || !r.recipe.source.submodules) return std::nullopt;
  auto missing = source::missing_submodules(sc.dir);
  if (missing.empty()) return std::nullopt;
  std::vector<std::string> each;
  for (const auto& m : missing)
    each.push_back(fmt::format("{} ({}{})", m.path, m.commit ? "gitlink " + m.commit->substr(0, 12) : "no gitlink",
                               m.url.empty() ? "" : ", " + m.url));
  return Stop{rules::Id::submodules, Error::bad_input(fmt::format(
      "{}: {} submodule{} of .gitmodules {} not checked out (the tree was cloned without --recursive?): {}; "
      "the build would fetch or refuse them mid-build. Run `git submodule update --init --recursive` in the tree, "
      "or build a commit through the mirrors (--ref), whose checkout archbuild completes itself",
      sc.dir.string(), missing.size(), missing.size() == 1 ? "" : "s", missing.size() == 1 ? "is" : "are",
      text::join(each, "; ")))};
}

// The plan's patches against the tree they will be applied to, before any venv is made: each
// read and checked against its sha256, then tried in order on the commit in the cached mirror
// (source::check_patches; a file in a submodule on the submodule's commit in its own mirror), or
// on a local tree's files (source::check_patches_in_folder; the fetch stage patches archbuild's
// copy, never the tree) — the fetch stage applies them the same way, all or nothing. One that
// does not apply is a stop naming it and its first failing hunk; one the tree already contains
// is a note. `plan` on a commit (or a submodule's) not mirrored yet says so; `wheel` mirrors it.
struct PatchCheck {
  std::vector<Stop> stops;
  std::vector<std::string> notes;
  std::vector<std::string> states;
};

PatchCheck patch_rule(const plan::Resolution& r, const plan::SourceChoice& sc, const Cache& cache, const Request& q,
                      const Services& s, const std::optional<source::LocalTree>& scanned) {
  PatchCheck out;
  auto selected = plan::select_patches(r, sc, q.patches);
  if (selected.empty()) return out;
  auto texts = stages::patches_to_apply(selected);
  if (!texts) {
    out.stops.push_back({rules::Id::patch, texts.error()});
    return out;
  }
  Result<std::vector<source::PatchOutcome>> checked = std::vector<source::PatchOutcome>{};
  std::string where;
  if (sc.kind == plan::SourceChoice::Kind::local) {
    // On the scan, as the copy will hold the tree: a file its ignore rules leave out is not there.
    checked = scanned ? source::check_patches_in_tree(*scanned, *texts) : source::check_patches_in_folder(sc.dir, *texts);
    where = fmt::format("the local tree {}", sc.dir.string());
  } else {
    if (!cache.layout || r.url().empty()) return out;
    std::string ref = sc.kind == plan::SourceChoice::Kind::ref ? sc.commit : r.recipe.source.commit.value_or(r.recipe.source.tag);
    std::string commit;
    if (auto files = source::open_commit_files(cache.layout->git_mirror(r.url()), ref)) {
      commit = files->commit;
    } else if (q.for_build) {
      auto info = source::resolve_ref(r.url(), ref, mirror_slot(*cache.layout, r.url()), source_options(q.offline, s));
      if (!info) throw Failure(info.error());
      commit = info->commit;
    } else {
      out.notes.push_back(fmt::format("patches: checked against the tree once it is in the cache ({} @ {} is not yet)",
                                      r.url(), ref));
      return out;
    }
    // A submodule's mirror as the fetch stage finds it; a build fetches its commit first, as above.
    auto submodule_mirror = [&](const std::string& url, const std::string& sub_commit) -> std::optional<fs::path> {
      if (q.for_build && !source::update_mirror(url, sub_commit, mirror_slot(*cache.layout, url), source_options(q.offline, s)))
        return std::nullopt;  // the fetch stage says why
      return cache.layout->git_mirror(url);
    };
    checked = source::check_patches(cache.layout->git_mirror(r.url()), commit, *texts, r.url(), submodule_mirror,
                                    r.recipe.source.submodules);
    where = fmt::format("{} at {}", r.url(), commit.substr(0, 12));
  }
  if (!checked) throw Failure(checked.error());
  for (std::size_t i = 0; i < checked->size(); ++i) {
    const auto& o = (*checked)[i];
    const auto& pp = selected[i];
    if (o.fit == source::PatchOutcome::Fit::fails) {
      out.states.push_back("fails");
      out.stops.push_back({rules::Id::patch, Error::bad_input(fmt::format("{} ({})", source::describe_failure((*texts)[i], o, where),
                                                                          pp.patch.origin))});
      continue;
    }
    for (const auto& u : o.unchecked)
      out.notes.push_back(fmt::format("patch {} ({}): its files in submodule {} are checked against the tree once it is "
                                      "in the cache ({} @ {} is not yet)", pp.patch.name(), pp.patch.origin, u.path,
                                      u.url.empty() ? "its URL" : u.url, u.commit.substr(0, 12)));
    if (!o.unchecked.empty()) {
      out.states.push_back("unchecked");
    } else if (o.fit == source::PatchOutcome::Fit::contained) {
      out.states.push_back("contained");
      out.notes.push_back(fmt::format("patch {} ({}) is already contained in {}: it is not applied (the fix was merged; "
                                      "its `when` can end before this release)", pp.patch.name(), pp.patch.origin, where));
    } else {
      out.states.push_back("applies");
    }
  }
  return out;
}

std::map<std::string, std::string> pip_environment(const plan::Resolution& r, const Request& q) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    if (plan::env_allowed(plan::build_env_allowlist(), entry.substr(0, eq))) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  env["PATH"] = r.python->path.parent_path().string() + ":/usr/local/bin:/usr/bin:/bin";
  // --index-url / --find-links: pip's own variables, set explicitly (they win over the caller's).
  if (!q.index_url.empty()) env["PIP_INDEX_URL"] = q.index_url;
  if (!q.find_links.empty()) {
    std::error_code ec;
    bool dir = q.find_links.find("://") == std::string::npos && fs::is_directory(q.find_links, ec);
    env["PIP_FIND_LINKS"] = dir ? fs::absolute(q.find_links).lexically_normal().string() : q.find_links;
  }
  return env;
}

// The build venv from the tree's requirements. A venv that cannot be made is a stop (exit 3),
// never the end of the preparation: `plan` still shows the rest.
struct VenvOutcome {
  std::optional<plan::BuildVenv> venv;
  std::string note;
  std::optional<Error> stop;
};

VenvOutcome build_venv(const plan::Resolution& r, const contract::Contract& c, const Request& q, const store::Layout& layout,
                       Services& s) {
  VenvOutcome out;
  const recipe::Recipe& rc = r.recipe;
  stages::VenvRequest req;
  req.interpreter = r.python->path;
  req.interpreter_version = r.python->version;
  req.requirements = c.requirements;
  req.driver_modules = recipe::python_modules(rc);
  req.host_tools = r.tools;
  req.host_tool_versions = r.tool_versions;
  if (c.cmake_minimum) {
    req.cmake_min = c.cmake_minimum->min;
    req.cmake_min_where = c.cmake_minimum->where.str();
  }
  req.cmake_max = rc.cmake_max;
  req.env = pip_environment(r, q);
  req.offline = q.offline;  // pip gets no index, --find-links only
  if (!q.torch_wheel.empty()) req.wheels.push_back(fs::absolute(q.torch_wheel).lexically_normal());
  if (!q.index_url.empty()) req.pip_options["index_url"] = q.index_url;
  if (!q.find_links.empty()) req.pip_options["find_links"] = req.env["PIP_FIND_LINKS"];
  auto v = stages::prepare_build_venv(req, layout, s.runner, s.reporter);
  if (!v) {
    out.note = "cannot be made (`wheel` stops here, exit " + std::to_string(static_cast<int>(v.error().exit)) +
               "): " + v.error().message;
    out.stop = v.error();
    return out;
  }
  if (s.verbose) s.note(fmt::format("build venv {} ({})", v->dir.string(), v->reused ? "reused" : "made now"));
  out.venv = std::move(*v);
  return out;
}

// The tag or commit a pin file names: its first line that is neither empty nor a comment.
std::string pin_of(const std::string& text) {
  for (const auto& line : text::split_any(text, "\n")) {
    std::string l = text::trim(line);
    if (!l.empty() && l[0] != '#') return l;
  }
  return "";
}

struct FetchResolution {
  std::map<std::string, plan::ResolvedFetch> resolved;
  std::vector<std::string> notes;
  std::vector<Stop> stops;
};

// The pins of what the tree's build would fetch (the recipe's active [[fetch]]es), resolved
// before the plan as --ref is: the pin file read from the tree, the tag or commit it names looked
// up in that repository's mirror (fetched unless offline, and for `plan` only when the tree is
// readable already). A pin that cannot be resolved is a stop (exit 3: `wheel` stops before any
// stage); a tree not in the cache yet is a note for `plan`.
FetchResolution resolve_fetches(const plan::Resolution& r, const plan::SourceChoice& sc,
                                const std::map<std::string, std::string>& env, const Cache& cache, const Request& q,
                                const Services& s) {
  FetchResolution out;
  std::vector<plan::FetchPlan> active;
  for (auto& f : plan::fetch_plans(r, env))
    if (f.active()) active.push_back(std::move(f));
  if (active.empty()) return out;
  if (!cache.layout) {
    out.notes.push_back("the fetches' pins are read once the tree is in the cache (no cache directory: " +
                        cache.missing_because + ")");
    return out;
  }
  const store::Layout& layout = *cache.layout;
  auto so = source_options(q.offline, s);

  // How the tree's files are read: the local folder, or the commit's blobs in the mirror.
  std::function<std::optional<std::string>(const std::string&)> read;
  std::string origin;
  if (sc.kind == plan::SourceChoice::Kind::local) {
    read = [dir = sc.dir](const std::string& rel) -> std::optional<std::string> {
      std::error_code ec;
      if (!fs::is_regular_file(dir / rel, ec)) return std::nullopt;
      std::ifstream in(dir / rel);
      if (!in) return std::nullopt;
      std::stringstream text;
      text << in.rdbuf();
      return text.str();
    };
    origin = sc.dir.string();
  } else {
    std::string url = r.url(), commit;
    if (sc.kind == plan::SourceChoice::Kind::ref) {
      commit = sc.commit;
    } else if (auto files = source::open_commit_files(layout.git_mirror(url), r.recipe.source.commit.value_or(r.recipe.source.tag))) {
      commit = files->commit;
    } else if (q.for_build) {
      // The fetch stage would fetch the tag anyway; now, so its pin files can be read.
      auto info = source::resolve_ref(url, r.recipe.source.tag, mirror_slot(layout, url), so);
      if (!info) throw Failure(info.error());
      commit = info->commit;
    } else {
      for (const auto& f : active)
        out.notes.push_back(fmt::format("fetch {}: pinned by {} in the tree, which is not in the cache yet ({} @ {}); "
                                        "`archbuild wheel` resolves it (the key then holds its commit)",
                                        f.name, text::join(f.pin_files, " or "), url, r.recipe.source.tag));
      return out;
    }
    read = [mirror = layout.git_mirror(url), commit](const std::string& rel) -> std::optional<std::string> {
      auto text = source::read_file_at(mirror, commit, rel);
      if (!text) throw Failure(text.error());
      return *text;
    };
    origin = fmt::format("{} at {}", url, commit.substr(0, 12));
  }

  for (auto& f : active) {
    std::optional<std::string> text;
    for (const auto& candidate : f.pin_files)
      if ((text = read(candidate))) {
        f.pin_file = candidate;
        break;
      }
    // The recipe does not fit the tree (exit 2): a stop like the others, so `plan` shows the
    // whole answer and `wheel` meets them in the same order.
    if (!text) {
      out.stops.push_back({rules::Id::fetch_pin, Error::bad_input(fmt::format(
          "{}: [[fetch]] {} names the pin file {}, which the tree ({}) does not have; fix the recipe's pin_file "
          "(or unless_env) for this tree", r.recipe.file.string(), f.name, text::join(f.pin_files, " or "), origin))});
      continue;
    }
    std::string ref = pin_of(*text);
    if (ref.empty()) {
      out.stops.push_back({rules::Id::fetch_pin, Error::bad_input(fmt::format(
          "{} ({}): empty; expected the tag or commit of {} that [[fetch]] {} checks out", f.pin_file, origin, f.url,
          f.name))});
      continue;
    }
    auto info = source::resolve_ref(f.url, ref, mirror_slot(layout, f.url), so);
    if (!info) {
      std::vector<std::string> off;
      for (const auto& rf : r.recipe.fetches)
        if (rf.name == f.name)
          for (const auto& [var, values] : rf.unless_env) off.push_back("--env " + var + "=" + values.front());
      std::string way_out = off.empty() ? "" : ", or build without it (" + text::join(off, " or ") + ")";
      if (q.offline)
        out.stops.push_back({rules::Id::fetch_pin, Error::missing_tool(fmt::format(
            "offline: the tree pins {} at {} ({}), which the mirror of {} does not have; run once without --offline "
            "to fetch it{}", f.name, ref, f.pin_file, f.url, way_out))});
      else
        out.stops.push_back({rules::Id::fetch_pin, Error::missing_tool(fmt::format(
            "fetch {} ({} @ {}, pinned by {}): {}{}", f.name, f.url, ref, f.pin_file, info.error().message, way_out))});
      continue;
    }
    out.resolved[f.name] = plan::ResolvedFetch{f.pin_file, ref, info->commit};
  }
  return out;
}

// The tree's contract, read before the venv (a local tree, the commit in the mirror).
TreeContract read_tree_contract(const plan::Resolution& r, const plan::SourceChoice& sc, const Cache& cache) {
  TreeContract t;
  auto files = tree_files(r, sc, cache);
  if (!files) {
    t.awaits_fetch = true;
    if (!cache.layout)
      t.note = "fetch to see the tree's contract (no cache directory: " + cache.missing_because + ")";
    else
      t.note = fmt::format("fetch to see the tree's contract ({} @ {} is not in the cache yet)", r.url(),
                           r.recipe.source.commit.value_or(r.recipe.source.tag));
    return t;
  }
  t.origin = files->access.origin;
  // The commit read, as the mirror resolved it (not read back from the origin's words).
  if (sc.kind == plan::SourceChoice::Kind::ref) t.commit = sc.commit;
  else if (sc.kind == plan::SourceChoice::Kind::recipe_tag) t.commit = files->commit;
  auto c = contract::read_contract(files->access);
  if (!c) {
    t.note = c.error().message;
    return t;
  }
  t.contract = std::move(*c);
  return t;
}

// The recipe's driver and release, before anything is planned: what the tree must agree with
// before a venv is made for it.
contract::Expectation early_expectation(const plan::Resolution& r) {
  contract::Expectation e;
  e.driver = r.recipe.driver;
  e.recipe_file = r.recipe.file.string();
  e.version = r.recipe.version;
  return e;
}

// The contract's own version rule compares whole releases; the recipe must fit the tree's
// release line instead (release_line_rule), so that one is left to it.
std::vector<Stop> contradictions(const std::vector<contract::Finding>& findings, const std::string& origin) {
  std::vector<Stop> out;
  for (const auto& f : findings)
    if (!f.ok && f.rule != rules::Id::version) out.push_back({f.rule, Error{f.exit, fmt::format("{} (tree: {})", f.message, origin)}});
  return out;
}

}  // namespace

Result<plan::SourceChoice> choose_source(const plan::Resolution& r, const std::string& ref, const store::Layout* layout,
                                         bool offline, const Services& s, std::optional<source::LocalTree>* scanned) {
  try {
    plan::SourceChoice sc;
    if (auto dir = r.local_dir()) {
      if (!ref.empty())
        return Error::bad_input("--ref names a commit of a repository; a local tree (--source, source.path) is "
                                "built as it is: drop one of them");
      const std::string given = r.source_dir ? std::string("--source")
                                             : fmt::format("source.path of {}", r.recipe.file.string());
      source::TreeStatCache stats;
      auto tree = stages::scan_local_tree_cached(layout, *dir, given, [&](const std::string& w) {
        s.reporter.message(run::Level::warning, w);
      }, &stats);
      if (!tree) return tree.error();  // one line: the error names the tree
      // Files read, and files whose stat cache record stood for them (links are their target's text).
      std::string reads = layout ? fmt::format(", {} read, {} unchanged since the last read", stats.rehashed, stats.reused)
                                 : std::string();
      s.note(fmt::format("read the local tree {} ({} files{})", dir->string(), tree->entries.size(), reads));
      sc.kind = plan::SourceChoice::Kind::local;
      sc.dir = tree->root;
      sc.content_hash = tree->content_hash;
      sc.files = tree->entries.size();
      sc.head = tree->head;
      auto shape = stages::tree_shape(*tree);
      sc.shape_hash = std::move(shape.hash);
      sc.config_files = std::move(shape.config_files);
      std::error_code ec;
      if (fs::is_regular_file(tree->root / "version.txt", ec)) {
        std::ifstream in(tree->root / "version.txt");
        std::stringstream text;
        if (in) {
          text << in.rdbuf();
          sc.tree_version = text.str();
        }
      }
      if (scanned) *scanned = std::move(*tree);
      return sc;
    }
    if (ref.empty()) return sc;
    if (!layout) return Error::bad_input("--ref needs a cache directory for the repository's mirror");
    std::string url = r.url();
    source::MirrorSlot slot = mirror_slot(*layout, url);
    auto info = source::resolve_ref(url, ref, slot, source_options(offline, s));
    if (!info) return info.error();
    sc.kind = plan::SourceChoice::Kind::ref;
    sc.ref = ref;
    sc.commit = info->commit;
    sc.ref_is_tag = info->kind == source::RefInfo::Kind::tag;
    sc.other_repository = !r.recipe.source.url.empty() && url != r.recipe.source.url;
    auto version = source::read_file_at(slot.dir, info->commit, "version.txt");
    if (!version) return version.error();
    sc.tree_version = *version;
    return sc;
  } catch (const Failure& f) {
    return f.error;
  }
}

Version line_of(const Version& v) { return v.prefix(2); }

ReleaseLine release_line_rule(const std::optional<std::string>& tree_version, const std::string& where,
                              const recipe::Recipe& recipe, const Request& q) {
  ReleaseLine out;
  if (!tree_version) return out;
  std::string first = text::trim(tree_version->substr(0, tree_version->find('\n')));
  auto tree = contract::release_part(first);
  if (!tree || tree->size() < 2) return out;
  Version tl = line_of(*tree), rl = line_of(recipe.version);
  if (tl == rl) return out;
  bool ahead = !q.recipe_lines.empty() &&
               std::all_of(q.recipe_lines.begin(), q.recipe_lines.end(), [&](const Version& v) { return line_of(v) < tl; });
  // Older than every line of the recipe's package (the lines given are of its package: the
  // recipe's own is among them).
  bool older = std::any_of(q.recipe_lines.begin(), q.recipe_lines.end(), [&](const Version& v) { return line_of(v) == rl; }) &&
               std::all_of(q.recipe_lines.begin(), q.recipe_lines.end(), [&](const Version& v) { return tl < line_of(v); });
  std::string both = fmt::format("{} is {} (release line {}), but the recipe {} builds {} (line {})", where, first,
                                 tl.str(), recipe.file.string(), recipe.version.str(), rl.str());
  if (q.allow_release_mismatch) {
    out.note = both + ": built on purpose (--allow-release-mismatch)";
  } else if (ahead) {
    out.note = both + ": no recipe of line " + tl.str() + " exists yet, so the newest is used; its pins may not fit";
  } else if (older) {
    // No recipe to choose: naming --torch of that line would only be refused by resolution.
    Version oldest = *std::min_element(q.recipe_lines.begin(), q.recipe_lines.end());
    out.older_than_every_recipe = true;
    out.stop = Stop{rules::Id::release_line, Error::bad_input(fmt::format(
        "{} is {} (release line {}), older than every recipe: no recipe covers line {}; the oldest is line {} "
        "(--torch {}), for trees of that line or newer", where, first, tl.str(), tl.str(), line_of(oldest).str(),
        line_of(oldest).str()))};
  } else {
    out.stop = Stop{rules::Id::release_line, Error::bad_input(fmt::format(
        "{}: choose the recipe of line {} (--torch {} or --recipe), or build it with this one on purpose "
        "(--allow-release-mismatch)", both, tl.str(), tl.str()))};
  }
  return out;
}

std::optional<Version> recipe_line_of_tree(const Prepared& p, const Request& q) {
  if (q.allow_release_mismatch) return std::nullopt;
  if (std::none_of(p.stops.begin(), p.stops.end(), [](const Stop& s) { return s.rule == rules::Id::release_line; }))
    return std::nullopt;
  auto release = contract::release_part(p.plan->version.substr(0, p.plan->version.find('+')));
  if (!release || release->size() < 2) return std::nullopt;
  Version line = line_of(*release);
  if (std::none_of(q.recipe_lines.begin(), q.recipe_lines.end(), [&](const Version& v) { return line_of(v) == line; }))
    return std::nullopt;
  return line;
}

// ---- the tree's own downloads -----------------------------------------------------------------

TreeHas tree_has(const contract::FileAccess& files) {
  return [files](const std::string& pattern) -> std::optional<std::string> {
    auto slash = pattern.rfind('/');
    std::string dir = slash == std::string::npos ? "" : pattern.substr(0, slash);
    std::string name = slash == std::string::npos ? pattern : pattern.substr(slash + 1);
    auto star = name.find('*');
    if (star == std::string::npos) return files.read(pattern) ? std::optional(pattern) : std::nullopt;
    std::string head = name.substr(0, star), tail = name.substr(star + 1);
    for (const auto& f : files.list(dir))
      if (f.size() >= head.size() + tail.size() && f.starts_with(head) && f.ends_with(tail))
        return dir.empty() ? f : dir + "/" + f;
    return std::nullopt;
  };
}

Result<std::vector<TreeDownload>> load_tree_downloads(const fs::path& file) {
  auto doc = tomlx::parse_file(file);
  if (!doc) return doc.error();
  std::vector<TreeDownload> out;
  const std::string name = file.string();
  tomlx::TableReader top(*doc, name, "tree downloads");
  const toml::array* list = top.array("download", true);
  if (auto e = top.failure()) return *e;
  if (auto e = top.finish()) return *e;
  for (const auto& el : *list) {
    const toml::table* t = el.as_table();
    if (!t) return Error::bad_input(tomlx::where(el, name) + ": [[download]] entries must be tables");
    tomlx::TableReader rd(*t, name, "download");
    TreeDownload d;
    d.name = rd.string("name", true).value_or("");
    d.pin_files = rd.strings("pin_files", true).value_or(std::vector<std::string>{});
    d.fetch = rd.string("fetch", true).value_or("");
    d.why = rd.string("why", true).value_or("");
    if (const toml::table* u = rd.table("unless_env")) {
      for (const auto& [k, v] : *u) {
        std::vector<std::string> values;
        if (const toml::array* a = v.as_array()) {
          for (const auto& x : *a)
            if (auto s = x.value<std::string>()) values.push_back(*s);
            else return Error::bad_input(tomlx::where(x, name) + ": download.unless_env values must be strings");
        }
        if (values.empty())
          return Error::bad_input(tomlx::where(v, name) + ": download.unless_env." + std::string(k.str()) +
                                  " must be a non-empty array of strings");
        d.unless_env[std::string(k.str())] = values;
      }
    }
    if (auto e = rd.failure()) return *e;
    if (auto e = rd.finish()) return *e;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<Stop> unfetched_downloads(const std::vector<TreeDownload>& downloads, const recipe::Recipe& recipe,
                                      const std::map<std::string, std::string>& build_env, const TreeHas& has,
                                      const std::optional<Version>& cuda) {
  std::vector<Stop> out;
  for (const auto& d : downloads) {
    std::string present;
    std::vector<std::string> pins;  // the placeholders filled for the plan's CUDA (left out without one)
    for (const auto& p : d.pin_files) {
      if (p.find('{') == std::string::npos) pins.push_back(p);
      else if (cuda) {
        recipe::Fetch one;
        one.pin_files = {p};
        pins.push_back(recipe::pin_files_for(one, *cuda).front());
      }
    }
    for (const auto& p : pins)
      if (auto found = has(p)) {
        present = *found;
        break;
      }
    if (present.empty()) continue;
    // A [[fetch]] of the recipe stands for it, whether active or switched off by the
    // environment (then the tree's build downloads nothing either).
    bool declared = false;
    for (const auto& f : recipe.fetches) declared = declared || f.name == d.fetch;
    if (declared) continue;
    recipe::Fetch off;
    off.unless_env = d.unless_env;
    if (!recipe::fetch_disabled_by(off, build_env).empty()) continue;
    std::vector<std::string> switches;
    for (const auto& [var, values] : d.unless_env) switches.push_back("--env " + var + "=" + values.front());
    out.push_back({rules::Id::tree_download, Error::missing_tool(fmt::format(
        "the tree's {} pins {} and its build clones it from the network ({}), but the recipe {} has no [[fetch]] "
        "named \"{}\": add one (see recipes/torch-common.toml){}", present, d.name, d.why, recipe.file.string(),
        d.fetch, switches.empty() ? "" : ", or build without it (" + text::join(switches, " or ") + ")"))});
  }
  return out;
}

// ---- the whole preparation --------------------------------------------------------------------

Result<Prepared> prepare(const plan::Resolution& r, const Request& q, const Cache& cache, Services& s) {
  try {
    plan::PlanOptions opts;
    opts.jobs = q.jobs;
    opts.env = q.env;
    opts.without = q.without;
    opts.memory_budget_mb = q.memory_budget_mb;
    opts.memory_budget_text = q.memory_budget_text;
    std::vector<Stop> stops;

    std::optional<source::LocalTree> scanned;
    if (r.local_dir() || !q.ref.empty()) {
      auto sc = choose_source(r, q.ref, cache.layout ? &*cache.layout : nullptr, q.offline, s, &scanned);
      if (!sc) return sc.error();
      opts.source = std::move(*sc);
    }
    // The recipe's tag against its pin, from the mirror, before the tree is read at that commit.
    auto pin_stop = source_pin_rule(r, opts.source, cache, q, s);
    if (pin_stop) stops.push_back(std::move(*pin_stop));
    else if (q.for_build) ensure_mirrored(r, opts.source, need_cache(cache, "wheel"), q.offline, s);

    // The tree's release line and contract against the recipe, before a venv is made for it.
    std::vector<std::string> notes;
    bool no_recipe_fits = false;
    TreeContract tree = read_tree_contract(r, opts.source, cache);
    {
      std::optional<std::string> version = opts.source.tree_version;
      std::string where = opts.source.kind == plan::SourceChoice::Kind::local ? (opts.source.dir / "version.txt").string()
                                                                             : "version.txt";
      if (tree.contract && tree.contract->version && opts.source.kind == plan::SourceChoice::Kind::recipe_tag) {
        version = tree.contract->version;
        where = fmt::format("{} ({})", tree.contract->version_where.str(), tree.origin);
      } else if (opts.source.kind == plan::SourceChoice::Kind::ref) {
        where = fmt::format("version.txt ({} at {})", r.url(), opts.source.commit.substr(0, 12));
      }
      auto line = release_line_rule(version, where, r.recipe, q);
      if (line.stop) stops.push_back(std::move(*line.stop));
      if (!line.note.empty()) notes.push_back(line.note);
      no_recipe_fits = line.older_than_every_recipe;
    }
    // Against a recipe of no line of the tree's, the contract's findings would be noise.
    if (tree.contract && !no_recipe_fits) {
      opts.skbuild = tree.contract->skbuild;  // what the tree's [tool.scikit-build] decides itself
      tree.findings = contract::check(*tree.contract, early_expectation(r));
      for (auto& st : contradictions(tree.findings, tree.origin)) stops.push_back(std::move(st));
    }
    if (auto sub = submodules_rule(r, opts.source)) stops.push_back(std::move(*sub));
    // The patches, before a venv is made for a tree they do not fit.
    PatchCheck patched = patch_rule(r, opts.source, cache, q, s, scanned);
    opts.patches = q.patches;
    for (auto& st : patched.stops) stops.push_back(std::move(st));
    for (auto& n : patched.notes) notes.push_back(std::move(n));

    std::string venv_note;
    bool venv_failed = false;
    if (!q.no_venv_because.empty()) {
      venv_note = q.no_venv_because;
    } else if (!recipe::driver_spec(r.recipe.driver).runs_python || !r.python) {
      venv_note = "none: the cmake driver runs no Python";
    } else if (!stops.empty()) {
      venv_note = "not made: the tree contradicts the recipe (below)";
    } else if (!cache.layout) {
      venv_note = "unknown (no cache directory: " + cache.missing_because + ")";
    } else if (!tree.contract) {
      venv_note = tree.awaits_fetch
                      ? "decided once the tree is fetched (its build requirements are read from it): the key shown "
                        "does not hold the venv's versions yet"
                      : "the tree's contract cannot be read: " + tree.note;
    } else {
      VenvOutcome v = build_venv(r, *tree.contract, q, *cache.layout, s);
      opts.venv = v.venv;
      venv_note = v.note;
      if (v.stop) {
        venv_failed = true;
        stops.push_back({rules::Id::build_venv, *v.stop});
      }
    }

    if (!q.library_specs) return Error{Exit::internal, "prepare::Request without library specs (library_specs)"};
    auto facts = gather_libraries(r, *q.library_specs, opts.env, venv_site_packages(opts.venv));
    opts.library_specs = q.library_specs;
    if (!facts) return facts.error();
    opts.library_facts = std::move(*facts);

    // What the tree's own build would download: declared fetches resolved, undeclared ones found.
    auto env = planned_env(r, opts);
    FetchResolution fr = resolve_fetches(r, opts.source, env, cache, q, s);
    opts.fetches = fr.resolved;
    if (auto files = tree_files(r, opts.source, cache)) {
      auto downloads = load_tree_downloads(data_root() / "data" / "tree-downloads.toml");
      if (!downloads) return downloads.error();
        std::optional<Version> cuda;
        if (r.toolkit) cuda = r.toolkit->version;
        for (auto& st : unfetched_downloads(*downloads, r.recipe, env, tree_has(files->access), cuda)) stops.push_back(std::move(st));
    }
    for (auto& st : fr.stops) stops.push_back(std::move(st));

    auto made = plan::make_plan(r, opts);
    if (!made) return made.error();
    // Clean or incremental: the plan's rule over what the cache holds of the slot's last build.
    std::optional<plan::EarlierBuild> earlier;
    if ((*made)->local && cache.layout) earlier = stages::earlier_build(*cache.layout, (*made)->build_start.slot);
    Prepared p{plan::with_build_start(*made, plan::decide_build_start(**made, q.clean, earlier))};
    p.venv_note = venv_note;
    p.venv_failed = venv_failed;
    p.fetch_notes = std::move(fr.notes);
    p.notes = std::move(notes);
    p.patch_states = std::move(patched.states);

    // The plan's whole expectation (its cmake) against the contract: what the early check could not know.
    if (tree.contract && !no_recipe_fits) {
      auto full = contract::check(*tree.contract, stages::contract_expectation(p.plan));
      for (const auto& f : full)
        if (!f.ok && std::none_of(tree.findings.begin(), tree.findings.end(),
                                  [&f](const contract::Finding& e) { return e.rule == f.rule && !e.ok; }))
          stops.push_back({f.rule, Error{f.exit, fmt::format("{} (tree: {})", f.message, tree.origin)}});
      tree.findings = std::move(full);
    }
    p.tree = std::move(tree);

    if (auto e = plan::missing_libraries(p.plan->libraries)) stops.push_back({rules::Id::libraries, *e});
    p.host = plan::check_host(p.plan, host_figures(cache.layout ? cache.layout->root() : fs::path()));
    if (auto e = p.host.error()) stops.push_back({rules::Id::host, *e});
    p.stops = std::move(stops);
    return p;
  } catch (const Failure& f) {
    return f.error;
  }
}

}  // namespace archbuild::prepare
