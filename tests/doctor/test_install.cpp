// Install advice without a build: hosts described by CC and driver, judged against
// data/torch-releases.toml with the run-compatibility rule and minor-version compatibility.
#include <catch2/catch.hpp>

#include <algorithm>

#include "doctor/install.hpp"
#include "support/torch_lines.hpp"

using namespace archbuild;
using arch::Cc;

namespace t = archbuild::test;

namespace {

// The newest torch line (recipes/) and the newest with official wheels (data/torch-releases.toml):
// the expectations follow the data, so a new line is a new recipe and row, not a test edit.
const std::string newest = t::newest_torch().line;
const t::OfficialLine newest_wheels = t::newest_official();

const doctor::Releases& releases() {
  static const doctor::Releases r = doctor::Releases::load_shipped().take();
  return r;
}

const std::vector<toolchain::Toolchain>& toolchains() {
  static const auto v = toolchain::load_shipped().take();
  return v;
}

std::string index_of(const std::string& cu) {
  std::string url = releases().index_url;
  return url.replace(url.find("{cu}"), 4, cu);
}

doctor::InstallQuery host(std::vector<Cc> ccs, std::optional<std::string> driver) {
  doctor::InstallQuery q;
  for (auto cc : ccs) q.targets.push_back({cc, "--sm"});
  q.driver = std::move(driver);
  q.releases = releases();
  q.toolchains = toolchains();
  return q;
}

// Records what it was asked; builds any line "torch-X.Y" (the newest when unset).
struct FakeAdvisor {
  std::vector<std::string> asked;
  doctor::BuildAdvisor fn() {
    return [this](const std::vector<Cc>& ccs, const std::optional<Version>& line, const std::optional<Version>&) {
      asked.push_back(line ? line->str() : "");
      doctor::BuildSuggestion s;
      s.ok = true;
      s.recipe = "torch-" + (line ? line->str() : newest);
      s.command = "archbuild wheel --sm " + doctor::sm_option(ccs) + " --recipe " + s.recipe;
      s.detail = "torch " + (line ? line->str() : newest) + " with CUDA 13.0";
      return s;
    };
  }
};

bool any_contains(const std::vector<std::string>& v, const std::string& part) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.find(part) != std::string::npos; });
}

bool offered(const doctor::InstallAdvice& a, const std::string& line, const std::string& cu) {
  return std::any_of(a.options.begin(), a.options.end(),
                     [&](const doctor::InstallOption& o) { return o.line.str() == line && o.cu == cu; });
}

}  // namespace

TEST_CASE("install: an RTX 5090 with driver 570 gets CUDA 12 wheels, never cu130", "[doctor][install]") {
  FakeAdvisor adv;
  auto a = doctor::advise_install(host({Cc{12, 0}}, "570.86"), adv.fn());
  REQUIRE(a.fits());
  for (const auto& o : a.options) {
    INFO(o.line.str() << " " << o.cu);
    CHECK(o.cuda.major() == 12);  // a CUDA 13 runtime does not start on a 570 driver
    CHECK(o.sass);
  }
  CHECK(offered(a, "2.11", "cu128"));
  CHECK(offered(a, "2.8", "cu128"));
  CHECK_FALSE(offered(a, "2.11", "cu130"));
  // Newest first: the newest release with a CUDA 12 wheel carrying sm_120.
  const auto& best = a.options.front();
  CHECK(best.line == Version{{2, 13}});
  CHECK(best.cu == "cu129");
  CHECK(best.verdicts[0].result == arch::RunResult::native);
  CHECK(best.pip == "pip install torch==2.13.0 \"torchvision==0.28.*\" \"torchaudio==2.11.*\" --index-url " +
                        index_of("cu129"));
  CHECK(best.uv == "uv pip install torch==2.13.0 \"torchvision==0.28.*\" \"torchaudio==2.11.*\" --torch-backend cu129");
  CHECK(best.driver_start == "525.60.13");
  // Why not 2.15 / 2.14: their wheels are CUDA 13.
  CHECK(any_contains(a.ruled_out, "torch 2.15: cu132 needs driver >= 580 to start its CUDA 13.2 runtime"));
  CHECK(any_contains(a.ruled_out, "torch 2.14: cu132 needs driver >= 580"));
  CHECK(any_contains(a.ruled_out, "cu126 carries no code for 12.0"));
  // The newest release has no wheel for this host: the build of it is offered too.
  REQUIRE(a.build);
  CHECK(adv.asked == std::vector<std::string>{newest});
  CHECK(a.build->command == "archbuild wheel --sm 120 --recipe torch-" + newest);
}

TEST_CASE("install: a GTX 1080 Ti with driver 580 gets the newest cu126 wheel (sm_60 SASS), and a build of the newest line",
          "[doctor][install]") {
  FakeAdvisor adv;
  auto a = doctor::advise_install(host({Cc{6, 1}}, "580.65.06"), adv.fn());
  REQUIRE(a.fits());
  const auto& best = a.options.front();
  CHECK(best.line == Version{{2, 14}});
  CHECK(best.cu == "cu126");
  CHECK(best.verdicts[0].result == arch::RunResult::compatible_sass);
  CHECK(best.verdicts[0].image->name() == "sm_60");
  CHECK(best.pip == "pip install torch==2.14.0 \"torchvision==0.29.*\" \"torchaudio==2.11.*\" --index-url " +
                        index_of("cu126"));
  // uv's driver-only choice (cu128 and newer) has no Pascal code; never offered.
  for (const auto& o : a.options) CHECK((o.cu == "cu126" || o.cu == "cu118" || o.cu == "cu121" || o.cu == "cu124"));
  CHECK(any_contains(a.ruled_out, "torch 2.15: cu132 carries no code for 6.1"));
  REQUIRE(a.build);
  CHECK(a.build_why.find("no official torch " + newest + " wheel runs here") != std::string::npos);
  CHECK(a.build->command == "archbuild wheel --sm 61 --recipe torch-" + newest);
}

TEST_CASE("install: an H100 and an RTX 4090 in one host get the release that covers both", "[doctor][install]") {
  FakeAdvisor adv;
  auto a = doctor::advise_install(host({Cc{9, 0}, Cc{8, 9}}, std::nullopt), adv.fn());
  REQUIRE(a.fits());
  const auto& best = a.options.front();
  CHECK(best.line.str() == newest_wheels.line);
  CHECK(best.cu == "cu132");
  REQUIRE(best.verdicts.size() == 2);
  CHECK(best.verdicts[0].result == arch::RunResult::native);
  CHECK(best.verdicts[1].result == arch::RunResult::compatible_sass);  // 8.9 runs sm_86
  CHECK(best.pip == "pip install " + newest_wheels.requirements() + " --index-url " + index_of("cu132"));
  CHECK(best.driver_start == "580");
  CHECK(any_contains(a.notes, "driver not known"));
  if (newest == newest_wheels.line) {
    CHECK_FALSE(a.build);  // the newest release fits: no build offered
    CHECK(adv.asked.empty());
  } else {
    REQUIRE(a.build);  // a newer line has a recipe and no wheels yet: its build
    CHECK(adv.asked == std::vector<std::string>{newest});
  }
}

TEST_CASE("install: a mixed host where one GPU rules a release out", "[doctor][install]") {
  FakeAdvisor adv;
  // A V100 (7.0) and an RTX 5090 (12.0): only the cu128/cu129 lists of 2.8 - 2.10 carry both (the
  // cu129 of 2.12 and 2.13 starts at 7.5: pytorch#188443).
  auto a = doctor::advise_install(host({Cc{7, 0}, Cc{12, 0}}, "580.65.06"), adv.fn());
  REQUIRE(a.fits());
  CHECK(a.options.front().line == Version{{2, 10}});
  CHECK(a.options.front().cu == "cu129");
  CHECK_FALSE(offered(a, "2.11", "cu128"));  // 2.11 cu128 dropped sm_70
  CHECK_FALSE(offered(a, "2.13", "cu129"));
  CHECK(any_contains(a.ruled_out, "torch 2.15: cu132 carries no code for 7.0"));
}

TEST_CASE("install: no official wheel fits: why, and the build", "[doctor][install]") {
  FakeAdvisor adv;
  SECTION("a GPU whose major no wheel carries and whose CC is below every PTX") {
    auto a = doctor::advise_install(host({Cc{11, 0}}, "580.65.06"), adv.fn());
    CHECK_FALSE(a.fits());
    CHECK(any_contains(a.ruled_out, "torch 2.15: cu132 carries no code for 11.0"));
    REQUIRE(a.build);
    CHECK(adv.asked == std::vector<std::string>{""});
    CHECK(a.build->command == "archbuild wheel --sm 110 --recipe torch-" + newest);
    CHECK(a.build_why == "no official wheel runs on 11.0 with driver 580.65.06");
  }
  SECTION("a driver too old for every variant that covers the GPU") {
    auto a = doctor::advise_install(host({Cc{8, 6}}, "450.51"), adv.fn());
    CHECK_FALSE(a.fits());
    CHECK(any_contains(a.notes, "or update the driver: torch " + newest_wheels.line + " (cu132) runs on 8.6 with driver >= 580"));
    REQUIRE(a.build);
  }
}

TEST_CASE("install: a GPU newer than every wheel runs through PTX only, and says so", "[doctor][install]") {
  FakeAdvisor adv;
  SECTION("a driver that can JIT the PTX") {
    auto a = doctor::advise_install(host({Cc{13, 0}}, "600.10"), adv.fn());
    REQUIRE(a.fits());
    CHECK_FALSE(a.options.front().sass);
    CHECK(a.options.front().verdicts[0].result == arch::RunResult::ptx_jit);
    CHECK(any_contains(a.notes, "through the PTX JIT"));
  }
  SECTION("a driver that starts the runtime but is older than the PTX") {
    auto a = doctor::advise_install(host({Cc{13, 0}}, "560.35.03"), adv.fn());
    CHECK_FALSE(offered(a, "2.8", "cu129"));  // 12.9's PTX needs 575.51.03
    CHECK(any_contains(a.ruled_out, "only through its PTX, which needs driver >= 575.51.03"));
  }
}

// ---- ARM hosts (docs/arm-hosts.md): the platform picks the official lists ----------------

namespace {

doctor::InstallQuery on_platform(std::vector<Cc> ccs, const std::string& platform) {
  auto q = host(std::move(ccs), "580.95.05");
  const auto* p = toolchain::Platforms::shipped().find(platform);
  REQUIRE(p);
  q.platform = *p;
  return q;
}

}  // namespace

TEST_CASE("install advice on sbsa: GB10, GB200, GB300 and Thor get the official aarch64 wheel", "[doctor][install][arm]") {
  FakeAdvisor adv;
  for (auto [cc, image] : {std::pair{Cc{12, 1}, "sm_120"}, std::pair{Cc{10, 0}, "sm_100"}, std::pair{Cc{10, 3}, "sm_100"},
                           std::pair{Cc{11, 0}, "sm_110"}}) {
    INFO(cc.str());
    auto a = doctor::advise_install(on_platform({cc}, "sbsa"), adv.fn());
    REQUIRE(a.fits());
    const auto& best = a.options.front();
    CHECK(best.line.str() == newest_wheels.line);
    CHECK(best.cu == "cu132");
    CHECK(best.arch_list == "8.0;9.0;10.0;11.0;12.0");  // the aarch64 list, not x86_64's
    CHECK(best.sass);
    REQUIRE(best.verdicts.size() == 1);
    REQUIRE(best.verdicts[0].image);
    CHECK(best.verdicts[0].image->name() == image);
    CHECK(any_contains(a.notes, "manylinux_*_aarch64"));
    CHECK(bool(a.build) == (newest != newest_wheels.line));  // a build only of a newer line without wheels
  }
  // Thor: no x86_64 list carries sm_110 (nor PTX for it), so only the platform makes it run.
  auto x86 = doctor::advise_install(host({Cc{11, 0}}, "580.95.05"), adv.fn());
  CHECK_FALSE(x86.fits());
}

TEST_CASE("install advice on a Jetson: no pip wheel, the build command", "[doctor][install][arm]") {
  FakeAdvisor adv;
  auto a = doctor::advise_install(on_platform({Cc{8, 7}}, "jetson"), adv.fn());
  CHECK_FALSE(a.fits());
  REQUIRE(a.build);
  CHECK(a.build->command == "archbuild wheel --sm 87 --recipe torch-" + newest);
  CHECK_THAT(a.build_why, Catch::Contains("no pip wheel runs on platform jetson") &&
                              Catch::Contains("CUDA libraries come from the system"));
  // Without the platform, the x86_64 lists would offer a wheel through sm_86 SASS: the bug.
  auto x86 = doctor::advise_install(host({Cc{8, 7}}, "580.95.05"), adv.fn());
  CHECK(x86.fits());
}

TEST_CASE("release data: the aarch64 lists are read per release line", "[doctor][install][arm]") {
  const auto* r = releases().find(Version::parse("2.14").value());
  REQUIRE(r);
  const auto& arm = r->variants_for("aarch64");
  REQUIRE(arm.size() == 3);
  CHECK(arm[0].cu() == "cu126");
  CHECK(*arm[0].arch_list == "8.0;9.0");
  CHECK(r->variants_for("x86_64").size() == 3);
  CHECK(r->variants_for("").empty());
  // Older lines: 2.7 shipped cu128 only, 2.8 cu129 only, 2.6 and before none.
  auto arm_of = [](const char* line) {
    std::vector<std::string> out;
    for (const auto& v : releases().find(Version::parse(line).value())->variants_for("aarch64"))
      out.push_back(v.cu() + "=" + (v.arch_list ? *v.arch_list : std::string("?")));
    return out;
  };
  CHECK(arm_of("2.6").empty());
  CHECK(arm_of("2.7") == std::vector<std::string>{"cu128=9.0;10.0;12.0"});
  CHECK(arm_of("2.8") == std::vector<std::string>{"cu129=8.0;9.0;10.0;12.0"});
  CHECK(arm_of("2.9") == std::vector<std::string>{"cu126=8.0;9.0", "cu128=8.0;9.0;10.0;12.0",
                                                  "cu130=8.0;9.0;10.0;11.0;12.0+PTX"});
  CHECK(arm_of("2.11") == std::vector<std::string>{"cu126=8.0;9.0", "cu128=8.0;9.0;10.0;12.0",
                                                   "cu129=8.0;9.0;10.0;12.0+PTX", "cu130=8.0;9.0;10.0;11.0;12.0"});
  // cu129 on aarch64 where it shipped: 2.10, 2.11, 2.12(.1), 2.13.
  CHECK(arm_of("2.10").size() == 4);
  CHECK(arm_of("2.12") == std::vector<std::string>{"cu126=8.0;9.0", "cu129=8.0;9.0;10.0;12.0",
                                                   "cu130=8.0;9.0;10.0;11.0;12.0", "cu132=8.0;9.0;10.0;11.0;12.0"});
  // 2.13: read at the v2.13.0 tag; its release builds carry no +PTX.
  CHECK(arm_of("2.13") == std::vector<std::string>{"cu126=8.0;9.0", "cu129=8.0;9.0;10.0;12.0",
                                                   "cu130=8.0;9.0;10.0;11.0;12.0", "cu132=8.0;9.0;10.0;11.0;12.0"});
}

TEST_CASE("install advice on sbsa with a CUDA 12 driver: GB200 gets the newest aarch64 CUDA 12 wheel with sm_100",
          "[doctor][install][arm]") {
  // Driver 570 starts no CUDA 13 runtime; 2.14's aarch64 cu126 has no sm_100. Before the older
  // lines' aarch64 lists were recorded, nothing fitted and only a build was offered. 2.13's aarch64
  // cu129 starts on 570 through minor-version compatibility and carries sm_100 SASS.
  FakeAdvisor adv;
  auto q = on_platform({Cc{10, 0}}, "sbsa");
  q.driver = "570.86.15";
  auto a = doctor::advise_install(q, adv.fn());
  REQUIRE(a.fits());
  const auto& best = a.options.front();
  CHECK(best.line.str() == "2.13");
  CHECK(best.cu == "cu129");
  CHECK(best.arch_list == "8.0;9.0;10.0;12.0");
  CHECK(best.sass);
  CHECK(offered(a, "2.11", "cu128"));
  CHECK(offered(a, "2.7", "cu128"));
  CHECK(offered(a, "2.8", "cu129"));  // its list is recorded now (sm_80 cherry-picked to release/2.8)
  CHECK(offered(a, "2.11", "cu129"));
  // GH200 (9.0) with the same driver: cu126 / cu128 aarch64 wheels of 2.9 onwards run it.
  auto gh = on_platform({Cc{9, 0}}, "sbsa");
  gh.driver = "570.86.15";
  auto g = doctor::advise_install(gh, adv.fn());
  REQUIRE(g.fits());
  CHECK(g.options.front().line.str() == "2.14");
  CHECK(g.options.front().cu == "cu126");
}

TEST_CASE("install: the build advised runs on the driver: the newest CUDA it starts, or the driver it needs",
          "[doctor][install]") {
  // A resolver that builds 12.1 with CUDA 12.8 and newer and 11.0 with CUDA 13 only; it prefers 13.0.
  std::vector<std::string> asked;
  doctor::BuildAdvisor adv = [&](const std::vector<Cc>& ccs, const std::optional<Version>&,
                                 const std::optional<Version>& cuda) {
    asked.push_back(cuda ? cuda->str() : "");
    doctor::BuildSuggestion s;
    const Version pick = cuda ? *cuda : Version{{13, 0}};
    if (pick < Version{{12, 8}} || (ccs.front() == Cc{11, 0} && pick < Version{{13, 0}})) {
      s.reason = "sm_" + std::to_string(ccs.front().sm()) + " needs CUDA >= 13.0";
      s.detail = "cannot build sm_" + std::to_string(ccs.front().sm()) + ": rule toolkit-arch. Way out: --cuda 13.0";
      return s;
    }
    s.ok = true;
    s.cuda = pick;
    s.recipe = "torch-2.15";
    s.command = "archbuild wheel --sm " + doctor::sm_option(ccs) + (cuda ? " --cuda " + cuda->str() : "");
    s.detail = "torch 2.15.0 with CUDA " + pick.str();
    return s;
  };
  const auto d570 = Version::parse("570.86"), d580 = Version::parse("580.65.06");

  auto gb10 = doctor::build_for_driver(adv, {Cc{12, 1}}, std::nullopt, d570, releases(), toolchains());
  REQUIRE(gb10.ok);
  REQUIRE(gb10.cuda);
  CHECK(gb10.cuda->major() == 12);
  CHECK_THAT(gb10.command, Catch::Contains("--cuda 12."));
  CHECK_THAT(gb10.detail, Catch::Contains("driver 570.86 cannot start the CUDA 13.0 runtime (needs >= 580)"));

  auto thor = doctor::build_for_driver(adv, {Cc{11, 0}}, std::nullopt, d570, releases(), toolchains());
  CHECK_FALSE(thor.ok);
  CHECK_THAT(thor.detail, Catch::Contains("no CUDA release it starts builds 11.0") &&
                              Catch::Contains("update the driver to >= 580, then: archbuild wheel --sm 110"));
  CHECK_THAT(thor.detail, !Catch::Contains("Way out"));  // the resolver's way out names CUDA 13 again
  CHECK_THAT(thor.detail, Catch::Contains("(sm_110 needs CUDA >= 13.0)"));  // its reason, a field: not cut from detail

  asked.clear();
  auto thor580 = doctor::build_for_driver(adv, {Cc{11, 0}}, std::nullopt, d580, releases(), toolchains());
  CHECK(thor580.ok);
  CHECK(asked == std::vector<std::string>{""});  // the resolver's own choice, asked once
  asked.clear();
  auto unknown = doctor::build_for_driver(adv, {Cc{11, 0}}, std::nullopt, std::nullopt, releases(), toolchains());
  CHECK(unknown.ok);
  CHECK(asked.size() == 1);
}

TEST_CASE("install: a torch line with a recipe and no row in torch-releases.toml is the newest line, without wheels",
          "[doctor][install]") {
  // What a new recipe alone makes of the release data: its line, no wheel to advise, its build.
  recipe::Recipe next;
  next.name = "torch-2.99";
  next.package = "torch";
  next.version = Version{{2, 99, 0}};
  auto q = host({Cc{9, 0}}, "580.65.06");
  q.releases.add_recipe_lines({next});
  const auto* line = q.releases.find(Version{{2, 99}});
  REQUIRE(line);
  CHECK_FALSE(line->recorded);
  CHECK(line->variants.empty());
  CHECK(q.releases.releases.back().line == Version{{2, 99}});
  // A line the file has is not added twice.
  const auto before = q.releases.releases.size();
  recipe::Recipe known = next;
  known.version = Version{{2, 7, 1}};
  q.releases.add_recipe_lines({known});
  CHECK(q.releases.releases.size() == before);

  FakeAdvisor adv;
  auto a = doctor::advise_install(q, adv.fn());
  REQUIRE(a.fits());
  CHECK(a.options.front().line.str() == newest_wheels.line);  // the wheels are the newest recorded ones
  CHECK(any_contains(a.ruled_out, "torch 2.99: no official wheels recorded: only a recipe names this line"));
  REQUIRE(a.build);  // and the newest line is built
  CHECK(adv.asked == std::vector<std::string>{"2.99"});
  CHECK(a.build->command == "archbuild wheel --sm 90 --recipe torch-2.99");
  CHECK(a.build_why.find("no official torch 2.99 wheel runs here") != std::string::npos);
}
