// Hostile input (issue 47) in recipe/: a recipe's name means that recipe, whatever file of the
// same name lies in the working directory.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "recipe/recipe.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;
namespace fs = std::filesystem;

TEST_CASE("hostile/lenient: a stray ./NAME file does not replace the recipe NAME", "[recipe]") {
  test::TempDir tmp;
  auto shipped = recipe::load("torch-2.7", recipe::Search::shipped());
  REQUIRE(shipped);
  tmp.write("work/torch-2.7", "this is not a recipe = [\n");
  auto before = fs::current_path();
  fs::current_path(tmp / "work");
  auto named = recipe::load("torch-2.7", recipe::Search::shipped());
  auto as_file = recipe::load("./torch-2.7", recipe::Search::shipped());
  fs::current_path(before);
  REQUIRE(named);
  CHECK(named->file == shipped->file);
  CHECK_FALSE(as_file);  // ./NAME is the file: read, and refused as the TOML it is not
}
