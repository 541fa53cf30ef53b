#include "validate/import_test.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "arch/compat.hpp"
#include "core/text.hpp"

namespace archbuild::validate {

namespace fs = std::filesystem;

namespace {

// Printed by the interpreter under test: its version, whether `python -m venv` can work there
// (venv makes the folder, ensurepip puts pip in it; Debian splits both off the stdlib), and its
// own pip's version (pip >= 22.3 can install into the venv from outside).
constexpr const char* kProbe =
    "import sys, json, importlib.util as u\n"
    "try:\n"
    "    import importlib.metadata as m; pip = m.version('pip') if u.find_spec('pip') else None\n"
    "except Exception:\n"
    "    pip = None\n"
    "print(json.dumps({'version': '%d.%d.%d' % sys.version_info[:3], 'executable': sys.executable,\n"
    "                  'venv': u.find_spec('venv') is not None, 'ensurepip': u.find_spec('ensurepip') is not None,\n"
    "                  'pip': pip}))\n";

std::string json_str(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

bool under(const fs::path& file, const fs::path& dir) {
  std::error_code ec;
  auto f = fs::weakly_canonical(file, ec);
  if (ec) f = file;
  auto d = fs::weakly_canonical(dir, ec);
  if (ec) d = dir;
  auto rel = f.lexically_relative(d);
  return !rel.empty() && *rel.begin() != "..";
}

// "sm_90", "sm_90a", "compute_120" as get_arch_list() prints them.
std::vector<arch::CodeImage> images_of_names(const std::vector<std::string>& names) {
  static const std::regex re("^(sm|compute)_([0-9]+)([af]?)$");
  std::vector<arch::CodeImage> out;
  for (const auto& n : names) {
    std::smatch m;
    if (!std::regex_match(n, m, re)) continue;
    arch::CodeImage img;
    img.kind = m[1] == "sm" ? arch::CodeKind::sass : arch::CodeKind::ptx;
    img.cc = arch::Cc::from_sm(std::stoi(m[2].str()));
    img.variant = m[3] == "a" ? arch::Variant::a : m[3] == "f" ? arch::Variant::f : arch::Variant::none;
    out.push_back(img);
  }
  return out;
}

std::vector<std::string> string_list(const nlohmann::json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const auto& x : j)
    if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

}  // namespace

std::vector<std::string> python_probe_argv(const fs::path& python) { return {python.string(), "-c", kProbe}; }

Result<PythonInfo> interpret_python_probe(const Outcome& o, const fs::path& python) {
  std::string py = python.string();
  if (o.timed_out) return Error::missing_tool(fmt::format("{}: did not answer in time", py));
  auto j = parse_import_output(o.out);
  if (o.status != 0 || !j) {
    auto lines = tail_lines(o, 1);
    return Error::missing_tool(fmt::format("{}: not a working Python interpreter (exit {}){}", py, o.status,
                                           lines.empty() ? "" : ": " + lines.back()));
  }
  auto v = Version::parse(json_str(*j, "version"));
  if (!v) return Error::missing_tool(fmt::format("{}: reports no version", py));
  std::string xy = v->prefix(2).str();
  if (!j->value("venv", false))
    return Error::missing_tool(fmt::format(
        "{} (Python {}) lacks the venv module, which the import test needs: install python3-venv (Debian/Ubuntu: "
        "apt install python{}-venv) or give --python an interpreter that has it",
        py, v->str(), xy));
  PythonInfo info{*v, json_str(*j, "executable"), Version::parse(json_str(*j, "pip"))};
  if (!j->value("ensurepip", false) && !info.pip_installs_elsewhere())
    return Error::missing_tool(fmt::format(
        "{} (Python {}) lacks the ensurepip module, so `python -m venv` cannot put pip in the venv: install "
        "python3-venv (Debian/Ubuntu: apt install python{}-venv) or give --python an interpreter that has it",
        py, v->str(), xy));
  return info;
}

bool PythonInfo::pip_installs_elsewhere() const { return pip && *pip >= *Version::parse("22.3"); }

std::optional<Version> wheel_python(const WheelName& name) {
  static const std::regex re("^(cp|py)([0-9])([0-9]+)$");
  std::optional<Version> found;
  for (const auto& t : name.python_tags) {
    std::smatch m;
    if (!std::regex_match(t, m, re)) continue;
    auto v = Version::parse(m[2].str() + "." + m[3].str());
    if (found && v && *found != *v) return std::nullopt;
    found = v;
  }
  return found;
}

std::optional<std::string> python_tag_mismatch(const WheelName& name, const Version& python) {
  std::string major = std::to_string(python.major());
  std::string xy = major + std::to_string(python.minor());
  for (const auto& t : name.python_tags)
    if (t == "py" + major || t == "py" + xy || t == "cp" + xy || t == "cp" + major) return std::nullopt;
  std::string want;
  if (auto v = wheel_python(name)) want = fmt::format(": give --python python{}", v->str());
  return fmt::format("the wheel is for {} and the interpreter is Python {}{}", text::join(name.python_tags, "."),
                     python.str(), want);
}

fs::path venv_python(const fs::path& venv) { return venv / "bin" / "python"; }

std::vector<std::string> venv_argv(const fs::path& python, const fs::path& venv, bool with_pip) {
  std::vector<std::string> argv{python.string(), "-m", "venv"};
  if (!with_pip) argv.push_back("--without-pip");
  argv.push_back(venv.string());
  return argv;
}

std::vector<std::string> pip_argv(const fs::path& venv, const std::optional<fs::path>& outer) {
  if (outer) return {outer->string(), "-m", "pip", "--python", venv_python(venv).string()};
  return {venv_python(venv).string(), "-m", "pip"};
}

std::vector<std::string> pip_install_argv(const fs::path& venv, const fs::path& wheel,
                                          const std::optional<fs::path>& outer) {
  auto argv = pip_argv(venv, outer);
  argv.insert(argv.end(), {"install", "--no-index", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
                           "--no-input", wheel.string()});
  return argv;
}

std::vector<std::string> pip_requirements_argv(const fs::path& venv, const std::vector<std::string>& requirements,
                                               const std::optional<fs::path>& outer) {
  auto argv = pip_argv(venv, outer);
  argv.insert(argv.end(), {"install", "--no-cache-dir", "--disable-pip-version-check", "--no-input"});
  argv.insert(argv.end(), requirements.begin(), requirements.end());
  return argv;
}

bool requirements_unavailable(const Outcome& o) {
  std::string all = o.out + "\n" + o.err;
  for (const char* sign : {"No matching distribution found", "Could not find a version that satisfies",
                           "Failed to establish a new connection", "Network is unreachable",
                           "Temporary failure in name resolution", "Name or service not known",
                           "Could not fetch URL", "Max retries exceeded"})
    if (all.find(sign) != std::string::npos) return true;
  return false;
}

std::vector<std::string> import_argv(const fs::path& venv, const fs::path& script, const std::string& module,
                                     bool gpu) {
  // -I: neither the working folder, PYTHONPATH nor the user's site-packages can shadow the venv.
  std::vector<std::string> argv{venv_python(venv).string(), "-I", script.string(), module};
  if (gpu) argv.push_back("--gpu");
  return argv;
}

std::optional<nlohmann::json> parse_import_output(const std::string& out) {
  auto lines = text::split_any(out, "\n");
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    std::string l = text::trim(*it);
    if (l.empty() || l.front() != '{') continue;
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (!j.is_discarded() && j.is_object()) return j;
  }
  return std::nullopt;
}

Check interpret_import(const Outcome& o, const std::string& module, const fs::path& venv) {
  return interpret_import_in(o, module, venv, "a fresh venv");
}

Check interpret_import_in(const Outcome& o, const std::string& module, const fs::path& venv, const std::string& where) {
  Check c;
  c.name = "import";
  c.status = Status::fail;
  if (o.timed_out) {
    c.summary = fmt::format("import {} did not finish in time", module);
    return c;
  }
  auto j = parse_import_output(o.out);
  if (!j) {
    c.details = tail_lines(o);
    c.summary = fmt::format("the import check printed no result (exit {}){}", o.status,
                            c.details.empty() ? "" : ": " + c.details.back());
    return c;
  }
  c.evidence = *j;
  c.evidence.erase("gpu");       // import-gpu's evidence
  c.evidence.erase("features");  // the features check's
  std::string err = json_str(*j, "import_error");
  if (!err.empty()) {
    for (auto& l : text::split_any(json_str(*j, "traceback"), "\n")) c.details.push_back(l);
    if (c.details.size() > 12) c.details.erase(c.details.begin(), c.details.end() - 12);
    c.summary = fmt::format("import {} failed: {}", module, err);
    return c;
  }
  std::string file = json_str(*j, "file");
  if (file.empty() || !under(file, venv)) {
    c.summary = fmt::format("import {} loaded {}, not the copy pip installed in {}", module,
                            file.empty() ? "a module without a file" : file, venv.string());
    return c;
  }
  c.status = Status::pass;
  std::string version = json_str(*j, "version");
  c.summary = fmt::format("imported {}{} from {} (Python {})", module, version.empty() ? "" : " " + version, where,
                          json_str(*j, "python"));
  if (j->contains("arch_list") && (*j)["arch_list"].is_array()) {
    auto archs = string_list((*j)["arch_list"]);
    // torch.cuda.get_arch_list() is [] wherever CUDA is not available.
    c.summary += archs.empty() ? std::string("; cuda.get_arch_list() is empty here")
                               : fmt::format("; cuda.get_arch_list() = [{}]", text::join(archs, ", "));
  }
  return c;
}

std::optional<Check> interpret_features(const nlohmann::json& result, const std::optional<std::string>& cuda) {
  if (!result.contains("features") || !result["features"].is_array()) return std::nullopt;
  Check c;
  c.name = "features";
  c.evidence = {{"features", result["features"]}};
  std::vector<std::string> failed, skipped, passed;
  for (const auto& f : result["features"]) {
    if (!f.is_object()) continue;
    std::string name = json_str(f, "name");
    std::string value = f.contains("value") && !f["value"].is_null()
                            ? (f["value"].is_string() ? f["value"].get<std::string>() : f["value"].dump())
                            : std::string();
    std::string err = json_str(f, "error");
    nlohmann::json ok = f.value("ok", nlohmann::json());
    // torch.version.cuda is judged here, against the toolkit the wheel says it was built with.
    if (name == "cuda-version" && cuda && ok == true && !value.empty()) {
      auto got = Version::parse(value), want = Version::parse(*cuda);
      if (got && want && got->prefix(2) != want->prefix(2)) {
        ok = false;
        err = fmt::format("torch.version.cuda is {}, the wheel says CUDA {}", value, *cuda);
      }
    }
    std::string line = fmt::format("{}: {}", name,
                                   ok.is_null()  ? "skipped (" + json_str(f, "reason") + ")"
                                   : ok == true  ? (value.empty() ? std::string("ok") : value)
                                                 : "FAILED: " + (err.empty() ? value : err));
    c.details.push_back(line);
    (ok.is_null() ? skipped : ok == true ? passed : failed).push_back(ok == false ? line : name);
  }
  if (!failed.empty()) {
    c.status = Status::fail;
    c.summary = text::join(failed, "; ");
  } else {
    c.summary = fmt::format("{} of {} feature checks passed{}", passed.size(), passed.size() + skipped.size(),
                            skipped.empty() ? "" : fmt::format(" ({} skipped: {})", skipped.size(), text::join(skipped, ", ")));
    if (passed.empty() && !skipped.empty()) c.status = Status::skip;
  }
  return c;
}

Check interpret_import_gpu(const nlohmann::json& result, const std::vector<arch::Arch>& targets, const Gpu& gpu) {
  Check c;
  c.name = "import-gpu";
  const nlohmann::json g = result.contains("gpu") && result["gpu"].is_object() ? result["gpu"] : nlohmann::json();
  c.evidence = {{"gpu", {{"index", gpu.index}, {"name", gpu.name}, {"cc", gpu.cc.str()}}},
                {"result", g.is_object() ? g : nlohmann::json(nullptr)}};
  std::vector<std::string> problems;
  std::vector<std::string> passed;
  if (!g.is_object()) {
    problems.push_back("the GPU part of the import check did not run");
  } else if (!json_str(g, "error").empty()) {
    problems.push_back(json_str(g, "error"));
  } else {
    if (g.contains("available") && g["available"] == false)
      problems.push_back(fmt::format("cuda.is_available() is False on a host with {} ({})", gpu.name, gpu.cc.str()));
    auto cap = g.contains("capability") ? g["capability"] : nlohmann::json();
    if (cap.is_array() && cap.size() == 2 && cap[0].is_number_integer() && cap[1].is_number_integer()) {
      arch::Cc got{cap[0].get<int>(), cap[1].get<int>()};
      if (got != gpu.cc)
        problems.push_back(fmt::format("get_device_capability() = {}, the GPU it was aimed at is {}", got.str(),
                                       gpu.cc.str()));
      else
        passed.push_back("capability " + got.str());
    } else {
      problems.push_back("the package reports no device capability");
    }
    if (result.contains("arch_list") && result["arch_list"].is_array()) {
      auto names = string_list(result["arch_list"]);
      auto v = arch::run_verdict(images_of_names(names), gpu.cc);
      if (v.result == arch::RunResult::no_kernel_image)
        problems.push_back(fmt::format("get_arch_list() = [{}] has no kernel image for {}", text::join(names, ", "),
                                       gpu.cc.str()));
      else
        passed.push_back(fmt::format("get_arch_list() covers {} ({})", gpu.cc.str(), arch::to_string(v.result)));
    } else {
      c.details.push_back("the package has no cuda.get_arch_list()");
    }
    const nlohmann::json op = g.contains("op") ? g["op"] : nlohmann::json();
    std::string what = op.is_object() ? json_str(op, "what") : "";
    if (!op.is_object() || op.value("ok", nlohmann::json()).is_null()) {
      c.details.push_back(op.is_object() && !json_str(op, "reason").empty() ? json_str(op, "reason")
                                                                           : "no CUDA operation ran");
      if (problems.empty()) c.status = Status::warn;
    } else if (op["ok"] == true) {
      passed.push_back(what + " ok");
    } else {
      problems.push_back(fmt::format("{}: {}", what.empty() ? "the CUDA operation" : what,
                                     op.contains("error") ? json_str(op, "error")
                                                          : fmt::format("got {}, expected {}",
                                                                        op.value("got", nlohmann::json()).dump(),
                                                                        op.value("expected", nlohmann::json()).dump())));
    }
  }
  (void)targets;
  if (!problems.empty()) {
    c.status = Status::fail;
    c.summary = text::join(problems, "; ");
  } else {
    c.summary = fmt::format("on {} ({}): {}", gpu.name, gpu.cc.str(), text::join(passed, "; "));
    if (c.status == Status::warn) c.summary += "; no CUDA operation known for this package";
  }
  return c;
}

Report import_test(const fs::path& wheel, const std::optional<WheelName>& name, const std::vector<arch::Arch>& targets,
                   const ImportSetup& setup, const Exec& exec) {
  Report r;
  r.subject = wheel.string();
  auto add = [&](const char* check, Status st, std::string summary, bool missing = false,
                 std::vector<std::string> details = {}) {
    Check c;
    c.name = check;
    c.status = st;
    c.summary = std::move(summary);
    c.missing_tool = missing;
    c.details = std::move(details);
    r.add(std::move(c));
  };
  auto gpu_skipped = [&](const std::string& why) { add("import-gpu", Status::skip, why); };

  auto probed = exec({python_probe_argv(setup.python), {}, std::nullopt, std::chrono::seconds(60)});
  if (!probed) {
    add("import", Status::skip, fmt::format("no Python for the import test: {}", probed.error().message), true);
    gpu_skipped("not imported");
    return r;
  }
  auto info = interpret_python_probe(*probed, setup.python);
  if (!info) {
    add("import", Status::skip, info.error().message, true);
    gpu_skipped("not imported");
    return r;
  }
  if (name)
    if (auto mismatch = python_tag_mismatch(*name, info->version)) {
      add("import", Status::skip, *mismatch, true);
      gpu_skipped("not imported");
      return r;
    }

  auto scratch = Scratch::make(setup.work_dir, "archbuild-import");
  if (!scratch) {
    add("import", Status::fail, scratch.error().message);
    gpu_skipped("not imported");
    return r;
  }
  fs::path venv = scratch->path() / "venv";
  std::error_code ec;
  fs::remove_all(venv, ec);  // fresh, also in a kept work folder
  // pip must not ask; its configuration (PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX, pip.conf)
  // reaches it unchanged: that is where the requirements come from.
  std::map<std::string, std::string> env{
      {"PIP_NO_INPUT", "1"}, {"PIP_DISABLE_PIP_VERSION_CHECK", "1"}, {"PYTHONNOUSERSITE", "1"}};
  std::optional<fs::path> outer_pip;
  if (info->pip_installs_elsewhere()) outer_pip = setup.python;
  auto made = exec({venv_argv(setup.python, venv, !outer_pip), env, scratch->path(), setup.venv_timeout});
  if (!made || made->status != 0) {
    auto lines = made ? tail_lines(*made) : std::vector<std::string>{made.error().message};
    add("import", Status::skip,
        fmt::format("`{} -m venv` failed{}", setup.python.string(), lines.empty() ? "" : ": " + lines.back()), true,
        lines);
    gpu_skipped("not imported");
    return r;
  }
  // The local wheels (the custom torch) first, then the wheel's requirements; false: reported.
  auto install = [&](const std::vector<std::string>& reqs, const std::string& what) {
    if (reqs.empty()) return true;
    auto deps = exec({pip_requirements_argv(venv, reqs, outer_pip), env, scratch->path(), setup.install_timeout});
    if (deps && deps->status == 0 && !deps->timed_out) return true;
    auto lines = deps ? tail_lines(*deps) : std::vector<std::string>{deps.error().message};
    std::string last = lines.empty() ? "" : ": " + lines.back();
    if (deps && !deps->timed_out && requirements_unavailable(*deps)) {
      // Not the wheel's fault, and not a pass: validation is incomplete (exit 3).
      add("import", Status::skip,
          fmt::format("{} cannot be had here (no index or wheelhouse){}: not imported; give pip an index or a "
                      "wheelhouse (PIP_INDEX_URL, PIP_FIND_LINKS, pip.conf)", what, last),
          true, lines);
    } else {
      add("import", Status::fail,
          fmt::format("pip install of {} failed{}", what, deps && deps->timed_out ? std::string(": timed out") : last),
          false, lines);
    }
    gpu_skipped("not installed");
    return false;
  };
  std::vector<std::string> local;
  for (const auto& w : setup.local_wheels) local.push_back(fs::absolute(w).string());
  if (!install(local, fmt::format("the requirements of {}", text::join(local, ", ")))) return r;
  if (!install(setup.requirements,
               fmt::format("the wheel's {} requirement{}", setup.requirements.size(), setup.requirements.size() == 1 ? "" : "s")))
    return r;
  auto installed = exec({pip_install_argv(venv, fs::absolute(wheel), outer_pip), env, scratch->path(), setup.install_timeout});
  if (!installed || installed->status != 0 || installed->timed_out) {
    auto lines = installed ? tail_lines(*installed) : std::vector<std::string>{installed.error().message};
    std::string why = installed && installed->timed_out ? "timed out" : lines.empty() ? "" : lines.back();
    add("import", Status::fail,
        fmt::format("pip install --no-index --no-deps of the wheel failed{}", why.empty() ? "" : ": " + why), false,
        lines);
    gpu_skipped("not installed");
    return r;
  }

  std::string why_no_gpu;
  auto gpu = matching_gpu(setup.gpus, targets, &why_no_gpu);
  auto run_env = env;
  if (gpu) select_gpu(run_env, *gpu);
  auto argv = import_argv(venv, setup.script, setup.module, gpu.has_value());
  argv.insert(argv.end(), setup.script_args.begin(), setup.script_args.end());
  auto ran = exec({argv, run_env, scratch->path(), setup.import_timeout});
  if (!ran) {
    add("import", Status::fail, fmt::format("cannot run the venv's python: {}", ran.error().message));
    gpu_skipped("not imported");
    return r;
  }
  auto imported = interpret_import(*ran, setup.module, venv);
  bool ok = imported.status == Status::pass;
  r.add(std::move(imported));
  if (ok)
    if (auto f = interpret_features(*parse_import_output(ran->out), setup.cuda)) r.add(std::move(*f));
  if (!ok) {
    gpu_skipped("not imported");
  } else if (!gpu) {
    gpu_skipped(fmt::format("{}: get_arch_list(), the device capability and a CUDA operation were not checked",
                            why_no_gpu));
  } else {
    r.add(interpret_import_gpu(*parse_import_output(ran->out), targets, *gpu));
  }
  return r;
}

}  // namespace archbuild::validate
