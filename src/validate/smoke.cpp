#include "validate/smoke.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "arch/compat.hpp"
#include "core/text.hpp"

namespace archbuild::validate {

namespace fs = std::filesystem;

namespace {

std::vector<arch::Arch> sass_only(const std::vector<arch::Arch>& targets) {
  std::vector<arch::Arch> out;
  for (auto a : targets) {
    a.sass = true;
    a.ptx = false;
    out.push_back(a);
  }
  return arch::normalize(std::move(out));
}

std::vector<std::string> sass_names(const std::vector<arch::Arch>& targets) {
  std::vector<std::string> out;
  for (const auto& a : sass_only(targets)) out.push_back(a.sm_name());
  return out;
}

std::string fmt_ms(double ms) { return fmt::format("{:.3f} ms", ms); }

}  // namespace

std::vector<std::string> smoke_gencode(const std::vector<arch::Arch>& targets) {
  return arch::to_nvcc(sass_only(targets));
}

std::vector<std::string> smoke_compile_argv(const SmokeSetup& setup, const std::vector<arch::Arch>& targets,
                                            const fs::path& output) {
  std::vector<std::string> argv{setup.nvcc.string()};
  if (setup.host_compiler) {
    argv.push_back("-ccbin");
    argv.push_back(setup.host_compiler->string());
  }
  argv.insert(argv.end(), {"-O2", "-std=c++17"});
  for (auto& g : smoke_gencode(targets)) argv.push_back(std::move(g));
  argv.insert(argv.end(), {"-o", output.string(), setup.source.string()});
  return argv;
}

Check interpret_compile(const Outcome& o, const SmokeSetup& setup, const std::vector<arch::Arch>& targets) {
  Check c;
  c.name = "smoke-compile";
  std::string what = fmt::format("{} for {} (SASS only)", setup.source.filename().string(),
                                 text::join(sass_names(targets), " "));
  c.evidence = {{"toolkit", setup.toolkit},
                {"nvcc", setup.nvcc.string()},
                {"source", setup.source.string()},
                {"gencode", smoke_gencode(targets)}};
  if (setup.host_compiler) c.evidence["host_compiler"] = setup.host_compiler->string();
  if (o.timed_out) {
    c.status = Status::fail;
    c.summary = fmt::format("nvcc did not finish compiling {} in time", what);
  } else if (o.status != 0) {
    c.status = Status::fail;
    c.details = tail_lines(o);
    c.summary = fmt::format("nvcc failed (exit {}) compiling {}{}", o.status, what,
                            c.details.empty() ? "" : ": " + c.details.back());
  } else {
    c.summary = fmt::format("compiled {} with {}", what, setup.toolkit.empty() ? setup.nvcc.string() : setup.toolkit);
  }
  return c;
}

Check check_smoke_sass(const binary::FileReport& file, const std::vector<arch::Arch>& targets) {
  Check c;
  c.name = "smoke-sass";
  // Ordered by arch (CodeImage order), not by name: sm_90 before sm_100.
  std::set<arch::CodeImage> want, sass, ptx;
  for (const auto& img : arch::images_of(sass_only(targets))) want.insert(img);
  for (const auto& img : file.code_images()) (img.kind == arch::CodeKind::ptx ? ptx : sass).insert(img);
  auto names = [](const auto& images) {
    std::vector<std::string> v;
    for (const auto& i : images) v.push_back(i.name());
    return v;
  };
  std::vector<arch::CodeImage> missing, extra;
  for (const auto& w : want)
    if (!sass.count(w)) missing.push_back(w);
  for (const auto& s : sass)
    if (!want.count(s)) extra.push_back(s);
  c.evidence = {{"sass", names(sass)}, {"ptx", names(ptx)}, {"expected", names(want)}};
  if (!missing.empty()) c.details.push_back("no SASS for " + text::join(names(missing), " "));
  if (!extra.empty()) c.details.push_back("SASS that was not asked for: " + text::join(names(extra), " "));
  if (!ptx.empty())
    c.details.push_back("PTX " + text::join(names(ptx), " ") + " (a wrong arch would JIT instead of failing)");
  if (!c.details.empty()) {
    c.status = Status::fail;
    c.summary = "the smoke binary is not SASS-only for exactly the targets: " + text::join(c.details, "; ");
  } else {
    c.summary = fmt::format("the smoke binary carries SASS {} and no PTX", text::join(names(sass), " "));
  }
  return c;
}

const std::vector<std::string>& smoke_kernels() {
  static const std::vector<std::string> k{"vector_add", "matmul_tiled", "warp_reduce_sum"};
  return k;
}

SmokeOutput parse_smoke_output(const std::string& out) {
  SmokeOutput s;
  for (const auto& raw : text::split_any(out, "\n")) {
    std::string line = text::trim(raw);
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      s.unparsed.push_back(line);
      continue;
    }
    auto str = [&](const char* k) -> std::optional<std::string> {
      if (j.contains(k) && j[k].is_string()) return j[k].get<std::string>();
      return std::nullopt;
    };
    auto num = [&](const char* k) -> std::optional<double> {
      if (j.contains(k) && j[k].is_number()) return j[k].get<double>();
      return std::nullopt;
    };
    if (j.contains("device")) {
      s.device = str("device");
      s.cc = str("cc");
      s.device_error = str("error").value_or("");
      s.device_code = str("code").value_or("");
    } else if (auto k = str("kernel")) {
      KernelResult r;
      r.kernel = *k;
      r.ok = j.value("ok", false) == true;
      if (auto a = num("cuda_arch")) r.cuda_arch = static_cast<int>(*a);
      r.ms = num("ms");
      r.max_error = num("max_error");
      r.tolerance = num("tolerance");
      r.error = str("error").value_or("");
      s.kernels.push_back(std::move(r));
    } else {
      s.unparsed.push_back(line);
    }
  }
  return s;
}

std::optional<int> expected_cuda_arch(const std::vector<arch::Arch>& targets, arch::Cc gpu) {
  auto images = arch::images_of(sass_only(targets));
  auto v = arch::run_verdict(images, gpu);
  if (!v.image || (v.result != arch::RunResult::native && v.result != arch::RunResult::compatible_sass))
    return std::nullopt;
  return v.image->cc.sm() * 10;
}

Check interpret_run(const Outcome& o, const std::vector<arch::Arch>& targets, const Gpu& gpu) {
  Check c;
  c.name = "smoke-run";
  auto parsed = parse_smoke_output(o.out);
  auto expect = expected_cuda_arch(targets, gpu.cc);
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& k : parsed.kernels) {
    nlohmann::json kj = {{"kernel", k.kernel}, {"ok", k.ok}};
    if (k.cuda_arch) kj["cuda_arch"] = *k.cuda_arch;
    if (k.ms) kj["ms"] = *k.ms;
    if (k.max_error) kj["max_error"] = *k.max_error;
    if (k.tolerance) kj["tolerance"] = *k.tolerance;
    if (!k.error.empty()) kj["error"] = k.error;
    kernels.push_back(kj);
  }
  c.evidence = {{"gpu", {{"index", gpu.index}, {"name", gpu.name}, {"cc", gpu.cc.str()}}},
                {"device", parsed.device ? nlohmann::json(*parsed.device) : nlohmann::json(nullptr)},
                {"cc", parsed.cc ? nlohmann::json(*parsed.cc) : nlohmann::json(nullptr)},
                {"expected_cuda_arch", expect ? nlohmann::json(*expect) : nlohmann::json(nullptr)},
                {"exit", o.status},
                {"kernels", kernels}};
  std::vector<std::string> problems;
  if (o.timed_out) problems.push_back("the smoke program did not finish in time (a hung kernel or driver)");
  if (!parsed.device && parsed.device_code == "cudaErrorInsufficientDriver") {
    problems.push_back(fmt::format("driver-too-old: the CUDA driver is older than the smoke binary's runtime needs "
                                   "(\"{}\"), on {} ({})",
                                   parsed.device_error, gpu.name, gpu.cc.str()));
  } else if (!parsed.device) {
    problems.push_back(fmt::format("the smoke program found no CUDA device although detection found {} ({}){}",
                                   gpu.name, gpu.cc.str(),
                                   parsed.device_error.empty() ? "" : ": " + parsed.device_error));
  } else if (parsed.cc && *parsed.cc != gpu.cc.str()) {
    problems.push_back(
        fmt::format("it ran on {} ({}), not on the {} GPU it was aimed at", *parsed.device, *parsed.cc, gpu.cc.str()));
  }
  if (parsed.device) {
    for (const auto& name : smoke_kernels()) {
      auto it = std::find_if(parsed.kernels.begin(), parsed.kernels.end(),
                             [&](const KernelResult& k) { return k.kernel == name; });
      if (it == parsed.kernels.end()) {
        problems.push_back(name + " reported nothing");
        continue;
      }
      if (!it->error.empty()) {
        problems.push_back(fmt::format("{}: {}", name, it->error));
        continue;
      }
      if (!it->ok)
        problems.push_back(fmt::format("{}: wrong result (max error {:g}, tolerance {:g})", name,
                                       it->max_error.value_or(-1), it->tolerance.value_or(0)));
      if (expect && it->cuda_arch != expect)
        problems.push_back(fmt::format("{}: ran code compiled for __CUDA_ARCH__ {}, expected {} (the driver loaded "
                                       "another image)",
                                       name, it->cuda_arch ? std::to_string(*it->cuda_arch) : "?", *expect));
    }
  }
  if (problems.empty() && o.status != 0)
    problems.push_back(fmt::format("the smoke program exited with status {}", o.status));
  for (const auto& k : parsed.kernels) {
    std::string line = k.kernel + ":";
    if (k.ms) line += " " + fmt_ms(*k.ms);
    if (k.cuda_arch) line += fmt::format(", __CUDA_ARCH__ {}", *k.cuda_arch);
    if (k.max_error && k.tolerance)
      line += fmt::format(", max error {:.3g} (tolerance {:g})", *k.max_error, *k.tolerance);
    line += k.ok ? ", ok" : ", FAILED";
    c.details.push_back(line);
  }
  for (const auto& u : parsed.unparsed) c.details.push_back("output: " + u);
  if (!problems.empty()) {
    c.status = Status::fail;
    c.summary = text::join(problems, "; ");
    for (const auto& l : tail_lines({o.status, o.timed_out, "", o.err}, 6)) c.details.push_back("stderr: " + l);
    return c;
  }
  std::vector<std::string> times;
  for (const auto& k : parsed.kernels) times.push_back(k.kernel + (k.ms ? " " + fmt_ms(*k.ms) : ""));
  c.summary = fmt::format("{} kernels passed on {} ({}), __CUDA_ARCH__ {}: {}", parsed.kernels.size(),
                          parsed.device.value_or(gpu.name), parsed.cc.value_or(gpu.cc.str()),
                          expect ? std::to_string(*expect) : "?", text::join(times, ", "));
  return c;
}

Report smoke(const std::vector<arch::Arch>& targets, const SmokeSetup& setup, const Exec& exec) {
  Report r;
  r.subject = "smoke " + text::join(sass_names(targets), " ");
  auto skip = [&](const char* name, std::string why, bool missing = false) {
    Check c;
    c.name = name;
    c.status = Status::skip;
    c.summary = std::move(why);
    c.missing_tool = missing;
    r.add(std::move(c));
  };
  if (setup.only_where_a_gpu_runs_it && setup.run) {
    std::string why;
    if (!matching_gpu(setup.gpus, targets, &why)) {
      skip("smoke-compile", "not compiled here, where nothing can run it (" + why +
                                "); the host that built the wheel compiled it (its validation report)");
      skip("smoke-sass", "not compiled");
      skip("smoke-run", "run skipped: " + why, setup.require_gpu);
      return r;
    }
  }
  auto scratch = Scratch::make(setup.work_dir, "archbuild-smoke");
  if (!scratch) {
    Check c;
    c.name = "smoke-compile";
    c.status = Status::fail;
    c.summary = scratch.error().message;
    r.add(std::move(c));
    return r;
  }
  fs::path binary = scratch->path() / "smoke";
  Command compile{smoke_compile_argv(setup, targets, binary), {}, scratch->path(), setup.compile_timeout};
  auto ran = exec(compile);
  if (!ran) {
    Check c;
    c.name = "smoke-compile";
    c.status = Status::skip;
    c.missing_tool = true;
    c.summary = fmt::format("cannot run nvcc: {}", ran.error().message);
    r.add(std::move(c));
    skip("smoke-sass", "not compiled");
    skip("smoke-run", "run skipped: not compiled");
    return r;
  }
  auto compiled = interpret_compile(*ran, setup, targets);
  bool ok = compiled.status == Status::pass;
  r.add(std::move(compiled));
  if (!ok) {
    skip("smoke-sass", "not compiled");
    skip("smoke-run", "run skipped: not compiled");
    return r;
  }

  auto inspected = binary::inspect_path(binary);
  bool sass_ok = false;
  if (!inspected || inspected->files.empty()) {
    Check c;
    c.name = "smoke-sass";
    c.status = Status::fail;
    c.summary = inspected ? "the smoke binary is not an x86-64/aarch64 ELF file" : inspected.error().message;
    r.add(std::move(c));
  } else {
    auto c = check_smoke_sass(inspected->files.front(), targets);
    sass_ok = c.status == Status::pass;
    r.add(std::move(c));
  }

  if (!setup.run) {
    skip("smoke-run", "run skipped: compile and inspect only were asked for", setup.require_gpu);
    return r;
  }
  std::string why;
  auto gpu = matching_gpu(setup.gpus, targets, &why);
  if (!gpu) {
    skip("smoke-run", "run skipped: " + why, setup.require_gpu);
    return r;
  }
  if (!sass_ok) {
    skip("smoke-run", "run skipped: the binary does not carry the SASS it should");
    return r;
  }
  if (setup.driver) {
    if (auto why = driver_too_old(setup.gpus.driver_version, *setup.driver, setup.release); !why.empty()) {
      skip("smoke-run", "run skipped: " + why, setup.require_gpu);
      return r;
    }
  }
  // The GPU detection chose, by UUID where known: the job's mask and order are respected.
  Command run{{binary.string()}, {}, scratch->path(), setup.run_timeout};
  select_gpu(run.env, *gpu);
  auto out = exec(run);
  if (!out) {
    Check c;
    c.name = "smoke-run";
    c.status = Status::fail;
    c.summary = fmt::format("cannot start the smoke binary: {}", out.error().message);
    r.add(std::move(c));
    return r;
  }
  r.add(interpret_run(*out, targets, *gpu));
  return r;
}

std::string driver_too_old(const std::string& driver, const DriverNeed& need, const std::string& release) {
  auto v = Version::parse(driver);
  if (!v) return "";
  // Below the major's floor nothing of this runtime starts; without a floor, the release's minimum.
  const Version& floor = need.floor ? *need.floor : need.min;
  if (!(*v < floor)) return "";
  return fmt::format(
      "driver-too-old: driver {} cannot start CUDA {}'s runtime (needs >= {}{}; {}): the smoke binary would fail with "
      "\"CUDA driver version is insufficient for CUDA runtime version\"; update the driver, or compile with an older "
      "toolkit (--cuda)",
      driver, release, need.min_text,
      need.floor ? fmt::format(", at least {} through minor-version compatibility", need.floor_text) : "",
      need.source);
}

// ---- toolkit choice ------------------------------------------------------------------------

Result<ToolkitChoice> choose_toolkit(const std::vector<toolchain::Toolkit>& found,
                                     const std::vector<toolchain::Toolchain>& facts,
                                     const std::vector<toolchain::Compiler>& compilers,
                                     const std::optional<Version>& cuda, bool cuda_is_preference,
                                     const std::vector<arch::Arch>& targets) {
  auto facts_for = [&](const Version& release) -> const toolchain::Toolchain* {
    for (const auto& t : facts)
      if (t.cuda == release) return &t;
    return nullptr;
  };
  // What keeps a toolkit from compiling the targets, or "" when nothing does.
  auto refusal = [&](const toolchain::Toolkit& tk) -> std::string {
    const auto* f = facts_for(tk.release());
    std::vector<std::string> no;
    for (const auto& a : sass_only(targets))
      if ((f && !f->compiles(a)) || !tk.lists(a.cc)) no.push_back(a.sm_name());
    return no.empty() ? "" : fmt::format("CUDA {} cannot compile {}", tk.release().str(), text::join(no, " "));
  };
  auto installed = [&] {
    std::vector<std::string> v;
    for (const auto& tk : found) v.push_back(fmt::format("CUDA {} at {}", tk.version.str(), tk.root.string()));
    return v.empty() ? std::string("none") : text::join(v, ", ");
  };
  auto finish = [&](const toolchain::Toolkit& tk, std::vector<std::string> notes) -> ToolkitChoice {
    ToolkitChoice ch{tk, std::nullopt, std::move(notes)};
    const auto* f = facts_for(tk.release());
    // As resolution picks it: the user's CUDAHOSTCXX when accepted, else the newest accepted
    // GCC (what PyTorch's own builds use), then Clang.
    auto rank = [](const toolchain::Compiler& x) {
      return std::tuple(x.found_by == "CUDAHOSTCXX", x.kind == toolchain::CompilerKind::gcc, x.version);
    };
    for (const auto& c : compilers) {
      if (f && f->rejects(c.kind, c.version)) continue;
      if (!ch.compiler || rank(c) > rank(*ch.compiler)) ch.compiler = c;
    }
    if (!ch.compiler && !compilers.empty())
      ch.notes.push_back(fmt::format("no host compiler CUDA {} accepts was found; nvcc uses its default",
                                     tk.release().str()));
    return ch;
  };

  if (found.empty())
    return Error::missing_tool(
        "no CUDA toolkit found (looked at CUDA_HOME, nvcc on PATH, /usr/local/cuda*, /opt/cuda*): install one or set "
        "CUDA_HOME");
  std::vector<std::string> notes;
  if (cuda) {
    for (const auto& tk : found) {
      if (tk.release() != cuda->prefix(2)) continue;
      auto no = refusal(tk);
      if (!no.empty()) return Error::bad_input(no + " (choose another --cuda)");
      return finish(tk, {});
    }
    if (!cuda_is_preference)
      return Error::missing_tool(fmt::format("CUDA {} is not installed here (installed: {}); install it or set CUDA_HOME",
                                             cuda->str(), installed()));
    notes.push_back(fmt::format("CUDA {} is not installed here; using another toolkit", cuda->str()));
  }
  std::vector<std::string> refusals;
  for (const auto& tk : found) {
    auto no = refusal(tk);
    if (no.empty()) return finish(tk, std::move(notes));
    refusals.push_back(no);
  }
  // No installed toolkit compiles every target: does any release archbuild knows?
  std::vector<std::string> could;
  for (const auto& f : facts) {
    bool all = true;
    for (const auto& a : sass_only(targets)) all = all && f.compiles(a);
    if (all) could.push_back(f.cuda.str());
  }
  if (could.empty())
    return Error::bad_input(fmt::format("no CUDA release archbuild knows compiles all of {} ({})",
                                        text::join(sass_names(targets), " "), text::join(refusals, "; ")));
  return Error::missing_tool(fmt::format("{}; CUDA {} would: install one (installed: {})", text::join(refusals, "; "),
                                         text::join(could, " or "), installed()));
}

}  // namespace archbuild::validate
