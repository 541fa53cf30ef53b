#include "extenv/extenv.hpp"

#include "arch/arch_data.hpp"
#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>


#include "core/text.hpp"
#include "doctor/doctor.hpp"

namespace archbuild::extenv {


namespace {

bool is_torch(const recipe::Recipe& r) { return r.package == "torch"; }

// The newest non-abstract recipe among those matching `pred`.
template <class Pred>
const recipe::Recipe* newest(const std::vector<recipe::Recipe>& rs, Pred pred) {
  const recipe::Recipe* best = nullptr;
  for (const auto& r : rs)
    if (!r.abstract && pred(r) && (!best || r.version > best->version)) best = &r;
  return best;
}

std::string names(const std::vector<arch::Arch>& archs) {
  std::vector<std::string> s;
  for (const auto& a : archs) s.push_back(a.cc_name());
  return text::join(s, ", ");
}

// Which torch's TORCH_CUDA_ARCH_LIST reader the list is spelled for, as an ArchSyntax.
struct Reader {
  recipe::ArchSyntax syntax;
  std::string grammar;
  std::string of;
};

Result<Reader> choose_reader(const Request& req, const Inputs& in, std::vector<std::string>& notes) {
  Reader rd;
  if (req.project && is_torch(*req.project)) {
    // Building torch itself: its main build reads the list (select_compute_arch.cmake).
    rd.syntax = req.project->arch;
    rd.grammar = "build";
    rd.of = fmt::format("{} (the main build's parser)", req.project->name);
    return rd;
  }
  const recipe::Recipe* line = nullptr;
  if (in.torch) {
    auto rel = in.torch->release();
    if (rel)
      line = newest(in.recipes, [&](const recipe::Recipe& r) { return is_torch(r) && r.version.prefix(2) == rel->prefix(2); });
    if (line) {
      rd.of = fmt::format("torch {} (installed for {})", in.torch->version, in.torch->python);
    } else {
      line = newest(in.recipes, is_torch);
      if (line)
        notes.push_back(fmt::format("no recipe describes torch {} (installed); spelled for {}, the newest release",
                                    in.torch->version, line->name));
    }
  } else {
    line = newest(in.recipes, is_torch);
    notes.push_back(fmt::format("no torch is installed for the chosen Python: TORCH_CUDA_ARCH_LIST is spelled for "
                                "torch.utils.cpp_extension of {}, the newest release", line ? line->name : "torch"));
  }
  if (!line) return Error::bad_input("no torch recipe is shipped: cannot tell which spellings torch's reader accepts");
  if (rd.of.empty()) rd.of = fmt::format("{} ({})", line->name, in.torch ? "torch installed: no recipe of its line" : "no torch installed");
  // cpp_extension of the same release: two-digit majors and `a` as its main build; never `f`
  // or A(B) (torch/utils/cpp_extension.py _get_cuda_arch_flags).
  rd.syntax.env = "TORCH_CUDA_ARCH_LIST";
  rd.syntax.format = recipe::ArchFormat::torch;
  rd.syntax.grammar = arch::Grammar::extension;
  rd.syntax.two_digit_major = line->arch.two_digit_major;
  rd.syntax.variant_a = line->arch.variant_a;
  rd.syntax.variant_f = false;
  rd.grammar = "extension";
  return rd;
}

// Why the reader cannot spell some target, or nullopt.
std::optional<std::string> spelling_problem(const Reader& rd, const std::vector<arch::Arch>& archs) {
  auto pick = [&](auto pred) {
    std::vector<arch::Arch> s;
    for (const auto& a : archs)
      if (pred(a)) s.push_back(a);
    return s;
  };
  std::string reader = rd.grammar == "extension" ? "torch.utils.cpp_extension" : "the TORCH_CUDA_ARCH_LIST parser";
  if (auto f = pick([](auto& a) { return a.variant == arch::Variant::f; }); !f.empty() && !rd.syntax.variant_f)
    return fmt::format("{} of {} does not accept 'f' suffixes ({}); give the plain or 'a' arch instead", reader, rd.of,
                       names(f));
  if (auto a = pick([](auto& x) { return x.variant == arch::Variant::a; }); !a.empty() && !rd.syntax.variant_a)
    return fmt::format("{} of {} does not accept 'a' suffixes ({})", reader, rd.of, names(a));
  if (auto t = pick([](auto& x) { return x.cc.major >= 10; }); !t.empty() && !rd.syntax.two_digit_major)
    return fmt::format("{} of {} rejects two-digit majors ({}); a newer torch is needed for them", reader, rd.of,
                       names(t));
  if (rd.grammar == "extension")
    if (auto ab = pick([](auto& x) { return x.sass_from.has_value(); }); !ab.empty())
      return fmt::format("{} does not accept the A(B) form ({})", reader, names(ab));
  return std::nullopt;
}

Result<const toolchain::Toolchain*> toolkit_facts(const Inputs& in) {
  if (!in.toolkit)
    return Error::missing_tool("no CUDA toolkit found (CUDA_HOME, nvcc on PATH, /usr/local/cuda*): install one or "
                               "set CUDA_HOME");
  for (const auto& tc : in.toolchains)
    if (tc.cuda == in.toolkit->release()) return &tc;
  return Error::bad_input(fmt::format("no toolchains/cuda-{}.toml describes CUDA {} (at {}): which archs and host "
                                      "compilers it accepts is unknown",
                                      in.toolkit->release().str(), in.toolkit->release().str(),
                                      in.toolkit->root.string()));
}

// The host compiler nvcc would use, and CUDAHOSTCXX when that one is newer than the toolkit takes.
Result<std::optional<Var>> host_compiler(const Inputs& in, const toolchain::Toolchain& tc,
                                         std::vector<std::string>& notes) {
  // nvcc's default host compiler on Linux is gcc from PATH: the first GCC discovered (the
  // discovery lists versioned names first, so prefer the plain g++ / c++ when there is one).
  const toolchain::Compiler* dflt = nullptr;
  for (const auto& c : in.compilers) {
    if (c.found_by == "CUDAHOSTCXX" || c.kind != toolchain::CompilerKind::gcc) continue;
    auto name = c.path.filename().string();
    if (!dflt || ((name == "g++" || name == "c++") && dflt->path.filename() != "g++")) dflt = &c;
  }
  const toolchain::Compiler* set = !in.compilers.empty() && in.compilers.front().found_by == "CUDAHOSTCXX"
                                       ? &in.compilers.front()
                                       : nullptr;
  if (set && !tc.rejects(set->kind, set->version))
    return std::optional<Var>(Var{"CUDAHOSTCXX", set->path.string(), fmt::format("as set ({})", set->name())});
  if (dflt && !tc.rejects(dflt->kind, dflt->version)) {
    notes.push_back(fmt::format("host compiler {} ({}) is accepted by CUDA {}: no CUDAHOSTCXX needed", dflt->name(),
                                dflt->path.string(), tc.cuda.str()));
    return std::optional<Var>();
  }
  // The default is too new (or missing): the newest compiler the toolkit accepts.
  const toolchain::Compiler* best = nullptr;
  for (const auto& c : in.compilers)
    if (!tc.rejects(c.kind, c.version) && (!best || c.version > best->version)) best = &c;
  std::string why_not = dflt ? *tc.rejects(dflt->kind, dflt->version) : "no C++ compiler on PATH";
  if (!best)
    return Error::missing_tool(fmt::format("{}; install a host compiler CUDA {} accepts (gcc <= {}) and run again",
                                           why_not, tc.cuda.str(), tc.gcc.max ? tc.gcc.max->str() : "?"));
  return std::optional<Var>(Var{"CUDAHOSTCXX", best->path.string(),
                                fmt::format("{}; {} is accepted", why_not, best->name())});
}

}  // namespace

std::optional<Version> TorchSeen::release() const {
  std::size_t end = 0;
  while (end < version.size() && (std::isdigit(static_cast<unsigned char>(version[end])) || version[end] == '.')) ++end;
  std::string head = version.substr(0, end);
  while (!head.empty() && head.back() == '.') head.pop_back();
  auto v = Version::parse(head);
  if (!v || v->size() < 2) return std::nullopt;
  return v;
}

Result<std::optional<TorchSeen>> parse_torch_probe(const std::string& out, const std::string& python) {
  if (doctor::probe_found_no_torch(out)) return std::optional<TorchSeen>();
  auto f = doctor::parse_torch_probe(out, 0, python);
  if (!f) return f.error();
  if (!f->version_read)
    return Error::missing_tool(fmt::format("{}: torch is installed ({}) but its version file could not be read", python,
                                           f->dir.string()));
  TorchSeen t;
  t.python = f->python;
  t.version = f->version;
  t.cuda = f->cuda;
  return std::optional<TorchSeen>(t);
}

const Var* Environment::find(const std::string& name) const {
  for (const auto& v : vars)
    if (v.name == name) return &v;
  return nullptr;
}

Result<Environment> compute(const Request& req, const Inputs& in) {
  if (!in.arch) return Error{Exit::internal, "extenv::Inputs without GPU data (Inputs::arch)"};
  Environment e;
  e.archs = arch::normalize(req.targets);
  if (e.archs.empty()) return Error::bad_input("no target architecture: give --sm, e.g. --sm 90");
  e.torch = in.torch;
  if (req.project) e.project = req.project->name;

  auto tc = toolkit_facts(in);
  if (!tc) return tc.error();
  const toolchain::Toolkit& tk = *in.toolkit;
  // torch.utils.cpp_extension refuses a toolkit of another CUDA major than torch's own.
  if (in.torch && in.torch->cuda)
    if (auto torch_cuda = Version::parse(*in.torch->cuda); torch_cuda && torch_cuda->major() != tk.version.major())
      return Error::missing_tool(fmt::format("torch {} was built with CUDA {}, and the CUDA {} toolkit at {} differs in "
                                             "major: torch.utils.cpp_extension refuses to build extensions with it; "
                                             "install a CUDA {}.x toolkit and set CUDA_HOME to it",
                                             in.torch->version, *in.torch->cuda, tk.release().str(), tk.root.string(),
                                             torch_cuda->major()));
  // A CC a later CUDA renamed (10.1, Jetson Thor, is 11.0 from CUDA 13) is built under the name
  // this toolkit compiles, as cpp_extension's own names (Blackwell+Tegra) follow it.
  for (auto& a : e.archs) {
    auto renamed = (*tc)->renamed(a, *in.arch);
    if (!renamed || !tk.lists(renamed->cc)) continue;
    e.notes.push_back(fmt::format("{} is {} for CUDA {} (renamed; data/gpus.toml): built as {}", a.cc_name(),
                                  renamed->cc_name(), tk.release().str(), renamed->sm_name()));
    a = *renamed;
  }
  // Refuse what this toolkit cannot compile: the extension would silently lack it.
  std::vector<std::string> cannot;
  for (const auto& a : e.archs)
    if (!(*tc)->compiles(a) || !tk.lists(a.cc)) cannot.push_back(a.sm_name());
  if (!cannot.empty()) {
    std::vector<std::string> can;
    for (const auto& a : (*tc)->archs) can.push_back(a.cc_name());
    return Error::bad_input(fmt::format("--sm: CUDA {} at {} cannot compile {}; it compiles {} ({}); install a CUDA "
                                        "that does, or set CUDA_HOME to it",
                                        tk.release().str(), tk.root.string(), text::join(cannot, ", "),
                                        text::join(can, " "), (*tc)->file.filename().string()));
  }

  auto reader = choose_reader(req, in, e.notes);
  if (!reader) return reader.error();
  e.grammar = reader->grammar;
  e.grammar_of = reader->of;
  if (auto p = spelling_problem(*reader, e.archs)) return Error::bad_input("--sm: " + *p);

  auto add = [&](std::string name, std::string value, std::string why) {
    e.vars.push_back({std::move(name), std::move(value), std::move(why)});
  };
  recipe::ArchListText torch_list = recipe::print_arch_list(reader->syntax, e.archs);
  for (auto& n : torch_list.notes) e.notes.push_back(n);
  add("TORCH_CUDA_ARCH_LIST", torch_list.text, fmt::format("{} grammar of {}", reader->grammar, reader->of));

  // The extensions that read their own variable (flash-attn's FLASH_ATTN_CUDA_ARCHS): the --for
  // project's, else the newest recipe of each such package.
  std::vector<const recipe::Recipe*> own;
  std::set<std::string> seen_env{"TORCH_CUDA_ARCH_LIST", "CMAKE_CUDA_ARCHITECTURES"};
  if (req.project && !seen_env.count(req.project->arch.env)) {
    own.push_back(&*req.project);
    seen_env.insert(req.project->arch.env);
  }
  std::vector<const recipe::Recipe*> by_newest;
  for (const auto& r : in.recipes)
    if (!r.abstract) by_newest.push_back(&r);
  std::sort(by_newest.begin(), by_newest.end(), [](auto* a, auto* b) { return a->version > b->version; });
  for (const auto* r : by_newest)
    if (seen_env.insert(r->arch.env).second) own.push_back(r);
  for (const auto* r : own) {
    auto printed = recipe::print_arch_list(r->arch, e.archs);
    bool is_project = req.project && r->name == req.project->name;
    if (!printed.unmapped.empty()) {
      std::vector<std::string> vals;
      for (int v : r->arch.values) vals.push_back(std::to_string(v));
      std::string why = fmt::format("{} ({}) builds nothing that runs on {}: it knows only {}", r->arch.env, r->name,
                                    names(printed.unmapped), text::join(vals, ";"));
      if (is_project) return Error::bad_input("--sm: " + why);
      e.notes.push_back(why + "; left out");
      continue;
    }
    for (auto& n : printed.notes) e.notes.push_back(fmt::format("{}: {}", r->name, n));
    add(r->arch.env, printed.text, fmt::format("{}'s own list ({})", r->name, r->file.filename().string()));
  }

  arch::Printed cmake = arch::to_cmake(e.archs);
  for (auto& n : cmake.notes) e.notes.push_back(n);
  add("CMAKE_CUDA_ARCHITECTURES", cmake.text, "CMake's spelling of the same archs");

  // Jobs from memory: the project's per-job figure; without --for the most demanding extension
  // recipe's, so that any of them fits. The figure is [build.memory]'s nvcc job at the recipe's
  // NVCC_THREADS: the one model plan and admission use.
  const recipe::Recipe* figure = req.project ? &*req.project : nullptr;
  std::string figure_of = req.project ? req.project->name : "the default";
  unsigned threads = req.project ? req.project->nvcc_threads.value_or(1) : 1;
  double gib = static_cast<double>(recipe::nvcc_job_mb(recipe::CompileMemory{}, 1)) / 1024.0;
  if (!req.project) {
    for (const auto* r : by_newest) {
      double g = static_cast<double>(recipe::nvcc_job_mb(r->memory, r->nvcc_threads.value_or(1))) / 1024.0;
      if (g > gib) {
        gib = g;
        figure = r;
        figure_of = fmt::format("{} (the most per job of the extension recipes; --for PROJECT for its own)", r->name);
      }
      if (r->nvcc_threads) threads = std::max(threads, *r->nvcc_threads);
    }
  } else {
    gib = static_cast<double>(recipe::nvcc_job_mb(req.project->memory, threads)) / 1024.0;
  }
  if (figure) figure_of += ", " + plan::per_job_from(figure->memory, figure->nvcc_threads.value_or(1));
  e.jobs = plan::jobs_rule(in.host, std::nullopt, gib, threads);
  add("MAX_JOBS", std::to_string(e.jobs.jobs), fmt::format("{}; {:g} GiB per job from {}", e.jobs.rule(), gib, figure_of));
  add("NVCC_THREADS", std::to_string(e.jobs.threads_per_job),
      threads > 1 ? fmt::format("nvcc --threads per job ({} wants {}, at most the cores)", figure_of, threads)
                  : std::string("one thread per nvcc job"));

  add("CUDA_HOME", tk.root.string(), fmt::format("CUDA {} ({})", tk.version.str(), tk.found_by));
  auto host = host_compiler(in, **tc, e.notes);
  if (!host) return host.error();
  if (*host) e.vars.push_back(**host);
  return e;
}

// ---- printers ------------------------------------------------------------------------------

namespace {

bool plain(const std::string& v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_./:+,@%-").find(c) != std::string_view::npos;
  });
}

std::string shell_quote(const std::string& v) {
  if (plain(v)) return v;
  std::string out = "'";
  for (char c : v) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string dotenv_quote(const std::string& v) {
  if (plain(v)) return v;
  std::string out = "\"";
  for (char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '$': out += "\\$"; break;
      case '`': out += "\\`"; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string to_shell(const Environment& e) {
  std::string out;
  for (const auto& v : e.vars) out += fmt::format("export {}={}\n", v.name, shell_quote(v.value));
  return out;
}

std::string to_dotenv(const Environment& e) {
  std::string out;
  for (const auto& v : e.vars) out += fmt::format("{}={}\n", v.name, dotenv_quote(v.value));
  return out;
}

std::string to_github(const Environment& e) {
  std::string out;
  for (const auto& v : e.vars) {
    if (v.value.find('\n') == std::string::npos && v.value.find('\r') == std::string::npos) {
      out += fmt::format("{}={}\n", v.name, v.value);
      continue;
    }
    // GitHub's multi-line form; the delimiter must not occur in the value.
    std::string delim = "ARCHBUILD_EOF";
    while (v.value.find(delim) != std::string::npos) delim += "_";
    out += fmt::format("{}<<{}\n{}\n{}\n", v.name, delim, v.value, delim);
  }
  return out;
}

nlohmann::json to_json(const Environment& e) {
  nlohmann::json env = nlohmann::json::object(), vars = nlohmann::json::array(), archs = nlohmann::json::array();
  for (const auto& v : e.vars) {
    env[v.name] = v.value;
    vars.push_back({{"name", v.name}, {"value", v.value}, {"why", v.why}});
  }
  for (const auto& a : e.archs) archs.push_back(a.cc_name() + (a.ptx ? "+PTX" : ""));
  nlohmann::json torch = nullptr;
  if (e.torch)
    torch = {{"python", e.torch->python}, {"version", e.torch->version},
             {"cuda", e.torch->cuda ? nlohmann::json(*e.torch->cuda) : nlohmann::json(nullptr)}};
  return {{"env", env},
          {"vars", vars},
          {"archs", archs},
          {"grammar", e.grammar},
          {"grammar_of", e.grammar_of},
          {"torch", torch},
          {"for", e.project ? nlohmann::json(*e.project) : nlohmann::json(nullptr)},
          {"jobs", {{"jobs", e.jobs.jobs}, {"threads_per_job", e.jobs.threads_per_job}, {"gib_per_job", e.jobs.gib_per_job},
                    {"rule", e.jobs.rule()}}},
          {"notes", e.notes}};
}

Result<std::string> constraints(const Environment& e) {
  if (!e.torch)
    return Error::missing_tool("--constraints: no torch is installed for the chosen Python, so there is nothing to pin; "
                               "install the custom torch first (or give --python PY)");
  return fmt::format("torch=={}\n", e.torch->version);
}

}  // namespace archbuild::extenv
