#!/usr/bin/env python3
"""Golden values for policy.AdamW and policy.ClipGradNorm from torch 1.13.

torch.optim.AdamW (single-tensor path, foreach=False) runs six steps on three
random float32 parameters; before each step torch.nn.utils.clip_grad_norm_
clips the random gradients to max_norm 1.0 (the first step's gradients are
scaled up so that clipping is active, the last step's down so that it is not).
The learning rate changes per step. Everything is written as float32 bit
patterns so that the Go test reads exact values.

Run from the package directory with Debian's python3-torch:

    python3 testdata/gen_adamw.py    # writes testdata/adamw_golden.json
"""
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def bits(t):
    return [x & 0xFFFFFFFF for x in t.detach().reshape(-1).contiguous().view(torch.int32).tolist()]


def main():
    torch.manual_seed(1234)
    shapes = {"layer.weight": (4, 3), "layer.bias": (5,), "norm.weight": (2, 2, 2)}
    names = list(shapes)
    params = [torch.nn.Parameter(torch.randn(*shapes[n])) for n in names]
    cfg = dict(betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    lrs = [1e-3, 5e-4, 2e-3, 1e-3, 7.5e-4, 1e-4]
    opt = torch.optim.AdamW(params, lr=lrs[0], foreach=False, **cfg)
    out = {
        "names": names,
        "shapes": [list(shapes[n]) for n in names],
        "beta1": cfg["betas"][0], "beta2": cfg["betas"][1], "eps": cfg["eps"],
        "weight_decay": cfg["weight_decay"], "max_norm": 1.0,
        "init": [bits(p) for p in params],
        "steps": [],
    }
    for step, lr in enumerate(lrs):
        scale = 3.0 if step == 0 else (0.01 if step == len(lrs) - 1 else 1.0)
        grads = [torch.randn(*shapes[n]) * scale for n in names]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
        clipped = [bits(p.grad) for p in params]
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        out["steps"].append({
            "lr": lr,
            "grads": [bits(g) for g in grads],
            "norm": float(norm),
            "clipped_grads": clipped,
            "params": [bits(p) for p in params],
        })
    with open(os.path.join(HERE, "adamw_golden.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
