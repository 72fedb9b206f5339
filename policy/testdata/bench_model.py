#!/usr/bin/env python3
"""Reference timings for model_bench_test.go: the same ≈10M-parameter
Qwen3-style model (vocab 8192, hidden 384, 4 layers, 6 heads, 2 KV heads,
head_dim 64, intermediate 1152, tied embeddings) in plain PyTorch float32
on the CPU (Debian python3-torch 1.13, 2 threads as the Go backend's 2
workers), for the same measures:

  forward     8 × 128 tokens, per-token log-probs and entropy, no grad
  train step  the same batch: forward, L = −mean(logp), backward, AdamW
  decode      greedy with a KV cache, 16-token prompts, 64 new tokens,
              batch 1 and 32

Each measure is repeated and its median printed, in tokens/s.

    /usr/bin/python3 testdata/bench_model.py

With --arith it is examples/arith's model instead (vocab 266, hidden 128,
2 layers, 8 heads, 4 KV heads, head_dim 16, intermediate 384, rope theta
1e4, tied embeddings: 428,480 parameters with the job's 270-token
vocabulary; before 2026-11-28 the job had 4 heads and 2 KV heads of 32,
the same projections and 64 more norm weights: 428,544) and the measures of BenchmarkArithSFTStep and
BenchmarkArithGenerate:

  sft step    16 sequences of 150, 160, …, 300 tokens (3,600 in all),
              padded to 300 as a Hugging Face batch is, the loss
              −mean(logp) over the real tokens only: forward, backward,
              AdamW; tokens/s counts the 3,600 real tokens
  generate    16 requests of 64-token prompts, 128 new tokens each,
              sampled at temperature 1 with a KV cache

each in tokens per wall-clock second and per CPU-second of the process.

    /usr/bin/python3 testdata/bench_model.py --arith

--threads=N sets PyTorch's intra-op threads (default 2, the Go backend's
workers on the development machine); compare --threads=1 (with
OPENBLAS_NUM_THREADS=1) against the Go benchmarks at -cpu 1.

Debian's torch does its matmuls through the system libblas.so.3; with
the reference BLAS (the default when OpenBLAS is not installed) that is
about 2 GFLOP/s. For a fair comparison run it against OpenBLAS (Debian
package libopenblas0-pthread, or its libblas.so.3 put first on
LD_LIBRARY_PATH, with OPENBLAS_NUM_THREADS=2): about 70 GFLOP/s here.
"""
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

THREADS = 2
for a in sys.argv[1:]:
    if a.startswith("--threads="):
        THREADS = int(a.split("=", 1)[1])
torch.set_num_threads(THREADS)
V, H, L, NH, NKV, HD, I = 8192, 384, 4, 6, 2, 64, 1152
EPS, THETA = 1e-6, 1e6
ARITH = "--arith" in sys.argv[1:]
if ARITH:
    V, H, L, NH, NKV, HD, I = 266, 128, 2, 8, 4, 16, 384
    THETA = 1e4


class RMSNorm(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def rotate_half(x):
    return torch.cat((-x[..., HD // 2:], x[..., :HD // 2]), dim=-1)


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(H, NH * HD, bias=False)
        self.k = torch.nn.Linear(H, NKV * HD, bias=False)
        self.v = torch.nn.Linear(H, NKV * HD, bias=False)
        self.o = torch.nn.Linear(NH * HD, H, bias=False)
        self.q_norm, self.k_norm = RMSNorm(HD), RMSNorm(HD)
        self.gate = torch.nn.Linear(H, I, bias=False)
        self.up = torch.nn.Linear(H, I, bias=False)
        self.down = torch.nn.Linear(I, H, bias=False)
        self.ln1, self.ln2 = RMSNorm(H), RMSNorm(H)

    def forward(self, x, cos, sin, cache=None):
        B, T, _ = x.shape
        h = self.ln1(x)
        q = self.q_norm(self.q(h).view(B, T, NH, HD)).transpose(1, 2)
        k = self.k_norm(self.k(h).view(B, T, NKV, HD)).transpose(1, 2)
        v = self.v(h).view(B, T, NKV, HD).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:
            kc, vc, n = cache  # preallocated [B, NKV, cap, HD]
            kc[:, :, n:n + T], vc[:, :, n:n + T] = k, v
            k, v = kc[:, :, :n + T], vc[:, :, :n + T]
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        s = q @ k.transpose(-1, -2) / math.sqrt(HD)
        Tk = k.shape[2]
        mask = torch.full((T, Tk), float("-inf")).triu(Tk - T + 1)
        a = torch.softmax(s + mask, dim=-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(B, T, NH * HD))
        h = self.ln2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(V, H)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(L))
        self.norm = RMSNorm(H)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)
        self.inv = 1.0 / (THETA ** (torch.arange(0, HD, 2).float() / HD))

    def hidden(self, ids, start=0, caches=None):
        T = ids.shape[1]
        ang = torch.arange(start, start + T).float()[:, None] * self.inv[None, :]
        emb = torch.cat((ang, ang), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed(ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, None if caches is None else (caches[i][0], caches[i][1], start))
        return self.norm(x)

    def logits(self, h):
        return h @ self.embed.weight.t()  # tied lm_head


def logp_entropy(model, ids):
    # verl's logprobs_from_logits and entropy_from_logits on full logits.
    z = model.logits(model.hidden(ids))[:, :-1]
    lp = torch.log_softmax(z, dim=-1)
    logp = lp.gather(-1, ids[:, 1:, None])[..., 0]
    ent = -(lp.exp() * lp).sum(-1)
    return logp, ent


@torch.no_grad()
def decode(model, prompts, new):
    B, P = prompts.shape
    caches = [(torch.zeros(B, NKV, P + new, HD), torch.zeros(B, NKV, P + new, HD)) for _ in range(L)]
    h = model.hidden(prompts, 0, caches)
    tok = model.logits(h[:, -1]).argmax(-1)
    out, n = [tok], P
    for _ in range(new - 1):
        h = model.hidden(tok[:, None], n, caches)
        n += 1
        tok = model.logits(h[:, -1]).argmax(-1)
        out.append(tok)
    return torch.stack(out, 1)


def median_rate(fn, tokens, reps):
    fn()  # warm-up
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        rates.append(tokens / (time.perf_counter() - t0))
    return statistics.median(rates)


def median_rates(fn, tokens, reps):
    """median_rate's tokens per wall-clock second, and tokens per CPU-second
    of the process (the steadier figure when other jobs share the cores)."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        t1, c1 = time.perf_counter(), time.process_time()
        wall.append(tokens / (t1 - t0))
        cpu.append(tokens / max(c1 - c0, 1e-9))
    return statistics.median(wall), statistics.median(cpu)


@torch.no_grad()
def sample(model, prompts, new, g):
    """decode with multinomial sampling at temperature 1 and the sampled
    tokens' log-probabilities, as a rollout records them."""
    B, P = prompts.shape
    caches = [(torch.zeros(B, NKV, P + new, HD), torch.zeros(B, NKV, P + new, HD)) for _ in range(L)]
    h = model.hidden(prompts, 0, caches)
    out, n = [], P
    for i in range(new):
        lp = torch.log_softmax(model.logits(h[:, -1]), dim=-1)
        tok = torch.multinomial(lp.exp(), 1, generator=g)[:, 0]
        out.append((tok, lp.gather(-1, tok[:, None])[:, 0]))
        if i + 1 < new:
            h = model.hidden(tok[:, None], n, caches)
            n += 1
    return out


def main_arith():
    torch.manual_seed(1)
    model = Model()
    print("params", sum(p.numel() for p in model.parameters()))
    g = torch.Generator().manual_seed(2)
    lens = [150 + 10 * b for b in range(16)]
    ids = torch.randint(1, V, (16, max(lens)), generator=g)
    mask = torch.zeros(16, max(lens) - 1)
    for b, n in enumerate(lens):
        mask[b, :n - 1] = 1
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        logp, _ = logp_entropy(model, ids)
        (-(logp * mask).sum() / mask.sum()).backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    prompts = torch.randint(1, V, (16, 64), generator=g)
    print("sft step   %8.1f tokens/s %8.1f tokens/cpu-s" % median_rates(step, sum(lens), 7))
    print("generate   %8.1f tokens/s %8.1f tokens/cpu-s" % median_rates(lambda: sample(model, prompts, 128, g), 16 * 128, 5))


def main():
    if ARITH:
        return main_arith()
    torch.manual_seed(1)
    model = Model()
    print("params", sum(p.numel() for p in model.parameters()))
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(1, V, (8, 128), generator=g)

    def fwd():
        with torch.no_grad():
            logp_entropy(model, ids)

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        logp, _ = logp_entropy(model, ids)
        (-logp.mean()).backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    print("forward    %8.1f tokens/s" % median_rate(fwd, ids.numel(), 7))
    print("train step %8.1f tokens/s" % median_rate(step, ids.numel(), 7))
    for b in (1, 32):
        prompts = torch.randint(1, V, (b, 16), generator=g)
        print("decode b=%-2d %8.1f tokens/s" % (b, median_rate(lambda: decode(model, prompts, 64), b * 64, 5)))


if __name__ == "__main__":
    main()
