#include "cli/resolve_common.hpp"

#include "cli/host.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "arch/parse.hpp"
#include "core/sha256.hpp"
#include "core/path_kind.hpp"
#include "core/text.hpp"
#include "store/atomic_file.hpp"
#include "store/layout.hpp"
#include "store/wheels.hpp"
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
  cmd.add_option("--platform", a.platform,
                 "The platform to build for (toolchains/platforms.toml: x86_64, sbsa for Grace / GB10 / Thor, jetson "
                 "for L4T); default: this machine's")
      ->type_name("NAME");
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
      ->check([](const std::string& p) {
        // Said by what it is (a FIFO passes CLI11's ExistingFile and would block the install).
        auto k = paths::expect_regular_file(p, "--torch-wheel");
        return k ? std::string() : k.error().message;
      });
  cmd.add_flag("--allow-release-mismatch", a.allow_release_mismatch,
               "Build a tree (--source, --ref) with a recipe of another release line on purpose (otherwise a stop, "
               "exit 2, naming both)");
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

prepare::Cache cache_of(const Context& ctx) {
  prepare::Cache c;
  if (auto dir = store::choose_cache_dir(ctx.cache_dir)) c.layout.emplace(dir->dir);
  else c.missing_because = dir.error().message;
  return c;
}

std::vector<prepare::Stop> launch_stops(const Context& ctx, const std::string& out) {
  std::vector<prepare::Stop> stops;
  if (auto dir = store::choose_cache_dir(ctx.cache_dir); !dir) stops.push_back({"cache-dir", dir.error()});
  if (auto c = store::check_out_dir(fs::absolute(out)); !c) stops.push_back({"out", c.error()});
  return stops;
}

prepare::Request prepare_request(const ResolveArgs& a, const plan::PlanOptions& budget, unsigned jobs, bool offline,
                                 bool for_build) {
  prepare::Request q;
  q.ref = a.ref;
  q.env = env_from_args(a);
  q.without = a.without;
  q.index_url = a.index_url;
  q.find_links = a.find_links;
  if (!a.torch_wheel.empty()) q.torch_wheel = a.torch_wheel;
  if (jobs) q.jobs = jobs;
  q.memory_budget_mb = budget.memory_budget_mb;
  q.memory_budget_text = budget.memory_budget_text;
  q.offline = offline;
  q.for_build = for_build;
  q.allow_release_mismatch = a.allow_release_mismatch;
  if (auto lines = plan::select_recipes(std::nullopt))
    for (const auto& r : *lines) q.recipe_lines.push_back(r.version);
  return q;
}

namespace {

// --ref without --recipe or --torch: the tree's release line (its version.txt, read once the ref
// is resolved) chooses the torch recipe, as for --source. Nothing when the plan's recipe fits,
// or no recipe of that line exists (the release-line rule then says what to do).
std::optional<plan::Resolution> resolution_for_tree(const ResolveArgs& a, const plan::Resolution& r,
                                                    const prepare::Prepared& p, const Context& ctx) {
  if (a.ref.empty() || !a.recipe.empty() || !a.torch.empty() || a.allow_release_mismatch) return std::nullopt;
  if (std::none_of(p.stops.begin(), p.stops.end(), [](const prepare::Stop& s) { return s.rule == "release-line"; }))
    return std::nullopt;
  auto release = contract::release_part(p.plan->version.substr(0, p.plan->version.find('+')));
  if (!release || release->size() < 2) return std::nullopt;
  Version line = release->prefix(2);
  auto all = plan::select_recipes(std::nullopt);
  if (!all || std::none_of(all->begin(), all->end(), [&](const recipe::Recipe& x) { return x.version.prefix(2) == line; }))
    return std::nullopt;
  ResolveArgs again = a;
  again.torch = line.str();
  if (r.python) again.python = r.python->path.string();
  auto chosen = resolve_from_args(again, ctx);
  if (!chosen.ok()) return std::nullopt;
  note(ctx, fmt::format("--ref {}: the tree is release line {}, so the recipe is {}", a.ref, line.str(), chosen.recipe.name));
  return chosen;
}

}  // namespace

Result<prepare::Prepared> prepare_from_args(const plan::Resolution& r, const prepare::Request& q, const ResolveArgs& a,
                                            const Context& ctx) {
  auto reporter = run::make_reporter(run::ReporterKind::plain, std::cerr);
  run::ProcessRunner runner;
  run::InterruptGuard guard;
  prepare::Services s{runner, *reporter};
  s.note = [&ctx](const std::string& n) { note(ctx, n); };
  s.verbose = ctx.verbosity > 0;
  auto p = prepare::prepare(r, q, cache_of(ctx), s);
  if (p)
    if (auto chosen = resolution_for_tree(a, r, *p, ctx)) return prepare::prepare(*chosen, q, cache_of(ctx), s);
  return p;
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

namespace {

std::optional<Version> version_option(const std::string& value, const char* option, std::size_t parts,
                                      const char* example) {
  if (value.empty()) return std::nullopt;
  auto v = Version::parse(value);
  if (!v || (parts && v->size() > parts))
    throw Failure(Error::bad_input(fmt::format("{} '{}': expected a version like {}", option, value, example)));
  return v;
}

// --source-url file:///srv/git/x.git names a repository on this machine: one that is not there is
// bad input now (as `plan --check` says), not a fetch stage that fails (exit 4). A remote URL
// cannot be checked offline; its fetch says what is wrong.
Result<Ok> local_source_url_rule(const std::string& url) {
  if (!url.starts_with("file://")) return Ok{};
  const std::string path = url.substr(7);
  auto info = paths::classify(path);
  if (!path.empty() && info.kind == paths::Kind::directory) return Ok{};
  std::string what = path.empty() ? "names no path" : paths::describe(info);
  if (what.starts_with("is ") && info.kind != paths::Kind::dangling_link && info.kind != paths::Kind::link_loop)
    what += ", not a git repository's directory";
  return Error::bad_input(fmt::format("--source-url {}: {}; a file:// URL names a git repository on this machine, as "
                                      "file:///srv/git/x.git",
                                      text::quoted(url, 1024), what));
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
    // Said by what it is (a FIFO, a link loop, a directory …), never opened first.
    paths::expect_regular_file(a.python, "--python").take();
    python_path = std::filesystem::absolute(a.python);
  } else {
    req.python = version_option(a.python, "--python", 2, "3.11");
  }
  if (req.cuda && req.cuda->size() != 2)
    throw Failure(Error::bad_input(fmt::format("--cuda '{}': expected MAJOR.MINOR like 12.8", a.cuda)));
  if (req.python && req.python->size() != 2)
    throw Failure(Error::bad_input(fmt::format("--python '{}': expected MAJOR.MINOR like 3.11", a.python)));
  req.ptx = a.ptx;
  if (!a.platform.empty()) req.platform = a.platform;
  if (!a.source_url.empty()) {
    local_source_url_rule(a.source_url).take();
    req.source_url = a.source_url;
  }
  if (!a.source_dir.empty()) {
    if (!a.source_url.empty())
      throw Failure(Error::bad_input("--source DIR and --source-url URL exclude each other: build a local tree or a repository"));
    req.source_dir = std::filesystem::absolute(a.source_dir).lexically_normal();
    // The tree chooses: its version.txt's release line picks the torch recipe of that line.
    if (a.recipe.empty() && !req.torch)
      if (auto line = prepare::tree_release_line(*req.source_dir))
        if (auto all = plan::select_recipes(std::nullopt))
          for (const auto& r : *all)
            if (r.version.prefix(2) == *line) {
              req.torch = line;
              break;
            }
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
