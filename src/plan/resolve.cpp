#include "plan/resolve.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/text.hpp"
#include "recipe/driver.hpp"

namespace archbuild::plan {

namespace {

using recipe::Recipe;
using rules::Id;
using toolchain::Toolchain;

std::string join_versions(const std::vector<Version>& vs, std::string_view sep = ", ") {
  std::vector<std::string> s;
  for (const auto& v : vs) s.push_back(v.str());
  return text::join(s, sep);
}

std::string arch_names(const std::vector<arch::Arch>& archs) {
  std::vector<std::string> s;
  for (const auto& a : archs) {
    if (a.sass) s.push_back(a.sm_name());
    if (a.ptx) s.push_back(a.compute_name() + " (PTX)");
  }
  return text::join(s, ", ");
}

// "torch 2.7" for --torch suggestions.
Version line_of(const Recipe& r) { return r.torch_version().prefix(2); }

// A dependent (torchvision, an extension) asked for with a torch it is not built against: the
// pairing is the recipe's `torch` key, and a wheel built against another torch fails at import
// ("operator torchvision::nms does not exist"), so name the pair instead of building it.
std::optional<std::string> pairing_refusal(const std::vector<const Recipe*>& recipes, const Version& torch) {
  std::vector<std::string> pairs;
  for (const Recipe* r : recipes) {
    if (!r->torch) return std::nullopt;  // a torch recipe among them: the plain torch-version rule speaks
    pairs.push_back(fmt::format("{} ({} {}) pairs with torch {} ({})", r->name, r->package, r->version.str(),
                                r->torch->str(), r->file.filename().string()));
  }
  if (pairs.empty()) return std::nullopt;
  return fmt::format("{}, not torch {}; pick the {} recipe whose torch is {} (see `archbuild recipes`) or drop --torch",
                     text::join(pairs, "; "), torch.str(), recipes.front()->package, torch.str());
}

std::string sm_values(const std::vector<int>& values) {
  std::vector<std::string> s;
  for (int v : values) s.push_back(std::to_string(v));
  return text::join(s, ";");
}

const Toolchain* find_toolchain(const std::vector<Toolchain>& tcs, const Version& cuda) {
  for (const auto& t : tcs)
    if (t.cuda == cuda) return &t;
  return nullptr;
}

// Why CUDA `c` cannot compile `a`, from the span of releases that can.
std::string arch_bound(const arch::Arch& a, const Version& c, const std::vector<Toolchain>& tcs) {
  std::optional<Version> first, last;
  for (const auto& t : tcs)
    if (t.compiles(a)) {
      if (!first) first = t.cuda;
      last = t.cuda;
    }
  std::string name = a.sass ? a.sm_name() : a.compute_name();
  if (!first) return fmt::format("no CUDA release archbuild knows compiles {}", name);
  if (c < *first) return fmt::format("{} needs CUDA >= {}", name, first->str());
  if (c > *last)
    return fmt::format("CUDA {} dropped {} (CUDA <= {} compiles it)", c.str(), name, last->str());
  return fmt::format("CUDA {} does not compile {}", c.str(), name);
}

// The python-modules rule's list: the recipe's build.python_modules (else its driver's default),
// less the modules the interpreter probe does not look for (those are noted, not refused).
std::vector<std::string> probed_modules(const Recipe& r, std::vector<std::string>& notes) {
  const auto& probed = toolchain::python_build_modules();
  std::vector<std::string> out;
  for (const auto& m : recipe::python_modules(r)) {
    if (std::find(probed.begin(), probed.end(), m) != probed.end()) out.push_back(m);
    else notes.push_back(fmt::format("{}: build.python_modules names {}, which archbuild does not probe; the build "
                                     "step will tell whether it imports", r.name, m));
  }
  return out;
}

// The modules the interpreter lacks that the build venv installs instead (stages/venv: every
// driver but cmake builds in one, with the driver's modules pip-installed from the index,
// --find-links or --index-url; when pip cannot, that stage names what provides them, exit 3,
// before anything is configured). So a pyenv python without wheel builds given a wheelhouse.
// Nothing when the interpreter cannot make such a venv (no venv or pip module).
std::optional<Rule> venv_installs(const toolchain::Python& py, const std::vector<std::string>& lacking,
                                  const std::string& subject) {
  for (const char* needed : {"venv", "pip"})
    if (!py.has_module(needed) || std::find(lacking.begin(), lacking.end(), needed) != lacking.end())
      return std::nullopt;
  return Rule{Id::python_modules, subject, true,
              fmt::format("{} lacks {}: the build venv installs them with pip (the index, --find-links or "
                          "--index-url)", py.path.string(), text::join(lacking, ", "))};
}

// A rule a candidate fails, before it joins the rules list (plan::Rule) with its subject.
struct FailedRule {
  Id rule;
  std::string problem;  // the same words for every candidate it stops (grouped in refusals)
  std::string detail;   // this candidate's own words (the rules list)
};

struct Pair {
  const Recipe* recipe = nullptr;
  Version cuda;
  const Toolchain* tc = nullptr;
  std::vector<Rule> passed;
  std::vector<FailedRule> failed;
  std::string subject() const { return fmt::format("{} + CUDA {}", recipe->name, cuda.str()); }
};

struct Constraints {
  std::optional<Version> torch, cuda, python;
};

// Every (recipe, CUDA) pair the constraints leave, with each static rule's verdict. Rules that
// depend on what is installed come later, for the chosen pair only.
class Evaluator {
 public:
  Evaluator(const Request& req, const Inputs& in, const std::vector<const Recipe*>& recipes,
            const std::vector<arch::Arch>& archs, std::optional<Version> default_python,
            const toolchain::Platform& platform)
      : req_(req), in_(in), recipes_(recipes), archs_(archs), default_python_(default_python), platform_(platform) {}

  std::vector<Pair> pairs(const Constraints& c, std::vector<FailedRule>* recipe_level = nullptr) const {
    std::vector<Pair> out;
    for (const Recipe* r : recipes_) {
      if (c.torch && !r->torch_version().starts_with(*c.torch)) continue;
      if (c.cuda && std::find(r->cuda.begin(), r->cuda.end(), *c.cuda) == r->cuda.end()) {
        if (recipe_level)
          recipe_level->push_back({Id::recipe_cuda, fmt::format("{} supports CUDA {}, not {}", r->name,
                                                              join_versions(r->cuda), c.cuda->str())});
        continue;
      }
      for (const auto& cuda : r->cuda) {
        if (c.cuda && cuda != *c.cuda) continue;
        out.push_back(evaluate(*r, cuda, c));
      }
    }
    return out;
  }

  static std::vector<const Pair*> passing(const std::vector<Pair>& ps) {
    std::vector<const Pair*> out;
    for (const auto& p : ps)
      if (p.failed.empty()) out.push_back(&p);
    return out;
  }

 private:
  Pair evaluate(const Recipe& r, const Version& cuda, const Constraints& c) const {
    Pair p;
    p.recipe = &r;
    p.cuda = cuda;
    auto ok = [&](Id id, std::string detail) { p.passed.push_back({std::move(id), p.subject(), true, std::move(detail)}); };
    auto fail = [&](Id id, std::string problem, std::string detail = "") {
      if (detail.empty()) detail = problem;
      p.failed.push_back({std::move(id), std::move(problem), std::move(detail)});
    };

    if (c.torch) ok(Id::torch_version, fmt::format("{} is torch {}", r.name, r.torch_version().str()));
    if (c.cuda) ok(Id::recipe_cuda, fmt::format("{} supports CUDA {}", r.name, cuda.str()));
    p.tc = find_toolchain(in_.toolchains, cuda);
    if (!p.tc) {
      fail(Id::toolchain_data, fmt::format("no toolchains/cuda-{}.toml describes CUDA {}", cuda.str(), cuda.str()));
    } else {
      ok(Id::toolchain_data, fmt::format("CUDA {}: {}", cuda.str(), p.tc->file.filename().string()));
      std::vector<std::string> bad;
      for (const auto& a : archs_)
        if (!p.tc->compiles(a)) bad.push_back(arch_bound(a, cuda, in_.toolchains));
      if (bad.empty())
        ok(Id::toolkit_arch, fmt::format("CUDA {} compiles {}", cuda.str(), arch_names(archs_)));
      else
        for (auto& b : bad) fail(Id::toolkit_arch, b);
    }
    if (platform_.cuda_below) {
      if (cuda < *platform_.cuda_below)
        ok(Id::platform_cuda, fmt::format("platform {} builds with CUDA older than {}", platform_.name,
                                        platform_.cuda_below->str()));
      else
        fail(Id::platform_cuda, fmt::format("platform {} builds with CUDA older than {}: {} (toolchains/platforms.toml)",
                                          platform_.name, platform_.cuda_below->str(), platform_.cuda_below_why));
    }
    // The arch list must be spelled so that this release's parser accepts it.
    std::vector<std::string> syntax;
    std::string reader = r.arch.grammar == arch::Grammar::extension ? "torch.utils.cpp_extension"
                         : r.arch.grammar == arch::Grammar::cmake   ? "CMake"
                                                                    : "the TORCH_CUDA_ARCH_LIST parser";
    auto list_of = [&](auto pred) {
      std::vector<std::string> s;
      for (const auto& a : archs_)
        if (pred(a)) s.push_back(a.cc_name());
      return text::join(s, ", ");
    };
    if (r.arch.format == recipe::ArchFormat::torch) {
      if (!r.arch.two_digit_major && std::any_of(archs_.begin(), archs_.end(), [](auto& a) { return a.cc.major >= 10; }))
        syntax.push_back(fmt::format("{} rejects two-digit majors ({})", reader,
                                     list_of([](auto& a) { return a.cc.major >= 10; })));
    }
    if (!r.arch.variant_a && std::any_of(archs_.begin(), archs_.end(), [](auto& a) { return a.variant == arch::Variant::a; }))
      syntax.push_back(fmt::format("{} does not accept 'a' suffixes ({})", reader,
                                   list_of([](auto& a) { return a.variant == arch::Variant::a; })));
    if (!r.arch.variant_f && std::any_of(archs_.begin(), archs_.end(), [](auto& a) { return a.variant == arch::Variant::f; }))
      syntax.push_back(fmt::format("{} does not accept 'f' suffixes ({})", reader,
                                   list_of([](auto& a) { return a.variant == arch::Variant::f; })));
    if (r.arch.grammar == arch::Grammar::extension &&
        std::any_of(archs_.begin(), archs_.end(), [](auto& a) { return a.sass_from.has_value(); }))
      syntax.push_back(fmt::format("{} does not accept the A(B) form", reader));
    if (r.arch.format == recipe::ArchFormat::sm)
      for (const auto& a : recipe::print_arch_list(r.arch, archs_).unmapped)
        syntax.push_back(fmt::format("{} of {} builds nothing that runs on {} (it knows only sm {})", r.arch.env,
                                     r.name, a.cc_name(), sm_values(r.arch.values)));
    if (syntax.empty())
      ok(Id::arch_syntax, fmt::format("{} of {} accepts {}", reader, r.name, arch_names(archs_)));
    else
      for (auto& s : syntax) fail(Id::arch_syntax, s, fmt::format("{} of {}", s, r.name));

    std::optional<Version> py = c.python ? c.python : default_python_;
    if (py) {
      if (std::find(r.python.begin(), r.python.end(), *py) != r.python.end())
        ok(Id::python_version, fmt::format("{} supports Python {}", r.name, py->str()));
      else
        fail(Id::python_version,
             fmt::format("Python {}{} is not supported", py->str(), c.python ? "" : " (the default python3)"),
             fmt::format("{} supports Python {}, not {}{}", r.name, join_versions(r.python), py->str(),
                         c.python ? "" : " (the default python3)"));
    }
    if (req_.source_dir)
      ok(Id::source_url, fmt::format("--source {} (a local tree, as it is)", req_.source_dir->string()));
    else if (req_.source_url)
      ok(Id::source_url, fmt::format("--source-url {}", *req_.source_url));
    else if (!r.source.path.empty())
      ok(Id::source_url, fmt::format("source.path {} (a local tree, as it is)", r.source.path.string()));
    else if (r.source.url.empty())
      fail(Id::source_url, "no source.url or source.path in the recipe; give --source-url URL or --source DIR");
    else
      ok(Id::source_url, r.source.url);
    return p;
  }

  const Request& req_;
  const Inputs& in_;
  const std::vector<const Recipe*>& recipes_;
  const std::vector<arch::Arch>& archs_;
  std::optional<Version> default_python_;
  const toolchain::Platform& platform_;
};

// "sm_120 needs CUDA >= 12.8 (torch-2.5 + CUDA 12.4, 12.1, 11.8)": failures grouped by rule and
// problem, each with the pairs it stopped.
std::string explain(const std::vector<Pair>& pairs, const std::vector<FailedRule>& recipe_level) {
  static const std::vector<Id> order = {Id::recipe_cuda, Id::toolchain_data, Id::toolkit_arch, Id::platform_cuda,
                                                 Id::arch_syntax, Id::python_version, Id::source_url};
  std::map<std::pair<Id, std::string>, std::vector<const Pair*>> groups;
  for (const auto& p : pairs)
    for (const auto& f : p.failed) groups[{f.rule, f.problem}].push_back(&p);
  std::vector<std::string> parts;
  for (const auto& rule : order) {
    for (const auto& f : recipe_level)
      if (f.rule == rule) parts.push_back(fmt::format("rule {}: {}", rules::name(f.rule), f.problem));
    for (const auto& [key, ps] : groups) {
      if (key.first != rule) continue;
      std::string where;
      // CUDA-level problems list the pairs they stop, recipe-level ones the recipes.
      if (rule == Id::toolkit_arch || rule == Id::toolchain_data || rule == Id::platform_cuda) {
        std::vector<std::string> by_recipe;
        std::map<std::string, std::vector<Version>> m;
        std::vector<std::string> names;
        for (const Pair* p : ps) {
          if (!m.count(p->recipe->name)) names.push_back(p->recipe->name);
          m[p->recipe->name].push_back(p->cuda);
        }
        for (const auto& n : names) by_recipe.push_back(fmt::format("{} with CUDA {}", n, join_versions(m[n])));
        where = fmt::format(" [{}]", text::join(by_recipe, "; "));
      } else {
        std::vector<std::string> names;
        for (const Pair* p : ps)
          if (std::find(names.begin(), names.end(), p->recipe->name) == names.end()) names.push_back(p->recipe->name);
        where = fmt::format(" [{}]", text::join(names, ", "));
      }
      parts.push_back(fmt::format("rule {}: {}{}", rules::name(key.first), key.second, where));
    }
  }
  return text::join(parts, "; ");
}

std::string suggest_torch(const std::vector<const Pair*>& feasible, const std::vector<const Recipe*>& all) {
  std::set<Version> ok;
  for (const Pair* p : feasible) ok.insert(line_of(*p->recipe));
  std::set<Version> every;
  for (const Recipe* r : all) every.insert(line_of(*r));
  std::vector<Version> okv(ok.begin(), ok.end());
  std::vector<Version> newer;
  for (const auto& v : every)
    if (v >= okv.front()) newer.push_back(v);
  if (newer == okv && okv.size() > 1)
    return fmt::format("--torch {} or newer ({} can)", okv.front().str(), join_versions(okv));
  std::vector<Version> older;
  for (const auto& v : every)
    if (v <= okv.back()) older.push_back(v);
  if (older == okv && okv.size() > 1)
    return fmt::format("--torch {} or older ({} can)", okv.back().str(), join_versions(okv));
  std::vector<std::string> s;
  for (const auto& v : okv) s.push_back("--torch " + v.str());
  return text::join(s, " or ");
}

std::string suggest_cuda(const std::vector<const Pair*>& feasible, const Version& asked) {
  std::map<Version, const Recipe*, std::greater<>> best;  // CUDA -> newest recipe that can use it
  for (const Pair* p : feasible)
    if (!best.count(p->cuda)) best[p->cuda] = p->recipe;
  std::vector<std::string> s;
  for (const auto& [c, r] : best) {
    if (s.size() == 3) break;
    s.push_back(fmt::format("--cuda {} ({})", c.str(), r->name));
  }
  std::string prefix;
  if (best.begin()->first < asked) prefix = fmt::format("CUDA <= {}: ", best.begin()->first.str());
  else if (std::prev(best.end())->first > asked) prefix = fmt::format("CUDA >= {}: ", std::prev(best.end())->first.str());
  return prefix + text::join(s, " or ");
}

// The installed default when it would do, else the newest the newest candidate supports.
std::string suggest_python(const std::vector<const Pair*>& feasible, const std::optional<Version>& installed) {
  std::set<Version, std::greater<>> ok;
  for (const Pair* p : feasible)
    for (const auto& v : p->recipe->python) ok.insert(v);
  std::vector<std::string> s;
  for (const auto& v : ok) s.push_back(v.str());
  if (installed && ok.count(*installed))
    return fmt::format("--python {} (installed; supported: {})", installed->str(), text::join(s, ", "));
  return fmt::format("--python {} (supported: {})", feasible.front()->recipe->python.back().str(), text::join(s, ", "));
}

// A release of the recipe's [[build.compiler_defect]] ranges on `machine`: why it cannot build.
std::optional<std::string> compiler_defect(const Recipe& r, const toolchain::Compiler& c, const std::string& machine) {
  for (const auto& d : r.compiler_defects) {
    if (d.compiler != toolchain::to_string(c.kind) || c.version < d.from || !(c.version < d.below)) continue;
    if (!d.machines.empty() && std::find(d.machines.begin(), d.machines.end(), machine) == d.machines.end()) continue;
    return fmt::format("{} {} cannot build {}{} ({}; fixed in {})", c.kind == toolchain::CompilerKind::gcc ? "GCC" : "Clang",
                       c.version.str(), r.name, d.machines.empty() ? "" : " on " + machine, d.why, d.below.str());
  }
  return std::nullopt;
}

// A compiler the rule passed over, and why.
struct Rejected {
  std::filesystem::path path;
  std::string why;
  std::string line() const { return fmt::format("{}: {}", path.string(), why); }
};

std::string lines_of(const std::vector<Rejected>& rejected) {
  std::vector<std::string> s;
  for (const auto& r : rejected) s.push_back(r.line());
  return text::join(s, "; ");
}

// The newest that is accepted: GCC first (what PyTorch's own builds use), then Clang.
std::optional<toolchain::Compiler> pick_compiler(const std::vector<toolchain::Compiler>& cs, const Toolchain& tc,
                                                 const Recipe& r, const std::string& machine,
                                                 std::vector<Rejected>& rejected) {
  std::optional<toolchain::Compiler> best;
  for (const auto& c : cs) {
    std::optional<std::string> why = tc.rejects(c.kind, c.version);
    if (!why && c.kind == toolchain::CompilerKind::gcc && r.min_gcc && c.version < *r.min_gcc)
      why = fmt::format("GCC {} is older than {} needs (at least GCC {})", c.version.str(), r.name, r.min_gcc->str());
    if (!why) why = compiler_defect(r, c, machine);
    if (why) {
      rejected.push_back({c.path, *why});
      continue;
    }
    auto rank = [](const toolchain::Compiler& x) { return std::pair(x.kind == toolchain::CompilerKind::gcc, x.version); };
    if (!best || rank(c) > rank(*best)) best = c;
  }
  return best;
}

}  // namespace

std::vector<std::string> required_tools(const recipe::Recipe& r) {
  std::vector<std::string> out = r.tools;
  auto need = [&](const char* t) {
    if (std::find(out.begin(), out.end(), t) == out.end()) out.emplace_back(t);
  };
  for (const auto& t : recipe::driver_spec(r.driver).tools) need(t.c_str());
  return out;
}

namespace {

// The recipes resolution may choose from (abstract ones are bases, not builds), newest release
// first: that is the one resolution prefers.
std::vector<const Recipe*> candidate_recipes(const std::vector<Recipe>& all) {
  std::vector<const Recipe*> recipes;
  for (const auto& r : all)
    if (!r.abstract) recipes.push_back(&r);
  std::stable_sort(recipes.begin(), recipes.end(), [](const Recipe* a, const Recipe* b) {
    if (a->torch_version() != b->torch_version()) return a->torch_version() > b->torch_version();
    return a->version > b->version;
  });
  return recipes;
}

// Rule torch-version (and torch-pairing, for dependents): --torch names a release some recipe is
// for. The refusal when none is.
std::optional<std::string> torch_version_rule(const Request& req, const std::vector<const Recipe*>& recipes,
                                              std::vector<Rule>& rules) {
  if (!req.torch) return std::nullopt;
  bool any = std::any_of(recipes.begin(), recipes.end(),
                         [&](const Recipe* r) { return r->torch_version().starts_with(*req.torch); });
  if (any) return std::nullopt;
  if (auto why = pairing_refusal(recipes, *req.torch)) {
    rules.push_back({Id::torch_pairing, "", false, *why});
    return fmt::format("rule {}: {}", rules::name(Id::torch_pairing), *why);
  }
  std::set<Version> lines;
  for (const Recipe* r : recipes) lines.insert(line_of(*r));
  rules.push_back({Id::torch_version, "", false, fmt::format("no recipe for torch {}", req.torch->str())});
  return fmt::format("rule {}: no recipe ({}) is for torch {}; they cover torch {}", rules::name(Id::torch_version), req.recipe_label,
                     req.torch->str(), join_versions(std::vector<Version>(lines.begin(), lines.end())));
}

// What resolution knows of the request as it relaxes it for a way out.
struct Relaxing {
  const Request& req;
  const Inputs& in;
  const std::vector<const Recipe*>& recipes;
  const std::vector<arch::Arch>& archs;
  const toolchain::Python* default_python;  // the default python3, when there is one
  std::optional<Version> default_py;        // its release, when --python is not given
  const toolchain::Platform& platform;
};

// A refusal's words: what stands in the way, and the way out when there is one.
struct Refusal {
  std::string reason;
  std::string way_out;
};

// No pair passes: the refusal names the rules that failed and the way out, the smallest
// relaxation of what was asked that works.
Refusal infeasible_refusal(const Relaxing& x, const Evaluator& ev, const std::vector<Pair>& pairs,
                               const std::vector<FailedRule>& recipe_level) {
  const Request& req = x.req;
  std::string why = explain(pairs, pairs.empty() ? recipe_level : std::vector<FailedRule>{});
  if (pairs.empty() && recipe_level.empty()) why = "no recipe matches the request";
  std::vector<std::string> outs;
  if (req.torch) {
    auto ps = ev.pairs({std::nullopt, req.cuda, req.python});
    if (auto f = Evaluator::passing(ps); !f.empty()) outs.push_back(suggest_torch(f, x.recipes));
  }
  if (req.cuda) {
    auto ps = ev.pairs({req.torch, std::nullopt, req.python});
    if (auto f = Evaluator::passing(ps); !f.empty()) outs.push_back(suggest_cuda(f, *req.cuda));
  }
  auto py_way = [&](const Constraints& c) {
    Evaluator loose(req, x.in, x.recipes, x.archs, std::nullopt, x.platform);
    auto ps = loose.pairs(c);
    auto f = Evaluator::passing(ps);
    return f.empty() ? std::string()
                     : suggest_python(f, x.default_python ? std::optional(x.default_python->release()) : std::nullopt) +
                           (req.python ? "" : ", installed alongside the default python3 " + x.default_py->str());
  };
  if (req.python || x.default_py)
    if (auto s = py_way({req.torch, req.cuda, std::nullopt}); !s.empty()) outs.push_back(s);
  if (outs.empty() && (req.torch || req.cuda || req.python)) {
    Evaluator loose(req, x.in, x.recipes, x.archs, std::nullopt, x.platform);
    auto ps = loose.pairs({});
    if (auto f = Evaluator::passing(ps); !f.empty())
      outs.push_back(fmt::format("drop --torch/--cuda/--python: {} can build it", f.front()->subject()));
  }
  if (outs.empty())
    for (const auto& p : pairs)
      if (!p.failed.empty() && std::all_of(p.failed.begin(), p.failed.end(),
                                           [](const FailedRule& f) { return f.rule == Id::source_url; })) {
        outs.push_back(fmt::format("give --source-url URL, the repository to fetch {} from", p.recipe->name));
        break;
      }
  std::string way = outs.empty()
                        ? "no recipe archbuild knows can build this; write one (--recipe FILE) for a release and "
                          "CUDA that support it"
                        : text::join(outs, ", or ");
  return {fmt::format("cannot build {}: {}", arch_names(x.archs), why), way};
}

struct Choice {
  const Pair* pair = nullptr;
  const toolchain::Toolkit* installed = nullptr;  // its CUDA, installed here
};

// The newest recipe that passes; within it, a pair whose CUDA is installed (and whose nvcc lists
// the targets: rule nvcc-arch-list) before the recipe's preferred CUDA.
Choice choose_pair(const std::vector<const Pair*>& feasible, const std::vector<toolchain::Toolkit>& toolkits,
                   const std::vector<arch::Arch>& archs, std::vector<Rule>& rules) {
  const Recipe* chosen_recipe = feasible.front()->recipe;
  for (const Pair* p : feasible) {
    if (p->recipe != chosen_recipe) continue;
    for (const auto& tk : toolkits) {
      if (tk.release() != p->cuda) continue;
      std::vector<std::string> unlisted;
      for (const auto& a : archs)
        if (!tk.lists(a.cc)) unlisted.push_back("compute_" + std::to_string(a.cc.sm()));
      if (!unlisted.empty()) {
        rules.push_back({Id::nvcc_arch_list, p->subject(), false,
                         fmt::format("`{} --list-gpu-arch` lacks {}", tk.nvcc.string(), text::join(unlisted, ", "))});
        continue;
      }
      return {p, &tk};
    }
  }
  for (const Pair* p : feasible)
    if (p->recipe == chosen_recipe) return {p, nullptr};
  return {feasible.front(), nullptr};  // not reached: the first feasible pair is of chosen_recipe
}

// The rules after the choice: what the chosen pair needs installed. Each adds its rules to R;
// what is missing (exit 3, the choice stands) goes to `missing`.
struct Installed {
  const Request& req;
  const Inputs& in;
  const Recipe& recipe;
  const Toolchain& tc;
  std::string subject;
  Resolution& R;
  std::vector<std::string>& missing;
};

// Rule toolkit-installed: the chosen CUDA is installed, or where to get it (or which installed
// CUDA another recipe could use instead).
void toolkit_rule(const Installed& x, const Choice& choice, const std::vector<const Pair*>& feasible) {
  if (const toolchain::Toolkit* installed = choice.installed) {
    x.R.toolkit = *installed;
    std::string listed = installed->listed ? "; nvcc --list-gpu-arch confirms the targets" : "";
    x.R.rules.push_back({Id::toolkit_installed, x.subject, true,
                         fmt::format("CUDA {} at {} ({}){}", installed->version.str(), installed->root.string(),
                                     installed->found_by, listed)});
    return;
  }
  std::vector<std::string> have;
  for (const auto& tk : x.in.host.toolkits) have.push_back(tk.version.str());
  std::string alt;
  for (const Pair* p : feasible)
    for (const auto& tk : x.in.host.toolkits)
      if (alt.empty() && tk.release() == p->cuda)
        alt = fmt::format(" (or use the installed CUDA {}: --torch {} --cuda {})", tk.version.str(),
                          line_of(*p->recipe).str(), p->cuda.str());
  x.R.rules.push_back({Id::toolkit_installed, x.subject, false,
                       fmt::format("CUDA {} is not installed (found: {})", x.tc.cuda.str(),
                                   have.empty() ? "none" : text::join(have, ", "))});
  x.missing.push_back(fmt::format("CUDA {} is not installed: install it (e.g. to /usr/local/cuda-{}) or point "
                                  "CUDA_HOME at it{}",
                                  x.tc.cuda.str(), x.tc.cuda.str(), alt));
}

// Rule host-compiler: the newest GCC (then Clang) the CUDA release accepts. The user's
// CUDAHOSTCXX is a decision to honour or refuse, never to override: the refusal when it cannot
// be honoured.
std::optional<Refusal> host_compiler_rule(const Installed& x) {
  const Toolchain& tc = x.tc;
  Resolution& R = x.R;
  const toolchain::Host& host = x.in.host;
  std::vector<Rejected> rejected;
  if (host.cudahostcxx) {
    const toolchain::Compiler* hc = nullptr;
    for (const auto& c : host.compilers)
      if (c.found_by == "CUDAHOSTCXX") hc = &c;
    if (!hc) {
      R.rules.push_back({Id::host_compiler, x.subject, false, "CUDAHOSTCXX is not a GCC or Clang archbuild can run"});
      return Refusal{fmt::format("rule {}: CUDAHOSTCXX={} is not a GCC or Clang archbuild can run",
                                 rules::name(Id::host_compiler), *host.cudahostcxx),
                     fmt::format("point CUDAHOSTCXX at a g++ that CUDA {} accepts, or unset it", tc.cuda.str())};
    }
    auto picked = pick_compiler({*hc}, tc, x.recipe, R.platform.machine, rejected);
    if (!picked) {
      std::vector<toolchain::Compiler> others;
      for (const auto& c : host.compilers)
        if (c.found_by != "CUDAHOSTCXX") others.push_back(c);
      std::vector<Rejected> unused;
      auto alt = pick_compiler(others, tc, x.recipe, R.platform.machine, unused);
      R.rules.push_back({Id::host_compiler, x.subject, false, rejected.front().line()});
      return Refusal{fmt::format("rule {}: CUDAHOSTCXX={}: {}", rules::name(Id::host_compiler), *host.cudahostcxx,
                                 rejected.front().why),
                     alt ? fmt::format("CUDAHOSTCXX={} ({}) or unset CUDAHOSTCXX", alt->path.string(), alt->name())
                         : fmt::format("point CUDAHOSTCXX at g++ {} or older", tc.gcc.max ? tc.gcc.max->str() : "")};
    }
    R.compiler = picked;
  } else {
    R.compiler = pick_compiler(host.compilers, tc, x.recipe, R.platform.machine, rejected);
  }
  for (const auto& rej : rejected) R.rules.push_back({Id::host_compiler, x.subject, false, "not accepted: " + rej.line()});
  if (R.compiler) {
    R.rules.push_back({Id::host_compiler, x.subject, true,
                       fmt::format("{} at {} ({}) is accepted by CUDA {}", R.compiler->name(),
                                   R.compiler->path.string(), R.compiler->found_by, tc.cuda.str())});
  } else {
    std::string newest = tc.gcc.max ? tc.gcc.max->str() : "";
    x.missing.push_back(fmt::format("no host compiler CUDA {} accepts{}: install g++-{} and set CUDAHOSTCXX=/usr/bin/g++-{}",
                                    tc.cuda.str(),
                                    rejected.empty() ? " (no g++ or clang++ on PATH)" : " (" + lines_of(rejected) + ")",
                                    newest, newest));
  }
  return std::nullopt;
}

// Rule python-modules: the chosen interpreter imports what the driver's steps import (a pyenv
// python3 without `wheel` fails only at the package step, after the whole build: say so now,
// with where the module comes from). Without --python, the default python3 lacking them gives
// way to another interpreter of the same release that has them (nothing chosen before changes);
// an explicit --python is never replaced.
void python_modules_rule(const Installed& x) {
  Resolution& R = x.R;
  const auto& others = x.in.host.other_pythons;
  std::vector<std::string> needed = probed_modules(x.recipe, R.notes);
  std::vector<std::string> lacking;
  for (const auto& m : needed)
    if (!R.python->has_module(m)) lacking.push_back(m);
  auto has_all = [&](const toolchain::Python& py) {
    return std::all_of(needed.begin(), needed.end(), [&](const std::string& m) { return py.has_module(m); });
  };
  if (!lacking.empty() && !x.req.python) {
    for (const auto& other : others) {
      if (!has_all(other) || other.release() != R.python->release()) continue;
      R.rules.push_back({Id::python_default, x.subject, true,
                         fmt::format("{} lacks {}; {} (Python {}) has them: building with it (--python chooses)",
                                     R.python->path.string(), text::join(lacking, ", "), other.path.string(),
                                     other.version.str())});
      R.python = other;
      lacking.clear();
      break;
    }
  }
  if (auto rule = lacking.empty() ? std::nullopt : venv_installs(*R.python, lacking, x.subject)) {
    R.rules.push_back(*rule);
    return;
  }
  if (lacking.empty()) {
    if (!needed.empty())
      R.rules.push_back({Id::python_modules, x.subject, true,
                         fmt::format("{} can import {}", R.python->path.string(), text::join(needed, ", "))});
    return;
  }
  std::vector<std::string> packages;
  for (const auto& m : lacking) packages.push_back(toolchain::debian_package_for_module(m));
  std::string alternative;
  for (const auto& other : others)
    if (has_all(other))
      alternative = fmt::format(", or use --python {} (Python {}, which has them)", other.path.string(),
                                other.version.str());
  std::string detail = fmt::format("{} (Python {}) lacks the module{} {} that {} needs", R.python->path.string(),
                                   R.python->version.str(), lacking.size() > 1 ? "s" : "", text::join(lacking, ", "),
                                   fmt::format("the {} driver", recipe::to_string(x.recipe.driver)));
  R.rules.push_back({Id::python_modules, x.subject, false, detail});
  x.missing.push_back(fmt::format("{}: install {} (Debian) or `{} -m pip install {}`{}", detail,
                                  text::join(packages, " "), R.python->path.string(), text::join(lacking, " "),
                                  alternative));
}

// Rule python-installed: the interpreter of --python's release, else the default python3; then
// its modules.
void python_rule(const Installed& x, const toolchain::Python* default_python) {
  Resolution& R = x.R;
  if (x.req.python) {
    for (const auto& py : x.in.host.pythons)
      if (py.release() == *x.req.python) {
        R.python = py;
        break;
      }
  } else if (default_python) {
    R.python = *default_python;
  }
  if (!R.python) {
    std::string want = x.req.python ? x.req.python->str() : x.recipe.python.back().str();
    R.rules.push_back({Id::python_installed, x.subject, false,
                       fmt::format("no python{} on PATH, among pyenv's versions or in /usr/bin", want)});
    x.missing.push_back(fmt::format("python{} is not on PATH, among pyenv's versions or in /usr/bin: install it, or "
                                    "give its path (supported by {}: {})",
                                    want, x.recipe.name, join_versions(x.recipe.python)));
    return;
  }
  R.rules.push_back({Id::python_installed, x.subject, true,
                     fmt::format("Python {} at {} ({})", R.python->version.str(), R.python->path.string(),
                                 R.python->found_by)});
  python_modules_rule(x);
}

// Rule tool-installed: the programs the build runs are on PATH.
void tools_rule(const Installed& x) {
  for (const auto& t : required_tools(x.recipe)) {
    auto it = x.in.host.tools.find(t);
    if (it != x.in.host.tools.end()) {
      x.R.tools[t] = it->second;
      if (auto v = x.in.host.tool_versions.find(t); v != x.in.host.tool_versions.end()) x.R.tool_versions[t] = v->second;
      x.R.rules.push_back({Id::tool_installed, x.subject, true, fmt::format("{} at {}", t, it->second.string())});
    } else {
      x.R.rules.push_back({Id::tool_installed, x.subject, false, fmt::format("{} is not on PATH", t)});
      x.missing.push_back(fmt::format("{} is not on PATH: install it", t));
    }
  }
}

}  // namespace

// The request's rules first (targets, torch version), then every (recipe, CUDA) pair's static
// rules (Evaluator); the newest passing pair is chosen, and the rules of what it needs installed
// run for it alone.
// The platform built for: --platform (every target must be a GPU it can have: exit 2), else
// this machine's. Without --platform a target only another platform has is a note, not a
// refusal: device code for it still compiles here. Its recipe facts join the recipe's env, and a
// platform whose CUDA is the system's makes the wheel host-bound.
std::optional<std::string> platform_rule(const Request& req, const Inputs& in, const std::vector<arch::Arch>& archs,
                                         Resolution& R) {
  const auto& ps = in.platforms;
  toolchain::Machine machine = in.machine ? *in.machine : toolchain::this_machine(in.jetpacks);
  std::vector<toolchain::PlatformGpu> gpus;
  if (req.platform)
    for (const auto& a : archs) gpus.push_back({a.cc, "", fmt::format("--sm {}", a.cc_name())});
  auto choice = toolchain::choose_platform(ps, req.platform, gpus, machine);
  if (!choice) {
    R.rules.push_back({Id::platform, "", false, choice.error().message});
    return choice.error().message;
  }
  R.platform = *choice->platform;
  R.platform_why = choice->why;
  if (!req.platform)
    for (const auto& a : archs)
      if (auto no = ps.refuses(R.platform, a.cc))
        R.notes.push_back(fmt::format("{}: a wheel for platform {} cannot run there; --platform names the platform the "
                                      "GPU sits on ({})",
                                      *no, R.platform.name, text::join(ps.names(), ", ")));
  R.rules.push_back({Id::platform, "", true,
                     fmt::format("{} ({}; wheel tag *_{}, CUDA libraries from {}) from {}", R.platform.name,
                                 R.platform.description, R.platform.wheel_arch,
                                 R.platform.pip_cuda ? "nvidia-* pip packages" : "the system (host-bound wheel)",
                                 R.platform_why)});
  return std::nullopt;
}

// The chosen recipe as built for the platform: [platform.NAME] env over [build.env], and a
// host-bound layout where the platform's CUDA is the system's.
void apply_platform(Resolution& R) {
  if (auto it = R.recipe.platforms.find(R.platform.name); it != R.recipe.platforms.end()) {
    // What the official builds set with this CUDA release (ascending: the newest applicable wins).
    for (const auto& [since, env] : it->second.official_env_since_cuda)
      if (R.toolchain.cuda >= since)
        for (const auto& [k, v] : env) it->second.official_env[k] = v;
    it->second.official_env_since_cuda.clear();
    std::vector<std::string> applied;
    for (const auto& [k, v] : it->second.env) {
      R.recipe.env[k] = v;
      applied.push_back(fmt::format("{}={}", k, v));
    }
    if (!applied.empty())
      R.notes.push_back(fmt::format("platform {} adds {} to the build environment (recipe [platform.{}] env)",
                                    R.platform.name, text::join(applied, " "), R.platform.name));
    std::vector<std::string> also;
    for (const auto& [k, v] : it->second.official_env)
      if (!R.recipe.env.count(k))
        also.push_back(v.find(' ') == std::string::npos ? fmt::format("--env {}={}", k, v) : fmt::format("--env '{}={}'", k, v));
    if (!also.empty())
      R.notes.push_back(fmt::format("the official {} builds also set {} (recipe [platform.{}] official_env: each needs "
                                    "what this host may lack)",
                                    R.platform.name, text::join(also, " "), R.platform.name));
  }
  if (!R.platform.pip_cuda) R.recipe.wheel_layout = recipe::WheelLayout::host;
}

// What the stages do for this tree that the plan's environment does not show.
void build_notes(Resolution& R) {
  if (R.recipe.forwards_env_as_list)
    R.notes.push_back(fmt::format("{} reads its build environment as one CMake list, cutting a value at its first ';' "
                                  "(recipe [build] forwards_env_as_list): archbuild's compiler launchers reach CMake "
                                  "as cache entries of a seed file that CMAKE_TOOLCHAIN_FILE names",
                                  R.recipe.name));
}

// A wheel is built on a host of its platform's machine: torch's build runs its own host code
// (code generators, the tests of configure), so no cross build is offered.
void platform_host_rule(const Inputs& in, Resolution& R, std::vector<std::string>& missing) {
  toolchain::Machine machine = in.machine ? *in.machine : toolchain::this_machine(in.jetpacks);
  if (machine.arch == R.platform.machine) {
    R.rules.push_back({Id::platform_host, "", true, fmt::format("this machine is {}", machine.arch)});
    return;
  }
  std::string why = fmt::format("a {} wheel builds on an {} host; this machine is {}: run the same command there",
                                R.platform.name, R.platform.machine, machine.arch.empty() ? "unknown" : machine.arch);
  R.rules.push_back({Id::platform_host, "", false, why});
  missing.push_back(why);
}

Resolution resolve(const Request& req, const Inputs& in) {
  Resolution R;
  R.source_url = req.source_url;
  R.source_dir = req.source_dir;
  auto refuse = [&](std::string reason, std::string way_out = "") {
    R.status = Exit::bad_input;
    R.message = way_out.empty() ? reason : fmt::format("{}. Way out: {}", reason, way_out);
    R.reason = std::move(reason);
    R.way_out = std::move(way_out);
    return R;
  };

  // The arch list: the targets as SASS, plus PTX on the newest when asked. Never empty.
  std::vector<arch::Arch> archs = arch::normalize(req.targets);
  if (archs.empty()) return refuse("no target architecture: give --sm, e.g. --sm 90");
  if (req.ptx) archs.back().ptx = true;
  R.archs = archs;
  R.rules.push_back({Id::targets, "", true, arch_names(archs)});
  if (auto refusal = platform_rule(req, in, archs, R)) return refuse(*refusal);

  std::vector<const Recipe*> recipes = candidate_recipes(in.recipes);
  if (recipes.empty()) return refuse(fmt::format("no recipe to resolve from ({})", req.recipe_label));
  if (auto refusal = torch_version_rule(req, recipes, R.rules)) return refuse(*refusal);
  // `--python PATH` that is no interpreter: said as it is, not as "python3.X is not on PATH".
  if (in.host.python_refused) return refuse(*in.host.python_refused);

  const toolchain::Python* default_python = in.host.pythons.empty() ? nullptr : &in.host.pythons.front();
  std::optional<Version> default_py;
  if (!req.python && default_python) default_py = default_python->release();

  Evaluator ev(req, in, recipes, archs, default_py, R.platform);
  std::vector<FailedRule> recipe_level;
  std::vector<Pair> pairs = ev.pairs({req.torch, req.cuda, req.python}, &recipe_level);
  for (const auto& p : pairs) {
    for (const auto& ok : p.passed) R.rules.push_back(ok);
    for (const auto& f : p.failed) R.rules.push_back({f.rule, p.subject(), false, f.detail});
  }
  for (const auto& f : recipe_level) R.rules.push_back({f.rule, "", false, f.problem});

  std::vector<const Pair*> feasible = Evaluator::passing(pairs);
  if (feasible.empty()) {
    Refusal no = infeasible_refusal({req, in, recipes, archs, default_python, default_py, R.platform}, ev, pairs, recipe_level);
    return refuse(std::move(no.reason), std::move(no.way_out));
  }

  const Choice choice = choose_pair(feasible, in.host.toolkits, archs, R.rules);
  R.recipe = *choice.pair->recipe;
  R.toolchain = *choice.pair->tc;
  apply_platform(R);
  build_notes(R);
  std::vector<std::string> missing;
  platform_host_rule(in, R, missing);
  const Installed x{req, in, *choice.pair->recipe, *choice.pair->tc, choice.pair->subject(), R, missing};
  toolkit_rule(x, choice, feasible);
  if (auto refusal = host_compiler_rule(x)) return refuse(std::move(refusal->reason), std::move(refusal->way_out));
  python_rule(x, default_python);
  tools_rule(x);

  // The list in the syntax of this release's reader.
  recipe::ArchListText printed = recipe::print_arch_list(x.recipe.arch, archs);
  R.arch_list = printed.text;
  for (auto& n : printed.notes) R.notes.push_back(n);
  R.rules.push_back({Id::arch_list, x.subject, true, fmt::format("{}={}", x.recipe.arch.env, R.arch_list)});

  if (!missing.empty()) {
    R.status = Exit::missing_tool;
    R.message = text::join(missing, "; ");
  }
  return R;
}

Result<recipe::Recipe> pair_with_torch(const std::vector<recipe::Recipe>& candidates, const recipe::Recipe& torch,
                                       const std::string& asked) {
  const Version line = torch.version.prefix(2);
  const recipe::Recipe* best = nullptr;
  std::vector<const recipe::Recipe*> others;
  for (const auto& c : candidates) {
    if (!c.torch)
      return Error::bad_input(fmt::format("{}: {} ({}) builds no dependent of torch (it has no `torch` key); "
                                          "--with takes what builds against the torch of --recipe, e.g. torchvision",
                                          asked, c.name, c.file.string()));
    bool serves = c.torch->prefix(2) == line ||
                  std::find(c.torch_also.begin(), c.torch_also.end(), line) != c.torch_also.end();
    if (serves && (!best || c.version > best->version)) best = &c;
    others.push_back(&c);
  }
  if (best) return *best;
  // The newest pairs first: the way out is usually the torch just before.
  std::sort(others.begin(), others.end(), [](const recipe::Recipe* x, const recipe::Recipe* y) {
    return *x->torch != *y->torch ? *x->torch > *y->torch : x->version > y->version;
  });
  std::vector<std::string> pairs;
  for (std::size_t i = 0; i < others.size() && i < 3; ++i)
    pairs.push_back(fmt::format("{} ({}) pairs with torch {}", others[i]->name, others[i]->version.str(),
                                others[i]->torch->prefix(2).str()));
  if (others.size() > 3) pairs.back() += fmt::format(" ({} more: `archbuild recipes`)", others.size() - 3);
  return Error::bad_input(fmt::format(
      "{}: no recipe pairs with {} {} ({}){}{}; build a torch it pairs with{} or drop {}", asked, torch.package,
      torch.version.str(), torch.name, pairs.empty() ? "" : "; the newest pairs: ", text::join(pairs, ", "),
      others.empty() ? "" : fmt::format(" (--torch {})", others.front()->torch->prefix(2).str()), asked));
}

Result<std::vector<recipe::Recipe>> select_recipes(const std::optional<std::string>& arg,
                                                   const std::vector<recipe::Recipe>& library,
                                                   const recipe::Search& search) {
  auto of_library = [&](auto pred) {
    std::vector<recipe::Recipe> out;
    for (const auto& r : library)
      if (!r.abstract && pred(r)) out.push_back(r);
    return out;
  };
  if (!arg) return of_library([](const recipe::Recipe& r) { return r.package == "torch"; });
  std::error_code ec;
  bool is_file = recipe::looks_like_path(*arg) || std::filesystem::is_regular_file(*arg, ec);
  auto refuse_abstract = [](const recipe::Recipe& r) {
    return Error::bad_input(fmt::format("recipe '{}' ({}) is abstract: a base that others extend; pick a recipe "
                                        "that extends it (see `archbuild recipes`)", r.name, r.file.string()));
  };
  // A recipe's name means that recipe, before a stray file of that name (recipe::load's rule).
  if (!recipe::looks_like_path(*arg))
    for (const auto& r : library)
      if (r.name == *arg) {
        if (r.abstract) return refuse_abstract(r);
        return std::vector<recipe::Recipe>{r};
      }
  bool named = false;
  for (const auto& d : search.dirs) named = named || std::filesystem::is_regular_file(d / (*arg + ".toml"), ec);
  if (is_file || named) {
    auto r = recipe::load(*arg, search);
    if (!r) return r.error();
    if (r->abstract) return refuse_abstract(*r);
    return std::vector<recipe::Recipe>{std::move(*r)};
  }
  // A package name: every recipe of it.
  auto pkg = of_library([&](const recipe::Recipe& r) { return r.package == *arg; });
  if (!pkg.empty()) return pkg;
  auto r = recipe::load(*arg, search);  // for its "no recipe named …" message
  if (!r) return r.error();
  return std::vector<recipe::Recipe>{std::move(*r)};
}

}  // namespace archbuild::plan
