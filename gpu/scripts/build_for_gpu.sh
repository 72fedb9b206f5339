#!/usr/bin/env bash
# build_for_gpu.sh builds, on a machine with Go and the CUDA headers (no GPU
# needed), the three programs a GPU session runs — the gpu package's test
# binary, decodebench and trainbench — with -tags agentrl_cuda, stripped
# and xz-compressed (≈ 16 MB together) into DIR (default .gpu-bin, which
# git ignores), for device_session.sh to unpack on the GPU machine:
#
#   CGO_CFLAGS=-I<cuda include> bash gpu/scripts/build_for_gpu.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.gpu-bin}
mkdir -p "$dir"
rm -f "$dir"/gpu.test.xz "$dir"/decodebench.bin.xz "$dir"/trainbench.xz
go test -c -tags agentrl_cuda -ldflags='-s -w' -o "$dir/gpu.test" ./gpu
go build -tags agentrl_cuda -ldflags='-s -w' -o "$dir/decodebench.bin" ./gpu/decodebench
go build -tags agentrl_cuda -ldflags='-s -w' -o "$dir/trainbench" ./gpu/cmd/trainbench
xz -T0 -6 "$dir/gpu.test" "$dir/decodebench.bin" "$dir/trainbench"
ls -l "$dir"
