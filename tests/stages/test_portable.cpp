// stages/portable: the package stage's repair over libraries
// gcc builds here: RUNPATH into the nvidia-* package's folder and Requires-Dist (read back with
// the project's ELF reader and from METADATA), validate's closure before and after, the host
// layout's host-bound mark, the platform tag from GLIBC versions, and determinism.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "arch/arch_data.hpp"
#include "arch/parse.hpp"
#include "binary/elf.hpp"
#include "run/runner.hpp"
#include "run/scripted_runner.hpp"
#include "stages/portable.hpp"
#include "stages/reproducible.hpp"
#include "support/process.hpp"
#include "support/shipped.hpp"
#include "support/tempdir.hpp"
#include "validate/closure.hpp"
#include "validate/validate.hpp"

using namespace archbuild;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kWheel = "demo_pkg-1.0+cu130.sm90-cp311-cp311-linux_x86_64.whl";
const char* const kDistInfo = "demo_pkg-1.0+cu130.sm90.dist-info/";

// gcc -shared of a library calling pthread_create (a GLIBC_2.x need), linking libcudart by the
// RUNPATH given when `cuda`; empty with `skip` set when gcc or the toolkit is absent.
std::string gcc_library(const test::TempDir& dir, bool cuda, const std::string& runpath, std::string& skip) {
  if (test::which("gcc").empty()) {
    skip = "no gcc";
    return {};
  }
  if (cuda && !fs::exists("/usr/local/cuda/lib64/libcudart.so")) {
    skip = "no /usr/local/cuda/lib64/libcudart.so";
    return {};
  }
  std::string code = "#include <pthread.h>\nstatic void* run(void* p) { return p; }\n";
  code += cuda ? "extern int cudaGetDeviceCount(int*);\nint k(void) { int n = 0; pthread_t t; pthread_create(&t, 0, run, 0);"
                 " return cudaGetDeviceCount(&n) + n; }\n"
               : "int k(void) { pthread_t t; return pthread_create(&t, 0, run, 0); }\n";
  auto src = dir.write(cuda ? "k.c" : "plain.c", code);
  auto so = dir / (cuda ? "libk.so" : "libplain.so");
  std::vector<std::string> args{"-shared", "-fPIC", "-o", so.string(), src.string()};
  if (cuda) args.insert(args.end(), {"-L/usr/local/cuda/lib64", "-lcudart", "-Wl,-rpath," + runpath});
  auto r = test::run(test::which("gcc"), args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::ifstream in(so, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A gcc-built library linking libcudart by the toolkit's path, for the tests that repair it
// with patchelf; `skip` says why not where gcc, the toolkit or patchelf is missing.
std::string library_to_repair(const test::TempDir& dir, std::string& skip) {
  auto so = gcc_library(dir, true, "/usr/local/cuda/lib64", skip);
  if (skip.empty() && test::which("patchelf").empty()) skip = "no patchelf (scripts/install-deps installs it)";
  return so;
}

// A wheel as a build leaves it (RECORD written by normalize_wheel, as the pipeline's would be).
fs::path write_wheel(const test::TempDir& dir, const std::string& sub, const std::string& library,
                     const std::string& requires_dist = "") {
  std::vector<stages::ZipMember> m = {
      {"demo_pkg/__init__.py", false, false, "\n"},
      {"demo_pkg/libk.so", false, true, library},
      {std::string(kDistInfo) + "METADATA", false, false,
       "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0+cu130.sm90\n" + requires_dist + "\nA description.\n"},
      {std::string(kDistInfo) + "WHEEL", false, false,
       "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n"},
      {std::string(kDistInfo) + "top_level.txt", false, false, "demo_pkg\n"},
  };
  fs::create_directories(dir / sub);
  fs::path p = dir / sub / kWheel;
  REQUIRE(stages::write_zip_members(p, m).ok());
  REQUIRE(stages::normalize_wheel(p, p, 1735689600).ok());
  return p;
}

std::string member(const fs::path& wheel, const std::string& name) {
  auto ms = stages::read_zip_members(wheel);
  REQUIRE(ms.ok());
  for (const auto& m : *ms)
    if (m.name == name) return m.data;
  FAIL("no member " << name << " in " << wheel);
  return {};
}

validate::LibraryFacts shipped_facts() {
  auto f = validate::load_library_facts(validate::shipped_library_facts());
  REQUIRE(f.ok());
  return *f;
}

validate::Report validate_it(const fs::path& wheel, validate::ValidateOptions o = {}) {
  if (!o.libraries) o.libraries = &test::shipped_library_facts();
  validate::Exec none = [](const validate::Command& c) -> Result<validate::Outcome> {
    FAIL("no process expected, got " << c.argv.front());
    return validate::Outcome{};
  };
  auto r = validate::validate_wheel(wheel, arch::parse_arch_list("90", arch::ArchData::shipped()).take(), o, none);
  REQUIRE(r.ok());
  return *r;
}

const validate::Check& check(const validate::Report& r, const std::string& name) {
  const auto* c = r.find(name);
  if (!c) FAIL("no check " << name);
  return *c;
}

stages::PortableOptions options_in(const test::TempDir& dir, recipe::WheelLayout layout) {
  stages::PortableOptions o;
  o.layout = layout;
  o.cuda = Version::parse("13.0");
  o.patchelf = test::which("patchelf");
  o.scratch = dir / "scratch";
  o.log = dir / "package.log";
  return o;
}

// The manylinux tag the host's GLIBC needs of `library` decide (its highest GLIBC_ version).
std::string expected_tag(const std::string& library) {
  binary::Bytes b(reinterpret_cast<const std::uint8_t*>(library.data()), library.size());
  auto d = binary::read_dynamic(b);
  REQUIRE(d.ok());
  auto high = validate::highest_versions({{"demo_pkg/libk.so", *d}});
  return stages::choose_platform_tag("x86_64", high, shipped_facts()).platform;
}

}  // namespace

TEST_CASE("portable: a library linking libcudart by the toolkit's path fails validate, repaired it passes",
          "[stages][portable][closure]") {
  test::TempDir dir;
  std::string skip;
  auto so = library_to_repair(dir, skip);
  if (!skip.empty()) {
    WARN("##archbuild-skip## " << skip);
    return;
  }
  auto wheel = write_wheel(dir, "a", so);
  // Before: validate names the library, the file and where this host has it.
  auto before = validate_it(wheel);
  CHECK(check(before, "closure").status == validate::Status::fail);
  CHECK_THAT(check(before, "closure").summary, Catch::Contains("demo_pkg/libk.so needs libcudart.so.13") &&
                                                   Catch::Contains("found only at /usr/local/cuda"));

  run::ProcessRunner runner;
  auto r = stages::make_portable(wheel, shipped_facts(), options_in(dir, recipe::WheelLayout::official), runner);
  INFO((r ? "" : r.error().message));
  REQUIRE(r.ok());
  REQUIRE(stages::normalize_wheel(r->wheel, r->wheel, 1735689600).ok());
  // The tag: renamed together in the file name and WHEEL; the old file is gone.
  std::string tag = expected_tag(so);
  CHECK(tag.rfind("manylinux_2_", 0) == 0);
  CHECK(r->wheel.filename().string() == "demo_pkg-1.0+cu130.sm90-cp311-cp311-" + tag + ".whl");
  CHECK_FALSE(fs::exists(wheel));
  CHECK_THAT(member(r->wheel, std::string(kDistInfo) + "WHEEL"), Catch::Contains("Tag: cp311-cp311-" + tag + "\n"));
  // RUNPATH, read back with the project's ELF reader: the package's folder, the toolkit's gone.
  auto lib = member(r->wheel, "demo_pkg/libk.so");
  auto d = binary::read_dynamic(binary::Bytes(reinterpret_cast<const std::uint8_t*>(lib.data()), lib.size()));
  REQUIRE(d.ok());
  CHECK(d->runpath == std::vector<std::string>{"$ORIGIN/../nvidia/cu13/lib"});
  CHECK(d->rpath.empty());
  // Requires-Dist at the version built against (data/validate/libraries.toml), in the header.
  auto meta = member(r->wheel, std::string(kDistInfo) + "METADATA");
  CHECK_THAT(meta, Catch::Contains("Version: 1.0+cu130.sm90\nRequires-Dist: nvidia-cuda-runtime==13.0.*\n\nA description."));
  // The manifest's record.
  const auto& p = r->portability;
  CHECK(p["host_bound"] == false);
  CHECK(p["libraries"][0]["package"] == "nvidia-cuda-runtime");
  CHECK(p["libraries"][0]["files"][0] == "demo_pkg/libk.so");
  CHECK(p["runpath"]["demo_pkg/libk.so"]["was"][0] == "/usr/local/cuda/lib64");
  CHECK(p["tag"] == tag);
  // After: the closure and the tag hold, RECORD is consistent.
  auto after = validate_it(r->wheel);
  INFO(check(after, "closure").summary);
  CHECK(check(after, "closure").status == validate::Status::pass);
  CHECK(check(after, "closure").evidence["files"][0]["needed"][0]["where"] == "nvidia-cuda-runtime: nvidia/cu13/lib");
  CHECK(check(after, "platform-tag").status == validate::Status::pass);
  CHECK(check(after, "record").status == validate::Status::pass);
  CHECK_FALSE(after.find("host-bound"));
}

TEST_CASE("portable: a CUDA 12 build depends on the nvidia-*-cu12 packages, each in its own folder",
          "[stages][portable][closure]") {
  test::TempDir dir;
  std::string skip;
  auto so = library_to_repair(dir, skip);
  if (!skip.empty()) {
    WARN("##archbuild-skip## " << skip);
    return;
  }
  // This host has only CUDA 13: make the library what a CUDA 12.8 build links (libcudart.so.12)
  // plus cuDNN, whose soname both majors share.
  auto so_path = dir.write("cu12/libk.so", so);
  // Two calls: patchelf 0.14 given both at once writes libcudnn.so.9 over the replaced entry.
  for (std::vector<std::string> args : {std::vector<std::string>{"--replace-needed", "libcudart.so.13", "libcudart.so.12"},
                                        std::vector<std::string>{"--add-needed", "libcudnn.so.9"}}) {
    args.push_back(so_path.string());
    auto pe = test::run(test::which("patchelf"), args);
    INFO(pe.err);
    REQUIRE(pe.status == 0);
  }
  std::ifstream in(so_path, std::ios::binary);
  std::string lib12((std::istreambuf_iterator<char>(in)), {});
  auto wheel = write_wheel(dir, "a", lib12);

  auto o = options_in(dir, recipe::WheelLayout::official);
  o.cuda = Version::parse("12.8");
  o.built_against = {{"nvidia-cudnn-cu12", "9.8.0.87"}, {"numpy", "2.3.0"}};  // the build venv had cuDNN
  run::ProcessRunner runner;
  auto r = stages::make_portable(wheel, shipped_facts(), o, runner);
  INFO((r ? "" : r.error().message));
  REQUIRE(r.ok());
  REQUIRE(stages::normalize_wheel(r->wheel, r->wheel, 1735689600).ok());
  auto out = member(r->wheel, "demo_pkg/libk.so");
  auto d = binary::read_dynamic(binary::Bytes(reinterpret_cast<const std::uint8_t*>(out.data()), out.size()));
  REQUIRE(d.ok());
  auto runpath = d->runpath;  // in DT_NEEDED order
  std::sort(runpath.begin(), runpath.end());
  CHECK(runpath == std::vector<std::string>{"$ORIGIN/../nvidia/cuda_runtime/lib", "$ORIGIN/../nvidia/cudnn/lib"});
  auto meta = member(r->wheel, std::string(kDistInfo) + "METADATA");
  CHECK_THAT(meta, Catch::Contains("Requires-Dist: nvidia-cuda-runtime-cu12==12.8.*\n"));
  // cuDNN came from the build venv: exactly that version; the runtime from the data's pattern.
  CHECK_THAT(meta, Catch::Contains("Requires-Dist: nvidia-cudnn-cu12==9.8.0.87\n"));
  for (const auto& l : r->portability["libraries"])
    CHECK(l["version"]["from"] == (l["package"] == "nvidia-cudnn-cu12" ? "the build venv" : "data/validate/libraries.toml"));
  CHECK_THAT(meta, !Catch::Contains("-cu13") && !Catch::Contains("nvidia-cuda-runtime="));
  CHECK(r->portability["host_bound"] == false);
  auto after = validate_it(r->wheel);
  INFO(check(after, "closure").summary);
  CHECK(check(after, "closure").status == validate::Status::pass);
}

TEST_CASE("portable: the repair is deterministic and a second repair changes nothing", "[stages][portable][reproducible]") {
  test::TempDir dir;
  std::string skip;
  auto so = library_to_repair(dir, skip);
  if (!skip.empty()) {
    WARN("##archbuild-skip## " << skip);
    return;
  }
  run::ProcessRunner runner;
  auto repaired = [&](const std::string& sub) {
    auto w = write_wheel(dir, sub, so);
    auto r = stages::make_portable(w, shipped_facts(), options_in(dir, recipe::WheelLayout::official), runner);
    REQUIRE(r.ok());
    REQUIRE(stages::normalize_wheel(r->wheel, r->wheel, 1735689600).ok());
    return r->wheel;
  };
  auto a = repaired("a");
  auto b = repaired("b");
  CHECK(stages::differing_members(a, b).empty());
  CHECK(test::read_file(a) == test::read_file(b));
  // Idempotent: the package stage may meet its own output again (a resumed PEP 517 build).
  run::ScriptedRunner strict;
  strict.strict();
  auto again = stages::make_portable(a, shipped_facts(), options_in(dir, recipe::WheelLayout::official), strict);
  REQUIRE(again.ok());
  CHECK(again->wheel == a);
  CHECK(strict.calls().empty());
  REQUIRE(stages::normalize_wheel(a, a, 1735689600).ok());
  CHECK(test::read_file(a) == test::read_file(b));
}

TEST_CASE("portable: layout \"host\" keeps the toolkit's RUNPATH, marks the wheel host-bound, validate says so",
          "[stages][portable][closure]") {
  test::TempDir dir;
  std::string skip;
  auto so = gcc_library(dir, true, "/usr/local/cuda/lib64", skip);
  if (!skip.empty()) {
    WARN("##archbuild-skip## " << skip);
    return;
  }
  auto wheel = write_wheel(dir, "a", so);
  run::ScriptedRunner strict;  // no patchelf: nothing is rewritten
  strict.strict();
  auto r = stages::make_portable(wheel, shipped_facts(), options_in(dir, recipe::WheelLayout::host), strict);
  REQUIRE(r.ok());
  CHECK(strict.calls().empty());
  CHECK(r->wheel == wheel);  // linux_x86_64 stays: no manylinux tag is true of it
  const auto& p = r->portability;
  CHECK(p["host_bound"] == true);
  CHECK_THAT(p["host_bound_reason"].get<std::string>(),
             Catch::Contains("[wheel] layout = \"host\"") && Catch::Contains("libcudart.so.13"));
  CHECK(p["host_libraries"][0]["soname"] == "libcudart.so.13");
  CHECK(p["tag"] == "linux_x86_64");
  CHECK_THAT(p["tag_reason"].get<std::string>(), Catch::StartsWith("host-bound"));
  CHECK(p["requires_dist"].empty());

  // validate reads the manifest beside the wheel: a named warning, not a closure failure.
  std::ofstream(wheel.string() + ".manifest.json") << json{{"portability", p}}.dump();
  auto v = validate_it(wheel);
  const auto& hb = check(v, "host-bound");
  CHECK(hb.status == validate::Status::warn);
  CHECK_THAT(hb.summary, Catch::Contains("libcudart.so.13") && Catch::Contains("layout = \"host\""));
  CHECK(hb.evidence["libraries"][0]["file"] == "demo_pkg/libk.so");
  CHECK(check(v, "closure").status == validate::Status::pass);
  auto failed = v.failed_names();
  CHECK(std::find(failed.begin(), failed.end(), "host-bound") == failed.end());

  // Under the official layout a library with no nvidia-* package in the data stays a failure.
  auto facts = shipped_facts();
  facts.packages.clear();
  auto w2 = write_wheel(dir, "b", so);
  auto r2 = stages::make_portable(w2, facts, options_in(dir, recipe::WheelLayout::official), strict);
  REQUIRE(r2.ok());
  CHECK(r2->portability["host_bound"] == true);
  CHECK_THAT(r2->portability["host_bound_reason"].get<std::string>(), Catch::Contains("no nvidia-* package"));
  validate::ValidateOptions o;
  o.portability = r2->portability;
  auto v2 = validate_it(r2->wheel, o);
  CHECK(check(v2, "host-bound").status == validate::Status::fail);
  CHECK(check(v2, "closure").status == validate::Status::fail);
}

TEST_CASE("portable: a wheel with no CUDA dependency is unchanged but for a true tag", "[stages][portable]") {
  test::TempDir dir;
  std::string skip;
  auto so = gcc_library(dir, false, "", skip);
  if (!skip.empty()) {
    WARN("##archbuild-skip## " << skip);
    return;
  }
  auto wheel = write_wheel(dir, "a", so);
  auto before = stages::read_zip_members(wheel);
  REQUIRE(before.ok());
  run::ScriptedRunner strict;
  strict.strict();
  auto o = options_in(dir, recipe::WheelLayout::official);
  o.patchelf.clear();  // not needed: no RUNPATH changes
  auto r = stages::make_portable(wheel, shipped_facts(), o, strict);
  INFO((r ? "" : r.error().message));
  REQUIRE(r.ok());
  CHECK(strict.calls().empty());
  std::string tag = expected_tag(so);
  CHECK(r->wheel.filename().string() == "demo_pkg-1.0+cu130.sm90-cp311-cp311-" + tag + ".whl");
  CHECK(r->portability["requires_dist"].empty());
  CHECK(r->portability["runpath"].empty());
  auto after = stages::read_zip_members(r->wheel);
  REQUIRE(after.ok());
  REQUIRE(after->size() == before->size());
  for (std::size_t i = 0; i < after->size(); ++i) {
    INFO((*after)[i].name);
    if ((*after)[i].name.ends_with("WHEEL")) continue;
    CHECK((*after)[i].data == (*before)[i].data);
  }
  REQUIRE(stages::normalize_wheel(r->wheel, r->wheel, 1735689600).ok());
  auto v = validate_it(r->wheel);
  CHECK(check(v, "platform-tag").status == validate::Status::pass);
  CHECK(check(v, "closure").status == validate::Status::pass);
}

TEST_CASE("portable: the platform tag from the GLIBC and libstdc++ versions needed", "[stages][portable]") {
  auto facts = shipped_facts();
  auto V = [](const char* s) { return *Version::parse(s); };
  using Needs = std::map<std::string, validate::NeededVersion>;
  // Nothing versioned: the lowest policy known.
  CHECK(stages::choose_platform_tag("x86_64", Needs{}, facts).platform == "manylinux_2_17_x86_64");
  // GLIBC 2.17 with a libstdc++ only the 2.24 policy allows.
  auto t = stages::choose_platform_tag("x86_64", Needs{{"GLIBC", {V("2.17"), "a.so"}}, {"GLIBCXX", {V("3.4.21"), "b.so"}}},
                                       facts);
  CHECK(t.platform == "manylinux_2_24_x86_64");
  CHECK_THAT(t.reason, Catch::Contains("manylinux_2_24 policy"));
  // GLIBC between policies: its own tag, the lower policy's libstdc++ limits.
  CHECK(stages::choose_platform_tag("x86_64", Needs{{"GLIBC", {V("2.29"), "a.so"}}}, facts).platform ==
        "manylinux_2_29_x86_64");
  // Above the last policy: GLIBC judged only, said so.
  t = stages::choose_platform_tag("x86_64", Needs{{"GLIBC", {V("2.34"), "a.so"}}, {"GLIBCXX", {V("3.4.30"), "a.so"}}},
                                  facts);
  CHECK(t.platform == "manylinux_2_34_x86_64");
  CHECK_THAT(t.reason, Catch::Contains("GLIBC judged only"));
  // A libstdc++ above every known policy with an old glibc: linux_x86_64, the file named.
  t = stages::choose_platform_tag("x86_64", Needs{{"GLIBC", {V("2.17"), "a.so"}}, {"GLIBCXX", {V("3.4.30"), "b.so"}}},
                                  facts);
  CHECK(t.platform == "linux_x86_64");
  CHECK_THAT(t.reason, Catch::Contains("b.so needs GLIBCXX_3.4.30"));
}

TEST_CASE("portable: the recipe's triton is a Requires-Dist", "[stages][portable]") {
  test::TempDir dir;
  std::string skip;
  auto so = gcc_library(dir, false, "", skip);
  if (!skip.empty()) {
    WARN("##archbuild-skip## " << skip);
    return;
  }
  auto wheel = write_wheel(dir, "a", so, "Requires-Dist: typing-extensions>=4.10\n");
  run::ScriptedRunner strict;
  strict.strict();
  auto o = options_in(dir, recipe::WheelLayout::official);
  o.triton = Version::parse("3.5.1");
  auto r = stages::make_portable(wheel, shipped_facts(), o, strict);
  REQUIRE(r.ok());
  auto meta = member(r->wheel, std::string(kDistInfo) + "METADATA");
  CHECK_THAT(meta, Catch::Contains("Requires-Dist: typing-extensions>=4.10\n"
                                   "Requires-Dist: triton==3.5.1; platform_system == \"Linux\"\n\n"));
  CHECK(r->portability["triton"]["requirement"] == "triton==3.5.1; platform_system == \"Linux\"");
}

TEST_CASE("portable: a pin replaces every requirement of its name the project declared", "[stages][portable]") {
  const std::string metadata =
      "Metadata-Version: 2.1\nName: torchvision\nVersion: 0.29.0\nRequires-Dist: numpy\n"
      "Requires-Dist: torch (>=2.14)\nRequires-Dist: Torch==2.14.0; python_version >= \"3.10\"\n\nA description.\n"
      "Requires-Dist: torch in the body stays\n";
  std::string out = archbuild::stages::add_requirements(metadata, {"torch==2.14.0+cu130.sm90"}, {"torch==2.14.0+cu130.sm90"});
  CHECK(out ==
        "Metadata-Version: 2.1\nName: torchvision\nVersion: 0.29.0\nRequires-Dist: numpy\n"
        "Requires-Dist: torch==2.14.0+cu130.sm90\n\nA description.\nRequires-Dist: torch in the body stays\n");
  // Without a pin to replace, a name already required is left as it is.
  CHECK(archbuild::stages::add_requirements(metadata, {"numpy==2.0"}) == metadata);
}

TEST_CASE("portable: an aarch64 wheel requires only packages with an aarch64 wheel (libraries.toml machines)",
          "[stages][portable][closure][arm]") {
  test::TempDir dir;
  std::string skip;
  auto so = library_to_repair(dir, skip);
  if (!skip.empty()) {
    WARN("##archbuild-skip## " << skip);
    return;
  }
  // The wheel's platform tag names the machine; the library's own ELF machine does not matter here.
  auto arm_wheel = [&](const std::string& sub) {
    auto x86 = write_wheel(dir, sub, so);
    auto arm = x86.parent_path() / "demo_pkg-1.0+cu130.sm90-cp311-cp311-linux_aarch64.whl";
    fs::rename(x86, arm);
    return arm;
  };
  run::ProcessRunner runner;
  // The shipped data: nvidia-cuda-runtime has aarch64 wheels, so the sbsa wheel requires it.
  auto shipped = stages::make_portable(arm_wheel("a"), shipped_facts(), options_in(dir, recipe::WheelLayout::official), runner);
  REQUIRE(shipped.ok());
  CHECK(shipped->portability["requires_dist"] == json::array({"nvidia-cuda-runtime==13.0.*"}));
  CHECK(shipped->portability["host_bound"] == false);
  for (const auto& p : shipped_facts().packages) {
    INFO(p.name);
    CHECK(p.has_wheel_for("aarch64"));
  }

  // A package with x86_64 wheels only: not required on aarch64, its library stays host-bound.
  auto facts = shipped_facts();
  for (auto& p : facts.packages)
    if (p.name == "nvidia-cuda-runtime") p.machines = {"x86_64"};
  auto r = stages::make_portable(arm_wheel("b"), facts, options_in(dir, recipe::WheelLayout::official), runner);
  INFO((r ? "" : r.error().message));
  REQUIRE(r.ok());
  const auto& p = r->portability;
  CHECK(p["requires_dist"].empty());
  CHECK(p["host_bound"] == true);
  CHECK_THAT(p["host_bound_reason"].get<std::string>(),
             Catch::Contains("libcudart.so.13 (nvidia-cuda-runtime has no aarch64 wheel)"));
  CHECK(p["tag"] == "linux_aarch64");
  // The same facts for an x86_64 wheel still require it.
  auto x86 = stages::make_portable(write_wheel(dir, "c", so), facts, options_in(dir, recipe::WheelLayout::official), runner);
  REQUIRE(x86.ok());
  CHECK(x86->portability["requires_dist"] == json::array({"nvidia-cuda-runtime==13.0.*"}));
}
