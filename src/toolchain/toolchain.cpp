#include "toolchain/toolchain.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "arch/parse.hpp"
#include "core/data_dir.hpp"
#include "core/path_kind.hpp"
#include "core/text.hpp"
#include "core/toml_load.hpp"

namespace archbuild::toolchain {

namespace fs = std::filesystem;

std::string_view to_string(CompilerKind k) { return k == CompilerKind::gcc ? "gcc" : "clang"; }

std::string Toolchain::cu_tag() const { return fmt::format("cu{}{}", cuda.major(), cuda.minor()); }

bool Toolchain::compiles(const arch::Arch& a) const {
  return std::any_of(archs.begin(), archs.end(),
                     [&](const arch::Arch& t) { return t.cc == a.cc && t.variant == a.variant; });
}

std::optional<arch::Arch> Toolchain::renamed(const arch::Arch& a, const arch::ArchData& data) const {
  const auto* known = data.find(a.cc);
  if (!known || !known->renamed_to || compiles(a)) return std::nullopt;
  arch::Arch r = a;
  r.cc = *known->renamed_to;
  if (!compiles(r)) return std::nullopt;
  return r;
}

std::optional<std::string> Toolchain::rejects(CompilerKind kind, const Version& v) const {
  const CompilerRange& r = kind == CompilerKind::gcc ? gcc : clang;
  std::string what = kind == CompilerKind::gcc ? "GCC" : "Clang";
  if (r.max && v.prefix(r.max->size()) > *r.max)
    return fmt::format("{} {} is newer than CUDA {} accepts (at most {} {})", what, v.str(), cuda.str(), what,
                       r.max->str());
  if (r.min && v < *r.min)
    return fmt::format("{} {} is older than CUDA {} accepts (at least {} {})", what, v.str(), cuda.str(), what,
                       r.min->str());
  return std::nullopt;
}

namespace {

Error at(const toml::node& n, const std::string& file, const std::string& msg) {
  return Error::bad_input(fmt::format("{}: {}", tomlx::where(n, file), msg));
}

std::optional<Error> read_range(tomlx::TableReader& parent, std::string_view key, const std::string& file,
                                CompilerRange& out) {
  const toml::table* t = parent.table(key);
  if (!t) return parent.failure();
  tomlx::TableReader rd(*t, file, fmt::format("[{}]", key));
  for (std::string_view k : {"min", "max"}) {
    auto s = rd.string(k);
    if (!s) continue;
    auto v = Version::parse(*s);
    if (!v || v->size() > 3)
      return rd.error_at(k, fmt::format("{}.{} \"{}\" is not a compiler version; expected e.g. \"14\" or \"9.3\"", key,
                                        k, *s));
    (k == "min" ? out.min : out.max) = *v;
  }
  return rd.finish();
}

bool is_executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::canonical(p, ec);
  return ec ? p : c;
}

}  // namespace

Result<Toolchain> load_toolchain(const fs::path& file, const arch::ArchData& data) {
  auto parsed = tomlx::parse_file(file);
  if (!parsed) return parsed.error();
  const std::string f = file.string();
  tomlx::TableReader rd(*parsed, f, "toolchain");
  Toolchain tc;
  tc.file = file;
  if (auto s = rd.string("cuda", true)) {
    auto v = Version::parse(*s);
    if (!v || v->size() != 2)
      return rd.error_at("cuda", fmt::format("cuda \"{}\" is not a CUDA version; expected MAJOR.MINOR like 12.8", *s));
    tc.cuda = *v;
    std::string stem = file.stem().string();
    if (stem.starts_with("cuda-") && stem != "cuda-" + v->str())
      return rd.error_at("cuda", fmt::format("cuda = \"{}\" but the file is named {}; name it cuda-{}.toml", *s,
                                             file.filename().string(), v->str()));
  }
  if (auto s = rd.string("min_driver", true)) {
    auto v = Version::parse(*s);
    if (!v) return rd.error_at("min_driver", fmt::format("min_driver \"{}\" is not a driver version like 570.26", *s));
    tc.min_driver = *v;
    tc.min_driver_text = *s;
  }
  if (const toml::array* archs = rd.array("archs", true)) {
    for (const auto& el : *archs) {
      auto s = el.value<std::string>();
      if (!el.is_string() || !s) return at(el, f, "archs entries must be strings like \"9.0\" or \"12.0f\"");
      auto a = arch::parse_arch_list(*s, data, {arch::Grammar::build, {}});
      if (!a) return at(el, f, fmt::format("archs: {}", a.error().message));
      if (a->size() != 1 || a->front().sass_from || a->front().ptx)
        return at(el, f, fmt::format("archs entry \"{}\" must be one CC with an optional a/f suffix, e.g. 9.0a", *s));
      if (tc.compiles(a->front())) return at(el, f, fmt::format("archs lists {} twice", *s));
      tc.archs.push_back(a->front());
    }
    if (tc.archs.empty()) return rd.error_at("archs", "archs is empty; list what nvcc compiles, e.g. [\"9.0\"]");
  }
  if (auto e = read_range(rd, "gcc", f, tc.gcc)) return *e;
  if (auto e = read_range(rd, "clang", f, tc.clang)) return *e;
  if (auto e = rd.finish()) return *e;
  tc.archs = arch::normalize(tc.archs);
  return tc;
}

Result<std::vector<Toolchain>> load_toolchains(const fs::path& dir, const arch::ArchData& data) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Error::bad_input(fmt::format("{}: no such toolchain folder", dir.string()));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    // cuda-X.Y.toml only: platforms.toml shares the folder.
    if (e.path().extension() == ".toml" && e.path().filename().string().starts_with("cuda-")) files.push_back(e.path());
  std::vector<Toolchain> out;
  for (const auto& f : files) {
    auto t = load_toolchain(f, data);
    if (!t) return t.error();
    for (const auto& o : out)
      if (o.cuda == t->cuda)
        return Error::bad_input(fmt::format("{}: CUDA {} is also described by {}", f.string(), t->cuda.str(),
                                            o.file.string()));
    out.push_back(std::move(*t));
  }
  std::sort(out.begin(), out.end(), [](const Toolchain& a, const Toolchain& b) { return a.cuda < b.cuda; });
  return out;
}

Result<std::vector<Toolchain>> load_shipped(const arch::ArchData& data) {
  return load_toolchains(data_root() / "toolchains", data);
}

// ---- parsers ----------------------------------------------------------------------------

std::optional<Version> parse_nvcc_release(const std::string& out) {
  static const std::regex re(R"(release (\d+\.\d+))");
  std::smatch m;
  if (!std::regex_search(out, m, re)) return std::nullopt;
  return Version::parse(m[1].str());
}

std::optional<Version> parse_nvcc_build(const std::string& out) {
  static const std::regex re(R"(\bV(\d+\.\d+\.\d+))");
  std::smatch m;
  if (!std::regex_search(out, m, re)) return std::nullopt;
  return Version::parse(m[1].str());
}

std::optional<Version> parse_cuda_version_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("cuda")) return std::nullopt;
  const auto& c = j["cuda"];
  if (!c.is_object() || !c.contains("version") || !c["version"].is_string()) return std::nullopt;
  auto v = Version::parse(c["version"].get<std::string>());
  if (!v || v->size() < 2) return std::nullopt;
  return v;
}

std::vector<arch::Cc> parse_list_gpu_arch(const std::string& out) {
  static const std::regex re(R"(compute_(\d{2,3})\b)");
  std::vector<arch::Cc> ccs;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    ccs.push_back(arch::Cc::from_sm(std::stoi((*it)[1].str())));
  return ccs;
}

std::optional<std::pair<CompilerKind, Version>> parse_compiler_version(const std::string& out) {
  static const std::regex clang_re(R"(clang version (\d+\.\d+(\.\d+)?))");
  std::smatch m;
  if (std::regex_search(out, m, clang_re)) {
    if (auto v = Version::parse(m[1].str())) return std::pair{CompilerKind::clang, *v};
    return std::nullopt;
  }
  // GCC: "g++ (Debian 12.2.0-14) 12.2.0" — the version is the first line's last word.
  std::string first = out.substr(0, out.find('\n'));
  bool gnu = out.find("Free Software Foundation") != std::string::npos || first.find("g++") != std::string::npos ||
             first.find("GCC") != std::string::npos || first.find("c++") != std::string::npos;
  if (!gnu) return std::nullopt;
  auto words = text::split_any(first, " \t\r");
  if (words.empty()) return std::nullopt;
  if (auto v = Version::parse(words.back()); v && v->size() >= 2) return std::pair{CompilerKind::gcc, *v};
  return std::nullopt;
}

// ---- discovery --------------------------------------------------------------------------

HostEnv HostEnv::current() {
  HostEnv env;
  for (const char* name : {"CUDA_HOME", "CUDA_PATH", "CUDAHOSTCXX", "PATH", "ARCHBUILD_CUDA_ROOTS", "PYENV_ROOT", "HOME"})
    if (const char* v = std::getenv(name)) env.vars[name] = v;
  if (auto roots = env.get("ARCHBUILD_CUDA_ROOTS")) {
    env.roots.clear();
    for (const auto& r : text::split_any(*roots, ":")) env.roots.emplace_back(r);
  }
  return env;
}

std::optional<std::string> HostEnv::get(const std::string& name) const {
  auto it = vars.find(name);
  if (it == vars.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::vector<fs::path> HostEnv::path_dirs() const {
  std::vector<fs::path> out;
  if (auto p = get("PATH"))
    for (const auto& d : text::split_any(*p, ":")) out.emplace_back(d);
  return out;
}

std::optional<fs::path> HostEnv::find_program(const std::string& name) const {
  if (name.find('/') != std::string::npos) {
    if (is_executable(name)) return fs::path(name);
    return std::nullopt;
  }
  for (const auto& d : path_dirs())
    if (is_executable(d / name)) return d / name;
  return std::nullopt;
}

bool Toolkit::lists(arch::Cc cc) const {
  if (!listed) return true;
  return std::find(listed->begin(), listed->end(), cc) != listed->end();
}

std::string Compiler::name() const {
  return fmt::format("{} {}", kind == CompilerKind::gcc ? "g++" : "clang++", version.str());
}

namespace {

void note(std::vector<std::string>* notes, std::string s) {
  if (notes) notes->push_back(std::move(s));
}

std::optional<Toolkit> probe_toolkit(const fs::path& root, const std::string& found_by, const Probe& probe,
                                     std::vector<std::string>* notes) {
  Toolkit tk;
  tk.root = root;
  tk.nvcc = root / "bin" / "nvcc";
  tk.found_by = found_by;
  if (!is_executable(tk.nvcc)) {
    note(notes, fmt::format("{} ({}): no executable bin/nvcc, skipped", root.string(), found_by));
    return std::nullopt;
  }
  std::optional<Version> file_version;
  std::error_code ec;
  if (fs::is_regular_file(root / "version.json", ec)) {
    file_version = parse_cuda_version_json(read_text(root / "version.json"));
    if (!file_version) note(notes, fmt::format("{}: version.json has no cuda.version", root.string()));
  } else if (fs::is_regular_file(root / "version.txt", ec)) {
    // CUDA ≤ 11.0: "CUDA Version 11.0.228"
    static const std::regex re(R"(CUDA Version (\d+\.\d+(\.\d+)?))");
    std::smatch m;
    std::string t = read_text(root / "version.txt");
    if (std::regex_search(t, m, re)) file_version = Version::parse(m[1].str());
  }
  auto ran = probe({tk.nvcc.string(), "--version"});
  if (!ran || ran->status != 0) {
    note(notes, fmt::format("{}: `nvcc --version` failed ({}), skipped", tk.nvcc.string(),
                            ran ? fmt::format("exit {}", ran->status) : ran.error().message));
    return std::nullopt;
  }
  auto release = parse_nvcc_release(ran->out);
  tk.nvcc_version = parse_nvcc_build(ran->out);
  if (release && file_version && file_version->prefix(2) != *release)
    note(notes, fmt::format("{}: version.json says {} but nvcc says release {}; using nvcc's", root.string(),
                            file_version->str(), release->str()));
  if (file_version && (!release || file_version->prefix(2) == *release))
    tk.version = *file_version;
  else if (release)
    tk.version = *release;
  else {
    note(notes, fmt::format("{}: cannot tell the CUDA version (no version.json, `nvcc --version` says no "
                            "release), skipped", root.string()));
    return std::nullopt;
  }
  // Older nvcc lacks --list-gpu-arch; then the toolchain data alone decides.
  if (auto list = probe({tk.nvcc.string(), "--list-gpu-arch"}); list && list->status == 0) {
    auto ccs = parse_list_gpu_arch(list->out);
    if (!ccs.empty()) tk.listed = ccs;
  }
  return tk;
}

// "cuda-12.8" sorts as 12.8; "cuda" last.
std::optional<Version> dir_version(const std::string& name) {
  auto dash = name.find('-');
  if (dash == std::string::npos) return std::nullopt;
  return Version::parse(name.substr(dash + 1));
}

}  // namespace

namespace {

// The toolkit an nvcc found on PATH belongs to. A symlink is followed; a wrapper script
// (`exec /usr/local/cuda-13.0/bin/nvcc "$@"` in /usr/local/bin) sits in a folder that is no
// toolkit, and CUDA_HOME=/usr/local would break the build, so nvcc is asked where it runs
// from: `--dryrun` prints `#$ _HERE_=<its bin folder>` without reading the input file.
fs::path toolkit_of_path_nvcc(const fs::path& nvcc, const Probe& probe, std::vector<std::string>* notes) {
  std::error_code ec;
  const fs::path real = fs::is_symlink(nvcc, ec) ? canonical_or_self(nvcc) : nvcc;
  const fs::path root = real.parent_path().parent_path();
  if (fs::exists(root / "include" / "cuda_runtime.h", ec)) return root;
  auto ran = probe({real.string(), "--dryrun", "-c", "archbuild-where.cu"});
  if (!ran || ran->status != 0) return root;
  static const std::regex here_re(R"((?:^|\n)#\$ _HERE_=([^\r\n]+))");
  std::smatch m;
  const std::string text = ran->out + "\n" + ran->err;
  if (!std::regex_search(text, m, here_re)) return root;
  const fs::path here = canonical_or_self(fs::path(m[1].str()));
  if (!here.is_absolute() || here.parent_path() == root) return root;
  note(notes, fmt::format("nvcc on PATH ({}) runs {}; its toolkit is {}", nvcc.string(), (here / "nvcc").string(),
                          here.parent_path().string()));
  return here.parent_path();
}

}  // namespace

std::vector<Toolkit> discover_toolkits(const HostEnv& env, const Probe& probe, std::vector<std::string>* notes) {
  std::vector<std::pair<fs::path, std::string>> candidates;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (auto v = env.get(var)) candidates.emplace_back(fs::path(*v), var);
  if (auto nvcc = env.find_program("nvcc")) candidates.emplace_back(toolkit_of_path_nvcc(*nvcc, probe, notes), "nvcc on PATH");
  for (const auto& root : env.roots) {
    std::error_code ec;
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(root, ec)) {
      std::string n = e.path().filename().string();
      if (n == "cuda" || n.starts_with("cuda-") || (root.filename() != "local" && n.starts_with("cuda")))
        if (fs::is_directory(e.path(), ec)) found.push_back(e.path());
    }
    // Newest versioned folder first; an unversioned "cuda" (usually a symlink) after them.
    std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) {
      auto va = dir_version(a.filename().string()), vb = dir_version(b.filename().string());
      if (va && vb) return *va > *vb;
      if (va || vb) return va.has_value();
      return a < b;
    });
    for (const auto& f : found) candidates.emplace_back(f, f.string());
  }
  std::vector<Toolkit> out;
  std::set<fs::path> seen;
  for (const auto& [root, by] : candidates) {
    fs::path canon = canonical_or_self(root);
    if (seen.count(canon)) continue;
    seen.insert(canon);
    if (auto tk = probe_toolkit(root, by, probe, notes)) out.push_back(std::move(*tk));
  }
  return out;
}

namespace {

// g++-12 -> gcc-12, clang++-14 -> clang-14, c++ -> cc.
std::optional<fs::path> c_compiler_for(const fs::path& cxx) {
  std::string n = cxx.filename().string();
  std::string c;
  if (n.starts_with("g++")) c = "gcc" + n.substr(3);
  else if (n.starts_with("clang++")) c = "clang" + n.substr(7);
  else if (n == "c++") c = "cc";
  else if (n.ends_with("-g++")) c = n.substr(0, n.size() - 3) + "gcc";  // x86_64-linux-gnu-g++-12
  else return std::nullopt;
  fs::path p = cxx.parent_path() / c;
  if (is_executable(p)) return p;
  return std::nullopt;
}

std::optional<Compiler> probe_compiler(const fs::path& path, const std::string& found_by, const Probe& probe,
                                       std::vector<std::string>* notes) {
  auto ran = probe({path.string(), "--version"});
  if (!ran || ran->status != 0) {
    note(notes, fmt::format("{}: `--version` failed, skipped", path.string()));
    return std::nullopt;
  }
  auto kv = parse_compiler_version(ran->out);
  if (!kv) {
    note(notes, fmt::format("{}: not recognised as GCC or Clang, skipped", path.string()));
    return std::nullopt;
  }
  Compiler c;
  c.kind = kv->first;
  c.version = kv->second;
  c.path = path;
  c.found_by = found_by;
  if (auto cc = c_compiler_for(path)) c.c_path = *cc;
  return c;
}

}  // namespace

std::vector<Compiler> discover_compilers(const HostEnv& env, const Probe& probe, std::vector<std::string>* notes) {
  std::vector<Compiler> out;
  std::set<fs::path> seen;
  if (auto hc = env.get("CUDAHOSTCXX")) {
    if (auto p = env.find_program(*hc)) {
      seen.insert(canonical_or_self(*p));
      if (auto c = probe_compiler(*p, "CUDAHOSTCXX", probe, notes)) out.push_back(std::move(*c));
    } else {
      note(notes, fmt::format("CUDAHOSTCXX={} is not an executable program", *hc));
    }
  }
  static const std::regex name_re(R"((g\+\+|clang\+\+)(-\d+(\.\d+)*)?|c\+\+)");
  // Versioned names first so that a compiler reached by several names is shown by its clearest.
  std::vector<fs::path> versioned, plain;
  for (const auto& d : env.path_dirs()) {
    std::error_code ec;
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(d, ec)) entries.push_back(e.path());
    std::sort(entries.begin(), entries.end());
    for (const auto& p : entries) {
      std::string n = p.filename().string();
      if (!std::regex_match(n, name_re) || !is_executable(p)) continue;
      (n.find('-') != std::string::npos ? versioned : plain).push_back(p);
    }
  }
  // "c++" last: it is whichever compiler the system default points at.
  std::stable_sort(plain.begin(), plain.end(),
                   [](const fs::path& a, const fs::path& b) { return a.filename() != "c++" && b.filename() == "c++"; });
  for (const auto* list : {&versioned, &plain})
    for (const auto& p : *list) {
      fs::path canon = canonical_or_self(p);
      if (seen.count(canon)) continue;
      seen.insert(canon);
      if (auto c = probe_compiler(p, "PATH", probe, notes)) out.push_back(std::move(*c));
    }
  return out;
}

const std::vector<std::string>& python_build_modules() {
  static const std::vector<std::string> m = {"setuptools", "wheel", "build", "pip", "venv", "scikit_build_core"};
  return m;
}

std::string debian_package_for_module(const std::string& module) {
  if (module == "setuptools") return "python3-setuptools";
  if (module == "wheel") return "python3-wheel";
  if (module == "build") return "python3-build";
  if (module == "pip") return "python3-pip";
  if (module == "venv") return "python3-venv";
  // Not packaged by Debian 12: pip (in a venv) or a wheelhouse provides it.
  if (module == "scikit_build_core") return "scikit-build-core (pip; not a Debian 12 package)";
  return "python3-" + module;
}

bool Python::has_module(const std::string& m) const {
  return !modules || std::find(modules->begin(), modules->end(), m) != modules->end();
}

std::optional<Python> probe_python(const fs::path& exe, const Probe& probe, const std::string& found_by,
                                   std::vector<std::string>* notes, std::string* why) {
  auto refused = [&](std::string reason) -> std::optional<Python> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  // find_spec only locates the modules (nothing is imported), so the probe stays fast.
  std::string script =
      "import sys, importlib.util as u\n"
      "print(sys.executable)\n"
      "print('.'.join(map(str, sys.version_info[:3])))\n"
      "print(' '.join(m for m in sys.argv[1:] if u.find_spec(m)))\n"
      // What the answer depends on besides the interpreter (for a cached probe to check).
      "print('\\x1f'.join(p for p in sys.path if p))\n";
  std::vector<std::string> argv = {exe.string(), "-c", script};
  for (const auto& m : python_build_modules()) argv.push_back(m);
  auto ran = probe(argv);
  if (!ran || ran->status != 0) {
    note(notes, fmt::format("{}: does not run, skipped", exe.string()));
    return refused(!ran ? ran.error().message
                        : ran->status < 0 ? std::string("it did not answer in time")
                                          : fmt::format("it exited with status {} when asked for its version", ran->status));
  }
  // Line by line, keeping empty lines (an interpreter with none of the modules prints one).
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= ran->out.size()) {
    auto nl = ran->out.find('\n', start);
    if (nl == std::string::npos) nl = ran->out.size();
    std::string line = ran->out.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
    start = nl + 1;
  }
  auto v = lines.size() < 2 ? std::nullopt : Version::parse(text::trim(lines[1]));
  if (!v) return refused("it ran but did not print a Python version");
  fs::path real = text::trim(lines[0]).empty() ? exe : fs::path(text::trim(lines[0]));
  Python py{real, *v, found_by, std::nullopt};
  py.modules = lines.size() > 2 ? text::split_any(lines[2], " ") : std::vector<std::string>{};
  return py;
}

std::vector<fs::path> pyenv_pythons(const HostEnv& env, const Version& wanted) {
  fs::path root;
  if (auto r = env.get("PYENV_ROOT")) root = *r;
  else if (auto home = env.get("HOME")) root = fs::path(*home) / ".pyenv";
  else return {};
  // versions/3.12.1, versions/3.12.0 …: CPython builds only (names that parse as X.Y.Z), newest first.
  std::vector<std::pair<Version, fs::path>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root / "versions", ec)) {
    auto v = Version::parse(e.path().filename().string());
    if (!v || v->size() < 3 || v->prefix(2) != wanted.prefix(2)) continue;
    fs::path exe = e.path() / "bin" / "python3";
    if (::access(exe.c_str(), X_OK) == 0) found.emplace_back(*v, exe);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return b.first < a.first; });
  std::vector<fs::path> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::vector<Python> discover_pythons(const HostEnv& env, const Probe& probe, std::optional<Version> wanted,
                                     std::vector<std::string>* notes) {
  // (program, how it was found): PATH first, then, for an asked X.Y that PATH lacks (pyenv's
  // shims answer only for the global version), pyenv's own builds and the distribution's.
  std::vector<std::pair<fs::path, std::string>> candidates;
  std::vector<std::string> names;
  if (wanted) names.push_back("python" + wanted->prefix(2).str());
  names.insert(names.end(), {"python3", "python"});
  for (const auto& name : names)
    if (auto p = env.find_program(name)) candidates.emplace_back(*p, fmt::format("{} on PATH", name));
  if (wanted) {
    for (const auto& exe : pyenv_pythons(env, *wanted))
      candidates.emplace_back(exe, fmt::format("pyenv {}", exe.parent_path().parent_path().filename().string()));
    for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
      fs::path exe = fs::path(dir) / ("python" + wanted->prefix(2).str());
      if (::access(exe.c_str(), X_OK) == 0) candidates.emplace_back(exe, exe.string());
    }
  }
  std::vector<Python> out;
  std::set<fs::path> seen;
  for (const auto& [exe, found_by] : candidates) {
    auto py = probe_python(exe, probe, found_by, notes);
    if (!py) continue;
    fs::path canon = canonical_or_self(py->path);
    if (seen.count(canon)) continue;
    seen.insert(canon);
    out.push_back(*py);
    // One interpreter is all resolution needs: the asked version, or the default.
    if (!wanted || py->version.prefix(2) == wanted->prefix(2)) break;
  }
  return out;
}

std::optional<Version> parse_cmake_version(const std::string& out) {
  static const std::regex re(R"(cmake version ([0-9]+(\.[0-9]+)+))");
  std::smatch m;
  if (!std::regex_search(out, m, re)) return std::nullopt;
  return Version::parse(m[1].str());
}

Host discover_host(const HostEnv& env, const Probe& probe, const std::vector<std::string>& tools,
                   std::optional<Version> python, const std::optional<fs::path>& python_path) {
  Host h;
  h.toolkits = discover_toolkits(env, probe, &h.notes);
  h.compilers = discover_compilers(env, probe, &h.notes);
  h.cudahostcxx = env.get("CUDAHOSTCXX");
  if (python_path) {
    // Said by what the path is (a folder, a FIFO, a device): nothing is run then.
    std::string why;
    if (auto is_file = paths::expect_regular_file(*python_path, "--python"); !is_file)
      h.python_refused = is_file.error().message;
    else if (auto py = probe_python(*python_path, probe, "--python", &h.notes, &why))
      h.pythons.push_back(*py);
    else
      h.python_refused = fmt::format("--python {}: not a Python interpreter ({})", text::quoted(python_path->string()), why);
  } else {
    h.pythons = discover_pythons(env, probe, python, &h.notes);
  }
  // The distribution's interpreter, when it is another one: suggested when the chosen one lacks
  // a module the build needs (a pyenv python without `wheel`, say).
  const fs::path system_python = "/usr/bin/python3";
  std::error_code ec;
  bool chosen = std::any_of(h.pythons.begin(), h.pythons.end(), [&](const Python& p) {
    return canonical_or_self(p.path) == canonical_or_self(system_python);
  });
  if (!chosen && fs::exists(system_python, ec))
    if (auto py = probe_python(system_python, probe, "/usr/bin/python3", &h.notes)) h.other_pythons.push_back(*py);
  for (const auto& t : tools)
    if (auto p = env.find_program(t)) {
      h.tools[t] = *p;
      if (t != "cmake") continue;
      auto out = probe({p->string(), "--version"});
      if (out && out->status == 0)
        if (auto v = parse_cmake_version(out->out)) h.tool_versions[t] = *v;
    }
  return h;
}

}  // namespace archbuild::toolchain
