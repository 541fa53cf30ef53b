#include "cli/resolve_common.hpp"

#include <fmt/format.h>

#include "core/path_kind.hpp"
#include "core/text.hpp"

namespace archbuild::cli {

namespace fs = std::filesystem;

void add_resolve_options(CLI::App& cmd, ResolveArgs& a) {
  cmd.add_option("--sm", a.sm, "Target compute capabilities: 90, 9.0, sm_90, 90a, 12.0f, lists 80,90")
      ->required();
  cmd.add_option("--recipe", a.recipe,
                 "A recipe name (torch-2.7), a package (torchvision) or a recipe file (path/recipe.toml)");
  cmd.add_option("--torch", a.torch, "The torch release line, e.g. 2.7");
  cmd.add_option("--cuda", a.cuda, "The CUDA release, e.g. 12.8");
  cmd.add_option("--python", a.python,
                 "The build interpreter: a version (3.11: python3.11 on PATH) or a path (/usr/bin/python3); "
                 "default: python3 on PATH");
  cmd.add_flag("--ptx", a.ptx, "Also embed PTX for the newest target (JIT on newer GPUs)");
  cmd.add_option("--platform", a.platform,
                 "The platform to build for (toolchains/platforms.toml: x86_64, sbsa for Grace / GB10 / Thor, jetson "
                 "for L4T); default: this machine's")
      ->type_name("NAME");
  cmd.add_option("--source-url", a.source_url,
                 "Fetch the source from this repository URL instead of the recipe's (e.g. file:///srv/git/x.git)");
  cmd.add_option("--source", a.source_dir,
                 "Build this local tree as it is (uncommitted changes included; it is copied, never touched)");
}

void add_plan_options(CLI::App& cmd, ResolveArgs& a) {
  cmd.add_option("--ref", a.ref,
                 "Build this branch, tag or commit instead of the recipe's tag (resolved to a commit before the plan)");
  cmd.add_option("--env", a.env,
                 "K=V for the build's environment, in the build key (repeatable; may override the recipe's [build.env])");
  cmd.add_option("--without", a.without,
                 "Build without these optional libraries (cudnn, nccl, cusparselt, magma, lapack …): their USE_* "
                 "switches off, recorded in the plan, key and manifest")
      ->delimiter(',');
  cmd.add_option("--index-url", a.index_url,
                 "Package index for the build venv's pip (PIP_INDEX_URL), e.g. an internal mirror; recorded in the "
                 "manifest, not the key");
  cmd.add_option("--find-links", a.find_links,
                 "A wheelhouse (DIR or URL) for the build venv's pip (PIP_FIND_LINKS), e.g. on an offline host; "
                 "recorded in the manifest, not the key");
  cmd.add_option("--memory-budget", a.memory_budget,
                 "Memory all compiles may use together: 48G, 4096M, 75% (of available memory) or off (the static "
                 "jobs rule); default 90% of available memory. Jobs = cores, each compile admitted by memory");
  cmd.add_option("--torch-wheel", a.torch_wheel,
                 "A torch wheel to build against (torchvision, an extension): installed into the build venv with "
                 "--no-deps after its requirements; its sha256 is in the key and the wheel pins torch==<its version>")
      ->check([](const std::string& p) {
        // Said by what it is (a FIFO passes CLI11's ExistingFile and would block the install).
        auto k = paths::expect_regular_file(p, "--torch-wheel");
        return k ? std::string() : k.error().message;
      });
  cmd.add_option("--patch", a.patches,
                 "A patch (git diff, -p1) applied to the checkout after the recipe's [[patch]]es, in the order given "
                 "(repeatable); its sha256 is in the key, the plan and the manifest")
      ->check([](const std::string& p) {
        auto k = paths::expect_regular_file(p, "patch");
        return k ? std::string() : k.error().message;
      });
  cmd.add_flag("--clean", a.clean,
               "Build a local tree (--source, source.path) from a clean build tree, not from the build tree of the "
               "last key of the same folder and configuration (the wheel is the same either way)");
  cmd.add_flag("--allow-release-mismatch", a.allow_release_mismatch,
               "Build a tree (--source, --ref) with a recipe of another release line on purpose (otherwise a stop, "
               "exit 2, naming both)");
}

void print_resolution(const plan::Resolution& r, const Context& ctx) {
  if (r.status != Exit::bad_input) {
    const auto& rc = r.recipe;
    out(fmt::format("recipe     {} ({} {}, tag {})  {}", rc.name, rc.package, rc.version.str(), rc.source.tag,
                    rc.file.string()));
    if (auto dir = r.local_dir())
      out(fmt::format("source     local tree {}", dir->string()));
    else
      out(fmt::format("source     {}", r.url().empty() ? "(none: give --source-url)" : r.url()));
    if (r.toolkit)
      out(fmt::format("toolkit    CUDA {} (nvcc {}) at {} ({})", r.toolkit->version.str(),
                      r.toolkit->compiler_version().str(), r.toolkit->root.string(), r.toolkit->found_by));
    else
      out(fmt::format("toolkit    CUDA {} (not installed)", r.toolchain.cuda.str()));
    if (r.compiler)
      out(fmt::format("compiler   {} at {} ({})", r.compiler->name(), r.compiler->path.string(), r.compiler->found_by));
    else
      out("compiler   (none accepted)");
    if (r.python)
      out(fmt::format("python     {} at {}", r.python->version.str(), r.python->path.string()));
    else
      out("python     (not found)");
    out(fmt::format("arch list  {}={}", rc.arch.env, r.arch_list));
    out(fmt::format("driver     {} (CUDA {} needs driver >= {})", recipe::to_string(rc.driver), r.toolchain.cuda.str(),
                    r.toolchain.min_driver_text));
  }
  std::string chosen =
      r.status == Exit::bad_input ? "" : fmt::format("{} + CUDA {}", r.recipe.name, r.toolchain.cuda.str());
  out("rules checked:");
  std::size_t hidden = 0;
  for (const auto& rule : r.rules) {
    bool show = ctx.verbosity > 0 || rule.subject.empty() || rule.subject == chosen || !rule.ok;
    if (!show) {
      ++hidden;
      continue;
    }
    std::string subj = rule.subject.empty() || rule.subject == chosen ? "" : rule.subject + ": ";
    out(fmt::format("  {:<4} {:<18} {}{}", rule.ok ? "ok" : "no", rules::name(rule.id), subj, rule.detail));
  }
  if (hidden) out(fmt::format("  ({} passed rules of other candidates not shown; -v shows them)", hidden));
  for (const auto& n : r.notes) note(ctx, "note: " + n);
}

}  // namespace archbuild::cli
