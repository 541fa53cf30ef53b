// Hostile input, sizes no one bounded (issue 47): a store URL is read without a recursing
// matcher, and its length is bounded before it is parsed.
#include <catch2/catch.hpp>

#include <string>

#include "remote/registry.hpp"

using namespace archbuild;

TEST_CASE("hostile/sizes: a 50 KB store host is refused in one line, exit 2, not a crash", "[remote]") {
  // std::regex recursed once per character: 20 KB worked, 50 KB was SIGSEGV.
  for (std::size_t n : {std::size_t(50'000), std::size_t(1'000'000)}) {
    auto r = remote::parse_store_url("oci://" + std::string(n, 'a') + "/builds");
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == Exit::bad_input);
    CHECK(r.error().message.find('\n') == std::string::npos);
    CHECK(r.error().message.size() < 1000);
    CHECK(r.error().message.find("at most 2048") != std::string::npos);
  }
  // A long repository below the bound parses, and the grammar still holds at its edges.
  std::string repo;
  for (int i = 0; i < 200; ++i) repo += "ab-c/";
  repo += "z";
  auto ok = remote::parse_store_url("oci+http://host.example:5000/" + repo);
  REQUIRE(ok);
  CHECK(ok->host == "host.example:5000");
  CHECK(ok->repository == repo);
  for (std::string bad : {"oci://host/a-", "oci://host/-a", "oci://host/a/", "oci:///a", "oci://host:/a", "oci://host:123456/a",
                          "oci://ho st/a", "oci://host/a..b", "oci://host/a__b/c"})
    CHECK_FALSE(remote::parse_store_url(bad));
  for (std::string good : {"oci://h/a.b_c-d", "oci://h:1/a/b/c", "oci://H-1.x/a0"}) CHECK(remote::parse_store_url(good));
}
