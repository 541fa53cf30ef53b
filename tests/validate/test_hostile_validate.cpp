// Hostile input (issue 47) in validate/: the PEP 440 key two spellings of one version share, the
// PEP 503 names a mirror may use as folders, and a zip bomb read by read_wheel.
#include <catch2/catch.hpp>

#include "binary/builders.hpp"
#include "binary/zip_reader.hpp"
#include "validate/wheel_check.hpp"

using namespace archbuild;

TEST_CASE("hostile/mirror: version_key makes PEP 440's equal versions one key", "[validate]") {
  using validate::version_key;
  CHECK(version_key("1.0") == version_key("1.0.0"));
  CHECK(version_key("1.0") == version_key("v1.0.0.0"));
  CHECK(version_key("1.0") == "1");
  CHECK(version_key("01.00.002") == "1.0.2");
  CHECK(version_key("1.0a1") == version_key("1.0.0alpha1"));
  CHECK(version_key("1.0b2") == version_key("1.0.beta.2"));
  CHECK(version_key("1.0rc1") == version_key("1.0c1"));
  CHECK(version_key("1.0rc1") == version_key("1.0pre1"));
  CHECK(version_key("1.0.post1") == version_key("1.0rev1"));
  CHECK(version_key("1.0.post1") == version_key("1.0-r1"));
  CHECK(version_key("1.0.dev0") == version_key("1.0dev"));
  CHECK(version_key("1.0+CU128.SM90") == version_key("1.0.0+cu128_sm90"));
  CHECK(version_key("0!1.0") == version_key("1.0"));
  CHECK(version_key("1.0") != version_key("1.0.1"));
  CHECK(version_key("1.0") != version_key("1.0.post0"));
  CHECK(version_key("1.0") != version_key("1.0+cu128"));
  CHECK(version_key("1.0a1") != version_key("1.0b1"));
  CHECK(version_key("1!1.0") != version_key("1.0"));
  CHECK(version_key("not a version") == "not a version");
}

TEST_CASE("hostile/mirror: only a PEP 503-normalised name is one", "[validate]") {
  for (const char* good : {"norm", "my-pkg", "torch", "a1-b2-c3"}) CHECK(validate::is_normalized_name(good));
  for (const char* bad : {"", "/abs/path", "../../x", "..", "My-Pkg", "my_pkg", "my.pkg", "a--b", "-a", "a-", "a/b"})
    CHECK_FALSE(validate::is_normalized_name(bad));
  CHECK(validate::is_normalized_name(validate::normalize_name("My__Pkg.x")));
}

TEST_CASE("hostile/sizes: read_wheel stops at the expansion the archive's size allows", "[validate]") {
  // 96 MiB of zeros behind an ELF header: ~100 KB deflated, far over 100x.
  test::Buf big(96u << 20, 0);
  big.replace(0, 7, std::string("\x7f" "ELF\x02\x01\x01", 7));
  auto zip = test::zip({{"bomb/lib.so", big}, {"bomb-1.0.dist-info/METADATA", test::Buf("x")}});
  REQUIRE(zip.size() < (2u << 20));
  auto r = validate::read_wheel(binary::Bytes(reinterpret_cast<const std::uint8_t*>(zip.data()), zip.size()), "bomb-1.0-py3-none-any.whl");
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == Exit::bad_input);
  CHECK(r.error().message.find("zip bomb") != std::string::npos);
  // Within the bound: a member of 1 MiB of zeros in a small archive (the 64 MiB floor).
  test::Buf small(1u << 20, 0);
  auto ok = test::zip({{"pkg/data.bin", small}});
  CHECK(validate::read_wheel(binary::Bytes(reinterpret_cast<const std::uint8_t*>(ok.data()), ok.size()), "ok-1.0-py3-none-any.whl"));
  CHECK(binary::expansion_limit(0) == binary::kMinExpansionLimit);
  CHECK(binary::expansion_limit(std::uint64_t{1} << 30) == (std::uint64_t{100} << 30));
}
