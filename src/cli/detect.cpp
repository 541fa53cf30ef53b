// archbuild detect — the GPUs of this host, their CC and driver, and which source answered.
#include <fmt/format.h>

#include "arch/arch_data.hpp"
#include "cli/context.hpp"
#include "app/inputs.hpp"
#include "core/text.hpp"
#include "detect/detect.hpp"

#include "toolchain/jetpack.hpp"
#include "toolchain/platform.hpp"

namespace archbuild::cli {

namespace {

nlohmann::json detection_json(const detect::Detection& d, const app::Facts& facts) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : d.gpus) {
    nlohmann::json j = {{"index", g.index},
                        {"name", g.name},
                        {"cc", g.cc.str()},
                        {"sm", fmt::format("sm_{}", g.cc.sm())},
                        {"known_cc", g.cc_known},
                        {"database_name", g.known ? nlohmann::json(g.known->name) : nlohmann::json(nullptr)}};
    j["memory_bytes"] = g.memory_bytes ? nlohmann::json(*g.memory_bytes) : nlohmann::json(nullptr);
    j["uuid"] = g.uuid.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.uuid);
    j["mig"] = g.mig;
    j["integrated"] = g.integrated ? nlohmann::json(*g.integrated) : nlohmann::json(nullptr);
    j["platform"] = g.known && !g.known->platform.empty() ? nlohmann::json(g.known->platform) : nlohmann::json(nullptr);
    if (g.mig) {
      nlohmann::json migs = nlohmann::json::array();
      for (const auto& m : g.mig_devices)
        migs.push_back({{"uuid", m.uuid},
                        {"memory_bytes", m.memory_bytes ? nlohmann::json(*m.memory_bytes) : nlohmann::json(nullptr)}});
      j["mig_devices"] = migs;
    }
    // What CUDA_VISIBLE_DEVICES names it by for one child (null: CUDA cannot use it).
    j["cuda_select"] = g.cuda_select.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.cuda_select);
    gpus.push_back(j);
  }
  auto m = toolchain::this_machine(facts.jetpacks());
  nlohmann::json jetpack = nullptr;
  if (m.tegra)
    if (auto j = toolchain::jetpack_of_l4t(facts.jetpacks(), m.l4t))
      jetpack = {{"version", j->version.str()},
                 {"cuda", j->cuda.str()},
                 {"l4t", j->l4t.str()},
                 {"platform", j->platform},
                 {"ubuntu", j->ubuntu.empty() ? nlohmann::json(nullptr) : nlohmann::json(j->ubuntu)},
                 {"url", j->url}};
  return {{"source", d.source.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.source)},
          {"machine", m.arch},
          {"l4t", m.tegra ? nlohmann::json(m.l4t) : nlohmann::json(nullptr)},
          {"l4t_platform", m.l4t_platform.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.l4t_platform)},
          {"jetpack", jetpack},
          {"driver_version", d.driver_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.driver_version)},
          {"cuda_version", d.cuda_version ? nlohmann::json(*d.cuda_version) : nlohmann::json(nullptr)},
          {"gpus", gpus},
          {"hidden", d.hidden},
          {"notes", d.notes},
          {"tried", d.tried}};
}

void run_detect(const std::string& source, Context& ctx) {
  const auto& data = ctx.facts().arch();
  detect::Detection d = app::detect_host(data, source);
  const std::string none =
      d.gpus.empty() ? fmt::format("no GPU found on this host ({})", text::join(d.tried, "; ")) : std::string();
  if (ctx.json) {
    auto doc = detection_json(d, ctx.facts());
    if (!none.empty()) {
      doc["error"] = none;
      doc["exit"] = static_cast<int>(Exit::missing_tool);
    }
    print_json(doc);
  }
  for (const auto& n : d.notes) note(ctx, "note: " + n);
  for (const auto& h : d.hidden) note(ctx, "note: hidden: " + h);
  if (!none.empty()) {
    error_line(ctx, none);
    ctx.exit = Exit::missing_tool;
    return;
  }
  if (ctx.json) return;
  out(fmt::format("source: {}   driver: {}   CUDA (driver): {}", d.source,
                  d.driver_version.empty() ? "?" : d.driver_version, d.cuda_version.value_or("?")));
  // A Jetson: L4T names its release in /etc/nv_tegra_release; its integrated GPU answers through
  // the CUDA driver API where NVML lists no device (L4T before JetPack 7).
  // Its JetPack release, read off the L4T version (toolchains/jetpack.toml), names the CUDA it ships
  // and the platform a build there targets (an Orin on JetPack 7.2 is sbsa, CUDA 13.2).
  if (auto m = toolchain::this_machine(ctx.facts().jetpacks()); m.tegra) {
    auto j = toolchain::jetpack_of_l4t(ctx.facts().jetpacks(), m.l4t);
    out(fmt::format("L4T:    {} ({}){}", m.l4t, m.arch,
                    j ? fmt::format(": JetPack {} with CUDA {}, platform {} (toolchains/jetpack.toml)", j->version.str(),
                                    j->cuda.str(), j->platform)
                      : m.l4t_platform.empty()
                          ? std::string(": a JetPack release toolchains/jetpack.toml does not list")
                          : fmt::format(": a JetPack release toolchains/jetpack.toml does not list (platform {}, as its "
                                        "L4T major's releases)",
                                        m.l4t_platform)));
  }
  for (const auto& g : d.gpus) {
    std::string mem = g.memory_bytes ? fmt::format("{:.0f} GiB", *g.memory_bytes / 1073741824.0) : "?";
    std::string arch = data.architecture(g.cc);
    out(fmt::format("GPU {}: {}  CC {} (sm_{}, {})  {}{}{}", g.index, g.name, g.cc.str(), g.cc.sm(), arch, mem,
                    g.integrated.value_or(false) ? "  integrated (shares the host's memory)" : "",
                    g.mig ? fmt::format("  MIG: {} MIG device{}{}", g.mig_devices.size(),
                                        g.mig_devices.size() == 1 ? "" : "s",
                                        g.mig_devices.empty() ? " (CUDA cannot use this GPU)" : ", memory of the first")
                          : ""));
    if (!g.cc_known)
      warn(ctx, fmt::format("CC {} of '{}' is not in the GPU database (data/gpus.toml): a new GPU? "
                            "add it there", g.cc.str(), g.name));
    else if (!g.known)
      note(ctx, fmt::format("note: '{}' is not in data/gpus.toml by name (its CC {} is known)", g.name, g.cc.str()));
  }
}

}  // namespace

void add_detect_command(CLI::App& app, Context& ctx) {
  auto source = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("detect", "GPUs of this host with their CC, memory and driver (NVML, CUDA driver, nvidia-smi)");
  cmd->add_option("--source", *source, "Ask only this source")
      ->check(CLI::IsMember({"nvml", "cuda", "nvidia-smi"}));
  add_json_flag(*cmd, ctx);
  cmd->callback([source, &ctx] { run_detect(*source, ctx); });
}

}  // namespace archbuild::cli
