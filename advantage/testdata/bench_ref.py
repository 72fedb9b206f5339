#!/usr/bin/python3
"""Reference timings for BenchmarkCompute: verl's GRPO and GAE in PyTorch.

Run with PyTorch installed (Debian's python3-torch 1.13 was used):

    /usr/bin/python3 testdata/bench_ref.py [threads]

The functions below follow verl's compute_grpo_outcome_advantage and
compute_gae_advantage_return (verl/trainer/ppo/core_algos.py) with
masked_whiten (verl/utils/torch_functional.py), in float32 on [B, T]
tensors as verl runs them, on the batch shape of BenchmarkCompute:
512 trajectories x 4096 tokens, 8 per prompt, three 200-token tool spans
per row. It prints the fastest and the median wall time per call, and
ns per token.
"""

import sys
import time
from collections import defaultdict

import torch

B, T = 512, 4096


def masked_whiten(values, mask):
    mean = (values * mask).sum() / mask.sum()
    var = (((values - mean) ** 2) * mask).sum() / mask.sum()
    n = mask.sum()
    var = var * n / (n - 1)
    return (values - mean) * torch.rsqrt(var + 1e-8)


def grpo(token_level_rewards, response_mask, index, epsilon=1e-6):
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean, id2std = {}, {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx], id2std[idx] = torch.tensor(0.0), torch.tensor(1.0)
            else:
                st = torch.stack(id2score[idx])
                id2mean[idx], id2std[idx] = torch.mean(st), torch.std(st)
        for i in range(bsz):
            scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        scores = scores.unsqueeze(-1) * response_mask
    return scores, scores


def gae(token_level_rewards, values, response_mask, gamma=1.0, lam=1.0):
    with torch.no_grad():
        nextvalues = 0
        lastgaelam = 0
        rev = []
        for t in reversed(range(token_level_rewards.shape[-1])):
            delta = token_level_rewards[:, t] + gamma * nextvalues - values[:, t]
            lastgaelam_ = delta + gamma * lam * lastgaelam
            nextvalues = values[:, t] * response_mask[:, t] + (1 - response_mask[:, t]) * nextvalues
            lastgaelam = lastgaelam_ * response_mask[:, t] + (1 - response_mask[:, t]) * lastgaelam
            rev.append(lastgaelam)
        advantages = torch.stack(rev[::-1], dim=1)
        returns = advantages + values
        advantages = masked_whiten(advantages, response_mask)
    return advantages, returns


def timeit(fn, reps):
    """Returns the fastest and the median of reps calls."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[0], times[len(times) // 2]


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    mask = torch.ones(B, T)
    for span in (1, 2, 3):
        start = span * T // 4
        mask[:, start:start + 200] = 0
    scores = torch.randint(0, 2, (B,), generator=g).float()
    tlr = torch.zeros(B, T)
    last = T - 1  # the last token is a model token in every row
    tlr[:, last] = scores
    values = torch.rand(B, T, generator=g)
    index = ["prompt-%d" % (i // 8) for i in range(B)]

    for name, fn, reps in (
        ("grpo", lambda: grpo(tlr.clone(), mask, index), 10),
        ("gae", lambda: gae(tlr, values, mask), 5),
    ):
        fn()  # warm up
        best, median = timeit(fn, reps)
        print("%-5s threads=%d  best %8.1f ms/op %7.2f ns/token   median %8.1f ms/op %7.2f ns/token" % (
            name, threads, best * 1e3, best * 1e9 / (B * T), median * 1e3, median * 1e9 / (B * T)))


if __name__ == "__main__":
    main()
