// The GPU views of a mirror, derived from manifest facts alone (no wheel read): which build each
// GPU's view offers, the stated tie-break, dependents bound to their torch, PEP 440 local-label
// order for plain simple/, and the view a host with two kinds of GPU installs from.
#include <catch2/catch.hpp>

#include <algorithm>

#include <fstream>

#include "arch/arch_data.hpp"
#include "mirror/views.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using namespace archbuild::mirror;

namespace {

// A manifest entry whose facts say: one file carrying `images` ("sm_90", "compute_80").
Entry entry(const std::string& project, const std::string& version, std::vector<std::string> images,
            std::vector<std::string> requires_dist = {}, const std::string& at = "2026-12-01T00:00:00Z") {
  Entry e;
  e.project = project;
  e.version = version;
  e.file = project + "-" + version + "-cp311-cp311-linux_x86_64.whl";
  e.sha256 = std::string(64, 'a');
  e.size = 1;
  e.published_at = at;
  nlohmann::json files = nlohmann::json::array();
  if (!images.empty()) files.push_back({{"path", project + "/_C.so"}, {"images", images}});
  e.gpu = {{"files", files}, {"requires", requires_dist}};
  return e;
}

Manifest manifest_of(std::vector<Entry> entries) {
  Manifest m;
  for (auto& e : entries) m.files[e.file] = e;
  return m;
}

const View* view(const std::vector<View>& vs, int sm) {
  auto it = std::find_if(vs.begin(), vs.end(), [&](const View& v) { return v.cc.sm() == sm; });
  return it == vs.end() ? nullptr : &*it;
}

// The one file a view offers for `project` (empty when none, "several" when more).
std::string offered(const std::vector<View>& vs, int sm, const std::string& project) {
  const View* v = view(vs, sm);
  if (!v || !v->projects.count(project)) return "";
  const auto& files = v->projects.at(project);
  return files.size() == 1 ? files.front().version : "several";
}

// Builds of minitorch 0.1.0 for 9.0, 10.0, 12.0, and one for 8.0 SASS + 9.0 PTX.
Manifest fleet() {
  return manifest_of({entry("minitorch", "0.1.0+cu130.sm90", {"sm_90"}),
                      entry("minitorch", "0.1.0+cu130.sm100", {"sm_100"}),
                      entry("minitorch", "0.1.0+cu130.sm120", {"sm_120"}),
                      entry("minitorch", "0.1.0+cu130.sm80.ptx90", {"sm_80", "compute_90"})});
}

}  // namespace

TEST_CASE("fit: SASS for the GPU, same-family SASS, PTX, none, and no device code is a CPU build") {
  auto facts = [](std::vector<std::string> images) { return *GpuFacts::from_json(entry("p", "1", images).gpu); };
  CHECK(fit_on(facts({"sm_90"}), {9, 0}) == Fit::native);
  CHECK(fit_on(facts({"sm_120"}), {12, 1}) == Fit::family_sass);
  CHECK(fit_on(facts({"sm_90"}), {12, 0}) == Fit::none);
  CHECK(fit_on(facts({"sm_90a"}), {9, 0}) == Fit::native);
  CHECK(fit_on(facts({"sm_90a"}), {10, 0}) == Fit::none);
  CHECK(fit_on(facts({"compute_90"}), {12, 0}) == Fit::ptx);
  CHECK(fit_on(facts({}), {12, 0}) == Fit::cpu);
  // A wheel runs where every file with device code runs.
  auto two = *GpuFacts::from_json(nlohmann::json{
      {"files", {{{"path", "a.so"}, {"images", {"sm_90", "sm_120"}}}, {{"path", "b.so"}, {"images", {"sm_90"}}}}}});
  CHECK(fit_on(two, {12, 0}) == Fit::none);
  CHECK(fit_on(two, {9, 0}) == Fit::native);
  // Facts round-trip through the manifest's JSON.
  CHECK(GpuFacts::from_json(two.to_json())->to_json() == two.to_json());
  CHECK_FALSE(GpuFacts::from_json(nlohmann::json{{"files", {{{"images", {"sm_x"}}}}}}));
  CHECK_FALSE(GpuFacts::from_json(nullptr));
}

TEST_CASE("each GPU's view offers the build that runs best there, one per version") {
  auto vs = derive_views(fleet(), arch::ArchData::shipped());
  CHECK(offered(vs, 90, "minitorch") == "0.1.0+cu130.sm90");    // SASS for it
  CHECK(offered(vs, 100, "minitorch") == "0.1.0+cu130.sm100");
  CHECK(offered(vs, 120, "minitorch") == "0.1.0+cu130.sm120");
  CHECK(offered(vs, 121, "minitorch") == "0.1.0+cu130.sm120");  // same-family SASS before PTX
  CHECK(offered(vs, 103, "minitorch") == "0.1.0+cu130.sm100");
  CHECK(offered(vs, 86, "minitorch") == "0.1.0+cu130.sm80.ptx90");  // sm_80 SASS runs on 8.6
  CHECK(offered(vs, 110, "minitorch") == "0.1.0+cu130.sm80.ptx90");  // only the PTX runs
  CHECK(view(vs, 75) == nullptr);  // nothing runs on 7.5: no view
  CHECK(view(vs, 61) == nullptr);
}

TEST_CASE("the views are made for the GPUs of the data given, not a process-wide copy") {
  // A new CC is a data edit: a gpus.toml that knows a 12.3 gets its view from a wheel whose PTX
  // runs there; the shipped data, which does not know it, makes none.
  test::TempDir tmp;
  auto shipped = test::read_file(std::filesystem::path(ARCHBUILD_SOURCE_DIR) / "data" / "gpus.toml");
  std::ofstream(tmp / "gpus.toml") << shipped << "\n[[cc]]\ncc = \"12.3\"\narchitecture = \"Blackwell\"\n";
  auto more = arch::ArchData::load(tmp / "gpus.toml").take();
  auto m = manifest_of({entry("p", "1.0+ptx", {"compute_120"})});
  CHECK(offered(derive_views(m, more), 123, "p") == "1.0+ptx");
  CHECK(view(derive_views(m, arch::ArchData::shipped()), 123) == nullptr);
  CHECK(choose_view(m, {{12, 3}}, more).cc == arch::Cc{12, 3});
  CHECK_FALSE(choose_view(m, {{12, 3}}, arch::ArchData::shipped()).cc);
}

TEST_CASE("the tie-break: nearest image, then fewer images, then the later published, then the name") {
  // Two builds with SASS for 9.0: the one made for fewer GPUs.
  auto m = manifest_of({entry("p", "1.0+a", {"sm_90", "sm_100", "sm_120"}), entry("p", "1.0+b", {"sm_90"})});
  CHECK(offered(derive_views(m, arch::ArchData::shipped()), 90, "p") == "1.0+b");
  // Same-family SASS: the nearest (sm_86 before sm_80 on an 8.9).
  m = manifest_of({entry("p", "1.0+a", {"sm_80"}), entry("p", "1.0+b", {"sm_86"})});
  CHECK(offered(derive_views(m, arch::ArchData::shipped()), 89, "p") == "1.0+b");
  // Equal otherwise: the later published.
  m = manifest_of({entry("p", "1.0+a", {"sm_90"}, {}, "2026-12-02T00:00:00Z"), entry("p", "1.0+b", {"sm_90"}, {}, "2026-12-01T00:00:00Z")});
  CHECK(offered(derive_views(m, arch::ArchData::shipped()), 90, "p") == "1.0+a");
  // Different public versions are all offered (pip picks the version; the view picks the build).
  m = manifest_of({entry("p", "1.0+a", {"sm_90"}), entry("p", "1.1+a", {"sm_90"})});
  CHECK(offered(derive_views(m, arch::ArchData::shipped()), 90, "p") == "several");
}

TEST_CASE("a wheel is placed by its code, not its name, and a CPU build is in every view but makes none") {
  auto m = fleet();
  auto liar = entry("liar", "1.0+cu130.sm120", {"sm_90"});
  auto cpu = entry("plain", "1.0", {});
  m.files[liar.file] = liar;
  m.files[cpu.file] = cpu;
  auto vs = derive_views(m, arch::ArchData::shipped());
  CHECK(offered(vs, 90, "liar") == "1.0+cu130.sm120");
  CHECK(offered(vs, 120, "liar").empty());
  CHECK(offered(vs, 120, "plain") == "1.0");
  CHECK(offered(vs, 90, "plain") == "1.0");
  CHECK(view(vs, 75) == nullptr);
  // Only CPU builds: no view at all.
  CHECK(derive_views(manifest_of({cpu}), arch::ArchData::shipped()).empty());
}

TEST_CASE("a dependent is in a view only where the torch it requires is") {
  auto m = manifest_of({entry("torch", "2.7.1+cu128.sm90", {"sm_90"}), entry("torch", "2.7.1+cu128.sm120", {"sm_120"}),
                        // Built against the sm120 torch only, but its own code would run on 9.0 too.
                        entry("torchvision", "0.22.1+cu128.sm120", {"sm_90", "sm_120"}, {"torch (==2.7.1+cu128.sm120)"}),
                        // Requires a torch version by its public part: wherever a 2.7.1 is.
                        entry("torchaudio", "2.7.1+cu128", {"sm_90", "sm_120"}, {"torch==2.7.1", "numpy; extra == \"x\""})});
  auto vs = derive_views(m, arch::ArchData::shipped());
  CHECK(offered(vs, 120, "torchvision") == "0.22.1+cu128.sm120");
  CHECK(offered(vs, 90, "torchvision").empty());
  CHECK(offered(vs, 90, "torchaudio") == "2.7.1+cu128");
  CHECK(offered(vs, 120, "torchaudio") == "2.7.1+cu128");
  CHECK(dependents_of(m, {"torch"}) == std::set<std::string>{"torch", "torchvision", "torchaudio"});
}

TEST_CASE("plain simple/ holds every build: pip's pick there is the highest local label, PEP 440") {
  CHECK(compare_local("cu130.sm90", "cu130.sm120") > 0);  // alphanumeric segments compare as strings
  CHECK(compare_local("cu130.12", "cu130.sm120") > 0);    // a numeric segment is greater
  CHECK(compare_local("1.10", "1.9") > 0);                // numeric segments compare as numbers
  CHECK(compare_local("a.b", "a") > 0);                   // more segments, same prefix: greater
  CHECK(compare_local("CU130", "cu130") == 0);
  auto m = fleet();
  std::vector<Entry> all;
  for (const auto& [f, e] : m.files) all.push_back(e);
  CHECK(plain_pick(all)->version == "0.1.0+cu130.sm90");
  CHECK(public_version("0.1.0+cu130.sm90") == "0.1.0");
}

TEST_CASE("the view a host installs from: one whose builds run on all its GPUs, or why none") {
  auto m = fleet();
  auto one = choose_view(m, {{12, 0}}, arch::ArchData::shipped());
  REQUIRE(one.cc);
  CHECK(one.cc->sm() == 120);
  CHECK(one.projects == std::vector<std::string>{"minitorch"});
  // 8.6 and 8.9: the 8.6 view's build (sm_80 SASS) runs on both.
  auto pair = choose_view(m, {{8, 6}, {8, 9}}, arch::ArchData::shipped());
  REQUIRE(pair.cc);
  CHECK(pair.cc->sm() == 86);
  // 9.0 and 12.0: each view's build leaves the other out.
  auto two = choose_view(m, {{9, 0}, {12, 0}}, arch::ArchData::shipped());
  CHECK_FALSE(two.cc);
  CHECK(two.why.find("every GPU") != std::string::npos);
  // No build runs on 7.5: no view, and it is said.
  auto none = choose_view(m, {{7, 5}}, arch::ArchData::shipped());
  CHECK_FALSE(none.cc);
  CHECK(none.why.find("gpu/sm_75") != std::string::npos);
}
