// Incremental builds of a local tree proven equal, end to end with nvcc (docs/build.md,
// "Incremental builds"): after an edit, the build that continues the earlier key's build tree
// gives the wheel a clean build of the same content gives in another cache, byte for byte; where
// the plan builds clean (a configuration file changed, a file deleted) it says why.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/examples.hpp"
#include "support/tempdir.hpp"

namespace t = archbuild::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kSource = ARCHBUILD_SOURCE_DIR;

std::string cannot_build() {
  if (auto u = t::unusable("/usr/local/cuda/bin/nvcc"); !u.empty()) return u;
  if (!fs::exists("/usr/bin/python3")) return "no /usr/bin/python3 (setuptools + wheel)";
  if (t::which("cmake").empty() || t::which("ninja").empty()) return "cmake or ninja not on PATH";
  return "";
}

void append(const fs::path& file, const std::string& text) {
  std::ofstream f(file, std::ios::app);
  f << text;
}

struct Builder {
  const t::TempDir& dir;
  fs::path tree;
  // Both caches share one compiler cache unless a build turns it off: what a clean build
  // compiles is then compiled once (its objects are ccache's, keyed by the whole command).
  json wheel(const std::string& cache, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--cache-dir", (dir / cache).string(), "wheel", "--sm", "90", "--recipe",
                                     (tree / "recipe.toml").string(), "--source", tree.string(),
                                     "--python", "/usr/bin/python3", "--out", (dir / ("out-" + cache)).string(),
                                     "--no-validate", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    t::RunOptions o;
    o.timeout = std::chrono::seconds(900);
    o.env = {{"CCACHE_DIR", (dir / "ccache").string()}};
    auto r = t::archbuild(args, o);
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    json doc = json::parse(r.out);
    REQUIRE(doc["ok"] == true);
    return doc;
  }
  json plan(const std::string& cache, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--cache-dir", (dir / cache).string(), "plan", "--sm", "90", "--recipe",
                                     (tree / "recipe.toml").string(), "--source", tree.string(),
                                     "--python", "/usr/bin/python3", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = t::archbuild(args);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  }
};

// The incremental build of the tree as it is now in cache "inc" against a clean one in a fresh
// cache: the same key, the same wheel.
void same_as_clean(Builder& b, const std::string& clean_cache, const json& incremental,
                   std::vector<std::string> clean_extra = {}) {
  json clean = b.wheel(clean_cache, std::move(clean_extra));
  CHECK(clean["key"] == incremental["key"]);
  CHECK(clean["build_start"]["mode"] == "clean");
  CHECK(clean["sha256"] == incremental["sha256"]);
}

}  // namespace

TEST_CASE("incremental wheel after a kernel edit: ninja recompiles the kernel, the wheel is a clean build's",
          "[cli][wheel][source][incremental][nvcc][example]") {
  if (auto why = cannot_build(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  Builder b{dir, t::copy_examples(dir, kSource)};
  json first = b.wheel("inc");
  CHECK(first["build_start"]["mode"] == "clean");
  CHECK(first["build_start"]["why"].get<std::string>().find("no earlier build") != std::string::npos);

  append(b.tree / "csrc" / "kernels.cu", "\n__global__ void minitorch_incremental_probe(float* x) { x[0] = 1.0f; }\n");
  json planned = b.plan("inc");
  CHECK(planned["build_start"]["mode"] == "incremental");
  CHECK(planned["build_start"]["from_key"] == first["key"]);
  CHECK(planned["key"] != first["key"]);
  auto text = t::archbuild({"--cache-dir", (dir / "inc").string(), "plan", "--sm", "90", "--recipe",
                            (b.tree / "recipe.toml").string(), "--source", b.tree.string(), "--python", "/usr/bin/python3"});
  CHECK(text.out.find("build tree incremental from key " + first["key"].get<std::string>()) != std::string::npos);
  // --clean: the same key, a clean build tree.
  json forced = b.plan("inc", {"--clean"});
  CHECK(forced["key"] == planned["key"]);
  CHECK(forced["build_start"] == json{{"mode", "clean"}, {"why", "--clean"}, {"slot", planned["build_start"]["slot"]}});

  json inc = b.wheel("inc");
  CHECK(inc["key"] == planned["key"]);
  CHECK(inc["build_start"]["mode"] == "incremental");
  CHECK(inc["build_start"]["from_key"] == first["key"]);
  // ninja rebuilt the kernel's object and what links it, not the C++ files.
  std::string log = t::read_file(dir / "inc" / "logs" / inc["key"].get<std::string>() / "build.log");
  CHECK(log.find("kernels.cu.o") != std::string::npos);
  CHECK(log.find("abi.cpp.o") == std::string::npos);
  json manifest = json::parse(t::read_file(inc["manifest"].get<std::string>()))["manifest"];
  CHECK(manifest["build_start"]["from_key"] == first["key"]);
  auto report = t::archbuild({"--cache-dir", (dir / "inc").string(), "report", inc["key"].get<std::string>()});
  CHECK(report.out.find("build tree: incremental from key " + first["key"].get<std::string>()) != std::string::npos);

  // The same content, clean, with no compiler cache: every object compiled again.
  same_as_clean(b, "clean", inc, {"--compiler-cache", "none"});
}

TEST_CASE("incremental wheel after a header edit equals a clean build, a CMakeLists edit or a deleted file builds clean "
          "and says why", "[cli][wheel][source][incremental][nvcc][example]") {
  if (auto why = cannot_build(); !why.empty()) {
    WARN("##archbuild-skip## " << why);
    return;
  }
  t::TempDir dir;
  Builder b{dir, t::copy_examples(dir, kSource)};
  append(b.tree / "minitorch" / "extra.py", "EXTRA = 1\n");  // deleted below
  json first = b.wheel("inc");

  // A header every compile includes: ninja's dependencies recompile its includers.
  append(b.tree / "csrc" / "minitorch.h", "\n#define MINITORCH_INCREMENTAL_PROBE 1\n");
  json header = b.wheel("inc");
  CHECK(header["build_start"]["mode"] == "incremental");
  CHECK(header["build_start"]["from_key"] == first["key"]);
  same_as_clean(b, "clean-header", header);

  // CMakeLists.txt: a configured tree keeps its first configure's cache values, so clean.
  append(b.tree / "CMakeLists.txt", "\n# an edit\n");
  json cmake = b.wheel("inc");
  CHECK(cmake["build_start"]["mode"] == "clean");
  CHECK(cmake["build_start"]["why"].get<std::string>().find("configuration file changed") != std::string::npos);
  CHECK(cmake["build_start"]["why"].get<std::string>().find("CMakeLists.txt") != std::string::npos);
  same_as_clean(b, "clean-cmake", cmake);

  // A deleted file: setuptools' build/lib would keep its copy, so clean.
  fs::remove(b.tree / "minitorch" / "extra.py");
  json deleted = b.wheel("inc");
  CHECK(deleted["build_start"]["mode"] == "clean");
  CHECK(deleted["build_start"]["why"].get<std::string>().find("removed") != std::string::npos);
  same_as_clean(b, "clean-deleted", deleted);
  auto zip = t::run("/usr/bin/python3", {"-c", "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))",
                                         deleted["wheel"].get<std::string>()});
  CHECK(zip.out.find("minitorch/extra.py") == std::string::npos);
}
