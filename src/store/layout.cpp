#include "store/layout.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "core/path_kind.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "store/launch_files.hpp"

namespace archbuild::store {

GetEnv process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v || !*v) return std::nullopt;
    return std::string(v);
  };
}

namespace {

// Linux's PATH_MAX is 4096 bytes, and a build's deepest paths lie ~500 bytes below the cache
// (src/<key>/build/…/CMakeFiles/<target>.dir/…/kernels.cu.o.cpp1.ii; PyTorch's own run deeper):
// a longer cache directory fails in the middle of configure with a Python traceback.
constexpr std::size_t kMaxCacheDirBytes = 3000;

Result<CacheDirChoice> checked_choice(CacheDirChoice c) {
  const std::string s = c.dir.string();
  if (s.size() > kMaxCacheDirBytes)
    return Error::bad_input(fmt::format(
        "cache directory from {} is {} bytes long ({}); a build needs room for its own paths below it within "
        "Linux's 4096-byte limit: use one of at most {} bytes (--cache-dir DIR)",
        c.origin, s.size(), text::quoted(s, 120), kMaxCacheDirBytes));
  // Build tools split at these: -ffile-prefix-map=DIR=… at a space (gcc then "cannot compile a
  // test program"), CMake lists at ';', shells and makefiles at quotes, '$', '`' and a backslash.
  // Refused now, as the length is, not in the middle of configure.
  for (unsigned char ch : s) {
    bool control = ch < 0x20 || ch == 0x7f;
    if (control || ch == ' ' || ch == ';' || ch == '"' || ch == '\'' || ch == '\\' || ch == '$' || ch == '`')
      return Error::bad_input(fmt::format(
          "cache directory from {} ({}) holds {}, which a build's tools split or expand (compiler flags, CMake "
          "lists): every build there would fail in configure; use a directory without one (--cache-dir DIR or "
          "ARCHBUILD_CACHE_DIR)",
          c.origin, text::quoted(s, 400),
          ch == ' ' ? std::string("a space") : control ? "a control character" : fmt::format("'{}'", static_cast<char>(ch))));
  }
  return c;
}

Result<CacheDirChoice> choose_cache_dir_unchecked(const std::optional<std::filesystem::path>& flag,
                                                  const GetEnv& getenv);

}  // namespace

Result<CacheDirChoice> choose_cache_dir(const std::optional<std::filesystem::path>& flag, const GetEnv& getenv) {
  auto c = choose_cache_dir_unchecked(flag, getenv);
  if (!c) return c;
  return checked_choice(*c);
}

namespace {

Result<CacheDirChoice> choose_cache_dir_unchecked(const std::optional<std::filesystem::path>& flag,
                                                  const GetEnv& getenv) {
  // A relative one from the working directory, which may be gone (removed under this process).
  auto absolute = [](const std::filesystem::path& p, const char* origin) -> Result<std::filesystem::path> {
    if (p.is_absolute()) return p.lexically_normal();
    std::error_code ec;
    auto cwd = std::filesystem::current_path(ec);
    if (ec)
      return Error::bad_input(fmt::format("{} {} is relative, and the working directory cannot be read ({}); give an "
                                          "absolute path",
                                          origin, text::quoted(p.string()), ec.message()));
    return (cwd / p).lexically_normal();
  };
  if (flag && !flag->empty()) {
    auto dir = absolute(*flag, "--cache-dir");
    if (!dir) return dir.error();
    return CacheDirChoice{*dir, "--cache-dir"};
  }
  if (auto v = getenv("ARCHBUILD_CACHE_DIR")) {
    auto dir = absolute(*v, "$ARCHBUILD_CACHE_DIR");
    if (!dir) return dir.error();
    return CacheDirChoice{*dir, "$ARCHBUILD_CACHE_DIR"};
  }
  if (auto v = getenv("XDG_CACHE_HOME"); v && std::filesystem::path(*v).is_absolute())
    return CacheDirChoice{std::filesystem::path(*v).lexically_normal() / "archbuild", "$XDG_CACHE_HOME"};
  auto home = getenv("HOME");
  if (home && std::filesystem::path(*home).is_absolute())
    return CacheDirChoice{std::filesystem::path(*home).lexically_normal() / ".cache" / "archbuild", "$HOME"};
  // A relative HOME is said as what it is, not as "not set" (XDG's rule: only absolute paths count).
  if (home)
    return Error::bad_input(fmt::format("no cache directory: HOME is {}, a relative path (a cache directory is taken "
                                        "only from an absolute one); pass --cache-dir DIR or set ARCHBUILD_CACHE_DIR",
                                        text::quoted(*home)));
  return Error::bad_input(
      "no cache directory: HOME is not set; pass --cache-dir DIR or set ARCHBUILD_CACHE_DIR");
}

}  // namespace

Layout::Layout(std::filesystem::path root) : root_(std::move(root)) {}

bool Layout::valid_name(std::string_view name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {
// Keys come from the plan's hash, stage names from code: a bad one is a bug, not user input,
// but it must still end in one clear line rather than a path outside the cache.
std::string checked(std::string_view name, const char* what) {
  if (!Layout::valid_name(name))
    throw Failure(Error::bad_input(fmt::format("invalid {} for a cache path: '{}'", what, name)));
  return std::string(name);
}
}  // namespace

std::string Layout::url_hash(std::string_view url) {
  std::string u(url);
  while (!u.empty() && u.back() == '/') u.pop_back();
  if (u.size() > 4 && u.compare(u.size() - 4, 4, ".git") == 0) u.resize(u.size() - 4);
  return sha256_hex(u).substr(0, 24);
}

std::filesystem::path Layout::git_mirror(std::string_view url) const {
  return git_dir() / (url_hash(url) + ".git");
}
std::filesystem::path Layout::git_mirror_lock(std::string_view url) const {
  return git_dir() / (url_hash(url) + ".lock");
}
std::filesystem::path Layout::tree_stat_cache(const std::filesystem::path& canonical_root) const {
  return trees_dir() / (sha256_hex(canonical_root.string()).substr(0, 24) + ".stat");
}
std::filesystem::path Layout::tree_last_checkout(const std::filesystem::path& canonical_root) const {
  return trees_dir() / (sha256_hex(canonical_root.string()).substr(0, 24) + ".last");
}
std::filesystem::path Layout::work_dir(std::string_view slot) const {
  return root_ / "work" / checked(slot, "build slot");
}
std::filesystem::path Layout::work_lock(std::string_view slot) const {
  return root_ / "work" / (std::string(checked(slot, "build slot")) + ".lock");
}
std::filesystem::path Layout::source_dir(std::string_view key) const {
  return sources_dir() / checked(key, "build key");
}
std::filesystem::path Layout::build_dir(std::string_view key) const {
  return builds_dir() / checked(key, "build key");
}
std::filesystem::path Layout::wheel(std::string_view sha256) const {
  bool hex = sha256.size() == 64 && sha256.find_first_not_of("0123456789abcdef") == std::string_view::npos;
  if (!hex) throw Failure(Error::bad_input(fmt::format("invalid wheel hash: '{}'", sha256)));
  return wheels_dir() / (std::string(sha256) + ".whl");
}

std::filesystem::path Layout::named_wheel(std::string_view sha256, std::string_view filename) const {
  // Wheel names carry '+' (local versions), which valid_name refuses: one path component is enough.
  if (!filename.ends_with(".whl") || filename.size() > 255 || filename[0] == '.' ||
      filename.find('/') != std::string_view::npos)
    throw Failure(Error::bad_input(fmt::format("invalid wheel file name: '{}'", filename)));
  return wheel(sha256).parent_path() / (std::string(sha256) + ".named") / std::string(filename);  // the hash checked
}
std::filesystem::path Layout::manifest(std::string_view key) const {
  return keys_dir() / (checked(key, "build key") + ".json");
}
std::filesystem::path Layout::key_lock(std::string_view key) const {
  return keys_dir() / (checked(key, "build key") + ".lock");
}
std::filesystem::path Layout::session_record(std::string_view key) const {
  return keys_dir() / (checked(key, "build key") + ".session");
}
std::filesystem::path Layout::log_dir(std::string_view key) const {
  return logs_dir() / checked(key, "build key");
}
std::filesystem::path Layout::log(std::string_view key, std::string_view stage) const {
  return log_dir(key) / (checked(stage, "stage name") + ".log");
}

std::filesystem::path Layout::venv(std::string_view hash) const { return venvs_dir() / std::string(hash); }
std::filesystem::path Layout::venv_work_dir(std::string_view hash, long pid) const {
  return venvs_dir() / fmt::format("{}.d-{}", hash, pid);
}
std::filesystem::path Layout::venv_lock(std::string_view hash) const { return venvs_dir() / (std::string(hash) + ".lock"); }
std::filesystem::path Layout::venv_log(std::string_view hash) const { return venvs_dir() / (std::string(hash) + ".log"); }
std::filesystem::path Layout::peaks_file(std::string_view package, std::string_view recipe_name) const {
  return root_ / "peaks" / (sha256_hex(fmt::format("{}\n{}", package, recipe_name)).substr(0, 24) + ".tsv");
}
std::filesystem::path Layout::admission_dir(std::string_view key) const { return build_dir(key) / "admission"; }
std::filesystem::path Layout::cmake_seed(std::string_view key) const { return build_dir(key) / "cmake-seed.cmake"; }
std::filesystem::path meson_native_file(const Layout& layout, std::string_view key) {
  return layout.build_dir(key) / "meson-native.ini";
}
std::filesystem::path Layout::compiles_file(std::string_view key) const { return log_dir(key) / "compiles.tsv"; }
std::filesystem::path Layout::ninja_log_copy(std::string_view key) const { return log_dir(key) / "ninja_log"; }
std::filesystem::path Layout::ninja_graph(std::string_view key) const { return log_dir(key) / "ninja.dot"; }

Result<Ok> Layout::create() const {
  for (const auto& dir : {root_, git_dir(), sources_dir(), builds_dir(), wheels_dir(), keys_dir(), logs_dir(),
                          ccache_dir(), venvs_dir(), root_ / "work"}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      // What is in the way, said as it is ("a link to nothing", not "File exists").
      auto info = paths::classify(dir);
      std::string why = info.kind == paths::Kind::missing || info.kind == paths::Kind::directory ||
                                info.kind == paths::Kind::other
                            ? ec.message()
                            : paths::describe(info);
      return Error::bad_input(fmt::format("cache directory {}: cannot create {}: {}", root_.string(), dir.string(), why));
    }
  }
  return Ok{};
}

}  // namespace archbuild::store
