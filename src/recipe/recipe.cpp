#include "recipe/recipe.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>

#include <unistd.h>

#include <fmt/format.h>

#include "core/data_dir.hpp"
#include "core/path_kind.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "core/toml_load.hpp"
#include "recipe/driver.hpp"

namespace archbuild::recipe {

namespace fs = std::filesystem;

std::string_view to_string(WheelLayout l) { return l == WheelLayout::host ? "host" : "official"; }

std::uint64_t nvcc_job_mb(const CompileMemory& m, unsigned threads) {
  return m.cuda_mb + m.cuda_thread_mb * (std::max(1u, threads) - 1);
}

const std::vector<std::string>& python_modules(const Recipe& r) {
  return r.python_modules ? *r.python_modules : default_python_modules(r.driver);
}

namespace {

// The placeholders a pin_file may hold, each with its value for a CUDA release: a tree picks its
// pin by CUDA major (nccl-cu13.txt) or by major and minor (nccl-cu130.txt).
std::vector<std::pair<std::string, std::string>> pin_placeholders(const Version& cuda) {
  return {{"{cuda_major}", std::to_string(cuda.major())}, {"{cuda_minor}", std::to_string(cuda.minor())}};
}

std::string fill_placeholders(std::string p, const Version& cuda) {
  for (const auto& [name, value] : pin_placeholders(cuda))
    for (auto pos = p.find(name); pos != std::string::npos; pos = p.find(name, pos + value.size()))
      p.replace(pos, name.size(), value);
  return p;
}

}  // namespace

std::vector<std::string> pin_files_for(const Fetch& f, const Version& cuda) {
  std::vector<std::string> out;
  for (const auto& p : f.pin_files) out.push_back(fill_placeholders(p, cuda));
  return out;
}

std::string fetch_disabled_by(const Fetch& f, const std::map<std::string, std::string>& env) {
  for (const auto& [name, values] : f.unless_env) {
    auto it = env.find(name);
    if (it == env.end()) continue;
    for (const auto& v : values)
      if (text::lower(text::trim(it->second)) == text::lower(v)) return name + "=" + it->second;
  }
  return "";
}

std::optional<VersionRange> VersionRange::parse(std::string_view s) {
  VersionRange out;
  out.text = text::trim(std::string(s));
  for (const auto& raw : text::split_any(s, ",")) {
    std::string part = text::trim(raw);
    Bound b{Bound::Op::eq, {}};
    static const std::pair<std::string_view, Bound::Op> ops[] = {
        {">=", Bound::Op::ge}, {"<=", Bound::Op::le}, {"==", Bound::Op::eq}, {">", Bound::Op::gt}, {"<", Bound::Op::lt}};
    for (const auto& [sym, op] : ops)
      if (part.starts_with(sym)) {
        b.op = op;
        part = text::trim(part.substr(sym.size()));
        break;
      }
    auto v = Version::parse(part);
    if (!v) return std::nullopt;
    b.v = *v;
    out.bounds.push_back(b);
  }
  if (out.bounds.empty()) return std::nullopt;
  return out;
}

bool VersionRange::contains(const Version& v) const {
  for (const auto& b : bounds) {
    auto c = v <=> b.v;
    bool ok = b.op == Bound::Op::eq ? c == 0
              : b.op == Bound::Op::ge ? c >= 0
              : b.op == Bound::Op::gt ? c > 0
              : b.op == Bound::Op::le ? c <= 0
                                      : c < 0;
    if (!ok) return false;
  }
  return true;
}

Result<Patch> patch_from_file(const fs::path& file) {
  if (auto k = paths::expect_regular_file(file, "--patch"); !k) return k.error();
  auto sha = sha256_file_hex(file);
  if (!sha) return Error::bad_input(fmt::format("--patch {}: {}", text::quoted(file.string()), sha.error().message));
  Patch p;
  p.file = fs::absolute(file).lexically_normal();
  p.sha256 = *sha;
  p.origin = "--patch";
  return p;
}

Result<std::string> read_patch(const Patch& p) {
  const std::string what = "patch " + p.name() + " (" + p.origin + ")";
  auto fd = paths::open_regular_file(p.file, what);
  if (!fd) return fd.error();
  std::string bytes;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(*fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(*fd);
      return Error::bad_input(fmt::format("{}: {}: cannot read: {}", what, p.file.string(), std::strerror(errno)));
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  ::close(*fd);
  std::string sha = sha256_hex(bytes);
  if (sha != p.sha256)
    return Error::bad_input(fmt::format("{}: {} has sha256 {}, but {} says {}; the file changed: check it and "
                                        "write its new sha256 (sha256sum {})", what, p.file.string(), sha,
                                        p.origin == "--patch" ? "it had when planned" : p.origin, p.sha256,
                                        p.file.string()));
  return bytes;
}

Search Search::shipped() { return Search{{data_root() / "recipes"}, &arch::ArchData::shipped()}; }

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos || (s.size() > 5 && s.ends_with(".toml"));
}

ArchListText print_arch_list(const ArchSyntax& syntax, const std::vector<arch::Arch>& archs) {
  ArchListText out;
  if (syntax.format != ArchFormat::sm) {
    arch::Printed p = syntax.format == ArchFormat::cmake ? arch::to_cmake(archs) : arch::to_torch(archs);
    out.text = std::move(p.text);
    out.notes = std::move(p.notes);
    return out;
  }
  std::vector<int> chosen;
  for (const auto& a : archs) {
    if (a.ptx) out.notes.push_back(fmt::format("{}: the sm format builds SASS only, no PTX for {}", syntax.env, a.cc_name()));
    if (!a.sass) continue;
    int sm = a.cc.sm();
    std::optional<int> best;
    if (syntax.values.empty()) best = sm;
    for (int v : syntax.values)
      if (v / 10 == a.cc.major && v <= sm && (!best || v > *best)) best = v;
    if (!best) {
      out.unmapped.push_back(a);
      continue;
    }
    if (*best != sm || a.variant != arch::Variant::none)
      out.notes.push_back(fmt::format("{} knows no {}: sm_{} SASS, which runs on {}", syntax.env, a.cc_name(), *best,
                                      a.cc.str()));
    if (std::find(chosen.begin(), chosen.end(), *best) == chosen.end()) chosen.push_back(*best);
  }
  std::sort(chosen.begin(), chosen.end());
  std::vector<std::string> parts;
  for (int v : chosen) parts.push_back(std::to_string(v));
  out.text = text::join(parts, ";");
  return out;
}

namespace {

// Variables archbuild sets itself from the resolution (or that must never be set): a recipe
// that set them would silently fight the plan.
const std::set<std::string>& reserved_env() {
  static const std::set<std::string> names = {
      "TORCH_CUDA_ARCH_LIST", "CUDAARCHS", "CUDA_HOME", "CUDA_PATH", "CUDACXX", "CUDAHOSTCXX",
      "CUDA_HOST_COMPILER", "CUDA_NVCC_EXECUTABLE", "CC", "CXX", "MAX_JOBS",
      "CMAKE_BUILD_PARALLEL_LEVEL", "NVCC_THREADS", "PATH", "PYTORCH_BUILD_VERSION", "PYTORCH_BUILD_NUMBER",
      "BUILD_VERSION", "CMAKE_INSTALL_PREFIX"};
  return names;
}

std::string where(const toml::node& n, const std::string& file) { return tomlx::where(n, file); }

Error at(const toml::node& n, const std::string& file, const std::string& msg) {
  return Error::bad_input(fmt::format("{}: {}", where(n, file), msg));
}

bool valid_env_name(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool valid_package(std::string_view s) {
  if (s.empty() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

bool valid_module(std::string_view s) {
  for (const auto& part : text::split_any(s, ".")) {
    if (std::isdigit(static_cast<unsigned char>(part[0]))) return false;
    if (!std::all_of(part.begin(), part.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }))
      return false;
  }
  return !s.empty() && s.front() != '.' && s.back() != '.' && s.find("..") == std::string_view::npos;
}

bool is_hex40(std::string_view s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) != 0;
         });
}

// Reads one recipe table. `partial`: a file of an `extends` chain or an abstract base, where
// required keys may live elsewhere; every present key is still fully checked.
class RecipeReader {
 public:
  RecipeReader(const std::string& file, bool partial, const arch::ArchData& data)
      : file_(file), partial_(partial), data_(data) {}

  std::optional<Error> read(const toml::table& t, Recipe& r) {
    tomlx::TableReader rd(t, file_, "recipe");
    rd.node("extends");  // resolved by the loader
    if (auto v = rd.boolean("abstract")) r.abstract = *v;
    if (auto v = rd.string("description")) r.description = *v;
    if (auto v = rd.string("package", !partial_)) {
      if (!valid_package(*v))
        return rd.error_at("package", fmt::format("'{}' is not a wheel package name; expected letters, "
                                                  "digits, '.', '_' or '-', e.g. torch", *v));
      r.package = *v;
    }
    if (auto v = rd.string("module", !partial_)) {
      if (!valid_module(*v))
        return rd.error_at("module", fmt::format("'{}' is not a Python module name; expected e.g. torch "
                                                 "or torch.cuda", *v));
      r.module = *v;
    }
    if (auto e = version_key(rd, t, "version", !partial_, 0, "a release version like 2.7.1", r.version)) return e;
    if (t.contains("torch")) {
      Version v;
      if (auto e = version_key(rd, t, "torch", false, 0, "the torch release it builds against, like 2.7.1", v))
        return e;
      r.torch = v;
    }
    if (auto v = rd.string("torch_recipe")) {
      if (text::trim(*v).empty())
        return rd.error_at("torch_recipe", "torch_recipe must name a torch recipe (torch-2.14) or its file, relative "
                                           "to this recipe file");
      // A file is relative to this recipe (a project's own recipes side by side); a name is looked up.
      r.torch_recipe = looks_like_path(*v)
                           ? (std::filesystem::absolute(file_).parent_path() / *v).lexically_normal().string()
                           : *v;
    }
    if (auto e = version_list(rd, t, "torch_also", false, "a torch release line MAJOR.MINOR like 2.13", r.torch_also))
      return e;
    if (auto e = version_list(rd, t, "cuda", !partial_, "a CUDA version MAJOR.MINOR like 12.8", r.cuda)) return e;
    if (auto e = version_list(rd, t, "python", !partial_, "a Python version MAJOR.MINOR like 3.11", r.python))
      return e;
    if (const toml::table* s = rd.table("source", !partial_))
      if (auto e = read_source(*s, r.source)) return e;
    if (const toml::table* b = rd.table("build", !partial_))
      if (auto e = read_build(*b, r)) return e;
    if (const toml::table* a = rd.table("arch"))
      if (auto e = read_arch(*a, r)) return e;
    if (const toml::table* w = rd.table("wheel")) {
      tomlx::TableReader wr(*w, file_, "[wheel]");
      if (auto v = wr.string("layout")) {
        if (*v == "official") r.wheel_layout = WheelLayout::official;
        else if (*v == "host") r.wheel_layout = WheelLayout::host;
        else
          return wr.error_at("layout", fmt::format("wheel.layout = \"{}\"; expected \"official\" (CUDA libraries from "
                                                   "nvidia-* packages) or \"host\" (the build host's toolkit)", *v));
      }
      if (w->contains("triton")) {
        auto s = wr.string("triton");
        auto v = s ? Version::parse(*s) : std::nullopt;
        if (s && !v)
          return wr.error_at("triton", fmt::format("wheel.triton = \"{}\" is not a version; expected the release the "
                                                   "tag pins, e.g. \"3.5.1\"", *s));
        r.wheel_triton = v;
      }
      if (wr.failure()) return wr.failure();
      if (auto e = wr.finish()) return e;
    }
    if (const toml::table* p = rd.table("platform"))
      if (auto e = read_platforms(*p, r)) return e;
    if (const toml::table* v = rd.table("validate")) {
      tomlx::TableReader vr(*v, file_, "[validate]");
      if (auto op = vr.string("cuda_op")) r.cuda_op = *op;
      if (auto what = vr.string("cuda_op_what")) r.cuda_op_what = *what;
      if (vr.failure()) return vr.failure();
      if (!r.cuda_op.empty() && r.cuda_op_what.empty())
        return vr.error_at("cuda_op", "validate.cuda_op needs cuda_op_what, the words that name the operation "
                                      "(e.g. \"torchvision.ops.nms on cuda\")");
      if (auto e = vr.finish()) return e;
    }
    if (const toml::table* l = rd.table("libraries"))
      if (auto e = read_libraries(*l, r.libraries)) return e;
    if (const toml::table* h = rd.table("host"))
      if (auto e = read_host(*h, r)) return e;
    if (const toml::array* f = rd.array("fetch"))
      if (auto e = read_fetches(*f, r)) return e;
    if (const toml::array* p = rd.array("patch"))
      if (auto e = read_patches(*p, r)) return e;
    if (auto e = rd.finish()) return e;
    return std::nullopt;
  }

 private:
  // A version-valued key; `parts` = 0 allows 1 to 4 parts, else exactly that many.
  std::optional<Error> version_key(tomlx::TableReader& rd, const toml::table& t, std::string_view key,
                                   bool required, std::size_t parts, std::string_view expected,
                                   Version& out) {
    auto s = rd.string(key, required);
    if (rd.failure()) return rd.failure();
    if (!s) return std::nullopt;
    auto v = parse_version(*s, parts);
    if (!v)
      return at(*t.get(key), file_, fmt::format("'{}' = \"{}\" is not a version; expected {}", key, *s, expected));
    out = *v;
    return std::nullopt;
  }

  static std::optional<Version> parse_version(std::string_view s, std::size_t parts) {
    auto v = Version::parse(s);
    if (!v) return std::nullopt;
    if (parts ? v->size() != parts : v->size() > 4) return std::nullopt;
    return v;
  }

  std::optional<Error> version_list(tomlx::TableReader& rd, const toml::table&, std::string_view key,
                                    bool required, std::string_view expected, std::vector<Version>& out) {
    const toml::array* arr = rd.array(key, required);
    if (rd.failure()) return rd.failure();
    if (!arr) return std::nullopt;
    if (arr->empty())
      return rd.error_at(key, fmt::format("'{}' is empty; list at least one, each {}", key, expected));
    out.clear();
    for (const auto& el : *arr) {
      auto s = el.value<std::string>();
      if (!el.is_string() || !s)
        return at(el, file_, fmt::format("'{}' entries must be strings, each {}", key, expected));
      auto v = parse_version(*s, 2);
      if (!v) return at(el, file_, fmt::format("'{}' entry \"{}\" is not a version; expected {}", key, *s, expected));
      if (std::find(out.begin(), out.end(), *v) != out.end())
        return at(el, file_, fmt::format("'{}' lists {} twice", key, *s));
      out.push_back(*v);
    }
    return std::nullopt;
  }

  std::optional<Error> read_source(const toml::table& t, Source& s) {
    tomlx::TableReader rd(t, file_, "[source]");
    if (auto v = rd.string("url")) {
      if (text::trim(*v).empty() || v->find_first_of(" \t\n") != std::string::npos)
        return rd.error_at("url", "source.url must be a repository URL without spaces, e.g. "
                                  "https://github.com/pytorch/pytorch.git or file:///srv/git/x.git");
      s.url = *v;
    }
    if (auto v = rd.string("path")) {
      if (text::trim(*v).empty()) return rd.error_at("path", "source.path must name a folder, relative to this recipe file");
      // Relative to the recipe file, so a recipe inside a project names the project.
      s.path = (std::filesystem::absolute(file_).parent_path() / *v).lexically_normal();
      if (!s.path.has_filename()) s.path = s.path.parent_path();  // "dir/." normalises to "dir/"
      if (!s.url.empty())
        return rd.error_at("path", "source.path and source.url exclude each other: a recipe builds a local tree "
                                   "or a repository");
    }
    if (auto v = rd.string("tag", !partial_ && s.path.empty())) {
      if (text::trim(*v).empty()) return rd.error_at("tag", "source.tag must name a git tag, e.g. v2.7.1");
      s.tag = *v;
    }
    if (auto v = rd.string("commit")) {
      if (!is_hex40(*v))
        return rd.error_at("commit", fmt::format("source.commit \"{}\" must be a full 40-hex-digit commit id "
                                                 "(it is verified at fetch)", *v));
      s.commit = text::lower(*v);
    }
    if (auto v = rd.boolean("submodules")) s.submodules = *v;
    return rd.finish();
  }

  std::optional<Error> read_build(const toml::table& t, Recipe& r) {
    tomlx::TableReader rd(t, file_, "[build]");
    if (auto v = rd.string("driver", !partial_)) {
      if (auto d = driver_named(*v)) {
        r.driver = *d;
      } else {
        std::vector<std::string> names;
        for (const auto& known : drivers()) names.emplace_back(to_string(known));
        auto near = text::nearest(*v, names, 1);
        return rd.error_at("driver", fmt::format("build.driver \"{}\" is not a driver{}; expected {}", *v,
                                                 near.empty() ? "" : " (did you mean '" + near[0] + "'?)",
                                                 drivers_expected_text()));
      }
    }
    if (auto v = rd.strings("tools")) {
      for (const auto& tool : *v)
        if (tool.empty() || tool.find('/') != std::string::npos)
          return rd.error_at("tools", fmt::format("build.tools entry \"{}\" must be a program name looked "
                                                  "up on PATH, e.g. ninja", tool));
      r.tools = *v;
    }
    if (auto v = rd.strings("python_modules")) {
      for (const auto& m : *v)
        if (!valid_module(m))
          return rd.error_at("python_modules", fmt::format("build.python_modules entry \"{}\" is not a Python module "
                                                           "name; expected e.g. build or scikit_build_core", m));
      r.python_modules = *v;
    }
    if (auto v = rd.string("version_env")) {
      if (!valid_env_name(*v)) return rd.error_at("version_env", fmt::format("'{}' is not a variable name", *v));
      r.version_env = *v;
    }
    if (auto v = rd.string("build_number_env")) {
      if (!valid_env_name(*v))
        return rd.error_at("build_number_env", fmt::format("'{}' is not a variable name", *v));
      r.build_number_env = *v;
    }
    if (auto v = rd.integer("build_number")) {
      if (*v < 0) return rd.error_at("build_number", "build.build_number must be 0 or more");
      r.build_number = *v;
    }
    if (auto v = rd.string("wheel_dir")) {
      fs::path p(*v);
      if (v->empty() || p.is_absolute() || v->find("..") != std::string::npos)
        return rd.error_at("wheel_dir", "build.wheel_dir must be a folder inside the source tree, e.g. dist");
      r.wheel_dir = *v;
    }
    if (t.contains("min_gcc")) {
      auto s = rd.string("min_gcc");
      if (rd.failure()) return rd.failure();
      auto v = parse_version(*s, 0);
      if (!v) return rd.error_at("min_gcc", fmt::format("build.min_gcc \"{}\" is not a version; expected e.g. 9.3", *s));
      r.min_gcc = *v;
    }
    // One memory model: the per-job figure is [build.memory]'s, not a second number.
    if (rd.node("gib_per_job"))
      return rd.error_at("gib_per_job", "build.gib_per_job is replaced by [build.memory]: cuda_mb (one nvcc job) and "
                                        "cuda_thread_mb (per further nvcc thread), e.g. cuda_mb = 5120");
    if (t.contains("nvcc_threads")) {
      auto v = rd.integer("nvcc_threads");
      if (rd.failure()) return rd.failure();
      if (*v < 1 || *v > 256)
        return rd.error_at("nvcc_threads", "build.nvcc_threads must be 1 to 256 (threads per nvcc job)");
      r.nvcc_threads = static_cast<unsigned>(*v);
    }
    if (t.contains("cmake_max")) {
      auto s = rd.string("cmake_max");
      if (rd.failure()) return rd.failure();
      auto v = parse_version(*s, 0);
      if (!v) return rd.error_at("cmake_max", fmt::format("build.cmake_max \"{}\" is not a version; expected e.g. 3.31", *s));
      r.cmake_max = *v;
    }
    if (auto v = rd.boolean("forwards_env_as_list")) r.forwards_env_as_list = *v;
    if (const toml::array* a = rd.array("compiler_defect"))
      if (auto e = read_compiler_defects(*a, r)) return e;
    if (const toml::table* m = rd.table("memory"))
      if (auto e = read_memory(*m, r.memory)) return e;
    if (const toml::table* env = rd.table("env")) {
      for (const auto& [k, node] : *env) {
        std::string name(k.str());
        if (!valid_env_name(name))
          return at(node, file_, fmt::format("build.env: '{}' is not an environment variable name", name));
        if (reserved_env().count(name))
          return at(node, file_, fmt::format("build.env: {} is set by archbuild from the resolution (or must "
                                             "never be set for a PyTorch build); remove it", name));
        auto s = node.value<std::string>();
        if (!node.is_string() || !s)
          return at(node, file_, fmt::format("build.env.{} must be a string (write \"1\", not 1)", name));
        r.env[name] = *s;
      }
    }
    return rd.finish();
  }

  // [platform.NAME]: env (as [build.env]) and official (as [arch.official]) per platform. The
  // names are checked against toolchains/platforms.toml when a plan picks one.
  std::optional<Error> read_platforms(const toml::table& t, Recipe& r) {
    for (const auto& [k, node] : t) {
      std::string name(k.str());
      const toml::table* pt = node.as_table();
      if (!pt) return at(node, file_, fmt::format("platform.{} must be a table with env and official", name));
      tomlx::TableReader rd(*pt, file_, fmt::format("[platform.{}]", name));
      auto& facts = r.platforms[name];
      auto read_env = [&](const toml::table& env, const std::string& key,
                          std::map<std::string, std::string>& into) -> std::optional<Error> {
        for (const auto& [ek, en] : env) {
          std::string var(ek.str());
          if (!valid_env_name(var))
            return at(en, file_, fmt::format("platform.{}.{}: '{}' is not an environment variable name", name, key, var));
          if (reserved_env().count(var))
            return at(en, file_, fmt::format("platform.{}.{}: {} is set by archbuild from the resolution; remove it", name,
                                             key, var));
          auto s = en.value<std::string>();
          if (!en.is_string() || !s)
            return at(en, file_, fmt::format("platform.{}.{}.{} must be a string (write \"1\", not 1)", name, key, var));
          into[var] = *s;
        }
        return std::nullopt;
      };
      for (auto [key, into] : {std::pair{"env", &facts.env}, std::pair{"official_env", &facts.official_env}})
        if (const toml::table* env = rd.table(key))
          if (auto e = read_env(*env, key, *into)) return e;
      if (const toml::table* since = rd.table("official_env_since_cuda"))
        for (const auto& [ck, cn] : *since) {
          std::string cuda(ck.str());
          auto v = parse_version(cuda, 2);
          const toml::table* env = cn.as_table();
          if (!v || !env)
            return at(cn, file_, fmt::format("platform.{}.official_env_since_cuda: \"{}\" must map a CUDA version like "
                                             "\"13.0\" to a table of variables",
                                             name, cuda));
          if (auto e = read_env(*env, "official_env_since_cuda." + cuda, facts.official_env_since_cuda[*v])) return e;
        }
      if (const toml::table* off = rd.table("official"))
        for (const auto& [ok, on] : *off) {
          std::string cuda(ok.str());
          auto s = on.value<std::string>();
          if (!parse_version(cuda, 2) || !on.is_string() || !s)
            return at(on, file_, fmt::format("platform.{}.official: \"{}\" must map a CUDA version like \"13.0\" to a "
                                             "TORCH_CUDA_ARCH_LIST string", name, cuda));
          auto parsed = arch::parse_arch_list(*s, data_, {arch::Grammar::build, {}});
          if (!parsed) return at(on, file_, fmt::format("platform.{}.official.\"{}\": {}", name, cuda, parsed.error().message));
          facts.official[cuda] = *s;
        }
      if (rd.failure()) return rd.failure();
      if (auto e = rd.finish()) return e;
    }
    return std::nullopt;
  }

  // [libraries] expected / optional: library names or groups ("lapack"), checked against the
  // library data when planning (a recipe may define its own in [[libraries.define]]).
  std::optional<Error> read_libraries(const toml::table& t, LibraryRequirements& l) {
    tomlx::TableReader rd(t, file_, "[libraries]");
    if (auto v = rd.strings("expected")) l.expected = *v;
    if (auto v = rd.strings("optional")) l.optional = *v;
    if (const toml::array* d = rd.array("define")) {
      l.define.clear();
      for (const auto& el : *d) {
        const toml::table* spec = el.as_table();
        if (!spec) return at(el, file_, "libraries.define entries must be tables ([[libraries.define]])");
        auto s = read_library_spec(*spec, file_);
        if (!s) return s.error();
        l.define.push_back(std::move(*s));
      }
    }
    for (const auto& name : l.expected)
      if (std::find(l.optional.begin(), l.optional.end(), name) != l.optional.end())
        return rd.error_at("optional", fmt::format("libraries: {} is both expected and optional", name));
    return rd.finish();
  }

  std::optional<Error> read_host(const toml::table& t, Recipe& r) {
    tomlx::TableReader rd(t, file_, "[host]");
    if (auto v = rd.integer("disk_gib")) {
      if (*v < 0) return rd.error_at("disk_gib", "host.disk_gib must be 0 or more (GiB of free space the build needs)");
      r.disk_gib = *v;
    }
    return rd.finish();
  }

  // [build.memory]: per-kind figures in MB and [[build.memory.pattern]] {glob, mb}.
  std::optional<Error> read_memory(const toml::table& t, CompileMemory& m) {
    tomlx::TableReader rd(t, file_, "[build.memory]");
    auto mb = [&](std::string_view key, std::uint64_t& out) -> std::optional<Error> {
      if (auto v = rd.integer(key)) {
        if (*v <= 0 || *v > (1 << 24))
          return rd.error_at(key, fmt::format("build.memory.{} must be a size in MB between 1 and 16777216", key));
        out = static_cast<std::uint64_t>(*v);
      }
      return rd.failure();
    };
    const std::pair<std::string_view, std::uint64_t*> fields[] = {
        {"c_mb", &m.c_mb}, {"cxx_mb", &m.cxx_mb}, {"cuda_mb", &m.cuda_mb}, {"cuda_thread_mb", &m.cuda_thread_mb}};
    for (const auto& [key, out] : fields)
      if (auto e = mb(key, *out)) return e;
    if (const toml::array* patterns = rd.array("pattern")) {
      m.patterns.clear();
      for (const auto& el : *patterns) {
        const toml::table* pt = el.as_table();
        if (!pt) return at(el, file_, "build.memory.pattern entries must be tables {glob = \"…\", mb = N}");
        tomlx::TableReader pr(*pt, file_, "[[build.memory.pattern]]");
        auto glob = pr.string("glob", true);
        auto v = pr.integer("mb", true);
        if (pr.failure()) return pr.failure();
        if (glob->empty()) return pr.error_at("glob", "build.memory.pattern.glob must not be empty, e.g. \"*/flash_attn/*.cu\"");
        if (*v <= 0) return pr.error_at("mb", "build.memory.pattern.mb must be a size in MB above 0");
        if (auto e = pr.finish()) return e;
        m.patterns.push_back({*glob, static_cast<std::uint64_t>(*v)});
      }
    }
    return rd.finish();
  }

  std::optional<Error> read_arch(const toml::table& t, Recipe& r) {
    tomlx::TableReader rd(t, file_, "[arch]");
    if (auto v = rd.string("env")) {
      if (!valid_env_name(*v)) return rd.error_at("env", fmt::format("'{}' is not a variable name", *v));
      r.arch.env = *v;
    }
    if (auto v = rd.string("format")) {
      if (*v == "torch") r.arch.format = ArchFormat::torch;
      else if (*v == "cmake") r.arch.format = ArchFormat::cmake;
      else if (*v == "sm") r.arch.format = ArchFormat::sm;
      else
        return rd.error_at("format", fmt::format("arch.format \"{}\": expected torch (8.0;9.0+PTX), cmake "
                                                 "(80-real;90) or sm (80;90, SASS only)", *v));
    }
    if (const toml::array* vals = rd.array("values")) {
      r.arch.values.clear();
      for (const auto& el : *vals) {
        auto s = el.value<std::string>();
        int sm = 0;
        bool ok = el.is_string() && s && !s->empty() && s->size() <= 3 &&
                  std::all_of(s->begin(), s->end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
        if (ok) sm = std::stoi(*s);
        if (!ok || sm < 10)
          return at(el, file_, "arch.values entries must be SM numbers as strings, e.g. \"80\", \"120\"");
        r.arch.values.push_back(sm);
      }
    }
    if (auto v = rd.string("grammar")) {
      if (*v == "build") r.arch.grammar = arch::Grammar::build;
      else if (*v == "extension") r.arch.grammar = arch::Grammar::extension;
      else if (*v == "cmake") r.arch.grammar = arch::Grammar::cmake;
      else
        return rd.error_at("grammar", fmt::format("arch.grammar \"{}\": expected build (select_compute_arch.cmake), "
                                                  "extension (torch.utils.cpp_extension) or cmake", *v));
    }
    if (const toml::array* acc = rd.array("accepts")) {
      r.arch.two_digit_major = r.arch.variant_a = r.arch.variant_f = false;
      static const std::vector<std::string> known = {"two-digit-major", "a", "f"};
      for (const auto& el : *acc) {
        auto s = el.value<std::string>();
        if (!el.is_string() || !s) return at(el, file_, "arch.accepts entries must be strings: two-digit-major, a, f");
        if (*s == "two-digit-major") r.arch.two_digit_major = true;
        else if (*s == "a") r.arch.variant_a = true;
        else if (*s == "f") r.arch.variant_f = true;
        else {
          auto near = text::nearest(*s, known, 1);
          return at(el, file_, fmt::format("arch.accepts: \"{}\" is not an arch spelling{}; expected two-digit-major "
                                           "(10.0, 12.0), a (9.0a) or f (12.0f)",
                                           *s, near.empty() ? "" : " (did you mean '" + near[0] + "'?)"));
        }
      }
    }
    if (const toml::table* off = rd.table("official")) {
      for (const auto& [k, node] : *off) {
        std::string cuda(k.str());
        if (!parse_version(cuda, 2))
          return at(node, file_, fmt::format("arch.official: key \"{}\" must be a CUDA version like \"12.8\"", cuda));
        auto s = node.value<std::string>();
        if (!node.is_string() || !s)
          return at(node, file_, fmt::format("arch.official.\"{}\" must be a TORCH_CUDA_ARCH_LIST string", cuda));
        auto parsed = arch::parse_arch_list(*s, data_, {arch::Grammar::build, {}});
        if (!parsed) return at(node, file_, fmt::format("arch.official.\"{}\": {}", cuda, parsed.error().message));
        r.official[cuda] = *s;
      }
    }
    return rd.finish();
  }

  // A path inside the tree: relative, '/'-separated, without "..", "." or empty parts.
  static bool inside_tree(std::string_view p) {
    if (p.empty() || p.front() == '/' || p.back() == '/') return false;
    for (const auto& part : text::split_any(p, "/"))
      if (part.empty() || part == "." || part == "..") return false;
    return p.find("//") == std::string_view::npos;
  }

  // [[build.compiler_defect]]: each entry whole, or the range could silently match nothing.
  std::optional<Error> read_compiler_defects(const toml::array& arr, Recipe& r) {
    r.compiler_defects.clear();
    for (const auto& el : arr) {
      const toml::table* t = el.as_table();
      if (!t)
        return at(el, file_, "'compiler_defect' entries must be tables: [[build.compiler_defect]] with compiler, from, "
                             "below, machines and why");
      tomlx::TableReader rd(*t, file_, "[[build.compiler_defect]]");
      Recipe::CompilerDefect d;
      if (auto v = rd.string("compiler", true)) {
        if (*v != "gcc" && *v != "clang")
          return rd.error_at("compiler", fmt::format("compiler_defect.compiler \"{}\": expected gcc or clang", *v));
        d.compiler = *v;
      }
      for (auto [key, out] : {std::pair<const char*, Version*>{"from", &d.from}, {"below", &d.below}})
        if (auto v = rd.string(key, true)) {
          auto parsed = parse_version(*v, 0);
          if (!parsed)
            return rd.error_at(key, fmt::format("compiler_defect.{} \"{}\" is not a version; expected e.g. 14.4", key, *v));
          *out = *parsed;
        }
      if (!rd.failure() && !(d.from < d.below))
        return rd.error_at("below", fmt::format("compiler_defect.below {} must be above from {} (the first fixed release)",
                                                d.below.str(), d.from.str()));
      if (auto v = rd.strings("machines")) {
        for (const auto& m : *v)
          if (m.empty() || m.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
            return rd.error_at("machines", fmt::format("compiler_defect.machines entry \"{}\" is not a `uname -m` "
                                                       "name, e.g. aarch64 or x86_64", m));
        d.machines = *v;
      }
      if (auto v = rd.string("why", true)) {
        if (text::trim(*v).empty()) return rd.error_at("why", "compiler_defect.why must say what fails and where it is reported");
        d.why = *v;
      }
      if (auto e = rd.finish()) return e;
      r.compiler_defects.push_back(std::move(d));
    }
    return std::nullopt;
  }

  // [[patch]]: each entry whole, its file read and hashed now (a recipe whose patch differs from
  // what it says is refused when loaded, before anything is planned).
  std::optional<Error> read_patches(const toml::array& arr, Recipe& r) {
    r.patches.clear();
    for (const auto& el : arr) {
      const toml::table* t = el.as_table();
      if (!t)
        return at(el, file_, "'patch' entries must be tables: [[patch]] with file, sha256, strip, from and when");
      tomlx::TableReader rd(*t, file_, "[[patch]]");
      Patch p;
      p.origin = file_;
      if (auto v = rd.string("file", true)) {
        if (text::trim(*v).empty()) return rd.error_at("file", "patch.file must name a patch file, relative to this recipe");
        p.file = (fs::absolute(file_).parent_path() / *v).lexically_normal();
      }
      if (auto v = rd.string("sha256", true)) {
        std::string lower = text::lower(*v);
        if (lower.size() != 64 || lower.find_first_not_of("0123456789abcdef") != std::string::npos)
          return rd.error_at("sha256", fmt::format("patch.sha256 \"{}\" must be 64 hex digits (sha256sum of the file)", *v));
        p.sha256 = lower;
      }
      if (t->contains("strip")) {
        auto v = rd.integer("strip");
        if (rd.failure()) return rd.failure();
        if (*v < 0 || *v > 16) return rd.error_at("strip", "patch.strip must be 0 to 16 (git's patches: 1)");
        p.strip = static_cast<int>(*v);
      }
      if (auto v = rd.string("from", true)) {
        if (text::trim(*v).empty())
          return rd.error_at("from", "patch.from must name the upstream PR or commit, e.g. pytorch/pytorch#185933");
        p.from = *v;
      }
      if (const toml::table* w = rd.table("when")) {
        tomlx::TableReader wr(*w, file_, "[patch.when]");
        for (auto [key, out] : {std::pair<const char*, std::optional<VersionRange>*>{"torch", &p.when.torch}, {"cuda", &p.when.cuda}})
          if (auto v = wr.string(key)) {
            *out = VersionRange::parse(*v);
            if (!*out)
              return wr.error_at(key, fmt::format("patch.when.{} \"{}\" is not a version range; expected comparisons "
                                                  "joined by ',', e.g. \">=2.5, <2.8\"", key, *v));
          }
        if (auto v = wr.strings("platform")) p.when.platform = *v;
        if (auto v = wr.strings("arch"))
          for (const auto& a : *v) {
            auto cc = Version::parse(a);
            if (!cc || cc->size() != 2)
              return wr.error_at("arch", fmt::format("patch.when.arch entry \"{}\" is not a compute capability; "
                                                     "expected MAJOR.MINOR like 12.1", a));
            p.when.arch.push_back(*cc);
          }
        if (wr.failure()) return wr.failure();
        if (auto e = wr.finish()) return e;
      }
      if (rd.failure()) return rd.failure();
      if (auto e = rd.finish()) return e;
      // The file is what the recipe says it is, or the recipe is refused here.
      if (auto kind = paths::expect_regular_file(p.file, "patch.file"); !kind)
        return at(*t->get("file"), file_, kind.error().message);
      auto sha = sha256_file_hex(p.file);
      if (!sha) return at(*t->get("file"), file_, sha.error().message);
      if (*sha != p.sha256)
        return at(*t->get("sha256"), file_, fmt::format("patch {}: the file's sha256 is {}, not {}: the patch is not the "
                                                        "one this recipe was written for", p.file.string(), *sha, p.sha256));
      for (const auto& other : r.patches)
        if (other.sha256 == p.sha256)
          return rd.error_at("file", fmt::format("patch {} is listed twice (as {})", p.file.string(), other.file.string()));
      r.patches.push_back(std::move(p));
    }
    return std::nullopt;
  }

  // [[fetch]]: each entry fully checked (a typo here would let the build download after all).
  std::optional<Error> read_fetches(const toml::array& arr, Recipe& r) {
    r.fetches.clear();
    for (const auto& el : arr) {
      const toml::table* t = el.as_table();
      if (!t)
        return at(el, file_, "'fetch' entries must be tables: [[fetch]] with name, path, url, pin_file and unless_env");
      tomlx::TableReader rd(*t, file_, "[[fetch]]");
      Fetch f;
      if (auto v = rd.string("name", true)) {
        if (!valid_package(*v))
          return rd.error_at("name", fmt::format("fetch.name \"{}\": expected letters, digits, '.', '_' or '-', e.g. nccl", *v));
        for (const auto& other : r.fetches)
          if (other.name == *v) return rd.error_at("name", fmt::format("fetch.name \"{}\" is declared twice", *v));
        f.name = *v;
      }
      if (auto v = rd.string("path", true)) {
        if (!inside_tree(*v))
          return rd.error_at("path", fmt::format("fetch.path \"{}\" must be a folder inside the tree, relative and "
                                                 "without '..', e.g. third_party/nccl", *v));
        for (const auto& other : r.fetches)
          if (other.path == *v) return rd.error_at("path", fmt::format("fetch.path \"{}\" is the path of [[fetch]] {} too", *v, other.name));
        f.path = *v;
      }
      if (auto v = rd.string("url", true)) {
        if (text::trim(*v).empty() || v->find_first_of(" \t\n") != std::string::npos)
          return rd.error_at("url", "fetch.url must be a git repository URL without spaces, e.g. https://github.com/NVIDIA/nccl");
        f.url = *v;
      }
      if (const toml::node* n = rd.node("pin_file")) {
        std::vector<std::pair<const toml::node*, std::string>> files;
        if (auto v = n->value<std::string>(); n->is_string() && v) files.push_back({n, *v});
        else if (const toml::array* a = n->as_array(); a && !a->empty())
          for (const auto& x : *a) files.push_back({&x, x.is_string() ? *x.value<std::string>() : std::string("{")});
        else
          return at(*n, file_, "fetch.pin_file must be a string or a non-empty array of strings (the first the tree has)");
        for (const auto& [node, v] : files) {
          std::string rest = fill_placeholders(v, *Version::parse("13.0"));
          if (!inside_tree(rest) || rest.find_first_of("{}") != std::string::npos)
            return at(*node, file_, fmt::format("fetch.pin_file \"{}\" must be a file inside the tree (relative, "
                                                "without '..'); the placeholders are {{cuda_major}} and {{cuda_minor}}, "
                                                "e.g. .ci/docker/ci_commit_pins/nccl-cu{{cuda_major}}{{cuda_minor}}.txt", v));
          f.pin_files.push_back(v);
        }
      } else {
        return rd.error_at("name", "[[fetch]]: missing required key 'pin_file' (the file of the tree naming the tag or "
                                   "commit, e.g. .ci/docker/ci_commit_pins/nccl-cu{cuda_major}.txt)")
            .with_kind(ErrorKind::missing_key);
      }
      if (const toml::table* u = rd.table("unless_env")) {
        for (const auto& [k, node] : *u) {
          std::string name(k.str());
          if (!valid_env_name(name))
            return at(node, file_, fmt::format("fetch.unless_env: '{}' is not an environment variable name", name));
          std::vector<std::string> values;
          if (auto s = node.value<std::string>(); node.is_string() && s) values.push_back(*s);
          else if (const toml::array* a = node.as_array(); a && !a->empty()) {
            for (const auto& x : *a) {
              auto s2 = x.value<std::string>();
              if (!x.is_string() || !s2)
                return at(x, file_, fmt::format("fetch.unless_env.{} values must be strings (write \"0\", not 0)", name));
              values.push_back(*s2);
            }
          } else {
            return at(node, file_, fmt::format("fetch.unless_env.{} must be a string or a non-empty array of strings, "
                                               "e.g. [\"0\", \"OFF\"]", name));
          }
          f.unless_env[name] = values;
        }
      }
      if (auto v = rd.boolean("submodules")) f.submodules = *v;
      if (auto e = rd.finish()) return e;
      r.fetches.push_back(std::move(f));
    }
    return std::nullopt;
  }

  const std::string& file_;
  bool partial_;
  const arch::ArchData& data_;  // the GPU data arch lists are checked against (Search::arch)
};

// Tables merge key by key, everything else is replaced. Every table of the result is created
// fresh, so an error about a merged table names the recipe file, never a base's line.
void merge_into(toml::table& base, const toml::table& over) {
  for (const auto& [k, v] : over) {
    if (const toml::table* ot = v.as_table()) {
      toml::table* bt = base.get_as<toml::table>(k);
      if (!bt) {
        base.insert_or_assign(k, toml::table{});
        bt = base.get_as<toml::table>(k);
      }
      merge_into(*bt, *ot);
      continue;
    }
    v.visit([&](const auto& concrete) { base.insert_or_assign(k, concrete); });
  }
}

struct Loaded {
  toml::table merged;
  std::vector<fs::path> chain;
  std::vector<fs::path> patch_origins;  // the file listing each merged [[patch]], in order
};

std::optional<fs::path> find_named(const std::string& name, const fs::path& near, const Search& search) {
  std::error_code ec;
  if (!near.empty() && fs::is_regular_file(near / (name + ".toml"), ec)) return near / (name + ".toml");
  for (const auto& d : search.dirs)
    if (fs::is_regular_file(d / (name + ".toml"), ec)) return d / (name + ".toml");
  return std::nullopt;
}

std::vector<std::string> names_in(const Search& search) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& d : search.dirs)
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".toml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A path a recipe writes is relative to the file that writes it, also when another recipe extends
// that file: merged tables forget where a value came from, so each file's relative paths are made
// absolute before its table is merged (it was checked with its own lines first).
void anchor_relative_paths(toml::table& t, const fs::path& file) {
  const fs::path dir = fs::absolute(file).parent_path();
  auto anchor = [&](toml::table* in, std::string_view key, bool only_path_like) {
    if (!in) return;
    auto* v = in->get_as<std::string>(key);
    if (!v || v->get().empty() || fs::path(v->get()).is_absolute()) return;
    if (only_path_like && !looks_like_path(v->get())) return;
    in->insert_or_assign(key, (dir / v->get()).lexically_normal().string());
  };
  anchor(t.get_as<toml::table>("source"), "path", false);
  anchor(&t, "torch_recipe", true);
  if (auto* patches = t.get_as<toml::array>("patch"))
    for (auto& el : *patches) anchor(el.as_table(), "file", false);
}

Result<Loaded> load_chain(const fs::path& file, const Search& search, std::vector<fs::path>& stack) {
  auto parsed = tomlx::parse_file(file);
  if (!parsed) return parsed.error();
  toml::table& t = *parsed;
  const std::string fname = file.string();
  // Every file is checked on its own first, so that errors carry its own line and column.
  {
    Recipe scratch;
    if (auto e = RecipeReader(fname, true, *search.arch).read(t, scratch)) return *e;
  }
  Loaded out;
  out.chain.push_back(file);
  const toml::node* ext = t.get("extends");
  if (ext) {
    auto name = ext->value<std::string>();
    if (!ext->is_string() || !name || name->empty())
      return at(*ext, fname, "'extends' must name a recipe (e.g. \"torch-common\") or a .toml file");
    std::optional<fs::path> base;
    std::vector<fs::path> tried;
    if (looks_like_path(*name)) {
      fs::path p = fs::path(*name).is_absolute() ? fs::path(*name) : file.parent_path() / *name;
      std::error_code ec;
      if (fs::is_regular_file(p, ec)) base = p;
      tried.push_back(p);
    } else {
      base = find_named(*name, file.parent_path(), search);
      tried.push_back(file.parent_path() / (*name + ".toml"));
    }
    // Something is there but it is no file (a FIFO, a directory, a loop of links): said as it is.
    for (const auto& p : tried)
      if (auto info = paths::classify(p); !base && info.kind != paths::Kind::missing && info.kind != paths::Kind::regular)
        return at(*ext, fname, fmt::format("extends \"{}\": {}: {}, not a recipe file", *name, p.string(),
                                           paths::describe(info)));
    if (!base) {
      auto near = text::nearest(*name, names_in(search), 1);
      return at(*ext, fname, fmt::format("extends \"{}\": no such recipe next to this file or among the "
                                         "shipped recipes{}", *name,
                                         near.empty() ? "" : " (did you mean '" + near[0] + "'?)"));
    }
    std::error_code ec;
    fs::path canon = fs::weakly_canonical(*base, ec);
    if (std::find(stack.begin(), stack.end(), canon) != stack.end()) {
      std::vector<std::string> names;
      for (const auto& s : stack) names.push_back(s.filename().string());
      names.push_back(canon.filename().string());
      return at(*ext, fname, fmt::format("extends cycle: {}", text::join(names, " -> ")));
    }
    stack.push_back(canon);
    auto parent = load_chain(*base, search, stack);
    stack.pop_back();
    if (!parent) return parent.error();
    // Being a base and naming a base are properties of one file, not inherited.
    parent->merged.erase("abstract");
    parent->merged.erase("extends");
    merge_into(out.merged, parent->merged);
    out.chain.insert(out.chain.end(), parent->chain.begin(), parent->chain.end());
    out.patch_origins = parent->patch_origins;
  }
  anchor_relative_paths(t, file);
  // [[patch]] lists add up along the chain (the base's first), where other arrays are replaced.
  toml::array inherited;
  if (const auto* base = out.merged.get_as<toml::array>("patch")) inherited = *base;
  merge_into(out.merged, t);
  if (const auto* own = t.get_as<toml::array>("patch")) {
    out.patch_origins.insert(out.patch_origins.end(), own->size(), file);
    if (!inherited.empty()) {
      for (const auto& el : *own) inherited.push_back(el);
      out.merged.insert_or_assign("patch", std::move(inherited));
    }
  }
  return out;
}

}  // namespace

Result<Recipe> load_file(const fs::path& file, const Search& search) {
  if (!search.arch) return Error{Exit::internal, "recipe::Search without GPU data (Search::arch)"};
  std::error_code ec;
  std::vector<fs::path> stack{fs::weakly_canonical(file, ec)};
  auto loaded = load_chain(file, search, stack);
  if (!loaded) return loaded.error();
  Recipe r;
  // A project's own recipe is often <project>/recipe.toml: name it after the project.
  r.name = file.stem() == "recipe" && !fs::absolute(file).parent_path().filename().empty()
               ? fs::absolute(file).parent_path().filename().string()
               : file.stem().string();
  r.file = file;
  r.chain = loaded->chain;
  bool abstract = loaded->merged.get_as<bool>("abstract") && **loaded->merged.get_as<bool>("abstract");
  // Required keys may come from any file of the chain; a base (abstract) may leave them out.
  if (auto e = RecipeReader(file.string(), abstract, *search.arch).read(loaded->merged, r)) {
    Error err = *e;
    if (loaded->chain.size() > 1 && err.kind == ErrorKind::missing_key)
      err.message += " (set it in this file or in the recipe it extends)";
    return err;
  }
  // Each patch names the recipe that lists it (a base's, for an inherited one).
  for (std::size_t i = 0; i < r.patches.size() && i < loaded->patch_origins.size(); ++i)
    r.patches[i].origin = loaded->patch_origins[i].string();
  return r;
}

Result<Recipe> load(const std::string& name_or_path, const Search& search) {
  std::error_code ec;
  // A recipe's name means that recipe: a stray file of the same name in the working directory
  // (./torch-2.7) does not replace it while every message goes on naming the recipe. A file is
  // read by a name only when no recipe has it; write ./NAME or NAME.toml to mean the file.
  const bool path_like = looks_like_path(name_or_path);
  if (!path_like)
    if (auto p = find_named(name_or_path, {}, search)) return load_file(*p, search);
  if (path_like || fs::is_regular_file(name_or_path, ec)) {
    // Said by what the path is (a folder, a FIFO, a loop of links), never opened unless a file.
    if (auto is_file = paths::expect_regular_file(name_or_path, "--recipe: recipe file"); !is_file)
      return is_file.error();
    return load_file(name_or_path, search);
  }
  auto all = names_in(search);
  auto near = text::nearest(name_or_path, all, 3);
  return Error::bad_input(fmt::format("no recipe named '{}'{}; recipes: {} (or give a path to a .toml file)",
                                      name_or_path,
                                      near.empty() ? "" : " (did you mean " + text::join(near, ", ") + "?)",
                                      text::join(all, ", ")));
}

Result<std::vector<Recipe>> load_dir(const fs::path& dir, const Search& search) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Error::bad_input(fmt::format("{}: no such recipe folder", dir.string()));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<Recipe> out;
  for (const auto& f : files) {
    auto r = load_file(f, search);
    if (!r) return r.error();
    out.push_back(std::move(*r));
  }
  return out;
}

Result<std::vector<Recipe>> load_shipped() {
  Search s = Search::shipped();
  return load_dir(s.dirs.front(), s);
}

}  // namespace archbuild::recipe
