// core/lazy_library: libraries opened on first use, and the archbuild binary that no longer
// links libgit2, libarchive and libcrypto (they are loaded only by the commands that use them).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <string>
#include <type_traits>

#include "core/crypto_api.hpp"
#include "core/lazy_library.hpp"
#include "core/sha256.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
namespace t = archbuild::test;

namespace {

constinit const LazyLibrary kMissing{"libarchbuild-no-such-library.so.7", "to test a missing library",
                                     "install nothing (Debian: none)"};
constinit LazySymbol<int (*)(int)> missing_function{kMissing, "archbuild_no_such_function"};

constinit const LazyLibrary kLibc{"libc.so.6", "to test a present library", "install glibc"};
// glibc declares getpid noexcept (__THROW); the symbol keeps that type.
constinit LazySymbol<decltype(&::getpid)> lazy_getpid{kLibc, "getpid"};
constinit LazySymbol<int (*)(const char*)> lazy_atoi{kLibc, "atoi"};
constinit LazySymbol<int (*)(int)> not_in_libc{kLibc, "archbuild_no_such_function"};

// The message of the Failure `call` throws, checked to be a missing tool (exit 3).
template <class Call>
std::string missing_tool_thrown(Call call) {
  try {
    call();
  } catch (const Failure& f) {
    CHECK(f.error.exit == Exit::missing_tool);
    return f.error.message;
  }
  FAIL("no Failure thrown");
  return {};
}

}  // namespace

TEST_CASE("lazy library: a soname that does not exist is a missing tool naming the soname and the fix",
          "[core][lazy]") {
  auto h = kMissing.handle();
  REQUIRE_FALSE(h.ok());
  CHECK(h.error().exit == Exit::missing_tool);
  const std::string& m = h.error().message;
  CHECK_THAT(m, Catch::Contains("cannot load libarchbuild-no-such-library.so.7 ("));
  CHECK_THAT(m, Catch::Contains("No such file"));  // dlerror's text
  CHECK_THAT(m, Catch::Contains("archbuild needs it to test a missing library: install nothing (Debian: none)"));
  CHECK(m.find('\n') == std::string::npos);

  // A call cannot return a Result: it throws Failure, which main turns into exit 3.
  CHECK_THAT(missing_tool_thrown([] { missing_function(1); }), Catch::Contains("libarchbuild-no-such-library.so.7"));
  // Still missing on the next call (nothing half-cached).
  CHECK_THROWS_AS(missing_function(1), Failure);
}

TEST_CASE("lazy library: a present library's functions resolve once and are called like the C function",
          "[core][lazy]") {
  CHECK(lazy_getpid() == ::getpid());
  CHECK(lazy_atoi("42") == 42);
  static_assert(std::is_same_v<decltype(&lazy_getpid), decltype(&::getpid)>);
  // `&f` is the function pointer, as for a C function (deleters, callbacks).
  auto* p = &lazy_atoi;
  CHECK(p("7") == 7);
  CHECK(lazy_atoi.get() == p);

  CHECK_THAT(missing_tool_thrown([] { not_in_libc(1); }),
             Catch::Contains("libc.so.6 has no function archbuild_no_such_function"));
}

TEST_CASE("lazy library: sha256 through the lazily loaded libcrypto", "[core][lazy]") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(libcrypto.handle().ok());
  CHECK(std::string(libcrypto.soname()).rfind("libcrypto.so.", 0) == 0);
}

TEST_CASE("lazy library: archbuild links none of libgit2, libarchive, libcrypto and inspect of an ELF file loads none",
          "[core][lazy]") {
  if (t::which("readelf").empty()) {
    WARN("##archbuild-skip## no readelf on PATH");
    return;
  }
  auto d = t::run(t::which("readelf"), {"-d", ARCHBUILD_EXE});
  REQUIRE(d.status == 0);
  CHECK_THAT(d.out, Catch::Contains("(NEEDED)"));
  for (const char* lib : {"libgit2", "libarchive", "libcrypto"}) {
    INFO(lib);
    CHECK_THAT(d.out, !Catch::Contains(std::string("[") + lib));
  }

  // LD_DEBUG=files: the loader names on stderr every library it maps (needed or dlopened).
  t::RunOptions o;
  o.env = {{"LD_DEBUG", "files"}};
  auto elf = t::archbuild({"inspect", ARCHBUILD_TEST_DATA "/binaries/multi.so", "--json"}, o);
  INFO(elf.err);
  REQUIRE(elf.status == 0);
  CHECK_THAT(elf.err, Catch::Contains("file=libc.so.6"));  // LD_DEBUG took effect
  for (const char* lib : {"libgit2", "libarchive", "libcrypto"}) {
    INFO(lib);
    CHECK_THAT(elf.err, !Catch::Contains(lib));
  }

  // A zip needs libarchive: loaded then, through dlopen (a bad zip still opens the library).
  t::TempDir tmp;
  auto zip = tmp.write("bad.whl", std::string("PK\x03\x04", 4) + "not really a zip");
  auto z = t::archbuild({"inspect", zip.string()}, o);
  INFO(z.err);
  CHECK(z.status == 2);
  CHECK_THAT(z.err, Catch::Contains("file=libarchive.so"));
  CHECK_THAT(z.err, Catch::Contains("dynamically loaded by"));
  CHECK_THAT(z.err, !Catch::Contains("libgit2"));
}
