#!/usr/bin/env bash
# decode_bench.sh prints the decode table on a GPU machine: for the
# Qwen3-0.6B shape (or -models 4b) at batches 32, 128 and 256 (prompt 512,
# 512 new tokens), Model.Generate's tokens/s end to end and while
# decoding, transformers' generate on the same shape, the bandwidth floor,
# serve's /v1/completions, and per step the launches, the round trips to
# the backend's worker and the uploads, and the steps replayed from CUDA
# graphs. One model per run: each fits a 10-minute command on a fresh
# machine (transformers cut at HF_TIMEOUT seconds, default 200; decodebench
# starts no point after BUDGET, default 300s, and draws the weights on the
# device).
#
# The Go program is built beforehand on any Linux machine with Go and the
# CUDA headers (it links nothing from CUDA):
#
#   go build -tags agentrl_cuda -o gpu/decodebench.bin ./gpu/decodebench
#
# and carried to the GPU machine (it is git-ignored, *.bin). Then, from the
# repository root there:
#
#   bash gpu/scripts/decode_bench.sh [output-dir] [decodebench flags…]
#
# It writes hf.jsonl (transformers), table.txt, results.json and the
# programs' logs to output-dir (default: $OUT when set, else
# ./decode-bench-out); table.txt and results.json are rewritten after every
# point, so a run cut short keeps what it measured. Extra arguments go to
# decodebench (for example -models 4b, or -batches 32 -serve=false
# -split=false to run one short point); HF_ARGS passes arguments to
# hf_generate_bench.py, and HF=0 skips it.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
out="${1:-${OUT:-./decode-bench-out}}"
[ $# -gt 0 ] && shift
mkdir -p "$out"
bin=./gpu/decodebench.bin
if [ ! -x "$bin" ]; then
	if command -v go >/dev/null 2>&1; then
		go build -tags agentrl_cuda -o "$bin" ./gpu/decodebench || exit 1
	else
		echo "$bin missing and no Go toolchain: build it elsewhere (see the header)" >&2
		exit 1
	fi
fi
nvidia-smi >"$out/device.txt" 2>&1 || true
# cuBLAS where the loader or the Python packages have it (CUDA 12 or 13).
. gpu/scripts/cublas_path.sh

# Keep transformers' points the same as decodebench's.
models=0.6b batches=32,128,256 prompt=512 new=512
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	case "${args[i]}" in
	-models | --models) models=${args[i + 1]} ;;
	-batches | --batches) batches=${args[i + 1]} ;;
	-prompt | --prompt) prompt=${args[i + 1]} ;;
	-new | --new) new=${args[i + 1]} ;;
	esac
done
hf=()
if [ "${HF:-1}" != 0 ] && python3 -c 'import torch, transformers, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
	echo "== transformers generate" >&2
	# shellcheck disable=SC2086 # HF_ARGS is a list of arguments
	timeout "${HF_TIMEOUT:-200}" python3 gpu/scripts/hf_generate_bench.py --models "$models" --batches "$batches" --prompt "$prompt" --new "$new" ${HF_ARGS:-} \
		2> >(tee "$out/hf.log" >&2) | tee "$out/hf.jsonl"
	hf=(-hf "$out/hf.jsonl")
else
	echo "no torch with CUDA and transformers (or HF=0): the hf column stays empty" >&2
fi
echo "== decodebench" >&2
"$bin" -device cuda -precision bf16 -models "$models" -batches "$batches" -prompt "$prompt" -new "$new" ${hf[@]+"${hf[@]}"} \
	-budget "${BUDGET:-300s}" -json "$out/results.json" -table "$out/table.txt" ${args[@]+"${args[@]}"} 2> >(tee "$out/decodebench.log" >&2)
