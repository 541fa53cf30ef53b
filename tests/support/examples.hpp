// The repository's example project, copied for a test that builds or edits it.
#pragma once

#include <filesystem>

#include "support/tempdir.hpp"

namespace archbuild::test {

// examples/minitorch and examples/minitorch-dep of the checkout at `source` copied side by side
// into `dir`/examples, as in archbuild's repository (the example's third_party/minidep is a link
// to ../../minitorch-dep), without build outputs; returns the minitorch copy.
std::filesystem::path copy_examples(const TempDir& dir, const std::filesystem::path& source);

}  // namespace archbuild::test
