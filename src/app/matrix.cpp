#include "app/matrix.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "app/inputs.hpp"
#include "arch/arch.hpp"
#include "recipe/recipe.hpp"
#include "store/layout.hpp"
#include "toolchain/jetpack.hpp"
#include "toolchain/platform.hpp"

namespace archbuild::app {

nlohmann::json MatrixJob::to_json() const {
  nlohmann::json j = {{"sm", sm}, {"recipe", recipe}, {"torch", torch}, {"cuda", cuda}, {"arch_list", arch_list}};
  if (!platform.empty()) {
    j["platform"] = platform;
    j["runs_on"] = runs_on;
  }
  if (!key.empty()) {
    j["key"] = key;
    j["digest"] = digest;
  }
  if (store) j["store"] = *store;
  return j;
}

nlohmann::json MatrixRefusal::to_json() const {
  nlohmann::json j = {{"sm", sm}, {"recipe", recipe}, {"cuda", cuda}, {"rule", rule}, {"message", message}};
  if (!platform.empty()) j["platform"] = platform;
  return j;
}

nlohmann::json MatrixNeed::to_json() const {
  return {{"sm", sm}, {"recipe", recipe}, {"cuda", cuda}, {"message", message}};
}

namespace {

template <class T>
nlohmann::json array_of(const std::vector<T>& items) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& i : items) a.push_back(i.to_json());
  return a;
}

// Where the build store has a job's key: the key, as `wheel` computes it here, and the lookup.
struct JobInStore {
  std::string key;
  std::optional<StoreLookup> lookup;  // nullopt: the key could not be computed here (why)
  std::string why;
  std::string refused;  // present, but `wheel` would not use it (--store-trust): why
};

JobInStore look_up_job(remote::BuildStore& store, const MatrixRequest& a, const std::string& sm,
                       const plan::Resolution& res, const Session& s) {
  ResolveArgs ra;
  ra.sm = {sm};
  ra.source_url = a.source_url;
  ra.python = a.python;
  JobInStore j;
  try {
    plan::PlanOptions budget;
    prepare::Request q = prepare_request(ra, budget, 0, false, true, s.facts());
    auto prep = prepare_from_args(res, q, ra, s);
    if (!prep) {
      j.why = prep.error().message;
      return j;
    }
    j.key = prep->plan->key;
    j.lookup = look_up(store, j.key);
    // With --store-trust, a stored key counts only when `wheel` would take it: signed by a
    // trusted key (the signature is read, the wheel is not).
    if (j.lookup->state == StoreLookup::State::present && !store.config().trust.empty()) {
      auto dir = store::choose_cache_dir(s.cache_dir);
      std::filesystem::path staging = dir ? store::Layout(dir->dir).store_pull_dir(j.key + ".trust")
                                          : std::filesystem::temp_directory_path() / ("archbuild-trust-" + j.key);
      auto signer = store.check_trust(j.key, *j.lookup->manifest, staging);
      std::error_code ec;
      std::filesystem::remove_all(staging, ec);
      if (!signer) j.refused = signer.error().message;
    }
  } catch (const Failure& f) {
    j.why = f.error.message;
  }
  return j;
}

// The rule a refusal names: the first failed rule of the pair asked for, else any failed one.
std::string refusal_rule(const plan::Resolution& r, const std::string& subject) {
  for (const auto& rule : r.rules)
    if (!rule.ok && rule.subject == subject) return rules::str(rule.id);
  for (const auto& rule : r.rules)
    if (!rule.ok) return rules::str(rule.id);
  return "unknown";
}

}  // namespace

nlohmann::json Matrix::to_json() const {
  nlohmann::json doc = {{"include", array_of(include)}, {"refused", array_of(refused)}, {"needs_install", array_of(needs)}};
  if (store_url) {
    doc["stored"] = array_of(stored);
    doc["store"] = *store_url;
  }
  return doc;
}

nlohmann::json Matrix::github() const { return {{"include", array_of(include)}}; }

Matrix expand_matrix(const MatrixRequest& a, const Session& s) {
  // A --cuda that is no release (X.Y) is bad input, not "no job accepted".
  cuda_release(a.cuda);
  ResolveArgs ra;
  ra.sm = a.sm;
  ra.recipe = a.recipe;
  ra.source_url = a.source_url;
  ra.python = a.python;
  auto base = request_from_args(ra, s.facts());
  auto inputs = inputs_from_args(ra, base, s);
  std::optional<remote::BuildStore> build_store = open_store(a.store);  // bad input before any job

  // The platforms to emit jobs for: each runs on a CI runner of its own machine (its `ci_runner`).
  // --platform: every target on each platform asked for; without it, each target on the platform
  // its GPUs sit on (as `wheel` and `resolve` choose: a CC only sbsa has, 12.1, is an sbsa job).
  const auto& ps = s.facts().platforms();
  const auto machine = toolchain::this_machine(s.facts().jetpacks());
  auto choose = [&](const std::optional<std::string>& name, std::vector<toolchain::PlatformGpu> gpus) {
    auto c = toolchain::choose_platform(ps, name, gpus, machine);  // unknown name / machine: exit 2
    if (!c) throw Failure(c.error());
    return c->platform;
  };
  const toolchain::Platform* here = choose(std::nullopt, {});  // keys are computed here for its jobs only
  std::vector<std::pair<const toolchain::Platform*, arch::Arch>> pairs;  // platform, target
  if (!a.platforms.empty()) {
    std::vector<const toolchain::Platform*> platforms;
    for (const auto& name : a.platforms)
      if (auto* p = choose(name, {}); std::find(platforms.begin(), platforms.end(), p) == platforms.end())
        platforms.push_back(p);
    for (const auto* platform : platforms)
      for (const auto& target : base.targets) pairs.emplace_back(platform, target);
  } else {
    for (const auto& target : base.targets) {
      auto c = toolchain::choose_platform(ps, std::nullopt, {{target.cc, "", "--sm"}}, machine);
      const toolchain::Platform* platform = c ? c->platform : nullptr;
      // A Jetson GPU several platforms list (8.7: jetson under JetPack 5/6, sbsa under 7.2): its
      // newest JetPack decides, as install-command decides for a Jetson asked about from elsewhere.
      if (!platform)
        if (const auto* jp = s.facts().jetpacks().newest_for({target.cc})) platform = ps.find(jp->platform);
      pairs.emplace_back(platform ? platform : here, target);  // none: this machine's, whose rule refuses
    }
  }
  bool several = false;
  for (const auto& [platform, target] : pairs) several = several || platform != pairs.front().first || platform->name != "x86_64";
  // What a job's "recipe" says, for `wheel --recipe` to read back: the file as given when
  // --recipe is a file (a name `wheel` would not find), else the recipe's name.
  std::error_code ec;
  const bool recipe_file = !a.recipe.empty() && (recipe::looks_like_path(a.recipe) || std::filesystem::is_regular_file(a.recipe, ec));
  auto recipe_of = [&](const recipe::Recipe& r) { return recipe_file ? a.recipe : r.name; };

  Matrix m;
  std::vector<std::string> unreachable;
  if (build_store) m.store_url = build_store->url().text();
  for (const auto& [platform, target] : pairs) {
      std::string sm = arch::to_torch({target}).text;
      for (const auto& r : inputs.recipes) {
        if (r.abstract) continue;
        for (const auto& cuda : r.cuda) {
          if (!a.cuda.empty() && cuda.str() != a.cuda) continue;
          plan::Request req = base;
          req.targets = {target};
          req.torch = r.torch_version();
          req.cuda = cuda;
          req.recipe_label = r.name;
          plan::Inputs in = inputs;
          in.recipes = {r};
          // Named even when it is this machine's: a GPU of another platform is refused, not built here.
          req.platform = platform->name;
          // The job runs on a runner of the platform's machine, not here.
          if (!a.platforms.empty() || platform != here) in.machine = toolchain::Machine{platform->machine, !platform->pip_cuda, ""};
          auto res = plan::resolve(req, in);
          std::string subject = fmt::format("{} + CUDA {}", r.name, cuda.str());
          const std::string shown_platform = several ? platform->name : "";
          if (res.status == Exit::bad_input) {
            m.refused.push_back({sm, r.name, cuda.str(), refusal_rule(res, subject), res.message, shown_platform});
            continue;
          }
          if (platform->ci_runner.empty()) {
            m.refused.push_back({sm, r.name, cuda.str(), "platform-runner",
                                 fmt::format("platform {} has no hosted CI runner ({}): build on the device "
                                             "itself (a self-hosted runner)",
                                             platform->name, ps.file.filename().string()),
                                 shown_platform});
            continue;
          }
          MatrixJob job;
          job.sm = sm;
          job.recipe = recipe_of(r);
          job.torch = r.torch_version().str();
          job.cuda = cuda.str();
          job.arch_list = res.arch_list;
          if (several) {
            job.platform = platform->name;
            job.runs_on = platform->ci_runner;
          }
          if (res.status == Exit::missing_tool) m.needs.push_back({sm, r.name, cuda.str(), res.message});
          if (build_store) {
            JobInStore found;
            if (res.status == Exit::missing_tool || platform != here)
              found.why = res.status == Exit::missing_tool ? res.message
                                                            : fmt::format("a {} key is computed on its runner", platform->name);
            else
              found = look_up_job(*build_store, a, sm, res, s);
            if (found.lookup && found.lookup->stops(*build_store))
              throw Failure(prepare::store_required_stop(found.lookup->problem).error);
            if (found.lookup && found.lookup->state == StoreLookup::State::unreachable) unreachable.push_back(found.lookup->problem);
            if (found.lookup && found.lookup->state == StoreLookup::State::present && found.refused.empty()) {
              job.key = found.key;
              job.digest = found.lookup->manifest->digest;
              m.stored.push_back(job);
              continue;
            }
            if (!found.lookup) {
              job.store = nlohmann::json{{"checked", false}, {"why", found.why}};
            } else {
              job.store = found.lookup->to_json(*build_store);  // has_key false, reachable, problem
              (*job.store)["checked"] = true;
              (*job.store)["key"] = found.key;
              if (!found.refused.empty()) {
                (*job.store)["refused"] = found.refused;
                note(s, fmt::format("sm {} {} CUDA {}: {}: a job", sm, job.recipe, job.cuda, found.refused));
              }
            }
          }
          m.include.push_back(std::move(job));
        }
      }
  }
  // Jobs stay jobs (each `wheel` builds, as it does with the store down), but say so: a night
  // that silently rebuilds everything is a store nobody noticed was down.
  if (!unreachable.empty())
    warn(s, fmt::format("the build store {} cannot be read ({}): {} job(s) could not be looked up and are built",
                        *m.store_url, unreachable.front(), unreachable.size()));
  for (const auto& j : m.stored)
    note(s, fmt::format("sm {} {} CUDA {}: the build store has key {}: no job", j.sm, j.recipe, j.cuda, j.key.substr(0, 16)));
  return m;
}

}  // namespace archbuild::app
