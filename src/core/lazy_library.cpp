#include "core/lazy_library.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

namespace archbuild {

Error LazyLibrary::missing(const std::string& what) const {
  return Error::missing_tool(
      fmt::format("{}; archbuild needs it {}: {}", what, needed_for_, provided_by_));
}

Result<void*> LazyLibrary::handle() const {
  if (void* h = handle_.load(std::memory_order_acquire)) return h;
  std::lock_guard lock(mutex_);
  if (void* h = handle_.load(std::memory_order_relaxed)) return h;
  // RTLD_LOCAL: its symbols stay out of the global scope, as a NEEDED library's would not, so
  // nothing else binds to them by accident. Never closed: the functions are cached for the process.
  void* h = dlopen(soname_, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    return missing(fmt::format("cannot load {} ({})", soname_, why ? why : "no reason given"));
  }
  handle_.store(h, std::memory_order_release);
  return h;
}

Result<void*> LazyLibrary::symbol(const char* name) const {
  auto h = handle();
  if (!h) return h.error();
  // dlerror distinguishes "not found" from a symbol whose value is null; none of ours may be null.
  dlerror();
  void* p = dlsym(*h, name);
  if (!p) {
    const char* why = dlerror();
    return missing(fmt::format("{} has no function {} ({})", soname_, name, why ? why : "null address"));
  }
  return p;
}

}  // namespace archbuild
