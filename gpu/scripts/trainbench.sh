#!/usr/bin/env bash
# trainbench.sh runs gpu/cmd/trainbench on a GPU machine: agentrl's and
# PyTorch's training step side by side on Qwen3-0.6B, -1.7B and -4B shapes,
# and the log-prob check against transformers, in one command.
#
# The binary is built beforehand on any Linux machine with Go and the CUDA
# headers (it links nothing from CUDA; it needs glibc ≥ 2.34):
#
#   go build -tags agentrl_cuda -o gpu/trainbench ./gpu/cmd/trainbench
#
# and sits at gpu/trainbench on the GPU machine (git-ignored). There, from
# the repository root, with python3 holding torch (CUDA) and transformers:
#
#   bash gpu/scripts/trainbench.sh [output-dir] [trainbench flags...]
#
# It writes device.txt (nvidia-smi, the libraries found), trainbench.md
# (the report, also printed), trainbench-checkpoint.md (Qwen3-4B again,
# agentrl alone with activation checkpointing) and trainbench.log
# (progress) to output-dir (default: $OUT when set, else
# ./trainbench-out). Flags after the folder go to the first run, e.g.
# -shapes qwen3-4b or -check=false. It exits non-zero when the log-prob
# check fails or the program does.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
out="${1:-${OUT:-./trainbench-out}}"
[ $# -gt 0 ] && shift
mkdir -p "$out"

bin=./gpu/trainbench
if [ ! -x "$bin" ]; then
	if command -v go >/dev/null 2>&1; then
		echo "gpu/trainbench missing: building it" >&2
		go build -tags agentrl_cuda -o "$bin" ./gpu/cmd/trainbench || exit 1
	else
		echo "gpu/trainbench missing and no Go toolchain: build it elsewhere (see the header)" >&2
		exit 1
	fi
fi

# cuBLAS: the loader's, else the one the Python packages carry (CUDA 13
# wheels: nvidia/cu13/lib; CUDA 12: nvidia/cublas/lib; torch's lib).
. gpu/scripts/cublas_path.sh

{
	echo "== nvidia-smi"
	nvidia-smi 2>&1 || true
	echo "== CUDA libraries seen by the loader"
	ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libcublas(Lt)?\.so' || echo "(none in the ldconfig cache)"
	echo "== LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
	echo "== python3"
	python3 -c 'import sys, torch, transformers; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' 2>&1 || true
} >"$out/device.txt" 2>&1
cat "$out/device.txt"

status=0
"$bin" -kernels -out "$out" "$@" 2> >(tee "$out/trainbench.log" >&2) || status=$?

# Qwen3-4B again with activation checkpointing, agentrl alone: the memory
# a full fine-tune needs at this batch when each layer is recomputed in
# the backward (skip with TRAINBENCH_CHECKPOINT=0).
if [ "${TRAINBENCH_CHECKPOINT:-1}" != 0 ]; then
	echo
	"$bin" -shapes qwen3-4b -checkpoint -torch "" -check=false 2>>"$out/trainbench.log" | tee "$out/trainbench-checkpoint.md" || status=$?
fi
exit $status
