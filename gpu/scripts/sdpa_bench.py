#!/usr/bin/env python3
"""sdpa_bench.py times PyTorch's scaled_dot_product_attention, forward and
forward+backward, in bfloat16 on the GPU, for the shape of the CUDA
backend's attention benchmarks (gpu/bench_cuda_test.go, attnShape): 4
causal sequences of 512 tokens, 16 query heads, 4 KV heads, head dim 128.
It reports GFLOP/s with the same FLOP counts as the Go benchmarks (forward:
2 products of T²/2·D per head and sequence; backward: 2.5 times that), so
the numbers sit beside BenchmarkAttentionForward/Backward's
gpu-attn-tensor-cores and gpu-attn-fp32 lines.

Run it on the GPU machine, from anywhere:

    python3 gpu/scripts/sdpa_bench.py [--head-dim 64] [--iters 50]

It needs torch with CUDA. GQA uses enable_gqa where torch has it (2.5+)
and repeats the KV heads otherwise; it prints which SDPA backends torch
allows (flash, memory-efficient, cuDNN, math) and times the default choice
and, where available, the flash backend alone. The Go kernels take float32
buffers and round tiles to bf16 as they load them, so their time includes
reading float32 inputs; SDPA here reads bf16 tensors.
"""
import argparse
import sys


def flops_fwd(batch, seq, heads, head_dim):
    # Causal: half of the T×T scores, two products (QKᵀ and PV), 2 FLOPs per MAC.
    return 2 * 2 * seq * seq / 2 * head_dim * heads * batch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=4, help="sequences (packed back to back in the Go benchmark)")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()

    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("sdpa_bench: torch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("sdpa_bench: torch sees no CUDA device", file=sys.stderr)
        return 2

    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(dev)}")
    b, t, h, kvh, d = args.batch, args.seq, args.heads, args.kv_heads, args.head_dim
    print(f"shape: {b} causal sequences × {t} tokens, {h}/{kvh} heads, head dim {d}, bf16")
    g = torch.Generator(device=dev).manual_seed(0)
    q = torch.randn(b, h, t, d, device=dev, dtype=torch.bfloat16, generator=g, requires_grad=True)
    k = torch.randn(b, kvh, t, d, device=dev, dtype=torch.bfloat16, generator=g, requires_grad=True)
    v = torch.randn(b, kvh, t, d, device=dev, dtype=torch.bfloat16, generator=g, requires_grad=True)
    dout = torch.randn(b, h, t, d, device=dev, dtype=torch.bfloat16, generator=g)

    gqa_kw = {}
    try:
        F.scaled_dot_product_attention(q[:, :, :2], k[:, :, :2], v[:, :, :2], is_causal=True, enable_gqa=True)
        gqa_kw = {"enable_gqa": True}
        expand = lambda x: x  # noqa: E731
    except TypeError:
        rep = h // kvh
        expand = lambda x: x.repeat_interleave(rep, dim=1)  # noqa: E731
        print("torch without enable_gqa: KV heads repeated (counted in the time)")

    def fwd():
        return F.scaled_dot_product_attention(q, expand(k), expand(v), is_causal=True, **gqa_kw)

    def fwd_bwd():
        q.grad = k.grad = v.grad = None
        fwd().backward(dout)

    def timed(fn):
        for _ in range(3):  # warm-up: kernel selection, caches
            fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 / args.iters  # seconds per call

    f = flops_fwd(b, t, h, d)

    def report(label):
        tf = timed(lambda: fwd())
        tfb = timed(fwd_bwd)
        tb = max(tfb - tf, 1e-12)
        print(f"{label:28s} forward {tf * 1e3:8.3f} ms {f / tf / 1e9:9.1f} GFLOP/s   "
              f"backward {tb * 1e3:8.3f} ms {2.5 * f / tb / 1e9:9.1f} GFLOP/s   "
              f"forward+backward {tfb * 1e3:8.3f} ms")

    backends = []
    cuda_backends = torch.backends.cuda
    for name in ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "cudnn_sdp_enabled", "math_sdp_enabled"):
        if hasattr(cuda_backends, name):
            backends.append(f"{name.replace('_sdp_enabled', '')}={getattr(cuda_backends, name)()}")
    print("SDPA backends allowed:", ", ".join(backends))
    report("sdpa (default choice)")
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            report("sdpa (flash only)")
    except (ImportError, RuntimeError) as e:
        print(f"flash backend alone not available: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
