// archbuild matrix --sm LIST [--recipe NAME|FILE|PACKAGE] [--format text|json|github] [--json]
// Expands targets × recipes × CUDA into the build jobs resolution accepts, for nightly CI: each
// CC of --sm on its own, each candidate recipe (abstract ones skipped), each CUDA it supports.
// Every job is resolved against this host as discovered, except that a missing tool (the
// toolkit, a compiler, Python) does not refuse a job — the CI runner installs it. Refusals
// (bad input: toolkit-arch, arch-syntax, …) are listed with the rule that failed.
//
// --format github prints exactly the `strategy.matrix` value, on one line, for fromJSON():
//   {"include":[{"sm":"9.0","recipe":"torch-2.9","torch":"2.9.1","cuda":"13.0","arch_list":"9.0"}]}
// --format json (or --json): {"include":[…], "refused":[{"sm","recipe","cuda","rule","message"}],
//   "needs_install":[{"sm","recipe","cuda","message"}]}
// --platform x86_64,sbsa: jobs for each platform, each with "platform" and "runs_on" (the
//   platform's hosted runner label, toolchains/platforms.toml) in its object.
// --store URL (or $ARCHBUILD_STORE; docs/store.md): each accepted job whose tools are here gets
//   its key computed as `wheel` computes it (the tree fetched into the cache's mirrors, the build
//   venv) and looked up; a job the store has is listed under "stored" (key, digest) instead of
//   "include", so a night whose keys are all stored starts no build job. A job whose key cannot
//   be computed here (a tool missing) stays in "include" with "store": {"checked": false, "why"}.
// Exit: 0 at least one job, or every accepted job in the store; 1 no job accepted; 2 bad input.
#include <fmt/format.h>

#include "arch/arch.hpp"
#include "arch/arch_data.hpp"
#include "cli/context.hpp"
#include "cli/host.hpp"
#include "cli/resolve_common.hpp"
#include "cli/store_common.hpp"
#include "core/text.hpp"
#include "toolchain/platform.hpp"

namespace archbuild::cli {

namespace {

struct MatrixArgs {
  std::vector<std::string> sm;
  std::string recipe;
  std::string format = "text";
  std::vector<std::string> platforms;  // --platform x86_64,sbsa; empty: this machine's
  std::string cuda;                    // --cuda X.Y: only jobs of that CUDA release
  std::string source_url;              // --source-url: where the jobs' keys are computed from
  std::string python;                  // --python X.Y|PATH: the interpreter of the key
  StoreArgs store;
};

// Where the build store has a job's key: the key, as `wheel` computes it here, and the lookup.
struct JobInStore {
  std::string key;
  std::optional<StoreLookup> lookup;  // nullopt: the key could not be computed here (why)
  std::string why;
};

JobInStore look_up_job(remote::BuildStore& store, const MatrixArgs& a, const std::string& sm, const plan::Resolution& res,
                       const Context& ctx) {
  ResolveArgs ra;
  ra.sm = {sm};
  ra.source_url = a.source_url;
  ra.python = a.python;
  JobInStore j;
  try {
    plan::PlanOptions budget;
    prepare::Request q = prepare_request(ra, budget, 0, false, true);
    auto prep = prepare_from_args(res, q, ra, ctx);
    if (!prep) {
      j.why = prep.error().message;
      return j;
    }
    j.key = prep->plan->key;
    j.lookup = look_up(store, j.key);
  } catch (const Failure& f) {
    j.why = f.error.message;
  }
  return j;
}

// The rule a refusal names: the first failed rule of the pair asked for, else any failed one.
std::string refusal_rule(const plan::Resolution& r, const std::string& subject) {
  for (const auto& rule : r.rules)
    if (!rule.ok && rule.subject == subject) return rule.id;
  for (const auto& rule : r.rules)
    if (!rule.ok) return rule.id;
  return "unknown";
}

void run_matrix(const MatrixArgs& a, Context& ctx) {
  if (a.format == "json") ctx.json = true;
  // A --cuda that is no release (X.Y) is bad input, not "no job accepted".
  if (!a.cuda.empty() && (!Version::parse(a.cuda) || Version::parse(a.cuda)->parts.size() != 2))
    throw Failure(Error::bad_input(fmt::format("--cuda {}: expected a CUDA release X.Y, e.g. 13.0", text::quoted(a.cuda))));
  ResolveArgs ra;
  ra.sm = a.sm;
  ra.recipe = a.recipe;
  ra.source_url = a.source_url;
  ra.python = a.python;
  auto base = request_from_args(ra);
  auto inputs = inputs_from_args(ra, base, ctx);
  std::optional<remote::BuildStore> build_store = open_store(a.store);  // bad input before any job

  // The platforms to emit jobs for: each runs on a CI runner of its own machine (its `ci_runner`).
  const auto& ps = toolchain::Platforms::shipped();
  std::vector<const toolchain::Platform*> platforms;
  const auto machine = toolchain::this_machine();
  auto choose = [&](const std::optional<std::string>& name) {
    auto c = toolchain::choose_platform(ps, name, {}, machine);  // unknown name / machine: exit 2
    if (!c) throw Failure(c.error());
    if (std::find(platforms.begin(), platforms.end(), c->platform) == platforms.end()) platforms.push_back(c->platform);
  };
  choose(std::nullopt);
  const toolchain::Platform* here = platforms.front();  // keys are computed here for its jobs only
  if (!a.platforms.empty()) platforms.clear();
  for (const auto& name : a.platforms) choose(name);
  const bool several = platforms.size() > 1 || platforms.front()->name != "x86_64";

  nlohmann::json include = nlohmann::json::array(), refused = nlohmann::json::array(),
                 needs = nlohmann::json::array(), stored = nlohmann::json::array();
  for (const auto* platform : platforms)
  for (const auto& target : base.targets) {
    std::string sm = arch::to_torch({target}).text;  // "9.0", "12.0a", "9.0+PTX": --sm reads it back
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
        if (!a.platforms.empty()) in.machine = toolchain::Machine{platform->machine, !platform->pip_cuda, ""};
        auto res = plan::resolve(req, in);
        std::string subject = fmt::format("{} + CUDA {}", r.name, cuda.str());
        if (res.status == Exit::bad_input) {
          refused.push_back({{"sm", sm},
                             {"recipe", r.name},
                             {"cuda", cuda.str()},
                             {"rule", refusal_rule(res, subject)},
                             {"message", res.message}});
          if (several) refused.back()["platform"] = platform->name;
          continue;
        }
        if (platform->ci_runner.empty()) {
          refused.push_back({{"sm", sm},
                             {"recipe", r.name},
                             {"cuda", cuda.str()},
                             {"rule", "platform-runner"},
                             {"message", fmt::format("platform {} has no hosted CI runner ({}): build on the device "
                                                     "itself (a self-hosted runner)",
                                                     platform->name, ps.file.filename().string())}});
          if (several) refused.back()["platform"] = platform->name;
          continue;
        }
        nlohmann::json job = {{"sm", sm},
                              {"recipe", r.name},
                              {"torch", r.torch_version().str()},
                              {"cuda", cuda.str()},
                              {"arch_list", res.arch_list}};
        // Only off a plain x86_64 matrix, so existing workflows' objects stay what they were.
        if (several) {
          job["platform"] = platform->name;
          job["runs_on"] = platform->ci_runner;
        }
        if (res.status == Exit::missing_tool)
          needs.push_back({{"sm", sm}, {"recipe", r.name}, {"cuda", cuda.str()}, {"message", res.message}});
        if (build_store) {
          JobInStore found;
          if (res.status == Exit::missing_tool || platform != here)
            found.why = res.status == Exit::missing_tool ? res.message
                                                          : fmt::format("a {} key is computed on its runner", platform->name);
          else
            found = look_up_job(*build_store, a, sm, res, ctx);
          if (found.lookup && found.lookup->state == StoreLookup::State::unreachable && build_store->config().required)
            throw Failure(Error::missing_tool(fmt::format("--store-required: {}", found.lookup->problem)));
          if (found.lookup && found.lookup->state == StoreLookup::State::present) {
            job["key"] = found.key;
            job["digest"] = found.lookup->manifest->digest;
            stored.push_back(job);
            continue;
          }
          if (!found.lookup)
            job["store"] = {{"checked", false}, {"why", found.why}};
          else {
            job["store"] = found.lookup->to_json(*build_store);  // has_key false, reachable, problem
            job["store"]["checked"] = true;
            job["store"]["key"] = found.key;
          }
        }
        include.push_back(job);
      }
    }
  }
  const bool all_stored = include.empty() && !stored.empty();
  if (include.empty() && !all_stored) ctx.exit = Exit::not_fine;
  for (const auto& j : stored)
    note(ctx, fmt::format("sm {} {} CUDA {}: the build store has key {}: no job", j["sm"].get<std::string>(),
                          j["recipe"].get<std::string>(), j["cuda"].get<std::string>(),
                          j["key"].get<std::string>().substr(0, 16)));

  if (a.format == "github") {
    // One line, nothing else on stdout: `echo "matrix=$(archbuild matrix … --format github)"`.
    // Every key stored: an empty include, which the workflow skips (a job count of 0).
    out(nlohmann::json{{"include", include}}.dump());
    if (include.empty() && !all_stored)
      warn(ctx, "matrix: no combination was accepted (see --format json for the refusals)");
    return;
  }
  if (ctx.json) {
    nlohmann::json doc = {{"include", include}, {"refused", refused}, {"needs_install", needs}};
    if (build_store) {
      doc["stored"] = stored;
      doc["store"] = build_store->url().text();
    }
    print_json(doc);
    return;
  }
  out(fmt::format("{} job(s):", include.size()));
  for (const auto& j : include)
    out(fmt::format("  sm {:<7} {:<16} torch {:<7} CUDA {:<5} arch list {}{}", j["sm"].get<std::string>(),
                    j["recipe"].get<std::string>(), j["torch"].get<std::string>(), j["cuda"].get<std::string>(),
                    j["arch_list"].get<std::string>(),
                    j.contains("platform") ? fmt::format("  on {} ({})", j["platform"].get<std::string>(),
                                                         j["runs_on"].get<std::string>())
                                           : std::string()));
  if (!refused.empty()) {
    out(fmt::format("{} refused:", refused.size()));
    for (const auto& j : refused)
      out(fmt::format("  sm {:<7} {:<16} CUDA {:<5} {:<14} {}", j["sm"].get<std::string>(),
                      j["recipe"].get<std::string>(), j["cuda"].get<std::string>(), j["rule"].get<std::string>(),
                      j["message"].get<std::string>()));
  }
  if (!needs.empty() && ctx.verbosity <= 0)
    note(ctx, fmt::format("note: {} job(s) need a tool this host lacks (a CUDA toolkit, Python modules); accepted, "
                          "since CI installs them (-v lists them)",
                          needs.size()));
  for (const auto& j : needs)
    if (ctx.verbosity > 0)
      note(ctx, fmt::format("note: sm {} {} CUDA {}: {} (accepted: CI installs it)", j["sm"].get<std::string>(),
                          j["recipe"].get<std::string>(), j["cuda"].get<std::string>(), j["message"].get<std::string>()));
  if (!stored.empty()) {
    out(fmt::format("{} in the build store (no job):", stored.size()));
    for (const auto& j : stored)
      out(fmt::format("  sm {:<7} {:<16} torch {:<7} CUDA {:<5} key {}", j["sm"].get<std::string>(),
                      j["recipe"].get<std::string>(), j["torch"].get<std::string>(), j["cuda"].get<std::string>(),
                      j["key"].get<std::string>().substr(0, 16)));
  }
  if (include.empty() && !all_stored) warn(ctx, "matrix: no combination was accepted");
}

}  // namespace

void add_matrix_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<MatrixArgs>();
  auto* cmd = app.add_subcommand("matrix", "Expand targets x recipes x CUDA into CI build jobs (GitHub Actions matrix)");
  cmd->add_option("--sm", args->sm, "Target compute capabilities, each its own job: 90, 12.0, lists 80,90,120")
      ->required();
  cmd->add_option("--recipe", args->recipe,
                  "A recipe name (torch-2.7), a package (torchvision) or a recipe file; default: every torch recipe");
  cmd->add_option("--format", args->format, "text (default), json (= --json), or github: the strategy.matrix value")
      ->check(CLI::IsMember({"text", "json", "github"}));
  cmd->add_option("--platform", args->platforms,
                  "Platforms to emit jobs for, each on its CI runner (toolchains/platforms.toml): x86_64,sbsa; "
                  "default: this machine's")
      ->delimiter(',')
      ->type_name("LIST");
  cmd->add_option("--cuda", args->cuda, "Only the jobs of this CUDA release (X.Y)");
  cmd->add_option("--source-url", args->source_url,
                  "Clone URL or local path of the source (a mirror): where --store computes the jobs' keys from");
  cmd->add_option("--python", args->python, "Interpreter of the jobs' keys (X.Y or a path), as `wheel --python`");
  add_store_options(*cmd, args->store, false);
  add_json_flag(*cmd, ctx);
  cmd->callback([args, &ctx] { run_matrix(*args, ctx); });
}

}  // namespace archbuild::cli
