#!/usr/bin/env python3
"""Golden checkpoints and values for the policy transformer (model_test.go).

An independent float64 PyTorch implementation of Qwen3ForCausalLM and
Qwen2ForCausalLM and LlamaForCausalLM, written from transformers'
modeling_qwen3.py, modeling_qwen2.py and modeling_llama.py (RMSNorm, rotate_half RoPE, repeat_kv grouped-query
attention, causal softmax(q·kᵀ/√d)·v, SwiGLU MLP, optional tied lm_head,
Llama's o_proj/MLP biases and linear RoPE scaling),
no `transformers` and no `safetensors` package: the safetensors files are
written with struct/json. Gradients come from torch autograd.

For each tiny model it writes testdata/model/<name>/config.json and
model.safetensors (F32 for qwen3-tiny and llama-tiny, BF16 for qwen2-tiny; the float64
reference runs on exactly the stored values), and
testdata/model/<name>.golden.safetensors with
  logits              [len(seqs[0]), vocab]  logits of the first sequence
  logp_t1, ent_t1     [ΣL]  per-token log p(next) and entropy at T = 1
  logp_t07, ent_t07   [ΣL]  the same at temperature 0.7
  w, u                [ΣL]  loss weights (0 on each sequence's last row)
  grad.<hf name>      gradients of L = Σ w·logp_t07 + Σ u·ent_t07
packed in sequence order; row t of a sequence is the prediction of token
t from tokens [0, t] (the last row of each sequence has no target: logp 0).
Token sequences are in testdata/model/<name>.golden.json.

Run from the policy directory with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 testdata/gen_model_golden.py
"""
import json
import math
import os
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "model")


def tensor_bytes(t, dtype):
    t = t.detach().contiguous()
    if dtype == "F32":
        return t.float().numpy().astype("<f4").tobytes()
    if dtype == "BF16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors, dtype):
    header = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for name in sorted(tensors):
        b = tensor_bytes(tensors[name], dtype)
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def rms_norm(x, w, eps):
    # Qwen3RMSNorm / Qwen2RMSNorm: x * rsqrt(mean(x²) + eps) * w.
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def forward(cfg, p, ids, lora=None):
    """Logits [L, V] of one sequence, float64. lora maps a module's name
    ("model.layers.0.self_attn.q_proj") to (A, B, scale): PEFT's LoRA
    Linear, y = x·Wᵀ + b + scale·(x·Aᵀ)·Bᵀ (gen_lora_golden.py)."""
    H, nh, nkv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, L = cfg["rms_norm_eps"], len(ids)
    qwen3 = cfg["model_type"] == "qwen3"
    x = p["model.embed_tokens.weight"][torch.tensor(ids)]
    # RoPE tables as transformers builds them (inv_freq in float32).
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    rs = cfg.get("rope_scaling")
    if rs is not None:
        assert rs["rope_type"] == "linear"
        inv = inv / rs["factor"]  # _compute_linear_scaling_rope_parameters
    ang = torch.arange(L, dtype=torch.float64)[:, None] * inv.double()[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.full((L, L), -math.inf, dtype=torch.float64).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        pre = "model.layers.%d." % i

        def lin(name, v):
            y = v @ p[pre + name + ".weight"].t()
            b = p.get(pre + name + ".bias")
            if b is not None:
                y = y + b
            if lora is not None and pre + name in lora:
                A, B, scale = lora[pre + name]
                y = y + scale * ((v @ A.t()) @ B.t())
            return y

        h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)
        q = lin("self_attn.q_proj", h).view(L, nh, hd)
        k = lin("self_attn.k_proj", h).view(L, nkv, hd)
        v = lin("self_attn.v_proj", h).view(L, nkv, hd)
        if qwen3:
            q = rms_norm(q, p[pre + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, p[pre + "self_attn.k_norm.weight"], eps)
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # [heads, L, hd]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = nh // nkv  # repeat_kv
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
        s = q @ k.transpose(1, 2) / math.sqrt(hd) + mask
        a = torch.softmax(s, dim=-1) @ v  # [heads, L, hd]
        a = a.transpose(0, 1).reshape(L, nh * hd)
        x = x + lin("self_attn.o_proj", a)
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        g = lin("mlp.gate_proj", h)
        u = lin("mlp.up_proj", h)
        x = x + lin("mlp.down_proj", torch.nn.functional.silu(g) * u)
    x = rms_norm(x, p["model.norm.weight"], eps)
    head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
    return x @ head.t()


def stats(cfg, p, seqs, temp, lora=None):
    logp, ent = [], []
    for ids in seqs:
        z = forward(cfg, p, ids, lora) / temp
        lp = torch.log_softmax(z, dim=-1)
        tgt = torch.tensor(ids[1:] + [0])
        g = lp.gather(1, tgt[:, None])[:, 0]
        g = torch.cat((g[:-1], torch.zeros(1, dtype=g.dtype)))
        logp.append(g)
        ent.append(-(lp.exp() * lp).sum(-1))
    return torch.cat(logp), torch.cat(ent)


def loss_weights(seqs):
    """Random weights w, u [ΣL] of L = Σ w·logp + Σ u·H, drawn from torch's
    generator; 0 on each sequence's last row, which predicts nothing
    (TokenStats has no slot for it)."""
    n = sum(len(ids) for ids in seqs)
    w = torch.randn(n, dtype=torch.float64)
    u = torch.randn(n, dtype=torch.float64)
    end = 0
    for ids in seqs:
        end += len(ids)
        w[end - 1], u[end - 1] = 0, 0
    return w, u


def specs(cfg):
    H, I = cfg["hidden_size"], cfg["intermediate_size"]
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    qwen3 = cfg["model_type"] == "qwen3"
    qkv_bias = cfg["model_type"] == "qwen2" or cfg.get("attention_bias", False)
    o_bias = cfg["model_type"] != "qwen2" and cfg.get("attention_bias", False)
    mlp_bias = cfg.get("mlp_bias", False)
    out = [("model.embed_tokens.weight", (cfg["vocab_size"], H), "w")]

    def lin(name, shape, bias):
        out.append((name + ".weight", shape, "w"))
        if bias:
            out.append((name + ".bias", (shape[0],), "b"))

    for i in range(cfg["num_hidden_layers"]):
        pre = "model.layers.%d." % i
        for name, shape in (("self_attn.q_proj", (q, H)), ("self_attn.k_proj", (kv, H)), ("self_attn.v_proj", (kv, H))):
            lin(pre + name, shape, qkv_bias)
        lin(pre + "self_attn.o_proj", (H, q), o_bias)
        if qwen3:
            out += [(pre + "self_attn.q_norm.weight", (cfg["head_dim"],), "n"),
                    (pre + "self_attn.k_norm.weight", (cfg["head_dim"],), "n")]
        lin(pre + "mlp.gate_proj", (I, H), mlp_bias)
        lin(pre + "mlp.up_proj", (I, H), mlp_bias)
        lin(pre + "mlp.down_proj", (H, I), mlp_bias)
        out += [(pre + "input_layernorm.weight", (H,), "n"), (pre + "post_attention_layernorm.weight", (H,), "n")]
    out.append(("model.norm.weight", (H,), "n"))
    if not cfg["tie_word_embeddings"]:
        out.append(("lm_head.weight", (cfg["vocab_size"], H), "w"))
    return out


def make(name, cfg, dtype, seqs, seed):
    torch.manual_seed(seed)
    p = {}
    for n, shape, kind in specs(cfg):
        if kind == "w":
            t = torch.randn(shape) * 0.25  # larger than HF's 0.02 so that the logits are far from uniform
        elif kind == "b":
            t = torch.randn(shape) * 0.1
        else:
            t = 1 + 0.2 * torch.randn(shape)
        if dtype == "BF16":
            t = t.to(torch.bfloat16)
        p[n] = t.double().requires_grad_(True)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    write_safetensors(os.path.join(d, "model.safetensors"), {k: v for k, v in p.items()}, dtype)

    gold = {}
    with torch.no_grad():
        gold["logits"] = forward(cfg, p, seqs[0])
        gold["logp_t1"], gold["ent_t1"] = stats(cfg, p, seqs, 1.0)
    logp, ent = stats(cfg, p, seqs, 0.7)
    w, u = loss_weights(seqs)
    loss = (w * logp).sum() + (u * ent).sum()
    loss.backward()
    gold["logp_t07"], gold["ent_t07"] = logp.detach(), ent.detach()
    gold["w"], gold["u"] = w, u
    for k, v in p.items():
        gold["grad." + k] = v.grad
    write_safetensors(os.path.join(OUT, name + ".golden.safetensors"), gold, "F32")
    with open(os.path.join(OUT, name + ".golden.json"), "w") as f:
        json.dump({"sequences": seqs}, f)
        f.write("\n")


def main():
    seqs3 = [[5, 17, 3, 99, 42, 8, 77, 1], [64, 2, 9], [11, 11, 80, 30, 2, 95]]
    make("qwen3-tiny", {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 100, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "tie_word_embeddings": True, "attention_bias": False, "hidden_act": "silu", "eos_token_id": 1,
        "bos_token_id": 0, "initializer_range": 0.02, "torch_dtype": "float32", "use_sliding_window": False,
    }, "F32", seqs3, 1)
    make("qwen2-tiny", {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 96, "hidden_size": 32,
        "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 8, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 1000000.0,
        "tie_word_embeddings": False, "hidden_act": "silu", "eos_token_id": 2,
        "initializer_range": 0.02, "torch_dtype": "bfloat16", "use_sliding_window": False,
    }, "BF16", [[7, 30, 4, 88, 12, 60, 3], [9, 9], [50, 20, 70, 5]], 2)
    make("llama-tiny", {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 16,
        "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 8, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 2.0}, "tie_word_embeddings": False,
        "attention_bias": True, "mlp_bias": True, "hidden_act": "silu", "eos_token_id": 2,
        "initializer_range": 0.02, "torch_dtype": "float32",
    }, "F32", [[3, 40, 12, 7, 61, 5], [9, 20, 33]], 3)


if __name__ == "__main__":
    main()
