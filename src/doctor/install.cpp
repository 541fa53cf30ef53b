#include "doctor/install.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::doctor {

using arch::Cc;
using arch::RunResult;

namespace {

std::string ccs_text(const std::vector<Cc>& ccs) {
  std::vector<std::string> parts;
  for (const auto& c : ccs) parts.push_back(c.str());
  return text::join(parts, ", ");
}

const toolchain::Toolchain* toolchain_for(const std::vector<toolchain::Toolchain>& tcs, const Version& cuda) {
  for (const auto& tc : tcs)
    if (tc.cuda == cuda.prefix(2)) return &tc;
  return nullptr;
}

// What one variant needs from the driver: the oldest that starts its runtime (minor-version
// compatibility of its CUDA major, else the release's own minimum) and the release's own
// minimum, which PTX JIT of its PTX needs.
struct DriverNeed {
  std::optional<Version> start, full;
  std::string start_text, full_text;
};

DriverNeed driver_need(const Releases& releases, const std::vector<toolchain::Toolchain>& toolchains, const Version& cuda) {
  DriverNeed n;
  if (const auto* tc = toolchain_for(toolchains, cuda)) {
    n.full = tc->min_driver;
    n.full_text = tc->min_driver_text;
  }
  if (auto floor = releases.minor_compat_driver(cuda.major())) {
    n.start = floor;
    n.start_text = releases.minor_compat.at(cuda.major());
  } else {
    n.start = n.full;
    n.start_text = n.full_text;
  }
  return n;
}

// The rule's outcome for one variant: an option, or why not (and whether only the driver
// stood in the way).
struct Judged {
  std::optional<InstallOption> option;
  std::string why_not;
  bool driver_only = false;
  std::string driver_needed;
};

Judged judge(const InstallQuery& q, const std::vector<Cc>& ccs, const std::optional<Version>& driver,
             const Release& rel, const WheelVariant& v) {
  Judged j;
  auto images = v.images();
  std::vector<arch::RunVerdict> verdicts;
  std::vector<Cc> missing, jit;
  for (const auto& cc : ccs) {
    auto verdict = arch::run_verdict(images, cc);
    if (verdict.result == RunResult::no_kernel_image) missing.push_back(cc);
    if (verdict.result == RunResult::ptx_jit) jit.push_back(cc);
    verdicts.push_back(verdict);
  }
  if (!missing.empty()) {
    j.why_not = fmt::format("{} carries no code for {} ({})", v.cu(), ccs_text(missing), *v.arch_list);
    return j;
  }
  auto need = driver_need(q.releases, q.toolchains, v.cuda);
  if (driver && need.start && *driver < *need.start) {
    j.why_not = fmt::format("{} needs driver >= {} to start its CUDA {} runtime", v.cu(), need.start_text, v.cuda.str());
    j.driver_only = true;
    j.driver_needed = need.start_text;
    return j;
  }
  if (driver && !jit.empty() && need.full && *driver < *need.full) {
    j.why_not = fmt::format("{} runs on {} only through its PTX, which needs driver >= {} to JIT", v.cu(), ccs_text(jit),
                            need.full_text);
    j.driver_only = true;
    j.driver_needed = need.full_text;
    return j;
  }
  InstallOption o;
  o.line = rel.line;
  o.version = rel.pin();
  o.cuda = v.cuda;
  o.cu = v.cu();
  o.index_url = q.releases.index_for(v);
  o.arch_list = *v.arch_list;
  o.verdicts = std::move(verdicts);
  o.sass = jit.empty();
  o.driver_start = need.start_text;
  o.driver_full = need.full_text;
  if (rel.torchvision) o.torchvision = rel.torchvision->str() + ".*";
  if (rel.torchaudio) o.torchaudio = rel.torchaudio->str() + ".*";
  std::string pkgs = requirements(rel);
  o.pip = fmt::format("{} install {} --index-url {}", q.pip.empty() ? "pip" : q.pip, pkgs, o.index_url);
  o.uv = fmt::format("uv pip install {} --torch-backend {}", pkgs, o.cu);
  j.option = std::move(o);
  return j;
}

}  // namespace

BuildSuggestion build_for_driver(const BuildAdvisor& advisor, const std::vector<Cc>& ccs,
                                 const std::optional<Version>& line, const std::optional<Version>& driver,
                                 const Releases& releases, const std::vector<toolchain::Toolchain>& toolchains) {
  BuildSuggestion first;
  if (!advisor) {
    first.detail = "no resolver";
    return first;
  }
  first = advisor(ccs, line, std::nullopt);
  if (!first.ok || !driver || !first.cuda) return first;
  auto starts = [&](const Version& cuda) {
    auto need = driver_need(releases, toolchains, cuda);
    return !need.start || *driver >= *need.start;
  };
  if (starts(*first.cuda)) return first;
  // Newest first: the CUDA releases whose runtime this driver starts.
  std::vector<Version> startable;
  for (const auto& tc : toolchains)
    if (starts(tc.cuda) && tc.cuda < *first.cuda) startable.push_back(tc.cuda);
  std::sort(startable.begin(), startable.end(), std::greater<>());
  const auto need = driver_need(releases, toolchains, *first.cuda);
  const std::string veto = fmt::format("driver {} cannot start the CUDA {} runtime (needs >= {})", driver->str(),
                                       first.cuda->str(), need.start_text);
  BuildSuggestion last;
  for (const auto& cuda : startable) {
    auto s = advisor(ccs, line, cuda);
    if (!s.ok) {
      last = std::move(s);
      continue;
    }
    s.detail += fmt::format(" ({}: the newest CUDA it starts that builds {})", veto, ccs_text(ccs));
    return s;
  }
  // The resolver's own way out names CUDA releases this driver cannot start: only its reason stays.
  const std::string& reason = last.reason;
  BuildSuggestion none;
  none.detail = fmt::format("{}, and no CUDA release it starts builds {}{}{}: update the driver to >= {}, then: {}", veto,
                            ccs_text(ccs), line ? " on torch " + line->str() : "",
                            reason.empty() ? "" : " (" + reason + ")", need.start_text, first.command);
  return none;
}

InstallAdvice advise_install(const InstallQuery& q, const BuildAdvisor& advisor) {
  InstallAdvice a;
  for (const auto& t : q.targets)
    if (std::find(a.ccs.begin(), a.ccs.end(), t.cc) == a.ccs.end()) a.ccs.push_back(t.cc);
  if (a.ccs.empty()) return a;
  const std::string wheels = q.platform ? q.platform->official_wheels : "x86_64";
  std::optional<Version> driver;
  if (q.driver) {
    driver = Version::parse(*q.driver);
    if (!driver) a.notes.push_back(fmt::format("driver version '{}' not understood: not checked", *q.driver));
  } else {
    a.notes.push_back("driver not known (give --driver 580.65): each wheel names the driver it needs");
  }

  struct WhyNot {
    std::string text;
    bool driver = false;  // the driver stands in the way (Judged::driver_only)
  };
  struct LineResult {
    const Release* release;
    std::vector<WhyNot> why_not;
    std::string whys() const {
      std::vector<std::string> s;
      for (const auto& w : why_not) s.push_back(w.text);
      return text::join(s, "; ");
    }
  };
  std::vector<InstallOption> sass, ptx;
  std::vector<LineResult> lines;
  std::optional<std::string> driver_blocked;  // the newest wheel only the driver stops
  for (auto r = q.releases.releases.rbegin(); r != q.releases.releases.rend() && !wheels.empty(); ++r) {
    LineResult lr{&*r, {}};
    std::vector<const WheelVariant*> vs;
    for (const auto& v : r->variants_for(wheels))
      if (v.recorded()) vs.push_back(&v);
    std::sort(vs.begin(), vs.end(), [](const auto* x, const auto* y) { return x->cuda > y->cuda; });
    for (const auto* v : vs) {
      auto j = judge(q, a.ccs, driver, *r, *v);
      if (j.option) {
        (j.option->sass ? sass : ptx).push_back(std::move(*j.option));
        continue;
      }
      lr.why_not.push_back({j.why_not, j.driver_only});
      if (j.driver_only && !driver_blocked)
        driver_blocked = fmt::format("torch {} ({}) runs on {} with driver >= {}", r->line.str(), v->cu(),
                                     ccs_text(a.ccs), j.driver_needed);
    }
    if (vs.empty() && !r->recorded)
      lr.why_not.push_back({"no official wheels recorded: only a recipe names this line"});
    else if (vs.empty())
      lr.why_not.push_back({wheels == "x86_64" ? "no arch list recorded for its wheels"
                                               : fmt::format("no {} wheel list recorded", wheels)});
    lines.push_back(std::move(lr));
  }
  a.options = std::move(sass);
  a.options.insert(a.options.end(), std::make_move_iterator(ptx.begin()), std::make_move_iterator(ptx.end()));

  // Why nothing newer than the best: every line above it, and the driver's veto on its own line.
  std::optional<Version> best = a.options.empty() ? std::nullopt : std::optional<Version>(a.options.front().line);
  for (const auto& lr : lines) {
    if (best && lr.release->line < *best) break;
    if (lr.why_not.empty()) continue;
    if (best && lr.release->line == *best) {
      std::vector<std::string> driver_why;
      for (const auto& w : lr.why_not)
        if (w.driver) driver_why.push_back(w.text);
      if (!driver_why.empty())
        a.ruled_out.push_back(fmt::format("torch {}: {}", lr.release->line.str(), text::join(driver_why, "; ")));
      continue;
    }
    a.ruled_out.push_back(fmt::format("torch {}: {}", lr.release->line.str(), lr.whys()));
  }
  if (q.platform && !a.options.empty() && wheels != "x86_64")
    a.notes.push_back(fmt::format("the {} wheels share the index with the x86_64 ones: pip on the {} host picks its "
                                  "manylinux_*_{} wheel{}",
                                  wheels, q.platform->machine, q.platform->wheel_arch,
                                  q.platform_is_this_machine ? "" : " (run the command there, not on this machine)"));
  if (!a.options.empty() && !a.options.front().sass)
    a.notes.push_back(fmt::format("no official wheel carries SASS for {}: the ones listed run through the PTX JIT (slow "
                                  "first launch of each kernel); a build gives SASS",
                                  ccs_text(a.ccs)));
  if (a.options.empty() && driver_blocked)
    a.notes.push_back("or update the driver: " + *driver_blocked);

  // The build: always when no wheel fits; otherwise when the newest release has none.
  const Release* newest = q.releases.releases.empty() ? nullptr : &q.releases.releases.back();
  // A build on a platform whose CUDA is the system's (JetPack) keeps the driver that came with it.
  const bool pip_cuda = !q.platform || q.platform->pip_cuda;
  auto ask = [&](const std::optional<Version>& line) {
    return build_for_driver(advisor, a.ccs, line, pip_cuda ? driver : std::nullopt, q.releases, q.toolchains);
  };
  if (wheels.empty()) {
    a.build = ask(std::nullopt);
    a.build_why = fmt::format("no pip wheel runs on platform {} ({}): its CUDA libraries come from the system, not from "
                              "pip, and no official torch wheel is built for it",
                              q.platform->name, q.platform->description);
  } else if (a.options.empty()) {
    a.build = ask(std::nullopt);
    a.build_why = fmt::format("no official wheel runs on {}{}", ccs_text(a.ccs), driver ? " with driver " + *q.driver : "");
  } else if (newest && a.options.front().line < newest->line) {
    a.build = ask(newest->line);
    const auto& line = lines.front();
    a.build_why = fmt::format("no official torch {} wheel runs here{}", newest->line.str(),
                              line.why_not.empty() ? "" : " (" + line.whys() + ")");
  }
  return a;
}

}  // namespace archbuild::doctor
