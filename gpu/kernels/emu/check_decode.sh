#!/usr/bin/env bash
# check_decode.sh compiles ../decode.cu for the CPU under emu.h (CUDA
# threads as std::threads) and runs check_decode.cc's comparisons with
# float64 references: the paged KV cache's append, block copy and
# attention, and sampling. It needs only g++ ≥ 11 (C++20), no GPU and no
# CUDA; run it after editing decode.cu: bash gpu/kernels/emu/check_decode.sh
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -e 's|^#include <cuda_bf16.h>||' \
    -e 's|extern __shared__ float \([a-z_]*\)\[\];|float* \1 = emu_smem.data();|' \
    ../decode.cu >"$tmp/decode_emu.inc"
g++ -std=c++20 -O1 -ffp-contract=off -fno-strict-aliasing -pthread -I. -I"$tmp" -o "$tmp/check" check_decode.cc
"$tmp/check"
# When ptxas is installed, also assemble the committed PTX as the driver's
# JIT will (sm_80 for the compute_80 file, sm_90 for compute_90).
if command -v ptxas >/dev/null 2>&1; then
	ptxas -arch=sm_80 -o /dev/null ../decode_sm80.ptx
	ptxas -arch=sm_90 -o /dev/null ../decode_sm90.ptx
	echo "committed decode PTX assembles for sm_80 and sm_90"
fi
