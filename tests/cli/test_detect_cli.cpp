// `archbuild detect` and `--sm native` with a fake nvidia-smi on PATH (no GPU needed).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;

namespace {

// A PATH with a fake nvidia-smi printing `csv`, and the driver libraries pointed at nothing.
t::RunOptions fake_host(const t::TempDir& dir, const std::string& script_body) {
  auto smi = dir.write("bin/nvidia-smi", "#!/bin/sh\n" + script_body);
  std::filesystem::permissions(smi, std::filesystem::perms::owner_all);
  t::RunOptions o;
  o.env["PATH"] = (dir / "bin").string() + ":/usr/bin:/bin";
  o.env["ARCHBUILD_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1";
  o.env["ARCHBUILD_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1";
  return o;
}

}  // namespace

TEST_CASE("detect: a fake nvidia-smi answers", "[cli][detect]") {
  t::TempDir dir;
  auto o = fake_host(dir, "echo '0, NVIDIA H100 80GB HBM3, 9.0, 81559, 580.65.06'\n");
  auto r = t::archbuild({"detect"}, o);
  CHECK(r.status == 0);
  CHECK(r.out.find("NVIDIA H100 80GB HBM3") != std::string::npos);
  CHECK(r.out.find("CC 9.0") != std::string::npos);
  CHECK(r.out.find("Hopper") != std::string::npos);
  CHECK(r.out.find("nvidia-smi") != std::string::npos);
  auto j = nlohmann::json::parse(t::archbuild({"detect", "--json"}, o).out);
  CHECK(j["source"] == "nvidia-smi");
  CHECK(j["driver_version"] == "580.65.06");
  CHECK(j["gpus"][0]["cc"] == "9.0");
  CHECK(j["gpus"][0]["database_name"] == "H100");
  CHECK(j["tried"].size() == 2);
}

TEST_CASE("detect: an unknown CC is reported as such", "[cli][detect]") {
  t::TempDir dir;
  auto o = fake_host(dir, "echo '0, NVIDIA Next 1, 13.5, 1000, 700.1'\n");
  auto r = t::archbuild({"detect"}, o);
  CHECK(r.status == 0);
  CHECK(r.err.find("not in the GPU database") != std::string::npos);
}

TEST_CASE("detect: no GPU is exit 3 with the reasons", "[cli][detect]") {
  t::TempDir dir;
  auto o = fake_host(dir, "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver' >&2\nexit 9\n");
  auto r = t::archbuild({"detect"}, o);
  CHECK(r.status == 3);
  CHECK(r.err.find("no GPU found") != std::string::npos);
  CHECK(r.err.find("nvml") != std::string::npos);
  auto j = t::archbuild({"detect", "--json"}, o);
  CHECK(j.status == 3);
  auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["gpus"].empty());
  // A failure document says so (docs/commands.md: "error" and "exit").
  CHECK(doc["exit"] == 3);
  REQUIRE(doc["error"].is_string());
  CHECK(doc["error"].get<std::string>().find("no GPU found") != std::string::npos);
  // No nvidia-smi at all.
  t::RunOptions bare = o;
  bare.env["PATH"] = "/nonexistent";
  CHECK(t::archbuild({"detect"}, bare).status == 3);
}

TEST_CASE("detect: the job's CUDA_VISIBLE_DEVICES hides the GPUs it was not given", "[cli][detect]") {
  t::TempDir dir;
  auto o = fake_host(dir,
                     "echo '0, NVIDIA H100 80GB HBM3, 9.0, 81559, 580.65.06, GPU-aaaaaaaa-1111-2222-3333-444444444444'\n"
                     "echo '1, NVIDIA H100 80GB HBM3, 9.0, 81559, 580.65.06, GPU-bbbbbbbb-1111-2222-3333-444444444444'\n");
  o.env["CUDA_VISIBLE_DEVICES"] = "GPU-bbbbbbbb";
  auto r = t::archbuild({"detect", "--json"}, o);
  CHECK(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["gpus"].size() == 1);
  CHECK(j["gpus"][0]["index"] == 1);
  CHECK(j["gpus"][0]["uuid"] == "GPU-bbbbbbbb-1111-2222-3333-444444444444");
  CHECK(j["gpus"][0]["cuda_select"] == "GPU-bbbbbbbb-1111-2222-3333-444444444444");
  REQUIRE(j["hidden"].size() == 1);
  // A mask that leaves nothing: no GPU, with the reason.
  o.env["CUDA_VISIBLE_DEVICES"] = "";
  auto none = t::archbuild({"detect"}, o);
  CHECK(none.status == 3);
  CHECK(none.err.find("CUDA_VISIBLE_DEVICES") != std::string::npos);
}

TEST_CASE("detect on a Jetson: its L4T release names the JetPack, its CUDA and its platform (JetPack 6.2 and 7.2 Orins)",
          "[cli][detect][arm]") {
  t::TempDir dir;
  // nvidia-smi as an Orin answers it; /etc/nv_tegra_release replaced by a file of the same first line.
  auto o = fake_host(dir, "echo '0, Orin, 8.7, 62841, 595.00'\n");
  auto seven = dir.write("nv_tegra_release_r39", "# R39 (release), REVISION: 2.0, GCID: 1, BOARD: generic, EABI: aarch64, DATE: Mon Jun  1 00:00:00 UTC 2026\n");
  o.env["ARCHBUILD_NV_TEGRA_RELEASE"] = seven.string();
  auto r = t::archbuild({"detect"}, o);
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("L4T:    # R39 (release), REVISION: 2.0") != std::string::npos);
  CHECK(r.out.find("JetPack 7.2 with CUDA 13.2, platform sbsa (toolchains/jetpack.toml)") != std::string::npos);
  auto j = nlohmann::json::parse(t::archbuild({"detect", "--json"}, o).out);
  CHECK(j["jetpack"]["version"] == "7.2");
  CHECK(j["jetpack"]["cuda"] == "13.2");
  CHECK(j["jetpack"]["l4t"] == "39.2.0");
  CHECK(j["jetpack"]["platform"] == "sbsa");
  CHECK(j["l4t_platform"] == "sbsa");
  CHECK(j["gpus"][0]["cc"] == "8.7");
  CHECK(j["gpus"][0]["database_name"] == "Jetson AGX Orin");
  // The same Orin on JetPack 6.2 (L4T 36.4.3): CUDA 12.6, platform jetson.
  auto six = dir.write("nv_tegra_release_r36", "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64\n");
  o.env["ARCHBUILD_NV_TEGRA_RELEASE"] = six.string();
  auto r6 = t::archbuild({"detect"}, o);
  CHECK(r6.out.find("JetPack 6.2 with CUDA 12.6, platform jetson") != std::string::npos);
  // An L4T release the data has no row for: said, with the platform of its L4T major's releases.
  auto unknown = dir.write("nv_tegra_release_r365", "# R36 (release), REVISION: 5.0, GCID: 1, BOARD: generic\n");
  o.env["ARCHBUILD_NV_TEGRA_RELEASE"] = unknown.string();
  auto ru = t::archbuild({"detect"}, o);
  CHECK(ru.out.find("a JetPack release toolchains/jetpack.toml does not list (platform jetson") != std::string::npos);
}
