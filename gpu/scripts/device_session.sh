#!/usr/bin/env bash
# device_session.sh runs, in one command of at most ten minutes on a fresh
# GPU machine, what a session with a GPU should measure first, each stage
# under its own time limit so that a slow stage leaves the later ones
# their turn:
#
#   1. the gpu package's tests (every test, a missing GPU an error), with
#      TestTrainingRunToRun (two training runs, the same bits);
#   2. decode_bench.sh for Qwen3-0.6B with the per-kernel profile of a
#      decode step and the CUDA graph trace (decodebench -kernels,
#      -graph-trace);
#   3. trainbench on Qwen3-0.6B and -4B against PyTorch;
#   4. decode_bench.sh for Qwen3-4B at batches 32 and 256, with what is
#      left.
#
# The programs come from build_for_gpu.sh (carried in .gpu-bin); HF_JSONL
# names earlier transformers results to reuse instead of running
# transformers again (HF_JSONL_4B for the 4B model). It writes
# everything into one archive, all.tgz, under OUT (default: $OUT, else
# ./device-session-out), and the tables beside it:
#
#   bash gpu/scripts/device_session.sh [OUT]
#
# END (default 540) is the seconds the whole script may take.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
out="${1:-${OUT:-./device-session-out}}"
mkdir -p "$out"
T0=$SECONDS
END=${END:-540}
R=$(mktemp -d)
left() { echo $((END - (SECONDS - T0))); }
unpack() {
	xz -dc ".gpu-bin/$1.xz" >"$2" 2>/dev/null ||
		python3 -c "import lzma,sys;open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" ".gpu-bin/$1.xz" "$2" || exit 1
	chmod +x "$2"
}
unpack gpu.test gpu/gpu.test
unpack decodebench.bin gpu/decodebench.bin
unpack trainbench gpu/trainbench
# cuBLAS where the loader, a CUDA toolkit or the Python packages have it.
. gpu/scripts/cublas_path.sh
export PYTHONUNBUFFERED=1
finish() {
	for f in decode06/table.txt kernels06.txt train/trainbench.md decode4b/table.txt kernels4b.txt; do
		[ -f "$R/$f" ] && cp "$R/$f" "$out/$(echo "$f" | tr / _)"
	done
	tar czf "$out/all.tgz" -C "$R" .
	echo "== done in $((SECONDS - T0)) s"
}
trap finish EXIT
nvidia-smi >"$R/device.txt" 2>&1

echo "== [$((SECONDS - T0)) s] gpu tests"
(cd gpu && AGENTRL_REQUIRE_GPU=1 timeout -k 5 90 ./gpu.test -test.v -test.count=1 -test.timeout=85s >"$R/test.log" 2>&1)
echo "tests: exit $?; $(grep -c '^--- PASS' "$R/test.log") passed"
grep -E '^(--- FAIL|FAIL|panic)' "$R/test.log" | head -20

hf=()
[ -n "${HF_JSONL:-}" ] && hf=(-hf "$HF_JSONL")
echo "== [$((SECONDS - T0)) s] decode, Qwen3-0.6B"
HF=$([ -n "${HF_JSONL:-}" ] && echo 0 || echo 1) HF_TIMEOUT=100 BUDGET=80s timeout -k 5 200 \
	bash gpu/scripts/decode_bench.sh "$R/decode06" -models 0.6b -serve=false ${hf[@]+"${hf[@]}"} \
	-kernels "$R/kernels06.txt" -graph-trace "$R/trace06.txt" >"$R/decode06.log" 2>&1
cat "$R/decode06/table.txt" 2>/dev/null

t=$(($(left) - 120))
if [ $t -gt 60 ]; then
	echo "== [$((SECONDS - T0)) s] trainbench"
	mkdir -p "$R/train"
	timeout -k 5 $((t < 180 ? t : 180)) ./gpu/trainbench -shapes qwen3-0.6b,qwen3-4b -steps 3 -warmup 1 -kernels -out "$R/train" \
		>"$R/train/report.md" 2>"$R/train/trainbench.log"
	grep -E '^\| Qwen3' "$R/train/report.md" | head -4
fi

t=$(($(left) - 10))
if [ $t -gt 60 ]; then
	echo "== [$((SECONDS - T0)) s] decode, Qwen3-4B"
	hf=()
	[ -n "${HF_JSONL_4B:-}" ] && hf=(-hf "$HF_JSONL_4B")
	HF=0 BUDGET=$((t / 2))s timeout -k 5 $t bash gpu/scripts/decode_bench.sh "$R/decode4b" -models 4b -serve=false -batches 32,256 \
		${hf[@]+"${hf[@]}"} -kernels "$R/kernels4b.txt" -graph-trace "$R/trace4b.txt" >"$R/decode4b.log" 2>&1
	cat "$R/decode4b/table.txt" 2>/dev/null
fi
