#include "cli/resolve_common.hpp"

#include "cli/host.hpp"

#include <fstream>
#include <set>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "arch/parse.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "store/atomic_file.hpp"
#include "store/layout.hpp"
#include "run/capture.hpp"
#include "run/interrupt.hpp"
#include "source/local.hpp"
#include "source/source.hpp"
#include "contract/contract.hpp"
#include "run/reporter.hpp"
#include "run/runner.hpp"
#include "stages/venv.hpp"

#include <iostream>
#include <unistd.h>

namespace archbuild::cli {

namespace fs = std::filesystem;

void add_resolve_options(CLI::App& cmd, ResolveArgs& a) {
  cmd.add_option("--sm", a.sm, "Target compute capabilities: 90, 9.0, sm_90, 90a, 12.0f, lists 80,90")
      ->required();
  cmd.add_option("--recipe", a.recipe,
                 "A recipe name (torch-2.7), a package (torchvision) or a recipe file (path/recipe.toml)");
  cmd.add_option("--torch", a.torch, "The torch release line, e.g. 2.7");
  cmd.add_option("--cuda", a.cuda, "The CUDA release, e.g. 12.8");
  cmd.add_option("--python", a.python,
                 "The build interpreter: a version (3.11: python3.11 on PATH) or a path (/usr/bin/python3); "
                 "default: python3 on PATH");
  cmd.add_flag("--ptx", a.ptx, "Also embed PTX for the newest target (JIT on newer GPUs)");
  cmd.add_option("--source-url", a.source_url,
                 "Fetch the source from this repository URL instead of the recipe's (e.g. file:///srv/git/x.git)");
  cmd.add_option("--source", a.source_dir,
                 "Build this local tree as it is (uncommitted changes included; it is copied, never touched)");
}

void add_plan_options(CLI::App& cmd, ResolveArgs& a) {
  cmd.add_option("--ref", a.ref,
                 "Build this branch, tag or commit instead of the recipe's tag (resolved to a commit before the plan)");
  cmd.add_option("--env", a.env,
                 "K=V for the build's environment, in the build key (repeatable; may override the recipe's [build.env])");
  cmd.add_option("--without", a.without,
                 "Build without these optional libraries (cudnn, nccl, cusparselt, magma, lapack …): their USE_* "
                 "switches off, recorded in the plan, key and manifest")
      ->delimiter(',');
  cmd.add_option("--index-url", a.index_url,
                 "Package index for the build venv's pip (PIP_INDEX_URL), e.g. an internal mirror; recorded in the "
                 "manifest, not the key");
  cmd.add_option("--find-links", a.find_links,
                 "A wheelhouse (DIR or URL) for the build venv's pip (PIP_FIND_LINKS), e.g. on an offline host; "
                 "recorded in the manifest, not the key");
  cmd.add_option("--memory-budget", a.memory_budget,
                 "Memory all compiles may use together: 48G, 4096M, 75% (of available memory) or off (the static "
                 "jobs rule); default 90% of available memory. Jobs = cores, each compile admitted by memory");
  cmd.add_option("--torch-wheel", a.torch_wheel,
                 "A torch wheel to build against (torchvision, an extension): installed into the build venv with "
                 "--no-deps after its requirements; its sha256 is in the key and the wheel pins torch==<its version>")
      ->check(CLI::ExistingFile);
}

void memory_budget_from_args(const ResolveArgs& a, plan::PlanOptions& opts) {
  if (a.memory_budget.empty()) {
    opts.memory_budget_mb = 0;  // the default budget
    return;
  }
  auto host = opts.resources ? *opts.resources : plan::HostResources::current();
  auto mb = plan::parse_memory_budget(a.memory_budget, host.mem_available).take();
  opts.memory_budget_mb = mb;
  opts.memory_budget_text = a.memory_budget;
}

plan::LibraryFacts gather_libraries(const plan::Resolution& r, const std::map<std::string, std::string>& env_args,
                                    const std::vector<std::filesystem::path>& site_packages) {
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
  auto specs = recipe::load_shipped_library_specs();
  if (!specs) throw Failure(specs.error());
  return plan::probe_libraries(recipe::merge_specs(std::move(*specs), r.recipe.libraries.define), search);
}

std::vector<std::filesystem::path> venv_site_packages(const std::optional<plan::BuildVenv>& venv) {
  if (!venv) return {};
  auto parts = text::split_any(venv->interpreter_version, ".");
  if (parts.size() < 2) return {};
  return {venv->dir / "lib" / ("python" + parts[0] + "." + parts[1]) / "site-packages"};
}

plan::HostFigures host_figures(const std::filesystem::path& cache_dir) {
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

namespace {

// Where the plan's tree can be read before planning: the local tree, or the commit's blobs in
// the mirror.
std::optional<contract::FileAccess> tree_files(const plan::Resolution& r, const plan::SourceChoice& sc,
                                               const store::Layout& layout) {
  if (sc.kind == plan::SourceChoice::Kind::local) return contract::directory_access(sc.dir);
  std::string ref = sc.kind == plan::SourceChoice::Kind::ref ? sc.commit : r.recipe.source.commit.value_or(r.recipe.source.tag);
  auto files = source::open_commit_files(layout.git_mirror(r.url()), ref);
  if (!files) return std::nullopt;
  return contract::FileAccess{files->read, files->list, fmt::format("{}@{}", r.url(), files->commit.substr(0, 12))};
}

std::map<std::string, std::string> pip_environment(const plan::Resolution& r, const ResolveArgs& a) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    if (plan::env_allowed(plan::build_env_allowlist(), entry.substr(0, eq))) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  env["PATH"] = r.python->path.parent_path().string() + ":/usr/local/bin:/usr/bin:/bin";
  // --index-url / --find-links: pip's own variables, set explicitly (they win over the caller's).
  if (!a.index_url.empty()) env["PIP_INDEX_URL"] = a.index_url;
  if (!a.find_links.empty()) {
    std::error_code ec;
    bool dir = a.find_links.find("://") == std::string::npos && fs::is_directory(a.find_links, ec);
    env["PIP_FIND_LINKS"] = dir ? fs::absolute(a.find_links).lexically_normal().string() : a.find_links;
  }
  return env;
}

}  // namespace

void ensure_mirrored(const plan::Resolution& r, const plan::SourceChoice& sc, const store::Layout& layout, bool offline) {
  if (sc.kind != plan::SourceChoice::Kind::recipe_tag || r.url().empty()) return;
  if (r.recipe.driver == recipe::Driver::cmake) return;
  std::string ref = r.recipe.source.commit.value_or(r.recipe.source.tag);
  if (source::open_commit_files(layout.git_mirror(r.url()), ref)) return;
  source::SourceOptions so;
  so.offline = offline;
  so.cancelled = [] { return run::interrupt_requested(); };
  if (auto e = layout.create(); !e) throw Failure(e.error());
  auto info = source::resolve_ref(r.url(), ref, {layout.git_mirror(r.url()), layout.git_mirror_lock(r.url())}, so);
  if (!info) throw Failure(info.error());
}

VenvChoice choose_build_venv(const plan::Resolution& r, const plan::SourceChoice& sc, const ResolveArgs& a,
                             const store::Layout& layout, const Context& ctx, bool offline) {
  VenvChoice out;
  const recipe::Recipe& rc = r.recipe;
  if (rc.driver == recipe::Driver::cmake || !r.python) {
    out.note = "none: the cmake driver runs no Python";
    return out;
  }
  auto files = tree_files(r, sc, layout);
  if (!files) {
    out.note = "decided once the tree is fetched (its build requirements are read from it): the key shown "
               "does not hold the venv's versions yet";
    return out;
  }
  auto c = contract::read_contract(*files);
  if (!c) {
    out.note = "the tree's contract cannot be read: " + c.error().message;
    return out;
  }
  stages::VenvRequest req;
  req.interpreter = r.python->path;
  req.interpreter_version = r.python->version;
  req.requirements = c->requirements;
  req.driver_modules = recipe::python_modules(rc);
  req.host_tools = r.tools;
  req.host_tool_versions = r.tool_versions;
  if (c->cmake_minimum) {
    req.cmake_min = c->cmake_minimum->min;
    req.cmake_min_where = c->cmake_minimum->where.str();
  }
  req.cmake_max = rc.cmake_max;
  req.env = pip_environment(r, a);
  req.offline = offline;
  if (!a.torch_wheel.empty()) req.wheels.push_back(fs::absolute(a.torch_wheel).lexically_normal());
  if (!a.index_url.empty()) req.pip_options["index_url"] = a.index_url;
  if (!a.find_links.empty()) req.pip_options["find_links"] = req.env["PIP_FIND_LINKS"];
  auto reporter = run::make_reporter(run::ReporterKind::plain, std::cerr);
  run::ProcessRunner runner;
  run::InterruptGuard guard;
  auto v = stages::prepare_build_venv(req, layout, runner, *reporter);
  if (!v) throw Failure(v.error());
  if (ctx.verbosity > 0) note(ctx, fmt::format("build venv {} ({})", v->dir.string(), v->reused ? "reused" : "made now"));
  out.venv = std::move(*v);
  return out;
}


std::map<std::string, std::string> env_from_args(const ResolveArgs& a) {
  std::map<std::string, std::string> out;
  for (const auto& item : a.env) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Failure(Error::bad_input(fmt::format("--env '{}': expected NAME=VALUE, e.g. --env USE_NCCL=1", item)));
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

plan::SourceChoice choose_source(const plan::Resolution& r, const ResolveArgs& args, const store::Layout& layout,
                                 bool offline, const Context& ctx) {
  plan::SourceChoice sc;
  if (auto dir = r.local_dir()) {
    if (!args.ref.empty())
      throw Failure(Error::bad_input("--ref names a commit of a repository; a local tree (--source, source.path) is "
                                     "built as it is: drop one of them"));
    note(ctx, fmt::format("reading the local tree {}", dir->string()));
    auto tree = source::scan_local_tree(*dir);
    if (!tree) throw Failure(tree.error());
    sc.kind = plan::SourceChoice::Kind::local;
    sc.dir = tree->root;
    sc.content_hash = tree->content_hash;
    sc.files = tree->entries.size();
    sc.head = tree->head;
    std::ifstream in(tree->root / "version.txt");
    std::stringstream text;
    if (in) {
      text << in.rdbuf();
      sc.tree_version = text.str();
    }
    return sc;
  }
  if (args.ref.empty()) return sc;
  std::string url = r.url();
  source::SourceOptions so;
  so.offline = offline;
  so.cancelled = [] { return run::interrupt_requested(); };
  source::MirrorSlot slot{layout.git_mirror(url), layout.git_mirror_lock(url)};
  if (auto e = layout.create(); !e) throw Failure(e.error());
  auto info = source::resolve_ref(url, args.ref, slot, so);
  if (!info) throw Failure(info.error());
  sc.kind = plan::SourceChoice::Kind::ref;
  sc.ref = args.ref;
  sc.commit = info->commit;
  sc.ref_is_tag = info->kind == source::RefInfo::Kind::tag;
  auto version = source::read_file_at(slot.dir, info->commit, "version.txt");
  if (!version) throw Failure(version.error());
  sc.tree_version = *version;
  return sc;
}

namespace {

// The tag or commit a pin file names: its first line that is neither empty nor a comment.
std::string pin_of(const std::string& text) {
  for (const auto& line : text::split_any(text, "\n")) {
    std::string l = text::trim(line);
    if (!l.empty() && l[0] != '#') return l;
  }
  return "";
}

}  // namespace

std::map<std::string, std::string> planned_env(const plan::Resolution& r, const plan::PlanOptions& po) {
  std::map<std::string, std::string> env = po.env;
  if (auto draft = plan::make_plan(r, po))
    for (const auto& [k, v] : (*draft)->env) env[k] = v.value;
  return env;
}

FetchResolution resolve_fetches(const plan::Resolution& r, const plan::SourceChoice& sc,
                                const std::map<std::string, std::string>& env, const store::Layout& layout,
                                bool offline, bool required, const Context& ctx) {
  FetchResolution out;
  std::vector<plan::FetchPlan> active;
  for (auto& f : plan::fetch_plans(r, env))
    if (f.active()) active.push_back(std::move(f));
  if (active.empty()) return out;
  auto give_up = [&](const std::string& why) {
    if (required) throw Failure(Error::build_failed(why));
    out.notes.push_back(why);
  };

  source::SourceOptions so;
  so.offline = offline;
  so.cancelled = [] { return run::interrupt_requested(); };
  so.note = [&ctx](const std::string& n) { note(ctx, n); };
  // The cache is made only when a mirror is touched (`plan` on a fresh host writes nothing).
  auto slot_for = [&](const std::string& url) {
    if (auto e = layout.create(); !e) throw Failure(e.error());
    return source::MirrorSlot{layout.git_mirror(url), layout.git_mirror_lock(url)};
  };

  // How the tree's files are read: the local folder, or the commit's blobs in the mirror.
  std::function<std::optional<std::string>(const std::string&)> read;
  std::string origin;
  if (sc.kind == plan::SourceChoice::Kind::local) {
    read = [dir = sc.dir](const std::string& rel) -> std::optional<std::string> {
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
    } else if (required) {
      // The fetch stage would fetch the tag anyway; now, so its pin files can be read.
      auto info = source::resolve_ref(url, r.recipe.source.tag, slot_for(url), so);
      if (!info) throw Failure(info.error());
      commit = info->commit;
    } else {
      auto files = source::open_commit_files(layout.git_mirror(url), r.recipe.source.tag);
      if (!files) {
        for (const auto& f : active)
          give_up(fmt::format("fetch {}: pinned by {} in the tree, which is not in the cache yet ({} @ {}); "
                              "`archbuild wheel` resolves it (the key then holds its commit)",
                              f.name, text::join(f.pin_files, " or "), url, r.recipe.source.tag));
        return out;
      }
      commit = files->commit;
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
    if (!text)
      throw Failure(Error::bad_input(fmt::format(
          "{}: [[fetch]] {} names the pin file {}, which the tree ({}) does not have; fix the recipe's pin_file "
          "(or unless_env) for this tree", r.recipe.file.string(), f.name, text::join(f.pin_files, " or "), origin)));
    std::string ref = pin_of(*text);
    if (ref.empty())
      throw Failure(Error::bad_input(fmt::format("{} ({}): empty; expected the tag or commit of {} that [[fetch]] {} "
                                                 "checks out", f.pin_file, origin, f.url, f.name)));
    auto info = source::resolve_ref(f.url, ref, slot_for(f.url), so);
    if (!info) {
      if (offline && required) {
        std::vector<std::string> off;
        for (const auto& rf : r.recipe.fetches)
          if (rf.name == f.name)
            for (const auto& [var, values] : rf.unless_env) off.push_back("--env " + var + "=" + values.front());
        throw Failure(Error::missing_tool(fmt::format(
            "offline: the tree pins {} at {} ({}), which the mirror of {} does not have; run once without --offline "
            "to fetch it{}", f.name, ref, f.pin_file, f.url,
            off.empty() ? "" : ", or build without it (" + text::join(off, " or ") + ")")));
      }
      give_up(fmt::format("fetch {} ({} @ {}, pinned by {}): {}", f.name, f.url, ref, f.pin_file, info.error().message));
      continue;
    }
    out.resolved[f.name] = plan::ResolvedFetch{f.pin_file, ref, info->commit};
  }
  return out;
}

namespace {

std::optional<Version> version_option(const std::string& value, const char* option, std::size_t parts,
                                      const char* example) {
  if (value.empty()) return std::nullopt;
  auto v = Version::parse(value);
  if (!v || (parts && v->size() > parts))
    throw Failure(Error::bad_input(fmt::format("{} '{}': expected a version like {}", option, value, example)));
  return v;
}

// "inode:size:mtime" of a path (following links), or "missing".
std::string file_signature(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return fmt::format("{}:{}:{}.{}", st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

}  // namespace

toolchain::Probe cached_probe(toolchain::Probe inner, store::Layout layout) {
  return [inner = std::move(inner), layout = std::move(layout)](
             const std::vector<std::string>& argv) -> Result<toolchain::ProbeOutput> {
    std::string joined = "archbuild probe v1";
    for (const auto& a : argv) joined += std::string(1, '\0') + a;
    auto file = layout.probe(sha256_hex(joined).substr(0, 32));
    std::error_code ec;
    if (std::filesystem::exists(file, ec)) {
      std::ifstream in(file);
      auto doc = nlohmann::json::parse(in, nullptr, false);
      bool fresh = doc.is_object() && doc.contains("deps") && doc["deps"].is_object() && !doc["deps"].empty();
      if (fresh)
        for (const auto& [path, sig] : doc["deps"].items())
          if (!sig.is_string() || file_signature(path) != sig.get<std::string>()) fresh = false;
      if (fresh) return toolchain::ProbeOutput{doc.value("status", -1), doc.value("out", ""), doc.value("err", "")};
    }
    auto r = inner(argv);
    if (!r || r->status != 0) return r;  // failures are not remembered
    // The answer depends on the program itself and, for an interpreter, on the folders of its
    // sys.path (a module installed later changes them), which the Python probe prints on a
    // line of \x1f-separated paths.
    nlohmann::json deps = nlohmann::json::object();
    deps[argv[0]] = file_signature(argv[0]);
    for (const auto& line : text::split_any(r->out, "\n"))
      if (line.find('\x1f') != std::string::npos)
        for (const auto& p : text::split_any(line, "\x1f")) deps[p] = file_signature(p);
    nlohmann::json doc = {{"argv", argv}, {"status", r->status}, {"out", r->out}, {"err", r->err}, {"deps", deps}};
    std::filesystem::create_directories(file.parent_path(), ec);
    (void)store::write_file_atomic(file, doc.dump());
    return r;
  };
}

plan::Request request_from_args(const ResolveArgs& a) {
  plan::Request req;
  // "torch-2.13" (a recipe's name) means the release 2.13.
  req.torch = version_option(a.torch.starts_with("torch-") ? a.torch.substr(6) : a.torch, "--torch", 3, "2.7");
  req.cuda = version_option(a.cuda, "--cuda", 2, "12.8");
  // After --cuda: a name like Rubin exists only from some CUDA on.
  auto targets = parse_targets(a.sm, arch::ArchData::shipped(), arch::Grammar::build, req.cuda);
  if (!targets) throw Failure(Error{targets.error().exit, "--sm: " + targets.error().message});
  req.targets = std::move(*targets);
  // --python takes a version (3.11: pythonX.Y on PATH) or an interpreter's path.
  std::optional<std::filesystem::path> python_path;
  if (a.python.find('/') != std::string::npos) {
    std::error_code ec;
    if (!std::filesystem::exists(a.python, ec))
      throw Failure(Error::bad_input(fmt::format("--python {}: no such file", a.python)));
    python_path = std::filesystem::absolute(a.python);
  } else {
    req.python = version_option(a.python, "--python", 2, "3.11");
  }
  if (req.cuda && req.cuda->size() != 2)
    throw Failure(Error::bad_input(fmt::format("--cuda '{}': expected MAJOR.MINOR like 12.8", a.cuda)));
  if (req.python && req.python->size() != 2)
    throw Failure(Error::bad_input(fmt::format("--python '{}': expected MAJOR.MINOR like 3.11", a.python)));
  req.ptx = a.ptx;
  if (!a.source_url.empty()) req.source_url = a.source_url;
  if (!a.source_dir.empty()) {
    if (!a.source_url.empty())
      throw Failure(Error::bad_input("--source DIR and --source-url URL exclude each other: build a local tree or a repository"));
    req.source_dir = std::filesystem::absolute(a.source_dir).lexically_normal();
  }
  req.recipe_label = a.recipe.empty() ? "the torch recipes" : a.recipe;
  return req;
}

plan::Inputs inputs_from_args(const ResolveArgs& a, const plan::Request& req, const Context& ctx) {
  std::optional<std::filesystem::path> python_path;
  if (a.python.find('/') != std::string::npos) python_path = std::filesystem::absolute(a.python);
  plan::Inputs in;
  in.recipes = plan::select_recipes(a.recipe.empty() ? std::nullopt : std::optional(a.recipe)).take();
  in.toolchains = toolchain::load_shipped().take();

  std::set<std::string> tools;
  for (const auto& r : in.recipes)
    for (const auto& t : plan::required_tools(r)) tools.insert(t);
  toolchain::Probe probe = [](const std::vector<std::string>& argv) -> Result<toolchain::ProbeOutput> {
    run::CaptureOptions opts;
    opts.timeout = std::chrono::seconds(30);
    auto c = run::capture(argv, opts);
    if (!c) return c.error();
    return toolchain::ProbeOutput{c->timed_out ? -1 : c->status, c->out, c->err};
  };
  if (auto dir = store::choose_cache_dir(ctx.cache_dir)) probe = cached_probe(probe, store::Layout(dir->dir));
  in.host = toolchain::discover_host(toolchain::HostEnv::current(), probe,
                                     std::vector<std::string>(tools.begin(), tools.end()), req.python, python_path);
  if (ctx.verbosity > 0)
    for (const auto& n : in.host.notes) note(ctx, "discovery: " + n);
  return in;
}

plan::Resolution resolve_from_args(const ResolveArgs& a, const Context& ctx) {
  auto req = request_from_args(a);
  return plan::resolve(req, inputs_from_args(a, req, ctx));
}

void print_resolution(const plan::Resolution& r, const Context& ctx) {
  if (r.status != Exit::bad_input) {
    const auto& rc = r.recipe;
    out(fmt::format("recipe     {} ({} {}, tag {})  {}", rc.name, rc.package, rc.version.str(), rc.source.tag,
                    rc.file.string()));
    out(fmt::format("source     {}", r.url().empty() ? "(none: give --source-url)" : r.url()));
    if (r.toolkit)
      out(fmt::format("toolkit    CUDA {} (nvcc {}) at {} ({})", r.toolkit->version.str(),
                      r.toolkit->compiler_version().str(), r.toolkit->root.string(), r.toolkit->found_by));
    else
      out(fmt::format("toolkit    CUDA {} (not installed)", r.toolchain.cuda.str()));
    if (r.compiler)
      out(fmt::format("compiler   {} at {} ({})", r.compiler->name(), r.compiler->path.string(), r.compiler->found_by));
    else
      out("compiler   (none accepted)");
    if (r.python)
      out(fmt::format("python     {} at {}", r.python->version.str(), r.python->path.string()));
    else
      out("python     (not found)");
    out(fmt::format("arch list  {}={}", rc.arch.env, r.arch_list));
    out(fmt::format("driver     {} (CUDA {} needs driver >= {})", recipe::to_string(rc.driver), r.toolchain.cuda.str(),
                    r.toolchain.min_driver_text));
  }
  std::string chosen =
      r.status == Exit::bad_input ? "" : fmt::format("{} + CUDA {}", r.recipe.name, r.toolchain.cuda.str());
  out("rules checked:");
  std::size_t hidden = 0;
  for (const auto& rule : r.rules) {
    bool show = ctx.verbosity > 0 || rule.subject.empty() || rule.subject == chosen || !rule.ok;
    if (!show) {
      ++hidden;
      continue;
    }
    std::string subj = rule.subject.empty() || rule.subject == chosen ? "" : rule.subject + ": ";
    out(fmt::format("  {:<4} {:<18} {}{}", rule.ok ? "ok" : "no", rule.id, subj, rule.detail));
  }
  if (hidden) out(fmt::format("  ({} passed rules of other candidates not shown; -v shows them)", hidden));
  for (const auto& n : r.notes) note(ctx, "note: " + n);
}

}  // namespace archbuild::cli
