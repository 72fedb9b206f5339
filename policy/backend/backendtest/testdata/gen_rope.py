"""Golden RoPE values from PyTorch, the way transformers computes them.

Run from policy/backend/backendtest/testdata with Debian's python3-torch (1.13):

    /usr/bin/python3 gen_rope.py > rope_golden.json

inv_freq follows transformers' _compute_default_rope_parameters:
1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)),
and cos/sin follow Qwen3RotaryEmbedding.forward: freqs = inv_freq @ position
(float32), emb = cat(freqs, freqs), cos = emb.cos(), sin = emb.sin().
"""
import json

import torch

cases = []
for base, dim in [(10000.0, 64), (1000000.0, 128)]:
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    pos = torch.tensor([0, 1, 7, 4095, 40000], dtype=torch.float32)
    freqs = pos[:, None] * inv_freq[None, :]
    cases.append({
        "theta": base,
        "dim": dim,
        "inv_freq": inv_freq.tolist(),
        "pos": [int(p) for p in pos.tolist()],
        "cos": freqs.cos().flatten().tolist(),
        "sin": freqs.sin().flatten().tolist(),
    })
print(json.dumps(cases))
