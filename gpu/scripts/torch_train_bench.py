#!/usr/bin/env python3
"""torch_train_bench.py times the training step of gpu/cmd/trainbench in
PyTorch: transformers' Qwen3ForCausalLM built from a Qwen3Config of the
given shape with random weights on the GPU, float32 master weights,
forward under torch.autocast(bfloat16), SDPA attention, the token-mean
cross-entropy of the next token (transformers' own loss, labels =
input_ids), backward, torch.nn.utils.clip_grad_norm_(1.0), and
torch.optim.AdamW(fused=True) with zero_grad(set_to_none=True). Each phase
(forward, backward, optimizer) is ended by torch.cuda.synchronize(), as on
agentrl's side.

trainbench runs it once per shape with the shape's flags; by hand:

    python3 gpu/scripts/torch_train_bench.py --hidden 1024 --intermediate 3072 \\
        --layers 28 --heads 16 --kv-heads 8 --seqs 8 --seq-len 1024

It logs to stderr and prints, last, one line "RESULT {json}" with the
phases of every timed step in milliseconds (fwd_ms, bwd_ms, opt_ms), the
peaks of torch.cuda's allocator over model, optimizer and steps
(peak_allocated = max_memory_allocated, peak_reserved =
max_memory_reserved), and the versions of torch and transformers.
"""
import argparse
import inspect
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--intermediate", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, required=True)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--rope-theta", type=float, default=1e6)
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa, eager, flash_attention_2 where installed)")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import Qwen3Config, Qwen3ForCausalLM

    if not torch.cuda.is_available():
        print("torch_train_bench: torch sees no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    log = lambda *a: print("torch_train_bench:", *a, file=sys.stderr, flush=True)  # noqa: E731
    kw = dict(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim, max_position_embeddings=40960, rms_norm_eps=1e-6,
        tie_word_embeddings=True, attention_bias=False, use_cache=False,
    )
    # transformers 5 takes RoPE's θ in rope_parameters, 4.x as rope_theta.
    if "rope_parameters" in inspect.signature(Qwen3Config.__init__).parameters:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": args.rope_theta}
    else:
        kw["rope_theta"] = args.rope_theta
    try:
        cfg = Qwen3Config(attn_implementation=args.attn, **kw)
    except TypeError:
        cfg = Qwen3Config(**kw)
        cfg._attn_implementation = args.attn
    torch.manual_seed(args.seed)
    with dev:  # parameters made on the GPU, by transformers' own initialization
        model = Qwen3ForCausalLM(cfg)
    model = model.float().train()
    if model.config._attn_implementation != args.attn:
        print(f"torch_train_bench: asked for attention {args.attn}, the model runs {model.config._attn_implementation}", file=sys.stderr)
        return 2
    n_params = sum(p.numel() for p in model.parameters())
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name(dev)}; "
        f"{n_params / 1e9:.3f}B parameters, attention {model.config._attn_implementation}")
    torch.cuda.reset_peak_memory_stats(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, fused=True)
    g = torch.Generator(device=dev).manual_seed(args.seed)
    ids = torch.randint(0, args.vocab, (args.seqs, args.seq_len), device=dev, generator=g)

    def step():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        loss.backward()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        t3 = time.perf_counter()
        return (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, loss.item()

    for i in range(args.warmup):
        f, b, o, loss = step()
        log(f"warm-up {i + 1}: {f + b + o:.0f} ms (loss {loss:.4f})")
    fwd, bwd, optim = [], [], []
    for i in range(args.steps):
        f, b, o, loss = step()
        fwd.append(f)
        bwd.append(b)
        optim.append(o)
        log(f"step {i + 1}: {f + b + o:.0f} ms (forward {f:.0f}, backward {b:.0f}, optimizer {o:.0f}; loss {loss:.4f})")
    res = {
        "fwd_ms": fwd, "bwd_ms": bwd, "opt_ms": optim,
        "peak_allocated": torch.cuda.max_memory_allocated(dev), "peak_reserved": torch.cuda.max_memory_reserved(dev),
        "torch": torch.__version__, "transformers": transformers.__version__, "device": torch.cuda.get_device_name(dev),
    }
    print("RESULT " + json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
