#!/usr/bin/env python3
"""Reference timing for BenchmarkCompute: verl's vanilla PPO-clip policy loss
(compute_policy_loss_vanilla, token-mean agg_loss, with its metrics) forward
and autograd backward on B = 64, T = 4096, in PyTorch on the CPU.

Run from the loss/ directory with Debian's python3-torch (1.13):

    python3 testdata/bench_torch.py

It prints wall and process-CPU nanoseconds per token for float32 (what verl
runs) and float64 (what the Go graph computes in).
"""
import time

import torch

B, T = 64, 4096
CLIP_LOW, CLIP_HIGH, CLIP_C = 0.2, 0.28, 10.0


def batch(dtype):
    g = torch.Generator().manual_seed(1)
    lp = -torch.empty(B, T).exponential_(generator=g)
    old = lp + 0.1 * torch.randn(B, T, generator=g)
    adv = torch.randn(B, 1, generator=g).expand(B, T).contiguous()
    lengths = torch.tensor([T - r * T // (2 * B) for r in range(B)])
    mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).float()
    return [x.to(dtype) for x in (lp, old, adv, mask)]


def step(lp0, old, adv, mask):
    lp = lp0.detach().requires_grad_(True)
    nak = torch.clamp(lp - old, min=-20.0, max=20.0)
    ratio = torch.exp(nak)
    ppo_kl = (-nak * mask).sum() / (mask.sum() + 1e-8)
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1 - CLIP_LOW, 1 + CLIP_HIGH)
    cl1 = torch.maximum(pg1, pg2)
    clipfrac = (torch.gt(pg2, pg1).to(lp.dtype) * mask).sum() / (mask.sum() + 1e-8)
    pg3 = -adv * CLIP_C
    cl2 = torch.min(pg3, cl1)
    lower = ((torch.gt(cl1, pg3) * (adv < 0)).to(lp.dtype) * mask).sum() / (mask.sum() + 1e-8)
    pg = torch.where(adv < 0, cl2, cl1)
    loss = (pg * mask).sum() / mask.sum()
    loss.backward()
    return loss.item(), clipfrac.item(), lower.item(), ppo_kl.item(), lp.grad


def main():
    print("torch", torch.__version__, "threads", torch.get_num_threads())
    for dtype in (torch.float32, torch.float64):
        xs = batch(dtype)
        for _ in range(3):
            step(*xs)
        n = 20
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            step(*xs)
        w1, c1 = time.perf_counter(), time.process_time()
        tokens = n * B * T
        print("%s: %.1f ns/token wall, %.1f ns/token cpu" % (dtype, (w1 - w0) * 1e9 / tokens, (c1 - c0) * 1e9 / tokens))


if __name__ == "__main__":
    main()
