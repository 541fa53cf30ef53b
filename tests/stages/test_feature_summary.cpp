// stages/feature_summary: the configure log's feature summary in PyTorch's format
// (tests/data/libraries/pytorch-summary.txt: the message lines of cmake/Summary.cmake at pytorch
// commit 1f354242270c5345b8f0f4d4c8f42a99d28f5d76 with this test's values) read and checked
// against the libraries a plan found.
#include <catch2/catch.hpp>

#include "stages/feature_summary.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;

namespace {

plan::LibraryChoice found(const std::string& name, const std::string& summary, const std::string& summary_on = "") {
  plan::LibraryChoice c;
  c.name = name;
  c.title = name;
  c.state = plan::LibraryState::found;
  c.from = plan::LibraryCandidate{};
  c.summary = summary;
  c.summary_on = summary_on;
  return c;
}

}  // namespace

TEST_CASE("libraries: PyTorch's feature summary parsed - a found library shown OFF is named with its line") {
  auto s = stages::parse_feature_summary_text(test::read_file(std::string(ARCHBUILD_TEST_DATA) + "/libraries/pytorch-summary.txt"));
  REQUIRE(s.found);
  CHECK(s.values.at("USE_CUDNN").value == "ON");
  CHECK(s.values.at("USE_CUSPARSELT").value == "OFF");
  CHECK(s.values.at("USE_CUSPARSELT").line == "--     USE_CUSPARSELT      : OFF");
  CHECK(s.values.at("USE_SYSTEM_NCCL").value == "1");
  CHECK(s.values.at("USE_LAPACK").value == "1");
  CHECK(s.values.count("Split") == 0);  // "Split CUDA : " is a description, not a feature
  CHECK(plan::cmake_truth("ON") == true);
  CHECK(plan::cmake_truth("1") == true);
  CHECK(plan::cmake_truth("False") == false);
  CHECK(plan::cmake_truth("MKL_LIBRARY-NOTFOUND") == false);
  CHECK_FALSE(plan::cmake_truth("maybe"));

  plan::LibraryPlan lp;
  lp.choices = {found("cudnn", "USE_CUDNN"), found("nccl", "USE_NCCL"), found("cusparselt", "USE_CUSPARSELT"),
                found("mkl", "USE_MKL"), found("magma", "", "Compiling with MAGMA support")};
  auto f = stages::check_features(lp, s);
  REQUIRE(f.size() == 5);
  CHECK(f[0].ok);
  CHECK(f[1].ok);
  CHECK_FALSE(f[2].ok);
  CHECK(f[2].line == "--     USE_CUSPARSELT      : OFF");
  CHECK(f[3].ok);
  CHECK_FALSE(f[4].ok);  // "MAGMA not found. Compiling without MAGMA support"
  CHECK(f[4].on == false);
}

TEST_CASE("libraries: a log without a feature summary is not a verdict") {
  auto s = stages::parse_feature_summary({"-- Configuring done", "-- Generating done"});
  CHECK_FALSE(s.found);
  plan::LibraryPlan lp;
  lp.choices = {found("magma", "", "Compiling with MAGMA support")};
  auto f = stages::check_features(lp, s);
  REQUIRE(f.size() == 1);
  CHECK(f[0].ok);
  CHECK_FALSE(f[0].on);
}
