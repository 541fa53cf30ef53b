// The set in one command: examples/minitorch (a torch look-alike whose wheel ships
// C++ headers) built first, then examples/minivision (a dependent whose build imports minitorch,
// checks its version, compiles against its installed headers and refuses another) built against
// exactly that wheel: --with, and the dependent's recipe on its own; the repeat runs nothing;
// METADATA pins minitorch==<exact>; the dependent's key holds the torch wheel's sha256; a
// mismatched pair is refused before any stage (exit 2).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/example_wheel.hpp"
#include "mirror/make_wheel.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kExamples = fs::path(ARCHBUILD_SOURCE_DIR) / "examples";
const std::string kPython = "/usr/bin/python3";

std::string why_not(bool nvcc) {
  if (!fs::exists(kPython)) return "no " + kPython;
  auto r = t::run(kPython, {"-c", "import setuptools, wheel, venv, pip, build"});
  if (r.status != 0) return kPython + " lacks setuptools, wheel, venv, pip or build";
  // archbuild builds with nvcc here: the host's must be this machine's (test::unusable).
  if (nvcc) {
    if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) return u;
    return t::example_wheel_unavailable();
  }
  return "";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The test's own recipes: minitorch from the repository make-example-repos made (a file:// URL),
// minivision from examples/ with its torch_recipe pointing at that minitorch recipe.
struct Recipes {
  fs::path torch, dependent;
};

Recipes write_recipes(const t::TempDir& dir, const std::string& minitorch_url, const std::string& torch_release = "0.1.0") {
  std::string torch = slurp(kExamples / "minitorch" / "recipe.toml");
  torch = std::regex_replace(torch, std::regex("\npath = \"\\.\"\n"), "\nurl = \"" + minitorch_url + "\"\n");
  REQUIRE(torch.find(minitorch_url) != std::string::npos);
  std::string dep = slurp(kExamples / "minivision" / "recipe.toml");
  dep = std::regex_replace(dep, std::regex("\npath = \"\\.\"\n"),
                           "\npath = \"" + (kExamples / "minivision").string() + "\"\n");
  dep = std::regex_replace(dep, std::regex("\ntorch = \"0\\.1\\.0\"\n"), "\ntorch = \"" + torch_release + "\"\n");
  dep = std::regex_replace(dep, std::regex("torch_recipe = \"[^\"]*\""), "torch_recipe = \"minitorch.toml\"");
  Recipes r{dir / "recipes" / "minitorch.toml", dir / "recipes" / "minivision.toml"};
  fs::create_directories(r.torch.parent_path());
  std::ofstream(r.torch) << torch;
  std::ofstream(r.dependent) << dep;
  return r;
}

t::RunOptions quiet_pip() {
  t::RunOptions o;
  o.unset_env = {"PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"};
  o.env["PIP_CONFIG_FILE"] = "/dev/null";
  o.timeout = std::chrono::seconds(600);  // a hang guard for a whole set, not a timing check
  return o;
}

// The member of a set document with this role.
const json& member(const json& doc, const std::string& role) {
  for (const auto& w : doc["wheels"])
    if (w["role"] == role) return w;
  FAIL("no " << role << " in " << doc.dump(2));
  return doc;
}

std::string metadata_of(const fs::path& wheel) {
  for (const auto& [name, data] : t::unzip(wheel))
    if (name.ends_with(".dist-info/METADATA")) return data;
  return "";
}

}  // namespace

TEST_CASE("stack: a dependent whose recipe pairs with another torch is refused before any stage", "[cli][stack]") {
  std::string why = why_not(false);
  if (!why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  auto recipes = write_recipes(dir, "file:///nonexistent/minitorch", "0.2.0");
  fs::path cache = dir / "cache";
  // --with: minivision for minitorch 0.2 asked for with minitorch 0.1.
  auto with = t::archbuild({"--cache-dir", cache.string(), "wheel", "--sm", "90", "--recipe", recipes.torch.string(),
                            "--with", recipes.dependent.string(), "--python", kPython, "--out", (dir / "out").string(),
                            "--json"},
                           quiet_pip());
  INFO(with.out << with.err);
  CHECK(with.status == 2);
  CHECK_THAT(with.err, Catch::Contains("no recipe pairs with minitorch 0.1.0") &&
                           Catch::Contains("minivision (0.1.0) pairs with torch 0.2"));
  CHECK(json::parse(with.out)["exit"] == 2);
  // On its own: its torch_recipe is minitorch 0.1, its torch key says 0.2.
  auto alone = t::archbuild({"--cache-dir", cache.string(), "wheel", "--sm", "90", "--recipe",
                             recipes.dependent.string(), "--python", kPython, "--out", (dir / "out").string()},
                            quiet_pip());
  INFO(alone.err);
  CHECK(alone.status == 2);
  CHECK_THAT(alone.err, Catch::Contains("pairs with torch 0.2"));
  // plan --with: the same refusal, before any plan is made.
  for (bool as_json : {true, false}) {
    std::vector<std::string> a = {"--cache-dir", cache.string(), "plan", "--sm", "90", "--recipe",
                                  recipes.torch.string(), "--with", recipes.dependent.string(), "--python", kPython};
    if (as_json) a.push_back("--json");
    auto planned = t::archbuild(a, quiet_pip());
    INFO(planned.out << planned.err);
    CHECK(planned.status == 2);
    CHECK_THAT(planned.err, Catch::Contains("no recipe pairs with minitorch 0.1.0") &&
                                Catch::Contains("minivision (0.1.0) pairs with torch 0.2"));
    if (as_json) CHECK(json::parse(planned.out)["exit"] == 2);
    else CHECK(planned.out.empty());
  }
  // The set is for one interpreter: --with beside --python A,B is refused in one line (wheel, plan).
  for (const std::string command : {"wheel", "plan"}) {
    auto two = t::archbuild({"--cache-dir", cache.string(), command, "--sm", "90", "--recipe", recipes.torch.string(),
                             "--with", recipes.dependent.string(), "--python", kPython + "," + kPython},
                            quiet_pip());
    INFO(command << ": " << two.err);
    CHECK(two.status == 2);
    CHECK_THAT(two.err, Catch::Contains("--python " + kPython + "," + kPython) &&
                            Catch::Contains("for one interpreter"));
    CHECK(std::count(two.err.begin(), two.err.end(), '\n') == 1);
  }
  // Nothing ran: no stage log, no checkout, nothing in --out.
  CHECK_FALSE(fs::exists(cache / "logs"));
  CHECK_FALSE(fs::exists(cache / "src"));
  CHECK_FALSE(fs::exists(dir / "out"));
  // --with names dependents, not torch.
  auto not_dep = t::archbuild({"--cache-dir", cache.string(), "wheel", "--sm", "90", "--recipe",
                               recipes.torch.string(), "--with", recipes.torch.string(), "--python", kPython},
                              quiet_pip());
  CHECK(not_dep.status == 2);
  CHECK_THAT(not_dep.err, Catch::Contains("builds no dependent of torch"));
}

TEST_CASE("stack: the shipped torch 2.15 has no torchaudio to pair with", "[cli][stack]") {
  t::TempDir dir;
  auto r = t::archbuild({"--cache-dir", (dir / "cache").string(), "wheel", "--sm", "90", "--recipe", "torch-2.15",
                         "--with", "torchaudio", "--cuda", "13.0", "--python", kPython, "--json"},
                        quiet_pip());
  INFO(r.out << r.err);
  if (r.status == 3) {
    WARN("##archbuild-skip## torch 2.15 cannot be resolved on this host: " << r.err);
    return;
  }
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("--with torchaudio: no recipe pairs with torch 2.15.0"));
  CHECK_FALSE(fs::exists(dir / "cache" / "logs"));
}

TEST_CASE("stack: plan --with plans torch then the dependent it pairs with, and builds nothing", "[cli][stack]") {
  std::string why = why_not(false);
  if (!why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  auto recipes = write_recipes(dir, "file:///nonexistent/minitorch");
  fs::path cache = dir / "cache";
  auto plan = [&](bool as_json) {
    std::vector<std::string> a = {"--cache-dir", cache.string(), "plan", "--sm", "90", "--recipe",
                                  recipes.torch.string(), "--with", recipes.dependent.string(), "--python", kPython};
    if (as_json) a.push_back("--json");
    return t::archbuild(a, quiet_pip());
  };
  auto j = plan(true);
  INFO(j.out << j.err);
  if (j.status == 3) {
    WARN("##archbuild-skip## the example recipes cannot be resolved on this host: " << j.err);
    return;
  }
  REQUIRE(j.status == 0);
  json doc = json::parse(j.out);
  CHECK(doc["ok"] == true);
  REQUIRE(doc["plans"].size() == 2);
  const json& torch = doc["plans"][0];
  const json& dep = doc["plans"][1];
  CHECK(torch["role"] == "torch");
  CHECK(torch["recipe"]["package"] == "minitorch");
  CHECK(torch["built"] == false);
  CHECK(dep["role"] == "dependent");
  CHECK(dep["recipe"]["package"] == "minivision");
  // The pairing: minivision's `torch` key is minitorch's release line.
  CHECK(dep["pairs_with"]["torch"]["package"] == "minitorch");
  CHECK(dep["pairs_with"]["torch"]["version"] == "0.1.0");
  CHECK(dep["pairs_with"]["through"] == "torch");
  CHECK(dep["pairs_with"]["torch_key"] == "0.1.0");
  CHECK(dep["pairs_with"]["torch_from"] == "--recipe");
  // Built on torch's CUDA and interpreter.
  CHECK(dep["resolution"]["toolkit"]["root"] == torch["resolution"]["toolkit"]["root"]);
  CHECK(dep["resolution"]["python"]["path"] == torch["resolution"]["python"]["path"]);
  // torch is not built: no wheel to install, so no build venv (pip would fetch another torch).
  CHECK(dep["torch_wheel"].is_null());
  CHECK(dep["build_venv"].is_null());
  CHECK_THAT(dep["build_venv_note"].get<std::string>(), Catch::Contains("made once") && Catch::Contains("provisional"));
  CHECK(torch["key"] != dep["key"]);

  auto h = plan(false);
  INFO(h.out << h.err);
  REQUIRE(h.status == 0);
  auto torch_at = h.out.find("== torch      minitorch 0.1.0");
  auto dep_at = h.out.find("== dependent  minivision 0.1.0");
  CHECK(torch_at != std::string::npos);
  CHECK(dep_at != std::string::npos);
  CHECK(torch_at < dep_at);  // torch first
  CHECK_THAT(h.out, Catch::Contains("pairs with") && Catch::Contains("(minitorch 0.1.0) through its `torch` key 0.1.0"));
  // One block per member, each with its key.
  CHECK(h.out.find("build key  " + torch["key"].get<std::string>()) != std::string::npos);
  CHECK(h.out.find("build key  " + dep["key"].get<std::string>()) != std::string::npos);
  CHECK_THAT(h.out, Catch::Contains("build venv made once"));
  // Nothing was built or fetched.
  CHECK_FALSE(fs::exists(cache / "logs"));
  CHECK_FALSE(fs::exists(cache / "src"));
}

TEST_CASE("stack: plan --with torchaudio,torchvision pairs torch 2.14 through torch_also and torch", "[cli][stack]") {
  t::TempDir dir;
  auto r = t::archbuild({"--cache-dir", (dir / "cache").string(), "plan", "--sm", "90", "--recipe", "torch-2.14",
                         "--with", "torchaudio,torchvision", "--cuda", "13.0", "--python", kPython, "--offline",
                         "--json"},
                        quiet_pip());
  INFO(r.out << r.err);
  if (r.status == 3) {
    WARN("##archbuild-skip## torch 2.14 cannot be resolved on this host: " << r.err);
    return;
  }
  REQUIRE(r.status == 0);
  json doc = json::parse(r.out);
  REQUIRE(doc["plans"].size() == 3);
  CHECK(doc["plans"][0]["recipe"]["name"] == "torch-2.14");
  const json& audio = doc["plans"][1];
  const json& vision = doc["plans"][2];
  CHECK(audio["recipe"]["name"] == "torchaudio-2.11");  // the last torchaudio serves 2.12 - 2.14
  CHECK(audio["pairs_with"]["through"] == "torch_also");
  CHECK(audio["pairs_with"]["torch_key"] == "2.11.0");
  CHECK(audio["pairs_with"]["torch"]["recipe"] == "torch-2.14");
  CHECK(vision["recipe"]["name"] == "torchvision-0.29");
  CHECK(vision["pairs_with"]["through"] == "torch");
  CHECK(vision["pairs_with"]["torch_key"] == "2.14.0");
  for (const auto& p : doc["plans"])
    CHECK(p["resolution"]["cuda"]["release"] == doc["plans"][0]["resolution"]["cuda"]["release"]);
  CHECK_FALSE(fs::exists(dir / "cache" / "logs"));
}

TEST_CASE("stack: the dependent's key holds the torch wheel's sha256 and its venv has that wheel", "[cli][stack]") {
  std::string why = why_not(false);
  if (!why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  // Two minitorch wheels of one version that differ in content (pure Python: pip installs them here).
  fs::path a = t::make_wheel(dir / "a", "minitorch", "0.1.0+cu130.sm90", "minitorch", "one");
  fs::path b = t::make_wheel(dir / "b", "minitorch", "0.1.0+cu130.sm90", "minitorch", "two");
  auto plan = [&](const fs::path& wheel) {
    auto r = t::archbuild({"--cache-dir", (dir / "cache").string(), "plan", "--sm", "90", "--recipe",
                           (kExamples / "minivision" / "recipe.toml").string(), "--torch-wheel", wheel.string(),
                           "--python", kPython, "--json"},
                          quiet_pip());
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  };
  json pa = plan(a), pa2 = plan(a), pb = plan(b);
  CHECK(pa["key"] == pa2["key"]);
  CHECK(pa["key"] != pb["key"]);
  const json& venv = pa["build_venv"];
  REQUIRE(venv["wheels"].size() == 1);
  CHECK(venv["wheels"][0]["name"] == "minitorch");
  CHECK(venv["wheels"][0]["version"] == "0.1.0+cu130.sm90");
  CHECK(venv["wheels"][0]["sha256"] == t::run("/usr/bin/sha256sum", {a.string()}).out.substr(0, 64));
  CHECK(venv["packages"]["minitorch"] == "0.1.0+cu130.sm90");
  CHECK(pa["key_inputs"]["build_venv"]["wheels"][0]["sha256"] == venv["wheels"][0]["sha256"]);
  CHECK(pb["build_venv"]["dir"] != venv["dir"]);  // another torch wheel, another venv
  // The venv imports that very wheel's package.
  auto imported = t::run(venv["python"].get<std::string>(), {"-c", "import minitorch; print(minitorch.VALUE)"});
  CHECK(imported.out == "one\n");
}

TEST_CASE("stack: minivision built against the minitorch built first on its own then with --with runs nothing",
          "[cli][stack][nvcc]") {
  std::string why = why_not(true);
  if (!why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  auto made = t::run("/bin/bash", {(fs::path(ARCHBUILD_SOURCE_DIR) / "tests" / "support" / "make-example-repos").string(),
                                   (dir / "repos").string()});
  REQUIRE(made.status == 0);
  auto recipes = write_recipes(dir, "file://" + (dir / "repos" / "minitorch").string());
  auto wheel = [&](std::vector<std::string> recipe_args, const std::string& out) {
    std::vector<std::string> a = {"--cache-dir", (dir / "cache").string(), "wheel", "--sm", "90", "--python", kPython,
                                  "--out", (dir / out).string(), "--json"};
    a.insert(a.end(), recipe_args.begin(), recipe_args.end());
    return t::archbuild(a, quiet_pip());
  };

  // The dependent on its own: its torch (minitorch) is built first, then it against that wheel.
  auto first = wheel({"--recipe", recipes.dependent.string()}, "out");
  INFO(first.out << first.err);
  REQUIRE(first.status == 0);
  json doc = json::parse(first.out);
  CHECK(doc["ok"] == true);
  REQUIRE(doc["wheels"].size() == 2);
  const json torch = member(doc, "torch"), dep = member(doc, "dependent");
  CHECK(doc["wheels"][0]["role"] == "torch");  // in build order
  CHECK(torch["reused"] == false);
  CHECK(dep["reused"] == false);
  CHECK(torch["version"] == "0.1.0+cu130.sm90");
  // minivision is built from its folder as it is (source.path): the label names its content.
  CHECK_THAT(dep["version"].get<std::string>(), Catch::StartsWith("0.1.0+src") && Catch::EndsWith(".cu130.sm90"));
  CHECK(dep["validation"]["valid"] == true);  // imported beside the custom minitorch, installed from its file
  CHECK(fs::exists(dep["wheel"].get<std::string>()));
  CHECK(fs::path(torch["wheel"].get<std::string>()).parent_path() == dir / "out");

  // METADATA pins the exact minitorch, once, local label included.
  std::string meta = metadata_of(dep["wheel"].get<std::string>());
  CHECK_THAT(meta, Catch::Contains("Requires-Dist: minitorch==0.1.0+cu130.sm90\n"));
  CHECK(meta.find("Requires-Dist: minitorch") == meta.rfind("Requires-Dist: minitorch"));
  // The dependent's manifest and key hold the sha256 of that minitorch wheel.
  json manifest = json::parse(slurp(dep["manifest"].get<std::string>()));
  CHECK(manifest["manifest"]["build_venv"]["wheels"][0]["sha256"] == torch["sha256"]);
  CHECK(manifest["plan"]["key_inputs"]["build_venv"]["wheels"][0]["sha256"] == torch["sha256"]);
  // What it was compiled against: minitorch's installed header, read back from the built library.
  bool against = false;
  for (const auto& [name, data] : t::unzip(dep["wheel"].get<std::string>()))
    if (name == "minivision/_built_against.txt") against = data == "0.1.0+cu130.sm90\n";
  CHECK(against);

  // The set with --with: the same two keys, nothing runs.
  auto again = wheel({"--recipe", recipes.torch.string(), "--with", recipes.dependent.string()}, "out2");
  INFO(again.out << again.err);
  REQUIRE(again.status == 0);
  json doc2 = json::parse(again.out);
  REQUIRE(doc2["wheels"].size() == 2);
  for (const auto& w : doc2["wheels"]) {
    CHECK(w["reused"] == true);
    CHECK(w["stages_run"].empty());
  }
  CHECK(member(doc2, "torch")["key"] == torch["key"]);
  CHECK(member(doc2, "dependent")["key"] == dep["key"]);
  CHECK(member(doc2, "dependent")["sha256"] == dep["sha256"]);
  CHECK(fs::exists(dir / "out2" / fs::path(dep["wheel"].get<std::string>()).filename()));

  // Humans: stdout names every wheel of the set, in build order; stderr says which member was
  // reused (or built).
  auto human = t::archbuild({"--cache-dir", (dir / "cache").string(), "wheel", "--sm", "90", "--python", kPython,
                             "--out", (dir / "out3").string(), "--recipe", recipes.torch.string(), "--with",
                             recipes.dependent.string()},
                            quiet_pip());
  INFO(human.out << human.err);
  REQUIRE(human.status == 0);
  std::string torch_file = (dir / "out3" / fs::path(torch["wheel"].get<std::string>()).filename()).string();
  std::string dep_file = (dir / "out3" / fs::path(dep["wheel"].get<std::string>()).filename()).string();
  CHECK(human.out == torch_file + "\n" + dep_file + "\n");
  auto torch_note = human.err.find("[1/2] torch minitorch 0.1.0");
  auto dep_note = human.err.find("[2/2] dependent minivision 0.1.0");
  REQUIRE(torch_note != std::string::npos);
  REQUIRE(dep_note != std::string::npos);
  CHECK(human.err.find("reused the wheel built earlier for key " + torch["key"].get<std::string>().substr(0, 16),
                       torch_note) < dep_note);
  CHECK(human.err.find("reused the wheel built earlier for key " + dep["key"].get<std::string>().substr(0, 16),
                       dep_note) != std::string::npos);
  CHECK_THAT(human.err, Catch::Contains("pairs with") && Catch::Contains("through its `torch` key 0.1.0"));

  // plan --with now that both keys are built: the dependent's plan installs torch's wheel from the
  // cache and has the very key `wheel --with` built.
  auto planned = t::archbuild({"--cache-dir", (dir / "cache").string(), "plan", "--sm", "90", "--python", kPython,
                               "--recipe", recipes.torch.string(), "--with", recipes.dependent.string(), "--json"},
                              quiet_pip());
  INFO(planned.out << planned.err);
  REQUIRE(planned.status == 0);
  json plans = json::parse(planned.out)["plans"];
  REQUIRE(plans.size() == 2);
  CHECK(plans[0]["key"] == torch["key"]);
  CHECK(plans[0]["built"] == true);
  CHECK(plans[1]["key"] == dep["key"]);
  CHECK(plans[1]["built"] == true);
  // torch's wheel from the cache, under its own name (pip needs it).
  fs::path from_cache = plans[1]["torch_wheel"].get<std::string>();
  CHECK(from_cache.filename() == fs::path(torch["wheel"].get<std::string>()).filename());
  CHECK(from_cache.parent_path().filename() == torch["sha256"].get<std::string>() + ".named");
  CHECK(plans[1]["build_venv"]["wheels"][0]["sha256"] == torch["sha256"]);
}

TEST_CASE("stack: on a GPU the dependent's import test runs its recipe's CUDA operation beside the custom torch",
          "[cli][stack][nvcc][gpu]") {
  auto d = t::archbuild({"detect", "--json"});
  if (d.status != 0) {
    WARN("##archbuild-skip## no GPU on this host (" << d.err.substr(0, 200) << ")");
    return;
  }
  std::string why = why_not(true);
  if (!why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  auto made = t::run("/bin/bash", {(fs::path(ARCHBUILD_SOURCE_DIR) / "tests" / "support" / "make-example-repos").string(),
                                   (dir / "repos").string()});
  REQUIRE(made.status == 0);
  auto recipes = write_recipes(dir, "file://" + (dir / "repos" / "minitorch").string());
  auto r = t::archbuild({"--cache-dir", (dir / "cache").string(), "wheel", "--sm", "native", "--python", kPython,
                         "--recipe", recipes.torch.string(), "--with", recipes.dependent.string(), "--out",
                         (dir / "out").string(), "--json"},
                        quiet_pip());
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  json doc = json::parse(r.out);
  const json& gpu = t::check_of(member(doc, "dependent")["validation"], "import-gpu");
  CHECK(gpu["status"] == "pass");
  CHECK_THAT(gpu["summary"].get<std::string>(), Catch::Contains("minivision.box_iou on the GPU ok"));
}
