// archbuild publish WHEEL… --mirror DIR [--json]   — adds wheels to a PEP 503 mirror
// archbuild publish --verify --mirror DIR [--json] — re-hashes the mirror against its manifest
// Exit: 0 published (or already there) / verified; 1 a file name published with another hash
// (nothing changed) / verify found problems; 2 bad input (no such wheel, bad name, not a mirror).
#include <fmt/format.h>

#include "cli/context.hpp"
#include "mirror/mirror.hpp"

namespace archbuild::cli {

namespace {

struct PublishArgs {
  std::vector<std::string> wheels;
  std::string mirror;
  bool verify = false;
};

void run_publish(const PublishArgs& a, Context& ctx) {
  namespace fs = std::filesystem;
  fs::path dir = a.mirror;
  if (a.verify) {
    if (!a.wheels.empty()) throw Failure(Error::bad_input("--verify takes no wheel arguments"));
    auto r = mirror::verify(dir).take();
    if (ctx.json) {
      auto j = mirror::to_json(r);
      j["mirror"] = fs::absolute(dir).string();
      print_json(j);
    } else {
      for (const auto& p : r.problems) out(fmt::format("{:<18} {}: {}", p.kind, p.file, p.detail));
      out(fmt::format("{}: {} files, {} pages checked, {}", dir.string(), r.files_checked, r.pages_checked,
                      r.ok() ? "all match" : fmt::format("{} problem(s)", r.problems.size())));
    }
    if (!r.ok()) ctx.exit = Exit::not_fine;
    return;
  }
  if (a.wheels.empty()) throw Failure(Error::bad_input("publish: give WHEEL… to publish, or --verify"));
  std::vector<fs::path> wheels(a.wheels.begin(), a.wheels.end());
  mirror::PublishOptions opts;
  opts.on_wait = [&](const std::string& holder) {
    note(ctx, fmt::format("waiting for another publish{} to {}", holder.empty() ? "" : " (" + holder + ")", dir.string()));
  };
  auto published = mirror::publish(dir, wheels, opts).take();
  if (ctx.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& p : published)
      files.push_back({{"file", p.entry.file},
                       {"project", p.entry.project},
                       {"version", p.entry.version},
                       {"sha256", p.entry.sha256},
                       {"size", p.entry.size},
                       {"published_at", p.entry.published_at},
                       {"status", p.added ? "added" : "unchanged"},
                       {"url", "files/" + mirror::percent_encode(p.entry.file)}});
    print_json({{"mirror", fs::absolute(dir).string()},
                {"index_url", "file://" + fs::absolute(dir / "simple").lexically_normal().string()},
                {"files", files}});
  } else {
    for (const auto& p : published)
      out(fmt::format("{:<9} {}  sha256 {}", p.added ? "added" : "unchanged", p.entry.file, p.entry.sha256));
    note(ctx, fmt::format("pip install --index-url file://{} NAME==VERSION",
                          fs::absolute(dir / "simple").lexically_normal().string()));
  }
}

}  // namespace

void add_publish_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<PublishArgs>();
  auto* cmd = app.add_subcommand("publish", "Publish wheels to a PEP 503 mirror directory (or --verify one)");
  cmd->add_option("wheels", args->wheels, "Wheel files to publish");
  cmd->add_option("--mirror", args->mirror, "The mirror directory (pip: --index-url file://DIR/simple)")->required();
  cmd->add_flag("--verify", args->verify, "Re-hash every file against the manifest and the index pages");
  add_json_flag(*cmd, ctx);
  cmd->callback([args, &ctx] { run_publish(*args, ctx); });
}

}  // namespace archbuild::cli
