// Internal to source/: libgit2 handles as unique_ptrs, its error text, one-time init, a flock.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "source/git_api.hpp"

namespace archbuild::source::detail {

void init_libgit2();  // once per process

// Free: a reference, not a function pointer: libgit2's functions are LazySymbol objects
// (source/git_api.hpp), whose address is known only once the library is loaded.
template <class T, const auto& Free>
struct Deleter {
  void operator()(T* p) const {
    if (p) Free(p);
  }
};
using Repo = std::unique_ptr<git_repository, Deleter<git_repository, git_repository_free>>;
using Remote = std::unique_ptr<git_remote, Deleter<git_remote, git_remote_free>>;
using Reference = std::unique_ptr<git_reference, Deleter<git_reference, git_reference_free>>;
using Object = std::unique_ptr<git_object, Deleter<git_object, git_object_free>>;
using Commit = std::unique_ptr<git_commit, Deleter<git_commit, git_commit_free>>;
using Submodule = std::unique_ptr<git_submodule, Deleter<git_submodule, git_submodule_free>>;
using Config = std::unique_ptr<git_config, Deleter<git_config, git_config_free>>;

// libgit2's last error message ("unknown error" when none).
std::string last_error();

std::string oid_hex(const git_oid& oid);

// An exclusive flock held for the object's lifetime (mirror creation/fetch).
class DirLock {
 public:
  explicit DirLock(int fd) : fd_(fd) {}
  DirLock(DirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  DirLock(const DirLock&) = delete;
  ~DirLock();

 private:
  int fd_;
};
Result<DirLock> lock_file(const std::filesystem::path& p, const std::function<bool()>& cancelled);

}  // namespace archbuild::source::detail
