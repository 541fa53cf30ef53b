// The build venv (docs/build.md "The build venv"): made from the chosen interpreter with `python -m venv`,
// the tree's build requirements installed by pip with the caller's own pip configuration
// (PIP_INDEX_URL, PIP_FIND_LINKS, pip.conf …). Made before planning, because the versions pip
// installs shape the binary and so belong in the build key; the plan then only reads the result.
//
// Where it lives is store/'s (venvs/<hash>, hash = interpreter realpath + exact version + the
// requirement set), so every build key with the same interpreter and requirements shares it.
// It is made in venvs/<hash>.d-<pid> under venvs/<hash>.lock and published by an atomic link
// venvs/<hash> only when complete: a killed creation leaves a directory no one reuses (the next
// creator removes it). When pip cannot install from the index, a venv over the interpreter's own
// packages is the fallback (--system-site-packages; for a venv's python, the site-packages that
// venv sees, added by a .pth file); what is still missing is named, one line per package, with
// what provides it (exit 3), before anything is configured.
//
// pip fails fast: one retry and a 10 s timeout unless the caller set PIP_RETRIES / PIP_TIMEOUT;
// an index found unreachable is not asked again (the fallback uses --no-index), and --offline
// means --no-index throughout (find-links only).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "contract/contract.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "plan/plan.hpp"
#include "run/reporter.hpp"
#include "run/runner.hpp"
#include "store/layout.hpp"

namespace archbuild::stages {

struct VenvRequest {
  std::filesystem::path interpreter;  // the resolution's python
  Version interpreter_version;        // exact (3.11.2)
  std::vector<contract::Requirement> requirements;  // the tree's (contract); requirements.txt is left out
  std::vector<std::string> driver_modules;          // the recipe's python_modules (setuptools, wheel, build …)
  // Programs of the host that a requirement of the same name may be satisfied by (cmake, ninja).
  std::map<std::string, std::filesystem::path> host_tools;
  std::map<std::string, Version> host_tool_versions;
  std::optional<Version> cmake_min;  // the tree's cmake_minimum_required
  std::string cmake_min_where;       // "CMakeLists.txt:1"
  std::optional<Version> cmake_max;  // the recipe's [build] cmake_max
  // The environment of python -m venv and pip: the caller's allowlisted names (PIP_*, proxies,
  // certificates, HOME for pip.conf) with --index-url / --find-links applied; PATH set.
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> pip_options;  // --index-url / --find-links as given (manifest)
  bool offline = false;  // --offline: pip gets --no-index (PIP_NO_INDEX=1); find-links only
  // Wheel files installed after the requirements with `pip install --no-deps --no-index` (the
  // torch a dependent builds against): their sha256 is in the venv's hash, and a requirement of
  // the tree with the same name is left to them (pip never fetches that one from an index).
  std::vector<std::filesystem::path> wheels;
};

// The requirement strings pip is asked for and those a host program satisfies instead (exposed
// for tests; no process).
struct PipRequirements {
  std::vector<std::string> pip;        // sorted, unique
  std::vector<std::string> from_host;  // "cmake>=3.18: /usr/bin/cmake 3.25.1"
  std::optional<std::string> cmake_problem;  // why the host's cmake cannot be the build's
  // Requirements left to a wheel file of the request ("torch>=2.0: torch-2.14.0+cu130.sm90-….whl").
  std::vector<std::string> from_wheels;
  // Requirements the venv satisfies itself ("pip  # …: the venv's own (ensurepip, no index)"): a
  // tree's bare `pip` (PyTorch's requirements-build.txt) makes the venv with its own pip
  // instead of asking an index (or a wheelhouse) for it.
  std::vector<std::string> from_venv;
  bool venv_pip = false;
};
PipRequirements pip_requirements(const VenvRequest& req);

// PEP 440 specifier check for host programs' versions (">=3.18,<4", "==3.31.*"); unknown forms: false.
bool specifier_allows(const std::string& specifier, const Version& v);
// "typing_extensions" → "typing-extensions" (PEP 503).
std::string canonical_name(const std::string& name);
// What provides a missing requirement on this interpreter ("Debian package python3-numpy, or
// --find-links a wheelhouse / --index-url a mirror").
std::string provider_hint(const std::string& name, const std::filesystem::path& interpreter);

// Merges the specifiers of one package's requirements: every clause kept once, in the order
// given (">=77.0.0,<80.0" and ">=77.0.0,<82" → ">=77.0.0,<80.0,<82").
std::string merge_specifiers(const std::vector<std::string>& specifiers);

// One requirement as the build venv's probe saw it.
struct ProbedRequirement {
  std::string requirement;  // as pip was asked ("setuptools>=77.0.0,<80.0")
  std::string name;         // canonical
  bool applies = true;      // its marker holds here
  std::optional<std::string> installed;  // the version the venv sees
  bool ok = false;
};
// What is still missing, one line per package: its specifiers merged, what is installed, and what
// would provide it. A Debian package is named only for a package that is absent (the installed
// version failing the specifier is the Debian package's, or one the interpreter already has).
// `why` adds a reason for a package (cmake: why the host's does not do).
std::vector<std::string> missing_lines(const std::vector<ProbedRequirement>& probed,
                                       const std::filesystem::path& interpreter,
                                       const std::map<std::string, std::string>& why = {});

// A line of pip's output saying that it could not reach an index (a connection refused, a name
// not resolved, a timeout, a proxy or TLS failure).
bool pip_index_unreachable(std::string_view line);

// The .pth line that adds `dir` (and the .pth files in it) to a venv's sys.path.
std::string site_dir_pth_line(const std::string& dir);

// Makes or reuses the venv. Errors: exit 3 (a requirement missing after the fallback, no venv
// module), exit 4 (python -m venv failed for another reason).
Result<plan::BuildVenv> prepare_build_venv(const VenvRequest& req, const store::Layout& layout, run::Runner& runner,
                                           run::Reporter& reporter);

}  // namespace archbuild::stages
