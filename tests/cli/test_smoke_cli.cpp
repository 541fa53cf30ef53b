// `archbuild smoke`: the bundled kernel compiled with nvcc for sm_80, sm_90 and sm_120 (SASS
// only), inspected, and — without a GPU — reported as "run skipped"; missing nvcc and
// --require-gpu give exit 3. The [gpu] test runs it on this host's GPU.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli/example_wheel.hpp"

using namespace archbuild;
using test::check_of;
using json = nlohmann::json;
namespace fs = std::filesystem;


TEST_CASE("smoke: compile + inspect for sm_80, sm_90 and sm_120, run skipped without a GPU", "[smoke][cli][nvcc]") {
  if (!fs::exists(test::kNvcc)) {
    WARN("##archbuild-skip## " << test::kNvcc.string() << " is absent");
    return;
  }
  test::TempDir dir;
  auto o = test::no_gpu(dir);
  auto r = test::archbuild({"smoke", "--sm", "80,90,120", "--json", "--keep", (dir / "out").string()}, o);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  auto doc = json::parse(r.out);
  CHECK(doc["valid"] == true);
  CHECK(check_of(doc, "smoke-compile")["status"] == "pass");
  CHECK(check_of(doc, "smoke-compile")["evidence"]["gencode"] ==
        json::array({"-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90",
                     "-gencode=arch=compute_120,code=sm_120"}));
  const auto& sass = check_of(doc, "smoke-sass");
  CHECK(sass["status"] == "pass");
  CHECK(sass["evidence"]["sass"] == json::array({"sm_80", "sm_90", "sm_120"}));
  CHECK(sass["evidence"]["ptx"] == json::array());
  CHECK(check_of(doc, "smoke-run")["status"] == "skip");
  CHECK_THAT(check_of(doc, "smoke-run")["summary"].get<std::string>(), Catch::StartsWith("run skipped: no GPU"));

  // The kept binary is what inspect reads too: SASS for exactly the three, no PTX.
  REQUIRE(fs::exists(dir / "out" / "smoke"));
  auto insp = test::archbuild({"inspect", (dir / "out" / "smoke").string(), "--json"});
  REQUIRE(insp.status == 0);
  auto f = json::parse(insp.out)["files"][0];
  CHECK(f["sass"] == json::array({"sm_80", "sm_90", "sm_120"}));
  CHECK(f["ptx"] == json::array());
}

TEST_CASE("smoke: --require-gpu without a GPU is exit 3, after compiling", "[smoke][cli][nvcc]") {
  if (!fs::exists(test::kNvcc)) {
    WARN("##archbuild-skip## " << test::kNvcc.string() << " is absent");
    return;
  }
  test::TempDir dir;
  auto r = test::archbuild({"smoke", "--sm", "9.0", "--require-gpu"}, test::no_gpu(dir));
  INFO(r.out << r.err);
  CHECK(r.status == 3);
  CHECK_THAT(r.out, Catch::Contains("pass  smoke-sass"));
  CHECK_THAT(r.out, Catch::Contains("run skipped: no GPU"));
  CHECK_THAT(r.err, Catch::Contains("--require-gpu: run skipped: no GPU"));
  // --json: the document of a failure never claims success, and says why with its status.
  auto j = test::archbuild({"smoke", "--sm", "9.0", "--require-gpu", "--json"}, test::no_gpu(dir));
  INFO(j.out);
  CHECK(j.status == 3);
  auto doc = json::parse(j.out);
  CHECK(doc["valid"] == false);
  CHECK(doc["exit"] == 3);
  REQUIRE(doc["error"].is_string());
  CHECK_THAT(doc["error"].get<std::string>(), Catch::Contains("--require-gpu: run skipped: no GPU"));
}

TEST_CASE("smoke: no toolkit, an uninstalled --cuda, bad --sm", "[smoke][cli]") {
  test::TempDir dir;
  fs::create_directories(dir / "no-cuda");
  auto o = test::no_gpu(dir);
  o.env["PATH"] = (dir / "nogpu-bin").string() + ":/usr/bin:/bin";
  o.env["ARCHBUILD_CUDA_ROOTS"] = (dir / "no-cuda").string();
  o.unset_env = {"CUDA_HOME", "CUDA_PATH"};
  auto none = test::archbuild({"smoke", "--sm", "90"}, o);
  CHECK(none.status == 3);
  CHECK_THAT(none.err, Catch::Contains("no CUDA toolkit found"));

  auto json_none = test::archbuild({"smoke", "--sm", "90", "--json"}, o);
  CHECK(json_none.status == 3);
  CHECK(json::parse(json_none.out)["exit"] == 3);

  auto bad = test::archbuild({"smoke", "--sm", "9.x"});
  CHECK(bad.status == 2);
  CHECK_THAT(bad.err, Catch::Contains("--sm"));

  auto bad_cuda = test::archbuild({"smoke", "--sm", "90", "--cuda", "twelve"});
  CHECK(bad_cuda.status == 2);

  if (fs::exists(test::kNvcc)) {
    auto old = test::archbuild({"smoke", "--sm", "90", "--cuda", "11.8"}, test::no_gpu(dir));
    CHECK(old.status == 3);
    CHECK_THAT(old.err, Catch::Contains("CUDA 11.8 is not installed"));
  }
}

TEST_CASE("smoke: runs on this host's GPU", "[smoke][cli][gpu]") {
  auto d = test::archbuild({"detect", "--json"});
  if (d.status != 0) {
    WARN("##archbuild-skip## no GPU on this host (" << d.err.substr(0, 200) << ")");
    return;
  }
  auto r = test::archbuild({"smoke", "--sm", "native", "--require-gpu", "--json"});
  INFO(r.out << r.err);
  if (r.status == 3 && r.err.find("no CUDA toolkit") != std::string::npos) {
    WARN("##archbuild-skip## no CUDA toolkit on this GPU host");
    return;
  }
  REQUIRE(r.status == 0);
  auto doc = json::parse(r.out);
  const auto& run = check_of(doc, "smoke-run");
  CHECK(run["status"] == "pass");
  CHECK(run["evidence"]["kernels"].size() == 3);
  for (const auto& k : run["evidence"]["kernels"]) CHECK(k["cuda_arch"] == run["evidence"]["expected_cuda_arch"]);
}
