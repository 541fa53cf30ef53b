#include "doctor/doctor.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::doctor {

namespace fs = std::filesystem;
using arch::Cc;
using arch::CodeImage;
using arch::CodeKind;
using arch::RunResult;

std::optional<Version> TorchFacts::release() const { return torch_release(version); }

std::optional<Version> torch_release(std::string_view version) {
  // The leading dotted number: "2.5.1+cu124", "2.7.0a0+git1234", "2.8.0.dev20250601".
  std::size_t end = 0;
  while (end < version.size() && (std::isdigit(static_cast<unsigned char>(version[end])) || version[end] == '.')) ++end;
  std::string_view head = version.substr(0, end);
  while (!head.empty() && head.back() == '.') head.remove_suffix(1);
  auto v = Version::parse(head);
  if (!v || v->size() < 2) return std::nullopt;
  return v;
}

std::optional<CodeImage> image_from_name(std::string_view name) {
  static const std::regex re(R"(^(sm|compute)_(\d{2,3})([af]?)$)");
  std::string s(name);
  std::smatch m;
  if (!std::regex_match(s, m, re)) return std::nullopt;
  CodeImage img;
  img.kind = m[1].str() == "sm" ? CodeKind::sass : CodeKind::ptx;
  img.cc = Cc::from_sm(std::stoi(m[2].str()));
  img.variant = m[3].str() == "a" ? arch::Variant::a : m[3].str() == "f" ? arch::Variant::f : arch::Variant::none;
  return img;
}

std::string sm_option(const std::vector<Cc>& ccs) {
  std::vector<std::string> parts;
  for (const auto& c : ccs) parts.push_back(std::to_string(c.sm()));
  return text::join(parts, ",");
}

namespace {

std::string ccs_text(const std::vector<Cc>& ccs) {
  std::vector<std::string> parts;
  for (const auto& c : ccs) parts.push_back(c.str());
  return text::join(parts, ", ");
}

std::string images_text(const std::vector<CodeImage>& images) {
  std::vector<std::string> names;
  for (const auto& i : images) names.push_back(i.name());
  return names.empty() ? "no loadable device code" : text::join(names, " ");
}

bool sass_level(RunResult r) { return r == RunResult::native || r == RunResult::compatible_sass; }

const toolchain::Toolchain* toolchain_for(const std::vector<toolchain::Toolchain>& tcs, const Version& cuda) {
  Version rel = cuda.prefix(2);
  for (const auto& tc : tcs)
    if (tc.cuda == rel) return &tc;
  return nullptr;
}

arch::Arch plain(Cc cc) { return arch::Arch{cc, arch::Variant::none, true, false, std::nullopt}; }

// One official wheel variant judged against every target.
struct Candidate {
  const Release* release = nullptr;
  const WheelVariant* variant = nullptr;
  bool full = false;  // SASS (native or compatible) for every target
  std::vector<arch::RunVerdict> verdicts;
};

class Diagnosis {
 public:
  Diagnosis(const Facts& f, const BuildAdvisor& advisor) : f_(f), advisor_(advisor) {
    for (const auto& t : f.targets)
      if (std::find(ccs_.begin(), ccs_.end(), t.cc) == ccs_.end()) ccs_.push_back(t.cc);
    installed_ = f.torch.release();
    if (f.torch.cuda) torch_cuda_ = Version::parse(*f.torch.cuda);
    if (f.driver_version) driver_ = Version::parse(*f.driver_version);
    cpu_only_ = f.torch.version_read && !f.torch.cuda;
  }

  Report run() {
    judge_targets();
    if (ccs_.empty()) {
      report_.notes.push_back(f_.no_targets_reason.empty() ? "no target CC: give --sm" : f_.no_targets_reason);
      return std::move(report_);
    }
    check_cuda_build();
    check_driver();
    check_code();
    check_toolkit();
    return std::move(report_);
  }

 private:
  // ---- what the binaries say, per target ----------------------------------------------

  std::string rel_path(const std::string& p) const {
    if (f_.torch.dir.empty()) return p;
    fs::path r = fs::path(p).lexically_relative(f_.torch.dir);
    if (r.empty() || r.native().starts_with("..")) return p;
    return r.string();
  }

  void judge_targets() {
    std::size_t coded = 0;
    for (const auto& file : f_.torch.lib_files)
      if (file.has_device_code()) ++coded;
    std::vector<CodeImage> listed;
    if (f_.torch.arch_list)
      for (const auto& n : *f_.torch.arch_list)
        if (auto img = image_from_name(n)) listed.push_back(*img);
    std::optional<validate::Coverage> cov;
    if (coded > 0) cov = validate::coverage(f_.torch.lib_files, ccs_);
    for (const auto& t : f_.targets) {
      TargetStatus s;
      s.target = t;
      if (cov) {
        auto it = std::find_if(cov->targets.begin(), cov->targets.end(),
                               [&](const validate::TargetCoverage& tc) { return tc.cc == t.cc; });
        s.basis = "lib/";
        s.files = it->files;
        s.result = it->worst;
        // The image of the file that decides (the worst); for a single-file torch, its image.
        for (const auto& fv : it->files)
          if (fv.verdict.result == it->worst) {
            s.image = fv.verdict.image;
            break;
          }
      } else if (!listed.empty()) {
        auto v = arch::run_verdict(listed, t.cc);
        s.basis = f_.torch.arch_list_source;
        s.result = v.result;
        s.image = v.image;
      }
      report_.targets.push_back(std::move(s));
    }
    if (cpu_only_) return;  // nothing to judge: its own finding says so
    if (!cov && listed.empty() && !ccs_.empty()) {
      std::string lib = f_.torch.lib_inspected ? "lib/ carries no device code"
                        : f_.torch.lib_error.empty() ? "lib/ was not read"
                                                     : "lib/ could not be read: " + f_.torch.lib_error;
      // Not knowing is no verdict of "runs": a finding, so the exit is never 0 on it.
      Finding fd;
      fd.id = "coverage-unknown";
      fd.summary = fmt::format("cannot tell whether {} runs on {}: nothing says which archs it carries", torch_text(),
                               ccs_text(ccs_));
      fd.evidence = {fmt::format("{} at {}: {}", torch_text(), f_.torch.dir.string(), lib),
                     f_.torch.arch_list_missing.empty() ? "torch gave no arch list" : f_.torch.arch_list_missing};
      report_.findings.push_back(std::move(fd));
    } else if (!cov) {
      report_.notes.push_back(fmt::format("lib/ carries no device code{}; judged from {} instead",
                                          f_.torch.lib_error.empty() ? "" : " (" + f_.torch.lib_error + ")",
                                          f_.torch.arch_list_source));
    }
    std::set<Cc> noted;
    for (const auto& s : report_.targets)
      if (s.result == RunResult::compatible_sass && s.image && noted.insert(s.target.cc).second)
        report_.notes.push_back(fmt::format("{} runs {} SASS (same major, older minor: no JIT needed)",
                                            s.target.cc.str(), s.image->name()));
  }

  // ---- fixes ----------------------------------------------------------------------------

  std::vector<Candidate> candidates() const {
    std::vector<Candidate> out;
    for (const auto& r : f_.releases.releases)
      for (const auto& v : r.variants_for(f_.official_wheels)) {
        if (!v.recorded()) continue;
        auto images = v.images();
        Candidate c{&r, &v, true, {}};
        bool runs = true;
        for (const auto& cc : ccs_) {
          auto verdict = arch::run_verdict(images, cc);
          if (verdict.result == RunResult::no_kernel_image) runs = false;
          if (!sass_level(verdict.result)) c.full = false;
          c.verdicts.push_back(verdict);
        }
        if (runs) out.push_back(std::move(c));
      }
    return out;
  }

  // Whether this host's driver runs a wheel of CUDA `cuda` at its full minimum (or unknown).
  bool driver_fits(const Version& cuda) const {
    if (!driver_) return true;
    if (const auto* tc = toolchain_for(f_.toolchains, cuda)) return *driver_ >= tc->min_driver;
    // A CUDA release without its toolchains/ file: at least its major's floor.
    auto floor = f_.releases.minor_compat_driver(cuda.major());
    return !floor || *driver_ >= *floor;
  }

  // The newest release line and CUDA whose runtime this driver runs in full; else the newest
  // of all (its fix names the driver it needs).
  const Candidate* pick(const std::vector<const Candidate*>& cands) const {
    const Candidate* best = nullptr;
    for (const auto* c : cands) {
      if (!best) {
        best = c;
        continue;
      }
      bool fit = driver_fits(c->variant->cuda), best_fit = driver_fits(best->variant->cuda);
      if (fit != best_fit) {
        if (fit) best = c;
        continue;
      }
      if (c->release->line != best->release->line ? c->release->line > best->release->line
                                                  : c->variant->cuda > best->variant->cuda)
        best = c;
    }
    return best;
  }

  std::string also_text(const std::vector<const Candidate*>& cands, const std::string& what) const {
    std::vector<std::string> parts;
    const Release* cur = nullptr;
    std::vector<std::string> cus;
    auto flush = [&] {
      if (cur) parts.push_back(fmt::format("{} ({})", cur->line.str(), text::join(cus, ", ")));
      cus.clear();
    };
    for (const auto* c : cands) {
      if (c->release != cur) {
        flush();
        cur = c->release;
      }
      cus.push_back(c->variant->cu());
    }
    flush();
    return fmt::format("official wheels that {}: torch {}", what, text::join(parts, ", "));
  }

  Fix official_fix(const Candidate& c, const std::vector<const Candidate*>& all, bool full) const {
    std::vector<std::string> per;
    for (std::size_t i = 0; i < ccs_.size(); ++i) {
      const auto& v = c.verdicts[i];
      per.push_back(fmt::format("{} on {} ({})", v.image ? v.image->name() : "?", ccs_[i].str(), arch::to_string(v.result)));
    }
    Fix fx;
    fx.kind = "official-wheel";
    fx.text = fmt::format("install the official torch {} wheel built with CUDA {} ({}): its arch list {} runs {}{}",
                          c.release->line.str(), c.variant->cuda.str(), c.variant->cu(), *c.variant->arch_list,
                          text::join(per, ", "), full ? "" : " — through the PTX JIT only (slow first launch)");
    if (installed_ && torch_cuda_ && installed_->prefix(2) == c.release->line &&
        torch_cuda_->prefix(2) == c.variant->cuda)
      fx.text += fmt::format(" (the installed {} claims the same release and CUDA, but its binaries differ: it is not "
                             "the official wheel)",
                             f_.torch.version);
    if (driver_ && !driver_fits(c.variant->cuda)) {
      const auto* tc = toolchain_for(f_.toolchains, c.variant->cuda);
      fx.text += fmt::format("; it needs driver >= {} (this host has {})",
                             tc ? tc->min_driver_text : f_.releases.minor_compat.at(c.variant->cuda.major()),
                             *f_.driver_version);
    }
    fx.command = fmt::format("{} install {} --index-url {}", f_.pip.empty() ? "python3 -m pip" : f_.pip,
                             requirements(*c.release), f_.releases.index_for(*c.variant));
    if (all.size() > 1)
      fx.also = also_text(all, full ? fmt::format("carry SASS for {}", ccs_text(ccs_))
                                    : fmt::format("run on {} through PTX", ccs_text(ccs_)));
    return fx;
  }

  const BuildSuggestion& advise(const std::optional<Version>& line) {
    std::string key = line ? line->str() : "";
    auto it = advice_.find(key);
    if (it == advice_.end()) {
      std::optional<Version> driver;
      if (f_.driver_version && !f_.official_wheels.empty()) driver = Version::parse(*f_.driver_version);
      it = advice_.emplace(key, build_for_driver(advisor_, ccs_, line, driver, f_.releases, f_.toolchains)).first;
    }
    return it->second;
  }

  Fix build_fix(const BuildSuggestion& b, const std::string& why) const {
    Fix fx;
    fx.kind = "build";
    fx.text = fmt::format("build {} for {} from source with archbuild{}{}{}", b.detail, ccs_text(ccs_), why,
                          b.needs.empty() ? "" : "; first: " + b.needs,
                          b.libraries.empty() ? "" : "; libraries here: " + text::join(b.libraries, "; "));
    fx.command = b.command;
    return fx;
  }

  // Official wheels first, then a build on the installed release line (when the official fix
  // moves to another line), then the build resolution picks on its own.
  void code_fixes(Finding& fd, bool need_sass) {
    if (code_fixes_cached_.count(need_sass)) {
      const auto& [fixes, notes] = code_fixes_cached_.at(need_sass);
      fd.fixes = fixes;
      fd.notes.insert(fd.notes.end(), notes.begin(), notes.end());
      return;
    }
    std::vector<Fix> fixes;
    std::vector<std::string> notes;
    auto all = candidates();
    std::vector<const Candidate*> full, ptx;
    for (const auto& c : all) (c.full ? full : ptx).push_back(&c);
    const Candidate* official = nullptr;
    if (const auto* c = pick(full)) {
      official = c;
      fixes.push_back(official_fix(*c, full, true));
    } else if (!need_sass && !ptx.empty()) {
      official = pick(ptx);
      fixes.push_back(official_fix(*official, ptx, false));
    } else {
      notes.push_back(fmt::format("no official wheel recorded in {} carries {} for {}", f_.releases.file.filename().string(),
                                  need_sass ? "SASS" : "code", ccs_text(ccs_)));
    }
    std::string stay_recipe;
    if (installed_ && (!official || official->release->line != installed_->prefix(2))) {
      Version line = installed_->prefix(2);
      const auto& stay = advise(line);
      if (stay.ok) {
        stay_recipe = stay.recipe;
        fixes.push_back(build_fix(stay, fmt::format(" (stays on torch {})", line.str())));
      } else {
        notes.push_back(fmt::format("a build of torch {} for {} is refused: {}", line.str(), ccs_text(ccs_), stay.detail));
      }
    }
    const auto& any = advise(std::nullopt);
    if (any.ok && any.recipe != stay_recipe)
      fixes.push_back(build_fix(any, ""));
    else if (!any.ok)
      notes.push_back(fmt::format("no recipe builds {}: {}", ccs_text(ccs_), any.detail));
    fd.fixes = fixes;
    fd.notes.insert(fd.notes.end(), notes.begin(), notes.end());
    code_fixes_cached_.emplace(need_sass, std::pair{fixes, notes});
  }

  std::string torch_text() const {
    std::string v = f_.torch.version.empty() ? "torch (version unknown)" : "torch " + f_.torch.version;
    if (f_.torch.cuda) v += fmt::format(" (CUDA {})", *f_.torch.cuda);
    return v;
  }

  std::vector<std::string> target_evidence(std::optional<Cc> only = std::nullopt) const {
    std::vector<std::string> ev;
    for (const auto& t : f_.targets)
      if (!only || t.cc == *only) ev.push_back(fmt::format("target {} from {}", t.cc.str(), t.source));
    return ev;
  }

  // ---- the checks -----------------------------------------------------------------------

  void check_cuda_build() {
    if (!cpu_only_) return;
    Finding fd;
    fd.id = "cpu-only";
    if (f_.torch.hip)
      fd.summary = fmt::format("torch {} is a ROCm build (torch.version.hip = {}, torch.version.cuda = None): it cannot "
                               "use an NVIDIA GPU",
                               f_.torch.version, *f_.torch.hip);
    else
      fd.summary = fmt::format("torch {} is a CPU-only build (torch.version.cuda is None): it cannot use the GPU",
                               f_.torch.version);
    fd.evidence.push_back(fmt::format("torch.__version__ = {}, torch.version.cuda = None", f_.torch.version));
    for (auto& e : target_evidence()) fd.evidence.push_back(std::move(e));
    code_fixes(fd, true);
    report_.findings.push_back(std::move(fd));
  }

  void check_driver() {
    if (cpu_only_) return;
    if (!f_.driver_version) {
      report_.notes.push_back("driver not checked: " +
                              (f_.driver_missing.empty() ? std::string("no GPU detected on this host") : f_.driver_missing));
      return;
    }
    if (!driver_) {
      report_.notes.push_back(fmt::format("driver version '{}' not understood: not checked", *f_.driver_version));
      return;
    }
    if (!torch_cuda_) {
      report_.notes.push_back(f_.torch.cuda ? fmt::format("torch.version.cuda '{}' not understood: driver not checked",
                                                          *f_.torch.cuda)
                                            : "torch's CUDA version could not be read: driver not checked");
      return;
    }
    const auto* tc = toolchain_for(f_.toolchains, *torch_cuda_);
    auto floor = f_.releases.minor_compat_driver(torch_cuda_->major());
    std::string floor_text = floor ? f_.releases.minor_compat.at(torch_cuda_->major()) : "";
    if (!tc && !floor) {
      report_.notes.push_back(fmt::format("no driver facts for CUDA {} (no toolchains/cuda-{}.toml): driver not checked",
                                          torch_cuda_->str(), torch_cuda_->prefix(2).str()));
      return;
    }
    std::string need = tc ? fmt::format(">= {}", tc->min_driver_text) : fmt::format(">= {}", floor_text);
    bool below_floor = floor ? *driver_ < *floor : *driver_ < tc->min_driver;
    bool below_min = tc && *driver_ < tc->min_driver;
    if (!below_floor && !below_min) return;

    std::vector<Cc> jit;
    for (const auto& s : report_.targets)
      if (s.result == RunResult::ptx_jit) jit.push_back(s.target.cc);
    if (!below_floor && jit.empty()) {
      report_.notes.push_back(fmt::format("driver {} is older than CUDA {} asks ({}); torch's runtime starts through "
                                          "minor-version compatibility (>= {})",
                                          *f_.driver_version, torch_cuda_->str(), need, floor_text));
      return;
    }
    Finding fd;
    fd.id = "driver-too-old";
    if (below_floor)
      fd.summary = fmt::format("driver {} is too old for torch's CUDA {} runtime (needs {}{}): \"CUDA driver version is "
                               "insufficient for CUDA runtime version\"",
                               *f_.driver_version, torch_cuda_->str(), need,
                               floor && tc ? fmt::format("; at least {} through minor-version compatibility", floor_text)
                                           : "");
    else
      fd.summary = fmt::format("driver {} cannot JIT-compile the PTX of torch's CUDA {} (needs {}), and {} runs only "
                               "through that PTX",
                               *f_.driver_version, torch_cuda_->str(), need, ccs_text(jit));
    fd.evidence.push_back(fmt::format("driver {} (from {})", *f_.driver_version,
                                      f_.driver_source.empty() ? "detection" : f_.driver_source));
    fd.evidence.push_back(fmt::format("torch {}: torch.version.cuda = {}", f_.torch.version, *f_.torch.cuda));
    if (tc)
      fd.evidence.push_back(fmt::format("{}: CUDA {} needs driver >= {}", tc->file.filename().string(),
                                        tc->cuda.str(), tc->min_driver_text));
    if (floor)
      fd.evidence.push_back(fmt::format("{}: CUDA {}.x runtimes start on driver >= {} (minor-version compatibility, "
                                        "without newer PTX JIT)",
                                        f_.releases.file.filename().string(), torch_cuda_->major(), floor_text));
    Fix up;
    up.kind = "driver";
    up.text = fmt::format("install an NVIDIA driver {} (CUDA {}, the runtime torch {} ships with)", need,
                          torch_cuda_->str(), f_.torch.version);
    fd.fixes.push_back(up);
    // Or keep the driver: an official wheel of an older CUDA this driver runs in full.
    std::vector<const Candidate*> fits;
    auto all = candidates();
    for (const auto& c : all)
      if (c.full && driver_fits(c.variant->cuda)) fits.push_back(&c);
    if (const auto* c = pick(fits)) {
      Fix fx = official_fix(*c, fits, true);
      fx.text = "or keep this driver: " + fx.text;
      fd.fixes.push_back(fx);
    } else {
      fd.notes.push_back(fmt::format("no official wheel recorded with a CUDA that driver {} runs in full covers {}",
                                     *f_.driver_version, ccs_text(ccs_)));
    }
    report_.findings.push_back(std::move(fd));
  }

  void check_code() {
    if (cpu_only_) return;
    std::set<Cc> done;  // two GPUs of one CC: one finding (its evidence names both)
    for (const auto& s : report_.targets) {
      if (!s.result || sass_level(*s.result) || !done.insert(s.target.cc).second) continue;
      Finding fd;
      fd.cc = s.target.cc;
      Cc cc = s.target.cc;
      std::vector<std::string> ev = target_evidence(cc);
      ev.push_back(fmt::format("{} at {}", torch_text(), f_.torch.dir.string()));
      std::size_t shown = 0, more = 0;
      for (const auto& fv : s.files) {
        if (fv.verdict.result != *s.result) continue;
        if (shown == 5) {
          ++more;
          continue;
        }
        ++shown;
        if (*s.result == RunResult::no_kernel_image)
          ev.push_back(fv.relocatable_only
                           ? fmt::format("{}: only relocatable (-rdc) device code, never device-linked", rel_path(fv.path))
                           : fmt::format("{} carries {}: no SASS sm_{}x at or below sm_{}, no PTX at or below compute_{}",
                                         rel_path(fv.path), images_text(fv.carried), cc.major, cc.sm(), cc.sm()));
        else
          ev.push_back(fmt::format("{} carries {}: only {} runs on {}", rel_path(fv.path), images_text(fv.carried),
                                   fv.verdict.image->name(), cc.str()));
      }
      if (more) ev.push_back(fmt::format("… and {} more files of lib/ alike", more));
      if (f_.torch.arch_list)
        ev.push_back(fmt::format("{} = {}", f_.torch.arch_list_source, text::join(*f_.torch.arch_list, " ")));
      if (s.files.empty() && !s.basis.empty())
        ev.push_back(fmt::format("judged from {} (lib/ carries no device code)", s.basis));
      fd.evidence = std::move(ev);
      if (*s.result == RunResult::no_kernel_image) {
        fd.id = "no-kernel-image";
        fd.summary = fmt::format("no kernel image for {}: {} carries no code a CC {} GPU can run (\"CUDA error: no "
                                 "kernel image is available for execution on the device\")",
                                 cc.str(), torch_text(), cc.str());
        code_fixes(fd, false);
      } else {
        fd.id = "ptx-only";
        fd.summary = fmt::format("{} runs {} only through the PTX JIT from {}: it works, but the first launch of each "
                                 "kernel is compiled by the driver (slow; cached in ~/.nv/ComputeCache)",
                                 cc.str(), torch_text(), s.image ? s.image->name() : "PTX");
        code_fixes(fd, true);
      }
      report_.findings.push_back(std::move(fd));
    }
  }

  void check_toolkit() {
    if (!f_.toolkit) {
      if (!f_.toolkit_missing.empty()) report_.notes.push_back(f_.toolkit_missing);
      return;
    }
    const auto& tk = *f_.toolkit;
    const auto* tc = toolchain_for(f_.toolchains, tk.release());
    std::vector<Cc> lacking;
    std::vector<std::string> ev;
    for (const auto& cc : ccs_) {
      bool known = tc || tk.listed;
      if (!known) continue;
      bool by_data = !tc || tc->compiles(plain(cc));
      bool by_nvcc = tk.lists(cc);
      if (by_data && by_nvcc) continue;
      lacking.push_back(cc);
      if (!by_data)
        ev.push_back(fmt::format("{}: CUDA {} does not compile sm_{}", tc->file.filename().string(), tc->cuda.str(),
                                 cc.sm()));
      else
        ev.push_back(fmt::format("{} --list-gpu-arch lacks compute_{}", tk.nvcc.string(), cc.sm()));
    }
    if (!tc && !tk.listed)
      report_.notes.push_back(fmt::format("CUDA {} at {}: no toolchains/cuda-{}.toml and no `nvcc --list-gpu-arch`; "
                                          "its archs are not checked",
                                          tk.version.str(), tk.root.string(), tk.release().str()));
    if (torch_cuda_ && torch_cuda_->major() != tk.version.major())
      report_.notes.push_back(fmt::format("the CUDA {} toolkit at {} and torch's CUDA {} differ in major: "
                                          "torch.utils.cpp_extension refuses to build extensions with it",
                                          tk.version.str(), tk.root.string(), torch_cuda_->str()));
    if (lacking.empty()) return;
    Finding fd;
    fd.id = "toolkit-cannot-compile";
    if (lacking.size() == 1) fd.cc = lacking.front();
    fd.summary = fmt::format("the CUDA {} toolkit at {} ({}) cannot compile for {}: CUDA extensions built against "
                             "torch (torch.utils.cpp_extension, pip install of CUDA packages) fail there",
                             tk.version.str(), tk.root.string(), tk.found_by, ccs_text(lacking));
    fd.evidence.push_back(fmt::format("{} = {} (nvcc {})", tk.found_by, tk.root.string(), tk.compiler_version().str()));
    for (auto& e : ev) fd.evidence.push_back(std::move(e));
    // The oldest CUDA that compiles them, preferring torch's own CUDA major (cpp_extension
    // refuses a toolkit of another major).
    const toolchain::Toolchain* best = nullptr;
    for (const auto& t : f_.toolchains) {
      bool all = std::all_of(lacking.begin(), lacking.end(), [&](Cc c) { return t.compiles(plain(c)); });
      if (!all) continue;
      bool same = torch_cuda_ && t.cuda.major() == torch_cuda_->major();
      bool best_same = best && torch_cuda_ && best->cuda.major() == torch_cuda_->major();
      if (!best || (same && !best_same)) best = &t;
    }
    if (best) {
      Fix fx;
      fx.kind = "toolkit";
      fx.text = fmt::format("install CUDA {} or newer (the first release that compiles {}) and point CUDA_HOME at it",
                            best->cuda.str(), ccs_text(lacking));
      if (torch_cuda_ && best->cuda.major() != torch_cuda_->major())
        fx.text += fmt::format(" — with a torch built for CUDA {}.x too", best->cuda.major());
      fx.command = fmt::format("export CUDA_HOME=/usr/local/cuda-{}", best->cuda.str());
      fd.fixes.push_back(fx);
    } else {
      fd.notes.push_back(fmt::format("no CUDA release in toolchains/ compiles {}", ccs_text(lacking)));
    }
    report_.findings.push_back(std::move(fd));
  }

  const Facts& f_;
  const BuildAdvisor& advisor_;
  std::vector<Cc> ccs_;
  std::optional<Version> installed_, torch_cuda_, driver_;
  bool cpu_only_ = false;
  std::map<std::string, BuildSuggestion> advice_;
  std::map<bool, std::pair<std::vector<Fix>, std::vector<std::string>>> code_fixes_cached_;
  Report report_;
};

}  // namespace

Report diagnose(const Facts& facts, const BuildAdvisor& advisor) { return Diagnosis(facts, advisor).run(); }

}  // namespace archbuild::doctor
