// libgit2, opened on first use (core/lazy_library.hpp): the functions source/ calls (only source/
// talks git), as objects of the same names in namespace archbuild. Include this instead of
// <git2.h>; calling a function missing from the list fails to link.
#pragma once

#include <git2.h>
#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>
#include <git2/sys/repository.h>

#include "core/lazy_library.hpp"

// X(name): one line per libgit2 function archbuild calls. None is variadic.
#define ARCHBUILD_GIT_FUNCTIONS(X)      \
  X(git_apply)                           \
  X(git_apply_options_init)              \
  X(git_apply_to_tree)                   \
  X(git_blob_create_from_buffer)         \
  X(git_blob_free)                       \
  X(git_blob_lookup)                     \
  X(git_blob_rawcontent)                 \
  X(git_blob_rawsize)                    \
  X(git_checkout_options_init)           \
  X(git_checkout_tree)                   \
  X(git_commit_free)                     \
  X(git_commit_lookup)                   \
  X(git_commit_time)                     \
  X(git_commit_tree)                     \
  X(git_config_free)                     \
  X(git_config_get_bool)                 \
  X(git_config_get_string)               \
  X(git_diff_free)                       \
  X(git_diff_from_buffer)                \
  X(git_diff_num_deltas)                 \
  X(git_error_last)                      \
  X(git_fetch_options_init)              \
  X(git_ignore_path_is_ignored)          \
  X(git_index_add)                       \
  X(git_index_free)                      \
  X(git_index_new)                       \
  X(git_index_write_tree_to)             \
  X(git_libgit2_init)                    \
  X(git_libgit2_version)                 \
  X(git_mempack_new)                     \
  X(git_object_free)                     \
  X(git_object_id)                       \
  X(git_object_lookup)                   \
  X(git_odb_add_backend)                 \
  X(git_odb_free)                        \
  X(git_odb_new)                         \
  X(git_oid_equal)                       \
  X(git_oid_fromstr)                     \
  X(git_oid_tostr)                       \
  X(git_proxy_options_init)              \
  X(git_reference_create)                \
  X(git_reference_free)                  \
  X(git_reference_lookup)                \
  X(git_reference_name_to_id)            \
  X(git_reference_peel)                  \
  X(git_reference_target)                \
  X(git_remote_connect)                  \
  X(git_remote_create)                   \
  X(git_remote_create_anonymous)         \
  X(git_remote_disconnect)               \
  X(git_remote_download)                 \
  X(git_remote_free)                     \
  X(git_remote_init_callbacks)           \
  X(git_remote_ls)                       \
  X(git_remote_update_tips)              \
  X(git_repository_commondir)            \
  X(git_repository_config_snapshot)      \
  X(git_repository_free)                 \
  X(git_repository_init_ext)             \
  X(git_repository_init_options_init)    \
  X(git_repository_is_bare)              \
  X(git_repository_new)                  \
  X(git_repository_odb)                  \
  X(git_repository_open)                 \
  X(git_repository_open_bare)            \
  X(git_repository_open_ext)             \
  X(git_repository_path)                 \
  X(git_repository_set_head_detached)    \
  X(git_repository_set_odb)              \
  X(git_repository_workdir)              \
  X(git_submodule_foreach)               \
  X(git_submodule_free)                  \
  X(git_submodule_head_id)               \
  X(git_submodule_init)                  \
  X(git_submodule_lookup)                \
  X(git_submodule_path)                  \
  X(git_submodule_update_strategy)       \
  X(git_submodule_url)                   \
  X(git_tree_entry_byindex)              \
  X(git_tree_entry_bypath)               \
  X(git_tree_entry_filemode)             \
  X(git_tree_entry_free)                 \
  X(git_tree_entry_id)                   \
  X(git_tree_entry_name)                 \
  X(git_tree_entry_type)                 \
  X(git_tree_entrycount)                 \
  X(git_tree_free)                       \
  X(git_tree_id)                         \
  X(git_tree_lookup)

namespace archbuild {

extern const LazyLibrary libgit2;

#define ARCHBUILD_LAZY_SYMBOL(name) constinit inline LazySymbol<decltype(&::name)> name{libgit2, #name};
ARCHBUILD_GIT_FUNCTIONS(ARCHBUILD_LAZY_SYMBOL)
#undef ARCHBUILD_LAZY_SYMBOL

}  // namespace archbuild
