// recipe/: the shipped recipes, strict loading (every error class with its line and column),
// `extends` merging, cycles, lookup by name and by path.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "recipe/driver.hpp"
#include "recipe/recipe.hpp"
#include "recipe/stage.hpp"
#include "support/tempdir.hpp"
#include "support/torch_lines.hpp"

using namespace archbuild;
using recipe::Recipe;

namespace {

Version V(const char* s) { return *Version::parse(s); }

const Recipe& by_name(const std::vector<Recipe>& all, const std::string& name) {
  auto it = std::find_if(all.begin(), all.end(), [&](const Recipe& r) { return r.name == name; });
  REQUIRE(it != all.end());
  return *it;
}

// A complete minimal recipe; tests append or replace lines to break one thing at a time.
const char* kGood = R"(package = "demo"
module = "demo"
version = "1.2.3"
cuda = ["12.8", "12.6"]
python = ["3.11", "3.12"]

[source]
url = "https://example.com/demo.git"
tag = "v1.2.3"

[build]
driver = "setup-py"

[build.env]
BUILD_TEST = "0"
)";

void replace(std::string& t, const std::string& from, const std::string& to) {
  auto at = t.find(from);
  REQUIRE(at != std::string::npos);
  t.replace(at, from.size(), to);
}

// Loads `text` as <tmp>/r.toml and returns the error message (fails the test if it loads).
std::string load_error(const test::TempDir& tmp, const std::string& text, const std::string& file = "r.toml") {
  auto path = tmp.write(file, text);
  auto r = recipe::load_file(path, recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == Exit::bad_input);
  UNSCOPED_INFO("message: " << r.error().message);
  return r.error().message;
}

}  // namespace

TEST_CASE("every shipped recipe loads, with real release data") {
  auto all = recipe::load_shipped();
  REQUIRE(all.ok());
  // Every file of recipes/ (2026: 12 torch + 12 torchvision + 8 torchaudio + 3 bases + flash-attn, xformers).
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(ARCHBUILD_SOURCE_DIR) / "recipes"))
    files += e.path().extension() == ".toml";
  CHECK(files >= 37);
  CHECK(all->size() == files);

  struct Line {
    const char* torch;
    const char* tag;
    const char* vision;
    const char* audio;
    bool two_digit;
    bool f;
  };
  const Line lines[] = {
      {"2.4", "v2.4.1", "0.19.1", "2.4.1", false, false}, {"2.5", "v2.5.1", "0.20.1", "2.5.1", false, false},
      {"2.6", "v2.6.0", "0.21.0", "2.6.0", false, false}, {"2.7", "v2.7.1", "0.22.1", "2.7.1", true, false},
      {"2.8", "v2.8.0", "0.23.0", "2.8.0", true, false},  {"2.9", "v2.9.1", "0.24.1", "2.9.1", true, true},
  };
  for (const auto& l : lines) {
    INFO("torch " << l.torch);
    const Recipe& t = by_name(*all, std::string("torch-") + l.torch);
    CHECK(t.package == "torch");
    CHECK(t.module == "torch");
    CHECK(t.source.url == "https://github.com/pytorch/pytorch.git");
    CHECK(t.source.tag == l.tag);
    CHECK(t.source.submodules);
    CHECK(t.version.str() == std::string(l.tag).substr(1));
    CHECK(t.arch.two_digit_major == l.two_digit);
    CHECK(t.arch.variant_a);
    CHECK(t.arch.variant_f == l.f);
    CHECK(t.env.at("BUILD_TEST") == "0");
    // The build never clones NCCL itself: a bundled submodule (≤ 2.6) or archbuild's fetch (2.7+).
    CHECK((t.version < V("2.7") || !t.fetches.empty()));
    CHECK(t.chain.size() == 2);
    CHECK(t.chain.back().filename() == "torch-common.toml");
    CHECK_FALSE(t.abstract);

    std::string minor = std::string(l.vision).substr(0, 4);
    const Recipe& v = by_name(*all, "torchvision-" + minor);
    CHECK(v.package == "torchvision");
    CHECK(v.version.str() == l.vision);
    CHECK(v.source.tag == std::string("v") + l.vision);
    CHECK(v.source.url == "https://github.com/pytorch/vision.git");
    REQUIRE(v.torch);
    CHECK(v.torch->str() == t.version.str());
    CHECK(v.cuda == t.cuda);
    CHECK(v.arch.grammar == arch::Grammar::extension);
    CHECK_FALSE(v.arch.variant_f);  // cpp_extension has no `f`

    const Recipe& a = by_name(*all, std::string("torchaudio-") + l.torch);
    CHECK(a.version.str() == l.audio);
    CHECK(a.source.url == "https://github.com/pytorch/audio.git");
    REQUIRE(a.torch);
    CHECK(a.torch->str() == t.version.str());
  }
  const Recipe& t27 = by_name(*all, "torch-2.7");
  CHECK(t27.cuda == std::vector<Version>{V("12.8"), V("12.6"), V("11.8")});
  CHECK(t27.driver == recipe::Driver::setup_py);
  CHECK(t27.version_env == "PYTORCH_BUILD_VERSION");
  CHECK(t27.build_number_env == "PYTORCH_BUILD_NUMBER");
  CHECK(t27.official.at("12.8") == "7.5;8.0;8.6;9.0;10.0;12.0+PTX");
  CHECK(t27.min_gcc->str() == "9.3");
  CHECK(by_name(*all, "torch-2.9").driver == recipe::Driver::python_build);
  CHECK(by_name(*all, "torch-2.9").python.front() == V("3.10"));
  CHECK(by_name(*all, "torch-common").abstract);

  // Each torch recipe pins its tag's commit (verified at fetch), but the lines after the newest
  // pinned one: their commits may not be known yet (2.15's is not).
  std::optional<Version> newest_pinned;
  for (const auto& r : *all)
    if (r.package == "torch" && !r.abstract && r.source.commit && (!newest_pinned || r.version > *newest_pinned))
      newest_pinned = r.version;
  REQUIRE(newest_pinned);
  CHECK(*newest_pinned >= V("2.14"));
  for (const auto& r : *all) {
    if (r.package != "torch" || r.abstract || r.version > *newest_pinned) continue;
    INFO(r.name);
    REQUIRE(r.source.commit);
    CHECK(r.source.commit->size() == 40);
  }
  CHECK(*by_name(*all, "torch-2.13").source.commit == "cf30153c4c131c8164ee7798e5022d810682e2cb");
  CHECK(*by_name(*all, "torch-2.10").source.commit == "449b1768410104d3ed79d3bcfe4ba1d65c7f22c0");

  // 2.12.0 - 2.13.0 read the environment as one CMake list (cmake/EnvVarForwarding.cmake);
  // 2.11 passed -D, 2.14 has pytorch#188242.
  CHECK(by_name(*all, "torch-2.12").forwards_env_as_list);
  CHECK(by_name(*all, "torch-2.13").forwards_env_as_list);
  CHECK_FALSE(by_name(*all, "torch-2.11").forwards_env_as_list);
  CHECK_FALSE(by_name(*all, "torch-2.14").forwards_env_as_list);

  // GCC 14 before 14.4 on aarch64: 2.9 and 2.10 (an ICE; 2.11 has the tree's workaround).
  for (const char* name : {"torch-2.9", "torch-2.10"}) {
    const auto& d = by_name(*all, name).compiler_defects;
    REQUIRE(d.size() == 1);
    CHECK(d[0].compiler == "gcc");
    CHECK(d[0].from == V("14.0"));
    CHECK(d[0].below == V("14.4"));
    CHECK(d[0].machines == std::vector<std::string>{"aarch64"});
  }
  CHECK(by_name(*all, "torch-2.11").compiler_defects.empty());
}

TEST_CASE("the 2026 releases: torch 2.10 - 2.15, torchvision 0.25 - 0.30, torchaudio 2.10 - 2.11") {
  auto all = recipe::load_shipped();
  REQUIRE(all.ok());
  using D = recipe::Driver;
  struct Line {
    const char* torch;
    const char* version;
    std::vector<const char*> cuda;
    const char* newest_python;
    D driver;
    const char* min_gcc;
    const char* vision;  // "" when there is none
    const char* triton;  // "" when the pin was not found (said in the recipe)
  };
  const Line lines[] = {
      {"2.10", "2.10.0", {"13.0", "12.8", "12.6"}, "3.14", D::python_build, "9.3", "0.25.0", "3.6.0"},
      {"2.11", "2.11.0", {"13.0", "12.8", "12.6"}, "3.14", D::python_build, "9.3", "0.26.0", "3.6.0"},
      {"2.12", "2.12.1", {"13.0", "13.2", "12.9", "12.6"}, "3.14", D::python_build, "9.3", "0.27.1", "3.7.1"},
      {"2.13", "2.13.0", {"13.0", "13.2", "12.6"}, "3.15", D::python_build, "11.4", "0.28.0", "3.7.1"},
      {"2.14", "2.14.0", {"13.0", "13.2", "12.6"}, "3.15", D::scikit_build_core, "11.4", "0.29.0", "3.8.0"},
      {"2.15", "2.15.0", {"13.0", "13.2", "13.4"}, "3.15", D::scikit_build_core, "11.4", "0.30.0", ""},
  };
  for (const auto& l : lines) {
    INFO("torch " << l.torch);
    const Recipe& t = by_name(*all, std::string("torch-") + l.torch);
    CHECK(t.version.str() == l.version);
    CHECK(t.source.tag == std::string("v") + l.version);
    CHECK(t.source.url == "https://github.com/pytorch/pytorch.git");
    std::vector<Version> cuda;
    for (const char* c : l.cuda) cuda.push_back(V(c));
    CHECK(t.cuda == cuda);
    CHECK(t.python.front() == V("3.10"));
    CHECK(t.python.back() == V(l.newest_python));
    CHECK(t.driver == l.driver);
    REQUIRE(t.min_gcc);
    CHECK(t.min_gcc->str() == l.min_gcc);
    CHECK(t.arch.grammar == arch::Grammar::build);
    CHECK((t.arch.two_digit_major && t.arch.variant_a && t.arch.variant_f));
    CHECK(t.env.count("USE_NCCL") == 0);  // NCCL on: fetched by archbuild ([[fetch]])
    CHECK(t.env.at("BUILD_TEST") == "0");
    CHECK((t.wheel_triton ? t.wheel_triton->str() : std::string()) == l.triton);
    // Every official list names a CUDA the recipe builds with.
    for (const auto& [c, list] : t.official) CHECK(std::count(t.cuda.begin(), t.cuda.end(), V(c.c_str())) == 1);

    if (*l.vision) {
      const Recipe& v = by_name(*all, "torchvision-" + std::string(l.vision).substr(0, 4));
      CHECK(v.version.str() == l.vision);
      REQUIRE(v.torch);
      CHECK(v.torch->str() == t.version.str());
      CHECK(v.cuda == t.cuda);
      CHECK(v.python == t.python);
      CHECK(v.arch.grammar == arch::Grammar::extension);
      CHECK_FALSE(v.arch.variant_f);
    }
  }
  // The lists of the official release wheels (build_env_setup.py's table; +PTX per release).
  const Recipe& t211 = by_name(*all, "torch-2.11");
  CHECK(t211.official.at("12.8") == "7.5;8.0;8.6;9.0;10.0;12.0");  // Volta dropped from cu128
  CHECK(by_name(*all, "torch-2.10").official.at("12.8") == "7.0;7.5;8.0;8.6;9.0;10.0;12.0");
  // Release CUDA 13 wheels carry no PTX: 2.11 (pytorch#175567), 2.12 (pytorch#188914), 2.13+
  // (_is_release_build(), in the v2.13.0 tag through pytorch#188925).
  CHECK(t211.official.at("13.0") == "7.5;8.0;8.6;9.0;10.0;12.0");
  CHECK(by_name(*all, "torch-2.12").official.at("13.2") == "7.5;8.0;8.6;9.0;10.0;12.0");
  const Recipe& t213 = by_name(*all, "torch-2.13");
  CHECK(t213.official.at("13.0") == "7.5;8.0;8.6;9.0;10.0;12.0");
  CHECK(t213.official.at("13.2") == "7.5;8.0;8.6;9.0;10.0;12.0");
  const Recipe& t214 = by_name(*all, "torch-2.14");
  CHECK(t214.official.at("13.2") == "7.5;8.0;8.6;9.0;10.0;12.0");
  CHECK(t214.official.at("12.6") == "5.0;6.0;7.0;7.5;8.0;8.6;9.0");
  CHECK(by_name(*all, "torch-2.15").official.empty());  // M facts not seen at the tag: not recorded
  CHECK(by_name(*all, "torch-2.12").official.count("12.9") == 0);

  // torchaudio: 2.10 and 2.11, the last; without CMake from 2.10.
  for (const char* a : {"2.10", "2.11"}) {
    INFO("torchaudio " << a);
    const Recipe& r = by_name(*all, std::string("torchaudio-") + a);
    CHECK(r.version.str() == std::string(a) + ".0");
    REQUIRE(r.torch);
    CHECK(r.torch->str() == std::string(a) + ".0");
    CHECK(r.tools == std::vector<std::string>{"ninja"});
    CHECK(r.cuda == by_name(*all, std::string("torch-") + a).cuda);
  }
  for (const auto& r : *all) {
    if (r.package == "torchaudio" && !r.abstract) CHECK(r.version <= V("2.11.0"));
    if (r.package == "torchvision" && !r.abstract) CHECK(r.version < V("0.31"));
  }
}

TEST_CASE("the example project's recipe loads and has no url of its own") {
  auto r = recipe::load(std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml", recipe::Search::shipped());
  REQUIRE(r.ok());
  CHECK(r->name == "minitorch");  // <project>/recipe.toml is named after the project
  CHECK(r->package == "minitorch");
  CHECK(r->source.url.empty());
  CHECK(r->source.tag == "v0.1.0");
  CHECK(r->driver == recipe::Driver::setup_py);
  CHECK(r->version_env == "PYTORCH_BUILD_VERSION");
}

// recipe/driver.hpp: one entry per driver, found by name, each with steps and a stage that
// configures; the named handles are the entries of those names.
TEST_CASE("drivers: one table entry each, looked up by name") {
  std::vector<std::string> names;
  for (const auto& d : recipe::drivers()) {
    const recipe::DriverSpec& s = recipe::driver_spec(d);
    INFO(s.name);
    names.push_back(s.name);
    auto again = recipe::driver_named(s.name);
    REQUIRE(again);
    CHECK(*again == d);
    CHECK_FALSE(s.steps.empty());
    CHECK(s.makes_wheel == s.wheel_stage.has_value());
    CHECK(std::any_of(s.steps.begin(), s.steps.end(), [&](const recipe::StepSpec& st) { return st.stage == s.configure_stage; }));
  }
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  CHECK(recipe::to_string(recipe::Driver::setup_py) == "setup-py");
  CHECK(recipe::to_string(recipe::driver_spec(recipe::Driver::setup_py).steps.front().stage) == "configure");
  CHECK(recipe::to_string(recipe::Driver::python_build) == "python-build");
  CHECK(recipe::to_string(recipe::Driver::scikit_build_core) == "scikit-build-core");
  CHECK(recipe::to_string(recipe::Driver::cmake) == "cmake");
  CHECK(recipe::Driver() == recipe::Driver::setup_py);
  CHECK_FALSE(recipe::driver_named("setuppy"));
  CHECK(recipe::driver_spec(recipe::Driver::cmake).tools == std::vector<std::string>{"cmake", "ninja"});
  CHECK_FALSE(recipe::driver_spec(recipe::Driver::cmake).runs_python);
  // A driver that is not CMake-shaped: its launchers go through a Meson native file.
  auto meson = recipe::driver_named("meson-python");
  REQUIRE(meson);
  CHECK(recipe::driver_spec(*meson).launchers == recipe::LauncherRoute::meson_native_file);
  CHECK(recipe::driver_spec(*meson).half_configured.marker == "meson-private");
  CHECK(recipe::driver_spec(*meson).builds.backends == std::vector<std::string>{"mesonpy"});
  CHECK_THAT(recipe::drivers_expected_text(),
             Catch::EndsWith(", cmake or meson-python (python -m build --wheel with the meson-python backend)"));
}

TEST_CASE("the meson-python fixture's recipe loads") {
  auto r = recipe::load(std::string(ARCHBUILD_SOURCE_DIR) + "/tests/fixtures/minimeson/recipe.toml", recipe::Search::shipped());
  INFO((r ? "" : r.error().message));
  REQUIRE(r.ok());
  CHECK(recipe::to_string(r->driver) == "meson-python");
  CHECK(recipe::python_modules(*r) == std::vector<std::string>{"build"});
  CHECK(r->arch.env == "MINIMESON_CUDA_ARCHITECTURES");
}

TEST_CASE("a minimal recipe loads with its defaults") {
  test::TempDir tmp;
  auto r = recipe::load_file(tmp.write("demo.toml", kGood), recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
  REQUIRE(r.ok());
  CHECK(r->name == "demo");
  CHECK(r->source.submodules);
  CHECK_FALSE(r->source.commit);
  CHECK(r->arch.env == "TORCH_CUDA_ARCH_LIST");
  CHECK_FALSE(r->arch.two_digit_major);
  CHECK(r->wheel_dir == "dist");
  CHECK(r->build_number == 1);
}

TEST_CASE("strict loading: each error names file:line:column and what was expected") {
  test::TempDir tmp;
  const std::string f = (tmp.path() / "r.toml").string();

  SECTION("invalid TOML") {
    auto m = load_error(tmp, "package = \"demo\"\nversion = \n");
    CHECK(m.find(f + ":2:") == 0);
    CHECK(m.find("invalid TOML") != std::string::npos);
  }
  SECTION("unknown top-level key, with a suggestion") {
    auto m = load_error(tmp, "pakage = \"x\"\n" + std::string(kGood));
    CHECK(m.find(f + ":1:1:") == 0);
    CHECK(m.find("unknown key 'pakage'") != std::string::npos);
    CHECK(m.find("did you mean 'package'") != std::string::npos);
  }
  SECTION("a compiler defect: its compiler, range, machines and reason") {
    auto defect = [](const std::string& body) {
      return std::string(kGood) + "[[build.compiler_defect]]\n" + body;
    };
    const std::string ok = "compiler = \"gcc\"\nfrom = \"14.0\"\nbelow = \"14.4\"\nmachines = [\"aarch64\"]\nwhy = \"an ICE\"\n";
    auto m = load_error(tmp, defect("compiler = \"icc\"\nfrom = \"14.0\"\nbelow = \"14.4\"\nwhy = \"x\"\n"));
    CHECK(m.find(f + ":") == 0);
    CHECK(m.find("expected gcc or clang") != std::string::npos);
    m = load_error(tmp, defect("compiler = \"gcc\"\nfrom = \"14.4\"\nbelow = \"14.0\"\nwhy = \"x\"\n"));
    CHECK(m.find("must be above from 14.4") != std::string::npos);
    m = load_error(tmp, defect("compiler = \"gcc\"\nfrom = \"14.0\"\nbelow = \"14.4\"\n"));
    CHECK(m.find("why") != std::string::npos);
    m = load_error(tmp, defect("compiler = \"gcc\"\nfrom = \"14.0\"\nbelow = \"14.4\"\nmachines = [\"ARM 64\"]\nwhy = \"x\"\n"));
    CHECK(m.find("not a `uname -m` name") != std::string::npos);
    m = load_error(tmp, defect(ok + "fixed = \"yes\"\n"));
    CHECK(m.find("unknown key 'fixed'") != std::string::npos);
  }
  SECTION("a platform's official settings from a CUDA release on") {
    auto since = [](const std::string& body) { return std::string(kGood) + "[platform.sbsa.official_env_since_cuda]\n" + body; };
    auto m = load_error(tmp, since("\"thirteen\" = { TORCH_NVCC_FLAGS = \"-x\" }\n"));
    CHECK(m.find(f + ":") == 0);
    CHECK(m.find("must map a CUDA version like \"13.0\" to a table of variables") != std::string::npos);
    m = load_error(tmp, since("\"13.0\" = { TORCH_NVCC_FLAGS = 1 }\n"));
    CHECK(m.find("official_env_since_cuda.13.0.TORCH_NVCC_FLAGS must be a string") != std::string::npos);
    m = load_error(tmp, since("\"13.0\" = \"-compress-mode=size\"\n"));
    CHECK(m.find("must map a CUDA version") != std::string::npos);
  }
  SECTION("unknown key in a table") {
    std::string t = kGood;
    replace(t, "driver =", "drvier =");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":12:1:") == 0);
    CHECK(m.find("unknown key 'drvier'") != std::string::npos);
    CHECK(m.find("did you mean 'driver'") != std::string::npos);
  }
  SECTION("wrong type") {
    std::string t = kGood;
    replace(t, "cuda = [\"12.8\", \"12.6\"]", "cuda = \"12.8\"");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":4:8:") == 0);
    CHECK(m.find("'cuda' must be an array") != std::string::npos);
  }
  SECTION("wrong type: a number where a string is expected") {
    std::string t = kGood;
    replace(t, "version = \"1.2.3\"", "version = 1.2");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":3:11:") == 0);
    CHECK(m.find("must be a string") != std::string::npos);
  }
  SECTION("bad version in a list: the element's own column") {
    std::string t = kGood;
    replace(t, "\"12.6\"", "\"12.x\"");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":4:17:") == 0);
    CHECK(m.find("\"12.x\" is not a version") != std::string::npos);
    CHECK(m.find("MAJOR.MINOR like 12.8") != std::string::npos);
  }
  SECTION("bad release version") {
    std::string t = kGood;
    replace(t, "\"1.2.3\"", "\"1.2-beta\"");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":3:11:") == 0);
    CHECK(m.find("expected a release version like 2.7.1") != std::string::npos);
  }
  SECTION("bad arch spelling in accepts") {
    auto m = load_error(tmp, std::string(kGood) + "\n[arch]\naccepts = [\"a\", \"two-digit-majors\"]\n");
    CHECK(m.find(f + ":18:17:") == 0);
    CHECK(m.find("\"two-digit-majors\" is not an arch spelling") != std::string::npos);
    CHECK(m.find("did you mean 'two-digit-major'") != std::string::npos);
  }
  SECTION("bad arch in an official list") {
    auto m = load_error(tmp, std::string(kGood) + "\n[arch.official]\n\"12.8\" = \"8.0;9.5\"\n");
    CHECK(m.find(f + ":18:10:") == 0);
    CHECK(m.find("9.5") != std::string::npos);
    CHECK(m.find("no compute capability 9.5") != std::string::npos);
  }
  SECTION("bad driver") {
    std::string t = kGood;
    replace(t, "\"setup-py\"", "\"setuppy\"");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":12:10:") == 0);
    CHECK(m.find("did you mean 'setup-py'") != std::string::npos);
    // Every driver of the table, with what it runs.
    CHECK(m.find("expected setup-py (setup.py build --cmake-only / bdist_wheel), python-build (python -m build "
                 "--wheel), scikit-build-core (python -m build --wheel with the scikit-build-core backend)") !=
          std::string::npos);
  }
  SECTION("pinned commit must be 40 hex digits") {
    std::string t = kGood;
    t.insert(t.find("\n[build]"), "\ncommit = \"abc123\"");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":11:10:") == 0);
    CHECK(m.find("40-hex-digit") != std::string::npos);
  }
  SECTION("an environment variable archbuild sets itself") {
    auto m = load_error(tmp, std::string(kGood) + "TORCH_CUDA_ARCH_LIST = \"9.0\"\n");
    CHECK(m.find(f + ":16:24:") == 0);
    CHECK(m.find("set by archbuild") != std::string::npos);
  }
  SECTION("CMAKE_INSTALL_PREFIX is refused (PyTorch's setup.py aborts on it)") {
    auto m = load_error(tmp, std::string(kGood) + "CMAKE_INSTALL_PREFIX = \"/usr\"\n");
    CHECK(m.find(f + ":16:") == 0);
  }
  SECTION("an environment value that is not a string") {
    auto m = load_error(tmp, std::string(kGood) + "USE_CUDA = 1\n");
    CHECK(m.find(f + ":16:12:") == 0);
    CHECK(m.find("must be a string (write \"1\", not 1)") != std::string::npos);
  }
  SECTION("missing required key") {
    std::string t = kGood;
    t.erase(0, t.find('\n') + 1);  // drop `package`
    auto m = load_error(tmp, t);
    CHECK(m.find(f) == 0);
    CHECK(m.find("missing required key 'package'") != std::string::npos);
  }
  SECTION("empty list") {
    std::string t = kGood;
    replace(t, "python = [\"3.11\", \"3.12\"]", "python = []");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":5:10:") == 0);
    CHECK(m.find("'python' is empty") != std::string::npos);
  }
}

TEST_CASE("extends: tables merge, keys override, arrays replace") {
  test::TempDir tmp;
  tmp.write("base.toml", R"(abstract = true
package = "demo"
module = "demo"
description = "the base"
cuda = ["12.8", "12.6"]
python = ["3.10", "3.11"]

[source]
url = "https://example.com/demo.git"

[build]
driver = "setup-py"
tools = ["cmake", "ninja"]
min_gcc = "9.3"

[build.env]
BUILD_TEST = "0"
USE_NCCL = "1"

[arch]
accepts = ["a"]
)");
  auto child = tmp.write("child.toml", R"(extends = "base"
version = "2.0.0"
cuda = ["13.0"]

[source]
tag = "v2.0.0"

[build.env]
USE_NCCL = "0"
USE_FOO = "1"
)");
  auto r = recipe::load_file(child, recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
  REQUIRE(r.ok());
  CHECK_FALSE(r->abstract);  // being a base is not inherited
  CHECK(r->package == "demo");
  CHECK(r->description == "the base");
  CHECK(r->version.str() == "2.0.0");
  CHECK(r->cuda == std::vector<Version>{V("13.0")});  // arrays replace
  CHECK(r->python == std::vector<Version>{V("3.10"), V("3.11")});
  CHECK(r->source.url == "https://example.com/demo.git");  // [source] merged
  CHECK(r->source.tag == "v2.0.0");
  CHECK(r->tools == std::vector<std::string>{"cmake", "ninja"});
  CHECK(r->min_gcc->str() == "9.3");
  CHECK(r->env == std::map<std::string, std::string>{{"BUILD_TEST", "0"}, {"USE_FOO", "1"}, {"USE_NCCL", "0"}});
  CHECK(r->arch.variant_a);
  REQUIRE(r->chain.size() == 2);
  CHECK(r->chain[0] == child);
  CHECK(r->chain[1].filename() == "base.toml");

  SECTION("a three-level chain, with a path in extends") {
    tmp.write("sub/grandchild.toml", "extends = \"../child.toml\"\nversion = \"2.0.1\"\n");
    auto g = recipe::load_file(tmp.path() / "sub/grandchild.toml", recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
    REQUIRE(g.ok());
    CHECK(g->version.str() == "2.0.1");
    CHECK(g->source.tag == "v2.0.0");
    CHECK(g->env.at("USE_FOO") == "1");
    CHECK(g->chain.size() == 3);
  }
  SECTION("a required key missing from the whole chain") {
    auto m = load_error(tmp, "extends = \"base\"\nversion = \"1.0\"\n", "nosrc.toml");
    CHECK(m.find("missing required key 'tag'") != std::string::npos);
    CHECK(m.find("or in the recipe it extends") != std::string::npos);
  }
  SECTION("a value that quotes the words 'missing required key' is not that error: no hint about the base") {
    // The hint follows the error's kind (ErrorKind::missing_key), never its words.
    auto m = load_error(tmp, "extends = \"base\"\nversion = \"missing required key\"\n", "words.toml");
    CHECK(m.find("\"missing required key\" is not a version") != std::string::npos);
    CHECK(m.find("or in the recipe it extends") == std::string::npos);
  }
  SECTION("an error in the base names the base's own line") {
    tmp.write("badbase.toml", "package = \"demo\"\ncuda = [\"twelve\"]\n");
    auto m = load_error(tmp, "extends = \"badbase\"\n", "c2.toml");
    CHECK(m.find((tmp.path() / "badbase.toml").string() + ":2:9:") == 0);
  }
  SECTION("an unknown extends target") {
    auto m = load_error(tmp, "extends = \"bsae\"\n", "c3.toml");
    CHECK(m.find((tmp.path() / "c3.toml").string() + ":1:11:") == 0);
    CHECK(m.find("did you mean 'base'") != std::string::npos);
  }
  SECTION("an extends target that is there but no file: said as it is, not 'no such recipe'") {
    REQUIRE(::mkfifo((tmp.path() / "pipe.toml").c_str(), 0600) == 0);
    std::filesystem::create_directory(tmp.path() / "dir.toml");
    std::filesystem::create_symlink("loop.toml", tmp.path() / "loop.toml");
    for (const auto& [target, what] : std::vector<std::pair<std::string, std::string>>{
             {"pipe", "is a FIFO (named pipe)"}, {"./dir.toml", "is a directory"}, {"loop", "is a loop of symbolic links"}}) {
      auto m = load_error(tmp, "extends = \"" + target + "\"\n", "c4.toml");
      INFO(m);
      CHECK(m.find((tmp.path() / "c4.toml").string() + ":1:11:") == 0);
      CHECK(m.find(what + ", not a recipe file") != std::string::npos);
      CHECK(m.find("no such recipe") == std::string::npos);
    }
  }
}

TEST_CASE("extends cycles are detected") {
  test::TempDir tmp;
  tmp.write("a.toml", "extends = \"b\"\npackage = \"x\"\n");
  tmp.write("b.toml", "extends = \"c\"\n");
  tmp.write("c.toml", "extends = \"a\"\n");
  auto r = recipe::load_file(tmp.path() / "a.toml", recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == Exit::bad_input);
  CHECK(r.error().message.find((tmp.path() / "c.toml").string() + ":1:11:") == 0);
  CHECK(r.error().message.find("extends cycle: a.toml -> b.toml -> c.toml -> a.toml") != std::string::npos);

  tmp.write("self.toml", "extends = \"self\"\n");
  auto s = recipe::load_file(tmp.path() / "self.toml", recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message.find("extends cycle") != std::string::npos);
}

TEST_CASE("a user's recipe file can extend a shipped recipe by name") {
  test::TempDir tmp;
  auto mine = tmp.write("my-torch.toml", R"(# torch 2.7 with system NCCL, from our own mirror
extends = "torch-2.7"

[source]
url = "https://git.example.com/mirror/pytorch.git"

[build.env]
USE_NCCL = "1"
USE_SYSTEM_NCCL = "1"
)");
  auto r = recipe::load(mine.string(), recipe::Search::shipped());
  REQUIRE(r.ok());
  CHECK(r->name == "my-torch");
  CHECK(r->package == "torch");
  CHECK(r->source.tag == "v2.7.1");
  CHECK(r->source.url == "https://git.example.com/mirror/pytorch.git");
  CHECK(r->env.at("USE_SYSTEM_NCCL") == "1");
  CHECK(r->env.at("BUILD_TEST") == "0");
  CHECK(r->chain.size() == 3);
}

TEST_CASE("a path a recipe writes stays relative to that file when another recipe extends it") {
  test::TempDir tmp;
  std::filesystem::create_directories(tmp.path() / "project" / "tree");
  std::string base = kGood;
  replace(base, "url = \"https://example.com/demo.git\"\ntag = \"v1.2.3\"", "path = \"tree\"");
  tmp.write("project/recipe.toml", base);
  auto child = tmp.write("elsewhere/mine.toml", "extends = \"../project/recipe.toml\"\n");
  auto r = recipe::load(child.string(), recipe::Search::shipped());
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  // Before: resolved against the extending file's folder (elsewhere/tree).
  CHECK(r->source.path == (tmp.path() / "project" / "tree").lexically_normal());
}

TEST_CASE("recipes by name, by path, and what a wrong name says") {
  auto byname = recipe::load("torch-2.8", recipe::Search::shipped());
  REQUIRE(byname.ok());
  CHECK(byname->source.tag == "v2.8.0");

  auto typo = recipe::load("torhc-2.8", recipe::Search::shipped());
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.error().exit == Exit::bad_input);
  CHECK(typo.error().message.find("no recipe named 'torhc-2.8'") != std::string::npos);
  CHECK(typo.error().message.find("torch-2.8") != std::string::npos);

  auto nofile = recipe::load("/nonexistent/recipe.toml", recipe::Search::shipped());
  REQUIRE_FALSE(nofile.ok());
  CHECK(nofile.error().message.find("recipe file \"/nonexistent/recipe.toml\": no such file or directory") != std::string::npos);
  CHECK(recipe::looks_like_path("a/b"));
  CHECK(recipe::looks_like_path("x.toml"));
  CHECK_FALSE(recipe::looks_like_path("torch-2.7"));
}

namespace {

// kGood plus one [[fetch]] (its header on line 17), with `extra` lines inside it.
std::string with_fetch(const std::string& extra = "") {
  return std::string(kGood) + R"(
[[fetch]]
name = "nccl"
path = "third_party/nccl"
url = "https://github.com/NVIDIA/nccl"
pin_file = ".ci/docker/ci_commit_pins/nccl-cu{cuda_major}.txt"
unless_env = { USE_NCCL = ["0", "OFF"], USE_SYSTEM_NCCL = "1" }
)" + extra;
}

}  // namespace

TEST_CASE("fetch entries: what the build would download as data - every mistake named with file:line:column") {
  test::TempDir tmp;
  const std::string f = (tmp.path() / "r.toml").string();
  auto r = recipe::load_file(tmp.write("r.toml", with_fetch()), recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
  REQUIRE(r.ok());
  REQUIRE(r->fetches.size() == 1);
  const auto& nccl = r->fetches[0];
  CHECK(nccl.name == "nccl");
  CHECK(nccl.path == "third_party/nccl");
  CHECK(nccl.url == "https://github.com/NVIDIA/nccl");
  CHECK_FALSE(nccl.submodules);
  CHECK(recipe::pin_files_for(nccl, V("13.0")) == std::vector<std::string>{".ci/docker/ci_commit_pins/nccl-cu13.txt"});
  CHECK(recipe::pin_files_for(nccl, V("12.8")) == std::vector<std::string>{".ci/docker/ci_commit_pins/nccl-cu12.txt"});
  // The environment under which the build would not fetch it; values compared without case.
  CHECK(recipe::fetch_disabled_by(nccl, {}) == "");
  CHECK(recipe::fetch_disabled_by(nccl, {{"USE_NCCL", "1"}}) == "");
  CHECK(recipe::fetch_disabled_by(nccl, {{"USE_NCCL", "off"}}) == "USE_NCCL=off");
  CHECK(recipe::fetch_disabled_by(nccl, {{"USE_SYSTEM_NCCL", "1"}}) == "USE_SYSTEM_NCCL=1");

  SECTION("several pin files: the first the tree has") {
    std::string t = with_fetch();
    replace(t, "pin_file = \".ci/docker/ci_commit_pins/nccl-cu{cuda_major}.txt\"",
            "pin_file = [\"a/nccl-cu{cuda_major}.txt\", \"a/nccl.txt\"]");
    auto two = recipe::load_file(tmp.write("two.toml", t), recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
    REQUIRE(two.ok());
    CHECK(recipe::pin_files_for(two->fetches[0], V("12.6")) == std::vector<std::string>{"a/nccl-cu12.txt", "a/nccl.txt"});
  }
  SECTION("{cuda_minor}: a pin per CUDA release, nccl-cu130.txt for 13.0") {
    std::string t = with_fetch();
    replace(t, "pin_file = \".ci/docker/ci_commit_pins/nccl-cu{cuda_major}.txt\"",
            "pin_file = [\"a/nccl-cu{cuda_major}{cuda_minor}.txt\", \"a/nccl.txt\"]");
    auto two = recipe::load_file(tmp.write("minor.toml", t), recipe::Search{{tmp.path()}, &arch::ArchData::shipped()});
    REQUIRE(two.ok());
    CHECK(recipe::pin_files_for(two->fetches[0], V("13.0")) == std::vector<std::string>{"a/nccl-cu130.txt", "a/nccl.txt"});
    CHECK(recipe::pin_files_for(two->fetches[0], V("12.6")) == std::vector<std::string>{"a/nccl-cu126.txt", "a/nccl.txt"});
    CHECK(recipe::pin_files_for(two->fetches[0], V("13.2.1")) == std::vector<std::string>{"a/nccl-cu132.txt", "a/nccl.txt"});
  }
  SECTION("a path leaving the tree") {
    std::string t = with_fetch();
    replace(t, "path = \"third_party/nccl\"", "path = \"../nccl\"");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":19:8:") == 0);
    CHECK(m.find("must be a folder inside the tree") != std::string::npos);
  }
  SECTION("an unknown placeholder in the pin file") {
    std::string t = with_fetch();
    replace(t, "{cuda_major}", "{cuda}");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":21:12:") == 0);
    CHECK(m.find("the placeholders are {cuda_major} and {cuda_minor}") != std::string::npos);
  }
  SECTION("a number in unless_env") {
    std::string t = with_fetch();
    replace(t, "USE_SYSTEM_NCCL = \"1\"", "USE_SYSTEM_NCCL = 1");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":22:") == 0);
    CHECK(m.find("fetch.unless_env.USE_SYSTEM_NCCL must be a string or a non-empty array of strings") != std::string::npos);
  }
  SECTION("a required key missing") {
    std::string t = with_fetch();
    replace(t, "url = \"https://github.com/NVIDIA/nccl\"\n", "");
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":17:") == 0);
    CHECK(m.find("missing required key 'url'") != std::string::npos);
  }
  SECTION("an unknown key, with a suggestion") {
    auto m = load_error(tmp, with_fetch("unles_env = {}\n"));
    CHECK(m.find(f + ":23:1:") == 0);
    CHECK(m.find("unknown key 'unles_env' in [[fetch]]") != std::string::npos);
    CHECK(m.find("did you mean 'unless_env'") != std::string::npos);
  }
  SECTION("the same name twice") {
    std::string t = with_fetch();
    t += "\n[[fetch]]\nname = \"nccl\"\npath = \"x\"\nurl = \"https://x/y\"\npin_file = \"p.txt\"\n";
    auto m = load_error(tmp, t);
    CHECK(m.find(f + ":25:8:") == 0);
    CHECK(m.find("declared twice") != std::string::npos);
  }
}

TEST_CASE("the torch recipes fetch NCCL (on by default) and switch NNPACK's configure-time downloads off") {
  auto all = recipe::load_shipped();
  REQUIRE(all.ok());
  for (const char* name : {"torch-2.7", "torch-2.9", "torch-2.13", "torch-2.15"}) {
    INFO(name);
    const Recipe& t = by_name(*all, name);
    CHECK(t.env.count("USE_NCCL") == 0);
    CHECK(t.env.at("USE_NNPACK") == "0");
    REQUIRE_FALSE(t.fetches.empty());
    const auto& nccl = t.fetches[0];
    CHECK(nccl.name == "nccl");
    CHECK(nccl.path == "third_party/nccl");
    CHECK(nccl.url == "https://github.com/NVIDIA/nccl");
    CHECK(recipe::fetch_disabled_by(nccl, {{"USE_NCCL", "0"}}) == "USE_NCCL=0");
    CHECK(recipe::fetch_disabled_by(nccl, {{"USE_SYSTEM_NCCL", "ON"}}) == "USE_SYSTEM_NCCL=ON");
    CHECK(recipe::fetch_disabled_by(nccl, {{"USE_DISTRIBUTED", "0"}}) == "USE_DISTRIBUTED=0");
    CHECK(recipe::fetch_disabled_by(nccl, t.env) == "");
  }
  CHECK(by_name(*all, "torch-2.6").fetches.empty());  // NCCL is a submodule there
}

namespace {

const recipe::Fetch& fetch_named(const Recipe& r, const std::string& name) {
  for (const auto& f : r.fetches)
    if (f.name == name) return f;
  FAIL(r.name << " has no [[fetch]] " << name);
  throw;
}

}  // namespace

TEST_CASE("the NCCL pin each torch tag's own code reads, and Eigen's fetch from the line that lost the submodule") {
  auto all = recipe::load_shipped();
  REQUIRE(all.ok());
  const std::string pins = ".ci/docker/ci_commit_pins/";
  // setuptools era: tools/optional_submodules.py read_nccl_pin(), nccl-cu12.txt (older tags) or nccl.txt.
  for (const char* name : {"torch-2.7", "torch-2.8"}) {
    INFO(name);
    CHECK(recipe::pin_files_for(fetch_named(by_name(*all, name), "nccl"), V("12.8")) ==
          std::vector<std::string>{pins + "nccl-cu12.txt"});
  }
  for (const char* name : {"torch-2.9", "torch-2.10", "torch-2.11", "torch-2.12"}) {
    INFO(name);
    CHECK(recipe::pin_files_for(fetch_named(by_name(*all, name), "nccl"), V("13.0")) ==
          std::vector<std::string>{pins + "nccl-cu12.txt", pins + "nccl.txt"});
  }
  // cmake/PreBuildSteps.cmake (pytorch#181450, 2.13 on): nccl-cu{major}{minor}.txt, else nccl.txt.
  // Every line from 2.13 on, the ones after 2.15 included.
  std::vector<std::string> since_213, since_29;
  for (const auto& l : test::torch_lines()) {
    if (V(l.line.c_str()) >= V("2.13")) since_213.push_back(l.recipe);
    if (V(l.line.c_str()) >= V("2.9")) since_29.push_back(l.recipe);
  }
  CHECK(since_213.size() >= 3);
  for (const auto& name : since_213) {
    INFO(name);
    const auto& nccl = fetch_named(by_name(*all, name), "nccl");
    CHECK(recipe::pin_files_for(nccl, V("13.0")) == std::vector<std::string>{pins + "nccl-cu130.txt", pins + "nccl.txt"});
    CHECK(recipe::pin_files_for(nccl, V("13.2")) == std::vector<std::string>{pins + "nccl-cu132.txt", pins + "nccl.txt"});
  }
  // Eigen left the submodules in pytorch#155955 (2025-06): every line since clones it from eigen_pin.txt.
  CHECK(since_29.size() >= 7);
  for (const auto& name : since_29) {
    INFO(name);
    const auto& eigen = fetch_named(by_name(*all, name), "eigen");
    CHECK(eigen.path == "third_party/eigen");
    CHECK(eigen.url == "https://gitlab.com/libeigen/eigen");
    CHECK(recipe::pin_files_for(eigen, V("13.0")) == std::vector<std::string>{"third_party/eigen_pin.txt"});
  }
  CHECK(by_name(*all, "torch-2.7").fetches.size() == 1);  // Eigen is still a submodule there
}

TEST_CASE("a dependent's recipe: torch_recipe relative to its file, the CUDA operation of its import test") {
  auto r = recipe::load(std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minivision/recipe.toml", recipe::Search::shipped());
  REQUIRE(r.ok());
  CHECK(r->torch == V("0.1.0"));
  REQUIRE(r->torch_recipe);
  CHECK(std::filesystem::path(*r->torch_recipe) ==
        std::filesystem::path(ARCHBUILD_SOURCE_DIR) / "examples" / "minitorch" / "recipe.toml");
  CHECK(r->cuda_op_what == "minivision.box_iou on the GPU");
  CHECK(r->cuda_op.find("m.box_iou") != std::string::npos);
  auto tv = recipe::load("torchvision-0.29", recipe::Search::shipped());  // from torchvision-common
  REQUIRE(tv.ok());
  CHECK(tv->cuda_op.find("torch.ops.torchvision.nms") != std::string::npos);
  CHECK_FALSE(tv->torch_recipe);
  // torchaudio's, from torchaudio-common: forced_align's CUDA kernel, in 2.10 and 2.11 alike.
  for (const char* name : {"torchaudio-2.10", "torchaudio-2.11"}) {
    auto ta = recipe::load(name, recipe::Search::shipped());
    REQUIRE(ta.ok());
    CHECK(ta->cuda_op_what == "torchaudio.functional.forced_align on cuda");
    CHECK(ta->cuda_op.find("forced_align(log_probs, targets, blank=0)") != std::string::npos);
    CHECK(ta->cuda_op.find("ok = ") != std::string::npos);
  }

  test::TempDir tmp;
  std::string t = kGood;
  t += "\n[validate]\ncuda_op = \"ok = True\"\n";
  CHECK_THAT(load_error(tmp, t), Catch::Contains("r.toml:") && Catch::Contains("needs cuda_op_what"));
}

// recipe/stage.hpp: one name table for the stages, in their order; a name that is none of them is
// refused where it is read (the key record's stamps, stages/pipeline.cpp), never taken for one.
TEST_CASE("stages: one name table, to and from the names records and JSON hold") {
  std::vector<std::string> names;
  for (recipe::Stage s : recipe::kStages) {
    names.emplace_back(recipe::to_string(s));
    CHECK(recipe::stage_named(recipe::to_string(s)) == s);
  }
  CHECK(names == std::vector<std::string>{"fetch", "configure", "build", "package", "validate"});
  CHECK_FALSE(recipe::stage_named("Validate"));
  CHECK_FALSE(recipe::stage_named(""));
  auto bad = recipe::stage_read("install", "keys/k.json");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().exit == Exit::bad_input);
  CHECK(bad.error().message == "keys/k.json names the stage \"install\", which archbuild does not have (its stages: fetch, "
                               "configure, build, package, validate)");
  CHECK(*recipe::stage_read("package", "keys/k.json") == recipe::Stage::package);
}
