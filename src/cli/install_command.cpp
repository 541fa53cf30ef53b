// archbuild install-command [--sm LIST | --gpu NAME] [--driver VER] — the pip and uv lines that
// install an official torch wheel running on every GPU of this host (or the named ones) with its
// driver, newest first; when none fits, why, and the `archbuild wheel` command that builds one.
// Also the helpers doctor shares (cli/install_advice.hpp).
#include <fmt/format.h>

#include <map>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "cli/install_advice.hpp"
#include "core/text.hpp"
#include "mirror/mirror.hpp"
#include "mirror/views.hpp"

namespace archbuild::cli {

namespace {

std::string verdict_text(const std::vector<arch::Cc>& ccs, const std::vector<arch::RunVerdict>& vs) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < ccs.size() && i < vs.size(); ++i)
    parts.push_back(fmt::format("{} {} on {}", vs[i].image ? vs[i].image->name() : "?", arch::to_string(vs[i].result),
                                ccs[i].str()));
  return text::join(parts, ", ");
}

}  // namespace

void add_target_options(CLI::App& cmd, TargetArgs& args) {
  cmd.add_option("--sm", args.sm, "These CCs instead of this host's GPUs: 61, 9.0, sm_120, 89,90")->type_name("LIST");
  cmd.add_option("--gpu", args.gpu, "A GPU by name instead of this host's: \"RTX 5090\", \"GTX 1080 Ti\" (repeatable)")
      ->type_name("NAME")->check(name_check());
  cmd.add_option("--driver", args.driver, "The NVIDIA driver to advise for instead of the detected one: 570.86")
      ->type_name("VER")->check(driver_version_check());
  cmd.add_option("--platform", args.platform,
                 "The platform to advise for (toolchains/platforms.toml: x86_64, sbsa, jetson); default: the one the "
                 "GPUs sit on, else this machine's")
      ->type_name("NAME");
  cmd.add_option("--jetpack", args.jetpack,
                 "The JetPack release of the Jetson advised for (toolchains/jetpack.toml: 6.2 is CUDA 12.6): its CUDA "
                 "names the recipe of the build, its platform the platform")
      ->type_name("VER");
}

nlohmann::json install_advice_json(const app::InstallAnswer& answer) {
  const doctor::InstallAdvice& a = answer.advice;
  const HostTargets& h = answer.host;
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& t : h.targets)
    targets.push_back({{"cc", t.cc.str()}, {"sm", fmt::format("sm_{}", t.cc.sm())}, {"source", t.source}});
  nlohmann::json options = nlohmann::json::array();
  for (const auto& o : a.options) {
    nlohmann::json per = nlohmann::json::array();
    for (std::size_t i = 0; i < a.ccs.size() && i < o.verdicts.size(); ++i)
      per.push_back({{"cc", a.ccs[i].str()},
                     {"result", arch::to_string(o.verdicts[i].result)},
                     {"image", o.verdicts[i].image ? nlohmann::json(o.verdicts[i].image->name()) : nlohmann::json(nullptr)}});
    auto opt = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
    options.push_back({{"torch", o.version},
                       {"line", o.line.str()},
                       {"cuda", o.cuda.str()},
                       {"variant", o.cu},
                       {"index_url", o.index_url},
                       {"arch_list", o.arch_list},
                       {"sass", o.sass},
                       {"runs", per},
                       {"driver_min_start", opt(o.driver_start)},
                       {"driver_min_full", opt(o.driver_full)},
                       {"torchvision", opt(o.torchvision)},
                       {"torchaudio", opt(o.torchaudio)},
                       {"pip", o.pip},
                       {"uv", o.uv}});
  }
  nlohmann::json doc = {
      {"targets", targets},
      {"driver", h.driver ? nlohmann::json{{"version", *h.driver}, {"source", h.driver_source}} : nlohmann::json(nullptr)},
      {"platform", h.platform ? nlohmann::json{{"name", h.platform->name},
                                               {"machine", h.platform->machine},
                                               {"wheel_arch", h.platform->wheel_arch},
                                               {"cuda_libraries", h.platform->pip_cuda ? "pip" : "host"},
                                               {"why", h.platform_why},
                                               {"this_machine", h.platform_is_this_machine}}
                              : nlohmann::json(nullptr)},
      {"jetpack", h.jetpack ? nlohmann::json{{"version", h.jetpack->version.str()},
                                             {"l4t", h.jetpack->l4t.str()},
                                             {"cuda", h.jetpack->cuda.str()},
                                             {"platform", h.jetpack->platform},
                                             {"ubuntu", h.jetpack->ubuntu.empty() ? nlohmann::json(nullptr)
                                                                                  : nlohmann::json(h.jetpack->ubuntu)},
                                             {"url", h.jetpack->url},
                                             {"why", h.jetpack_why}}
                            : nlohmann::json(nullptr)},
      {"options", options},
      {"ruled_out", a.ruled_out},
      {"notes", a.notes},
      {"ok", a.fits()},
  };
  if (a.build) {
    doc["build"] = {{"why", a.build_why},
                    {"ok", a.build->ok},
                    {"command", a.build->ok ? nlohmann::json(a.build->command) : nlohmann::json(nullptr)},
                    {"recipe", a.build->ok ? nlohmann::json(a.build->recipe) : nlohmann::json(nullptr)},
                    {"detail", a.build->detail}};
    if (!a.build->needs.empty()) doc["build"]["needs"] = a.build->needs;
    doc["build"]["libraries"] = a.build->libraries;
  } else {
    doc["build"] = nullptr;
  }
  // As every command's failing document: "error" and "exit".
  const Exit exit = answer.exit();
  doc["exit"] = static_cast<int>(exit);
  if (h.targets.empty()) doc["error"] = h.no_targets_reason;
  else if (exit != Exit::ok) doc["error"] = a.build_why;
  return doc;
}

void print_install_advice(const app::InstallAnswer& answer, const Context& ctx) {
  const doctor::InstallAdvice& a = answer.advice;
  const HostTargets& h = answer.host;
  const auto& data = ctx.facts().arch();
  for (const auto& t : h.targets)
    out(fmt::format("target   {} ({}) from {}", t.cc.str(), data.architecture(t.cc), t.source));
  out(h.driver ? fmt::format("driver   {} ({})", *h.driver, h.driver_source)
               : fmt::format("driver   ? ({})", h.driver_missing.empty() ? "not given" : h.driver_missing));
  if (h.platform) out(fmt::format("platform {} ({}) from {}", h.platform->name, h.platform->description, h.platform_why));
  if (h.jetpack)
    out(fmt::format("jetpack  {} (L4T {}, CUDA {}, platform {}) from {}", h.jetpack->version.str(), h.jetpack->l4t.str(),
                    h.jetpack->cuda.str(), h.jetpack->platform, h.jetpack_why));
  if (!a.options.empty()) {
    const auto& o = a.options.front();
    out("");
    out(fmt::format("install  torch {} built with CUDA {} ({}): {}", o.version, o.cuda.str(), o.cu,
                    verdict_text(a.ccs, o.verdicts)));
    out(fmt::format("         its arch list {}; needs driver >= {}{}", o.arch_list, o.driver_start,
                    o.driver_full.empty() || o.driver_full == o.driver_start
                        ? ""
                        : fmt::format(" (CUDA {} asks {}; older ones start it through minor-version compatibility)",
                                      o.cuda.str(), o.driver_full)));
    if (o.torchvision.empty() && o.torchaudio.empty())
      out(fmt::format("         no torchvision / torchaudio release is confirmed for torch {}", o.line.str()));
    out("  pip:   " + o.pip);
    out("  uv:    " + o.uv);
    // The other fitting wheels, one line per release, newest first.
    std::vector<std::string> others;
    std::map<std::string, std::vector<std::string>> by_line;
    std::vector<std::string> order;
    for (std::size_t i = 1; i < a.options.size(); ++i) {
      const auto& x = a.options[i];
      std::string key = x.version + (x.sass ? "" : " (PTX JIT)");
      if (!by_line.count(key)) order.push_back(key);
      by_line[key].push_back(x.cu);
    }
    for (const auto& k : order) others.push_back(fmt::format("{} ({})", k, text::join(by_line[k], ", ")));
    const std::size_t shown = ctx.verbosity > 0 ? others.size() : std::min<std::size_t>(others.size(), 6);
    if (!others.empty())
      out(fmt::format("also     torch {}{}", text::join(std::vector<std::string>(others.begin(), others.begin() + shown), ", "),
                      shown < others.size() ? fmt::format(" … and {} older (-v)", others.size() - shown) : ""));
  }
  for (const auto& r : a.ruled_out) out("not      " + r);
  if (a.build) {
    out("");
    if (a.build->ok) {
      out(fmt::format("build    {}: archbuild builds {} for {}{}", a.build_why, a.build->detail, doctor::sm_option(a.ccs),
                      a.build->needs.empty() ? "" : "; first: " + a.build->needs));
      out("  $ " + a.build->command);
      for (const auto& l : a.build->libraries) out("  library " + l);
    } else {
      out(fmt::format("build    {}; no recipe builds one here: {}", a.build_why, a.build->detail));
    }
  }
  for (const auto& n : a.notes) note(ctx, "note: " + n);
}

std::string mirror_url_of(const std::string& option) {
  if (!option.empty()) return option;
  const char* env = std::getenv("ARCHBUILD_MIRROR");
  return env ? env : "";
}

void add_mirror_option(CLI::App& cmd, std::string& url, const std::string& what) {
  cmd.add_option("--mirror", url,
                 "An archbuild mirror (file://DIR, DIR or http(s)://HOST/PATH; default: $ARCHBUILD_MIRROR): " + what +
                     " (docs/mirror.md)")
      ->type_name("URL");
}

nlohmann::json view_advice_json(const mirror::ViewAdvice& m, const std::string& url) {
  auto opt = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"url", url}, {"ok", m.ok}, {"checked", m.checked}, {"view", opt(m.view)}, {"index_url", opt(m.index_url)},
          {"projects", m.projects}, {"pip", opt(m.pip)}, {"why", opt(m.why)}};
}

namespace {

struct InstallArgs {
  TargetArgs targets;
  std::string python;
  std::string mirror;  // --mirror URL, else $ARCHBUILD_MIRROR: an archbuild mirror's GPU views
};

void run_install_command(const InstallArgs& a, Context& ctx) {
  const std::string pip = a.python.empty() ? "pip" : a.python + " -m pip";
  const std::string mirror_url = mirror_url_of(a.mirror);
  const app::InstallAnswer answer = app::advise_install(a.targets, pip, ctx.facts(), mirror_url);
  const std::optional<mirror::ViewAdvice>& from_mirror = answer.mirror;
  if (ctx.json) {
    auto doc = install_advice_json(answer);
    if (from_mirror) {
      doc["mirror"] = view_advice_json(*from_mirror, mirror_url);
      doc["exit"] = static_cast<int>(from_mirror->ok ? Exit::ok : Exit::not_fine);
    }
    print_json(doc);
  } else if (!answer.host.targets.empty()) {
    print_install_advice(answer, ctx);
    if (from_mirror) {
      out("");
      if (from_mirror->ok) {
        out(fmt::format("mirror   view {} of {}{}", from_mirror->view, mirror_url,
                        from_mirror->checked ? ": " + text::join(from_mirror->projects, ", ") : " (" + from_mirror->why + ")"));
        out("  pip:   " + from_mirror->pip);
      } else {
        out(fmt::format("mirror   {}: {}", mirror_url, from_mirror->why));
      }
    }
  }
  ctx.exit = answer.exit();
  // --mirror asks for the mirror's build: its answer decides.
  if (from_mirror) {
    ctx.exit = from_mirror->ok ? Exit::ok : Exit::not_fine;
    if (!from_mirror->ok) error_line(ctx, "--mirror: " + from_mirror->why);
    return;
  }
  if (answer.host.targets.empty()) error_line(ctx, answer.host.no_targets_reason);
  else if (!answer.advice.fits()) error_line(ctx, answer.advice.build_why);
}

}  // namespace

void add_install_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<InstallArgs>();
  auto* cmd = app.add_subcommand(
      "install-command",
      "The pip / uv command that installs an official torch wheel running on this host's GPUs (or --sm / --gpu) "
      "with its driver; or the archbuild wheel command when none does");
  add_target_options(*cmd, args->targets);
  cmd->add_option("--python", args->python, "Write the pip command as `PY -m pip` (default: pip)")->type_name("PY");
  add_mirror_option(*cmd, args->mirror, "the pip command for its GPU view that runs on these GPUs");
  add_json_flag(*cmd, ctx);
  cmd->footer("Exit status: 0 an official wheel fits (with --mirror: a view of the mirror runs on the GPUs); 1 only a "
              "build helps (the command is printed; with --mirror: no view runs on them); 2 bad --sm, --gpu, --driver, "
              "--platform or --mirror; 3 no GPU found and no --sm / --gpu.");
  cmd->callback([args, &ctx] { run_install_command(*args, ctx); });
}

}  // namespace archbuild::cli
