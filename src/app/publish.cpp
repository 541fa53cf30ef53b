#include "app/publish.hpp"

#include <fmt/format.h>

#include "app/validation.hpp"
#include "arch/arch_data.hpp"
#include "arch/parse.hpp"
#include "core/text.hpp"
#include "store/layout.hpp"
#include "validate/validate.hpp"

namespace archbuild::app {

namespace fs = std::filesystem;

nlohmann::json KeyPublished::to_json() const {
  return {{"key", key},
          {"file", file},
          {"digest", digest},
          {"signed_by", signed_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(signed_by)}};
}

namespace {

validate::Check not_run(const char* name, const char* why) {
  validate::Check c;
  c.name = name;
  c.status = validate::Status::skip;
  c.summary = why;
  return c;
}

// The checks a pulled wheel passes here before it is published: those of `validate` that run
// nothing (the targets are the arch list its builder recorded).
Result<Ok> check_pulled(const remote::Pulled& p, const std::string& key, const Facts& facts) {
  auto refuse = [&](const std::string& why) {
    return Error::not_fine(fmt::format("the store's wheel for key {} is not published: {}", key.substr(0, 16), why));
  };
  std::string arch_list = p.manifest.value("arch_list", std::string());
  auto targets = arch::parse_arch_list(arch_list, facts.arch());
  if (arch_list.empty() || !targets) return refuse(fmt::format("its manifest's arch_list {} names no targets", text::quoted(arch_list)));
  validate::ValidateOptions o;
  o.libraries = &facts.wheel_libraries();
  o.host_dirs = facts.host_library_dirs();
  o.preset = {not_run("import", "not run: publish checks what needs no interpreter"),
              not_run("smoke-run", "not run: publish checks what needs no GPU")};
  if (p.manifest.contains("portability") && p.manifest["portability"].is_object()) o.portability = p.manifest["portability"];
  auto report = validate::validate_wheel(p.wheel, *targets, o, capture_exec());
  if (!report) return refuse(report.error().message);
  if (report->failed()) return refuse("validation failed here: " + text::join(report->failed_names(), ", "));
  return Ok{};
}

}  // namespace

StorePublish publish_from_store(const StoreArgs& args, const std::vector<std::string>& keys,
                                const std::vector<fs::path>& wheels, const fs::path& mirror_dir,
                                const mirror::PublishOptions& options, const Session& s) {
  for (const auto& key : keys) {
    // A key names a folder of the cache and a tag of the store: 64 hex digits, nothing else.
    if (key.size() != 64 || key.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw Failure(Error::bad_input(fmt::format("--key {}: not a build key (64 lower-case hex digits, as `plan` prints it)",
                                                 text::quoted(key))));
  }
  auto store = open_store(args);
  if (!store) throw Failure(Error::bad_input("--key: no build store (give --store or set $ARCHBUILD_STORE)"));
  auto cache = store::choose_cache_dir(s.cache_dir);
  if (!cache) throw Failure(cache.error());
  store::Layout layout(cache->dir);
  // The staged wheels live until they are published (or the command fails).
  struct Staging {
    std::vector<fs::path> dirs;
    ~Staging() {
      std::error_code ec;
      for (const auto& d : dirs) fs::remove_all(d, ec);
    }
  } staging;
  StorePublish out;
  std::vector<fs::path> files = wheels;
  for (const auto& key : keys) {
    StoreLookup l = look_up(*store, key);
    if (l.state == StoreLookup::State::unreachable)
      throw Failure(Error::missing_tool(fmt::format("the build store {} cannot be read: {}", store->url().text(), l.problem)));
    if (l.state == StoreLookup::State::absent)
      throw Failure(Error::not_fine(fmt::format("the build store {} has no key {}", store->url().text(), key)));
    fs::path dir = layout.store_pull_dir(key + ".publish");
    staging.dirs.push_back(dir);
    auto pulled = store->pull(key, *l.manifest, dir);
    if (!pulled) throw Failure(pulled.error());
    if (auto ok = check_pulled(*pulled, key, s.facts()); !ok) throw Failure(ok.error());
    out.keys.push_back({key, pulled->filename, pulled->digest, pulled->signed_by});
    files.push_back(pulled->wheel);
  }
  auto published = mirror::publish(mirror_dir, files, s.facts().arch(), options);
  if (!published) throw Failure(published.error());
  out.published = std::move(*published);
  return out;
}

}  // namespace archbuild::app
