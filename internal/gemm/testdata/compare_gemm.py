"""Compare gemm's Sgemm with gonum and PyTorch, back to back.

Run from internal/gemm with Debian's python3-torch (1.13, CPU):

    /usr/bin/python3 testdata/compare_gemm.py [threads] [rounds]

Each round runs `go test -bench Sgemm` (agentrl and gonum, GOMAXPROCS =
threads) and then the PyTorch timings of torch_gemm.py (threads intra-op
threads), so that both see the same load on a shared machine. It prints, per
shape, the median over rounds (default 5) of the wall-clock GFLOP/s and of
the GFLOP per CPU-second (the steadier figure when other processes compete
for the cores), and the ratios agentrl/PyTorch-oneDNN and agentrl/gonum.
"""
import re
import statistics
import subprocess
import sys

import torch

import torch_gemm

LINE = re.compile(r"BenchmarkSgemm/(\w+)/(\w+)(?:-\d+)?\s+\d+\s+\d+ ns/op(.*)")


def go_round(threads):
    out = subprocess.run(
        ["go", "test", "-run", "x", "-bench", "^BenchmarkSgemm$", "-benchtime", "5x",
         "-cpu", str(threads), "."],
        check=True, capture_output=True, text=True).stdout
    res = {}
    for m in LINE.finditer(out):
        impl, shape, metrics = m.groups()
        vals = dict((u, float(v)) for v, u in re.findall(r"([\d.]+) (GFLOP/\S+)", metrics))
        res[(impl, shape)] = (vals["GFLOP/s"], vals.get("GFLOP/cpu-s", 0.0))
    return res


def torch_round(threads):
    torch.set_num_threads(threads)
    res = {}
    for name, ta, tb, m, n, k in torch_gemm.SHAPES:
        a, b = torch_gemm.operand(m, k, ta), torch_gemm.operand(k, n, tb)
        c = torch.empty(m, n)
        xm, wm = torch.randn(m, k).to_mkldnn(), torch.randn(n, k).to_mkldnn()
        flops = 2.0 * m * n * k
        res[("torch_mm", name)] = torch_gemm.rate(lambda: torch.mm(a, b, out=c), flops, 1)
        res[("torch_onednn", name)] = torch_gemm.rate(
            lambda: torch._C._nn.mkldnn_linear(xm, wm, None), flops, 1)
    return res


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    samples = {}
    for _ in range(rounds):
        for res in (go_round(threads), torch_round(threads)):
            for key, val in res.items():
                samples.setdefault(key, []).append(val)
    med = {k: (statistics.median(v[0] for v in vs), statistics.median(v[1] for v in vs))
           for k, vs in samples.items()}
    impls = ["agentrl", "gonum", "torch_onednn", "torch_mm"]
    print(f"threads={threads} rounds={rounds}; cells: wall GFLOP/s | GFLOP per CPU-second")
    print("shape".ljust(28) + "".join(i.rjust(18) for i in impls) + "  ratio vs oneDNN  ratio vs gonum")
    for name, *_ in torch_gemm.SHAPES:
        cells = [med.get((i, name), (0.0, 0.0)) for i in impls]
        row = name.ljust(28) + "".join(f"{w:8.1f} |{c:7.1f}".rjust(18) for w, c in cells)
        ours, gon, dnn = cells[0], cells[1], cells[2]
        ratio = lambda a, b: f"{a / b:5.2f}" if b else "  n/a"
        row += f"  {ratio(ours[0], dnn[0])} | {ratio(ours[1], dnn[1])}"
        row += f"  {ratio(ours[0], gon[0])} | {ratio(ours[1], gon[1])}"
        print(row)


if __name__ == "__main__":
    main()
