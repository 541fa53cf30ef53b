// PEP 825 variant wheels of a mirror (mirror/variants.hpp): the NVIDIA provider's properties a
// build gets from its device code (never a GPU it does not run on), labels and file names, the
// index-level file per release, and the variant wheel itself (the build's members, the public
// version, variant.json), written the same way twice.
#include <catch2/catch.hpp>

#include <algorithm>

#include "arch/arch_data.hpp"
#include "core/sha256.hpp"
#include "mirror/make_wheel.hpp"
#include "mirror/variants.hpp"
#include "stages/reproducible.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::mirror;
using json = nlohmann::json;

namespace {

Entry entry(const std::string& project, const std::string& version, std::vector<std::string> images,
            const std::string& at = "2026-12-01T00:00:00Z") {
  Entry e;
  e.project = project;
  e.version = version;
  e.file = project + "-" + version + "-cp311-cp311-linux_x86_64.whl";
  e.sha256 = std::string(64, 'a');
  e.size = 1;
  e.published_at = at;
  json files = json::array();
  if (!images.empty()) files.push_back({{"path", project + "/_C.so"}, {"images", images}});
  e.gpu = {{"files", files}, {"requires", json::array()}};
  return e;
}

VariantOf of(const std::string& version, std::vector<std::string> images) {
  auto e = entry("minitorch", version, images);
  return variant_of(e, *GpuFacts::from_json(e.gpu), arch::ArchData::shipped());
}

json sm_arch(const VariantOf& v) { return v.properties["nvidia"]["sm_arch"]; }

}  // namespace

TEST_CASE("variants: NVIDIA's provider lists a host's sm_arch values as its plugin.py does") {
  CHECK(provider_sm_values({12, 1}) == std::vector<std::string>{"121_real", "120_real", "120_virtual"});
  CHECK(provider_sm_values({9, 0}) == std::vector<std::string>{"90_real", "90_virtual"});
  CHECK(provider_sm_values({10, 3}) == std::vector<std::string>{"103_real", "102_real", "101_real", "100_real", "100_virtual"});
}

TEST_CASE("variants: properties from the device code, only where every GPU that lists them runs the build") {
  auto sm90 = of("0.1.0+cu130.sm90", {"sm_90"});
  REQUIRE(sm90.label);
  CHECK(*sm90.label == "cu130_sm90");
  CHECK(sm90.properties == json{{"nvidia", {{"cuda_version_lower_bound", {"13.0"}}, {"sm_arch", {"90_real"}}}}});
  // Several values, sorted lexically (PEP 825: sets as sorted lists); the label names each.
  auto multi = of("0.1.0+cu130.multi", {"sm_80", "sm_90", "compute_120"});
  CHECK(sm_arch(multi) == json{"120_virtual", "80_real", "90_real"});
  CHECK(*multi.label == "cu130_ptx120_sm80_sm90");
  // sm_100a runs on 10.0 only, but a 10.3 host lists 100_real: no value, no variant.
  auto arch_specific = of("0.1.0+cu130.sm100a", {"sm_100a"});
  CHECK_FALSE(arch_specific.label);
  CHECK(arch_specific.why.find("sm_arch") != std::string::npos);
  // sm_100f (the family) runs on 10.0 and 10.3.
  CHECK(sm_arch(of("0.1.0+cu130.sm100f", {"sm_100f"})) == json{"100_real"});
  // PTX for 12.1 does not run on 12.0, which lists 120_virtual: left out; its SASS stays.
  CHECK(sm_arch(of("0.1.0+cu130.x", {"sm_121", "compute_121"})) == json{"121_real"});
  // PTX for 8.0 runs on 9.0 too, but the provider's 9.0 host does not list 80_virtual: it is
  // offered to 8.x only (fewer GPUs than run it, never more).
  CHECK(sm_arch(of("0.1.0+cu130.ptx80", {"compute_80"})) == json{"80_virtual"});
  // A CPU build is the null variant; a GPU build whose CUDA release is unknown has none.
  auto cpu = of("0.1.0", {});
  CHECK(*cpu.label == "null");
  CHECK(cpu.properties == json::object());
  auto unknown = of("0.1.0+custom", {"sm_90"});
  CHECK_FALSE(unknown.label);
  CHECK(unknown.why.find("CUDA release") != std::string::npos);
  // A dependent pinning its torch's build would need that build in the variant index: none.
  auto dependent = entry("minivision", "0.1.0+cu130.sm90", {"sm_90"});
  dependent.gpu["requires"] = {"minitorch==0.1.0+cu130.sm90", "numpy>=1"};
  auto pinned = variant_of(dependent, *GpuFacts::from_json(dependent.gpu), arch::ArchData::shipped());
  CHECK_FALSE(pinned.label);
  CHECK(pinned.why.find("minitorch==0.1.0+cu130.sm90") != std::string::npos);
  auto loose = entry("minivision", "0.1.0+cu130.sm90", {"sm_90"});
  loose.gpu["requires"] = {"minitorch==0.1.0", "extra-thing (==2.0+x) ; extra == 'x'"};
  CHECK(variant_of(loose, *GpuFacts::from_json(loose.gpu), arch::ArchData::shipped()).label);
}

TEST_CASE("variants: file names, one variant per name (the first published), one index-level file per release") {
  CHECK(variant_file_name("minitorch-0.1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl", "cu130_sm90") ==
        "minitorch-0.1.0-cp311-cp311-linux_x86_64-cu130_sm90.whl");
  CHECK(variant_file_name("my_pkg-1.0+cu130.sm90-2-py3-none-any.whl", "null") == "my_pkg-1.0-2-py3-none-any-null.whl");
  CHECK(variants_json_name("my-pkg", "1.0") == "my_pkg-1.0-variants.json");

  Manifest m;
  for (auto e : {entry("minitorch", "0.1.0+cu130.sm90", {"sm_90"}, "2026-12-01T00:00:01Z"),
                 entry("minitorch", "0.1.0+src1.cu130.sm90", {"sm_90"}, "2026-12-01T00:00:00Z"),
                 entry("minitorch", "0.1.0+cu130.sm120", {"sm_120"}), entry("minitorch", "0.2.0+cu130.sm120", {"sm_120"}),
                 entry("minitorch", "0.1.0", {})})
    m.files[e.file] = e;
  auto set = derive_variants(m, arch::ArchData::shipped());
  std::vector<std::string> files;
  for (const auto& w : set.wheels) files.push_back(w.file);
  CHECK(files == std::vector<std::string>{"minitorch-0.1.0-cp311-cp311-linux_x86_64-cu130_sm120.whl",
                                          "minitorch-0.1.0-cp311-cp311-linux_x86_64-cu130_sm90.whl",
                                          "minitorch-0.1.0-cp311-cp311-linux_x86_64-null.whl",
                                          "minitorch-0.2.0-cp311-cp311-linux_x86_64-cu130_sm120.whl"});
  auto sm90 = std::find_if(set.wheels.begin(), set.wheels.end(), [](const VariantWheel& w) { return w.label == "cu130_sm90"; });
  CHECK(sm90->source == "minitorch-0.1.0+src1.cu130.sm90-cp311-cp311-linux_x86_64.whl");  // published first
  REQUIRE(set.left_out.size() == 1);
  CHECK(set.left_out[0].starts_with("minitorch-0.1.0+cu130.sm90-"));
  // Each wheel's variant.json names its own label only; the release's file names them all.
  CHECK(sm90->variant_json["variants"].size() == 1);
  CHECK(sm90->variant_json["$schema"] == kVariantSchema);
  CHECK(sm90->variant_json["default-priorities"]["namespace"] == json{"nvidia"});
  REQUIRE(set.index_files.count("minitorch-0.1.0-variants.json"));
  auto index = json::parse(set.index_files.at("minitorch-0.1.0-variants.json"));
  CHECK(index["variants"].size() == 3);
  CHECK(index["variants"]["null"] == json::object());
  CHECK(index["variants"]["cu130_sm90"] == sm90->variant_json["variants"]["cu130_sm90"]);
  CHECK(json::parse(set.index_files.at("minitorch-0.2.0-variants.json"))["variants"].size() == 1);
}

TEST_CASE("variants: the variant wheel is the build's wheel with the public version and variant.json, the same bytes every time") {
  test::TempDir tmp;
  auto src = tmp / "minitorch-0.1.0+cu130.sm90-py3-none-any.whl";
  auto members = test::wheel_members("minitorch", "0.1.0+cu130.sm90", "minitorch", "sm90");
  members[1].second = "Metadata-Version: 2.1\r\nName: minitorch\r\nVersion: 0.1.0+cu130.sm90\r\n\r\nVersion: body text\r\n";
  test::write_zip(src, members);
  VariantWheel v{"minitorch-0.1.0-py3-none-any-cu130_sm90.whl", src.filename().string(), "minitorch", "0.1.0",
                 "cu130_sm90", {{"variants", {{"cu130_sm90", json::object()}}}}};
  REQUIRE(write_variant_wheel(src, tmp / "a.whl", v));
  REQUIRE(write_variant_wheel(src, tmp / "b.whl", v));
  CHECK(*sha256_file_hex(tmp / "a.whl") == *sha256_file_hex(tmp / "b.whl"));
  auto got = stages::read_zip_members(tmp / "a.whl");
  REQUIRE(got);
  std::map<std::string, std::string> by_name;
  for (const auto& m : *got) by_name[m.name] = m.data;
  CHECK(by_name.at("minitorch/__init__.py") == "VALUE = \"sm90\"\n");
  // Only the header's Version changes (CRLF kept); the body's line is the body's.
  CHECK(by_name.at("minitorch-0.1.0.dist-info/METADATA") ==
        "Metadata-Version: 2.1\r\nName: minitorch\r\nVersion: 0.1.0\r\n\r\nVersion: body text\r\n");
  CHECK(json::parse(by_name.at("minitorch-0.1.0.dist-info/variant.json")) == v.variant_json);
  CHECK(by_name.count("minitorch-0.1.0.dist-info/WHEEL"));
  CHECK_FALSE(by_name.count("minitorch-0.1.0+cu130.sm90.dist-info/METADATA"));
  // RECORD lists variant.json with its hash.
  CHECK(by_name.at("minitorch-0.1.0.dist-info/RECORD").find("minitorch-0.1.0.dist-info/variant.json,sha256=") != std::string::npos);
}
