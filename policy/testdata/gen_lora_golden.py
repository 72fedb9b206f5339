#!/usr/bin/env python3
"""Golden adapters and values for LoRA (lora_test.go).

The reference is gen_model_golden.py's float64 PyTorch transformer with
PEFT's LoRA Linear on the adapted projections (y = x·Wᵀ + b +
scale·(x·Aᵀ)·Bᵀ, scale = lora_alpha/r, or lora_alpha/√r with use_rslora,
as peft/tuners/lora/layer.py), gradients of A and B from torch autograd.
No peft, transformers or safetensors package: the adapter is written as
PEFT's save_pretrained lays it out (adapter_config.json and
adapter_model.safetensors with base_model.model.<module>.lora_A.weight
[r, in] and lora_B.weight [out, r]), with struct/json.

For each case it writes testdata/model/<name>/ (the adapter folder, on the
base checkpoint testdata/model/<base>/) and
testdata/model/<name>.golden.safetensors with
  logp_t07, ent_t07   [ΣL]  per-token log p(next) and entropy at T = 0.7
  w, u                [ΣL]  loss weights (0 on each sequence's last row)
  grad.<peft name>    gradients of L = Σ w·logp_t07 + Σ u·ent_t07
for the sequences of testdata/model/<base>.golden.json (copied to
<name>.golden.json). B is drawn
non-zero (PEFT initialises it to zero) so that every term is exercised.

Run from the policy directory with Debian's torch (python3-torch 1.13),
after gen_model_golden.py:

    /usr/bin/python3 testdata/gen_lora_golden.py
"""
import json
import math
import os
import struct

import torch

import gen_model_golden as ref

MODULES = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
           "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[a:b]
        if info["dtype"] == "F32":
            t = torch.frombuffer(bytearray(raw), dtype=torch.float32)
        elif info["dtype"] == "BF16":
            t = torch.frombuffer(bytearray(raw), dtype=torch.int16).view(torch.bfloat16).float()
        else:
            raise ValueError(info["dtype"])
        out[name] = t.reshape(info["shape"]).double()
    return out


def make(name, base, r, alpha, rslora, targets, seed):
    d = os.path.join(ref.OUT, base)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    p = read_safetensors(os.path.join(d, "model.safetensors"))
    with open(os.path.join(ref.OUT, base + ".golden.json")) as f:
        seqs = json.load(f)["sequences"]
    shapes = {n: s for n, s, _ in ref.specs(cfg)}
    torch.manual_seed(seed)
    scale = alpha / math.sqrt(r) if rslora else alpha / r
    lora, tensors = {}, {}
    for i in range(cfg["num_hidden_layers"]):
        for mod in targets:
            module = "model.layers.%d.%s.%s" % (i, MODULES[mod], mod)
            out, inp = shapes[module + ".weight"]
            A = (torch.rand(r, inp, dtype=torch.float64) * 2 - 1) / math.sqrt(inp)
            B = torch.randn(out, r, dtype=torch.float64) * 0.2
            A = A.float().double().requires_grad_(True)  # stored as F32
            B = B.float().double().requires_grad_(True)
            lora[module] = (A, B, scale)
            tensors["base_model.model." + module + ".lora_A.weight"] = A
            tensors["base_model.model." + module + ".lora_B.weight"] = B
    ad = os.path.join(ref.OUT, name)
    os.makedirs(ad, exist_ok=True)
    ref.write_safetensors(os.path.join(ad, "adapter_model.safetensors"), tensors, "F32")
    conf = {
        "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": base, "bias": "none",
        "fan_in_fan_out": False, "inference_mode": True, "init_lora_weights": True, "layers_pattern": None,
        "layers_to_transform": None, "lora_alpha": alpha, "lora_dropout": 0.0, "modules_to_save": None,
        "peft_type": "LORA", "r": r, "rank_pattern": {}, "revision": None, "target_modules": targets,
        "task_type": "CAUSAL_LM", "use_dora": False, "use_rslora": rslora,
    }
    with open(os.path.join(ad, "adapter_config.json"), "w") as f:
        json.dump(conf, f, indent=2)
        f.write("\n")

    logp, ent = ref.stats(cfg, p, seqs, 0.7, lora)
    w, u = ref.loss_weights(seqs)
    ((w * logp).sum() + (u * ent).sum()).backward()
    gold = {"logp_t07": logp.detach(), "ent_t07": ent.detach(), "w": w, "u": u}
    for k, v in tensors.items():
        gold["grad." + k] = v.grad
    ref.write_safetensors(os.path.join(ref.OUT, name + ".golden.safetensors"), gold, "F32")
    with open(os.path.join(ref.OUT, name + ".golden.json"), "w") as f:
        json.dump({"sequences": seqs}, f)
        f.write("\n")


def main():
    make("qwen3-tiny-lora", "qwen3-tiny", 4, 8, False, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], 11)
    make("llama-tiny-lora", "llama-tiny", 3, 5, True, sorted(MODULES), 12)


if __name__ == "__main__":
    main()
