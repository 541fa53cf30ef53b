// Hostile input (issue 47) in arch/: lenient spellings are refused, not read as something else.
#include <catch2/catch.hpp>

#include "arch/arch_data.hpp"
#include "arch/parse.hpp"

using namespace archbuild;

TEST_CASE("hostile/lenient: 8.6() names no SASS source and is refused, not read as 8.6", "[arch]") {
  const auto& data = arch::ArchData::shipped();
  auto r = arch::parse_arch_list("8.6()", data, {});
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == Exit::bad_input);
  CHECK(r.error().message.find("A(B)") != std::string::npos);
  auto ok = arch::parse_arch_list("8.6(8.0)", data, {});
  REQUIRE(ok);
  REQUIRE(ok->size() == 1);
  REQUIRE(ok->front().sass_from);
}
