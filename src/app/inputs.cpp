#include "app/inputs.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contract/contract.hpp"
#include "core/path_kind.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "run/capture.hpp"
#include "run/interrupt.hpp"
#include "run/reporter.hpp"
#include "run/runner.hpp"
#include "stages/reproducible.hpp"
#include "store/atomic_file.hpp"

namespace archbuild::app {

namespace fs = std::filesystem;

Result<Ok> tmpdir_rule() {
  const char* tmpdir = std::getenv("TMPDIR");
  if (!tmpdir || !*tmpdir) return Ok{};
  if (auto dir = paths::expect_directory(tmpdir, "TMPDIR"); !dir)
    return Error::bad_input(dir.error().message + "; the tools archbuild starts write their temporary files there: create "
                                                  "it, or unset TMPDIR");
  if (::access(tmpdir, W_OK | X_OK) != 0)
    return Error::bad_input(fmt::format("TMPDIR {}: this user cannot write into it; the tools archbuild starts write their "
                                        "temporary files there: name another, or unset TMPDIR",
                                        text::quoted(tmpdir)));
  return Ok{};
}

std::optional<Version> cuda_release(const std::string& value) {
  if (value.empty()) return std::nullopt;
  auto v = Version::parse(value);
  if (!v || v->size() != 2)
    // The wording tests pin: resolve's "--cuda '13'", matrix's "expected a CUDA release X.Y".
    throw Failure(Error::bad_input(fmt::format("--cuda '{}': expected a CUDA release X.Y, e.g. 13.0", value)));
  return v;
}

Result<std::vector<arch::Arch>> sm_targets(const std::vector<std::string>& values, const arch::ArchData& data,
                                           arch::Grammar grammar, std::optional<Version> cuda) {
  arch::ParseOptions o;
  o.grammar = grammar;
  o.cuda = std::move(cuda);
  bool no_native = false;  // `--sm native` without a GPU: its message names the option itself
  o.keyword = [&data, &no_native](std::string_view kw) -> Result<std::vector<arch::Arch>> {
    std::string k = text::lower(kw);
    if (k != "native")
      return Error::bad_input(fmt::format(
          "'{}' is not a target: it depends on a toolkit's list; name the CCs to build for (e.g. --sm 8.0,9.0)", kw));
    auto d = detect_host(data);
    if (d.gpus.empty()) {
      no_native = true;
      return Error::missing_tool(fmt::format("--sm native: no GPU found on this host ({}); see `archbuild detect`, or give the CC, e.g. --sm 90",
                                             text::join(d.tried, "; ")));
    }
    std::vector<arch::Arch> out;
    for (const auto& g : d.gpus) out.push_back({g.cc, arch::Variant::none, true, false, std::nullopt});
    return out;
  };
  // "90,," or ",90": an item left out is a typo, as `--python "3.11,,"` is, not a shorter list.
  for (const auto& v : values) {
    std::size_t from = 0;
    for (std::size_t i = 0; i <= v.size(); ++i) {
      if (i < v.size() && v[i] != ',' && v[i] != ';') continue;
      if (text::trim(std::string_view(v).substr(from, i - from)).empty())
        return Error::bad_input(fmt::format("--sm {}: an empty item; give CCs separated by ',' (e.g. 8.0,9.0)",
                                            text::quoted(v)));
      from = i + 1;
    }
  }
  auto targets = arch::parse_arch_lists(values, data, o);
  if (!targets && !no_native) return targets.error().with_context("--sm");
  return targets;
}

std::map<std::string, std::string> env_from_args(const ResolveArgs& a) {
  std::map<std::string, std::string> out;
  for (const auto& item : a.env) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Failure(Error::bad_input(fmt::format("--env '{}': expected NAME=VALUE, e.g. --env USE_NCCL=1", item)));
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  // A value the package stage cannot carry is refused now, not as a traceback hours later.
  if (auto epoch = out.find("SOURCE_DATE_EPOCH"); epoch != out.end())
    if (auto why = stages::source_date_epoch_problem(epoch->second))
      throw Failure(Error::bad_input("--env " + *why));
  return out;
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

detect::Detection detect_host(const arch::ArchData& data, const std::string& only_source) {
  detect::DetectOptions o;
  o.only = only_source;
  if (const char* p = std::getenv("ARCHBUILD_NVML_LIBRARY")) o.nvml_library = p;
  if (const char* p = std::getenv("ARCHBUILD_CUDA_LIBRARY")) o.cuda_library = p;
  // The job's GPUs: NVML ignores these, CUDA (and every child archbuild starts) does not.
  if (const char* p = std::getenv("CUDA_VISIBLE_DEVICES")) o.visible_devices = p;
  if (const char* p = std::getenv("CUDA_DEVICE_ORDER")) o.device_order = p;
  o.smi = [](const std::vector<std::string>& argv) -> Result<std::pair<int, std::string>> {
    run::CaptureOptions co;
    co.timeout = std::chrono::seconds(20);
    auto r = run::capture(argv, co);
    if (!r) return r.error();
    if (r->timed_out) return Error::missing_tool("timed out after 20 s");
    return std::pair{r->status, r->status == 0 ? r->out : r->err + r->out};
  };
  return detect::detect(data, o);
}

toolchain::Probe tool_probe() {
  return [](const std::vector<std::string>& argv) -> Result<toolchain::ProbeOutput> {
    run::CaptureOptions o;
    o.timeout = std::chrono::seconds(30);
    auto c = run::capture(argv, o);
    if (!c) return c.error();
    return toolchain::ProbeOutput{c->timed_out ? -1 : c->status, c->out, c->err};
  };
}

namespace {

// "inode:size:mtime" of a path (following links), or "missing".
std::string file_signature(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return fmt::format("{}:{}:{}.{}", st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

// --source-url file:///srv/git/x.git names a repository on this machine: one that is not there is
// bad input now (as `plan --check` says), not a fetch stage that fails (exit 4). A remote URL
// cannot be checked offline; its fetch says what is wrong.
// Something is there, and it is no folder (a file, a FIFO, a device): by its kind, not by how
// paths::describe words it.
bool there_but_no_folder(const paths::PathInfo& info) {
  switch (info.kind) {
    case paths::Kind::regular:
    case paths::Kind::fifo:
    case paths::Kind::socket:
    case paths::Kind::char_device:
    case paths::Kind::block_device: return true;
    case paths::Kind::other: return info.why.empty();  // stat() said what it is: none of the above
    default: return false;
  }
}

Result<Ok> local_source_url_rule(const std::string& url) {
  if (!url.starts_with("file://")) return Ok{};
  const std::string path = url.substr(7);
  auto info = paths::classify(path);
  if (!path.empty() && info.kind == paths::Kind::directory) return Ok{};
  std::string what = path.empty() ? "names no path" : paths::describe(info);
  if (!path.empty() && there_but_no_folder(info)) what += ", not a git repository's directory";
  return Error::bad_input(fmt::format("--source-url {}: {}; a file:// URL names a git repository on this machine, as "
                                      "file:///srv/git/x.git",
                                      text::quoted(url, 1024), what));
}

std::optional<Version> version_option(const std::string& value, const char* option, std::size_t parts,
                                      const char* example) {
  if (value.empty()) return std::nullopt;
  auto v = Version::parse(value);
  if (!v || (parts && v->size() > parts))
    throw Failure(Error::bad_input(fmt::format("{} '{}': expected a version like {}", option, value, example)));
  return v;
}

}  // namespace

toolchain::Probe cached_probe(toolchain::Probe inner, store::Layout layout) {
  return [inner = std::move(inner), layout = std::move(layout)](
             const std::vector<std::string>& argv) -> Result<toolchain::ProbeOutput> {
    std::string joined = "archbuild probe v1";
    for (const auto& a : argv) joined += std::string(1, '\0') + a;
    auto file = layout.probe(sha256_hex(joined).substr(0, 32));
    std::error_code ec;
    if (fs::exists(file, ec)) {
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
    fs::create_directories(file.parent_path(), ec);
    (void)store::write_file_atomic(file, doc.dump());
    return r;
  };
}

prepare::Cache cache_of(const Session& s) {
  prepare::Cache c;
  if (auto dir = store::choose_cache_dir(s.cache_dir)) c.layout.emplace(dir->dir);
  else c.missing_because = dir.error().message;
  return c;
}

plan::Request request_from_args(const ResolveArgs& a, const Facts& facts) {
  plan::Request req;
  // "torch-2.13" (a recipe's name) means the release 2.13.
  req.torch = version_option(a.torch.starts_with("torch-") ? a.torch.substr(6) : a.torch, "--torch", 3, "2.7");
  req.cuda = cuda_release(a.cuda);
  // After --cuda: a name like Rubin exists only from some CUDA on.
  req.targets = sm_targets(a.sm, facts.arch(), arch::Grammar::build, req.cuda).take();
  // --python takes a version (3.11: pythonX.Y on PATH) or an interpreter's path.
  if (a.python.find('/') != std::string::npos) {
    // Said by what it is (a FIFO, a link loop, a directory …), never opened first.
    paths::expect_regular_file(a.python, "--python").take();
  } else {
    req.python = version_option(a.python, "--python", 2, "3.11");
  }
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
    req.source_dir = fs::absolute(a.source_dir).lexically_normal();
    // The tree chooses: its version.txt's release line picks the torch recipe of that line.
    if (a.recipe.empty() && !req.torch)
      if (auto line = prepare::tree_release_line(*req.source_dir))
        if (auto all = plan::select_recipes(std::nullopt, facts.recipes(), facts.search()))
          for (const auto& r : *all)
            if (r.version.prefix(2) == *line) {
              req.torch = line;
              break;
            }
  }
  req.recipe_label = a.recipe.empty() ? "the torch recipes" : a.recipe;
  return req;
}

plan::Inputs discover_inputs(const Facts& facts, std::vector<recipe::Recipe> recipes, const toolchain::Probe& probe,
                             std::optional<Version> python, std::optional<fs::path> python_path) {
  plan::Inputs in;
  in.recipes = std::move(recipes);
  in.toolchains = facts.toolchains();
  in.platforms = facts.platforms();
  in.jetpacks = facts.jetpacks();
  std::set<std::string> tools;
  for (const auto& r : in.recipes)
    for (const auto& t : plan::required_tools(r)) tools.insert(t);
  in.host = toolchain::discover_host(toolchain::HostEnv::current(), probe,
                                     std::vector<std::string>(tools.begin(), tools.end()), python, python_path);
  return in;
}

plan::Inputs inputs_from_args(const ResolveArgs& a, const plan::Request& req, const Session& s) {
  std::optional<fs::path> python_path;
  if (a.python.find('/') != std::string::npos) python_path = fs::absolute(a.python);
  const Facts& facts = s.facts();
  auto recipes =
      plan::select_recipes(a.recipe.empty() ? std::nullopt : std::optional(a.recipe), facts.recipes(), facts.search())
          .take();
  toolchain::Probe probe = s.probe;
  if (!probe) {
    probe = tool_probe();
    if (auto dir = store::choose_cache_dir(s.cache_dir)) probe = cached_probe(probe, store::Layout(dir->dir));
  }
  plan::Inputs in = discover_inputs(facts, std::move(recipes), probe, req.python, python_path);
  if (s.verbosity > 0)
    for (const auto& n : in.host.notes) note(s, "discovery: " + n);
  return in;
}

plan::Resolution resolve_from_args(const ResolveArgs& a, const Session& s) {
  auto req = request_from_args(a, s.facts());
  return plan::resolve(req, inputs_from_args(a, req, s));
}

prepare::Request prepare_request(const ResolveArgs& a, const plan::PlanOptions& budget, unsigned jobs, bool offline,
                                 bool for_build, const Facts& facts) {
  prepare::Request q;
  q.ref = a.ref;
  q.env = env_from_args(a);
  q.without = a.without;
  q.index_url = a.index_url;
  q.find_links = a.find_links;
  if (!a.torch_wheel.empty()) q.torch_wheel = a.torch_wheel;
  for (const auto& file : a.patches) q.patches.push_back(recipe::patch_from_file(file).take());
  if (jobs) q.jobs = jobs;
  q.memory_budget_mb = budget.memory_budget_mb;
  q.memory_budget_text = budget.memory_budget_text;
  q.offline = offline;
  q.for_build = for_build;
  q.allow_release_mismatch = a.allow_release_mismatch;
  q.clean = a.clean;
  if (auto lines = plan::select_recipes(std::nullopt, facts.recipes(), facts.search()))
    for (const auto& r : *lines) q.recipe_lines.push_back(r.version);
  q.library_specs = &facts.library_specs();
  return q;
}

Result<prepare::Prepared> prepare_from_args(const plan::Resolution& r, const prepare::Request& q, const ResolveArgs& a,
                                            const Session& s) {
  auto reporter = run::make_reporter(run::ReporterKind::plain, *s.err);
  run::ProcessRunner own;
  run::InterruptGuard guard;
  prepare::Services services{s.runner ? *s.runner : own, *reporter};
  services.note = [&s](const std::string& n) { note(s, n); };
  services.verbose = s.verbosity > 0;
  auto p = prepare::prepare(r, q, cache_of(s), services);
  // --ref without --recipe or --torch: the tree's release line (its version.txt, read once the
  // ref is resolved) chooses the torch recipe, as for --source.
  if (!p || a.ref.empty() || !a.recipe.empty() || !a.torch.empty()) return p;
  auto line = prepare::recipe_line_of_tree(*p, q);
  if (!line) return p;
  ResolveArgs again = a;
  again.torch = line->str();
  if (r.python) again.python = r.python->path.string();
  auto chosen = resolve_from_args(again, s);
  if (!chosen.ok()) return p;
  note(s, fmt::format("--ref {}: the tree is release line {}, so the recipe is {}", a.ref, line->str(), chosen.recipe.name));
  return prepare::prepare(chosen, q, cache_of(s), services);
}

}  // namespace archbuild::app
