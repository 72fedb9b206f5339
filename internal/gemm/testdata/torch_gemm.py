"""Time PyTorch CPU float32 matmul on the shapes of gemm's BenchmarkSgemm.

Run from internal/gemm with Debian's python3-torch (1.13, CPU):

    /usr/bin/python3 testdata/torch_gemm.py [threads] [repeats]

It prints one line per shape, "name mm=W/C onednn=W/C", where W is the
wall-clock GFLOP/s and C the GFLOP per CPU-second of the process (steadier
on a shared machine; with one thread, the single-core speed): medians over
`repeats` timed batches (default 7) on `threads` intra-op threads (default
2, the cores of the development machine), for two PyTorch paths:

  mm      torch.mm on the same (possibly transposed) operands. Debian's
          python3-torch is built with BLAS_INFO=generic, so this runs the
          system libblas (reference BLAS unless OpenBLAS is installed).
  onednn  torch._C._nn.mkldnn_linear, y = x·Wᵀ with x [m,k] and W [n,k]
          in oneDNN's blocked layout: PyTorch's fastest CPU GEMM here (same
          flop count; the layout of the operands is oneDNN's, not ours).

Compare with

    go test -run x -bench Sgemm/agentrl -cpu <threads> ./internal/gemm

whose GFLOP/s and GFLOP/cpu-s metrics mean the same.
"""
import statistics
import sys
import time

import torch

SHAPES = [  # name, transA, transB, m, n, k: the same list as bench_test.go
    ("square512", False, False, 512, 512, 512),
    ("square1024", False, False, 1024, 1024, 1024),
    ("linear_fwd_512x3072x1024", False, True, 512, 3072, 1024),
    ("linear_dx_512x1024x3072", False, False, 512, 1024, 3072),
    ("linear_dW_3072x1024x512", True, False, 3072, 1024, 512),
    ("decode_1x3072x1024", False, True, 1, 3072, 1024),
    # examples/arith's main job (hidden 128, MLP 384): an SFT update's
    # 3,600 tokens and a 64-row decode step.
    ("arith_up_3600x384x128", False, True, 3600, 384, 128),
    ("arith_down_3600x128x384", False, True, 3600, 128, 384),
    ("arith_dW_384x128x3600", True, False, 384, 128, 3600),
    ("arith_decode_64x384x128", False, True, 64, 384, 128),
]


def operand(rows, cols, trans):
    """A row-major [rows, cols] view; stored transposed when trans, as in Go."""
    if trans:
        return torch.randn(cols, rows).t()
    return torch.randn(rows, cols)


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    for name, ta, tb, m, n, k in SHAPES:
        a = operand(m, k, ta)
        b = operand(k, n, tb)
        c = torch.empty(m, n)
        flops = 2.0 * m * n * k
        xm = torch.randn(m, k).to_mkldnn()
        wm = torch.randn(n, k).to_mkldnn()
        mm = rate(lambda: torch.mm(a, b, out=c), flops, repeats)
        dnn = rate(lambda: torch._C._nn.mkldnn_linear(xm, wm, None), flops, repeats)
        print(f"{name} mm={mm[0]:.1f}/{mm[1]:.1f} onednn={dnn[0]:.1f}/{dnn[1]:.1f}")


def rate(f, flops, repeats):
    """Median wall-clock GFLOP/s and GFLOP per CPU-second of f over
    repeats batches of about 0.2 s each."""
    f()
    t0 = time.perf_counter()
    f()
    once = max(time.perf_counter() - t0, 1e-7)
    iters = max(1, int(0.2 / once))
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(iters):
            f()
        t1, c1 = time.perf_counter(), time.process_time()
        wall.append(flops * iters / (t1 - t0) / 1e9)
        cpu.append(flops * iters / max(c1 - c0, 1e-9) / 1e9)
    return statistics.median(wall), statistics.median(cpu)


if __name__ == "__main__":
    main()
