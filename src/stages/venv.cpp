#include "stages/venv.hpp"

#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/sha256.hpp"
#include "core/text.hpp"
#include "run/interrupt.hpp"
#include "store/atomic_file.hpp"
#include "store/lock.hpp"
#include "validate/wheel_check.hpp"

namespace archbuild::stages {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kMarker = "archbuild-venv.json";
const char* const kProbeTag = "ARCHBUILD-VENV-PROBE ";
const char* const kParentTag = "ARCHBUILD-VENV-PARENT ";
// In the fallback venv made from a venv's python: the site-packages that venv sees.
const char* const kParentPth = "_archbuild_parent_venv.pth";

// Run by a venv's python: where it is, its base, and the site-packages it sees (its own, and the
// base's when it was made --system-site-packages), in sys.path order.
const char* const kParentProbe = R"PY(
import json, os, site, sys
dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]
print("ARCHBUILD-VENV-PARENT " + json.dumps({"prefix": sys.prefix, "base_prefix": sys.base_prefix, "site": dirs}))
)PY";

// Run inside the venv: every distribution it sees (system-site-packages included) and, for each
// requirement, whether it applies here (markers) and is satisfied. packaging comes with pip; a
// venv without pip (made --without-pip, pip run from outside) answers by name only.
const char* const kProbe = R"PY(
import json, re, sys, platform
import importlib.metadata as md
def canon(n): return re.sub(r"[-_.]+", "-", n).lower()
Req = None
for mod in ("packaging.requirements", "pip._vendor.packaging.requirements"):
    try:
        Req = __import__(mod, fromlist=["Requirement"]).Requirement
        break
    except Exception:
        pass
dists = {}
where = {}
for d in md.distributions():
    name = d.metadata["Name"]
    if name and canon(name) not in dists:
        dists[canon(name)] = d.version
        try:
            where[canon(name)] = str(d.locate_file(""))
        except Exception:
            pass
out = {"python": platform.python_version(), "packages": dists, "where": where, "requirements": [], "path": [p for p in sys.path if p]}
for text in json.loads(sys.argv[1]):
    e = {"requirement": text}
    if Req is not None:
        r = Req(text)
        e["name"] = canon(r.name)
        e["applies"] = r.marker is None or r.marker.evaluate()
        got = dists.get(e["name"])
        e["installed"] = got
        e["ok"] = (not e["applies"]) or (got is not None and (not r.specifier or r.specifier.contains(got, prereleases=True)))
    else:
        e["name"] = canon(re.split(r"[ \[<>=!~;@]", text, 1)[0])
        e["applies"] = True
        e["installed"] = dists.get(e["name"])
        e["ok"] = e["installed"] is not None
    out["requirements"].append(e)
print("ARCHBUILD-VENV-PROBE " + json.dumps(out, sort_keys=True))
)PY";

std::string requirement_text(const contract::Requirement& r) {
  std::string s = r.name;
  if (!r.extras.empty()) s += "[" + r.extras + "]";
  if (!r.specifier.empty()) s += (r.specifier[0] == '@' ? " " : "") + r.specifier;
  if (!r.marker.empty()) s += "; " + r.marker;
  return s;
}

// The cmake the recipe and the tree accept: >= the tree's minimum, <= the recipe's maximum
// (compared on as many parts as the maximum has: 3.31 allows 3.31.9).
std::optional<std::string> cmake_refusal(const VenvRequest& req, const Version& v) {
  if (req.cmake_min && v < *req.cmake_min)
    return fmt::format("the tree needs cmake >= {} ({}), the host's is {}", req.cmake_min->str(), req.cmake_min_where,
                       v.str());
  if (req.cmake_max && v.prefix(req.cmake_max->size()) > *req.cmake_max)
    return fmt::format("the recipe allows cmake <= {} ([build] cmake_max), the host's is {}", req.cmake_max->str(),
                       v.str());
  return std::nullopt;
}

// "cmake>=3.27,<3.32" for what the recipe and the tree accept.
std::string cmake_requirement(const VenvRequest& req) {
  std::vector<std::string> parts;
  if (req.cmake_min) parts.push_back(">=" + req.cmake_min->str());
  if (req.cmake_max) {
    Version next = *req.cmake_max;
    ++next.parts.back();
    parts.push_back("<" + next.str());
  }
  return "cmake" + text::join(parts, ",");
}

// pip's environment: the caller's, with fast failure where the caller said nothing (pip's defaults,
// 5 retries with back-off, cost ~8 s per index URL that refuses connections), and --offline as
// --no-index.
std::map<std::string, std::string> pip_environment(std::map<std::string, std::string> env, bool offline) {
  env.try_emplace("PIP_RETRIES", "1");
  if (!env.count("PIP_DEFAULT_TIMEOUT")) env.try_emplace("PIP_TIMEOUT", "10");
  env.try_emplace("PIP_DISABLE_PIP_VERSION_CHECK", "1");  // no request to an index for pip itself
  env.try_emplace("PIP_NO_INPUT", "1");
  if (offline) env["PIP_NO_INDEX"] = "1";
  return env;
}

// "setuptools[x]>=77,<80; python_version>'3'" → {"setuptools[x]", ">=77,<80"}; a URL requirement
// keeps "@ URL" as its specifier.
std::pair<std::string, std::string> split_requirement(const std::string& text) {
  std::string r = text::trim(text.substr(0, text.find(';')));
  std::size_t i = 0;
  while (i < r.size() && (std::isalnum(static_cast<unsigned char>(r[i])) || r[i] == '-' || r[i] == '_' || r[i] == '.')) ++i;
  if (i < r.size() && r[i] == '[') {
    auto close = r.find(']', i);
    i = close == std::string::npos ? r.size() : close + 1;
  }
  std::string spec = text::trim(r.substr(i));
  if (spec.size() >= 2 && spec.front() == '(' && spec.back() == ')') spec = text::trim(spec.substr(1, spec.size() - 2));
  return {r.substr(0, i), spec};
}

// The reason in pip's line about an unreachable index: "[Errno 111] Connection refused", or the
// line itself (cut) where it has no errno.
std::string unreachable_reason(std::string_view line) {
  if (auto at = line.find("[Errno"); at != std::string_view::npos) {
    auto end = line.find_first_of("'\")", at);
    return std::string(line.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
  }
  std::string s = text::trim(line);
  return s.size() > 200 ? s.substr(0, 200) + "…" : s;
}

struct ParentVenv {
  std::string prefix;             // the venv the interpreter belongs to
  std::vector<std::string> site;  // the site-packages it sees
};

struct Probe {
  std::string python;
  std::map<std::string, std::string> packages;
  std::map<std::string, std::string> where;  // the folder each distribution is in
  json requirements = json::array();
  std::vector<std::string> path;  // the interpreter's sys.path folders
};

// "inode:size:mtime" of a folder: installing, removing or upgrading a package in a site-packages
// folder adds or removes entries in it, which changes its mtime.
std::string folder_signature(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return fmt::format("{}:{}:{}.{}", st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

// What a probe's answer depends on: the signatures of its sys.path folders.
json path_signatures(const std::vector<std::string>& path) {
  json j = json::object();
  for (const auto& p : path) j[p] = folder_signature(p);
  return j;
}

// True when the recorded folders are all unchanged (and some were recorded).
bool signatures_hold(const json& recorded) {
  if (!recorded.is_object() || recorded.empty()) return false;
  for (const auto& [p, sig] : recorded.items())
    if (!sig.is_string() || folder_signature(p) != sig.get<std::string>()) return false;
  return true;
}

// A venv over the interpreter's (or a parent venv's) packages: each package the requirements
// name that the venv sees outside its own folder, with its version and where it is, so that
// `plan` and the manifest say which packages did not come from pip.
std::vector<std::string> from_system_lines(const Probe& p, const fs::path& own) {
  std::error_code ec;
  std::string mine = fs::weakly_canonical(own, ec).string();
  std::set<std::string> seen;
  std::vector<std::string> out;
  for (const auto& r : p.requirements) {
    std::string name = r.value("name", std::string());
    if (name.empty() || !r.value("applies", true) || !seen.insert(name).second) continue;
    auto ver = p.packages.find(name);
    auto at = p.where.find(name);
    if (ver == p.packages.end() || at == p.where.end()) continue;
    std::string dir = fs::weakly_canonical(at->second, ec).string();
    if (dir.rfind(mine + "/", 0) == 0) continue;
    out.push_back(fmt::format("{} {}: {}", name, ver->second, at->second));
  }
  return out;
}

class Maker {
 public:
  Maker(const VenvRequest& req, const store::Layout& layout, run::Runner& runner, run::Reporter& reporter)
      : req_(req), layout_(layout), runner_(runner), reporter_(reporter) {}

  Result<plan::BuildVenv> run() {
    PipRequirements reqs = pip_requirements(req_);
    env_ = pip_environment(req_.env, req_.offline);
    auto parent = parent_venv();
    if (!parent) return parent.error();
    parent_ = std::move(*parent);
    std::error_code ec;
    plan::BuildVenv v;
    v.interpreter = fs::canonical(req_.interpreter, ec).string();
    if (ec) return Error::missing_tool(fmt::format("{}: {}", req_.interpreter.string(), ec.message()));
    v.interpreter_version = req_.interpreter_version.str();
    v.requirements = reqs.pip;
    v.from_host = reqs.from_host;
    v.pip_options = req_.pip_options;
    v.from_host.insert(v.from_host.end(), reqs.from_wheels.begin(), reqs.from_wheels.end());
    v.from_venv = reqs.from_venv;
    venv_pip_ = reqs.venv_pip;
    auto wheels = installed_wheels(req_.wheels);
    if (!wheels) return wheels.error();
    v.wheels = std::move(*wheels);
    std::string hashed = fmt::format("archbuild build venv v1\n{}\n{}\n{}", v.interpreter, v.interpreter_version,
                                     text::join(reqs.pip, "\n"));
    // Only with wheels, so the venvs of builds without any keep their hashes.
    for (const auto& w : v.wheels) hashed += fmt::format("\nwheel {} {} {}", w.name, w.version, w.sha256);
    // A venv's python: its realpath is the base interpreter's, so the venv it belongs to tells
    // two such interpreters apart (only then, so other venvs keep their hashes).
    if (parent_) hashed += "\nparent venv " + parent_->prefix;
    if (reqs.venv_pip) hashed += "\nwith its own pip";  // only then, so other venvs keep their hashes
    v.hash = sha256_hex(hashed).substr(0, 24);
    v.dir = layout_.venv(v.hash);
    v.python = v.dir / "bin" / "python";
    log_ = layout_.venv_log(v.hash);
    if (auto e = layout_.create(); !e) return e.error();

    if (auto r = reuse(v)) return finish(std::move(*r), reqs);
    auto lock = store::FileLock::acquire(
        layout_.venv_lock(v.hash),
        [&](const std::string& holder) {
          reporter_.message(run::Level::info, fmt::format("waiting for another archbuild ({}) making the build venv {}",
                                                          holder.empty() ? "pid unknown" : holder, v.dir.string()));
        },
        [] { return run::interrupt_requested(); });
    if (!lock) return lock.error();
    if (auto r = reuse(v)) return finish(std::move(*r), reqs);
    auto made = make(v, reqs);
    if (!made) return made.error();
    return finish(std::move(*made), reqs);
  }

 private:
  // A complete venv (its link and marker exist) is reused as it is; one over the system's
  // packages is probed again, since those may have changed under it.
  std::optional<plan::BuildVenv> reuse(const plan::BuildVenv& want) {
    std::error_code ec;
    fs::path marker = want.dir / kMarker;
    if (!fs::is_symlink(want.dir, ec) || !fs::is_regular_file(marker, ec)) return std::nullopt;
    // A record of the cache is verified before it is trusted: a venv whose interpreter is gone
    // (bin/python removed, or the base interpreter it links to uninstalled) fails every build
    // that reuses it at configure. Made again instead (make() removes what is left of it).
    if (!fs::is_regular_file(want.python, ec) || ::access(want.python.c_str(), X_OK) != 0) {
      if (!std::exchange(damage_said_, true))
        reporter_.message(run::Level::warning,
                          fmt::format("build venv {} is damaged ({} is gone or cannot run): making it again",
                                    want.dir.string(), want.python.string()));
      return std::nullopt;
    }
    std::ifstream in(marker);
    json doc = json::parse(in, nullptr, false);
    if (!doc.is_object()) return std::nullopt;
    plan::BuildVenv v = want;
    v.reused = true;
    v.system_site_packages = doc.value("system_site_packages", false);
    v.sources = doc.value("sources", std::vector<std::string>{});
    v.packages = doc.value("packages", std::map<std::string, std::string>{});
    v.from_system = doc.value("from_system", std::vector<std::string>{});
    // Over the system's (or a parent venv's) packages: probed again only when a folder of its
    // sys.path changed since the last probe, so a repeat of a built key starts no process.
    if (v.system_site_packages && !signatures_hold(doc.value("path_signatures", json()))) {
      append_ = true;  // keep the log of its making
      auto p = probe(v.python, v.requirements);
      if (!p) return std::nullopt;
      v.packages = p->packages;
      v.from_system = from_system_lines(*p, v.dir);
      doc["packages"] = p->packages;
      doc["from_system"] = v.from_system;
      doc["path_signatures"] = path_signatures(p->path);
      (void)store::write_file_atomic(marker, doc.dump(2));  // the next reuse trusts this answer
    }
    reporter_.message(run::Level::info, fmt::format("build venv {} reused", v.dir.string()));
    return v;
  }

  Result<plan::BuildVenv> finish(plan::BuildVenv v, const PipRequirements& reqs) {
    // One cmake for every step: the host's when the tree and recipe accept it, else the venv's.
    if (reqs.cmake_problem) {
      fs::path venv_cmake = v.dir / "bin" / "cmake";
      std::error_code ec;
      auto pkg = v.packages.find("cmake");
      if (!fs::exists(venv_cmake, ec) || pkg == v.packages.end())
        return Error::missing_tool(fmt::format("cmake: {}, and the build venv {} has no cmake; {}", *reqs.cmake_problem,
                                               v.dir.string(), provider_hint("cmake", req_.interpreter)));
      v.cmake = venv_cmake;
      v.cmake_version = pkg->second;
    } else if (auto it = req_.host_tool_versions.find("cmake"); it != req_.host_tool_versions.end()) {
      v.cmake_version = it->second.str();
    }
    return v;
  }

  Result<plan::BuildVenv> make(plan::BuildVenv v, const PipRequirements& reqs) {
    std::error_code ec;
    // Left by a killed creation: never reused (no link points at it), removed under the lock.
    std::string stale = v.hash + ".d-";
    for (const auto& e : fs::directory_iterator(layout_.venvs_dir(), ec))
      if (e.path().filename().string().rfind(stale, 0) == 0) fs::remove_all(e.path(), ec);
    fs::remove(v.dir, ec);  // a link without its marker
    fs::path work = layout_.venv_work_dir(v.hash, static_cast<long>(::getpid()));
    reporter_.message(run::Level::info, fmt::format("making the build venv {} from {} ({} requirements; log {})",
                                                    v.dir.string(), v.interpreter, reqs.pip.size(), log_.string()));
    append_ = false;
    const PackageSources sources = package_sources();
    v.sources = sources.lines;
    json signatures;  // of the sys.path folders, for a venv over packages that are not its own
    auto first = create_and_install(work, false, reqs.pip);
    if (!first) return first.error();
    if (!unreachable_.empty()) {
      for (std::size_t i = 0; i < sources.indexes; ++i) v.sources[i] += " (unreachable: not asked again)";
      reporter_.message(run::Level::warning,
                        fmt::format("the package index did not answer pip ({}); it is not asked again for this "
                                    "venv (--find-links only)",
                                    unreachable_));
    }
    if (!*first) {
      // The index could not serve everything: the interpreter's own packages, and pip again
      // for what they lack (a wheelhouse may still hold it). An index that did not answer is not
      // asked again: the second pip waits on it no better than the first.
      std::string over = parent_ ? fmt::format("the packages of the venv {} ({})", parent_->prefix,
                                               text::join(parent_->site, ", "))
                                 : fmt::format("{}'s own packages (--system-site-packages)", v.interpreter);
      reporter_.message(run::Level::warning,
                        fmt::format("pip could not install the build requirements into an isolated venv (log {}); "
                                    "trying again over {}{}",
                                    log_.string(), over, unreachable_.empty() ? "" : " with --no-index"));
      fs::remove_all(work, ec);
      v.system_site_packages = true;
      v.sources.push_back(parent_ ? "site-packages of the venv " + parent_->prefix + ": " + text::join(parent_->site, ", ")
                                  : "system-site-packages of " + v.interpreter);
      auto second = create_and_install(work, true, reqs.pip);
      if (!second) return second.error();
      auto p = install_and_probe(work, v.wheels, reqs.pip);
      if (!p) return p.error();
      std::vector<ProbedRequirement> probed;
      for (const auto& r : p->requirements) {
        ProbedRequirement q;
        q.name = r.value("name", std::string());
        q.requirement = r.value("requirement", q.name);
        q.applies = r.value("applies", true);
        if (r.contains("installed") && r["installed"].is_string()) q.installed = r["installed"].get<std::string>();
        q.ok = r.value("ok", false);
        probed.push_back(std::move(q));
      }
      // cmake: why the host's does not do (the tree's minimum and where it is said, the host's version).
      std::map<std::string, std::string> why;
      if (reqs.cmake_problem) why["cmake"] = *reqs.cmake_problem;
      auto missing = missing_lines(probed, req_.interpreter, why);
      if (!missing.empty() || !*second) {
        fs::remove_all(work, ec);
        if (missing.empty()) missing.push_back("pip failed although every requirement is present");
        return Error::missing_tool(fmt::format("the build venv lacks what the tree's build needs (pip could not "
                                               "install it{}; log {}):\n  {}",
                                               unreachable_.empty() ? "" : ": the package index is unreachable (" + unreachable_ + ")",
                                               log_.string(), text::join(missing, "\n  ")));
      }
      v.packages = p->packages;
      v.from_system = from_system_lines(*p, work);
      if (!v.from_system.empty())
        reporter_.message(run::Level::warning,
                          fmt::format("the build venv uses packages pip did not install: {}", text::join(v.from_system, "; ")));
      signatures = path_signatures(p->path);
    } else {
      auto p = install_and_probe(work, v.wheels, reqs.pip);
      if (!p) return p.error();
      v.packages = p->packages;
    }
    json marker = {{"interpreter", v.interpreter},
                   {"interpreter_version", v.interpreter_version},
                   {"requirements", v.requirements},
                   {"system_site_packages", v.system_site_packages},
                   {"sources", v.sources},
                   {"packages", v.packages},
                   {"from_system", v.from_system}};
    if (!signatures.empty()) marker["path_signatures"] = signatures;
    if (auto w = store::write_file_atomic(work / kMarker, marker.dump(2)); !w) return w.error();
    // Published by an atomic rename of a new link over the name.
    fs::path tmp_link = layout_.venvs_dir() / fmt::format(".{}.link-{}", v.hash, ::getpid());
    fs::remove(tmp_link, ec);
    fs::create_directory_symlink(work.filename(), tmp_link, ec);
    if (!ec) fs::rename(tmp_link, v.dir, ec);
    if (ec) return Error::bad_input(fmt::format("cannot publish the build venv {}: {}", v.dir.string(), ec.message()));
    return v;
  }

  // Where pip looks, as its own configuration says (shown by `plan`, kept in the manifest); the
  // first `indexes` lines are package indexes (an index that does not answer is marked there).
  struct PackageSources {
    std::vector<std::string> lines;
    std::size_t indexes = 0;
  };
  PackageSources package_sources() const {
    auto get = [&](const char* n) -> std::string {
      auto it = env_.find(n);
      return it == env_.end() ? "" : it->second;
    };
    std::vector<std::string> s;
    std::string no_index = get("PIP_NO_INDEX");
    std::size_t indexes = 0;
    if (req_.offline) {
      s.push_back("no index (--offline)");
    } else if (no_index.empty() || no_index == "0" || no_index == "false" || no_index == "no" || no_index == "off") {
      s.push_back("index " + (get("PIP_INDEX_URL").empty() ? std::string("(pip's configured or default)") : get("PIP_INDEX_URL")));
      ++indexes;
    }
    if (!req_.offline && !get("PIP_EXTRA_INDEX_URL").empty()) {
      s.push_back("extra index " + get("PIP_EXTRA_INDEX_URL"));
      ++indexes;
    }
    if (!get("PIP_FIND_LINKS").empty()) s.push_back("find-links " + get("PIP_FIND_LINKS"));
    if (!get("PIP_CONFIG_FILE").empty()) s.push_back("pip config " + get("PIP_CONFIG_FILE"));
    return {std::move(s), indexes};
  }

  run::CommandResult exec(std::vector<std::string> argv, const run::LineCallback& on_line = {},
                          const std::map<std::string, std::string>& extra_env = {}) {
    run::Command cmd;
    cmd.argv = std::move(argv);
    cmd.env = env_;
    for (const auto& [k, val] : extra_env) cmd.env[k] = val;
    cmd.log = log_;
    cmd.append_log = append_;
    append_ = true;
    return runner_.run(cmd, on_line);
  }

  // The wheel files of the request, named and hashed from the files themselves.
  static Result<std::vector<plan::InstalledWheel>> installed_wheels(const std::vector<fs::path>& files) {
    std::vector<plan::InstalledWheel> out;
    for (const auto& f : files) {
      auto name = validate::parse_wheel_name(f.filename().string());
      if (!name) return Error::bad_input(fmt::format("{}: {}", f.string(), name.error().message));
      auto sha = sha256_file_hex(f);
      if (!sha) return sha.error();
      out.push_back({validate::normalize_name(name->distribution), name->version, *sha, fs::absolute(f)});
    }
    return out;
  }

  // After the requirements: each wheel from its file alone (--no-deps --no-index), so pip can
  // neither replace it nor pull another build of it from an index.
  Result<Ok> install_wheels(const fs::path& work, const std::vector<plan::InstalledWheel>& wheels) {
    if (wheels.empty()) return Ok{};
    std::vector<std::string> pip = pip_argv(work);
    for (const char* a : {"install", "--no-deps", "--no-index"}) pip.push_back(a);
    for (const auto& w : wheels) pip.push_back(w.file.string());
    reporter_.message(run::Level::info, fmt::format("installing {} into the build venv (--no-deps)", wheels.front().file.filename().string()));
    auto r = exec(pip);
    if (r.interrupted) return Error::build_failed("interrupted while installing wheels into the build venv");
    if (!r.ok()) {
      auto lines = run::tail(log_, 3);
      return Error::build_failed(fmt::format("pip could not install {} into the build venv ({}): {} (log {})",
                                             wheels.front().file.string(), r.describe(),
                                             lines.empty() ? "" : lines.back(), log_.string()));
    }
    return Ok{};
  }

  // Either way the venv was made (isolated or over the system's packages): the request's wheels
  // into it, then what it holds. On an error the half-made venv at `work` is removed.
  Result<Probe> install_and_probe(const fs::path& work, const std::vector<plan::InstalledWheel>& wheels,
                                  const std::vector<std::string>& reqs) {
    auto p = [&]() -> Result<Probe> {
      if (auto w = install_wheels(work, wheels); !w) return w.error();
      return probe(work / "bin" / "python", reqs);
    }();
    if (!p) {
      std::error_code ec;
      fs::remove_all(work, ec);
    }
    return p;
  }

  // pip for the venv at `work`: the interpreter's own with --python, else the venv's.
  std::vector<std::string> pip_argv(const fs::path& work) {
    if (!has_pip_) has_pip_ = exec({req_.interpreter.string(), "-c", "import pip"}).ok();
    return *has_pip_ ? std::vector<std::string>{req_.interpreter.string(), "-m", "pip", "--python",
                                                (work / "bin" / "python").string()}
                     : std::vector<std::string>{(work / "bin" / "python").string(), "-m", "pip"};
  }

  // python -m venv, then pip install. false: pip failed (the caller falls back); error: no venv.
  Result<bool> create_and_install(const fs::path& work, bool system_site, const std::vector<std::string>& reqs) {
    // pip of the interpreter installs into the venv (--python, pip >= 22.3): no ensurepip copy
    // per venv. An interpreter without pip gets a venv with its own.
    if (!has_pip_) has_pip_ = exec({req_.interpreter.string(), "-c", "import pip"}).ok();
    std::vector<std::string> venv = {req_.interpreter.string(), "-m", "venv"};
    if (*has_pip_ && !venv_pip_) venv.push_back("--without-pip");
    // A venv's python makes venvs whose home is the base interpreter: --system-site-packages
    // would show the base's packages, not the venv's. Its own site-packages are added instead.
    if (system_site && !parent_) venv.push_back("--system-site-packages");
    venv.push_back(work.string());
    auto r = exec(venv);
    if (r.interrupted) return Error::build_failed("interrupted while making the build venv");
    if (!r.ok()) {
      auto lines = run::tail(log_, 5);
      return Error::missing_tool(fmt::format("{} -m venv failed ({}): {}; on Debian/Ubuntu install python3-venv "
                                             "(log {})", req_.interpreter.string(), r.describe(),
                                             lines.empty() ? "" : lines.back(), log_.string()));
    }
    if (system_site && parent_)
      if (auto e = write_parent_pth(work); !e) return e.error();
    if (reqs.empty()) return true;
    std::vector<std::string> pip = pip_argv(work);
    pip.push_back("install");
    pip.insert(pip.end(), reqs.begin(), reqs.end());
    // The first pip tells whether the index answers; after it failed to, only --find-links.
    std::map<std::string, std::string> extra;
    if (!unreachable_.empty()) extra["PIP_NO_INDEX"] = "1";
    auto p = exec(
        pip,
        [&](std::string_view line) {
          if (unreachable_.empty() && pip_index_unreachable(line)) unreachable_ = unreachable_reason(line);
        },
        extra);
    if (p.interrupted) return Error::build_failed("interrupted while installing the build requirements");
    return p.ok();
  }

  // The fallback venv of a venv's python: a .pth in its site-packages adds what that venv sees,
  // its own .pth files (editable installs) included, after the new venv's own packages.
  Result<Ok> write_parent_pth(const fs::path& work) {
    const auto& p = req_.interpreter_version.parts;
    fs::path site = work / "lib" / fmt::format("python{}.{}", p.empty() ? 3 : p[0], p.size() < 2 ? 0 : p[1]) /
                    "site-packages";
    std::error_code ec;
    if (!fs::is_directory(site, ec))
      return Error::build_failed(fmt::format("the build venv {} has no {}", work.string(), site.string()));
    std::string text;
    for (const auto& d : parent_->site) text += site_dir_pth_line(d) + "\n";
    return store::write_file_atomic(site / kParentPth, text);
  }

  // A venv's python (a pyvenv.cfg beside it or one level up, as Python itself looks): where that
  // venv is and what it sees. Anything else: none, and no process is started.
  Result<std::optional<ParentVenv>> parent_venv() {
    std::error_code ec;
    fs::path bin = fs::absolute(req_.interpreter, ec).parent_path();
    if (!fs::exists(bin / "pyvenv.cfg", ec) && !fs::exists(bin.parent_path() / "pyvenv.cfg", ec))
      return std::optional<ParentVenv>();
    run::Command cmd;
    cmd.argv = {req_.interpreter.string(), "-c", kParentProbe};
    cmd.env = env_;
    std::string line;
    auto r = runner_.run(cmd, [&](std::string_view l) {
      if (l.rfind(kParentTag, 0) == 0) line = std::string(l.substr(std::string_view(kParentTag).size()));
    });
    if (r.interrupted) return Error::build_failed("interrupted while asking the interpreter for its site-packages");
    json doc = json::parse(line, nullptr, false);
    if (!r.ok() || !doc.is_object())
      return Error::missing_tool(fmt::format("{}: cannot read which site-packages it sees ({})",
                                             req_.interpreter.string(), r.describe()));
    std::string prefix = doc.value("prefix", ""), base = doc.value("base_prefix", "");
    if (prefix.empty() || prefix == base) return std::optional<ParentVenv>();
    return std::optional<ParentVenv>(ParentVenv{prefix, doc.value("site", std::vector<std::string>{})});
  }

  Result<Probe> probe(const fs::path& python, const std::vector<std::string>& reqs) {
    std::string line;
    auto r = exec({python.string(), "-c", kProbe, json(reqs).dump()}, [&](std::string_view l) {
      if (l.rfind(kProbeTag, 0) == 0) line = std::string(l.substr(std::string_view(kProbeTag).size()));
    });
    if (!r.ok() || line.empty())
      return Error::missing_tool(fmt::format("cannot read the packages of the build venv ({}; log {})", r.describe(),
                                             log_.string()));
    json doc = json::parse(line, nullptr, false);
    if (!doc.is_object()) return Error::missing_tool("the build venv's probe printed no JSON; log " + log_.string());
    Probe p;
    p.python = doc.value("python", "");
    p.packages = doc.value("packages", std::map<std::string, std::string>{});
    p.where = doc.value("where", std::map<std::string, std::string>{});
    p.requirements = doc.value("requirements", json::array());
    p.path = doc.value("path", std::vector<std::string>{});
    return p;
  }

  const VenvRequest& req_;
  const store::Layout& layout_;
  run::Runner& runner_;
  run::Reporter& reporter_;
  fs::path log_;
  bool append_ = false;
  bool damage_said_ = false;  // a damaged venv is said once (reuse is asked twice)
  std::optional<bool> has_pip_;
  bool venv_pip_ = false;  // the venv gets its own pip (the tree requires pip)
  std::map<std::string, std::string> env_;  // pip's (pip_environment)
  std::optional<ParentVenv> parent_;        // the interpreter is a venv's python
  std::string unreachable_;                 // why pip could not reach the index ("[Errno 111] Connection refused")
};

}  // namespace

std::string canonical_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (out.empty() || out.back() != '-') out += '-';
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

bool specifier_allows(const std::string& specifier, const Version& v) {
  for (auto clause : text::split_any(specifier, ",")) {
    clause = text::trim(clause);
    if (clause.empty()) continue;
    std::size_t op_len = 0;
    while (op_len < clause.size() && std::string("<>=!~").find(clause[op_len]) != std::string::npos) ++op_len;
    std::string op = clause.substr(0, op_len);
    std::string ver = text::trim(clause.substr(op_len));
    bool wildcard = ver.size() > 2 && ver.ends_with(".*");
    if (wildcard) ver.resize(ver.size() - 2);
    auto w = Version::parse(ver);
    if (!w) return false;
    if (wildcard) {
      bool match = v.starts_with(*w);
      if ((op == "==" && !match) || (op == "!=" && match)) return false;
      if (op != "==" && op != "!=") return false;
      continue;
    }
    // Compare on the parts given: 3.25.1 == 3.25 is false in PEP 440, but 3.25 pads with zeros.
    Version padded = *w;
    while (padded.size() < v.size()) padded.parts.push_back(0);
    if (op == ">=" && !(v >= padded)) return false;
    if (op == ">" && !(v > padded)) return false;
    if (op == "<=" && !(v <= padded)) return false;
    if (op == "<" && !(v < padded)) return false;
    if ((op == "==" || op == "===") && !(v == padded)) return false;
    if (op == "!=" && v == padded) return false;
    if (op == "~=") {
      if (w->size() < 2 || !(v >= padded) || !v.starts_with(w->prefix(w->size() - 1))) return false;
    }
    if (op.empty() || (op != ">=" && op != ">" && op != "<=" && op != "<" && op != "==" && op != "===" &&
                       op != "!=" && op != "~="))
      return false;
  }
  return true;
}

std::string provider_hint(const std::string& name, const fs::path& interpreter) {
  std::string n = canonical_name(name);
  std::string pip = "--find-links a wheelhouse that has it, or --index-url a mirror";
  bool debian = interpreter.string().rfind("/usr/bin/", 0) == 0;
  if (n == "cmake") return "the pip package cmake (" + pip + "), or a newer cmake on PATH";
  if (n == "ninja") return "the pip package ninja (" + pip + "), or ninja-build on PATH";
  if (debian && n != "scikit-build-core") return fmt::format("Debian package python3-{}, or {}", n, pip);
  return pip;
}

std::string merge_specifiers(const std::vector<std::string>& specifiers) {
  std::vector<std::string> clauses;
  for (const auto& s : specifiers)
    for (auto c : text::split_any(s, ",")) {
      c = text::trim(c);
      std::string compact;  // ">= 77" and ">=77" are one clause
      for (char ch : c)
        if (!std::isspace(static_cast<unsigned char>(ch))) compact += ch;
      if (!compact.empty() && std::find(clauses.begin(), clauses.end(), compact) == clauses.end())
        clauses.push_back(compact);
    }
  return text::join(clauses, ",");
}

std::vector<std::string> missing_lines(const std::vector<ProbedRequirement>& probed, const fs::path& interpreter,
                                       const std::map<std::string, std::string>& why) {
  // Packages in the order first met; each with all of its applicable requirements.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const ProbedRequirement*>> by_name;
  std::set<std::string> failing;
  for (const auto& r : probed) {
    if (!r.applies) continue;
    if (!by_name.count(r.name)) order.push_back(r.name);
    by_name[r.name].push_back(&r);
    if (!r.ok) failing.insert(r.name);
  }
  std::vector<std::string> lines;
  for (const auto& name : order) {
    if (!failing.count(name)) continue;
    const auto& rs = by_name[name];
    std::string head, url;
    std::vector<std::string> specs;
    std::optional<std::string> installed;
    for (const auto* r : rs) {
      auto [h, spec] = split_requirement(r->requirement);
      if (head.empty() || h.size() > head.size()) head = h;  // keep extras where one has them
      if (spec.rfind("@", 0) == 0) url = " " + spec;
      else specs.push_back(spec);
      if (r->installed) installed = r->installed;
    }
    std::string needed = url.empty() ? merge_specifiers(specs) : url;
    std::string reason = why.count(name) ? " (" + why.at(name) + ")" : "";
    std::string line = fmt::format("{}{}{}: ", head, needed, reason);
    if (!installed) {
      line += "not installed; " + provider_hint(name, interpreter);
    } else if (name == "cmake" || name == "ninja") {
      line += fmt::format("{} installed does not satisfy it; {}", *installed, provider_hint(name, interpreter));
    } else {
      // The installed version is what this interpreter (its Debian package, or one already
      // there) offers: naming that package again would not help.
      line += fmt::format("{} installed does not satisfy it; a wheelhouse that has it (--find-links DIR), an index "
                          "that has it (--index-url URL), or a --python whose own {} satisfies it",
                          *installed, name);
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

bool pip_index_unreachable(std::string_view line) {
  // "Could not fetch URL https://…/simple/x/: connection error: …" (after its retries), or
  // "WARNING: Retrying (Retry(total=0, …)) after connection broken by 'NewConnectionError(…)': /simple/x/"
  // for a connection never made (pip 23–25, urllib3 1 and 2); a read timed out mid-transfer is
  // not the index being unreachable.
  if (line.find("Could not fetch URL") != std::string_view::npos) return true;
  if (line.find("after connection broken by") == std::string_view::npos) return false;
  for (std::string_view s : {"NewConnectionError", "ConnectTimeoutError", "NameResolutionError", "ProxyError", "SSLError"})
    if (line.find(s) != std::string_view::npos) return true;
  return false;
}

std::string site_dir_pth_line(const std::string& dir) {
  // A .pth line starting with "import" is executed: addsitedir also reads that directory's .pth files.
  return "import site; site.addsitedir(" + json(dir).dump() + ")";
}

PipRequirements pip_requirements(const VenvRequest& req) {
  PipRequirements out;
  std::set<std::string> pip, names;
  auto host_satisfies = [&](const std::string& name, const std::string& spec) -> std::optional<std::string> {
    auto path = req.host_tools.find(name);
    if (path == req.host_tools.end()) return std::nullopt;
    auto ver = req.host_tool_versions.find(name);
    if (ver == req.host_tool_versions.end()) {
      if (!spec.empty()) return std::nullopt;  // a version asked for and none known
      return path->second.string();
    }
    if (name == "cmake" && cmake_refusal(req, ver->second)) return std::nullopt;
    if (!spec.empty() && !specifier_allows(spec, ver->second)) return std::nullopt;
    return fmt::format("{} {}", path->second.string(), ver->second.str());
  };
  std::map<std::string, std::string> wheel_files;  // name -> file name
  for (const auto& w : req.wheels)
    if (auto name = validate::parse_wheel_name(w.filename().string()))
      wheel_files[canonical_name(name->distribution)] = w.filename().string();
  for (const auto& r : req.requirements) {
    // requirements.txt is the tree's runtime and test set (PyTorch's includes hypothesis,
    // lintrunner …): only [build-system].requires and requirements-build.txt build it.
    if (!contract::installed_for_build(r)) continue;
    std::string n = canonical_name(r.name);
    std::string text = requirement_text(r);
    // `pip` without a version (requirements-build.txt @ pytorch/pytorch@1975038f: "pip  # not
    // technically needed, but this makes setup.py invocation work"): the venv's own pip, from
    // the interpreter's ensurepip, which needs no index; asking pip for it fails offline.
    if (n == "pip" && r.specifier.empty() && r.extras.empty() && r.marker.empty()) {
      out.venv_pip = true;
      out.from_venv.push_back(fmt::format("{} ({}): the venv's own pip (ensurepip, no index)", text, r.where.str()));
      names.insert(n);
      continue;
    }
    if (auto w = wheel_files.find(n); w != wheel_files.end()) {
      out.from_wheels.push_back(fmt::format("{}: {}", text, w->second));
      names.insert(n);
      continue;
    }
    if ((n == "cmake" || n == "ninja") && r.marker.empty() && r.extras.empty() && r.specifier.rfind("@", 0) != 0) {
      if (auto host = host_satisfies(n, r.specifier)) {
        out.from_host.push_back(fmt::format("{}: {}", text, *host));
        names.insert(n);
        continue;
      }
      // pip's cmake within the recipe's bounds too (the tree's minimum is in its own specifier
      // or in cmake_minimum_required, both checked).
      if (n == "cmake") {
        std::string bounds = cmake_requirement(req).substr(5);
        // Each clause once: the tree's minimum is often both its specifier and its
        // cmake_minimum_required ("cmake>=3.18,>=3.18" would also be a second venv hash).
        if (!bounds.empty()) text = r.name + merge_specifiers({r.specifier, bounds});
      }
    }
    pip.insert(text);
    names.insert(n);
  }
  for (const auto& m : req.driver_modules) {
    std::string n = canonical_name(m);
    if (n == "pip" || n == "venv" || names.count(n)) continue;
    pip.insert(n);
    names.insert(n);
  }
  // The host's cmake outside what the tree and recipe accept: the pip package instead.
  if (auto v = req.host_tool_versions.find("cmake"); v != req.host_tool_versions.end()) {
    if (auto why = cmake_refusal(req, v->second)) {
      out.cmake_problem = *why;
      bool asked = std::any_of(pip.begin(), pip.end(), [](const std::string& s) {
        return canonical_name(s.substr(0, s.find_first_of(" [<>=!~;@"))) == "cmake";
      });
      if (!asked) pip.insert(cmake_requirement(req));
    }
  } else if (req.cmake_min && req.host_tools.count("cmake") == 0) {
    out.cmake_problem = "no cmake on PATH";
    pip.insert(cmake_requirement(req));
  }
  out.pip.assign(pip.begin(), pip.end());
  return out;
}

Result<plan::BuildVenv> prepare_build_venv(const VenvRequest& req, const store::Layout& layout, run::Runner& runner,
                                           run::Reporter& reporter) {
  Maker m(req, layout, runner, reporter);
  return m.run();
}

}  // namespace archbuild::stages
