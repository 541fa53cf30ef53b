#!/usr/bin/env bash
# scripts/bundle (issue 16): the tarball unpacked into a temporary directory runs `arch`,
# `inspect` and `plan` with a clean environment; every library outside the C/C++ runtime comes
# from the bundle, and the data (recipes) from its share/archbuild, not from this source tree.
# Usage: test_bundle.sh SOURCE_DIR BUILD_DIR   (run by ctest)
set -euo pipefail
src=$1 build=$2
for tool in patchelf ldd; do
  command -v "$tool" >/dev/null || { echo "##archbuild-skip## no $tool (scripts/install-deps installs it)"; exit 0; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

tarball=$(ARCHBUILD_BUILD_DIR=$build "$src/scripts/bundle" --no-build --out "$tmp/dist")
[ -f "$tarball" ] || fail "scripts/bundle printed no tarball"
case "$(basename "$tarball")" in archbuild-*-linux-x86_64.tar.gz) ;; *) fail "unexpected name $tarball" ;; esac
mkdir "$tmp/unpacked"
tar -C "$tmp/unpacked" -xzf "$tarball"
root=$(echo "$tmp"/unpacked/archbuild-*)
exe=$root/bin/archbuild
[ -x "$exe" ] || fail "no bin/archbuild in the tarball"
[ -f "$root/share/archbuild/data/gpus.toml" ] && [ -d "$root/share/archbuild/recipes" ] || fail "no share/archbuild data"

# RUNPATH, not LD_LIBRARY_PATH: the children archbuild starts must not inherit our libraries.
readelf -d "$exe" | grep -q 'RUNPATH.*\$ORIGIN/../lib' || fail "bin/archbuild has no RUNPATH \$ORIGIN/../lib"
ldd "$exe" | grep -q 'not found' && fail "unresolved: $(ldd "$exe" | grep 'not found')"
foreign=$(ldd "$exe" | awk '$2 == "=>" {print $1, $3}' |
  grep -Ev '^(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.so' | grep -Fv " $root/bin/../lib/" | grep -Fv " $root/lib/" || true)
[ -z "$foreign" ] || fail "libraries from the host, not the bundle: $foreign"
for needed in libgit2 libarchive libfmt; do
  ls "$root/lib/" | grep -q "^$needed" || fail "$needed is not bundled"
done

# A clean environment: no PATH entries from the build, no ARCHBUILD_* variables.
run() { env -i HOME="$tmp/home" PATH=/usr/bin:/bin ARCHBUILD_NVML_LIBRARY=/nonexistent ARCHBUILD_CUDA_LIBRARY=/nonexistent \
  "$exe" --cache-dir "$tmp/cache" "$@"; }
out=$(run arch 90 sm_120 --format torch) || fail "arch exit $?"
[ "$out" = "9.0;12.0" ] || fail "arch printed '$out'"
out=$(run inspect "$src/tests/data/binaries/multi.so" --json) || fail "inspect exit $?"
echo "$out" | grep -q '"sass"' || fail "inspect printed no sass: $out"
out=$(run plan --sm 90 --recipe torch-2.9 --python /usr/bin/python3 --json) || fail "plan exit $?"
echo "$out" | grep -q "\"$root/share/archbuild/recipes/torch-2.9.toml\"" ||
  fail "plan did not read the bundle's recipes: $(echo "$out" | grep -o '"[^"]*torch-2.9.toml"' | head -1)"
# Reached through a symlink elsewhere (an install into /usr/local/bin): the data is still found.
mkdir "$tmp/bin" && ln -s "$exe" "$tmp/bin/archbuild"
env -i HOME="$tmp/home" PATH="$tmp/bin:/usr/bin:/bin" archbuild gpus H100 >/dev/null || fail "through a symlink: exit $?"
echo "bundle ok: $(basename "$tarball"), $(ls "$root/lib" | wc -l) libraries"
