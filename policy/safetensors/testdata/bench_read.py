#!/usr/bin/env python3
"""Reference timing for BenchmarkReadFloat32 / BenchmarkWriteBF16: torch 1.13, one thread.

Reads a 16M-element F32 or BF16 tensor from a file in the page cache into a
float32 tensor (file read + torch.frombuffer + .float()), and converts
16M float32 values to bfloat16 bytes, as a safetensors reader/writer built
on torch would.

    python3 testdata/bench_read.py
"""
import os
import tempfile
import time

import torch

torch.set_num_threads(1)
N = 1 << 24
vals = (torch.arange(N, dtype=torch.float32) % 4093) * 0.01


def bench(fn, n=10):
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


with tempfile.TemporaryDirectory() as d:
    for name, t in [("F32", vals), ("BF16", vals.to(torch.bfloat16))]:
        path = os.path.join(d, name)
        raw = t.view(torch.int16).numpy().tobytes() if name == "BF16" else t.numpy().tobytes()
        with open(path, "wb") as f:
            f.write(raw)

        def read():
            with open(path, "rb") as f:
                buf = bytearray(f.read())
            x = torch.frombuffer(buf, dtype=torch.bfloat16 if name == "BF16" else torch.float32)
            return x.float()

        dt = bench(read)
        print(f"read {name:5s} {dt * 1e3:8.2f} ms  {len(raw) / dt / 1e6:8.1f} MB/s")

    def write():
        return vals.to(torch.bfloat16).view(torch.int16).numpy().tobytes()

    dt = bench(write)
    print(f"write BF16  {dt * 1e3:8.2f} ms  {2 * N / dt / 1e6:8.1f} MB/s")
