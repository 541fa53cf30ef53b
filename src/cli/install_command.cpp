// archbuild install-command [--sm LIST | --gpu NAME] [--driver VER] — the pip and uv lines that
// install an official torch wheel running on every GPU of this host (or the named ones) with its
// driver, newest first; when none fits, why, and the `archbuild wheel` command that builds one.
// Also the helpers doctor shares (cli/install_advice.hpp).
#include <fmt/format.h>

#include <map>
#include <memory>
#include <regex>
#include <set>

#include "cli/host.hpp"
#include "cli/install_advice.hpp"
#include "core/text.hpp"
#include "plan/libraries.hpp"
#include "plan/plan.hpp"
#include "plan/resolve.hpp"
#include "prepare/prepare.hpp"
#include "run/capture.hpp"
#include "validate/coverage.hpp"

namespace archbuild::cli {

namespace {

// --gpu NAME: one CC (and the platform the GPUs of that name sit on), or bad input naming the
// candidates.
std::pair<arch::Cc, std::string> gpu_cc(const std::string& name, const arch::ArchData& data) {
  auto gpus = data.match_gpus(name);
  if (gpus.empty())
    throw Failure(Error::bad_input(fmt::format("--gpu {}: no GPU of that name in data/gpus.toml; closest: {} (or give --sm)",
                                               text::quoted(name, 200), text::join(data.nearest_gpu_names(name, 5), ", "))));
  std::map<arch::Cc, std::vector<std::string>> by_cc;
  for (const auto* g : gpus) by_cc[g->cc].push_back(g->name);
  if (by_cc.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [cc, names] : by_cc) parts.push_back(fmt::format("{} ({})", text::join(names, ", "), cc.str()));
    throw Failure(Error::bad_input(
        fmt::format("--gpu {}: matches GPUs of different CCs: {}; name one exactly or give --sm", text::quoted(name, 200),
                    text::join(parts, "; "))));
  }
  // A platform only when every match agrees (GB200 is sbsa; "B200" matches x86 cards too).
  std::string platform = gpus.front()->platform;
  for (const auto* g : gpus)
    if (g->platform != platform) platform.clear();
  return {by_cc.begin()->first, platform};
}

std::string verdict_text(const std::vector<arch::Cc>& ccs, const std::vector<arch::RunVerdict>& vs) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < ccs.size() && i < vs.size(); ++i)
    parts.push_back(fmt::format("{} {} on {}", vs[i].image ? vs[i].image->name() : "?", arch::to_string(vs[i].result),
                                ccs[i].str()));
  return text::join(parts, ", ");
}

}  // namespace

toolchain::Probe tool_probe() {
  return [](const std::vector<std::string>& argv) -> Result<toolchain::ProbeOutput> {
    run::CaptureOptions o;
    o.timeout = std::chrono::seconds(30);
    auto c = run::capture(argv, o);
    if (!c) return c.error();
    return toolchain::ProbeOutput{c->timed_out ? -1 : c->status, c->out, c->err};
  };
}

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

HostTargets gather_targets(const TargetArgs& a, const arch::ArchData& data) {
  HostTargets h;
  if (!a.sm.empty()) {
    auto parsed = parse_targets(a.sm, data);
    if (!parsed)
      throw Failure(Error{parsed.error().exit, parsed.error().message.starts_with("--sm")
                                                   ? parsed.error().message
                                                   : "--sm: " + parsed.error().message});
    for (auto cc : validate::target_ccs(*parsed)) h.targets.push_back({cc, "--sm"});
  }
  std::vector<toolchain::PlatformGpu> platform_gpus;
  for (const auto& t : h.targets) platform_gpus.push_back({t.cc, "", fmt::format("--sm {}", t.cc.str())});
  for (const auto& g : a.gpu) {
    auto [cc, platform] = gpu_cc(g, data);
    h.targets.push_back({cc, "--gpu " + g});
    platform_gpus.push_back({cc, platform, "--gpu " + g});
  }
  if (!a.driver.empty()) {
    if (!Version::parse(a.driver))
      throw Failure(Error::bad_input(fmt::format("--driver {}: not a driver version like 570.86 or 580.65.06", a.driver)));
    h.driver = a.driver;
    h.driver_source = "--driver";
  }
  if (!a.jetpack.empty()) {
    auto j = toolchain::JetPacks::shipped().find(a.jetpack);
    if (!j) throw Failure(j.error());
    if (!a.platform.empty() && a.platform != j->platform)
      throw Failure(Error::bad_input(fmt::format("--jetpack {} is platform {} (toolchains/jetpack.toml), not --platform {}",
                                                 a.jetpack, j->platform, a.platform)));
    h.jetpack = *j;
    h.jetpack_why = "--jetpack";
  }
  auto decide_platform = [&] {
    // The JetPack must support every GPU asked about (JetPack 7 is Thor's only; Orin stays on 6).
    if (h.jetpack)
      for (const auto& t : h.targets)
        if (!h.jetpack->supports(t.cc))
          throw Failure(Error::bad_input(fmt::format("--jetpack {}: JetPack {} supports CC {} only ({}), not {} ({})",
                                                     a.jetpack, h.jetpack->version.str(), h.jetpack->ccs_text(),
                                                     h.jetpack->url, t.cc.str(), t.source)));
    const auto& ps = toolchain::Platforms::shipped();
    auto machine = toolchain::this_machine();
    std::optional<std::string> asked;
    if (!a.platform.empty()) asked = a.platform;
    else if (h.jetpack) asked = h.jetpack->platform;
    auto c = toolchain::choose_platform(ps, asked, platform_gpus, machine);
    if (!c) throw Failure(c.error());
    h.platform = *c->platform;
    h.platform_why = a.platform.empty() && h.jetpack ? fmt::format("--jetpack {} (toolchains/jetpack.toml)", a.jetpack) : c->why;
    const auto* own = ps.default_for(machine.arch, machine.tegra);
    h.platform_is_this_machine = own && own->name == c->platform->name;
    // A Jetson elsewhere builds with its JetPack's CUDA, not with this machine's toolkit.
    if (!h.jetpack && !h.platform_is_this_machine && !h.platform->pip_cuda && !h.targets.empty()) {
      std::vector<arch::Cc> ccs;
      for (const auto& t : h.targets) ccs.push_back(t.cc);
      const auto& jps = toolchain::JetPacks::shipped();
      if (const auto* j = jps.newest_for(h.platform->name, ccs)) {
        h.jetpack = *j;
        h.jetpack_why = fmt::format("the newest JetPack for CC {} of platform {} ({}); --jetpack names another",
                                    j->ccs_text(), h.platform->name, jps.file.filename().string());
      } else {
        std::vector<std::string> names;
        for (const auto& cc : ccs) names.push_back(cc.str());
        h.jetpack_missing = fmt::format("no JetPack release of {} for platform {} supports CC {}: the CUDA the Jetson "
                                        "has is unknown here; run archbuild on the Jetson itself, where its toolkit decides",
                                        jps.file.filename().string(), h.platform->name, text::join(names, ", "));
      }
    }
  };
  if (!h.targets.empty() && h.driver) {  // nothing left to detect
    decide_platform();
    return h;
  }
  auto d = detect_host(data);
  if (!h.driver) {
    if (!d.gpus.empty() && !d.driver_version.empty()) {
      h.driver = d.driver_version;
      h.driver_source = d.source;
    } else {
      h.driver_missing = d.gpus.empty() ? "no GPU detected on this host" : d.source + " reported no driver version";
    }
  }
  if (h.targets.empty()) {
    for (const auto& g : d.gpus) {
      h.targets.push_back({g.cc, fmt::format("GPU {}: {}", g.index, g.name)});
      const auto* known = data.identify(g.name);
      platform_gpus.push_back({g.cc, known ? known->platform : "", fmt::format("GPU {}: {}", g.index, g.name)});
    }
    if (d.gpus.empty())
      h.no_targets_reason = fmt::format("no GPU found on this host ({}); give --sm or --gpu to ask about one, e.g. --sm 90",
                                        text::join(d.tried, "; "));
  }
  decide_platform();
  return h;
}

namespace {

// This machine's libraries for the resolved recipe, as `plan` decides them (a file-system probe,
// no process): the choices the advice must mention — a preferred provider used or passed over
// (BLAS=NVPL on sbsa) and an expected library missing.
std::vector<std::string> library_lines(const plan::Resolution& r) {
  std::vector<std::string> lines;
  auto facts = prepare::gather_libraries(r, {}, {});
  if (!facts) return {"libraries not probed: " + facts.error().message};
  plan::PlanOptions po;
  po.library_facts = std::move(*facts);
  auto draft = plan::make_plan(r, po);
  if (!draft) return {"libraries not planned: " + draft.error().message};
  for (const auto& c : (*draft)->libraries.choices)
    if (!c.note.empty() || (c.expected && c.state == plan::LibraryState::missing))
      lines.push_back(std::regex_replace(text::trim(plan::describe(c)), std::regex("  +"), " "));  // no column padding
  return lines;
}

}  // namespace

doctor::BuildAdvisor make_build_advisor(const std::vector<toolchain::Toolchain>& toolchains,
                                        std::optional<Version> python, const std::string& platform,
                                        const std::optional<toolchain::JetPack>& jetpack,
                                        const std::string& cuda_unknown) {
  // Discovered on the first question only (a run that needs no build never starts those probes).
  struct Lazy {
    bool tried = false;
    std::optional<plan::Inputs> inputs;
    std::string error;
  };
  auto lazy = std::make_shared<Lazy>();
  return [lazy, toolchains, python, platform, jetpack, cuda_unknown](
             const std::vector<arch::Cc>& ccs, const std::optional<Version>& line,
             const std::optional<Version>& cuda) -> doctor::BuildSuggestion {
    doctor::BuildSuggestion s;
    if (!cuda_unknown.empty()) {
      s.detail = cuda_unknown;
      return s;
    }
    if (!lazy->tried) {
      lazy->tried = true;
      auto recipes = plan::select_recipes(std::nullopt);
      if (!recipes) {
        lazy->error = recipes.error().message;
      } else {
        plan::Inputs in;
        in.recipes = std::move(*recipes);
        in.toolchains = toolchains;
        std::set<std::string> tools;
        for (const auto& r : in.recipes)
          for (const auto& t : plan::required_tools(r)) tools.insert(t);
        in.host = toolchain::discover_host(toolchain::HostEnv::current(), tool_probe(),
                                           std::vector<std::string>(tools.begin(), tools.end()), python);
        lazy->inputs = std::move(in);
      }
    }
    if (!lazy->inputs) {
      s.detail = lazy->error;
      return s;
    }
    plan::Request req;
    for (const auto& cc : ccs) req.targets.push_back({cc, arch::Variant::none, true, false, std::nullopt});
    req.torch = line;
    req.python = python;
    req.recipe_label = "the torch recipes";
    if (!platform.empty()) req.platform = platform;
    // A Jetson's CUDA: JetPack's on another machine; here, the installed toolkit's, else JetPack's.
    std::optional<toolchain::JetsonBuildCuda> jetson;
    if (jetpack) jetson = toolchain::jetson_build_cuda(*jetpack, platform.empty(), lazy->inputs->host.toolkits.size());
    const bool by_jetpack = jetson && !platform.empty();
    if (jetson) req.cuda = jetson->cuda;
    else if (cuda) req.cuda = cuda;
    const std::string cuda_option = !jetson && cuda ? " --cuda " + cuda->str() : "";
    auto r = plan::resolve(req, *lazy->inputs);
    if (r.status == Exit::bad_input) {
      s.detail = jetson ? jetson->why + ": " + r.message : r.message;
      return s;
    }
    s.ok = true;
    s.recipe = r.recipe.name;
    s.cuda = r.toolchain.cuda;
    s.command = fmt::format("archbuild wheel --sm {} --recipe {}{}{}", doctor::sm_option(ccs), r.recipe.name,
                            jetson ? " --cuda " + jetson->cuda.str() : cuda_option,
                            python ? " --python " + python->str() : "");
    s.detail = fmt::format("torch {} with CUDA {}", r.recipe.version.str(), r.toolchain.cuda.str());
    if (jetson && !by_jetpack) s.detail += ", as " + jetson->why;
    if (by_jetpack) {
      const std::string& jetpack_says = jetson->why;
      s.command = fmt::format("archbuild wheel --sm {} --recipe {} --cuda {} --platform {}{}", doctor::sm_option(ccs),
                              r.recipe.name, jetpack->cuda.str(), platform, python ? " --python " + python->str() : "");
      s.detail = fmt::format("torch {} with CUDA {} on the Jetson, as {}", r.recipe.version.str(), r.toolchain.cuda.str(),
                             jetpack_says);
      return s;  // this machine's missing tools are not that host's
    }
    if (!platform.empty()) {
      // Another machine's platform: its own toolkit (a Jetson's is JetPack's) picks the recipe
      // there, so the command names none (--jetpack names it); this host's resolution is only an example.
      s.command = fmt::format("archbuild wheel --sm {} --platform {}{}{}", doctor::sm_option(ccs), platform, cuda_option,
                              python ? " --python " + python->str() : "");
      s.detail = fmt::format("on a {} host, with the recipe its installed CUDA toolkit allows (the newest that "
                             "resolves: torch {} with CUDA {})",
                             platform, r.recipe.version.str(), r.toolchain.cuda.str());
      return s;  // this machine's missing tools are not that host's
    }
    if (r.status != Exit::ok) s.needs = r.message;
    s.libraries = library_lines(r);
    return s;
  };
}

nlohmann::json install_advice_json(const doctor::InstallAdvice& a, const HostTargets& h) {
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
  const Exit exit = install_advice_exit(a, h);
  doc["exit"] = static_cast<int>(exit);
  if (h.targets.empty()) doc["error"] = h.no_targets_reason;
  else if (exit != Exit::ok) doc["error"] = a.build_why;
  return doc;
}

void print_install_advice(const doctor::InstallAdvice& a, const HostTargets& h, const Context& ctx) {
  const auto& data = arch::ArchData::shipped();
  for (const auto& t : h.targets)
    out(fmt::format("target   {} ({}) from {}", t.cc.str(), data.architecture(t.cc), t.source));
  out(h.driver ? fmt::format("driver   {} ({})", *h.driver, h.driver_source)
               : fmt::format("driver   ? ({})", h.driver_missing.empty() ? "not given" : h.driver_missing));
  if (h.platform) out(fmt::format("platform {} ({}) from {}", h.platform->name, h.platform->description, h.platform_why));
  if (h.jetpack)
    out(fmt::format("jetpack  {} (L4T {}, CUDA {}) from {}", h.jetpack->version.str(), h.jetpack->l4t.str(),
                    h.jetpack->cuda.str(), h.jetpack_why));
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

Exit install_advice_exit(const doctor::InstallAdvice& a, const HostTargets& h) {
  if (h.targets.empty()) return Exit::missing_tool;
  return a.fits() ? Exit::ok : Exit::not_fine;
}

namespace {

struct InstallArgs {
  TargetArgs targets;
  std::string python;
};

void run_install_command(const InstallArgs& a, Context& ctx) {
  const auto& data = arch::ArchData::shipped();
  auto h = gather_targets(a.targets, data);
  doctor::InstallQuery q;
  q.targets = h.targets;
  q.driver = h.driver;
  q.driver_source = h.driver_source;
  q.releases = doctor::Releases::load_shipped(data).take();
  q.toolchains = toolchain::load_shipped(data).take();
  q.pip = a.python.empty() ? "pip" : a.python + " -m pip";
  q.platform = h.platform;
  q.platform_why = h.platform_why;
  q.platform_is_this_machine = h.platform_is_this_machine;
  auto advice = doctor::advise_install(
      q, make_build_advisor(q.toolchains, std::nullopt, h.platform_is_this_machine ? "" : h.platform->name, h.jetpack,
                            h.jetpack_missing));
  if (ctx.json)
    print_json(install_advice_json(advice, h));
  else if (!h.targets.empty())
    print_install_advice(advice, h, ctx);
  ctx.exit = install_advice_exit(advice, h);
  if (h.targets.empty()) error_line(ctx, h.no_targets_reason);
  else if (!advice.fits()) error_line(ctx, advice.build_why);
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
  add_json_flag(*cmd, ctx);
  cmd->footer("Exit status: 0 an official wheel fits; 1 only a build helps (the command is printed); 2 bad --sm, "
              "--gpu, --driver or --platform; 3 no GPU found and no --sm / --gpu.");
  cmd->callback([args, &ctx] { run_install_command(*args, ctx); });
}

}  // namespace archbuild::cli
