#!/usr/bin/env bash
# Regenerates the tiny test binaries next to this script with nvcc (CUDA 13.0 made the
# committed ones). Each is a one-kernel shared library, a few KB; the tests read them on
# machines without nvcc. What each must contain is asserted in tests/binary/test_binary.cpp.
set -euo pipefail
cd "$(dirname "$0")"
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
common=(-shared -Xcompiler -fPIC -Xlinker -s -cudart none)
"$nvcc" "${common[@]}" -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a \
  -gencode arch=compute_120,code=compute_120 -o multi.so kernel.cu
"$nvcc" "${common[@]}" -gencode arch=compute_90,code=compute_90 -o ptx_only.so kernel.cu
# -rdc needs device linking, which nvcc does with the shared runtime.
"$nvcc" -shared -Xcompiler -fPIC -Xlinker -s -cudart shared -rdc=true \
  -gencode arch=compute_90,code=sm_90 -o rdc.so kernel.cu
"$nvcc" "${common[@]}" --compress-mode=speed -gencode arch=compute_86,code=[sm_86,compute_86] -o lz4.so kernel.cu
"$nvcc" "${common[@]}" -Xfatbin -compress-all -gencode arch=compute_75,code=sm_75 \
  -gencode arch=compute_100a,code=sm_100a -gencode arch=compute_120f,code=sm_120f -o zstd_all.so kernel.cu
ls -l ./*.so
