// The environment the steps get: the plan's variables, the caller's pass-through names, the
// compiler cache, and archbuild's launchers (the build path kept out of objects; memory
// admission of every compile where the plan admits); the CMake seed where the tree needs one.
#include <algorithm>

#include <fmt/format.h>

#include "run/admission.hpp"
#include "stages/build_path.hpp"
#include "recipe/driver.hpp"
#include "stages/cmake_seed.hpp"
#include "stages/meson_native.hpp"
#include "stages/reproducible.hpp"
#include "stages/stage.hpp"
#include "store/atomic_file.hpp"
#include "store/launch_files.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

std::map<std::string, std::string> step_environment(const plan::Plan& plan, const PipelineOptions& options) {
  std::map<std::string, std::string> env = plan.environment();
  if (options.getenv) {
    // The plan's own values win: the allowlist reaches only what the plan leaves open.
    auto pass = [&](const std::string& name) {
      if (env.count(name)) return;
      if (auto v = options.getenv(name)) env[name] = *v;
    };
    for (const auto& name : plan->passthrough)
      if (name.empty() || name.back() != '*') pass(name);
    if (options.env_names)
      for (const auto& name : options.env_names())
        if (plan::env_allowed(plan->passthrough, name)) pass(name);
  }
  const CompilerCache& cc = options.compiler_cache;
  if (cc.kind != "none" && !cc.program.empty()) {
    for (const auto& [name, value] : cc.settings) env[name] = value;
    for (const char* lang : {"C", "CXX", "CUDA"})
      env[fmt::format("CMAKE_{}_COMPILER_LAUNCHER", lang)] = cc.program.string();
    if (cc.kind == "ccache") {
      env["CCACHE_DIR"] = cc.dir.string();
      // Hits across source trees: each build key has its own checkout path.
      env["CCACHE_BASEDIR"] = "/";
      env["CCACHE_NOHASHDIR"] = "1";
      env["CCACHE_COMPILERCHECK"] = "content";
      // The CUDA launcher's prefix map names this host's build tree; it maps every tree to the
      // same name, so it cannot change the object and must not split the cache between hosts.
      env["CCACHE_IGNOREOPTIONS"] = "-Xcompiler=-ffile-prefix-map=*";
      if (!cc.remote.empty()) env["CCACHE_REMOTE_STORAGE"] = cc.remote;
    } else if (cc.kind == "sccache") {
      env["SCCACHE_DIR"] = cc.dir.string();
      if (!cc.remote.empty()) env["SCCACHE_REDIS_ENDPOINT"] = cc.remote;
    }
  }
  return env;
}

namespace {

// What makes two builds of one plan byte-identical (not part of the key: it follows from the
// source and the cache location): no build path in the binaries (stages/build_path.hpp: a
// prefix map for C and C++, archbuild's CUDA launcher) and SOURCE_DATE_EPOCH from the commit.
void add_build_path_env(Context& ctx) {
  auto& env = ctx.env;
  // As the build sees it: setup.py and cmake take their paths from getcwd(), which has no symlinks.
  std::error_code ec;
  fs::path tree = fs::weakly_canonical(fs::absolute(ctx.src), ec);
  if (ec) tree = fs::absolute(ctx.src).lexically_normal();
  std::string map = prefix_map_flag(tree);
  auto append = [&](const char* var, const std::string& flag) {
    auto it = env.find(var);
    env[var] = (it == env.end() || it->second.empty()) ? flag : it->second + " " + flag;
  };
  append("CFLAGS", map);
  append("CXXFLAGS", map);
  // With admission archbuild launches every C, C++ and CUDA compile (in front of ccache or
  // sccache); without, only CUDA's (for the path rewrite).
  const auto& options = ctx.options;
  const auto& plan = ctx.plan;
  ctx.admitting = plan->admission.on && !options.archbuild_exe.empty();
  std::map<std::string, std::string> chains;
  for (const char* lang : {"C", "CXX", "CUDA"}) {
    if (!ctx.admitting && std::string_view(lang) != "CUDA") continue;
    const std::string var = fmt::format("CMAKE_{}_COMPILER_LAUNCHER", lang);
    auto existing = env.count(var) ? env[var] : std::string();
    auto chain = compile_launcher(options.archbuild_exe, tree, lang,
                                  ctx.admitting ? ctx.admission_dir : fs::path(), existing);
    if (!chain) break;
    chains[var] = *chain;
  }
  if (ctx.admitting && chains.size() != 3) {
    // No launcher, no admission: the static rule bounds memory again.
    ctx.admitting = false;
    for (const char* var : {"MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL"})
      if (env.count(var)) env[var] = std::to_string(plan->jobs.static_jobs);
    chains.clear();
    if (auto chain = cuda_launcher(options.archbuild_exe, tree,
                                   env.count("CMAKE_CUDA_COMPILER_LAUNCHER") ? env["CMAKE_CUDA_COMPILER_LAUNCHER"] : ""))
      chains["CMAKE_CUDA_COMPILER_LAUNCHER"] = *chain;
    ctx.reporter.message(run::Level::warning,
                         fmt::format("the cache path {} holds ';' or ',': compiles cannot be admitted by memory; {} jobs "
                                     "by the static rule", ctx.layout.root().string(), plan->jobs.static_jobs));
  }
  for (const auto& [var, chain] : chains) env[var] = chain;
  if (!chains.count("CMAKE_CUDA_COMPILER_LAUNCHER") && !options.archbuild_exe.empty())
    ctx.reporter.message(run::Level::warning,
                         fmt::format("the cache path {} holds ';' or ',': CUDA objects will carry it (not reproducible "
                                     "across cache directories)", tree.string()));
}

// The build's admission settings for its launchers (run/admission.hpp), rewritten each run:
// a changed --memory-budget needs no new launcher, so no new configure.
Result<Ok> write_admission_config(const Context& ctx) {
  if (!ctx.admitting) return Ok{};
  run::AdmissionConfig c;
  c.budget_mb = ctx.plan->admission.budget_mb;
  c.figures = ctx.plan->admission.figures;
  const auto& recipe = ctx.plan->resolution.recipe;
  c.peaks = ctx.layout.peaks_file(recipe.package, recipe.name);
  c.records = ctx.layout.compiles_file(ctx.key);
  return run::write_config(ctx.admission_dir, c);
}

// For a tree that reads the environment as one CMake list, the list values (archbuild's
// launchers) go through the seed file, which CMAKE_TOOLCHAIN_FILE names: the tree's forwarding
// then finds them defined and leaves them whole. Rewritten each run, as the launchers may change.
Result<Ok> write_cmake_seed(Context& ctx) {
  if (!ctx.plan->resolution.recipe.forwards_env_as_list) return Ok{};
  auto text = cmake_seed_text(ctx.env);
  if (!text) return Ok{};
  auto file = store::AtomicFile::open(ctx.cmake_seed);
  if (!file) return file.error();
  if (auto w = file->write(*text); !w) return w.error();
  if (auto c = file->commit(); !c) return c.error();
  ctx.env["CMAKE_TOOLCHAIN_FILE"] = ctx.cmake_seed.string();
  return Ok{};
}

// For a driver whose compiles get the launchers from a Meson native file
// (recipe::LauncherRoute::meson_native_file): the file, rewritten each run from the launchers
// above, and the variable the driver's config setting names it by.
Result<Ok> write_meson_native_file(Context& ctx) {
  if (recipe::driver_spec(ctx.plan->resolution.recipe.driver).launchers != recipe::LauncherRoute::meson_native_file) return Ok{};
  const fs::path path = store::meson_native_file(ctx.layout, ctx.key);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  auto file = store::AtomicFile::open(path);
  if (!file) return file.error();
  if (auto w = file->write(meson_native_text(ctx.env)); !w) return w.error();
  if (auto c = file->commit(); !c) return c.error();
  ctx.env[std::string(meson_native_file_var)] = path.string();
  return Ok{};
}

}  // namespace

Result<Ok> prepare_environment(Context& ctx) {
  ctx.env = step_environment(ctx.plan, ctx.options);
  add_build_path_env(ctx);
  if (auto r = write_admission_config(ctx); !r) return r;
  if (auto r = write_meson_native_file(ctx); !r) return r;
  return write_cmake_seed(ctx);
}

void add_source_date_epoch(Context& ctx) {
  if (ctx.env.count("SOURCE_DATE_EPOCH")) return;
  auto doc = ctx.record.read();
  if (!doc) return;
  auto t = doc->value("/stages/fetch/commit_time"_json_pointer, json());
  if (!t.is_number_integer()) return;
  // A commit dated after 2107 (or before 1980) is a time no zip holds: the wheel's build would
  // fail on it at package. Clamped to the nearest time a zip holds, and said.
  std::int64_t when = t.get<std::int64_t>();
  std::int64_t held = std::clamp(when, zip_epoch_min, zip_epoch_max);
  if (held != when)
    ctx.reporter.message(run::Level::warning,
                         fmt::format("the source's commit time {} is {} the times a wheel's zip holds: SOURCE_DATE_EPOCH "
                                     "is {} ({})",
                                     when, when > held ? "after" : "before", held, when > held ? "2107-12-31" : "1980-01-01"));
  ctx.env["SOURCE_DATE_EPOCH"] = std::to_string(held);
}

}  // namespace archbuild::stages
