// toml++'s implementation, compiled once for all of archbuild (TOML_HEADER_ONLY=0 elsewhere):
// the library's documented alternative to header-only use or its shared library.
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
