// A shared library opened on first use (dlopen by soname), and its functions as callable objects.
//
// Why: libgit2, libarchive and libcrypto pull ~30 libraries into the process; mapping and
// relocating them at start-up was half of `archbuild --version` and of `inspect` of one ELF file,
// which uses none of them. Only the commands that clone, read zips or hash now load them.
//
// The lists of functions live next to their only users: source/git_api.hpp,
// binary/archive_api.hpp, core/crypto_api.hpp. Each declares, in namespace archbuild, one
// LazySymbol per C function with the C function's name, so call sites inside namespace archbuild
// keep their spelling (ordinary lookup finds the object before the global function, and a
// variable disables argument-dependent lookup).
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "core/error.hpp"

namespace archbuild {

class LazyLibrary {
 public:
  // soname: what dlopen is given (the loader searches RUNPATH, LD_LIBRARY_PATH, the system);
  // needed_for: what archbuild needs it for ("to fetch and check out sources");
  // provided_by: how to get it ("install libgit2 (Debian: libgit2-1.5)").
  // constexpr: the libraries are globals, initialised before any code of any translation unit runs.
  constexpr LazyLibrary(const char* soname, const char* needed_for, const char* provided_by)
      : soname_(soname), needed_for_(needed_for), provided_by_(provided_by) {}
  LazyLibrary(const LazyLibrary&) = delete;
  LazyLibrary& operator=(const LazyLibrary&) = delete;

  const char* soname() const { return soname_; }

  // The dlopen handle, opened once per process (thread-safe); a missing_tool Error naming the
  // soname, dlerror's text, the purpose and the package when it cannot be opened.
  Result<void*> handle() const;
  // One function's address, or a missing_tool Error as above naming the symbol too.
  Result<void*> symbol(const char* name) const;

 private:
  Error missing(const std::string& what) const;

  const char* soname_;
  const char* needed_for_;
  const char* provided_by_;
  mutable std::mutex mutex_;
  mutable std::atomic<void*> handle_{nullptr};
};

template <class Pointer>
class LazySymbol;

// A function of a LazyLibrary, called like the function: resolved on the first call (loading the
// library if needed) and cached. Throws Failure (exit 3) when the library or function is missing.
// Pointer is the C function's pointer type (`decltype(&::git_clone)`); glibc's are noexcept.
// A variadic C function matches no specialisation (`...` cannot be forwarded): it fails to compile.
template <class R, class... Args, bool NoExcept>
class LazySymbol<R (*)(Args...) noexcept(NoExcept)> {
 public:
  using Pointer = R (*)(Args...) noexcept(NoExcept);

  constexpr LazySymbol(const LazyLibrary& library, const char* name) : library_(&library), name_(name) {}
  LazySymbol(const LazySymbol&) = delete;
  LazySymbol& operator=(const LazySymbol&) = delete;

  // Not a template: arguments convert to the C signature exactly as in a direct call. Never
  // noexcept: the first call may throw.
  R operator()(Args... args) const { return get()(static_cast<Args&&>(args)...); }

  Pointer get() const {
    if (void* p = pointer_.load(std::memory_order_acquire)) return reinterpret_cast<Pointer>(p);
    return resolve();
  }

  // `&f` is the function's address, as for the C function it stands for, so function pointers
  // used as values (`decltype(&archive_read_free)` deleters, callbacks) keep working.
  Pointer operator&() const { return get(); }

  const char* name() const { return name_; }

 private:
  Pointer resolve() const {
    auto r = library_->symbol(name_);
    // Failure, not a Result: the call sites are C calls, which return no Result.
    if (!r) throw Failure(r.error());
    // Two threads may both resolve; dlsym gives both the same address.
    pointer_.store(*r, std::memory_order_release);
    return reinterpret_cast<Pointer>(*r);
  }

  const LazyLibrary* library_;
  const char* name_;
  mutable std::atomic<void*> pointer_{nullptr};
};

}  // namespace archbuild
