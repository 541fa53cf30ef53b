#!/usr/bin/env bash
# scripts/gpu-check (issue 16) on this host, which has no GPU: every GPU check reports SKIP with
# its reason, and the checks that need only a torch run against a torch look-alike installed in
# a venv — a torch/ package with the attributes the checks read, a dist-info with its RECORD, and
# lib/libtorch_cuda.so built by nvcc for sm_80 and sm_90 (+PTX). inspect agrees with
# get_arch_list() there (PASS); a look-alike whose get_arch_list() names another arch is a
# DISAGREE and exit 1. validate --installed torch runs its CPU checks, compared with the
# interpreter's own answers.
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
"$nvcc" -shared -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 \
  -gencode arch=compute_90,code='[sm_90,compute_90]' -o "$t/lib/libtorch_cuda.so" "$tmp/k.cu"
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

run_check() {
  rm -rf "$tmp/report"
  set +e
  "$src/scripts/gpu-check" --exe "$build/src/archbuild" --python "$py" --no-wheel --report "$tmp/report" \
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
detail_of inspect | grep -q 'libtorch_cuda.so: compute_90 sm_80 sm_90 = get_arch_list()' ||
  fail "inspect: $(detail_of inspect)"
expect validate-installed PASS
detail_of validate-installed | grep -q "'features': 'pass'" || fail "validate-installed: $(detail_of validate-installed)"
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
[ -n "${KEEP:-}" ] && echo "kept $tmp"
echo "gpu-check: no-GPU report and the disagreement found"
