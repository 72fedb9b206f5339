#!/usr/bin/env python3
"""Reference timing for BenchmarkSample: vLLM-style sampling in torch 1.13 (CPU).

Mirrors vllm/v1/sample/ops/topk_topp_sampler.py (apply_top_k_top_p: sort,
mask top-k, softmax, cumsum, mask top-p) plus the raw log-softmax that vLLM
returns, on one row of 151,936 logits (Qwen's vocabulary), one thread.

    python3 testdata/bench_sampling.py
"""
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
V = 151936
logits = (torch.randn(1, V) * 3).float()


def sample(logits, temperature, top_k, top_p):
    raw = torch.log_softmax(logits, dim=-1)
    if temperature == 0:
        tok = logits.argmax(dim=-1)
        return tok, raw.gather(-1, tok[:, None])
    logits = logits / temperature
    if top_k > 0 or top_p < 1:
        logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
        if top_k > 0:
            kth = logits_sort.gather(1, (V - top_k) * torch.ones(1, 1, dtype=torch.long))
            logits_sort.masked_fill_(logits_sort < kth, -float("inf"))
        if top_p < 1:
            probs_sort = logits_sort.softmax(dim=-1)
            probs_sum = probs_sort.cumsum(dim=-1)
            mask = probs_sum <= 1 - top_p
            mask[:, -1] = False
            logits_sort.masked_fill_(mask, -float("inf"))
        logits = logits_sort.scatter(dim=-1, index=logits_idx, src=logits_sort)
    probs = logits.softmax(dim=-1)
    tok = torch.multinomial(probs, 1)
    return tok, raw.gather(-1, tok)


for name, args in [("greedy", (0, 0, 1.0)), ("T1", (1.0, 0, 1.0)), ("T1_topp0.95", (1.0, 0, 0.95)),
                   ("T0.7_topk50_topp0.9", (0.7, 50, 0.9))]:
    for _ in range(5):
        sample(logits, *args)
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        sample(logits, *args)
    dt = (time.perf_counter() - t0) / n
    print(f"{name:24s} {dt * 1e6:10.0f} us/op")
