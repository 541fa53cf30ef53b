#include "validate/installed.hpp"

#include <fmt/format.h>

#include "binary/elf.hpp"
#include "binary/inspect.hpp"
#include "binary/mapped_file.hpp"
#include "core/text.hpp"
#include "validate/validate.hpp"

namespace archbuild::validate {

namespace fs = std::filesystem;

namespace {

// importlib.metadata knows where a distribution lives and its RECORD; nothing is imported.
constexpr const char* kProbe = R"(import sys, json
from importlib import metadata
try:
    d = metadata.distribution(sys.argv[1])
except metadata.PackageNotFoundError:
    print(json.dumps({"error": "not installed"}))
    sys.exit(0)
wheel = d.read_text("WHEEL") or ""
print(json.dumps({"name": d.metadata["Name"], "version": d.version, "root": str(d.locate_file("")),
                  "files": [str(f) for f in (d.files or [])], "requires": d.requires or [],
                  "top_level": (d.read_text("top_level.txt") or "").split(),
                  "tags": [l.split(":", 1)[1].strip() for l in wheel.splitlines() if l.startswith("Tag:")]}))
)";

std::vector<std::string> strings_of(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || !j[key].is_array()) return out;
  for (const auto& x : j[key])
    if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

bool host_machine(binary::Bytes b) {
  auto h = binary::read_elf_header(b);
  return h && h->elf_class == 2 && h->data == 1 && (h->machine == binary::kEmX86_64 || h->machine == binary::kEmAarch64);
}

}  // namespace

std::vector<std::string> installed_probe_argv(const fs::path& python, const std::string& dist) {
  return {python.string(), "-I", "-c", kProbe, dist};
}

Result<InstalledDist> interpret_installed_probe(const Outcome& o, const std::string& dist, const fs::path& python) {
  auto j = parse_import_output(o.out);
  if (o.status != 0 || !j) {
    auto lines = tail_lines(o, 1);
    return Error::missing_tool(fmt::format("{} could not list the installed distributions (exit {}){}",
                                           python.string(), o.status, lines.empty() ? "" : ": " + lines.back()));
  }
  if (j->contains("error"))
    return Error::bad_input(fmt::format("--installed {}: not installed for {} (pip show {} finds nothing there)", dist,
                                        python.string(), dist));
  InstalledDist d;
  d.name = j->value("name", dist);
  d.version = j->value("version", "");
  d.root = j->value("root", "");
  for (const auto& f : strings_of(*j, "files")) {
    std::string n = fs::path(f).lexically_normal().generic_string();
    if (n.empty() || n.starts_with("../") || n.front() == '/') continue;  // scripts in bin/: not the tree
    d.files.push_back(n);
  }
  d.requires_dist = strings_of(*j, "requires");
  d.top_level = strings_of(*j, "top_level");
  for (const auto& tag : strings_of(*j, "tags")) {
    auto parts = text::split_any(tag, "-");
    if (parts.size() == 3)
      for (const auto& p : text::split_any(parts[2], ".")) d.platform_tags.push_back(p);
  }
  return d;
}

Result<Report> validate_installed(const std::string& dist, const std::vector<arch::Arch>& targets,
                                  const InstalledOptions& options, const Exec& exec) {
  auto probed = exec({installed_probe_argv(options.python, dist), {{"PYTHONNOUSERSITE", "1"}}, std::nullopt,
                      std::chrono::seconds(120)});
  if (!probed) return probed.error();
  auto d = interpret_installed_probe(*probed, dist, options.python);
  if (!d) return d.error();
  Report r;
  r.subject = fmt::format("{} {} installed in {}", d->name, d->version, d->root.string());

  // Every ELF file of the distribution, read in place.
  std::vector<binary::FileReport> reports;
  std::vector<std::string> elf_errors;
  ClosureInput in;
  in.host_dirs = options.host_dirs;
  in.tree.insert(d->files.begin(), d->files.end());
  for (const auto& f : d->files) {
    std::error_code ec;
    fs::path p = d->root / f;
    if (!fs::is_regular_file(p, ec) || fs::file_size(p, ec) < 64) continue;
    auto mapped = binary::MappedFile::open(p);
    if (!mapped) {
      elf_errors.push_back(fmt::format("{}: {}", f, mapped.error().message));
      continue;
    }
    auto bytes = mapped->bytes();
    if (!binary::looks_like_elf(bytes) || !host_machine(bytes)) continue;
    if (auto rep = binary::inspect_elf(bytes, f))
      reports.push_back(std::move(*rep));
    else
      elf_errors.push_back(rep.error().message);
    auto dyn = binary::read_dynamic(bytes);
    if (!dyn)
      elf_errors.push_back(fmt::format("{}: dynamic section: {}", f, dyn.error().message));
    else if (dyn->dynamic)
      in.files.push_back({f, std::move(*dyn)});
  }
  for (auto& c : coverage_checks(reports, elf_errors, targets)) r.add(std::move(c));

  const LibraryFacts* facts = options.libraries;
  if (!facts) return Error{Exit::internal, "validate::InstalledOptions without library facts (libraries)"};
  in.requirements = parse_requirements(d->requires_dist);
  fs::path root = d->root;
  in.installed = [root](const std::string& rel) {
    std::error_code ec;
    return fs::exists(root / rel, ec);
  };
  auto closure = resolve_closure(in, *facts);
  r.add(check_closure(closure));
  r.add(check_platform_tag(d->platform_tags, in.files, closure, *facts, elf_machines(reports)));

  if (options.script.empty()) return r;
  std::string module = options.module ? *options.module
                       : !d->top_level.empty() ? d->top_level.front()
                                               : normalize_name(d->name);
  std::string why_no_gpu;
  auto gpu = matching_gpu(options.gpus, targets, &why_no_gpu);
  std::map<std::string, std::string> env{{"PYTHONNOUSERSITE", "1"}};
  if (gpu) select_gpu(env, *gpu);
  auto scratch = Scratch::make(std::nullopt, "archbuild-installed");
  std::optional<fs::path> cwd;
  if (scratch) cwd = scratch->path();  // not the caller's folder: a source tree there would shadow the package
  std::vector<std::string> argv{options.python.string(), "-I", options.script.string(), module};
  if (gpu) argv.push_back("--gpu");
  auto ran = exec({argv, env, cwd, options.import_timeout});
  Check gpu_skip;
  gpu_skip.name = "import-gpu";
  gpu_skip.status = Status::skip;
  if (!ran) {
    Check c;
    c.name = "import";
    c.status = Status::skip;
    c.missing_tool = true;
    c.summary = fmt::format("cannot run {}: {}", options.python.string(), ran.error().message);
    r.add(std::move(c));
    gpu_skip.summary = "not imported";
    r.add(std::move(gpu_skip));
    return r;
  }
  auto imported = interpret_import_in(*ran, module, root, "the installed distribution");
  bool ok = imported.status == Status::pass;
  r.add(std::move(imported));
  if (!ok) {
    gpu_skip.summary = "not imported";
    r.add(std::move(gpu_skip));
    return r;
  }
  auto result = *parse_import_output(ran->out);
  if (auto f = interpret_features(result, options.cuda)) r.add(std::move(*f));
  if (gpu) {
    r.add(interpret_import_gpu(result, targets, *gpu));
  } else {
    gpu_skip.summary = fmt::format("{}: get_arch_list(), the device capability and a CUDA operation were not checked",
                                   why_no_gpu);
    r.add(std::move(gpu_skip));
  }
  return r;
}

}  // namespace archbuild::validate
