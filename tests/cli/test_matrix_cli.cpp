// `archbuild matrix`: targets × torch recipes × CUDA expanded into the jobs resolution accepts,
// refusals with their rule, and the one-line GitHub Actions form. The rules checked here
// (which CUDA compiles which arch, which recipe spells 12.0) are data, not this host's tools:
// a missing toolkit does not refuse a CI job.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using nlohmann::json;

namespace {

double num(const std::string& v) { return std::stod(v); }
// "2.10.0" >= "2.7"
bool at_least(const std::string& v, int major, int minor) {
  auto dot = v.find('.');
  int a = std::stoi(v.substr(0, dot)), b = std::stoi(v.substr(dot + 1));
  return a > major || (a == major && b >= minor);
}

}  // namespace

TEST_CASE("matrix --sm 120,61 gives only the jobs resolution accepts and lists refusals", "[matrix]") {
  test::TempDir cache;
  auto r = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "120,61", "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = json::parse(r.out);
  REQUIRE(j["include"].is_array());
  bool sm120_cu130 = false, sm61_any = false;
  for (const auto& job : j["include"]) {
    auto sm = job["sm"].get<std::string>(), cuda = job["cuda"].get<std::string>(),
         torch = job["torch"].get<std::string>();
    CHECK(job["recipe"].get<std::string>().rfind("torch-", 0) == 0);
    CHECK(job["arch_list"] == sm);
    if (sm == "12.0") {
      CHECK(at_least(torch, 2, 7));
      CHECK(at_least(cuda, 12, 8));
      if (cuda == "13.0") sm120_cu130 = true;
    } else {
      REQUIRE(sm == "6.1");
      CHECK(num(cuda) < 13.0);  // CUDA 13.0 dropped sm_61
      sm61_any = true;
    }
  }
  CHECK(sm120_cu130);
  CHECK(sm61_any);

  bool refused_61_13 = false, refused_120_old = false;
  for (const auto& x : j["refused"]) {
    CHECK(!x["rule"].get<std::string>().empty());
    CHECK(!x["message"].get<std::string>().empty());
    if (x["sm"] == "6.1" && x["cuda"] == "13.0") {
      refused_61_13 = true;
      CHECK(x["rule"] == "toolkit-arch");
    }
    if (x["sm"] == "12.0" && x["recipe"] == "torch-2.4") {
      refused_120_old = true;
      CHECK(x["rule"] == "toolkit-arch");
    }
  }
  CHECK(refused_61_13);
  CHECK(refused_120_old);
}

TEST_CASE("matrix --format github prints the strategy.matrix value on one line", "[matrix]") {
  test::TempDir cache;
  auto r = test::archbuild(
      {"--cache-dir", cache.path().string(), "matrix", "--sm", "90", "--recipe", "torch-2.9", "--format", "github"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  REQUIRE(!r.out.empty());
  CHECK(r.out.back() == '\n');
  CHECK(r.out.find('\n') == r.out.size() - 1);  // exactly one line
  auto j = json::parse(r.out);
  REQUIRE(j.size() == 1);
  REQUIRE(j["include"].size() >= 1);
  for (const auto& job : j["include"]) {
    CHECK(job["sm"] == "9.0");
    CHECK(job["recipe"] == "torch-2.9");
    CHECK(job["torch"] == "2.9.1");
    CHECK(job.contains("cuda"));
    CHECK(job["arch_list"] == "9.0");
  }
}

TEST_CASE("matrix: bad input and a matrix with no job", "[matrix]") {
  test::TempDir cache;
  auto bad = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "banana"});
  CHECK(bad.status == 2);
  auto fmt = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "90", "--format", "yaml"});
  CHECK(fmt.status == 2);
  for (const char* cuda : {"thirteen", "13", "13.0.1"}) {
    auto c = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "90", "--cuda", cuda});
    CHECK(c.status == 2);
    CHECK(c.err.find("expected a CUDA release X.Y") != std::string::npos);
  }
  // One CUDA release's jobs only.
  auto one = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "90", "--recipe", "torch-2.9",
                              "--cuda", "12.8", "--format", "json"});
  CHECK(one.status == 0);
  for (const auto& j : json::parse(one.out)["include"]) CHECK(j["cuda"] == "12.8");
  // sm_120 with torch 2.4 (no CUDA it supports compiles sm_120): nothing to build, exit 1.
  auto none = test::archbuild(
      {"--cache-dir", cache.path().string(), "matrix", "--sm", "120", "--recipe", "torch-2.4", "--format", "github"});
  CHECK(none.status == 1);
  CHECK(json::parse(none.out)["include"].empty());
}

TEST_CASE("matrix --platform x86_64,sbsa: aarch64 jobs on GitHub's arm64 runner beside the x86_64 ones", "[matrix][arm]") {
  test::TempDir cache;
  auto r = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "90,87", "--recipe", "torch-2.14",
                            "--platform", "x86_64,sbsa", "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = json::parse(r.out);
  bool x86_90 = false, sbsa_90 = false, sbsa_87 = false;
  for (const auto& job : j["include"]) {
    if (job["sm"] == "9.0" && job["platform"] == "x86_64" && job["runs_on"] == "ubuntu-24.04") x86_90 = true;
    if (job["sm"] == "9.0" && job["platform"] == "sbsa" && job["runs_on"] == "ubuntu-24.04-arm") sbsa_90 = true;
    // An Orin under JetPack 7.2 is an sbsa GPU; no x86_64 has one.
    if (job["sm"] == "8.7" && job["platform"] == "sbsa" && job["runs_on"] == "ubuntu-24.04-arm") sbsa_87 = true;
    CHECK_FALSE((job["sm"] == "8.7" && job["platform"] == "x86_64"));
  }
  CHECK(x86_90);
  CHECK(sbsa_90);
  CHECK(sbsa_87);
  bool refused_87 = false;
  for (const auto& job : j["refused"])
    if (job["sm"] == "8.7" && job["platform"] == "x86_64" && job["rule"] == "platform") refused_87 = true;
  CHECK(refused_87);
  // An Orin under JetPack 6 (platform jetson): no hosted runner, its jobs refused as such.
  auto jetson = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "87", "--recipe", "torch-2.14",
                                 "--platform", "jetson", "--json"});
  INFO(jetson.out << jetson.err);
  auto jj = json::parse(jetson.out);
  CHECK(jj["include"].empty());
  bool runner = false;
  for (const auto& job : jj["refused"])
    if (job["sm"] == "8.7" && job["rule"] == "platform-runner") runner = true;
  CHECK(runner);
  // Without --platform: this machine's. On x86_64 the objects keep their old keys; on an aarch64
  // server (scripts/test-arm64) the job is sbsa's, on the arm64 runner.
  auto plain = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "90", "--recipe", "torch-2.14", "--json"});
  REQUIRE(plain.status == 0);
  const auto job = json::parse(plain.out)["include"][0];
  if (test::machine() == "aarch64" && !std::filesystem::exists("/etc/nv_tegra_release"))
    CHECK(job["runs_on"] == "ubuntu-24.04-arm");
  else
    CHECK_FALSE(job.contains("runs_on"));
  auto bad = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "90", "--platform", "arm"});
  CHECK(bad.status == 2);
  // A GPU only other platforms have, without --platform: never an x86 job. An Orin (8.7: jetson
  // under JetPack 5/6, sbsa under 7.2) goes where its newest JetPack puts it: sbsa, on the arm64
  // runner, as install-command advises for an Orin asked about from elsewhere.
  auto orin = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "90,87", "--recipe", "torch-2.14", "--json"});
  REQUIRE(orin.status == 0);
  auto oj = json::parse(orin.out);
  bool orin_job = false;
  for (const auto& job : oj["include"])
    if (job["sm"] == "8.7") {
      orin_job = true;
      CHECK(job["platform"] == "sbsa");
      CHECK(job["runs_on"] == "ubuntu-24.04-arm");
    }
  CHECK(orin_job);
  for (const auto& job : oj["refused"]) CHECK_FALSE((job["sm"] == "8.7" && job["platform"] == "x86_64"));
}

TEST_CASE("matrix --sm 12.1 without --platform: the jobs are sbsa's, where a GB10 sits", "[matrix][arm]") {
  test::TempDir cache;
  auto r = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "12.1", "--recipe", "torch-2.14", "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = json::parse(r.out);
  REQUIRE_FALSE(j["include"].empty());
  for (const auto& job : j["include"]) {
    CHECK(job["sm"] == "12.1");
    CHECK(job["platform"] == "sbsa");
    CHECK(job["runs_on"] == "ubuntu-24.04-arm");
  }
  // With --platform x86_64 it is still refused, by the platform rule.
  auto x86 = test::archbuild(
      {"--cache-dir", cache.path().string(), "matrix", "--sm", "12.1", "--recipe", "torch-2.14", "--platform", "x86_64", "--json"});
  CHECK(x86.status == 1);
}

TEST_CASE("matrix --recipe FILE: each job's recipe is one `wheel --recipe` reads back", "[matrix]") {
  test::TempDir cache;
  const std::string file = std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml";
  auto r = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "90", "--recipe", file, "--cuda",
                            "13.0", "--format", "github"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = json::parse(r.out);
  REQUIRE(j["include"].size() == 1);
  CHECK(j["include"][0]["recipe"] == file);
  // What the job's `wheel --recipe` resolves with: the file is a recipe, the name alone is not.
  auto back = test::archbuild({"--cache-dir", cache.path().string(), "resolve", "--sm", "90", "--recipe",
                               j["include"][0]["recipe"].get<std::string>(), "--cuda", "13.0", "--json"});
  CHECK(back.status != 2);
  auto by_name = test::archbuild({"--cache-dir", cache.path().string(), "resolve", "--sm", "90", "--recipe", "minitorch"});
  CHECK(by_name.status == 2);
  // A recipe name stays a name.
  auto named = test::archbuild({"--cache-dir", cache.path().string(), "matrix", "--sm", "90", "--recipe", "torch-2.9",
                                "--cuda", "13.0", "--format", "github"});
  REQUIRE(named.status == 0);
  for (const auto& job : json::parse(named.out)["include"]) CHECK(job["recipe"] == "torch-2.9");
}

TEST_CASE("matrix --store that cannot be read: the jobs stay, and it says so", "[matrix]") {
  test::TempDir dir;
  auto repos = test::run("/bin/bash", {std::string(ARCHBUILD_SOURCE_DIR) + "/tests/support/make-example-repos",
                                       (dir / "repos").string()});
  REQUIRE(repos.status == 0);
  test::RunOptions o;
  o.unset_env = {"ARCHBUILD_STORE", "ARCHBUILD_STORE_TRUST", "ARCHBUILD_STORE_REQUIRED"};
  o.env["DOCKER_CONFIG"] = (dir / "docker").string();
  std::vector<std::string> args = {"--cache-dir", (dir / "cache").string(), "matrix", "--sm", "90", "--recipe",
                                   std::string(ARCHBUILD_SOURCE_DIR) + "/examples/minitorch/recipe.toml", "--cuda", "13.0",
                                   "--source-url", "file://" + (dir / "repos" / "minitorch").string(), "--python",
                                   "/usr/bin/python3", "--store", "oci+http://127.0.0.1:1/builds/minitorch", "--json"};
  auto r = test::archbuild(args, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = json::parse(r.out);
  REQUIRE(j["include"].size() == 1);
  if (j["include"][0]["store"]["checked"] == true) {  // the key was computed here (the toolkit is installed)
    CHECK(j["include"][0]["store"]["reachable"] == false);
    CHECK(r.err.find("cannot be read") != std::string::npos);
  }
  args.push_back("--store-required");
  auto req = test::archbuild(args, o);
  if (j["include"][0]["store"]["checked"] == true) CHECK(req.status == 3);
}
