# The bundle build's glibc floor (-DARCHBUILD_GLIBC_FLOOR=2.28, set by scripts/bundle-in-root;
# docs/bundle.md). A normal build leaves it empty and includes nothing of this.
#
# Built in a Debian 11 root (glibc 2.31), bin/archbuild and its lib/ imported three symbols above
# 2.28, the manylinux_2_28 floor (RHEL 8, Debian 10):
#   pthread_cond_clockwait@GLIBC_2.30  GCC 10's libstdc++, linked into bin/archbuild: renamed with
#                                      --wrap to cmake/glibc_floor_clockwait.c
#   pow@GLIBC_2.29, log@GLIBC_2.29     libxml2 and ICU, which Debian's libarchive.so.13 needs for
#                                      xar: the bundle gets a libarchive.so.13 of its own, linked
#                                      from libarchive.a with only what archbuild calls
# scripts/bundle checks the result (every GLIBC_ version imported, against its floor); nothing
# here guarantees it alone.

# Included before src/: the bundle's libarchive replaces Debian's in ARCHBUILD_LAZY_LIBRARIES, the
# list scripts/bundle copies. archbuild still opens it on first use by the same soname
# (core/lazy_library.hpp); bin/archbuild's RUNPATH finds this one in the bundle's lib/.
find_library(ARCHBUILD_LIBARCHIVE_STATIC NAMES libarchive.a HINTS ${LIBARCHIVE_LIBRARY_DIRS})
if(NOT ARCHBUILD_LIBARCHIVE_STATIC)
  message(FATAL_ERROR "ARCHBUILD_GLIBC_FLOOR: no libarchive.a (Debian: libarchive-dev) "
                      "to link the bundle's libarchive from")
endif()
# Its exports: the functions binary/archive_api.hpp lists, read from there (one list).
set(_archbuild_archive_api ${PROJECT_SOURCE_DIR}/src/binary/archive_api.hpp)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_archbuild_archive_api})
file(READ ${_archbuild_archive_api} _archbuild_archive_text)
string(REGEX MATCHALL "X\\(archive_[a-z0-9_]+\\)" _archbuild_archive_calls "${_archbuild_archive_text}")
set(_archbuild_archive_exports "")
set(_archbuild_archive_undefined "")
foreach(call ${_archbuild_archive_calls})
  string(REGEX MATCH "archive_[a-z0-9_]+" name "${call}")
  string(APPEND _archbuild_archive_exports "  ${name};\n")
  # -u: each is taken from libarchive.a (with what it needs, and nothing else).
  list(APPEND _archbuild_archive_undefined "-Wl,-u,${name}")
endforeach()
if(NOT _archbuild_archive_undefined)
  message(FATAL_ERROR "ARCHBUILD_GLIBC_FLOOR: no X(archive_...) lines in ${_archbuild_archive_api}")
endif()
file(WRITE ${CMAKE_BINARY_DIR}/bundle-libarchive.map "{\n global:\n${_archbuild_archive_exports} local: *;\n};\n")

add_library(archbuild_bundle_libarchive SHARED ${CMAKE_CURRENT_LIST_DIR}/libarchive_without_xar.c)
target_include_directories(archbuild_bundle_libarchive PRIVATE ${LIBARCHIVE_INCLUDE_DIRS})
# libarchive's own dependencies (pkg-config --static), less itself and libxml2 (the xar stub);
# --as-needed keeps those the zip code does not use (zstd, lz4, acl) out of DT_NEEDED.
set(_archbuild_archive_deps "")
foreach(name ${LIBARCHIVE_STATIC_LIBRARIES})
  if(name STREQUAL "archive" OR name STREQUAL "xml2")
    continue()
  endif()
  find_library(ARCHBUILD_LIBARCHIVE_DEP_${name} NAMES ${name} HINTS ${LIBARCHIVE_STATIC_LIBRARY_DIRS})
  if(NOT ARCHBUILD_LIBARCHIVE_DEP_${name})
    message(FATAL_ERROR "ARCHBUILD_GLIBC_FLOOR: libarchive.a needs lib${name}.so to link against (its -dev package; "
                        "scripts/bundle-in-root installs them), or -DARCHBUILD_LIBARCHIVE_DEP_${name}=PATH")
  endif()
  list(APPEND _archbuild_archive_deps ${ARCHBUILD_LIBARCHIVE_DEP_${name}})
endforeach()
target_link_libraries(archbuild_bundle_libarchive PRIVATE
  ${ARCHBUILD_LIBARCHIVE_STATIC} -Wl,--as-needed ${_archbuild_archive_deps})
# -z defs: a symbol left undefined (a dependency missing above) fails here, not at dlopen.
# -Bsymbolic: libarchive.a is compiled as PIE code, whose references to its own functions a
# shared object may only resolve inside itself.
target_link_options(archbuild_bundle_libarchive PRIVATE ${_archbuild_archive_undefined}
  -Wl,--version-script=${CMAKE_BINARY_DIR}/bundle-libarchive.map -Wl,-z,defs -Wl,-Bsymbolic
  -Wl,-soname,${LIBARCHIVE_SONAME})
set_target_properties(archbuild_bundle_libarchive PROPERTIES
  PREFIX "" SUFFIX "" OUTPUT_NAME ${LIBARCHIVE_SONAME} NO_SONAME ON
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bundle-lib
  LINK_DEPENDS ${CMAKE_BINARY_DIR}/bundle-libarchive.map)
string(REGEX REPLACE "(^|\n)${LIBARCHIVE_SONAME} [^\n]*"
       "\\1${LIBARCHIVE_SONAME} ${CMAKE_BINARY_DIR}/bundle-lib/${LIBARCHIVE_SONAME}"
       ARCHBUILD_LAZY_LIBRARIES "${ARCHBUILD_LAZY_LIBRARIES}")
message(STATUS "ARCHBUILD_GLIBC_FLOOR ${ARCHBUILD_GLIBC_FLOOR}: the bundle's ${LIBARCHIVE_SONAME} "
               "is linked from ${ARCHBUILD_LIBARCHIVE_STATIC} (bundle-lib/)")

# Called after src/: bin/archbuild's pthread_cond_clockwait becomes the shim's, and it needs the
# bundle's libarchive built with it (scripts/bundle builds the archbuild target only).
function(archbuild_glibc_floor_link target)
  target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/glibc_floor_clockwait.c)
  target_link_options(${target} PRIVATE -Wl,--wrap=pthread_cond_clockwait)
  add_dependencies(${target} archbuild_bundle_libarchive)
endfunction()
