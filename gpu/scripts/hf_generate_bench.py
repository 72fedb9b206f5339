#!/usr/bin/env python3
"""hf_generate_bench.py times transformers' generate on the shapes of
gpu/decodebench: Qwen3-0.6B and Qwen3-4B with random weights in bfloat16
on the GPU, greedy, batches of random prompts, every request generating
exactly --new tokens (min_new_tokens = max_new_tokens), transformers'
default dynamic KV cache and attention. It prints one JSON line per point,
{"model", "batch", "prompt", "new", "seconds", "tokens_per_s"}, which
decodebench -hf reads; a first line names the versions.

    python3 gpu/scripts/hf_generate_bench.py [--models 0.6b,4b] [--batches 32,128,256] [--prompt 512] [--new 512]

The configurations are Qwen/Qwen3-0.6B's and Qwen/Qwen3-4B's config.json
(written out here: the GPU machine has no network). Weights are
initialised on the GPU (init_empty_weights would leave them unset; a
random normal(0, 0.02) fill takes a second), so no checkpoint is needed:
the time of generate does not depend on the values. Each point runs
generate once with 8 new tokens to warm up, then times one call with
torch.cuda.synchronize around it.
"""
import argparse
import json
import sys
import time

SHAPES = {
    "0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16),
    "4b": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="0.6b,4b")
    ap.add_argument("--batches", default="32,128,256")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=512)
    args = ap.parse_args()
    try:
        import torch
        import transformers
        from transformers import Qwen3Config, Qwen3ForCausalLM
    except ImportError as e:
        print(f"hf_generate_bench: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("hf_generate_bench: torch sees no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    print(f"# torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name(dev)}", flush=True)
    for name in args.models.split(","):
        cfg = Qwen3Config(
            vocab_size=151936, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
            rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, torch_dtype="bfloat16",
            eos_token_id=None, pad_token_id=0, bos_token_id=None, **SHAPES[name],
        )
        torch.manual_seed(0)
        with torch.device(dev):
            model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
        model.eval()
        g = torch.Generator(device=dev).manual_seed(1)
        for batch in (int(b) for b in args.batches.split(",")):
            ids = torch.randint(1, cfg.vocab_size, (batch, args.prompt), device=dev, generator=g)
            mask = torch.ones_like(ids)

            def gen(n):
                with torch.inference_mode():
                    return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                                          do_sample=False, pad_token_id=0, eos_token_id=None)

            gen(8)
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = gen(args.new)
            torch.cuda.synchronize()
            el = time.perf_counter() - start
            made = out.shape[1] - args.prompt
            print(json.dumps({"model": name, "batch": batch, "prompt": args.prompt, "new": made,
                              "seconds": round(el, 3), "tokens_per_s": round(batch * made / el, 1)}), flush=True)
            del out
            torch.cuda.empty_cache()
        del model
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
