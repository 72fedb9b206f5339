#!/usr/bin/env python3
"""logprob_check.py computes the reference side of gpu/cmd/trainbench's
log-prob check: transformers' Qwen3ForCausalLM, loaded with
from_pretrained from DIR/model (the checkpoint agentrl saved, float32
safetensors and config.json), in float32 with TF32 off and eager
attention, gives for each sequence of DIR/tokens.json ({"seqs": [[id,
...], ...]}) the log-probability of every token after the first,
log_softmax taken in float64 of the float32 logits, one sequence at a
time (agentrl packs them in one batch). It writes DIR/reference.json:
{"logprobs": [[0, lp_1, ...], ...], "torch": ..., "transformers": ...},
position 0 holding 0 as lm.TokenStats does.

    python3 gpu/scripts/logprob_check.py --dir DIR

It runs on the GPU when torch sees one, on the CPU otherwise.
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--attn", default="eager", help="attn_implementation of the reference")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import Qwen3ForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    path = os.path.join(args.dir, "model")
    try:
        model = Qwen3ForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation=args.attn)
    except TypeError:  # transformers before 4.56 names it torch_dtype
        model = Qwen3ForCausalLM.from_pretrained(path, torch_dtype=torch.float32, attn_implementation=args.attn)
    model = model.to(dev).eval()
    with open(os.path.join(args.dir, "tokens.json")) as f:
        seqs = json.load(f)["seqs"]
    out = []
    with torch.no_grad():
        for s in seqs:
            ids = torch.tensor([s], device=dev)
            logits = model(input_ids=ids, use_cache=False).logits[0].double()
            logp = torch.log_softmax(logits, dim=-1)
            nxt = torch.tensor(s[1:], device=dev)
            lp = logp[:-1].gather(1, nxt[:, None])[:, 0]
            out.append([0.0] + lp.cpu().tolist())
    with open(os.path.join(args.dir, "reference.json"), "w") as f:
        json.dump({"logprobs": out, "torch": torch.__version__, "transformers": transformers.__version__}, f)
    print(f"logprob_check: {len(seqs)} sequences on {dev}, torch {torch.__version__}, transformers {transformers.__version__}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
