// archbuild doctor [--python PY] [--sm LIST] — why the torch PY imports fails (or would fail) on
// this GPU (or the --sm one), with the evidence and the shortest fix: an official wheel, else
// the exact `archbuild wheel` command.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "arch/arch_data.hpp"
#include "binary/inspect.hpp"
#include "cli/context.hpp"
#include "cli/install_advice.hpp"
#include "core/text.hpp"
#include "doctor/doctor.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::cli {

namespace {

namespace fs = std::filesystem;

struct DoctorArgs {
  std::string python;
  TargetArgs targets;
  std::string mirror;  // --mirror URL, else $ARCHBUILD_MIRROR
};

std::string rel(const doctor::TorchFacts& t, const std::string& p) {
  fs::path r = fs::path(p).lexically_relative(t.dir);
  return r.empty() || r.native().starts_with("..") ? p : r.string();
}

std::vector<std::string> image_names(const std::vector<arch::CodeImage>& images) {
  std::vector<std::string> out;
  for (const auto& i : images) out.push_back(i.name());
  return out;
}

nlohmann::json opt_json(const std::optional<std::string>& s) { return s ? nlohmann::json(*s) : nlohmann::json(nullptr); }

nlohmann::json report_json(const doctor::Facts& f, const doctor::Report& r, const std::string& python) {
  const auto& t = f.torch;
  nlohmann::json files = nlohmann::json::array();
  for (const auto& file : t.lib_files)
    if (file.has_device_code()) files.push_back({{"path", rel(t, file.path)}, {"images", image_names(file.code_images())}});
  nlohmann::json torch = {
      {"version", t.version.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.version)},
      {"cuda", opt_json(t.cuda)},
      {"hip", opt_json(t.hip)},
      {"dir", t.dir.string()},
      {"import_error", opt_json(t.import_error)},
      {"cuda_available", t.cuda_available ? nlohmann::json(*t.cuda_available) : nlohmann::json(nullptr)},
      {"arch_list", t.arch_list ? nlohmann::json(*t.arch_list) : nlohmann::json(nullptr)},
      {"arch_list_source", t.arch_list ? nlohmann::json(t.arch_list_source) : nlohmann::json(nullptr)},
      {"lib", {{"inspected", t.lib_inspected}, {"error", t.lib_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.lib_error)},
               {"files_with_device_code", files}}},
  };
  if (!t.arch_list) torch["arch_list_missing"] = t.arch_list_missing;
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& s : r.targets)
    targets.push_back({{"cc", s.target.cc.str()},
                       {"sm", fmt::format("sm_{}", s.target.cc.sm())},
                       {"source", s.target.source},
                       {"result", s.result ? nlohmann::json(arch::to_string(*s.result)) : nlohmann::json(nullptr)},
                       {"image", s.image ? nlohmann::json(s.image->name()) : nlohmann::json(nullptr)},
                       {"basis", s.basis.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.basis)}});
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& fd : r.findings) {
    nlohmann::json fixes = nlohmann::json::array();
    for (const auto& fx : fd.fixes) {
      nlohmann::json j = {{"kind", fx.kind}, {"text", fx.text}};
      j["command"] = fx.command.empty() ? nlohmann::json(nullptr) : nlohmann::json(fx.command);
      if (!fx.also.empty()) j["also"] = fx.also;
      fixes.push_back(j);
    }
    findings.push_back({{"id", fd.id},
                        {"cc", fd.cc ? nlohmann::json(fd.cc->str()) : nlohmann::json(nullptr)},
                        {"summary", fd.summary},
                        {"evidence", fd.evidence},
                        {"fixes", fixes},
                        {"notes", fd.notes}});
  }
  nlohmann::json doc = {
      {"python", python},
      {"executable", t.python},
      {"python_version", t.python_version ? nlohmann::json(t.python_version->str()) : nlohmann::json(nullptr)},
      {"torch", torch},
      {"targets", targets},
      {"findings", findings},
      {"notes", r.notes},
      {"ok", r.findings.empty() && !r.targets.empty()},
  };
  doc["driver"] = f.driver_version ? nlohmann::json{{"version", *f.driver_version}, {"source", f.driver_source}}
                                   : nlohmann::json(nullptr);
  doc["toolkit"] = f.toolkit ? nlohmann::json{{"root", f.toolkit->root.string()},
                                              {"version", f.toolkit->version.str()},
                                              {"found_by", f.toolkit->found_by}}
                             : nlohmann::json(nullptr);
  return doc;
}

void print_report(const doctor::Facts& f, const doctor::Report& r, const Context& ctx) {
  const auto& t = f.torch;
  const auto& data = ctx.facts().arch();
  out(fmt::format("python   {}{}", t.python, t.python_version ? " (" + t.python_version->str() + ")" : ""));
  std::string build = t.cuda ? "CUDA " + *t.cuda : t.hip ? "ROCm " + *t.hip : t.version_read ? "CPU only" : "?";
  out(fmt::format("torch    {} ({}) at {}", t.version.empty() ? "?" : t.version, build, t.dir.string()));
  if (t.import_error) out(fmt::format("         import torch failed: {}", *t.import_error));
  if (t.arch_list)
    out(fmt::format("archs    {} ({})", t.arch_list->empty() ? "(none)" : text::join(*t.arch_list, " "),
                    t.arch_list_source));
  else if (t.cuda)
    out(fmt::format("archs    ? ({})", t.arch_list_missing));
  std::vector<const binary::FileReport*> coded;
  for (const auto& file : t.lib_files)
    if (file.has_device_code()) coded.push_back(&file);
  if (!t.lib_inspected)
    out(fmt::format("lib/     not read: {}", t.lib_error));
  else if (coded.empty())
    out("lib/     no device code");
  const std::size_t shown = ctx.verbosity > 0 ? coded.size() : std::min<std::size_t>(coded.size(), 6);
  for (std::size_t i = 0; i < shown; ++i)
    out(fmt::format("{}{}: {}", i == 0 ? "lib/     " : "         ", rel(t, coded[i]->path),
                    text::join(image_names(coded[i]->code_images()), " ")));
  if (shown < coded.size()) out(fmt::format("         … and {} more files with device code (-v lists them)", coded.size() - shown));
  out(f.driver_version ? fmt::format("driver   {} ({})", *f.driver_version, f.driver_source) : "driver   (no GPU detected)");
  if (f.toolkit)
    out(fmt::format("toolkit  CUDA {} at {} ({})", f.toolkit->version.str(), f.toolkit->root.string(), f.toolkit->found_by));
  for (const auto& s : r.targets) {
    std::string result = s.result ? std::string(arch::to_string(*s.result)) : "?";
    if (s.image) result += " (" + s.image->name() + ")";
    out(fmt::format("target   {} ({}) from {}: {}", s.target.cc.str(), data.architecture(s.target.cc), s.target.source,
                    t.cuda || !t.version_read ? result : "no CUDA in this torch"));
  }
  for (const auto& fd : r.findings) {
    out("");
    out(fmt::format("finding  {}: {}", fd.id, fd.summary));
    for (const auto& e : fd.evidence) out("  evidence: " + e);
    for (std::size_t i = 0; i < fd.fixes.size(); ++i) {
      const auto& fx = fd.fixes[i];
      out(fmt::format("  fix {}: {}", i + 1, fx.text));
      if (!fx.command.empty()) out("      $ " + fx.command);
      if (!fx.also.empty()) out("      " + fx.also);
    }
    for (const auto& n : fd.notes) out("  note: " + n);
  }
  if (r.findings.empty() && !r.targets.empty()) {
    out("");
    out("no finding: this torch runs on every target");
  }
}

// No torch to examine: which official wheel to install for the targets, or the build.
void print_without_torch(const app::Diagnosis& d, Context& ctx) {
  const app::InstallAnswer& answer = *d.install;
  const HostTargets& h = answer.host;
  std::string none = fmt::format("no torch is installed for {}", d.python);
  if (ctx.json) {
    auto doc = install_advice_json(answer);
    doc["python"] = d.python;
    doc["torch"] = nullptr;
    doc["install"] = doc["options"];
    print_json(doc);
  } else {
    const std::string where = h.platform_is_this_machine || !h.platform ? std::string("here")
                                                                         : "on the " + h.platform->name + " host";
    out(none + (h.targets.empty() ? "" : ": the official wheels that run " + where + ", newest first"));
    if (!h.targets.empty()) print_install_advice(answer, ctx);
  }
  ctx.exit = answer.exit();
  if (h.targets.empty())
    error_line(ctx, none + "; " + h.no_targets_reason);
  else if (!answer.advice.fits())
    error_line(ctx, none + "; " + answer.advice.build_why + ": only a build helps");
}

void run_doctor(const DoctorArgs& a, Context& ctx) {
  const std::string mirror_url = mirror_url_of(a.mirror);
  const app::Diagnosis d = app::diagnose(a.python, a.targets, ctx.facts(), mirror_url);
  if (d.install) return print_without_torch(d, ctx);
  const doctor::Facts& f = d.facts;
  const doctor::Report& report = *d.report;
  if (ctx.json) {
    auto doc = report_json(f, report, d.python);
    if (d.mirror) doc["mirror"] = view_advice_json(*d.mirror, mirror_url);
    // As every command's failing document: "error" and "exit".
    if (f.targets.empty()) {
      doc["error"] = f.no_targets_reason;
      doc["exit"] = static_cast<int>(Exit::missing_tool);
    } else {
      doc["exit"] = static_cast<int>(report.findings.empty() ? Exit::ok : Exit::not_fine);
      if (!report.findings.empty()) doc["error"] = fmt::format("{} finding(s)", report.findings.size());
    }
    print_json(doc);
  } else {
    print_report(f, report, ctx);
  }
  for (const auto& n : report.notes)
    if (!f.targets.empty()) note(ctx, "note: " + n);
  if (f.targets.empty()) {
    error_line(ctx, f.no_targets_reason);
    ctx.exit = Exit::missing_tool;
    return;
  }
  if (!report.findings.empty()) {
    std::vector<std::string> ids;
    for (const auto& fd : report.findings) ids.push_back(fd.cc ? fd.id + " (" + fd.cc->str() + ")" : fd.id);
    error_line(ctx, fmt::format("{} finding{}: {}", report.findings.size(), report.findings.size() == 1 ? "" : "s",
                                text::join(ids, ", ")));
    ctx.exit = Exit::not_fine;
  }
}

}  // namespace

void add_doctor_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand(
      "doctor", "Diagnose the installed torch against this GPU (or --sm): why \"no kernel image\", and the shortest fix");
  cmd->add_option("--python", args->python, "The interpreter whose torch to examine (default: python3 on PATH)")
      ->type_name("PY");
  add_target_options(*cmd, args->targets);
  add_mirror_option(*cmd, args->mirror, "where the torch cannot run, its GPU view that can is the first fix");
  add_json_flag(*cmd, ctx);
  cmd->footer("Without torch it says which official wheel to install (as install-command). Exit status: 0 no "
              "finding, or an official wheel to install; 1 findings (each with its evidence and fix), or only a build "
              "helps; 2 bad --sm, --gpu or --driver; 3 no interpreter, or no GPU and no --sm / --gpu.");
  cmd->callback([args, &ctx] { run_doctor(*args, ctx); });
}

}  // namespace archbuild::cli
