#include "validate/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "binary/mapped_file.hpp"
#include "core/path_kind.hpp"
#include "core/text.hpp"

namespace archbuild::validate {

namespace fs = std::filesystem;

namespace {

std::string human_bytes(std::uint64_t n) {
  if (n >= (std::uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(n) / (1 << 30));
  if (n >= (std::uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(n) / (1 << 20));
  if (n >= (std::uint64_t{1} << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(n) / (1 << 10));
  return fmt::format("{} bytes", n);
}

std::string images_text(const std::vector<arch::CodeImage>& images) {
  std::vector<std::string> names;
  for (const auto& i : images) names.push_back(i.name());
  return names.empty() ? "nothing the driver can load" : text::join(names, " ");
}

nlohmann::json verdicts_json(const Coverage& cov) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : cov.targets) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& fv : t.files) {
      nlohmann::json fj = {{"path", fv.path}, {"result", arch::to_string(fv.verdict.result)}};
      fj["image"] = fv.verdict.image ? nlohmann::json(fv.verdict.image->name()) : nlohmann::json(nullptr);
      std::vector<std::string> carried;
      for (const auto& i : fv.carried) carried.push_back(i.name());
      fj["carries"] = carried;
      if (fv.relocatable_only) fj["relocatable_only"] = true;
      files.push_back(fj);
    }
    list.push_back({{"sm", t.cc.str()}, {"result", arch::to_string(t.worst)}, {"covered", t.covered}, {"files", files}});
  }
  return list;
}

Check coverage_check(const Coverage& cov, const std::vector<binary::FileReport>& files,
                     const std::vector<std::string>& elf_errors) {
  Check c;
  c.name = "coverage";
  c.evidence = {{"files_with_device_code", cov.files_with_device_code},
                {"elf_files", files.size()},
                {"verdicts", verdicts_json(cov)}};
  std::vector<std::string> problems;
  for (const auto& e : elf_errors) problems.push_back("unreadable library: " + e);
  if (cov.files_with_device_code == 0)
    problems.push_back(files.empty() ? std::string("no kernel image for any target: the wheel has no compiled "
                                                   "libraries at all")
                                     : fmt::format("no kernel image for any target: none of the {} ELF file{} "
                                                   "carries device code",
                                                   files.size(), files.size() == 1 ? "" : "s"));
  for (const auto& t : cov.targets)
    for (const auto& fv : t.files) {
      if (fv.verdict.result != arch::RunResult::no_kernel_image) continue;
      if (fv.relocatable_only)
        problems.push_back(fmt::format("no kernel image for {} in {}: only relocatable (-rdc) device code, never "
                                       "device-linked",
                                       t.cc.str(), fv.path));
      else
        problems.push_back(
            fmt::format("no kernel image for {} in {} (carries {})", t.cc.str(), fv.path, images_text(fv.carried)));
    }
  if (!problems.empty()) {
    c.status = Status::fail;
    c.summary = problems.front();
    if (problems.size() > 1) c.summary += fmt::format(" (and {} more)", problems.size() - 1);
    constexpr std::size_t kShown = 20;
    for (std::size_t i = 0; i < problems.size() && i < kShown && problems.size() > 1; ++i)
      c.details.push_back(problems[i]);
    if (problems.size() > kShown) c.details.push_back(fmt::format("… and {} more", problems.size() - kShown));
    return c;
  }
  std::vector<std::string> per_target;
  for (const auto& t : cov.targets) {
    per_target.push_back(fmt::format("{} {}", t.cc.str(), arch::to_string(t.worst)));
    for (const auto& fv : t.files)
      c.details.push_back(fmt::format("{}: {} runs {}", t.cc.str(), fv.path,
                                      fv.verdict.image ? fv.verdict.image->name() : std::string("?")));
  }
  c.summary = fmt::format("every target runs in {} with device code: {}",
                          cov.files_with_device_code == 1
                              ? std::string("the one library")
                              : fmt::format("all {} libraries", cov.files_with_device_code),
                          text::join(per_target, ", "));
  return c;
}

Check ptx_check(const Coverage& cov) {
  Check c;
  c.name = "ptx-jit";
  if (cov.files_with_device_code == 0) {
    c.status = Status::skip;
    c.summary = "no device code";
    return c;
  }
  nlohmann::json jit = nlohmann::json::array();
  for (const auto& t : cov.targets) {
    if (!t.covered || t.worst != arch::RunResult::ptx_jit) continue;
    for (const auto& fv : t.files) {
      if (fv.verdict.result != arch::RunResult::ptx_jit) continue;
      c.details.push_back(fmt::format("{} runs {} only through the PTX JIT from {} (slow first launch)", t.cc.str(),
                                      fv.path, fv.verdict.image->name()));
      jit.push_back({{"sm", t.cc.str()}, {"path", fv.path}, {"ptx", fv.verdict.image->name()}});
    }
  }
  c.evidence = {{"ptx_only", jit}};
  if (!jit.empty()) {
    c.status = Status::warn;
    c.summary = c.details.front();
    if (c.details.size() > 1) c.summary += fmt::format(" (and {} more)", c.details.size() - 1);
  } else {
    c.summary = "no target depends on the PTX JIT";
  }
  return c;
}

Check unrequested_check(const Coverage& cov, const std::vector<binary::FileReport>& files,
                        const std::vector<arch::Arch>& targets) {
  Check c;
  c.name = "unrequested-archs";
  if (cov.files_with_device_code == 0) {
    c.status = Status::skip;
    c.summary = "no device code";
    return c;
  }
  std::set<arch::CodeImage> wanted;
  for (const auto& img : arch::images_of(targets)) wanted.insert(img);
  for (const auto& t : cov.targets)
    for (const auto& fv : t.files)
      if (fv.verdict.image) wanted.insert(*fv.verdict.image);
  std::map<std::string, std::uint64_t> bytes;
  std::map<std::string, std::set<std::string>> where;
  std::uint64_t total = 0;
  for (const auto& f : files)
    for (const auto& ct : f.containers) {
      if (ct.placement == binary::Placement::relocatable) continue;
      for (const auto& e : ct.entries) {
        if (e.kind == binary::EntryKind::lto_ir) continue;  // not loadable: not an arch the driver picks
        arch::CodeImage img;
        img.kind = e.kind == binary::EntryKind::ptx ? arch::CodeKind::ptx : arch::CodeKind::sass;
        img.cc = arch::Cc::from_sm(e.sm);
        img.variant = e.variant;
        if (wanted.count(img)) continue;
        std::uint64_t n = e.header_size + e.stored_size;
        bytes[img.name()] += n;
        where[img.name()].insert(f.path);
        total += n;
      }
    }
  nlohmann::json list = nlohmann::json::array();
  std::vector<std::string> names;
  for (const auto& [name, n] : bytes) {
    names.push_back(name);
    list.push_back({{"image", name}, {"bytes", n}, {"files", std::vector<std::string>(where[name].begin(), where[name].end())}});
    c.details.push_back(fmt::format("{}: {} in {} file{}", name, human_bytes(n), where[name].size(),
                                    where[name].size() == 1 ? "" : "s"));
  }
  c.evidence = {{"images", list}, {"bytes", total}};
  if (bytes.empty()) {
    c.summary = "no device code beyond what the targets need";
  } else {
    c.status = Status::warn;
    c.summary = fmt::format("carries {} that no target needs: {} of device code (stored size)",
                            text::join(names, " "), human_bytes(total));
  }
  return c;
}

}  // namespace

std::vector<Check> coverage_checks(const std::vector<binary::FileReport>& files,
                                   const std::vector<std::string>& elf_errors, const std::vector<arch::Arch>& targets) {
  auto cov = coverage(files, target_ccs(targets));
  return {coverage_check(cov, files, elf_errors), ptx_check(cov), unrequested_check(cov, files, targets)};
}

std::vector<Check> closure_checks(const WheelContents& w, const std::optional<WheelName>& name,
                                  const LibraryFacts& facts, const ValidateOptions& options) {
  ClosureInput in;
  for (const auto& [path, dyn] : w.dynamic) in.files.push_back({path, dyn});
  for (const auto& m : w.members)
    if (m.type == Member::Type::file) in.tree.insert(m.name);
  in.requirements = wheel_requirements(w, name);
  in.host = options.host;
  in.host_dirs = options.host_dirs;
  auto closure = resolve_closure(in, facts);
  auto tag = check_platform_tag(name ? name->platform_tags : std::vector<std::string>{}, in.files, closure, facts, elf_machines(w.members));
  // What the package stage left on the build host (the manifest's `portability`). With the
  // recipe's layout "host" that was chosen: a warning (exit 0) that says where the wheel runs, and
  // those libraries leave the closure check. Under "official" it was not: a failure (exit 1).
  std::set<std::string> declared;
  const nlohmann::json* hint = options.portability ? &*options.portability : nullptr;
  if (hint && hint->is_object() && hint->value("host_bound", false))
    for (const auto& l : hint->value("host_libraries", nlohmann::json::array()))
      if (l.is_object() && l.value("soname", std::string()) != "") declared.insert(l["soname"].get<std::string>());
  if (declared.empty()) return {check_closure(closure), tag};
  const bool chosen = hint->value("layout", std::string()) == "host";
  const std::string reason = hint->value("host_bound_reason", std::string("the manifest says so"));
  Check bound;
  bound.name = "host-bound";
  bound.status = chosen ? Status::warn : Status::fail;
  std::vector<std::string> libs;
  nlohmann::json ev = nlohmann::json::array();
  for (auto& f : closure)
    std::erase_if(f.needed, [&](const Resolved& r) {
      if (r.from != From::missing || !declared.count(r.soname)) return false;
      bound.details.push_back(fmt::format("{} needs {}: {}", f.path, r.soname, r.where));
      ev.push_back({{"file", f.path}, {"soname", r.soname}, {"where", r.where}});
      if (std::find(libs.begin(), libs.end(), r.soname) == libs.end()) libs.push_back(r.soname);
      return chosen;
    });
  bound.evidence = {{"libraries", ev}, {"reason", reason}, {"layout", hint->value("layout", std::string())}};
  bound.summary = chosen ? fmt::format("host-bound ({}): runs only where {} is at the build host's path",
                                       reason, text::join(libs, ", "))
                         : fmt::format("host-bound against the recipe's official layout: {}; add the package to "
                                       "data/validate/libraries.toml or set [wheel] layout = \"host\"",
                                       reason);
  if (libs.empty()) {
    bound.status = Status::warn;
    bound.summary = fmt::format("marked host-bound by the package stage ({}); every library resolves here", reason);
  }
  return {check_closure(closure), std::move(bound), std::move(tag)};
}

namespace {
// The package stage's record beside the wheel: <wheel>.manifest.json's `portability`. No file
// there: nothing to read. Anything else that cannot be read (a FIFO, a directory, a link loop,
// not JSON, not an object) is a `manifest` warning saying what and where: the record is then
// not used, which only makes the closure check stricter (a host-bound library is then missing).
struct ManifestHint {
  std::optional<nlohmann::json> portability;
  std::optional<Check> problem;
};

ManifestHint manifest_portability(const fs::path& wheel) {
  fs::path m = wheel;
  m += ".manifest.json";
  ManifestHint out;
  auto unusable = [&](const std::string& why) {
    Check c;
    c.name = "manifest";
    c.status = Status::warn;
    c.summary = fmt::format("{}: {}; its portability record is not used", m.string(), why);
    c.evidence = {{"path", m.string()}, {"problem", why}};
    out.problem = std::move(c);
    return out;
  };
  auto info = paths::classify(m);
  if (info.kind == paths::Kind::missing) return out;
  // Said by what it is, and never opened unless it is a regular file (a FIFO's open waits forever).
  auto mapped = binary::MappedFile::open(m);
  if (!mapped) return unusable(info.kind == paths::Kind::regular ? mapped.error().message
                                                                 : paths::describe(info) + ", not a regular file");
  auto bytes = mapped->bytes();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1, column 2: …"
    std::string what = e.what();
    if (auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    return unusable("not JSON: " + what);
  }
  if (!doc.is_object()) return unusable(fmt::format("not a JSON object (a {})", doc.type_name()));
  if (!doc.contains("portability")) return out;
  if (!doc["portability"].is_object())
    return unusable(fmt::format("`portability` is not an object (a {})", doc["portability"].type_name()));
  out.portability = doc["portability"];
  return out;
}
}  // namespace

Result<Report> validate_wheel(const fs::path& wheel, const std::vector<arch::Arch>& targets,
                              const ValidateOptions& options, const Exec& exec) {
  auto read = read_wheel(wheel, options.read);
  if (!read) return read.error();
  const WheelContents& w = *read;
  Report r;
  r.subject = wheel.string();
  std::string file = wheel.filename().string();
  auto parsed = parse_wheel_name(file);
  std::optional<WheelName> name;
  if (parsed) name = *parsed;

  for (auto& c : structure_checks(file, parsed, w)) r.add(std::move(c));
  r.add(check_local_label(w, name, options.expected_label));
  for (auto& c : coverage_checks(w.elf, w.elf_errors, targets)) r.add(std::move(c));
  const LibraryFacts* facts = options.libraries;
  if (!facts) return Error{Exit::internal, "validate::ValidateOptions without library facts (libraries)"};
  ValidateOptions with_hint = options;
  if (!with_hint.portability) {
    auto hint = manifest_portability(wheel);
    with_hint.portability = std::move(hint.portability);
    if (hint.problem) r.add(std::move(*hint.problem));
  }
  for (auto& c : closure_checks(w, name, *facts, with_hint)) r.add(std::move(c));

  if (options.import_test) {
    ImportSetup setup = *options.import_test;
    if (!setup.cuda && name)
      if (auto cu = parse_label(name->local_label()).cuda) setup.cuda = *cu;
    if (setup.requirements.empty())
      for (const auto& req : wheel_requirements(w, name))
        if (!req.extra) setup.requirements.push_back(req.text);
    setup.module = import_name(w, name, options.module ? options.module
                                                       : setup.module.empty() ? std::nullopt
                                                                              : std::optional(setup.module));
    r.append(import_test(wheel, name, targets, setup, exec));
  }
  if (options.smoke) r.append(smoke(targets, *options.smoke, exec));
  for (const auto& c : options.preset) r.add(c);
  return r;
}

}  // namespace archbuild::validate
