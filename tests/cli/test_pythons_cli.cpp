// `archbuild wheel --python A,B`: one wheel per interpreter from one command, on examples/minitorch
// really built with nvcc, for Debian's /usr/bin/python3 (3.11) and pyenv's 3.12. pyenv's Pythons
// lack setuptools and wheel and PyPI is unreachable, so the test makes a wheelhouse and passes it
// with --find-links: the 3.12 build venv installs them from there. Debian's setuptools wheel
// (/usr/share/python-wheels) does not do: its install_layout patch needs Debian's distutils, and
// bdist_wheel fails on a Python without it. CPython's own test suite ships unpatched setuptools
// and wheel wheels (lib/python3.12/test/*.whl), which are used instead.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/version.hpp"
#include "run/admission.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kRecipe = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";
const fs::path kSystemPython = "/usr/bin/python3";

// pyenv's newest 3.12 build (what `--python 3.12` finds when PATH has only pyenv's shims), or empty.
fs::path pyenv_python312() {
  fs::path root;
  if (const char* r = std::getenv("PYENV_ROOT"); r && *r) root = r;
  else if (const char* h = std::getenv("HOME"); h && *h) root = fs::path(h) / ".pyenv";
  std::optional<archbuild::Version> best;
  fs::path exe;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root / "versions", ec)) {
    auto v = archbuild::Version::parse(e.path().filename().string());
    if (!v || v->size() < 3 || v->prefix(2) != *archbuild::Version::parse("3.12")) continue;
    if (!fs::exists(e.path() / "bin/python3") || (best && *v < *best)) continue;
    best = v;
    exe = e.path() / "bin/python3";
  }
  return exe;
}

// setuptools-*.whl and wheel-*.whl that the interpreter's own installation ships (its test suite's).
std::vector<fs::path> shipped_build_wheels(const fs::path& python) {
  std::vector<fs::path> out;
  fs::path lib = python.parent_path().parent_path() / "lib";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(lib, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (it->path().extension() == ".whl" && (name.starts_with("setuptools-") || name.starts_with("wheel-")) &&
        it->path().string().find("/test/") != std::string::npos)
      out.push_back(it->path());
  }
  return out;
}

std::string why_not() {
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) return u;
  if (t::run(kSystemPython, {"-c", "import setuptools, wheel, pip, venv"}).status != 0)
    return kSystemPython.string() + " lacks setuptools, wheel, pip or venv";
  if (t::which("cmake").empty() || t::which("ninja").empty()) return "cmake or ninja not on PATH";
  if (pyenv_python312().empty()) return "no pyenv Python 3.12 (~/.pyenv/versions/3.12.*/bin/python3)";
  auto shipped = shipped_build_wheels(pyenv_python312());
  for (const char* w : {"setuptools-", "wheel-"})
    if (std::none_of(shipped.begin(), shipped.end(), [&](const fs::path& p) { return p.filename().string().starts_with(w); }))
      return std::string("no ") + w + "*.whl shipped with " + pyenv_python312().string() + " (its lib/python3.12/test/)";
  return "";
}

struct Fixture {
  t::TempDir dir;
  fs::path project, wheelhouse, cache, out;
  fs::path py312 = pyenv_python312();
  Fixture() {
    project = dir / "minitorch";
    wheelhouse = dir / "wheelhouse";
    cache = dir / "cache";
    out = dir / "out";
    auto cp = t::run("/bin/cp", {"-rL", std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch", project.string()});
    REQUIRE(cp.status == 0);
    for (const char* o : {"build", "dist"}) fs::remove_all(project / o);
  }
  // What the pyenv interpreter's build venv installs: setuptools and wheel (its pip comes from
  // ensurepip).
  void make_wheelhouse() const {
    fs::create_directories(wheelhouse);
    for (const auto& w : shipped_build_wheels(py312)) fs::copy_file(w, wheelhouse / w.filename(),
                                                                    fs::copy_options::overwrite_existing);
  }
  std::vector<std::string> args(const std::string& pythons, const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> a = {"--cache-dir", cache.string(), "wheel",  "--sm", "90", "--recipe", kRecipe,
                                  "--source", project.string(), "--python", pythons, "--out", out.string(),
                                  "--find-links", wheelhouse.string(), "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  static t::RunOptions opts() {
    t::RunOptions o;
    o.unset_env = {"PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONFIG_FILE"};
    o.env["PIP_CONFIG_FILE"] = "/dev/null";  // no pip.conf of this machine
    o.timeout = std::chrono::seconds(800);    // two builds, a venv and two validations: only a hang stops here
    return o;
  }
};

// The stage logs under the cache (a stage that ran wrote one).
std::vector<std::string> stage_logs(const fs::path& cache) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(cache / "logs", ec); it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->path().extension() == ".log") out.push_back(it->path().string());
  return out;
}

}  // namespace

TEST_CASE("pythons: wheel --python with two interpreters builds two wheels in one command with the second from the "
          "compiler cache and a repeat runs nothing",
          "[cli][wheel][python][nvcc]") {
  if (auto why = why_not(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Fixture f;
  f.make_wheelhouse();
  auto r = t::archbuild(f.args(kSystemPython.string() + "," + f.py312.string()), f.opts());
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  CHECK(doc["ok"] == true);
  REQUIRE(doc["wheels"].size() == 2);
  const json& first = doc["wheels"][0];
  const json& second = doc["wheels"][1];
  CHECK(first["python"].get<std::string>().starts_with("3.11."));
  CHECK(second["python"].get<std::string>().starts_with("3.12."));
  CHECK(first["python_requested"] == kSystemPython.string());
  // One wheel each, tagged for its interpreter, both in --out, and each its own key.
  std::string w1 = fs::path(first["wheel"].get<std::string>()).filename();
  std::string w2 = fs::path(second["wheel"].get<std::string>()).filename();
  CHECK(w1.find("-cp311-cp311-") != std::string::npos);
  CHECK(w2.find("-cp312-cp312-") != std::string::npos);
  CHECK(fs::exists(f.out / w1));
  CHECK(fs::exists(f.out / w2));
  CHECK(first["key"] != second["key"]);
  // Both validated by the build's validate stage (coverage, metadata, the import test in a venv
  // of the wheel's own interpreter).
  for (const json* w : {&first, &second}) {
    INFO((*w)["validation"].dump(2));
    REQUIRE((*w)["validation"].is_object());
    CHECK((*w)["validation"]["exit"] == 0);
  }
  // The second interpreter compiled nothing: every compile its build launched (the launcher's
  // records) was answered by the compiler cache the first one filled.
  auto records = archbuild::run::read_records(f.cache / "logs" / second["key"].get<std::string>() / "compiles.tsv");
  REQUIRE_FALSE(records.empty());
  const json& cc = second["compiler_cache"];
  REQUIRE(cc.is_object());
  CHECK(cc["misses"] == 0);
  CHECK(cc["hits"].get<std::size_t>() >= records.size());

  // Again, 3.12 now by version (found among pyenv's builds) and also by path: the same
  // interpreter once; both keys finished, so no stage runs.
  fs::remove_all(f.out);
  auto logs_before = stage_logs(f.cache);
  auto again = t::archbuild(f.args(kSystemPython.string() + ",3.12," + f.py312.string()), f.opts());
  INFO(again.out << again.err);
  REQUIRE(again.status == 0);
  const json doc2 = json::parse(again.out);
  REQUIRE(doc2["wheels"].size() == 2);
  for (const auto& w : doc2["wheels"]) {
    CHECK(w["reused"] == true);
    CHECK(w["stages_run"].empty());
    CHECK(fs::exists(w["wheel"].get<std::string>()));
  }
  CHECK(doc2["wheels"][1]["key"] == second["key"]);
  CHECK(stage_logs(f.cache) == logs_before);
}

TEST_CASE("pythons: a version that is not installed or that the recipe excludes is refused before any stage",
          "[cli][wheel][python]") {
  if (auto why = why_not(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  Fixture f;  // no wheelhouse: nothing may get as far as the build venv
  struct Case {
    std::string second;
    int exit;
    std::string says;
  };
  std::vector<Case> cases = {
      {"3.8", 2, "3.8"},           // minitorch supports 3.9 – 3.14
      {"3.x", 2, "--python '3.x'"},
      {"/nonexistent/python3", 2, "no such file"},
  };
  // A supported version this host lacks (3.14 on the build machines): not found, exit 3.
  if (t::which("python3.14").empty() && !fs::exists("/usr/bin/python3.14")) {
    bool pyenv314 = false;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(f.py312.parent_path().parent_path().parent_path(), ec))
      pyenv314 = pyenv314 || e.path().filename().string().starts_with("3.14");
    if (!pyenv314) cases.push_back({"3.14", 3, "python3.14"});
  }
  for (const auto& c : cases) {
    auto r = t::archbuild(f.args(f.py312.string() + "," + c.second), f.opts());
    INFO(c.second << ": " << r.out << r.err);
    CHECK(r.status == c.exit);
    CHECK(r.err.find(c.says) != std::string::npos);
    CHECK(json::parse(r.out)["exit"] == c.exit);
    CHECK(stage_logs(f.cache).empty());
    CHECK_FALSE(fs::exists(f.out));
    // Nothing of the first interpreter was made either: its build venv comes after every check.
    CHECK_FALSE(fs::exists(f.cache / "venvs"));
  }
}
