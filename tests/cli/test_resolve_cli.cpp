// The recipes, resolve and plan commands, end to end. Hermetic: PATH holds only fake tools the
// test writes (g++, python3, cmake, ninja) and ARCHBUILD_CUDA_ROOTS only fake toolkit trees, so
// the answers do not depend on what this machine has installed — except the last test, which
// resolves against the real machine when it has nvcc.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/tempdir.hpp"
#include "support/torch_lines.hpp"

using namespace archbuild;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The newest torch recipe (recipes/): what resolution picks when nothing narrows it.
const test::TorchLine newest = test::newest_torch();

// The recipes `recipes list --json` lists: every file of recipes/, the abstract bases included.
std::size_t shipped_recipes() {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(ARCHBUILD_SOURCE_DIR) / "recipes"))
    n += e.path().extension() == ".toml";
  return n;
}

// Whether the resolution's rules hold `id` with this outcome.
bool has_rule(const nlohmann::json& j, const std::string& id, bool ok) {
  for (const auto& r : j["rules"])
    if (r["rule"] == id && r["ok"] == ok) return true;
  return false;
}

void exe(const test::TempDir& tmp, const std::string& rel, const std::string& script) {
  auto p = tmp.write(rel, "#!/bin/sh\n" + script);
  fs::permissions(p, fs::perms::owner_all, fs::perm_options::replace);
}

void fake_cuda(const test::TempDir& tmp, const std::string& release, const std::string& build, const std::string& archs) {
  exe(tmp, "roots/cuda-" + release + "/bin/nvcc",
      "case \"$1\" in\n"
      "  --version) echo 'Cuda compilation tools, release " + release + ", V" + build + "';;\n"
      "  --list-gpu-arch) for a in " + archs + "; do echo compute_$a; done;;\n"
      "  *) exit 1;;\n"
      "esac\n");
}

// A build host made of scripts: g++ 13, Python 3.12 (with every build module), cmake, ninja, and the
// given toolkits.
struct FakeHost {
  test::TempDir tmp;
  FakeHost() {
    exe(tmp, "bin/g++-13", "echo 'g++-13 (Ubuntu 13.2.0-4ubuntu3) 13.2.0'\n");
    exe(tmp, "bin/gcc-13", "exit 0\n");
    exe(tmp, "bin/python3", "echo /fake/python/bin/python3.12\necho 3.12.3\necho setuptools wheel build pip venv scikit_build_core\n");
    exe(tmp, "bin/cmake", "exit 0\n");
    exe(tmp, "bin/ninja", "exit 0\n");
    fs::create_directories(tmp.path() / "roots");
  }
  void cuda130() { fake_cuda(tmp, "13.0", "13.0.88", "75 80 86 87 88 89 90 100 103 110 120 121"); }
  void cuda132() { fake_cuda(tmp, "13.2", "13.2.51", "75 80 86 87 88 89 90 100 103 110 120 121"); }
  void cuda134() { fake_cuda(tmp, "13.4", "13.4.92", "75 80 86 87 88 89 90 100 103 107 110 120 121"); }
  void cuda128() { fake_cuda(tmp, "12.8", "12.8.93", "50 52 53 60 61 62 70 72 75 80 86 87 89 90 100 101 120"); }
  test::RunOptions opts() const {
    test::RunOptions o;
    o.env["PATH"] = (tmp.path() / "bin").string();
    o.env["ARCHBUILD_CUDA_ROOTS"] = (tmp.path() / "roots").string();
    o.env["XDG_CACHE_HOME"] = (tmp.path() / "xdg").string();
    // No GPU on the fake host, whatever this machine has (for --sm native).
    o.env["ARCHBUILD_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1";
    o.env["ARCHBUILD_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1";
    o.unset_env = {"CUDA_HOME", "CUDA_PATH", "CUDAHOSTCXX", "ARCHBUILD_CACHE_DIR"};
    return o;
  }
  test::Ran run(std::vector<std::string> args) const { return test::archbuild(args, opts()); }
};

json parse(const test::Ran& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  auto j = json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

}  // namespace

TEST_CASE("archbuild recipes lists and shows the recipes") {
  auto r = test::archbuild({"recipes"});
  REQUIRE(r.status == 0);
  for (const char* name : {"torch-2.4", "torch-2.9", "torch-2.15", "torchvision-0.22", "torchvision-0.29", "torchaudio-2.7", "torchaudio-2.11"}) CHECK(contains(r.out, name));
  CHECK(contains(r.out, newest.recipe));
  CHECK(contains(r.out, "v2.7.1"));
  CHECK_FALSE(contains(r.out, "torch-common "));  // bases are named on stderr only

  auto j = parse(test::archbuild({"recipes", "list", "--json"}));
  CHECK(shipped_recipes() >= 37);
  REQUIRE(j["recipes"].size() == shipped_recipes());
  CHECK(j["recipes"][0]["package"] == "torch");

  auto show = test::archbuild({"recipes", "show", "torch-2.7"});
  REQUIRE(show.status == 0);
  CHECK(contains(show.out, "v2.7.1"));
  CHECK(contains(show.out, "torch-common.toml"));
  CHECK(contains(show.out, "12.8,12.6,11.8"));
  auto sj = parse(test::archbuild({"recipes", "show", "torchvision-0.24", "--json"}));
  CHECK(sj["torch"] == "2.9.1");
  CHECK(sj["arch"]["grammar"] == "extension");

  auto typo = test::archbuild({"recipes", "show", "torch-27"});
  CHECK(typo.status == 2);
  CHECK(contains(typo.err, "no recipe named 'torch-27'"));

  test::TempDir tmp;
  auto bad = tmp.write("bad.toml", "extends = \"torch-2.7\"\n[build]\ndrivr = \"cmake\"\n");
  auto b = test::archbuild({"recipes", "show", bad.string()});
  CHECK(b.status == 2);
  CHECK(contains(b.err, bad.string() + ":3:"));
  CHECK(contains(b.err, "did you mean 'driver'"));
}

TEST_CASE("archbuild resolve: the refusals, exit 2 with the rule and the way out") {
  FakeHost h;
  h.cuda130();
  auto a = h.run({"resolve", "--sm", "120", "--torch", "2.5"});
  CHECK(a.status == 2);
  CHECK(contains(a.err, "rule toolkit-arch: sm_120 needs CUDA >= 12.8"));
  CHECK(contains(a.err, "two-digit majors"));
  CHECK(contains(a.err, "--torch 2.7 or newer"));
  CHECK(contains(a.out, "toolkit-arch"));  // the rules checked are printed

  auto b = h.run({"resolve", "--sm", "6.1", "--cuda", "13.0"});
  CHECK(b.status == 2);
  CHECK(contains(b.err, "CUDA 13.0 dropped sm_61"));
  CHECK(contains(b.err, "CUDA <= 12.9"));

  auto c = h.run({"resolve", "--sm", "12.0f", "--torch", "2.7"});
  CHECK(c.status == 2);
  CHECK(contains(c.err, "'f' suffixes"));
  CHECK(contains(c.err, "--torch 2.9"));

  auto d = h.run({"resolve", "--sm", "9.5"});
  CHECK(d.status == 2);
  CHECK(contains(d.err, "9.5"));

  // native means this host's GPUs (archbuild detect); the fake host has none: a missing device.
  auto n = h.run({"resolve", "--sm", "native"});
  CHECK(n.status == 3);
  CHECK(contains(n.err, "no GPU"));
  CHECK(contains(n.err, "archbuild detect"));

  auto v = h.run({"resolve", "--sm", "90", "--cuda", "13"});
  CHECK(v.status == 2);
  CHECK(contains(v.err, "--cuda '13'"));

  CHECK(h.run({"resolve"}).status == 2);  // --sm is required

  auto j = parse(h.run({"resolve", "--sm", "120", "--torch", "2.5", "--json"}));
  CHECK(j["status"] == "refused");
  CHECK(j["exit"] == 2);
  CHECK(contains(j["message"].get<std::string>(), "--torch 2.7"));
}

TEST_CASE("archbuild resolve --sm 89 picks the newest recipe and the installed toolkit") {
  FakeHost h;
  h.cuda130();
  auto r = h.run({"resolve", "--sm", "89", "--json"});
  REQUIRE(r.status == 0);
  auto j = parse(r);
  CHECK(j["status"] == "ok");
  CHECK(j["recipe"]["name"] == newest.recipe);
  CHECK(j["toolkit"]["root"] == (h.tmp.path() / "roots/cuda-13.0").string());
  CHECK(j["toolkit"]["nvcc_version"] == "13.0.88");
  CHECK(j["compiler"]["path"] == (h.tmp.path() / "bin/g++-13").string());
  CHECK(j["python"]["path"] == "/fake/python/bin/python3.12");
  CHECK(j["arch_list"]["value"] == "8.9");

  auto human = h.run({"resolve", "--sm", "89"});
  CHECK(human.status == 0);
  CHECK(contains(human.out, newest.recipe));
  CHECK(contains(human.out, "TORCH_CUDA_ARCH_LIST=8.9"));
  CHECK(contains(human.out, "ok   host-compiler"));
}

TEST_CASE("archbuild resolve prefers an installed toolkit, and exits 3 when only a tool is missing") {
  FakeHost h;
  h.cuda132();
  auto r = parse(h.run({"resolve", "--sm", "90", "--json"}));
  CHECK(r["recipe"]["name"] == newest.recipe);
  CHECK(r["cuda"]["release"] == "13.2");  // installed, though the newest prefers 13.0

  FakeHost only13;
  only13.cuda130();
  auto m = only13.run({"resolve", "--sm", "61"});
  CHECK(m.status == 3);
  CHECK(contains(m.err, "CUDA 12.6 is not installed"));  // CUDA 13 dropped Pascal: torch 2.14's cu126
  CHECK(contains(m.out, "torch-2.14"));

  FakeHost none;
  auto p = none.run({"plan", "--sm", "90"});
  CHECK(p.status == 3);
  CHECK(contains(p.err, "CUDA 13.0 is not installed"));
}

TEST_CASE("archbuild resolve --sm 90 picks the newest torch, --sm 107 needs CUDA >= 13.4, Rubin is gated by --cuda") {
  FakeHost h;
  h.cuda130();
  h.cuda134();
  auto r = parse(h.run({"resolve", "--sm", "90", "--json"}));
  CHECK(r["status"] == "ok");
  CHECK(r["recipe"]["name"] == newest.recipe);
  CHECK(r["cuda"]["release"] == "13.0");

  // The newest torch (2.15 on) builds sm_107 from source with CUDA 13.4 (the only toolkit that compiles it).
  auto rubin = parse(h.run({"resolve", "--sm", "107", "--json"}));
  CHECK(rubin["status"] == "ok");
  CHECK(rubin["recipe"]["name"] == newest.recipe);
  CHECK(rubin["cuda"]["release"] == "13.4");
  CHECK(rubin["arch_list"]["value"] == "10.7");
  // Before 2.15 no recipe can: refused with the rule and the way out.
  auto old_torch = h.run({"resolve", "--sm", "107", "--torch", "2.14"});
  INFO(old_torch.err);
  CHECK(old_torch.status == 2);
  CHECK(contains(old_torch.err, "rule toolkit-arch: sm_107 needs CUDA >= 13.4"));
  CHECK(contains(old_torch.err, "Way out: --torch 2.15"));  // the release whose recipe has CUDA 13.4
  // A recipe that builds with 13.4 gets the installed 13.4.
  auto f = h.tmp.write("torch-2.15-cu134.toml", "extends = \"torch-2.15\"\ncuda = [\"13.4\"]\n");
  auto ok = h.run({"resolve", "--sm", "107", "--recipe", f.string(), "--json"});
  INFO(ok.err);
  REQUIRE(ok.status == 0);
  auto j = parse(ok);
  CHECK(j["cuda"]["release"] == "13.4");
  CHECK(j["toolkit"]["root"] == (h.tmp.path() / "roots/cuda-13.4").string());
  CHECK(j["arch_list"]["value"] == "10.7");

  // The name Rubin exists only from CUDA 13.4.
  auto gated = h.run({"resolve", "--sm", "Rubin", "--cuda", "13.0"});
  CHECK(gated.status == 2);
  CHECK(contains(gated.err, "--sm: invalid architecture \"Rubin\""));
  CHECK(contains(gated.err, "only with CUDA >= 13.4"));
  auto named = h.run({"resolve", "--sm", "Rubin", "--cuda", "13.4", "--recipe", f.string(), "--json"});
  CHECK(named.status == 0);

  auto arch_old = test::archbuild({"arch", "Rubin", "--cuda", "13.2"});
  CHECK(arch_old.status == 2);
  CHECK(contains(arch_old.err, "only with CUDA >= 13.4"));
  auto arch_new = test::archbuild({"arch", "Rubin+PTX", "--cuda", "13.4"});
  CHECK(arch_new.status == 0);
  CHECK(contains(arch_new.out, "10.7+PTX"));
  auto ext = test::archbuild({"arch", "Rubin", "--parser", "extension"});
  CHECK(ext.status == 2);
  CHECK(contains(ext.err, "cpp_extension has no name Rubin"));
  CHECK(test::archbuild({"arch", "Hopper", "--cuda", "13"}).status == 2);
}

TEST_CASE("archbuild plan: environment, steps, a stable key, and whether it is built") {
  FakeHost h;
  h.cuda130();
  auto r1 = h.run({"plan", "--sm", "90", "--json"});
  REQUIRE(r1.status == 0);
  auto a = parse(r1);
  std::string key = a["key"];
  CHECK(key.size() == 64);
  CHECK(a["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0");
  CHECK(a["env"]["CUDA_HOME"] == (h.tmp.path() / "roots/cuda-13.0").string());
  CHECK(a["env"]["CUDAHOSTCXX"] == (h.tmp.path() / "bin/g++-13").string());
  CHECK(a["env"]["CC"] == (h.tmp.path() / "bin/gcc-13").string());
  CHECK(a["env"]["PYTORCH_BUILD_VERSION"] == newest.version + "+cu130.sm90");
  CHECK(a["env"].contains("MAX_JOBS"));
  CHECK(a["steps"][0]["argv"][0] == "/fake/python/bin/python3.12");
  CHECK(a["built"] == false);
  CHECK(a["manifest"] == (h.tmp.path() / "xdg/archbuild/keys" / (key + ".json")).string());

  // Same inputs: same key, whatever the jobs or the cache directory.
  auto b = parse(h.run({"plan", "--sm", "90", "--json", "--jobs", "1"}));
  CHECK(b["key"] == key);
  CHECK(b["env"]["MAX_JOBS"] == "1");
  auto c = parse(h.run({"--cache-dir", (h.tmp.path() / "elsewhere").string(), "plan", "--sm", "sm_90", "--json"}));
  CHECK(c["key"] == key);
  // Another input: another key.
  CHECK(parse(h.run({"plan", "--sm", "80", "--json"}))["key"] != key);
  CHECK(parse(h.run({"plan", "--sm", "90", "--ptx", "--json"}))["key"] != key);

  // A finished build is recorded by the store as keys/<key>.json + wheels/<sha256>.whl.
  std::string sha(64, 'e');
  h.tmp.write("xdg/archbuild/keys/" + key + ".json",
              json{{"key", key}, {"wheel", {{"sha256", sha}, {"filename", "torch-2.15.0+cu130.sm90-cp312-cp312-linux_x86_64.whl"}, {"size", 3}}}}.dump());
  auto no_wheel = parse(h.run({"plan", "--sm", "90", "--json"}));
  CHECK(no_wheel["built"] == false);  // the manifest names a wheel the cache does not hold
  CHECK(no_wheel["manifest_exists"] == true);
  h.tmp.write("xdg/archbuild/wheels/" + sha + ".whl", "zip");
  auto built = parse(h.run({"plan", "--sm", "90", "--json"}));
  CHECK(built["built"] == true);
  CHECK(built["wheel"]["sha256"] == sha);

  auto human = h.run({"plan", "--sm", "90"});
  REQUIRE(human.status == 0);
  CHECK(contains(human.out, "build key  " + key));
  CHECK(contains(human.out, "built      yes"));
  CHECK(contains(human.out, "TORCH_CUDA_ARCH_LIST=9.0"));
  CHECK(contains(human.out, "-m build --wheel --no-isolation"));
  CHECK(contains(human.out, "(not in key: parallelism does not change the output)"));
}

TEST_CASE("archbuild plan refused: one JSON document, exit 2") {
  FakeHost h;
  h.cuda130();
  auto r = h.run({"plan", "--sm", "120", "--torch", "2.5", "--json"});
  CHECK(r.status == 2);
  auto j = parse(r);  // the whole of stdout is one document
  CHECK(j["exit"] == 2);
  CHECK(contains(j["error"].get<std::string>(), "rule toolkit-arch"));
  CHECK(j["resolution"]["status"] == "refused");
}

TEST_CASE("archbuild plan on the example project: source.path names its folder, --source-url gives the repository") {
  FakeHost h;
  h.cuda130();
  std::string recipe = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";
  // The recipe's source.path: the example folder, as it is.
  auto local = h.run({"plan", "--sm", "90", "--recipe", recipe, "--json"});
  REQUIRE(local.status == 0);
  auto lj = parse(local);
  CHECK(lj["source"]["local"]["dir"] == std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch");
  CHECK(lj["key_inputs"]["source"]["local_content"].get<std::string>().size() == 64);
  CHECK(lj["version"].get<std::string>().rfind("0.1.0+src", 0) == 0);
  // Without source.path and source.url: the way out names both options.
  test::TempDir tmp;
  std::string text = test::read_file(recipe);
  text.erase(text.find("path = \".\"\n"), std::string("path = \".\"\n").size());
  auto no_url = h.run({"plan", "--sm", "90", "--recipe", tmp.write("recipe.toml", text).string()});
  CHECK(no_url.status == 2);
  CHECK(contains(no_url.err, "--source-url"));

  // A file:// URL names a repository on this machine, so it must be there (plan reads nothing of it).
  fs::create_directories(h.tmp.path() / "minitorch.git");
  const std::string url = "file://" + (h.tmp.path() / "minitorch.git").string();
  auto r = h.run({"plan", "--sm", "90", "--recipe", recipe, "--source-url", url, "--json"});
  REQUIRE(r.status == 0);
  auto j = parse(r);
  CHECK(j["source"]["url"] == url);
  CHECK(j["source"]["tag"] == "v0.1.0");
  CHECK(j["version"] == "0.1.0+cu130.sm90");
  REQUIRE(j["steps"].size() == 3);
  CHECK(j["steps"][0]["argv"] == json({"/fake/python/bin/python3.12", "setup.py", "build", "--cmake-only"}));
  CHECK(j["steps"][1]["argv"] == json({(h.tmp.path() / "bin/cmake").string(), "--build", "build"}));
  CHECK(j["steps"][2]["argv"] == json({"/fake/python/bin/python3.12", "setup.py", "bdist_wheel"}));
  CHECK(j["wheel_dir"] == "dist");
}

TEST_CASE("archbuild plan --sm 90 on this machine's real toolkit and compiler") {
  if (auto u = archbuild::test::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) {
    WARN("##archbuild-skip## " << u);
    return;
  }
  // Without a recipe: the newest torch (2.15: scikit-build-core), whose backend this machine's Python may lack
  // (not a Debian 12 package): then exit 3 naming it, the choice standing.
  auto newest = test::archbuild({"resolve", "--sm", "90", "--python", "/usr/bin/python3", "--json"});
  INFO(newest.err);
  CHECK((newest.status == 0 || (newest.status == 3 && contains(newest.err, "scikit_build_core"))));
  CHECK(parse(newest)["recipe"]["name"] == ::newest.recipe);
  // Debian's interpreter (setuptools, wheel, build: scripts/install-deps), not a pyenv one; torch
  // 2.13, the newest of the `python -m build` + setuptools era.
  auto r = test::archbuild({"plan", "--sm", "90", "--torch", "2.13", "--python", "/usr/bin/python3", "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = parse(r);
  CHECK(fs::exists(j["resolution"]["toolkit"]["nvcc"].get<std::string>()));
  CHECK(fs::exists(j["resolution"]["compiler"]["path"].get<std::string>()));
  CHECK(j["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0");
  WARN("resolved: " << j["resolution"]["recipe"]["name"].get<std::string>() << " + CUDA "
                    << j["resolution"]["toolkit"]["version"].get<std::string>() << " + "
                    << j["resolution"]["compiler"]["path"].get<std::string>());
}

TEST_CASE("archbuild resolve --platform: Arm platforms, their GPUs, facts and host", "[arm]") {
  FakeHost h;
  h.cuda130();
  // A GPU the platform cannot have: exit 2 naming the platforms that have it.
  auto nano_on_sbsa = h.run({"resolve", "--sm", "53", "--platform", "sbsa"});
  CHECK(nano_on_sbsa.status == 2);
  CHECK(contains(nano_on_sbsa.err, "CC 5.3 is a GPU of platform jetson only"));
  auto orin_on_x86 = h.run({"resolve", "--sm", "87", "--platform", "x86_64"});
  CHECK(orin_on_x86.status == 2);
  CHECK(contains(orin_on_x86.err, "CC 8.7 is a GPU of platforms jetson, sbsa only"));
  auto volta_on_sbsa = h.run({"resolve", "--sm", "70", "--platform", "sbsa"});
  CHECK(volta_on_sbsa.status == 2);
  CHECK(contains(volta_on_sbsa.err, "no GPU older than CC 7.5"));
  auto unknown = h.run({"resolve", "--sm", "90", "--platform", "arm64"});
  CHECK(unknown.status == 2);
  CHECK(contains(unknown.err, "valid: "));

  // sbsa: the whole resolution, the page size applied, the official aarch64 settings named. The
  // host rule holds on an aarch64 machine (scripts/test-arm64) and fails on any other (exit 3:
  // build it on an aarch64 host); there a foreign platform is x86_64.
  const std::string machine = test::machine();
  auto gb10 = h.run({"resolve", "--sm", "121", "--platform", "sbsa", "--json"});
  CHECK(gb10.status == (machine == "aarch64" ? 0 : 3));
  auto j = parse(gb10);
  CHECK(j["platform"]["name"] == "sbsa");
  CHECK(j["platform"]["cuda_target"] == "sbsa-linux");
  CHECK(contains(j["notes"].dump(), "BLAS=NVPL"));
  CHECK(has_rule(j, "platform-host", machine == "aarch64"));
  auto foreign = machine == "aarch64" ? h.run({"resolve", "--sm", "90", "--platform", "x86_64", "--json"}) : gb10;
  CHECK(foreign.status == 3);
  auto fj = parse(foreign);
  CHECK(contains(fj["message"].get<std::string>(), machine == "aarch64" ? "a x86_64 wheel builds on an x86_64 host"
                                                                         : "a sbsa wheel builds on an aarch64 host"));
  CHECK(has_rule(fj, "platform-host", false));

  // An Orin on JetPack 5/6 (platform jetson): the wheel is host-bound (JetPack's CUDA), the same page size.
  auto orin = h.run({"plan", "--sm", "87", "--platform", "jetson", "--json"});
  INFO(orin.err);
  auto p = parse(orin);
  CHECK(contains(p.dump(), "max-page-size=0x10000"));
  CHECK(contains(p.dump(), "\"cuda_libraries\":\"host\""));
  // An Orin on JetPack 7.2 (platform sbsa): the CUDA libraries are pip's, CUDA 13 allowed.
  auto orin7 = h.run({"plan", "--sm", "87", "--platform", "sbsa", "--json"});
  INFO(orin7.err);
  auto p7 = parse(orin7);
  CHECK(contains(p7.dump(), "max-page-size=0x10000"));
  CHECK(contains(p7.dump(), "\"cuda_libraries\":\"pip\""));
  auto orin7r = h.run({"resolve", "--sm", "87", "--platform", "sbsa", "--json"});
  CHECK(orin7r.status == (machine == "aarch64" ? 0 : 3));
  auto r7 = parse(orin7r);
  CHECK(r7["platform"]["name"] == "sbsa");
  REQUIRE(r7.contains("cuda"));
  CHECK(r7["cuda"]["release"].get<std::string>().starts_with("13."));  // the installed 13.0, no platform-cuda limit
  CHECK_FALSE(has_rule(r7, "platform-cuda", false));

  // Without --platform: this machine's platform (x86_64, or sbsa on an aarch64 server), with a
  // note for a target this platform cannot have.
  auto plain = h.run({"resolve", "--sm", "87", "--json"});
  CHECK(plain.status == 0);
  auto q = parse(plain);
  CHECK(q["platform"]["name"] == (machine == "aarch64" ? (fs::exists("/etc/nv_tegra_release") ? "jetson" : "sbsa") : machine));
  if (machine != "aarch64") CHECK(contains(q["notes"].dump(), "CC 8.7 is a GPU of platforms jetson, sbsa only"));
}

TEST_CASE("archbuild resolve --platform jetson: CUDA 13 has no L4T toolkit, so CUDA 12 builds a Jetson", "[arm]") {
  FakeHost h;
  h.cuda130();
  // Only the rule keeps CUDA 13.0 (installed, and the newest torch's) from a Jetson build.
  auto orin = h.run({"resolve", "--sm", "87", "--platform", "jetson", "--json"});
  INFO(orin.err);
  auto j = parse(orin);
  REQUIRE(j.contains("cuda"));
  CHECK(j["cuda"]["release"].get<std::string>().starts_with("12."));
  CHECK(has_rule(j, "platform-cuda", true));
  CHECK(has_rule(j, "platform-cuda", false));  // the CUDA 13 pairs it stopped
  auto cuda13 = h.run({"resolve", "--sm", "87", "--platform", "jetson", "--cuda", "13.0"});
  CHECK(cuda13.status == 2);
  CHECK(contains(cuda13.err, "rule platform-cuda: platform jetson builds with CUDA older than 13.0"));
  CHECK(contains(cuda13.err, "Way out: CUDA <= 12."));
  CHECK_FALSE(contains(cuda13.err, "--cuda 13."));
  // 10.1 is Thor before CUDA 13 renamed it: an embedded (jetson) GPU, never x86_64's or sbsa's.
  auto thor_x86 = h.run({"resolve", "--sm", "101", "--platform", "x86_64"});
  CHECK(thor_x86.status == 2);
  CHECK(contains(thor_x86.err, "CC 10.1 is a GPU of platform jetson only"));
  // sbsa's -compress-mode=size is what the official CUDA 13 builds set, not the CUDA 12 ones.
  auto with = [&](const char* cuda) {
    auto r = h.run({"resolve", "--sm", "90", "--platform", "sbsa", "--recipe", "torch-2.12", "--cuda", cuda, "--json"});
    INFO(r.err);
    auto d = parse(r);
    return d["platform"]["official_env"]["TORCH_NVCC_FLAGS"].get<std::string>() + " | " + d["notes"].dump();
  };
  auto cuda129 = with("12.9");
  CHECK(contains(cuda129, "-Xfatbin -compress-all --threads 2"));
  CHECK_FALSE(contains(cuda129, "compress-mode"));
  // What the platform applies is said too, not only in --json's platform.env.
  CHECK(contains(cuda129, "platform sbsa adds CMAKE_SHARED_LINKER_FLAGS=-Wl,-z,max-page-size=0x10000 to the build environment"));
  CHECK(contains(with("13.0"), "-Xfatbin -compress-all --threads 2 -compress-mode=size"));
}

TEST_CASE("a new torch line is its recipe: torch-2.99 alone in a data root is what resolve, plan, install-command "
          "and matrix choose") {
  // recipes/torch-2.99.toml extending the newest, and nothing else: no row in
  // data/torch-releases.toml (a line without official wheels yet), no code.
  FakeHost h;
  h.cuda130();
  test::TempDir root;
  test::copy_data_root(root.path());
  root.write("recipes/torch-2.99.toml", "extends = \"" + newest.recipe +
                                            "\"\nversion = \"2.99.0\"\n[source]\ntag = \"v2.99.0\"\n");
  CHECK_FALSE(contains(test::read_file(root / "data/torch-releases.toml"), "\"2.99\""));
  CHECK(test::newest_torch(root.path()).recipe == "torch-2.99");
  auto o = h.opts();
  o.env["ARCHBUILD_DATA_DIR"] = root.path().string();
  auto run = [&](std::vector<std::string> args) {
    auto r = test::archbuild(args, o);
    INFO(r.out.substr(0, 2000) << r.err);
    return r;
  };

  auto listed = run({"recipes", "list", "--json"});
  REQUIRE(listed.status == 0);
  CHECK(contains(listed.out, "\"torch-2.99\""));

  auto r = run({"resolve", "--sm", "90", "--json"});
  REQUIRE(r.status == 0);
  auto rj = parse(r);
  CHECK(rj["recipe"]["name"] == "torch-2.99");
  CHECK(rj["cuda"]["release"] == "13.0");

  auto p = run({"plan", "--sm", "90", "--json"});
  REQUIRE(p.status == 0);
  auto pj = parse(p);
  CHECK(pj["resolution"]["recipe"]["name"] == "torch-2.99");
  CHECK(pj["env"]["PYTORCH_BUILD_VERSION"] == "2.99.0+cu130.sm90");

  // install-command: the official wheels are the newest recorded line's; 2.99 has none, so its
  // build is advised beside them.
  auto i = run({"install-command", "--sm", "90", "--driver", "580.65.06", "--json"});
  REQUIRE(i.status == 0);
  auto ij = parse(i);
  REQUIRE_FALSE(ij["options"].empty());
  CHECK(ij["options"][0]["torch"] == test::newest_official(root.path()).latest);
  CHECK(contains(ij["ruled_out"].dump(), "torch 2.99: no official wheels recorded"));
  REQUIRE(ij["build"].is_object());
  CHECK(ij["build"]["recipe"] == "torch-2.99");
  CHECK(contains(ij["build"]["command"].get<std::string>(), "--recipe torch-2.99"));
  CHECK(contains(ij["build"]["why"].get<std::string>(), "no official torch 2.99 wheel runs here"));

  auto m = run({"--cache-dir", (h.tmp / "cache").string(), "matrix", "--sm", "90", "--json"});
  REQUIRE(m.status == 0);
  auto mj = parse(m);
  bool jobs_299 = false;
  for (const auto& job : mj["include"])
    if (job["recipe"] == "torch-2.99") {
      jobs_299 = true;
      CHECK(job["torch"] == "2.99.0");
    }
  CHECK(jobs_299);
}
