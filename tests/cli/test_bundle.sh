#!/usr/bin/env bash
# scripts/bundle: the tarball unpacked into a temporary directory runs `arch`,
# `inspect` and `plan` with a clean environment; every library outside the C/C++ runtime comes
# from the bundle, and the data (recipes) from its share/archbuild, not from this source tree.
# A BUILD_DIR of the aarch64 cross build (scripts/test-arm64) is bundled with --arch aarch64 and
# its bundle run under qemu-aarch64 (-L the arm64 root: the emulator's setting, not the
# program's environment), with that architecture's loader standing in for ldd.
# Usage: test_bundle.sh SOURCE_DIR BUILD_DIR   (run by ctest)
set -euo pipefail
src=$1 build=$2
emu=() objdump=objdump bundle_arch=() arch=$(uname -m)
ldd_() { ldd "$@"; }
if readelf -h "$build/src/archbuild" 2>/dev/null | grep 'Machine:.*AArch64' > /dev/null && [ "$arch" != aarch64 ]; then
  arch=aarch64 objdump=aarch64-linux-gnu-objdump bundle_arch=(--arch aarch64)
  arm64_root=${ARCHBUILD_ARM64_ROOT:-/opt/archbuild-arm64}
  qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
  [ -n "$qemu" ] || { echo "##archbuild-skip## no qemu-aarch64 to run the aarch64 bundle"; exit 0; }
  emu=("$qemu" -L "$arm64_root")
  # ld.so --list prints the libraries as the emulated program sees them; those of the bundle
  # are outside the arm64 root, so their paths are this host's.
  ldd_() { "${emu[@]}" "$arm64_root/lib/ld-linux-aarch64.so.1" --list "$@"; }
  export ARCHBUILD_ARM64_BUILD_DIR=$build
fi
for tool in patchelf ldd "$objdump"; do
  command -v "$tool" >/dev/null || { echo "##archbuild-skip## no $tool (scripts/install-deps installs it)"; exit 0; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The glibc floor (scripts/bundle's default): the highest GLIBC_ symbol version the bundle imports decides where it
# starts. Built on a newer glibc (this Debian 12 host: 2.36), the bundle is refused with the
# symbols above the floor; at or below it, it is made.
host_glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
highest_glibc() {  # DIR: the highest GLIBC_ version imported by DIR/bin/archbuild and DIR/lib/*
  $objdump -T "$1/bin/archbuild" "$1"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1
}
le() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" = "$2" ]; }  # le A B: A <= B
rc=0
ARCHBUILD_BUILD_DIR=$build "$src/scripts/bundle" "${bundle_arch[@]}" --no-build --out "$tmp/floor" > "$tmp/floor.out" 2> "$tmp/floor.err" || rc=$?
floor=$(sed -n 's/^floor=\([0-9.]*\)$/\1/p' "$src/scripts/bundle")
[ -n "$floor" ] || fail "no default floor=2.N in scripts/bundle"
if le "$host_glibc" "$floor"; then
  [ "$rc" = 0 ] || fail "scripts/bundle at the $floor floor on glibc $host_glibc: exit $rc: $(tail -3 "$tmp/floor.err")"
else
  [ "$rc" = 1 ] || fail "scripts/bundle on glibc $host_glibc: exit $rc, expected 1 (above the $floor floor)"
  grep -q "above the floor $floor" "$tmp/floor.err" || fail "no floor message: $(cat "$tmp/floor.err")"
  above=$(sed -nE 's/^  (bin\/archbuild|lib\/[^:]+): [A-Za-z0-9_]+@GLIBC_([0-9.]+)$/\2/p' "$tmp/floor.err" | sort -Vu | tail -1)
  [ -n "$above" ] && ! le "$above" "$floor" || fail "the refusal names no symbol above $floor: $(cat "$tmp/floor.err")"
  ls "$tmp/floor"/*.tar.gz >/dev/null 2>&1 && fail "a tarball was written although the floor is not met"
fi
tarball=$(ARCHBUILD_BUILD_DIR=$build "$src/scripts/bundle" "${bundle_arch[@]}" --no-build --out "$tmp/dist" --glibc-floor "$host_glibc")
[ -f "$tarball" ] || fail "scripts/bundle printed no tarball"
case "$(basename "$tarball")" in archbuild-*-linux-"$arch".tar.gz) ;; *) fail "unexpected name $tarball" ;; esac
mkdir "$tmp/unpacked"
tar -C "$tmp/unpacked" -xzf "$tarball"
root=$(echo "$tmp"/unpacked/archbuild-*)
exe=$root/bin/archbuild
[ -x "$exe" ] || fail "no bin/archbuild in the tarball"
[ -f "$root/share/archbuild/data/gpus.toml" ] && [ -d "$root/share/archbuild/recipes" ] || fail "no share/archbuild data"
# What it needs from glibc, as BUNDLE.txt says and objdump reads it.
highest=$(highest_glibc "$root")
le "$highest" "$host_glibc" || fail "the bundle imports GLIBC_$highest, above its floor $host_glibc"
grep -q "^glibc floor $host_glibc: met (highest GLIBC_ symbol version imported: $highest)" "$root/BUNDLE.txt" ||
  fail "BUNDLE.txt: $(grep 'glibc floor' "$root/BUNDLE.txt")"

# RUNPATH, not LD_LIBRARY_PATH: the children archbuild starts must not inherit our libraries.
readelf -d "$exe" | grep 'RUNPATH.*\$ORIGIN/../lib' > /dev/null || fail "bin/archbuild has no RUNPATH \$ORIGIN/../lib"
ldd_ "$exe" | grep 'not found' > /dev/null && fail "unresolved: $(ldd_ "$exe" | grep 'not found')"
foreign=$(ldd_ "$exe" | awk '$2 == "=>" && $1 !~ /^\// {print $1, $3}' |
  grep -Ev '^(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.so' | grep -Fv " $root/bin/../lib/" | grep -Fv " $root/lib/" || true)
[ -z "$foreign" ] || fail "libraries from the host, not the bundle: $foreign"
for needed in libgit2 libarchive; do
  ls "$root/lib/" | grep "^$needed" > /dev/null || fail "$needed is not bundled"
done
# The C++ runtime and the libraries Debian ships as archives are inside the binary (only the
# libraries opened on first use may still need the host's libstdc++: libarchive's ICU does).
needed=$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -Ev '^(libc|libm|ld-linux.*)\.so' || true)
[ -z "$needed" ] || fail "bin/archbuild needs more than glibc (libc, libm, the loader): $needed"

# A clean environment: no PATH entries from the build, no ARCHBUILD_* variables.
run() { env -i HOME="$tmp/home" PATH=/usr/bin:/bin ARCHBUILD_NVML_LIBRARY=/nonexistent ARCHBUILD_CUDA_LIBRARY=/nonexistent \
  ${LD_DEBUG:+LD_DEBUG=$LD_DEBUG} "${emu[@]}" "$exe" --cache-dir "$tmp/cache" "$@"; }
out=$(run arch 90 sm_120 --format torch) || fail "arch exit $?"
[ "$out" = "9.0;12.0" ] || fail "arch printed '$out'"
out=$(run inspect "$src/tests/data/binaries/multi.so" --json) || fail "inspect exit $?"
echo "$out" | grep '"sass"' > /dev/null || fail "inspect printed no sass: $out"
out=$(run plan --sm 90 --recipe torch-2.9 --python /usr/bin/python3 --json) || fail "plan exit $?"
echo "$out" | grep "\"$root/share/archbuild/recipes/torch-2.9.toml\"" > /dev/null ||
  fail "plan did not read the bundle's recipes: $(echo "$out" | grep -o '"[^"]*torch-2.9.toml"' | head -1)"
# The libraries archbuild opens on first use (not in its NEEDED entries, so not in ldd's list) come
# from the bundle too, through bin/archbuild's RUNPATH: libarchive for a zip; libgit2 for a clone of
# a local repository, and libcrypto for the build key. LD_DEBUG=libs names each library initialised.
for lib in $(awk '{print $1}' "$build/src/lazy-libraries.txt"); do
  [ -f "$root/lib/$lib" ] || fail "$lib (opened on first use) is not bundled"
  grep -q "^  $lib\$" "$root/BUNDLE.txt" || fail "BUNDLE.txt does not list $lib"
done
from_bundle() {  # LOG LIBRARY: LIBRARY was initialised, from the bundle's lib/
  grep -q "calling init: .*/$2" "$1" || fail "$2 was not loaded: $(grep -c . "$1") lines in $1"
  grep "calling init: .*/$2" "$1" | grep -Fvq "calling init: $root/" &&
    fail "$2 from the host, not the bundle: $(grep "calling init: .*/$2" "$1")"
  return 0
}
printf 'PK\003\004not a zip' > "$tmp/bad.whl"
status=0
LD_DEBUG=libs run inspect "$tmp/bad.whl" 2> "$tmp/zip.log" >/dev/null || status=$?
[ "$status" = 2 ] || fail "inspect of a bad zip: exit $status, expected 2: $(grep -v '^ *[0-9]*:' "$tmp/zip.log")"
from_bundle "$tmp/zip.log" libarchive.so
if command -v git >/dev/null; then
  "$src/tests/support/make-example-repos" "$tmp/repos" > "$tmp/repos.txt"
  commit=$(sed -n 's/^minitorch_commit=//p' "$tmp/repos.txt")
  status=0
  LD_DEBUG=libs run plan --sm 90 --recipe "$root/share/archbuild/examples/minitorch/recipe.toml" \
    --source-url "file://$tmp/repos/minitorch" --ref v0.1.0 --python /usr/bin/python3 --json \
    2> "$tmp/clone.log" > "$tmp/clone.json" || status=$?
  [ "$status" = 0 ] || fail "plan --ref (a clone): exit $status: $(grep -v '^ *[0-9]*:' "$tmp/clone.log" | tail -3)"
  grep -q "\"commit\": \"$commit\"" "$tmp/clone.json" || fail "plan --ref did not resolve v0.1.0 to $commit"
  from_bundle "$tmp/clone.log" libgit2.so
  from_bundle "$tmp/clone.log" libcrypto.so
else
  echo "no git CLI to make a repository: the clone through the bundled libgit2 not checked"
fi

# Reached through a symlink elsewhere (an install into /usr/local/bin): the data is still found.
mkdir "$tmp/bin" && ln -s "$exe" "$tmp/bin/archbuild"
link=archbuild
[ ${#emu[@]} -eq 0 ] || link=$tmp/bin/archbuild  # qemu does not search PATH
env -i HOME="$tmp/home" PATH="$tmp/bin:/usr/bin:/bin" "${emu[@]}" "$link" gpus H100 >/dev/null || fail "through a symlink: exit $?"
echo "bundle ok: $(basename "$tarball"), $(ls "$root/lib" | wc -l) libraries"
