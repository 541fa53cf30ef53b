#!/usr/bin/env bash
# scripts/bundle-in-root: the bundle made in a Debian 11 root needs no glibc above the
# shipped floor (scripts/bundle's default, which must be at most 2.28, manylinux_2_28: RHEL 8,
# Debian 10): the highest GLIBC_ symbol version that bin/archbuild and lib/* import, read with
# objdump, is at most the floor; and the unpacked bundle runs on this host with a clean environment
# (--version, arch, detect --json).
#
# Slow and opt-in: the first run makes the root (debootstrap, ~4 min) and every run builds
# archbuild in it (~15 min from scratch on 2 cores, incremental after). It runs only when
# ARCHBUILD_BUNDLE_ROOT names the root directory to make or reuse (and needs root and debootstrap);
# otherwise it is skipped at once. ctest -L bundle-root runs it alone.
# Usage: test_bundle_in_root.sh SOURCE_DIR   (run by ctest)
set -euo pipefail
src=$1
skip() { echo "##archbuild-skip## $*"; exit 0; }
[ -n "${ARCHBUILD_BUNDLE_ROOT:-}" ] || skip "opt-in: set ARCHBUILD_BUNDLE_ROOT=DIR (a Debian 11 root, made there once) to build the bundle in it"
[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot, mount)"
command -v debootstrap >/dev/null || skip "no debootstrap (apt-get install debootstrap)"
command -v objdump >/dev/null || skip "no objdump (binutils)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The floor the shipped scripts/bundle enforces by default.
floor=$(sed -n 's/^floor=\([0-9.]*\)$/\1/p' "$src/scripts/bundle")
[[ "$floor" =~ ^2\.[0-9]+$ ]] || fail "no default floor=2.N in scripts/bundle"
# The promise docs/bundle.md makes: the bundle starts where manylinux_2_28 wheels do.
[ "$(printf '%s\n2.28\n' "$floor" | sort -V | tail -1)" = 2.28 ] || fail "scripts/bundle's floor $floor is above 2.28 (manylinux_2_28)"
tarball=$("$src/scripts/bundle-in-root" --root "$ARCHBUILD_BUNDLE_ROOT" --out "$tmp/dist") || fail "scripts/bundle-in-root: exit $?"
[ -f "$tarball" ] || fail "scripts/bundle-in-root printed no tarball ('$tarball')"
mkdir "$tmp/unpacked"
tar -C "$tmp/unpacked" -xzf "$tarball"
root=$(echo "$tmp"/unpacked/archbuild-*)
[ -x "$root/bin/archbuild" ] || fail "no bin/archbuild in $tarball"

# Read here, not taken from BUNDLE.txt: every GLIBC_ version any bundled file imports.
highest=$(objdump -T "$root/bin/archbuild" "$root"/lib/*.so* | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1)
[ -n "$highest" ] || fail "objdump found no GLIBC_ version in the bundle"
if [ "$(printf '%s\n%s\n' "$highest" "$floor" | sort -V | tail -1)" != "$floor" ]; then
  objdump -T "$root/bin/archbuild" "$root"/lib/*.so* | grep "GLIBC_$highest" >&2 || true
  fail "the bundle imports GLIBC_$highest, above the floor $floor"
fi
grep -q "^glibc floor $floor: met (highest GLIBC_ symbol version imported: $highest)" "$root/BUNDLE.txt" ||
  fail "BUNDLE.txt: $(grep 'glibc floor' "$root/BUNDLE.txt")"

# Runs here (a newer glibc) with a clean environment and no NVML or CUDA driver.
run() { env -i HOME="$tmp/home" PATH=/usr/bin:/bin ARCHBUILD_NVML_LIBRARY=/nonexistent ARCHBUILD_CUDA_LIBRARY=/nonexistent \
  ${LD_DEBUG:+LD_DEBUG=$LD_DEBUG} "$root/bin/archbuild" --cache-dir "$tmp/cache" "$@"; }
out=$(run --version) || fail "--version: exit $?"
[[ "$out" == archbuild\ * ]] || fail "--version printed '$out'"
out=$(run arch 90) || fail "arch 90: exit $?"
[ -n "$out" ] || fail "arch 90 printed nothing"
status=0
out=$(run detect --json) || status=$?
# No GPU here: exit 3 (a needed device is missing) with a JSON answer; with one, 0.
[ "$status" = 0 ] || [ "$status" = 3 ] || fail "detect --json: exit $status"
echo "$out" | grep '"gpus"' > /dev/null || fail "detect --json printed no gpus: $out"

# libarchive is the bundle's own (linked from libarchive.a for the floor: cmake/glibc-floor.cmake):
# a wheel is read through it (LD_DEBUG names the copy initialised), and a zip written and read
# back with the functions archbuild calls (only python's ctypes can call them from here).
[ -f "$root/lib/libarchive.so.13" ] || fail "no lib/libarchive.so.13"
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 - "$tmp/x-1.0-py3-none-linux_x86_64.whl" "$src/tests/data/binaries/multi.so" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    z.write(sys.argv[2], "x/multi.so")
PY
  out=$(LD_DEBUG=libs run inspect "$tmp/x-1.0-py3-none-linux_x86_64.whl" --json 2> "$tmp/zip.log") ||
    fail "inspect of a wheel: exit $?: $(grep -v '^ *[0-9]*:' "$tmp/zip.log" | tail -3)"
  echo "$out" | grep '"sass"' > /dev/null || fail "inspect of a wheel printed no sass: $out"
  grep -q "calling init: $root/bin/../lib/libarchive.so.13" "$tmp/zip.log" ||
    fail "libarchive not loaded from the bundle: $(grep 'calling init: .*libarchive' "$tmp/zip.log")"
  /usr/bin/python3 - "$root/lib/libarchive.so.13" "$tmp/roundtrip.zip" <<'PY' || fail "a zip written and read back through lib/libarchive.so.13"
import ctypes, sys
a = ctypes.CDLL(sys.argv[1])
for f in ("archive_write_new", "archive_read_new", "archive_entry_new", "archive_entry_pathname", "archive_error_string"):
    getattr(a, f).restype = ctypes.c_void_p
a.archive_entry_pathname.restype = ctypes.c_char_p
w = ctypes.c_void_p(a.archive_write_new())
# The calls stages/reproducible.cpp makes with libarchive before 3.5 (the root's 3.4), in its order.
assert a.archive_write_set_format_zip(w) == 0
assert a.archive_write_set_options(w, b"zip:compression=deflate,zip:hdrcharset=UTF-8") == 0
assert a.archive_write_set_bytes_in_last_block(w, 1) == 0
assert a.archive_write_open_filename(w, sys.argv[2].encode()) == 0
e = ctypes.c_void_p(a.archive_entry_new())
a.archive_entry_set_pathname(e, b"x/data.txt")
a.archive_entry_set_filetype(e, 0o100000)
a.archive_entry_set_perm(e, 0o644)
a.archive_entry_set_size(e, ctypes.c_int64(5))
a.archive_entry_set_mtime(e, ctypes.c_int64(315532800), ctypes.c_long(0))
a.archive_entry_set_uid(e, ctypes.c_int64(0))
a.archive_entry_set_gid(e, ctypes.c_int64(0))
assert a.archive_write_header(w, e) == 0
assert a.archive_write_data(w, b"hello", ctypes.c_size_t(5)) == 5
assert a.archive_write_finish_entry(w) == 0
assert a.archive_write_close(w) == 0
r = ctypes.c_void_p(a.archive_read_new())
assert a.archive_read_support_format_zip(r) == 0
assert a.archive_read_open_filename(r, sys.argv[2].encode(), ctypes.c_size_t(10240)) == 0
entry = ctypes.c_void_p()
assert a.archive_read_next_header(r, ctypes.byref(entry)) == 0
assert a.archive_entry_pathname(entry) == b"x/data.txt"
buf = ctypes.create_string_buffer(16)
assert a.archive_read_data(r, buf, ctypes.c_size_t(16)) == 5 and buf.raw[:5] == b"hello"
PY
else
  echo "no /usr/bin/python3: the bundle's libarchive not exercised"
fi
echo "bundle-in-root ok: $(basename "$tarball"), highest GLIBC_$highest (floor $floor)"
