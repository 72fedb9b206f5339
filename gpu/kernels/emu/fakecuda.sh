#!/usr/bin/env bash
# fakecuda.sh builds fake libcuda.so.1 / libcublas.so.13 from fakecuda.cc
# (the kernels emulated on the CPU) and runs the agentrl_cuda-tagged test binary
# against them: the whole Go side of the backend, end to end, without a GPU.
# Usage, from the repository root: bash gpu/kernels/emu/fakecuda.sh [-test.run regexp]
# Slow (every CUDA thread is an OS thread); needs g++ ≥ 11 and the CUDA headers.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
emu="$root/gpu/kernels/emu"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -e 's|^#include <cuda_bf16.h>||' \
    -e 's|extern __shared__ float \([a-z_]*\)\[\];|float* \1 = emu_smem.data();|' \
    "$root/gpu/kernels/kernels.cu" >"$tmp/kernels_emu.inc"
python3 "$emu/gen_wrappers.py" "$root/gpu/kernels/kernels.cu" >"$tmp/wrappers.inc"
g++ -std=c++20 -O2 -ffp-contract=off -fno-strict-aliasing -fPIC -shared -pthread -I"$emu" -I"$tmp" -o "$tmp/libcuda.so.1" "$emu/fakecuda.cc"
cp "$tmp/libcuda.so.1" "$tmp/libcublas.so.13"
(cd "$root" && go test -c -tags agentrl_cuda -o "$tmp/gpu.test" ./gpu)
cd "$root/gpu"
LD_LIBRARY_PATH="$tmp" AGENTRL_REQUIRE_GPU=1 "$tmp/gpu.test" -test.count=1 "$@"
