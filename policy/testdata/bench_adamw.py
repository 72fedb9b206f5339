#!/usr/bin/env python3
"""Reference timing for BenchmarkAdamWStep: torch.optim.AdamW (torch 1.13, CPU,
one thread) on one float32 parameter of 2^20 elements, foreach=False (the
single-tensor path AdamW mirrors) and foreach=True.

    python3 testdata/bench_adamw.py
"""
import time

import torch

torch.set_num_threads(1)
N = 1 << 20
for foreach in (False, True):
    p = torch.nn.Parameter(torch.randn(N))
    p.grad = torch.randn(N)
    opt = torch.optim.AdamW([p], lr=1e-3, foreach=foreach)
    for _ in range(5):
        opt.step()
    n = 100
    t0 = time.perf_counter()
    for _ in range(n):
        opt.step()
    dt = (time.perf_counter() - t0) / n
    print(f"foreach={foreach!s:5s} {dt * 1e3:7.3f} ms/step  {4 * N / dt / 1e6:8.1f} MB/s")
