# Cross build of archbuild for aarch64 Linux on an x86_64 Debian 12 host (scripts/test-arm64,
# docs/arm64.md): Debian's cross compiler (g++-aarch64-linux-gnu) with the arm64 libraries
# unpacked by scripts/arm64-root into ARCHBUILD_ARM64_ROOT (default /opt/archbuild-arm64), and
# qemu-aarch64 to run what it builds (ctest, Catch2's test discovery).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

if(NOT ARCHBUILD_ARM64_ROOT)
  if(DEFINED ENV{ARCHBUILD_ARM64_ROOT})
    set(ARCHBUILD_ARM64_ROOT "$ENV{ARCHBUILD_ARM64_ROOT}")
  else()
    set(ARCHBUILD_ARM64_ROOT /opt/archbuild-arm64)
  endif()
endif()
set(ARCHBUILD_ARM64_ROOT "${ARCHBUILD_ARM64_ROOT}" CACHE PATH "arm64 libraries (scripts/arm64-root)")
# try_compile projects read this file again without the cache: pass the root on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ARCHBUILD_ARM64_ROOT)
set(_root "${ARCHBUILD_ARM64_ROOT}")

# Libraries, headers and CMake packages only from the arm64 root; programs (pkg-config,
# readelf) from the host.
set(CMAKE_FIND_ROOT_PATH "${_root}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} "${_root}/usr/lib/aarch64-linux-gnu/pkgconfig:${_root}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${_root}")
# Debian keeps arch-specific headers (openssl/opensslconf.h) in include/<triplet>, which the
# cross compiler does not search in a root of ours.
set(CMAKE_C_FLAGS_INIT "-isystem ${_root}/usr/include/aarch64-linux-gnu")
set(CMAKE_CXX_FLAGS_INIT "-isystem ${_root}/usr/include/aarch64-linux-gnu")
# The libraries' own dependencies (libarchive's libxml2, …) are found at link time in the root.
foreach(kind EXE SHARED MODULE)
  set(CMAKE_${kind}_LINKER_FLAGS_INIT
      "-Wl,-rpath-link,${_root}/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,${_root}/lib/aarch64-linux-gnu")
endforeach()

# qemu-aarch64 runs the built programs with the root as their /: its loader and libraries.
find_program(ARCHBUILD_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(ARCHBUILD_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${ARCHBUILD_QEMU_AARCH64};-L;${_root}")
endif()
