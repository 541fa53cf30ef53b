// The run's re-check of a plan's "incremental from key K" (stages/build_start.hpp): every way the
// slot can have changed between `plan` and the run gives a clean build that says why.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "source/local.hpp"
#include "stages/build_start.hpp"
#include "stages/local_tree.hpp"
#include "store/key_record.hpp"
#include "store/layout.hpp"
#include "store/tree_cache.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
using nlohmann::json;
using Mode = plan::BuildStart::Mode;

namespace {

struct Slot {
  test::TempDir tmp;
  store::Layout layout{tmp / "cache"};
  const std::string slot = std::string(24, 'c');
  const std::string earlier = std::string(64, 'a');  // the key whose build tree the plan continues
  const std::string key = std::string(64, 'b');      // the key being built
  const json launchers = {{"C", "ccache"}, {"CXX", "ccache"}, {"CUDA", "ccache"}};

  Slot() {
    REQUIRE(layout.create());
    tmp.write("tree/setup.py", "");
    auto tree = source::scan_local_tree(tmp / "tree");
    REQUIRE(tree);
    shape = stages::tree_shape(*tree);
  }
  void holds(const std::string& k) { REQUIRE(store::write_work_state(layout, slot, stages::work_state_json(k, shape))); }
  void configured(const std::string& k, const json& with) {
    store::KeyRecord record(layout, k);
    REQUIRE(record.mark_done("fetch"));
    REQUIRE(record.mark_done("configure", {{"launchers", with}}));
  }
  plan::BuildStart planned() const { return {Mode::incremental, earlier, "", slot}; }
  plan::BuildStart run() const { return stages::effective_build_start(planned(), layout, slot, key, launchers); }
  stages::TreeShape shape;
};

}  // namespace

TEST_CASE("build start: the plan's incremental start stands while the slot is as planned", "[stages]") {
  Slot s;
  s.holds(s.earlier);
  s.configured(s.earlier, s.launchers);
  auto start = s.run();
  CHECK(start.mode == Mode::incremental);
  CHECK(start.from_key == s.earlier);
  // A clean plan is never turned incremental.
  plan::BuildStart clean{Mode::clean, "", "the tree's configuration files changed", s.slot};
  auto kept = stages::effective_build_start(clean, s.layout, s.slot, s.key, s.launchers);
  CHECK(kept.mode == Mode::clean);
  CHECK(kept.why == clean.why);
}

TEST_CASE("build start: another key built in the slot since the plan, or none: clean, and why", "[stages]") {
  Slot s;
  SECTION("no state") {
    auto start = s.run();
    CHECK(start.mode == Mode::clean);
    CHECK(start.from_key.empty());
    CHECK_THAT(start.why, Catch::Contains("does not hold key aaaaaaaaaaaa's build tree"));
  }
  SECTION("another key's state") {
    s.holds(std::string(64, 'e'));
    s.configured(std::string(64, 'e'), s.launchers);
    auto start = s.run();
    CHECK(start.mode == Mode::clean);
    CHECK_THAT(start.why, Catch::Contains("does not hold key aaaaaaaaaaaa"));
  }
  SECTION("a state that does not parse") {
    REQUIRE(store::write_work_state(s.layout, s.slot, "{\"key\": 7}"));
    CHECK(s.run().mode == Mode::clean);
  }
  SECTION("no slot") {
    auto start = stages::effective_build_start(s.planned(), s.layout, "", s.key, s.launchers);
    CHECK(start.mode == Mode::clean);
  }
}

TEST_CASE("build start: the earlier key never finished configuring: clean", "[stages]") {
  Slot s;
  s.holds(s.earlier);
  auto start = s.run();  // no record at all
  CHECK(start.mode == Mode::clean);
  CHECK_THAT(start.why, Catch::Contains("did not finish configuring"));
  REQUIRE(store::KeyRecord(s.layout, s.earlier).mark_done("fetch"));  // fetched, not configured
  CHECK_THAT(s.run().why, Catch::Contains("did not finish configuring"));
}

TEST_CASE("build start: launchers other than those the earlier tree was configured with: clean", "[stages]") {
  Slot s;
  s.holds(s.earlier);
  SECTION("ccache then, none now") {
    s.configured(s.earlier, s.launchers);
    auto start = stages::effective_build_start(s.planned(), s.layout, s.slot, s.key,
                                               json{{"C", ""}, {"CXX", ""}, {"CUDA", ""}});
    CHECK(start.mode == Mode::clean);
    CHECK_THAT(start.why, Catch::Contains("compiler launchers differ"));
  }
  SECTION("a seed added since") {
    s.configured(s.earlier, s.launchers);
    json now = s.launchers;
    now["CMAKE_TOOLCHAIN_FILE"] = "/cache/seed.cmake";
    CHECK(stages::effective_build_start(s.planned(), s.layout, s.slot, s.key, now).mode == Mode::clean);
  }
  SECTION("a record that kept none") {
    s.configured(s.earlier, nullptr);
    CHECK(s.run().mode == Mode::clean);
  }
}

TEST_CASE("build start: the key's own tree (a resume) is left to the pipeline's resume rules", "[stages]") {
  Slot s;
  s.holds(s.earlier);
  // Planned from its own key: not configured, other launchers — still the plan's start.
  auto start = stages::effective_build_start(s.planned(), s.layout, s.slot, s.earlier, json{{"C", "x"}});
  CHECK(start.mode == Mode::incremental);
}
