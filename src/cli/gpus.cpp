// archbuild gpus [NAME] — the GPU database.
#include <fmt/format.h>

#include "arch/arch_data.hpp"
#include "cli/context.hpp"
#include "core/text.hpp"

namespace archbuild::cli {

namespace {

nlohmann::json gpu_json(const arch::Gpu& g, const arch::ArchData& data) {
  return {{"name", g.name},
          {"cc", g.cc.str()},
          {"sm", fmt::format("sm_{}", g.cc.sm())},
          {"architecture", data.architecture(g.cc)},
          {"aliases", g.aliases},
          {"smi_names", g.smi}};
}

void run_gpus(const std::string& name, Context& ctx) {
  const auto& data = ctx.facts().arch();
  std::vector<const arch::Gpu*> gpus;
  if (name.empty()) {
    for (const auto& g : data.gpus()) gpus.push_back(&g);
  } else {
    gpus = data.match_gpus(name);
  }
  if (gpus.empty()) {
    auto near = data.nearest_gpu_names(name, 5);
    std::string msg = fmt::format("no GPU matches {}; closest: {}", text::quoted(name), text::join(near, ", "));
    // A failure document says so, as every command's does (docs/commands.md: "error" and "exit").
    if (ctx.json)
      print_json({{"query", name},
                  {"gpus", nlohmann::json::array()},
                  {"closest", near},
                  {"error", text::printable(msg)},
                  {"exit", static_cast<int>(Exit::not_fine)}});
    error_line(ctx, msg);
    ctx.exit = Exit::not_fine;
    return;
  }
  if (ctx.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto* g : gpus) list.push_back(gpu_json(*g, data));
    nlohmann::json doc = {{"gpus", list}};
    if (!name.empty()) doc["query"] = name;
    print_json(doc);
    return;
  }
  std::size_t w = 4;
  for (const auto* g : gpus) w = std::max(w, g->name.size());
  out(fmt::format("{:<{}}  {:>5}  {:<7}  {}", "GPU", w, "CC", "SM", "ARCHITECTURE"));
  for (const auto* g : gpus) {
    std::string line = fmt::format("{:<{}}  {:>5}  {:<7}  {}", g->name, w, g->cc.str(),
                                   fmt::format("sm_{}", g->cc.sm()), data.architecture(g->cc));
    if (!g->aliases.empty()) line += fmt::format("  (also {})", text::join(g->aliases, ", "));
    out(line);
  }
}

}  // namespace

void add_gpus_command(CLI::App& app, Context& ctx) {
  auto name = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("gpus", "The GPU database: names, compute capabilities, architectures");
  cmd->add_option("NAME", *name, "A GPU name (case-insensitive; 'NVIDIA'/'GeForce' optional), e.g. 'RTX 4090', H100");
  add_json_flag(*cmd, ctx);
  cmd->callback([name, &ctx] { run_gpus(*name, ctx); });
}

}  // namespace archbuild::cli
