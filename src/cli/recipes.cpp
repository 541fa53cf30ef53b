// archbuild recipes [list | show NAME|FILE] [--json]: the shipped recipes (or a user's file),
// with their `extends` chains merged.
#include <algorithm>

#include <fmt/format.h>

#include "cli/context.hpp"
#include "core/text.hpp"
#include "plan/plan.hpp"
#include "recipe/recipe.hpp"

namespace archbuild::cli {

namespace {

std::string versions(const std::vector<Version>& vs) {
  std::vector<std::string> s;
  for (const auto& v : vs) s.push_back(v.str());
  return text::join(s, ",");
}

std::string accepts(const recipe::Recipe& r) {
  std::vector<std::string> s;
  if (r.arch.two_digit_major) s.push_back("two-digit-major");
  if (r.arch.variant_a) s.push_back("a");
  if (r.arch.variant_f) s.push_back("f");
  return s.empty() ? "-" : text::join(s, ",");
}

void run_list(Context& ctx) {
  auto all = ctx.facts().recipes();
  // torch first, then its companions; newest release first within a package.
  std::stable_sort(all.begin(), all.end(), [](const recipe::Recipe& a, const recipe::Recipe& b) {
    auto rank = [](const recipe::Recipe& r) { return r.package == "torch" ? 0 : 1; };
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (a.package != b.package) return a.package < b.package;
    return a.version > b.version;
  });
  if (ctx.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : all) list.push_back(plan::to_json(r));
    print_json({{"recipes", list}});
    return;
  }
  std::size_t w = 4;
  for (const auto& r : all) w = std::max(w, r.name.size());
  out(fmt::format("{:<{}}  {:<11}  {:<7}  {:<8}  {:<15}  {:<24}  {:<12}  {}", "NAME", w, "PACKAGE", "VERSION", "TAG",
                  "CUDA", "PYTHON", "DRIVER", "ARCH SPELLINGS"));
  std::vector<std::string> bases;
  for (const auto& r : all) {
    if (r.abstract) {
      bases.push_back(r.name);
      continue;
    }
    out(fmt::format("{:<{}}  {:<11}  {:<7}  {:<8}  {:<15}  {:<24}  {:<12}  {}", r.name, w, r.package, r.version.str(),
                    r.source.tag, versions(r.cuda), versions(r.python), recipe::to_string(r.driver), accepts(r)));
  }
  if (!bases.empty()) note(ctx, fmt::format("bases (extended by the recipes above): {}", text::join(bases, ", ")));
}

void run_show(const std::string& name, Context& ctx) {
  auto r = recipe::load(name, ctx.facts().search()).take();
  if (ctx.json) {
    print_json(plan::to_json(r));
    return;
  }
  std::vector<std::string> chain;
  for (const auto& c : r.chain) chain.push_back(c.string());
  out(fmt::format("name         {}{}", r.name, r.abstract ? " (abstract: a base for others)" : ""));
  out(fmt::format("file         {}", text::join(chain, " <- extends ")));
  if (!r.description.empty()) out(fmt::format("description  {}", r.description));
  out(fmt::format("package      {} (import {})", r.package, r.module));
  out(fmt::format("version      {}{}", r.version.str(), r.torch ? " (builds against torch " + r.torch->str() + ")" : ""));
  out(fmt::format("source       {} @ {}{}{}", r.source.url.empty() ? "(no url: give --source-url)" : r.source.url,
                  r.source.tag, r.source.commit ? " commit " + *r.source.commit : "",
                  r.source.submodules ? ", submodules recursive" : ", no submodules"));
  out(fmt::format("cuda         {} (preferred first)", versions(r.cuda)));
  out(fmt::format("python       {}", versions(r.python)));
  out(fmt::format("driver       {}", recipe::to_string(r.driver)));
  out(fmt::format("tools        {}", text::join(plan::required_tools(r), ", ")));
  if (r.min_gcc) out(fmt::format("min gcc      {}", r.min_gcc->str()));
  if (!r.version_env.empty())
    out(fmt::format("version env  {}{}", r.version_env,
                    r.build_number_env.empty() ? "" : fmt::format(", {}={}", r.build_number_env, r.build_number)));
  {
    const unsigned threads = r.nvcc_threads.value_or(1);
    out(fmt::format("per job      {} MB = {} ({} nvcc thread(s)); C {} MB, C++ {} MB", recipe::nvcc_job_mb(r.memory, threads),
                    plan::per_job_from(r.memory, threads), threads, r.memory.c_mb, r.memory.cxx_mb));
    for (const auto& p : r.memory.patterns) out(fmt::format("             {} {} MB", p.glob, p.mb));
  }
  if (r.arch.format == recipe::ArchFormat::sm) {
    std::vector<std::string> vals;
    for (int v : r.arch.values) vals.push_back(std::to_string(v));
    out(fmt::format("arch         {} (SM numbers, SASS only), knows: {}", r.arch.env, text::join(vals, ";")));
  } else {
    out(fmt::format("arch         {} ({} grammar), accepts: {}", r.arch.env,
                    r.arch.grammar == arch::Grammar::extension ? "extension"
                    : r.arch.grammar == arch::Grammar::cmake   ? "cmake"
                                                               : "build",
                    accepts(r)));
  }
  for (const auto& [cuda, list] : r.official) out(fmt::format("official     CUDA {}: {}", cuda, list));
  out("build env:");
  for (const auto& [k, v] : r.env) out(fmt::format("  {}={}", k, v));
}

}  // namespace

void add_recipes_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("recipes", "The recipes: one per release line of torch, torchvision, torchaudio");
  add_json_flag(*cmd, ctx);
  cmd->require_subcommand(0, 1);
  auto* list = cmd->add_subcommand("list", "List the shipped recipes (the default)");
  add_json_flag(*list, ctx);
  auto name = std::make_shared<std::string>();
  auto* show = cmd->add_subcommand("show", "Show one recipe with its extends chain merged");
  show->add_option("NAME", *name, "A recipe name (torch-2.7) or a recipe file")->required();
  add_json_flag(*show, ctx);
  list->callback([&ctx] { run_list(ctx); });
  show->callback([name, &ctx] { run_show(*name, ctx); });
  cmd->callback([cmd, &ctx] {
    if (cmd->get_subcommands().empty()) run_list(ctx);
  });
}

}  // namespace archbuild::cli
