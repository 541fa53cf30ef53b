// archbuild publish WHEEL… --mirror DIR [--json]   — adds wheels to a PEP 503 mirror
// archbuild publish --verify --mirror DIR [--json] — re-hashes the mirror against its manifest
// archbuild publish --rebuild-views --mirror DIR    — the GPU views again from files/ + manifest
// archbuild publish --key KEY… --mirror DIR [--store URL] [--store-trust PEM] — the build store's
//   results by key, taken as `wheel` takes a pulled key (app/publish.hpp)
// --variants (with any of the publishing forms): every build also as a PEP 825 variant wheel in
//   DIR/variants/ (mirror/variants.hpp); a mirror that offers them keeps them up to date.
// Every publish keeps the GPU views (mirror/views.hpp, docs/mirror.md) and says what plain
// simple/ gives an unpinned pip and the command for each GPU's view.
// Exit: 0 published (or already there) / verified; 1 a file name published with another hash
// (nothing changed) / verify found problems; 2 bad input (no such wheel, bad name, not a mirror).
#include <fmt/format.h>

#include <set>

#include "app/publish.hpp"
#include "cli/context.hpp"
#include "cli/store_common.hpp"
#include "core/text.hpp"
#include "mirror/mirror.hpp"
#include "mirror/variants.hpp"
#include "mirror/views.hpp"

namespace archbuild::cli {

namespace {

struct PublishArgs {
  std::vector<std::string> wheels;
  std::vector<std::string> keys;
  app::StoreArgs store;
  std::string mirror;
  bool verify = false;
  bool rebuild_views = false;
  bool variants = false;
};

void run_publish(const PublishArgs& a, Context& ctx) {
  namespace fs = std::filesystem;
  fs::path dir = a.mirror;
  if (a.verify) {
    if (!a.wheels.empty()) throw Failure(Error::bad_input("--verify takes no wheel arguments"));
    auto r = mirror::verify(dir, ctx.facts().arch()).take();
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
  if (a.rebuild_views) {
    if (!a.wheels.empty()) throw Failure(Error::bad_input("--rebuild-views takes no wheel arguments"));
    auto written = mirror::rebuild_views(dir, ctx.facts().arch(), a.variants).take();
    auto variants = mirror::summarise_variants(dir, {}, ctx.facts().arch());
    if (ctx.json) {
      print_json({{"mirror", fs::absolute(dir).string()}, {"views_written", written}, {"variants", variants}});
    } else {
      out(fmt::format("{}: {} view(s) rewritten{}", dir.string(), written.size(),
                      written.empty() ? "" : ": " + text::join(written, ", ")));
      if (!variants.is_null())
        out(fmt::format("{}: {} variant wheel(s) in {}", dir.string(), variants["files"].size(),
                        variants["index_url"].get<std::string>()));
    }
    return;
  }
  if (a.wheels.empty() && a.keys.empty())
    throw Failure(Error::bad_input("publish: give WHEEL… or --key KEY… to publish, or --verify"));
  std::vector<fs::path> wheels(a.wheels.begin(), a.wheels.end());
  mirror::PublishOptions opts;
  opts.variants = a.variants;
  opts.on_wait = [&](const std::string& holder) {
    note(ctx, fmt::format("waiting for another publish{} to {}", holder.empty() ? "" : " (" + holder + ")", dir.string()));
  };
  std::vector<app::KeyPublished> keys;
  std::vector<mirror::Published> published;
  if (!a.keys.empty()) {
    auto from_store = app::publish_from_store(a.store, a.keys, wheels, dir, opts, ctx);
    keys = std::move(from_store.keys);
    published = std::move(from_store.published);
  } else {
    published = mirror::publish(dir, wheels, ctx.facts().arch(), opts).take();
  }
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
    nlohmann::json from_keys = nlohmann::json::array();
    for (const auto& k : keys) from_keys.push_back(k.to_json());
    auto views = mirror::summarise_publish(dir, published, ctx.facts().arch()).take();
    print_json({{"mirror", fs::absolute(dir).string()},
                {"index_url", mirror::file_url_of(dir / "simple")},
                {"files", files},
                {"keys", from_keys},
                {"views", views.views},
                {"simple", views.simple},
                {"variants", views.variants}});
  } else {
    for (const auto& k : keys)
      note(ctx, fmt::format("key {}: {} from the build store{}", k.key.substr(0, 16), k.file,
                            k.signed_by.empty() ? "" : ", signed by " + k.signed_by));
    for (const auto& p : published)
      out(fmt::format("{:<9} {}  sha256 {}", p.added ? "added" : "unchanged", p.entry.file, p.entry.sha256));
    for (const auto& l : mirror::summarise_publish(dir, published, ctx.facts().arch()).take().lines) note(ctx, l);
  }
}

}  // namespace

void add_publish_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<PublishArgs>();
  auto* cmd = app.add_subcommand("publish", "Publish wheels to a PEP 503 mirror directory (or --verify one)");
  cmd->add_option("wheels", args->wheels, "Wheel files to publish");
  cmd->add_option("--key", args->keys,
                  "Build keys whose results the build store holds: each pulled, checked as `wheel` checks a pull "
                  "(signature with --store-trust, digests) and validated here, then published")
      ->delimiter(',')
      ->type_name("KEY");
  add_store_options(*cmd, args->store, false);
  cmd->add_option("--mirror", args->mirror, "The mirror directory (pip: --index-url file://DIR/simple)")->required();
  cmd->add_flag("--verify", args->verify, "Re-hash every file against the manifest and the index pages, and check the GPU views");
  cmd->add_flag("--variants", args->variants,
                "Also offer every build as a PEP 825 variant wheel (NVIDIA provider's properties) in DIR/variants/simple");
  cmd->add_flag("--rebuild-views", args->rebuild_views,
                "Write the GPU views (gpu/sm_XY/simple/) again from files/ and manifest.json alone");
  add_json_flag(*cmd, ctx);
  cmd->callback([args, &ctx] { run_publish(*args, ctx); });
}

}  // namespace archbuild::cli
