// doctor: the official-wheel data, the Python probe's output, and the diagnosis as a pure
// function over facts. The command itself is tested in tests/cli/test_doctor_cli.cpp.
#include <catch2/catch.hpp>

#include <algorithm>

#include "arch/arch_data.hpp"
#include "doctor/doctor.hpp"
#include "recipe/recipe.hpp"
#include "support/tempdir.hpp"
#include "support/torch_lines.hpp"
#include "toolchain/platform.hpp"
#include "toolchain/toolchain.hpp"

using namespace archbuild;
using arch::Cc;
using binary::EntryKind;
namespace t = archbuild::test;

namespace {

binary::Entry entry(EntryKind kind, int sm, arch::Variant v = arch::Variant::none) {
  binary::Entry e;
  e.kind = kind;
  e.sm = sm;
  e.variant = v;
  return e;
}

binary::FileReport lib_file(const std::string& path, std::vector<binary::Entry> entries) {
  binary::FileReport f;
  f.path = path;
  if (!entries.empty()) {
    binary::Container c;
    c.section = ".nv_fatbin";
    c.entries = std::move(entries);
    f.containers.push_back(std::move(c));
  }
  return f;
}

// SASS for each sm, plus PTX for `ptx` (0: none).
std::vector<binary::Entry> sass(std::initializer_list<int> sms, int ptx = 0) {
  std::vector<binary::Entry> out;
  for (int sm : sms) out.push_back(entry(EntryKind::sass, sm));
  if (ptx) out.push_back(entry(EntryKind::ptx, ptx));
  return out;
}

const doctor::Releases& releases() {
  static const doctor::Releases r = doctor::Releases::load_shipped().take();
  return r;
}

// The pip index the data file gives for a CUDA tag ("cu128").
std::string index_of(const std::string& cu) {
  std::string url = releases().index_url;
  return url.replace(url.find("{cu}"), 4, cu);
}
const std::vector<toolchain::Toolchain>& toolchains() {
  static const auto v = toolchain::load_shipped().take();
  return v;
}

// A torch at /site/torch with one lib/ file carrying `entries`.
doctor::Facts facts(const std::string& version, std::optional<std::string> cuda, std::vector<binary::Entry> entries,
                    std::vector<Cc> targets) {
  doctor::Facts f;
  f.torch.python = "/usr/bin/python3";
  f.torch.dir = "/site/torch";
  f.torch.version_read = true;
  f.torch.version = version;
  f.torch.cuda = std::move(cuda);
  f.torch.lib_inspected = true;
  f.torch.lib_files.push_back(lib_file("/site/torch/lib/libtorch_cuda.so", std::move(entries)));
  f.torch.lib_files.push_back(lib_file("/site/torch/lib/libtorch_cpu.so", {}));
  for (auto cc : targets) f.targets.push_back({cc, "--sm"});
  f.releases = releases();
  f.toolchains = toolchains();
  f.pip = "python3 -m pip";
  return f;
}

// A resolver that refuses torch lines below 2.7 and otherwise picks torch-2.9; records calls.
struct FakeAdvisor {
  std::vector<std::pair<std::string, std::string>> calls;  // (--sm, line or "")
  doctor::BuildAdvisor fn() {
    return [this](const std::vector<Cc>& ccs, const std::optional<Version>& line, const std::optional<Version>&) {
      calls.emplace_back(doctor::sm_option(ccs), line ? line->str() : "");
      doctor::BuildSuggestion s;
      if (line && *line < Version{{2, 7}}) {
        s.detail = "arch-syntax: torch " + line->str() + " cannot parse 12.0";
        return s;
      }
      std::string recipe = line ? "torch-" + line->str() : "torch-2.9";
      s.ok = true;
      s.recipe = recipe;
      s.command = "archbuild wheel --sm " + doctor::sm_option(ccs) + " --recipe " + recipe;
      s.detail = "torch " + (line ? line->str() : std::string("2.9")) + " with CUDA 13.0";
      return s;
    };
  }
};

const doctor::Finding* find(const doctor::Report& r, const std::string& id) {
  for (const auto& f : r.findings)
    if (f.id == id) return &f;
  return nullptr;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool any_contains(const std::vector<std::string>& v, const std::string& part) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return contains(s, part); });
}

// The official 2.5 cu124 wheel's libtorch_cuda: 5.0 … 9.0 SASS, no PTX.
std::vector<binary::Entry> cu124_like() { return sass({50, 60, 70, 75, 80, 86, 90}); }
// The official 2.7 cu128 wheel's: 7.5 … 12.0 SASS + compute_120.
std::vector<binary::Entry> cu128_like() { return sass({75, 80, 86, 90, 100, 120}, 120); }

}  // namespace

TEST_CASE("releases: the shipped data loads and computes which wheels cover a CC", "[doctor]") {
  const auto& r = releases();
  REQUIRE(r.find(Version{{2, 7}}));
  const auto* r27 = r.find(Version{{2, 7, 1}});  // any patch of the line
  REQUIRE(r27);
  CHECK(r27->line == Version{{2, 7}});
  // Lines sort numerically: 2.10 after 2.9.
  auto it9 = std::find_if(r.releases.begin(), r.releases.end(), [](const auto& x) { return x.line == Version{{2, 9}}; });
  auto it10 = std::find_if(r.releases.begin(), r.releases.end(), [](const auto& x) { return x.line == Version{{2, 10}}; });
  CHECK(it9 < it10);
  // "torch ≥ 2.7 with cu128 covers 12.0", computed from the lists with the compat rule.
  std::vector<std::string> covering;
  for (const auto& rel : r.releases)
    for (const auto& v : rel.variants) {
      if (!v.recorded()) continue;
      auto images = v.images();
      auto verdict = arch::run_verdict(images, Cc{12, 0});
      // Up to 2.15: the lines recorded when this was written (a newer row adds its own).
      if (verdict.result == arch::RunResult::native && rel.line <= Version{{2, 15}})
        covering.push_back(rel.line.str() + "+" + v.cu());
    }
  CHECK(covering == std::vector<std::string>{"2.7+cu128",  "2.8+cu128",  "2.8+cu129",  "2.9+cu128",  "2.9+cu129",
                                             "2.9+cu130",  "2.10+cu128", "2.10+cu129", "2.10+cu130", "2.11+cu128",
                                             "2.11+cu129", "2.11+cu130", "2.12+cu129", "2.12+cu130", "2.12+cu132", "2.13+cu129",
                                             "2.13+cu130", "2.13+cu132", "2.14+cu130", "2.14+cu132", "2.15+cu130",
                                             "2.15+cu132"});
  // The newest patch is pinned; the matching packages come with it.
  const auto* r214 = r.find(Version{{2, 14}});
  REQUIRE(r214);
  CHECK(r214->pin() == "2.14.0");
  CHECK(doctor::requirements(*r214) == "torch==2.14.0 \"torchvision==0.29.*\" \"torchaudio==2.11.*\"");
  CHECK(doctor::requirements(*r.find(Version{{2, 15}})) == "torch==2.15.0 \"torchvision==0.30.*\"");
  // The index comes from the data file's pattern, with the variant's tag put in.
  std::string expected = r.index_url;
  expected.replace(expected.find("{cu}"), 4, "cu128");
  CHECK(r.index_for(r27->variants.back()) == expected);
  CHECK(expected.find("{cu}") == std::string::npos);
  CHECK(r.minor_compat_driver(12) == Version::parse("525.60.13"));
  CHECK_FALSE(r.minor_compat_driver(10));
}

TEST_CASE("releases: agree with the recipes' [arch.official] lists", "[doctor]") {
  auto recipes = recipe::load_shipped();
  REQUIRE(recipes);
  int compared = 0, platform_compared = 0;
  for (const auto& rc : *recipes) {
    if (rc.package != "torch" || rc.abstract) continue;
    const auto* rel = releases().find(rc.version);
    INFO(rc.name);
    REQUIRE(rel);  // a row of torch-releases.toml, or the line the recipe adds without wheels
    if (!rel->recorded) {
      // A line with a recipe and no row has no official wheels, so the recipe records no list of them.
      CHECK(rc.official.empty());
      for (const auto& [platform, facts] : rc.platforms) CHECK(facts.official.empty());
      continue;
    }
    for (const auto& [cuda, list] : rc.official) {
      auto v = std::find_if(rel->variants.begin(), rel->variants.end(),
                            [&](const doctor::WheelVariant& w) { return w.cuda == *Version::parse(cuda); });
      REQUIRE(v != rel->variants.end());
      CHECK(v->arch_list == list);
      ++compared;
    }
    // [platform.NAME] official: the lists of that platform's official wheels (aarch64 for sbsa).
    for (const auto& [platform, facts] : rc.platforms) {
      const auto* p = toolchain::Platforms::shipped().find(platform);
      REQUIRE(p);
      for (const auto& [cuda, list] : facts.official) {
        const auto& vs = rel->variants_for(p->official_wheels);
        auto v = std::find_if(vs.begin(), vs.end(), [&](const doctor::WheelVariant& w) { return w.cuda == *Version::parse(cuda); });
        INFO(platform << " " << cuda);
        REQUIRE(v != vs.end());
        CHECK(v->arch_list == list);
        ++compared;
        ++platform_compared;
      }
    }
  }
  CHECK(compared >= 13);
  CHECK(platform_compared >= 19);  // 3 (2.14) before the aarch64 lists of 2.7 and 2.9 – 2.13
}

TEST_CASE("releases: bad data is one line with file:line:column", "[doctor]") {
  t::TempDir dir;
  const auto& data = arch::ArchData::shipped();
  auto load = [&](const std::string& body) {
    auto p = dir.write("torch-releases.toml", "index_url = \"https://x/{cu}\"\n[minor_version_compat]\n\"12\" = \"525.60.13\"\n" + body);
    return doctor::Releases::load(p, data);
  };
  CHECK(load("[torch.\"2.7\"]\ncuda = [\"12.8\"]\n[torch.\"2.7\".arch_list]\n\"12.8\" = \"9.0\"\n"));
  auto typo = load("[torch.\"2.7\"]\ncuda = [\"12.8\"]\nnotes = \"x\"\n");
  REQUIRE_FALSE(typo);
  CHECK(contains(typo.error().message, "torch-releases.toml:6:1"));
  CHECK(contains(typo.error().message, "unknown key 'notes'"));
  CHECK(contains(typo.error().message, "did you mean 'note'"));
  auto stray = load("[torch.\"2.7\"]\ncuda = [\"12.8\"]\n[torch.\"2.7\".arch_list]\n\"12.6\" = \"9.0\"\n");
  REQUIRE_FALSE(stray);
  CHECK(contains(stray.error().message, ":7:"));
  CHECK(contains(stray.error().message, "not one of its cuda variants"));
  auto bad_arch = load("[torch.\"2.7\"]\ncuda = [\"12.8\"]\n[torch.\"2.7\".arch_list]\n\"12.8\" = \"9.5\"\n");
  REQUIRE_FALSE(bad_arch);
  CHECK(contains(bad_arch.error().message, "9.5"));
  auto bad_line = load("[torch.\"two\"]\ncuda = [\"12.8\"]\n");
  REQUIRE_FALSE(bad_line);
  CHECK(contains(bad_line.error().message, "release line"));
  auto no_cu = doctor::Releases::load(dir.write("r2.toml", "index_url = \"https://x\"\n[minor_version_compat]\n[torch]\n"), data);
  REQUIRE_FALSE(no_cu);
  CHECK(contains(no_cu.error().message, "{cu}"));
  auto missing = doctor::Releases::load(dir.write("r3.toml", "index_url = \"https://x/{cu}\"\n"), data);
  REQUIRE_FALSE(missing);
  CHECK(contains(missing.error().message, "minor_version_compat"));
}

TEST_CASE("doctor: versions and image names", "[doctor]") {
  CHECK(doctor::torch_release("2.5.1+cu124") == Version::parse("2.5.1"));
  CHECK(doctor::torch_release("2.7.0a0+git1234") == Version::parse("2.7.0"));
  CHECK(doctor::torch_release("2.8.0.dev20250601+cu128") == Version::parse("2.8.0"));
  CHECK_FALSE(doctor::torch_release("unknown"));
  auto i = doctor::image_from_name("sm_90a");
  REQUIRE(i);
  CHECK(i->kind == arch::CodeKind::sass);
  CHECK(i->cc == Cc{9, 0});
  CHECK(i->variant == arch::Variant::a);
  auto p = doctor::image_from_name("compute_120");
  REQUIRE(p);
  CHECK(p->kind == arch::CodeKind::ptx);
  CHECK(p->cc == Cc{12, 0});
  CHECK_FALSE(doctor::image_from_name("gfx90a"));
  CHECK(doctor::sm_option({Cc{8, 6}, Cc{12, 0}}) == "86,120");
}

TEST_CASE("doctor: the probe's output", "[doctor]") {
  const std::string m = "@@archbuild-doctor@@";
  SECTION("both stages") {
    auto f = doctor::parse_torch_probe(
        "noise\n" + m + R"({"python":"/usr/bin/python3","python_version":"3.11.2","found":true,"dir":"/s/torch","version":"2.5.1+cu124","cuda":"12.4","hip":null,"version_read":true})" +
            "\nmore noise\n" + m + R"({"imported":true,"version":"2.5.1+cu124","cuda":"12.4","cuda_available":false,"arch_list_missing":"empty"})" + "\n",
        0, "python3");
    REQUIRE(f);
    CHECK(f->version == "2.5.1+cu124");
    CHECK(f->cuda == "12.4");
    CHECK_FALSE(f->hip);
    CHECK(f->dir == "/s/torch");
    CHECK(f->python_version == Version::parse("3.11.2"));
    CHECK(f->cuda_available == false);
    CHECK_FALSE(f->arch_list);
    CHECK(f->arch_list_missing == "empty");
    CHECK_FALSE(f->import_error);
  }
  SECTION("a CPU-only torch, with an arch list") {
    auto f = doctor::parse_torch_probe(
        m + R"({"found":true,"dir":"/s/torch","version":"2.5.1+cpu","cuda":null,"version_read":true})" + "\n" + m +
            R"J({"imported":true,"arch_list":["sm_90"],"arch_list_source":"torch.cuda.get_arch_list()"})J",
        0, "python3");
    REQUIRE(f);
    CHECK_FALSE(f->cuda);
    CHECK(f->version_read);
    REQUIRE(f->arch_list);
    CHECK(*f->arch_list == std::vector<std::string>{"sm_90"});
  }
  SECTION("the interpreter died while importing torch") {
    auto f = doctor::parse_torch_probe(m + R"({"found":true,"dir":"/s/torch","version":"2.7.1+cu128","cuda":"12.8","version_read":true})",
                                       -1, "python3");
    REQUIRE(f);
    REQUIRE(f->import_error);
    CHECK(contains(*f->import_error, "died"));
    CHECK(contains(f->arch_list_missing, "cannot be imported"));
    CHECK(f->cuda == "12.8");
  }
  SECTION("no torch, no output") {
    auto none = doctor::parse_torch_probe(m + R"({"found":false})", 0, "py");
    REQUIRE_FALSE(none);
    CHECK(none.error().exit == Exit::missing_tool);
    CHECK(contains(none.error().message, "no torch is installed for py"));
    auto empty = doctor::parse_torch_probe("", 1, "py");
    REQUIRE_FALSE(empty);
    CHECK(empty.error().exit == Exit::missing_tool);
  }
}

TEST_CASE("doctor: RTX 5090 against a 2.5+cu124 torch: no kernel image - the newest official wheel or a build",
          "[doctor]") {
  FakeAdvisor adv;
  auto f = facts("2.5.1+cu124", "12.4", cu124_like(), {Cc{12, 0}});
  auto r = doctor::diagnose(f, adv.fn());
  REQUIRE(r.targets.size() == 1);
  CHECK(r.targets[0].result == arch::RunResult::no_kernel_image);
  CHECK(r.targets[0].basis == "lib/");
  REQUIRE(r.findings.size() == 1);
  const auto& fd = r.findings[0];
  CHECK(fd.id == "no-kernel-image");
  CHECK(fd.cc == Cc{12, 0});
  CHECK(contains(fd.summary, "no kernel image is available"));
  CHECK(any_contains(fd.evidence, "lib/libtorch_cuda.so carries sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"));
  CHECK_FALSE(any_contains(fd.evidence, "libtorch_cpu"));  // no device code: not evidence
  REQUIRE(fd.fixes.size() == 2);
  CHECK(fd.fixes[0].kind == "official-wheel");
  // The newest release whose wheels cover 12.0, with its index (no driver known: the newest CUDA).
  const auto newest = t::newest_official();
  CHECK(contains(fd.fixes[0].text, "torch " + newest.line));
  CHECK(contains(fd.fixes[0].text, "cu132"));
  CHECK(fd.fixes[0].command == "python3 -m pip install " + newest.requirements() + " --index-url " + index_of("cu132"));
  CHECK(contains(fd.fixes[0].also, "2.7 (cu128), 2.8 (cu128, cu129), 2.9 (cu128, cu129, cu130)"));
  CHECK(fd.fixes[1].kind == "build");
  CHECK(fd.fixes[1].command == "archbuild wheel --sm 120 --recipe torch-2.9");
  // Staying on 2.5 was asked and refused; the refusal is a note, not a fix.
  CHECK(any_contains(fd.notes, "a build of torch 2.5 for 12.0 is refused: arch-syntax"));
  CHECK(adv.calls == std::vector<std::pair<std::string, std::string>>{{"120", "2.5"}, {"120", ""}});
}

TEST_CASE("doctor: two GPUs of one CC give one finding naming both", "[doctor]") {
  FakeAdvisor adv;
  auto f = facts("2.5.1+cu124", "12.4", cu124_like(), {Cc{12, 0}, Cc{12, 0}});
  f.targets[0].source = "GPU 0: NVIDIA GeForce RTX 5090";
  f.targets[1].source = "GPU 1: NVIDIA GeForce RTX 5090";
  auto r = doctor::diagnose(f, adv.fn());
  CHECK(r.targets.size() == 2);
  REQUIRE(r.findings.size() == 1);
  CHECK(any_contains(r.findings[0].evidence, "GPU 0"));
  CHECK(any_contains(r.findings[0].evidence, "GPU 1"));
  CHECK(r.findings[0].fixes.back().command == "archbuild wheel --sm 120 --recipe torch-2.9");
}

TEST_CASE("doctor: H100 against a 2.7+cu128 torch runs natively: no finding", "[doctor]") {
  FakeAdvisor adv;
  auto r = doctor::diagnose(facts("2.7.1+cu128", "12.8", cu128_like(), {Cc{9, 0}}), adv.fn());
  CHECK(r.findings.empty());
  REQUIRE(r.targets.size() == 1);
  CHECK(r.targets[0].result == arch::RunResult::native);
  REQUIRE(r.targets[0].image);
  CHECK(r.targets[0].image->name() == "sm_90");
  CHECK(adv.calls.empty());  // no fix needed, resolution never asked
}

TEST_CASE("doctor: 12.1 against 2.7+cu128", "[doctor]") {
  FakeAdvisor adv;
  SECTION("the official list: sm_120 SASS runs on 12.1 (same major, lower minor)") {
    auto r = doctor::diagnose(facts("2.7.1+cu128", "12.8", cu128_like(), {Cc{12, 1}}), adv.fn());
    CHECK(r.findings.empty());
    CHECK(r.targets[0].result == arch::RunResult::compatible_sass);
    CHECK(any_contains(r.notes, "12.1 runs sm_120 SASS"));
  }
  SECTION("a lib with sm_90 SASS and compute_120 PTX only: PTX only, official fix with SASS") {
    auto r = doctor::diagnose(facts("2.7.1+cu128", "12.8", sass({80, 90}, 120), {Cc{12, 1}}), adv.fn());
    REQUIRE(r.findings.size() == 1);
    const auto& fd = r.findings[0];
    CHECK(fd.id == "ptx-only");
    CHECK(contains(fd.summary, "PTX JIT from compute_120"));
    CHECK(any_contains(fd.evidence, "only compute_120 runs on 12.1"));
    REQUIRE_FALSE(fd.fixes.empty());
    CHECK(fd.fixes[0].kind == "official-wheel");
    CHECK(contains(fd.fixes[0].text, "sm_120 on 12.1 (compatible-sass)"));
    CHECK(contains(fd.fixes[0].command, "torch==" + t::newest_official().latest));  // the newest release that carries it
    // Another line than the installed one: a build that stays on 2.7, then the general build.
    REQUIRE(fd.fixes.size() == 3);
    CHECK(fd.fixes[1].command == "archbuild wheel --sm 121 --recipe torch-2.7");
    CHECK(fd.fixes[2].command == "archbuild wheel --sm 121 --recipe torch-2.9");
  }
}

TEST_CASE("doctor: driver too old for torch's CUDA runtime", "[doctor]") {
  FakeAdvisor adv;
  SECTION("below the minor-version-compatibility floor") {
    auto f = facts("2.7.1+cu128", "12.8", cu128_like(), {Cc{8, 9}});
    f.targets[0].source = "GPU 0: NVIDIA GeForce RTX 4090";
    f.driver_version = "470.82.01";
    f.driver_source = "nvidia-smi";
    auto r = doctor::diagnose(f, adv.fn());
    REQUIRE(r.findings.size() == 1);
    const auto& fd = r.findings[0];
    CHECK(fd.id == "driver-too-old");
    CHECK(contains(fd.summary, "470.82.01"));
    CHECK(contains(fd.summary, ">= 570.26"));
    CHECK(contains(fd.summary, "525.60.13"));
    CHECK(any_contains(fd.evidence, "cuda-12.8.toml: CUDA 12.8 needs driver >= 570.26"));
    REQUIRE_FALSE(fd.fixes.empty());
    CHECK(fd.fixes[0].kind == "driver");
    CHECK(contains(fd.fixes[0].text, ">= 570.26"));
    // No recorded official wheel's CUDA runs on 470 in full (cu118 needs 520.61.05).
    CHECK(fd.fixes.size() == 1);
    CHECK(any_contains(fd.notes, "no official wheel"));
    CHECK(r.targets[0].result == arch::RunResult::compatible_sass);  // sm_86 runs on 8.9
  }
  SECTION("between the floor and the minimum: a note, unless the GPU needs the PTX JIT") {
    auto f = facts("2.7.1+cu128", "12.8", cu128_like(), {Cc{8, 9}});
    f.driver_version = "560.35.03";
    auto r = doctor::diagnose(f, adv.fn());
    CHECK(r.findings.empty());
    CHECK(any_contains(r.notes, "minor-version compatibility"));
    auto g = facts("2.7.1+cu128", "12.8", sass({90}, 120), {Cc{12, 1}});
    g.driver_version = "560.35.03";
    auto r2 = doctor::diagnose(g, adv.fn());
    REQUIRE(find(r2, "driver-too-old"));
    CHECK(contains(find(r2, "driver-too-old")->summary, "cannot JIT-compile"));
    CHECK(find(r2, "ptx-only"));
    CHECK(r2.findings[0].id == "driver-too-old");  // the more fundamental finding first
  }
  SECTION("keeping the driver: an older CUDA's official wheel") {
    auto f = facts("2.6.0+cu126", "12.6", cu124_like(), {Cc{8, 6}});
    f.driver_version = "520.61.05";  // >= 11.8's minimum, below 12.x's floor
    auto r = doctor::diagnose(f, adv.fn());
    const auto* fd = find(r, "driver-too-old");
    REQUIRE(fd);
    REQUIRE(fd->fixes.size() == 2);
    CHECK(contains(fd->fixes[1].text, "or keep this driver"));
    CHECK(contains(fd->fixes[1].command, "torch==2.6.0"));
    CHECK(contains(fd->fixes[1].command, "whl/cu118"));
  }
  SECTION("no GPU detected: the driver is not checked") {
    auto f = facts("2.7.1+cu128", "12.8", cu128_like(), {Cc{9, 0}});
    f.driver_missing = "no GPU detected on this host (nvml: not found)";
    auto r = doctor::diagnose(f, adv.fn());
    CHECK(r.findings.empty());
    CHECK(any_contains(r.notes, "driver not checked: no GPU detected"));
  }
}

TEST_CASE("doctor: a CPU-only torch on a GPU host", "[doctor]") {
  FakeAdvisor adv;
  auto f = facts("2.5.1+cpu", std::nullopt, {}, {Cc{9, 0}});
  f.driver_version = "580.65.06";
  auto r = doctor::diagnose(f, adv.fn());
  REQUIRE(r.findings.size() == 1);
  const auto& fd = r.findings[0];
  CHECK(fd.id == "cpu-only");
  CHECK(contains(fd.summary, "torch.version.cuda is None"));
  REQUIRE_FALSE(fd.fixes.empty());
  // The newest release and CUDA this driver runs in full: 580.65.06 is CUDA 13.0's minimum, below
  // 13.2's (toolchains/cuda-13.2.toml), so cu130.
  CHECK(fd.fixes[0].command == "python3 -m pip install " + t::newest_official().requirements() + " --index-url " +
                                   index_of("cu130"));
  // A build staying on 2.5 is asked (and refused by the fake), then the general build.
  CHECK(adv.calls == std::vector<std::pair<std::string, std::string>>{{"90", "2.5"}, {"90", ""}});
  CHECK_FALSE(r.targets[0].result);  // nothing to judge in a CPU-only torch
}

TEST_CASE("doctor: the toolkit in CUDA_HOME cannot compile the GPU's arch", "[doctor]") {
  FakeAdvisor adv;
  auto f = facts("2.7.1+cu128", "12.8", cu128_like(), {Cc{12, 0}});
  toolchain::Toolkit tk;
  tk.root = "/usr/local/cuda-12.6";
  tk.nvcc = tk.root / "bin/nvcc";
  tk.version = *Version::parse("12.6.85");
  tk.found_by = "CUDA_HOME";
  f.toolkit = tk;
  auto r = doctor::diagnose(f, adv.fn());
  REQUIRE(r.findings.size() == 1);
  const auto& fd = r.findings[0];
  CHECK(fd.id == "toolkit-cannot-compile");
  CHECK(contains(fd.summary, "CUDA 12.6.85 toolkit at /usr/local/cuda-12.6 (CUDA_HOME) cannot compile for 12.0"));
  CHECK(any_contains(fd.evidence, "cuda-12.6.toml: CUDA 12.6 does not compile sm_120"));
  REQUIRE(fd.fixes.size() == 1);
  CHECK(contains(fd.fixes[0].text, "CUDA 12.8 or newer"));
  CHECK(fd.fixes[0].command == "export CUDA_HOME=/usr/local/cuda-12.8");
  // nvcc's own list is believed over the data when it lacks the arch.
  tk.version = *Version::parse("12.8");
  tk.listed = std::vector<Cc>{Cc{9, 0}};
  f.toolkit = tk;
  auto r2 = doctor::diagnose(f, adv.fn());
  REQUIRE(find(r2, "toolkit-cannot-compile"));
  CHECK(any_contains(find(r2, "toolkit-cannot-compile")->evidence, "--list-gpu-arch lacks compute_120"));
  tk.listed = std::vector<Cc>{Cc{9, 0}, Cc{12, 0}};
  f.toolkit = tk;
  CHECK(doctor::diagnose(f, adv.fn()).findings.empty());
}

TEST_CASE("doctor: judged from the arch list when lib/ has no device code", "[doctor]") {
  FakeAdvisor adv;
  auto f = facts("2.5.1+cu124", "12.4", {}, {Cc{12, 0}, Cc{8, 6}});
  f.torch.arch_list = std::vector<std::string>{"sm_80", "sm_86", "sm_90"};
  f.torch.arch_list_source = "torch.cuda.get_arch_list()";
  auto r = doctor::diagnose(f, adv.fn());
  REQUIRE(r.targets.size() == 2);
  CHECK(r.targets[0].result == arch::RunResult::no_kernel_image);
  CHECK(r.targets[0].basis == "torch.cuda.get_arch_list()");
  CHECK(r.targets[1].result == arch::RunResult::native);
  REQUIRE(r.findings.size() == 1);
  CHECK(r.findings[0].cc == Cc{12, 0});
  // Fixes are for every target: the official wheel must keep 8.6 too, the build names both.
  CHECK(contains(r.findings[0].fixes[0].text, "sm_86 on 8.6"));
  CHECK(r.findings[0].fixes.back().command == "archbuild wheel --sm 120,86 --recipe torch-2.9");
  CHECK(any_contains(r.notes, "judged from torch.cuda.get_arch_list()"));
  // Neither lib/ nor an arch list: nothing to judge is a finding of its own, never "runs on every
  // target" (before: no finding, exit 0).
  f.torch.arch_list.reset();
  f.torch.arch_list_missing = "torch.cuda.get_arch_list() is empty";
  auto r2 = doctor::diagnose(f, adv.fn());
  REQUIRE(r2.findings.size() == 1);
  CHECK(r2.findings[0].id == "coverage-unknown");
  CHECK(contains(r2.findings[0].summary, "cannot tell whether"));
  CHECK(any_contains(r2.findings[0].evidence, "torch.cuda.get_arch_list() is empty"));
}

TEST_CASE("doctor: no target, no diagnosis", "[doctor]") {
  FakeAdvisor adv;
  auto f = facts("2.5.1+cu124", "12.4", cu124_like(), {});
  f.no_targets_reason = "no GPU found on this host";
  auto r = doctor::diagnose(f, adv.fn());
  CHECK(r.findings.empty());
  CHECK(r.notes == std::vector<std::string>{"no GPU found on this host"});
}
