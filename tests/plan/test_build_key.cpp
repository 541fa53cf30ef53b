// plan/build_key: the build key of a varied set of plans, pinned. Every key below was recorded at
// 9a1235e, from the code that assembled the key inputs inline in make_plan, before they became
// the typed plan::KeyInputs: a user's cache holds keys made by that code, and a build whose inputs
// did not change must find its key again. Each input that is keyed only where it differs from its
// default (config settings, [wheel], the platform, libraries, fetches, the build venv and its
// wheels, a fetch's submodules) is exercised present and absent.
//
// A key here that changes is every user's rebuild: change it only on purpose, with the key format.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "arch/parse.hpp"
#include "core/sha256.hpp"
#include "plan/plan.hpp"
#include "plan/resolve.hpp"
#include "support/shipped.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::plan;

namespace {

Version V(const char* s) { return *Version::parse(s); }

// One recipe of its own (no shipped recipe: their edits move their keys, not the key's code), with
// lines added to its [source] and [build] tables and after them.
std::string recipe_text(const std::string& source, const std::string& build, const std::string& tail) {
  return "package = \"keyed\"\nmodule = \"keyed\"\nversion = \"1.0.0\"\ncuda = [\"13.0\"]\npython = [\"3.11\"]\n"
         "[source]\nurl = \"https://example.com/keyed.git\"\ntag = \"v1.0.0\"\n" + source +
         "[build]\ntools = [\"cmake\", \"ninja\"]\nversion_env = \"KEYED_BUILD_VERSION\"\n"
         "build_number_env = \"KEYED_BUILD_NUMBER\"\n" + build +
         "[build.env]\nKEYED_OPT = \"1\"\n[arch]\naccepts = [\"two-digit-major\", \"a\"]\n" + tail;
}

toolchain::Host host() {
  toolchain::Host h;
  toolchain::Toolkit t;
  t.root = "/opt/cuda-13.0";
  t.nvcc = "/opt/cuda-13.0/bin/nvcc";
  t.version = V("13.0");
  t.nvcc_version = V("13.0.88");
  t.found_by = "test";
  h.toolkits = {t};
  toolchain::Compiler c;
  c.kind = toolchain::CompilerKind::gcc;
  c.version = V("12.2.0");
  c.path = "/usr/bin/g++-12";
  c.found_by = "test";
  h.compilers = {c};
  h.pythons = {toolchain::Python{"/usr/bin/python3", V("3.11.2"), "test"}};
  h.tools = {{"cmake", "/usr/bin/cmake"}, {"ninja", "/usr/bin/ninja"}, {"meson", "/usr/bin/meson"}};
  return h;
}

// A library of the test's own (not data/build-libraries.toml's, whose edits are data).
recipe::LibrarySpec keyedlib() {
  recipe::LibrarySpec s;
  s.name = "keyedlib";
  s.title = "KeyedLib";
  s.headers = {"keyed.h"};
  s.libs = {"libkeyed.so"};
  s.switch_env = "KEYED_USE_LIB";
  s.on = {{"KEYED_USE_LIB", "1"}};
  s.off = {{"KEYED_USE_LIB", "0"}};
  s.summary = "KEYED_USE_LIB";
  s.advice = "install keyedlib";
  return s;
}

struct Case {
  std::string source, tail;             // recipe_text's additions
  std::string build = "driver = \"setup-py\"\n";
  std::string machine = "x86_64";
  PlanOptions options;
  std::optional<std::string> source_dir;  // --source DIR
};

const std::vector<recipe::LibrarySpec>& keyed_specs() {
  static const std::vector<recipe::LibrarySpec> specs{keyedlib()};
  return specs;
}

PlanOptions resources() {
  PlanOptions o;
  o.resources = HostResources{8, 32ull << 30};
  return o;
}

Plan plan_of(const test::TempDir& tmp, const std::string& name, const Case& c) {
  auto file = tmp.write(name + ".toml", recipe_text(c.source, c.build, c.tail));
  Inputs in;
  in.recipes = test::select_shipped(file.string()).take();
  in.toolchains = toolchain::load_shipped().take();
  test::shipped_data(in);
  in.host = host();
  in.machine = toolchain::Machine{};
  in.machine->arch = c.machine;
  Request req;
  req.targets = arch::parse_arch_list("90 120", arch::ArchData::shipped(), {arch::Grammar::build, {}}).take();
  req.recipe_label = name;
  if (c.source_dir) req.source_dir = *c.source_dir;
  auto r = resolve(req, in);
  INFO(name << ": " << r.message);
  REQUIRE(r.status == Exit::ok);
  auto p = make_plan(r, test::with_shipped_specs(c.options));
  INFO(name << ": " << (p ? "" : p.error().message));
  REQUIRE(p.ok());
  return *p;
}

std::map<std::string, Case> cases() {
  std::map<std::string, Case> out;
  auto add = [&](const std::string& name, std::string tail, PlanOptions o = resources()) {
    Case c;
    c.tail = std::move(tail);
    c.options = std::move(o);
    out[name] = c;
    return &out[name];
  };
  add("plain", "");
  add("commit-no-submodules", "")->source = "commit = \"" + std::string(40, 'b') + "\"\nsubmodules = false\n";
  // Drivers: setup-py has no config settings (absent); python-build none either; scikit-build-core
  // and meson-python pass some (present).
  add("driver-python-build", "")->build = "driver = \"python-build\"\n";
  add("driver-scikit-build-core", "")->build = "driver = \"scikit-build-core\"\n";
  add("driver-meson-python", "")->build = "driver = \"meson-python\"\n";
  add("driver-cmake", "")->build = "driver = \"cmake\"\n";
  // [wheel]: the default layout written out is the default (absent), host and triton are keyed.
  add("wheel-official", "[wheel]\nlayout = \"official\"\n");
  add("wheel-host", "[wheel]\nlayout = \"host\"\n");
  add("wheel-triton", "[wheel]\ntriton = \"3.5.1\"\n");
  // The platform: keyed off x86_64 only.
  add("platform-sbsa", "")->machine = "aarch64";
  // Libraries: none (absent), found, absent on the host, --without.
  {
    PlanOptions o = resources();
    o.library_specs = &keyed_specs();
    o.library_facts.probed = true;
    add("libraries-absent", "[libraries]\noptional = [\"keyedlib\"]\n", o);
    LibraryCandidate f;
    f.library = "keyedlib";
    f.origin = LibraryOrigin::system;
    f.via = "system";
    f.root = "/usr";
    f.include_dir = "/usr/include";
    f.lib_dir = "/usr/lib";
    f.lib_file = "/usr/lib/libkeyed.so";
    f.version = "2.1.0";
    o.library_facts.found = {f};
    add("libraries-found", "[libraries]\noptional = [\"keyedlib\"]\n", o);
    o.without = {"keyedlib"};
    add("libraries-without", "[libraries]\noptional = [\"keyedlib\"]\n", o);
  }
  // Fetches: none (absent), unresolved, resolved with submodules, switched off by the environment.
  const std::string fetch = "[[fetch]]\nname = \"dep\"\npath = \"third_party/dep\"\nurl = \"https://example.com/dep.git\"\n"
                            "pin_file = [\"pins/dep-cu{cuda_major}.txt\", \"pins/dep.txt\"]\n"
                            "unless_env = {KEYED_USE_DEP = [\"0\", \"OFF\"]}\n";
  add("fetch-unresolved", fetch);
  {
    PlanOptions o = resources();
    o.fetches["dep"] = ResolvedFetch{"pins/dep.txt", "v1.2.3", std::string(40, 'd')};
    add("fetch-resolved-submodules", fetch + "submodules = true\n", o);
    o.env["KEYED_USE_DEP"] = "0";
    add("fetch-disabled", fetch, o);
  }
  // The build venv: none (absent), with packages and cmake, without a cmake version, with a wheel.
  {
    PlanOptions o = resources();
    BuildVenv v;
    v.dir = "/cache/venvs/abc";
    v.python = "/cache/venvs/abc/bin/python";
    v.interpreter_version = "3.11.2";
    v.packages = {{"numpy", "2.1.0"}, {"cmake", "3.31.6"}, {"requests", "2.32.0"}, {"setuptools", "75.0.0"}};
    v.cmake = "/cache/venvs/abc/bin/cmake";
    v.cmake_version = "3.31.6";
    o.venv = v;
    add("venv", "", o);
    v.cmake.clear();
    v.cmake_version.reset();
    v.system_site_packages = true;
    o.venv = v;
    add("venv-system-no-cmake", "", o);
    v.wheels = {{"torch", "2.14.0+cu130.sm90", std::string(64, '1'), "/out/torch.whl"}};
    o.venv = v;
    add("venv-wheel", "", o);
  }
  // The source: a commit by --ref, a local tree.
  {
    PlanOptions o = resources();
    o.source.kind = SourceChoice::Kind::ref;
    o.source.ref = "main";
    o.source.commit = std::string(40, 'c');
    o.source.tree_version = "1.1.0a0\n";
    add("source-ref", "", o);
    PlanOptions l = resources();
    l.source.kind = SourceChoice::Kind::local;
    l.source.dir = "/work/keyed";
    l.source.content_hash = std::string(64, 'e');
    l.source.files = 3;
    add("source-local", "", l)->source_dir = "/work/keyed";
  }
  // --env: keyed in env.
  {
    PlanOptions o = resources();
    o.env["KEYED_EXTRA"] = "yes";
    add("env-option", "", o);
  }
  // Everything at once.
  {
    PlanOptions o = resources();
    o.library_specs = &keyed_specs();
    o.library_facts.probed = true;
    o.fetches["dep"] = ResolvedFetch{"pins/dep-cu13.txt", "v1.2.4", std::string(40, 'f')};
    BuildVenv v;
    v.dir = "/cache/venvs/x";
    v.python = "/cache/venvs/x/bin/python";
    v.interpreter_version = "3.11.2";
    v.packages = {{"scikit-build-core", "0.11.0"}, {"ninja", "1.11.1"}};
    v.wheels = {{"torch", "2.15.0+cu130.sm90", std::string(64, '2'), "/out/torch.whl"}};
    o.venv = v;
    Case* c = add("everything", "[wheel]\nlayout = \"host\"\ntriton = \"3.6.0\"\n[libraries]\noptional = [\"keyedlib\"]\n" + fetch, o);
    c->machine = "aarch64";
    c->build = "driver = \"scikit-build-core\"\n";
    c->source = "commit = \"" + std::string(40, 'a') + "\"\n";
  }
  return out;
}

}  // namespace

TEST_CASE("build key: the keys recorded at 9a1235e are the keys of the same inputs now", "[plan][key]") {
  // name -> key, recorded at 9a1235e (the code before plan::KeyInputs).
  const std::map<std::string, std::string> recorded = {
      {"commit-no-submodules", "b8f34f64bd74c0db7704c10150295733a20465d21962ba33c7d69c5bffc97e98"},
      {"driver-cmake", "3727050368af7d2f274c6194267c0f1253240f5242a4cd7e87eb6f9a0e78531d"},
      {"driver-meson-python", "d48d522e0cf9ba88a53065fb14cd8ddffc9f6af9e57a36c411be7d00a9d395ca"},
      {"driver-python-build", "180690a28fb25f1964cebd9ba2a39a3c966159c391fa6981069f25ba0423f263"},
      {"driver-scikit-build-core", "7793bd9cb60f9e88eb0a5cc0d9bf8466ca71cf2425a64ee0d131e30c399225a5"},
      {"env-option", "b7ab42d06b80679dc6177383e9abe08197990335e34f61185fe2212604cf515e"},
      {"everything", "6e47d7e71f224e3d611dab8248046c4840744df168b467e7d0a71ee67902f727"},
      {"fetch-disabled", "752bc042a6677677f30e13be4f3085824a113e423ff3d7f198226ba0c1fb526b"},
      {"fetch-resolved-submodules", "4f89b0f6928957c2755d1255f67b405cbff9afe1f41ea9ca83d79a459cfd54d3"},
      {"fetch-unresolved", "f33a60193801ff4ecc9fc8979d8208c129dc58ed2941a8b42bfdefb5c5d04c3c"},
      {"libraries-absent", "ece3b9ded1de5dd91fe59709577bbb0b26ac924dc2b8b2c058cdf9c7acdae550"},
      {"libraries-found", "d4f1b47fa9f2f33bb882d7041aa340016e2904d9a85bdfcdd9cb10ae27b3a3be"},
      {"libraries-without", "893bbc00c09bd81b0b0d7c404910485f5122df1fa8334db7cb18e147b51976ad"},
      {"plain", "ffd8cc333a5f0525db7b996a11fbb2451671b6a6a4cc768b85c7975ec6a73afe"},
      {"platform-sbsa", "9ebb0074b4c90b091ed525202b134650b8bcb754c07532d1ac9442a0ceef7a41"},
      {"source-local", "c86cb8eb93fc57e0a8ce00baa61ad4a1b0ca4fc30ac09e31205fb095e52f3be9"},
      {"source-ref", "4f82a1f64007dbe13ed4b2d0d1dc2cd823f6b754ac1afc675853754bea3124b9"},
      {"venv", "1b93d54087d0eb30718104ab76eccfd61a360b081ec82bdd9757186258418582"},
      {"venv-system-no-cmake", "78cd6d89410cdc31d5ecd9c25e6a857eba5d61cea3a40c40eb2c2bd46ff835d8"},
      {"venv-wheel", "9739bd74330aee3097b8ca43a334490bac904844857c0dc2b919e77d6dfda267"},
      {"wheel-host", "da219043268cf8009d722047c776cd3e7a652a05a9e9d3fc76516b9d949e4ee5"},
      {"wheel-official", "ffd8cc333a5f0525db7b996a11fbb2451671b6a6a4cc768b85c7975ec6a73afe"},
      {"wheel-triton", "5a0b25ce3f2b45dd64eece7fafdebde52c02643c25e415e363f742384e6f3f89"},
  };
  test::TempDir tmp;
  auto all = cases();
  std::map<std::string, std::string> got;
  std::map<std::string, nlohmann::json> inputs;
  for (const auto& [name, c] : all) {
    Plan p = plan_of(tmp, name, c);
    got[name] = p->key;
    inputs[name] = p->key_inputs;
  }
  for (const auto& [name, key] : got) UNSCOPED_INFO("    {\"" << name << "\", \"" << key << "\"},");
  // Each input keyed only where not default is here present and absent.
  auto has = [&](const std::string& name, const char* pointer) {
    return inputs.at(name).contains(nlohmann::json::json_pointer(pointer));
  };
  CHECK_FALSE(has("plain", "/config_settings"));
  CHECK(has("driver-scikit-build-core", "/config_settings"));
  CHECK(has("driver-meson-python", "/config_settings"));
  CHECK_FALSE(has("plain", "/wheel"));
  CHECK_FALSE(has("wheel-official", "/wheel"));
  CHECK(has("wheel-host", "/wheel"));
  CHECK(has("wheel-triton", "/wheel"));
  CHECK_FALSE(has("plain", "/platform"));
  CHECK(has("platform-sbsa", "/platform"));
  CHECK_FALSE(has("plain", "/libraries"));
  CHECK(has("libraries-found", "/libraries"));
  CHECK(has("libraries-absent", "/libraries"));
  CHECK_FALSE(has("plain", "/fetches"));
  CHECK(has("fetch-unresolved", "/fetches"));
  CHECK_FALSE(has("fetch-unresolved", "/fetches/0/submodules"));
  CHECK(has("fetch-resolved-submodules", "/fetches/0/submodules"));
  CHECK_FALSE(has("fetch-disabled", "/fetches"));
  CHECK_FALSE(has("plain", "/build_venv"));
  CHECK(has("venv", "/build_venv"));
  CHECK_FALSE(has("venv", "/build_venv/wheels"));
  CHECK(has("venv-wheel", "/build_venv/wheels"));
  CHECK(has("source-local", "/source/local_content"));
  CHECK(has("everything", "/platform"));
  for (const auto& [name, key] : got) {
    INFO(name);
    auto it = recorded.find(name);
    REQUIRE(it != recorded.end());
    CHECK(key == it->second);
  }
}

TEST_CASE("build key: each applied patch's sha256 is keyed, in order, and its `when` decides whether it applies", "[plan][key][patch]") {
  test::TempDir tmp;
  const std::string diff = "--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-a\n+b\n";
  tmp.write("fix.patch", diff);
  const std::string sha = sha256_hex(diff);
  auto with_patch = [&](const std::string& when) {
    Case c;
    c.options = resources();
    c.tail = "\n[[patch]]\nfile = \"fix.patch\"\nsha256 = \"" + sha + "\"\nfrom = \"upstream#1\"\n" + when;
    return c;
  };
  Plan plain = plan_of(tmp, "plain", cases().at("plain"));
  Plan patched = plan_of(tmp, "patched", with_patch(""));
  CHECK(patched->key != plain->key);
  CHECK(patched->key_inputs["patches"] == nlohmann::json::array({{{"sha256", sha}, {"strip", 1}}}));
  REQUIRE(patched->patches.size() == 1);
  CHECK(patched->patches[0].why == "always");
  // A condition that does not hold: no patch, the key of the recipe without it.
  Plan other_cuda = plan_of(tmp, "other", with_patch("when = { cuda = \"<12.0\" }\n"));
  CHECK(other_cuda->patches.empty());
  CHECK_FALSE(other_cuda->key_inputs.contains("patches"));
  // One that holds says why; a target of the list (12.0 of "90 120") matches.
  Plan by_arch = plan_of(tmp, "arch", with_patch("when = { arch = [\"12.0\"], platform = [\"x86_64\"] }\n"));
  REQUIRE(by_arch->patches.size() == 1);
  CHECK(by_arch->patches[0].why == "platform x86_64; target 12.0");
  // --patch comes after the recipe's: another order is another key.
  Case extra = with_patch("");
  tmp.write("mine.patch", diff + "\n");
  extra.options.patches.push_back(recipe::patch_from_file(tmp / "mine.patch").take());
  Plan both = plan_of(tmp, "both", extra);
  REQUIRE(both->patches.size() == 2);
  CHECK(both->patches[1].patch.origin == "--patch");
  CHECK(both->key != patched->key);
  CHECK(both.to_json()["patches"][1]["sha256"] == sha256_hex(diff + "\n"));
}
