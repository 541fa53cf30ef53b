#include "app/advise.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "app/inputs.hpp"
#include "app/torch.hpp"
#include "core/text.hpp"
#include "plan/libraries.hpp"
#include "plan/plan.hpp"
#include "plan/resolve.hpp"
#include "prepare/prepare.hpp"
#include "validate/coverage.hpp"

namespace archbuild::app {

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

// This machine's libraries for the resolved recipe, as `plan` decides them (a file-system probe,
// no process): the choices the advice must mention — a preferred provider used or passed over
// (BLAS=NVPL on sbsa) and an expected library missing.
std::vector<std::string> library_lines(const plan::Resolution& r, const Facts& data) {
  std::vector<std::string> lines;
  auto facts = prepare::gather_libraries(r, data.library_specs(), {}, {});
  if (!facts) return {"libraries not probed: " + facts.error().message};
  plan::PlanOptions po;
  po.library_specs = &data.library_specs();
  po.library_facts = std::move(*facts);
  auto draft = plan::make_plan(r, po);
  if (!draft) return {"libraries not planned: " + draft.error().message};
  for (const auto& c : (*draft)->libraries.choices)
    if (!c.note.empty() || (c.expected && c.state == plan::LibraryState::missing))
      lines.push_back(std::regex_replace(text::trim(plan::describe(c)), std::regex("  +"), " "));  // no column padding
  return lines;
}

}  // namespace

HostTargets gather_targets(const TargetArgs& a, const Facts& facts) {
  const arch::ArchData& data = facts.arch();
  HostTargets h;
  if (!a.sm.empty()) {
    auto parsed = sm_targets(a.sm, data).take();
    for (auto cc : validate::target_ccs(parsed)) h.targets.push_back({cc, "--sm"});
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
    auto j = facts.jetpacks().find(a.jetpack);
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
    const auto& ps = facts.platforms();
    const auto& jps = facts.jetpacks();
    auto machine = toolchain::this_machine(jps);
    std::optional<std::string> asked;
    if (!a.platform.empty()) asked = a.platform;
    else if (h.jetpack) asked = h.jetpack->platform;
    // GPUs asked about that several platforms have (Orin: jetson under JetPack 5/6, sbsa under 7.2)
    // from a machine that is no Jetson: the newest JetPack for them decides, and the other path is
    // said (a Jetson asks about itself: its own L4T release decides, as this machine's platform).
    bool by_newest_jetpack = false;
    if (!asked && (!a.sm.empty() || !a.gpu.empty()) && !machine.tegra && !h.targets.empty()) {
      bool decided = false, shared = false;
      for (const auto& g : platform_gpus) {
        if (!g.platform.empty() || ps.owner_of(g.cc)) decided = true;
        if (ps.owners_of(g.cc).size() > 1) shared = true;
      }
      std::vector<arch::Cc> ccs;
      for (const auto& t : h.targets) ccs.push_back(t.cc);
      if (const auto* j = !decided && shared ? jps.newest_for(ccs) : nullptr) {
        h.jetpack = *j;
        asked = j->platform;
        by_newest_jetpack = true;
        std::vector<std::string> names;
        for (const auto& cc : ccs) names.push_back(cc.str());
        h.jetpack_why = fmt::format("the newest JetPack for CC {} ({}); --jetpack names another",
                                    text::join(names, ", "), jps.file.filename().string());
        std::vector<std::string> others;
        for (const auto& p : ps.list)
          if (p.name != j->platform)
            if (const auto* o = jps.newest_for(p.name, ccs))
              others.push_back(fmt::format("--jetpack {} (platform {}, CUDA {})", o->version.str(), o->platform,
                                           o->cuda.str()));
        if (!others.empty())
          h.jetpack_other = fmt::format("advice for JetPack {} (platform {}, CUDA {}), the newest for these GPUs; for a "
                                        "Jetson kept on an older JetPack give {}",
                                        j->version.str(), j->platform, j->cuda.str(), text::join(others, " or "));
      }
    }
    auto c = toolchain::choose_platform(ps, asked, platform_gpus, machine);
    if (!c) throw Failure(c.error());
    h.platform = *c->platform;
    h.platform_why = by_newest_jetpack ? fmt::format("the newest JetPack for the GPUs asked about: {} (toolchains/jetpack.toml)",
                                                     h.jetpack->version.str())
                     : a.platform.empty() && h.jetpack ? fmt::format("--jetpack {} (toolchains/jetpack.toml)", a.jetpack)
                                                       : c->why;
    const auto* own = toolchain::default_platform(ps, machine);
    // A Jetson the newest JetPack was assumed for is another machine, whatever platform this one is.
    h.platform_is_this_machine = !by_newest_jetpack && own && own->name == c->platform->name;
    // A Jetson elsewhere builds with its JetPack's CUDA, not with this machine's toolkit.
    if (!h.jetpack && !h.platform_is_this_machine && !h.platform->pip_cuda && !h.targets.empty()) {
      std::vector<arch::Cc> ccs;
      for (const auto& t : h.targets) ccs.push_back(t.cc);
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

doctor::BuildAdvisor make_build_advisor(const Facts& facts, std::optional<Version> python, const std::string& platform,
                                        const std::optional<toolchain::JetPack>& jetpack,
                                        const std::string& cuda_unknown) {
  // Discovered on the first question only (a run that needs no build never starts those probes).
  struct Lazy {
    bool tried = false;
    std::optional<plan::Inputs> inputs;
    std::string error;
  };
  auto lazy = std::make_shared<Lazy>();
  // `facts` outlives the advisor: both live for the one advice or diagnosis they serve.
  return [lazy, facts = &facts, python, platform, jetpack, cuda_unknown](
             const std::vector<arch::Cc>& ccs, const std::optional<Version>& line,
             const std::optional<Version>& cuda) -> doctor::BuildSuggestion {
    doctor::BuildSuggestion s;
    if (!cuda_unknown.empty()) {
      s.detail = s.reason = cuda_unknown;
      return s;
    }
    if (!lazy->tried) {
      lazy->tried = true;
      auto recipes = plan::select_recipes(std::nullopt, facts->recipes(), facts->search());
      if (!recipes) {
        lazy->error = recipes.error().message;
      } else {
        lazy->inputs = discover_inputs(*facts, std::move(*recipes), tool_probe(), python);
      }
    }
    if (!lazy->inputs) {
      s.detail = s.reason = lazy->error;
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
      s.reason = jetson ? jetson->why + ": " + r.reason : r.reason;
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
    s.libraries = library_lines(r, *facts);
    return s;
  };
}

Exit InstallAnswer::exit() const {
  if (host.targets.empty()) return Exit::missing_tool;
  return advice.fits() ? Exit::ok : Exit::not_fine;
}

namespace {
// The mirror's view for the targets' CCs, each once (mirror::advise_view).
mirror::ViewAdvice view_for(const std::vector<doctor::Target>& targets, const std::string& url, const std::string& pip,
                            const Facts& facts) {
  std::vector<arch::Cc> ccs;
  for (const auto& t : targets)
    if (std::find(ccs.begin(), ccs.end(), t.cc) == ccs.end()) ccs.push_back(t.cc);
  auto advice = mirror::advise_view(url, ccs, pip, facts.arch());
  if (!advice) throw Failure(advice.error().with_context("--mirror"));
  return std::move(*advice);
}
}  // namespace

InstallAnswer advise_install(const HostTargets& h, const std::string& pip, const Facts& facts,
                             const std::string& mirror_url) {
  doctor::InstallQuery q;
  q.targets = h.targets;
  q.driver = h.driver;
  q.driver_source = h.driver_source;
  q.releases = facts.releases();
  q.toolchains = facts.toolchains();
  q.pip = pip;
  q.platform = h.platform;
  q.platform_why = h.platform_why;
  q.platform_is_this_machine = h.platform_is_this_machine;
  auto advice = doctor::advise_install(
      q, make_build_advisor(facts, std::nullopt, h.platform_is_this_machine ? "" : h.platform->name, h.jetpack,
                            h.jetpack_missing));
  if (!h.jetpack_other.empty()) advice.notes.push_back(h.jetpack_other);
  InstallAnswer out{h, std::move(advice), std::nullopt};
  if (!mirror_url.empty() && !h.targets.empty()) out.mirror = view_for(h.targets, mirror_url, pip, facts);
  return out;
}

InstallAnswer advise_install(const TargetArgs& args, const std::string& pip, const Facts& facts,
                             const std::string& mirror_url) {
  return advise_install(gather_targets(args, facts), pip, facts, mirror_url);
}

namespace {
// The findings that say the torch cannot run on a target: what a GPU view of a mirror answers.
bool cannot_run(const doctor::Finding& fd) { return fd.id == "no-kernel-image" || fd.id == "cpu-only"; }

void mirror_fixes(Diagnosis& d, const std::string& url, const Facts& facts) {
  d.mirror = view_for(d.facts.targets, url, d.facts.pip, facts);
  const auto& m = *d.mirror;
  std::vector<std::string> cc_names;
  for (const auto& t : d.facts.targets)
    if (std::find(cc_names.begin(), cc_names.end(), t.cc.str()) == cc_names.end()) cc_names.push_back(t.cc.str());
  for (auto& fd : d.report->findings) {
    if (!cannot_run(fd)) continue;
    if (!m.ok) {
      fd.notes.push_back(fmt::format("the mirror {} has no build for these GPUs: {}", url, m.why));
      continue;
    }
    doctor::Fix fx;
    fx.kind = "mirror";
    fx.text = m.checked ? fmt::format("install from the mirror's GPU view {} ({}), whose builds run on CC {}", m.view,
                                      text::join(m.projects, ", "), text::join(cc_names, ", "))
                        : fmt::format("install from the mirror's GPU view {} ({})", m.view, m.why);
    fx.command = m.pip;
    fd.fixes.insert(fd.fixes.begin(), fx);
  }
}
}  // namespace

Diagnosis diagnose(const std::string& python_arg, const TargetArgs& args, const Facts& facts,
                   const std::string& mirror_url) {
  Diagnosis d;
  doctor::Facts& f = d.facts;
  // Bad --sm / --gpu / --driver is bad input (exit 2) before anything runs.
  d.host = gather_targets(args, facts);
  const HostTargets& h = d.host;
  f.targets = h.targets;
  f.no_targets_reason = h.no_targets_reason;
  f.driver_version = h.driver;
  f.driver_source = h.driver_source;
  f.driver_missing = h.driver_missing;
  f.releases = facts.releases();
  f.toolchains = facts.toolchains();
  if (h.platform) f.official_wheels = h.platform->official_wheels;

  d.python = python_arg.empty() ? "python3" : python_arg;
  auto torch = probe_torch(d.python);  // no interpreter: exit 3
  if (!torch) {
    d.install = advise_install(h, d.python + " -m pip", facts);
    return d;
  }
  f.torch = std::move(*torch);
  f.pip = d.python + " -m pip";
  inspect_torch_lib(f.torch);
  find_toolkit(f);

  std::optional<Version> py_release;
  if (!python_arg.empty() && f.torch.python_version) py_release = f.torch.python_version->prefix(2);
  d.report = doctor::diagnose(
      f, make_build_advisor(facts, py_release, h.platform_is_this_machine ? "" : h.platform->name, h.jetpack,
                            h.jetpack_missing));
  if (!h.jetpack_other.empty()) d.report->notes.push_back(h.jetpack_other);
  if (!mirror_url.empty() && std::any_of(d.report->findings.begin(), d.report->findings.end(), cannot_run))
    mirror_fixes(d, mirror_url, facts);
  return d;
}

}  // namespace archbuild::app
