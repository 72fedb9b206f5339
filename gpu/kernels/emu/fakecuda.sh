#!/usr/bin/env bash
# fakecuda.sh builds fake libcuda.so.1 / libcublas.so.13 from fakecuda.cc
# (the kernels emulated on the CPU) and runs the agentrl_cuda-tagged test binary
# against them: the whole Go side of the backend, end to end, without a GPU.
# Usage, from the repository root:
#   bash gpu/kernels/emu/fakecuda.sh [./PACKAGE] [-test.run regexp ...]
#   bash gpu/kernels/emu/fakecuda.sh --libs DIR   (only build the libraries into DIR,
#       for a tagged program: LD_LIBRARY_PATH=DIR; with FAKECUDA_NOOP=1 the kernels,
#       products and memsets do nothing, to time the host's side of a workload)
# PACKAGE (default ./gpu) is the package whose tagged tests run, in its own
# folder, e.g. ./device or . (the trainer's TestTrainerStepOnCUDA).
# Slow (every CUDA thread is an OS thread); needs g++ ≥ 11 and the CUDA
# headers (where they are not in /usr/include: CPATH=<toolkit>/include).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
emu="$root/gpu/kernels/emu"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Both modules: kernels.cu and the decode kernels of decode.cu.
cat "$root/gpu/kernels/kernels.cu" "$root/gpu/kernels/decode.cu" >"$tmp/all.cu"
sed -e 's|^#include <cuda_bf16.h>||' \
    -e 's|extern __shared__ float \([a-z_]*\)\[\];|float* \1 = emu_smem.data();|' \
    "$tmp/all.cu" >"$tmp/kernels_emu.inc"
python3 "$emu/gen_wrappers.py" "$tmp/all.cu" >"$tmp/wrappers.inc"
# EMU_CONTRACT=1 fuses multiplies and adds into FMAs where the compiler
# likes, as nvcc does by default on a GPU (x86-64 with FMA), so that a
# kernel whose result needs an unfused rounding (__fmul_rn) is caught
# here; by default nothing is fused and the emulator's arithmetic is the
# source's, operation by operation.
contract=(-ffp-contract=off)
if [[ ${EMU_CONTRACT:-0} == 1 ]]; then
	contract=(-ffp-contract=fast -mfma)
fi
g++ -std=c++20 -O2 "${contract[@]}" -fno-strict-aliasing -fPIC -shared -pthread -I"$emu" -I"$tmp" -o "$tmp/libcuda.so.1" "$emu/fakecuda.cc"
cp "$tmp/libcuda.so.1" "$tmp/libcublas.so.13"
if [[ ${1:-} == --libs ]]; then
	mkdir -p "$2"
	cp "$tmp/libcuda.so.1" "$tmp/libcublas.so.13" "$2"/
	exit 0
fi
pkg=./gpu
if [[ $# -gt 0 && ( $1 == . || $1 == ./* ) ]]; then
	pkg=$1
	shift
fi
(cd "$root" && go test -c -tags agentrl_cuda -o "$tmp/pkg.test" "$pkg")
cd "$root/$pkg"
LD_LIBRARY_PATH="$tmp" AGENTRL_REQUIRE_GPU=1 "$tmp/pkg.test" -test.count=1 "$@"
