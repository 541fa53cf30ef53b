#!/usr/bin/env bash
# scripts/gpu-check on this host, which has no GPU: every GPU check reports SKIP with
# its reason, and the checks that need only a torch run against a torch look-alike installed in
# a venv — a torch/ package with the attributes the checks read, a dist-info with its RECORD, and
# lib/libtorch_cuda.so built by nvcc for sm_80 and sm_90 (+PTX). inspect agrees with
# get_arch_list() there (PASS); a look-alike whose get_arch_list() names another arch is a
# DISAGREE and exit 1. validate --installed torch runs its CPU checks, compared with the
# interpreter's own answers. Like a real torch (cmake/Codegen.cmake's _BUILD_FOR_ADDITIONAL_ARCHS),
# the library also carries sm_90a SASS that get_arch_list() never names: accepted, as
# data/torch-additional-archs.toml says; an sm_100a without compute_100 in the build is not.
# --exe runs the binary with ARCHBUILD_DATA_DIR set (its compiled-in source path is the build
# machine's); the quick plan's caps sum to well under five minutes, and a step at its cap is a SKIP.
# Usage: test_gpu_check.sh SOURCE_DIR BUILD_DIR   (run by ctest)
set -euo pipefail
src=$1 build=$2
nvcc=/usr/local/cuda/bin/nvcc
[ -x "$nvcc" ] || { echo "##archbuild-skip## no nvcc at $nvcc (the look-alike's libtorch_cuda.so needs it)"; exit 0; }
python=$(command -v python3) || { echo "##archbuild-skip## no python3"; exit 0; }
"$python" -c 'import venv' 2>/dev/null || { echo "##archbuild-skip## $python has no venv module"; exit 0; }
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$tmp/report/report.md" ] && cat "$tmp/report/report.md" >&2; exit 1; }

# The look-alike torch, written into a venv's site-packages as pip would have installed it.
"$python" -m venv "$tmp/venv"
py=$tmp/venv/bin/python
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
t=$site/torch
mkdir -p "$t/lib" "$t/distributed" "$t/backends"
cat > "$tmp/k.cu" <<'EOF'
__global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }
void launch(float* p) { k<<<1, 32>>>(p); }
EOF
# The "RowwiseScaledMM.cu" of the look-alike: SASS for sm_90a only, as Codegen.cmake adds it.
cat > "$tmp/rowwise.cu" <<'EOF'
__global__ void rowwise(float* p) { p[threadIdx.x] += 1.0f; }
void launch_rowwise(float* p) { rowwise<<<1, 32>>>(p); }
EOF
"$nvcc" -c -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 \
  -gencode arch=compute_90,code='[sm_90,compute_90]' -o "$tmp/k.o" "$tmp/k.cu"
"$nvcc" -c -Xcompiler -fPIC -gencode arch=compute_90a,code=sm_90a -o "$tmp/rowwise.o" "$tmp/rowwise.cu"
c++ -shared -o "$t/lib/libtorch_cuda.so" "$tmp/k.o" "$tmp/rowwise.o"  # not nvcc: its link step adds an sm_75 stub
cat > "$t/__init__.py" <<'EOF'
"""A torch look-alike: what scripts/gpu-check and validate's feature checks read."""
from . import _C, backends, cuda, distributed, linalg, version

__version__ = version.__version__


def tensor(x):
    return x


def allclose(a, b):
    return a == b
EOF
cat > "$t/version.py" <<'EOF'
__version__ = "2.11.0+cu130"
cuda = "13.0"
hip = None
EOF
echo 'has_lapack = True' > "$t/_C.py"
cat > "$t/cuda.py" <<'EOF'
import os

ARCH_LIST = ["sm_80", "sm_90", "compute_90"]


def is_available():
    return False


def device_count():
    return 0


def get_arch_list():
    return list(ARCH_LIST)
EOF
cat > "$t/backends/__init__.py" <<'EOF'
from types import SimpleNamespace

cudnn = SimpleNamespace(is_available=lambda: True, version=lambda: 91002)
EOF
cat > "$t/distributed/__init__.py" <<'EOF'
def is_available():
    return True


def is_nccl_available():
    return True
EOF
echo 'def inv(a): return [[0.5, 0.0], [0.0, 0.25]]' > "$t/linalg.py"
info=$site/torch-2.11.0+cu130.dist-info
mkdir -p "$info"
printf 'Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cu130\n' > "$info/METADATA"
printf 'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp3-none-linux_x86_64\n' > "$info/WHEEL"
echo torch > "$info/top_level.txt"
(cd "$site" && find torch torch-2.11.0+cu130.dist-info -type f | sed 's/$/,,/') > "$info/RECORD"

# The binary through a wrapper that notes the ARCHBUILD_DATA_DIR it was given.
mkdir -p "$tmp/bin"
cat > "$tmp/bin/archbuild" <<EOF
#!/bin/sh
echo "\${ARCHBUILD_DATA_DIR:-unset}" >> "$tmp/data-dirs"
exec "$build/src/archbuild" "\$@"
EOF
chmod +x "$tmp/bin/archbuild"

run_check() {  # run_check [gpu-check options]
  rm -rf "$tmp/report" "$tmp/data-dirs"
  set +e
  env -u ARCHBUILD_DATA_DIR "$src/scripts/gpu-check" --exe "$tmp/bin/archbuild" --python "$py" --report "$tmp/report" "$@" \
    > "$tmp/stdout" 2> "$tmp/stderr"
  rc=$?
  set -e
  [ -f "$tmp/report/report.md" ] && [ -f "$tmp/report/summary.json" ] || fail "no report (exit $rc): $(tail -5 "$tmp/stderr")"
}
status_of() {  # status_of CHECK: the statuses of CHECK's rows, space-separated
  "$py" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join(c["status"] for c in d["checks"] if c["check"] == sys.argv[2]))' "$tmp/report/summary.json" "$1"
}
detail_of() {
  "$py" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(" | ".join(c["detail"] for c in d["checks"] if c["check"] == sys.argv[2]))' "$tmp/report/summary.json" "$1"
}
expect() {  # expect CHECK STATUS
  local got
  got=$(status_of "$1")
  [ "$got" = "$2" ] || fail "$1: expected $2, got '$got': $(detail_of "$1")"
}

run_check
[ "$rc" = 0 ] || fail "gpu-check exit $rc, expected 0"
expect runs PASS
expect detect SKIP
expect smoke SKIP
expect inspect PASS
detail_of inspect | grep 'libtorch_cuda.so: compute_90 sm_80 sm_90 = get_arch_list(), and sm_90a the build adds on purpose' > /dev/null ||
  fail "inspect: $(detail_of inspect)"
# Every archbuild command ran with the data of this source tree named.
[ "$(sort -u "$tmp/data-dirs")" = "$src" ] || fail "ARCHBUILD_DATA_DIR given to archbuild: $(sort -u "$tmp/data-dirs" | tr '\n' ' ')"
# The quick plan, printed first, with the sum of its caps.
budget=$(sed -n 's/^gpu-check: quick plan, .*; at most \([0-9]*\) s in all.*/\1/p' "$tmp/stderr")
[ -n "$budget" ] && [ "$budget" -lt 300 ] || fail "no quick plan under 300 s announced: $(head -1 "$tmp/stderr")"
"$py" -c 'import json, sys; assert json.load(open(sys.argv[1]))["context"]["budget_s"] == int(sys.argv[2])' \
  "$tmp/report/summary.json" "$budget" || fail "summary.json's budget_s is not $budget"
expect validate-installed PASS
detail_of validate-installed | grep "'features': 'pass'" > /dev/null || fail "validate-installed: $(detail_of validate-installed)"
expect kernel-installed SKIP
expect example-wheel SKIP
grep -q '^| SKIP | detect | no GPU on this host' "$tmp/report/report.md" || fail "report.md lacks the detect row"

# A torch whose get_arch_list() names an arch its libraries do not carry: a DISAGREE, exit 1,
# and the line on stdout.
sed -i 's/ARCH_LIST = .*/ARCH_LIST = ["sm_80", "sm_90", "sm_100", "compute_90"]/' "$t/cuda.py"
run_check
[ "$rc" = 1 ] || fail "gpu-check exit $rc with a disagreeing torch, expected 1"
expect inspect DISAGREE
grep -q "DISAGREE inspect: get_arch_list() \['compute_90', 'sm_100', 'sm_80', 'sm_90'\]" "$tmp/stdout" ||
  fail "stdout: $(cat "$tmp/stdout")"

# An arch-specific image the build does not add on purpose (sm_100a without compute_100): DISAGREE.
sed -i 's/ARCH_LIST = .*/ARCH_LIST = ["sm_80", "sm_90", "compute_90"]/' "$t/cuda.py"
"$nvcc" -c -Xcompiler -fPIC -gencode arch=compute_100a,code=sm_100a -Drowwise=rowwise100 -Dlaunch_rowwise=launch_rowwise100 \
  -o "$tmp/rowwise100.o" "$tmp/rowwise.cu"
c++ -shared -o "$t/lib/libtorch_cuda.so" "$tmp/k.o" "$tmp/rowwise.o" "$tmp/rowwise100.o"  # not nvcc: its link step adds an sm_75 stub
run_check
[ "$rc" = 1 ] || fail "gpu-check exit $rc with an unexplained sm_100a, expected 1"
expect inspect DISAGREE
detail_of inspect | grep 'not added on purpose by the build: sm_100a' > /dev/null || fail "inspect: $(detail_of inspect)"

# A step that reaches its cap is a SKIP with that reason: a cuobjdump that hangs, capped at 2 s.
cat > "$tmp/bin/cuobjdump" <<'EOF'
#!/bin/sh
exec sleep 30
EOF
chmod +x "$tmp/bin/cuobjdump"
c++ -shared -o "$t/lib/libtorch_cuda.so" "$tmp/k.o" "$tmp/rowwise.o"  # not nvcc: its link step adds an sm_75 stub
PATH=$tmp/bin:$PATH run_check --cap cuobjdump=2
[ "$rc" = 0 ] || fail "gpu-check exit $rc with cuobjdump at its cap, expected 0: $(detail_of cuobjdump)"
expect cuobjdump SKIP
detail_of cuobjdump | grep "cap" > /dev/null || fail "cuobjdump: $(detail_of cuobjdump)"
rc=0
"$src/scripts/gpu-check" --exe "$tmp/bin/archbuild" --report "$tmp/report" --cap nosuchstep=5 2> "$tmp/stderr" || rc=$?
[ "$rc" = 2 ] || fail "gpu-check --cap nosuchstep=5: exit $rc, expected 2"

# The second run (--full) without a GPU: the example and its dependent built by `wheel --with` and
# validated (their GPU parts skipped, which is no failure here); the CUDA extension of the installed
# torch skipped where the interpreter has no torch.
if /usr/bin/python3 -c 'import setuptools, wheel' 2> /dev/null && command -v git > /dev/null; then
  run_check --full --python /usr/bin/python3
  [ "$rc" = 0 ] || fail "gpu-check --full exit $rc, expected 0: $(tail -3 "$tmp/stderr")"
  expect example-wheel PASS
  detail_of example-wheel | grep "with minivision: minitorch-0.1.0" > /dev/null || fail "example-wheel: $(detail_of example-wheel)"
  detail_of example-wheel | grep "minivision checks {.*'import': 'pass'" > /dev/null ||
    fail "example-wheel: minivision was not validated: $(detail_of example-wheel)"
  expect example-validate SKIP
  expect torch-extension SKIP
  detail_of torch-extension | grep "no torch for /usr/bin/python3" > /dev/null || fail "torch-extension: $(detail_of torch-extension)"
else
  echo "(--full not run: no /usr/bin/python3 with setuptools and wheel, or no git)"
fi
[ -n "${KEEP:-}" ] && echo "kept $tmp"
echo "gpu-check: no-GPU report and the disagreement found"
