#!/usr/bin/env bash
# gpu_check.sh runs the CUDA backend's tests and benchmarks on a GPU machine.
#
# The test binary is built beforehand on any Linux machine with Go and the
# CUDA headers (it links nothing from CUDA; it needs glibc ≥ 2.34):
#
#   go test -c -tags agentrl_cuda -o gpu/gpu.test ./gpu
#
# and copied into gpu/ on the GPU machine (it is git-ignored, *.test). Then,
# from the repository root on the GPU machine:
#
#   bash gpu/scripts/gpu_check.sh [output-dir]
#
# It writes device.txt, test.log and bench.log to output-dir (default:
# $OUT when set, else ./gpu-check-out) and exits non-zero when a test fails.
# AGENTRL_REQUIRE_GPU=1 turns "no GPU" skips into failures. Where python3
# has torch with CUDA, it also times PyTorch's scaled_dot_product_attention
# on the attention benchmarks' shapes (scripts/sdpa_bench.py, sdpa.log).
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
out="${1:-${OUT:-./gpu-check-out}}"
mkdir -p "$out"

if [ ! -x ./gpu.test ]; then
	if command -v go >/dev/null 2>&1; then
		echo "gpu.test missing: building it" >&2
		(cd .. && go test -c -tags agentrl_cuda -o gpu/gpu.test ./gpu) || exit 1
	else
		echo "gpu.test missing and no Go toolchain: build it elsewhere (see the header)" >&2
		exit 1
	fi
fi

# cuBLAS where the loader or the Python packages have it (CUDA 12 or 13).
. scripts/cublas_path.sh

{
	echo "== nvidia-smi"
	nvidia-smi 2>&1 || true
	echo "== CUDA libraries seen by the loader"
	ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libcublas(Lt)?\.so' || echo "(none in the ldconfig cache)"
	echo "== LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
} >"$out/device.txt" 2>&1
cat "$out/device.txt"

export AGENTRL_REQUIRE_GPU=1
status=0
echo "== tests" >&2
./gpu.test -test.v -test.count=1 -test.timeout=300s 2>&1 | tee "$out/test.log" || status=1
grep -E '^(--- FAIL|FAIL|ok|PASS)' "$out/test.log" | tail -40

echo "== benchmarks" >&2
./gpu.test -test.run='^$' -test.bench=. -test.benchtime=10x -test.timeout=300s 2>&1 | tee "$out/bench.log" || status=1

# PyTorch's SDPA (flash attention) on the same shapes, for comparison with
# BenchmarkAttention*'s gpu-attn-tensor-cores lines; skipped without torch.
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
	echo "== torch scaled_dot_product_attention" >&2
	{
		python3 scripts/sdpa_bench.py --head-dim 128
		python3 scripts/sdpa_bench.py --head-dim 64
	} 2>&1 | tee "$out/sdpa.log"
else
	echo "no torch with CUDA: SDPA comparison skipped" | tee "$out/sdpa.log" >&2
fi
exit $status
