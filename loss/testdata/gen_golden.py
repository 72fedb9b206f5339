#!/usr/bin/env python3
"""Generate golden.json for the loss package tests.

Run from the loss/ directory with a python3 that has PyTorch (the golden
file was made with Debian's python3-torch 1.13, CPU):

    python3 testdata/gen_golden.py > testdata/golden.json

The formulas are written here, independently of the Go code, after verl's
verl/trainer/ppo/core_algos.py (compute_policy_loss_vanilla, _gspo, _cispo,
_gpg, _sapo, _geo_mean, agg_loss, kl_penalty / kl_penalty_forward) and the
actor update in verl/workers/actor/dp_actor.py (pg_loss − entropy_coeff ·
agg(entropy) + kl_loss_coef · agg(kl)). Gradients come from torch autograd in
float64. Batch values are float32 numbers (printed exactly), so the Go side
reads the very same inputs.
"""
import json
import sys

import torch

torch.set_default_dtype(torch.float64)

MODES = ["vanilla", "gspo", "cispo", "gpg", "sapo", "geo_mean"]
AGGS = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
KLS = ["k1", "k2", "k3", "abs", "k3+"]


def masked_mean(x, m):
    return (x * m).sum() / (m.sum() + 1e-8)


def agg_loss(mat, mask, mode, divisor=None):
    """verl agg_loss for one data-parallel rank (dp_size 1), current version:
    fully masked rows are left out of the sequence mean."""
    if mode == "token-mean":
        n = mask.sum()
        return (mat * mask).sum() / n if n > 0 else mat.sum() * 0
    seq_count = mask.sum(dim=-1)
    seq_mask = (seq_count > 0).to(mat.dtype)
    nseq = seq_mask.sum()
    if nseq == 0:
        return mat.sum() * 0
    if mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm"):
        seq_losses = (mat * mask).sum(dim=-1)
        loss = (seq_losses * seq_mask).sum() / nseq
        if mode == "seq-mean-token-sum-norm":
            loss = loss / (divisor if divisor else mask.shape[-1])
        return loss
    if mode == "seq-mean-token-mean":
        seq_losses = (mat * mask).sum(dim=-1) / (seq_count + 1e-8)
        return (seq_losses * seq_mask).sum() / nseq
    raise ValueError(mode)


def kl_forward(lp, ref, kind):
    if kind == "k1":
        return lp - ref
    if kind == "abs":
        return (lp - ref).abs()
    if kind == "k2":
        return 0.5 * (lp - ref).square()
    if kind == "k3":
        kl = torch.clamp(ref - lp, min=-20, max=20)
        return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    raise ValueError(kind)


def kl_penalty(lp, ref, kind):
    if not kind.endswith("+"):
        return kl_forward(lp, ref, kind)
    fwd = kl_forward(lp, ref, kind[:-1])
    bw = 0.5 * (lp - ref).square()
    return bw - bw.detach() + fwd.detach()


def policy_loss(mode, lp, old, adv, mask, cfg, agg, divisor, tis_w):
    lo, hi, c = cfg["clip_low"], cfg["clip_high"], cfg["clip_c"]
    metrics = {}
    if mode == "vanilla":
        nak = torch.clamp(lp - old, min=-20.0, max=20.0)
        ratio = torch.exp(nak)
        pg1 = -adv * ratio
        pg2 = -adv * torch.clamp(ratio, 1 - lo, 1 + hi)
        cl1 = torch.maximum(pg1, pg2)
        pg3 = -adv * c
        cl2 = torch.min(pg3, cl1)
        pg = torch.where(adv < 0, cl2, cl1)
        metrics["pg_clipfrac"] = masked_mean(torch.gt(pg2, pg1).double(), mask)
        metrics["pg_clipfrac_lower"] = masked_mean(torch.gt(cl1, pg3).double() * (adv < 0).double(), mask)
        metrics["ppo_kl"] = masked_mean(-nak, mask)
    elif mode == "gspo":
        nak = lp - old
        lens = mask.sum(dim=-1).clamp(min=1)
        seq = (nak * mask).sum(dim=-1) / lens
        logr = lp - lp.detach() + seq.detach().unsqueeze(-1)
        logr = torch.clamp(logr, max=10.0)
        r = torch.exp(logr)
        pg1 = -adv * r
        pg2 = -adv * torch.clamp(r, 1 - lo, 1 + hi)
        pg = torch.maximum(pg1, pg2)
        agg = "seq-mean-token-mean"
        metrics["pg_clipfrac"] = masked_mean(torch.gt(pg2, pg1).double(), mask)
        metrics["pg_clipfrac_lower"] = torch.tensor(0.0)
        metrics["ppo_kl"] = masked_mean(-nak, mask)
    elif mode == "cispo":
        nak = torch.clamp(lp - old, min=-20.0, max=20.0)
        ratio = torch.exp(nak)
        cr = torch.clamp(ratio, 1 - lo, 1 + hi)
        pg = -cr.detach() * adv * lp
        metrics["pg_clipfrac"] = masked_mean((ratio != cr).double(), mask)
        metrics["pg_clipfrac_lower"] = torch.tensor(0.0)
        metrics["ppo_kl"] = masked_mean(-nak, mask)
    elif mode == "gpg":
        pg = -lp * adv  # verl reports no pg metrics for gpg
    elif mode == "sapo":
        nak = torch.clamp(lp - old, min=-20.0, max=20.0)
        ratio = torch.exp(nak)
        taus = torch.where(adv > 0, torch.full_like(adv, cfg["tau_pos"]), torch.full_like(adv, cfg["tau_neg"]))
        gates = torch.sigmoid(taus * (ratio - 1.0)) * (4.0 / taus)
        pg = -gates * adv
        agg = "seq-mean-token-mean"
        metrics["pg_clipfrac"] = torch.tensor(0.0)
        metrics["pg_clipfrac_lower"] = torch.tensor(0.0)
        metrics["ppo_kl"] = masked_mean(-nak, mask)
    elif mode == "geo_mean":
        nak = lp - old
        sgn = torch.sign(adv)
        nakc = torch.clamp(nak, -lo, hi)
        nmin = sgn * torch.min(sgn * nak, sgn * nakc)
        msum = mask.sum(dim=-1)
        ratio = torch.exp((nmin * mask).sum(dim=-1) / (msum + 1e-8))
        a = (adv * mask).sum(dim=-1) / (msum + 1e-8)
        pgs = -a * ratio
        if tis_w is not None:
            pgs = pgs * torch.exp((torch.log(tis_w + 1e-10) * mask).sum(dim=-1) / (msum + 1e-8))
        clipped = torch.ne(nak, nakc)
        metrics["pg_clipfrac"] = masked_mean((clipped * (adv > 0)).double(), mask)
        metrics["pg_clipfrac_lower"] = masked_mean((clipped * (adv < 0)).double(), mask)
        metrics["ppo_kl"] = masked_mean(-nak, mask)
        return pgs.mean(), metrics
    else:
        raise ValueError(mode)
    if tis_w is not None:
        pg = pg * tis_w
    return agg_loss(pg, mask, agg, divisor), metrics


def f32(t):
    return torch.tensor(t.numpy().astype("float32").astype("float64"))


def make_batch(gen, B, T, lengths, gaps, seq_adv_rows, spikes=()):
    mask = torch.zeros(B, T)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    for b, t in gaps:  # tool-output spans inside a response
        mask[b, t] = 0
    lp = f32(-torch.exp(torch.randn(B, T, generator=gen)) * 0.7)
    old = f32(lp + 0.6 * torch.randn(B, T, generator=gen))
    ref = f32(lp + 0.4 * torch.randn(B, T, generator=gen))
    rollout = f32(old + 0.5 * torch.randn(B, T, generator=gen))
    adv = torch.randn(B, T, generator=gen)
    for b in seq_adv_rows:  # outcome advantages, constant along the row (GRPO)
        adv[b, :] = adv[b, 0]
    for b, t, d, a in spikes:  # ratio e^d > clip_c with A < 0: dual-clip territory
        old[b, t] = f32(lp[b, t] - d)
        adv[b, t] = a
    adv = f32(adv)
    ent = f32(3 * torch.rand(B, T, generator=gen))
    return dict(B=B, T=T, logp=lp, old=old, adv=adv, mask=mask, ref=ref, rollout=rollout, entropy=ent)


def flat(t):
    return [float(x) for x in t.reshape(-1).tolist()]


def main():
    gen = torch.Generator().manual_seed(20251122)
    batches = [
        make_batch(gen, 4, 6, [6, 4, 1, 3], [(0, 2)], [1, 2], [(0, 1, 1.6, -0.8), (3, 0, 2.0, -1.1)]),
        make_batch(gen, 3, 5, [5, 0, 2], [], [0, 1, 2]),  # an all-padding row
        make_batch(gen, 5, 4, [4, 4, 3, 2, 4], [(4, 1), (1, 3)], [0], [(2, 1, 1.5, -0.6)]),
    ]
    cases = []
    idx = 0
    for mi, mode in enumerate(MODES):
        for ai, agg in enumerate(AGGS):
            for ki, kl in enumerate(KLS):
                bi = (mi + ai + ki) % len(batches)
                bt = batches[bi]
                cfg = dict(clip_low=0.2, clip_high=0.28, clip_c=3.0, tau_pos=1.0, tau_neg=1.05,
                           entropy_coef=0.01 if ki % 2 == 0 else 0.0, kl_coef=0.05,
                           tis_cap=2.0 if idx % 2 == 0 else 0.0,
                           agg_divisor=10.0 if (agg == "seq-mean-token-sum-norm" and ki == 1) else 0.0)
                lp = bt["logp"].clone().requires_grad_(True)
                ent = bt["entropy"].clone().requires_grad_(True)
                mask = bt["mask"]
                tis_w = None
                if cfg["tis_cap"] > 0:
                    tis_w = torch.clamp(torch.exp(torch.clamp(bt["old"] - bt["rollout"], -20, 20)), max=cfg["tis_cap"])
                pg_loss, metrics = policy_loss(mode, lp, bt["old"], bt["adv"], mask, cfg, agg,
                                               cfg["agg_divisor"], tis_w)
                ent_agg = agg_loss(ent, mask, agg, cfg["agg_divisor"])
                kl_agg = agg_loss(kl_penalty(lp, bt["ref"], kl), mask, agg, cfg["agg_divisor"])
                loss = pg_loss - cfg["entropy_coef"] * ent_agg + cfg["kl_coef"] * kl_agg
                loss.backward()
                metrics = {k: float(v) for k, v in metrics.items()}
                metrics["pg_loss"] = float(pg_loss)
                metrics["entropy"] = float(ent_agg)
                metrics["kl"] = float(kl_agg)
                metrics["loss"] = float(loss)
                if tis_w is not None:
                    metrics["tis_imp_ratio_mean"] = float(masked_mean(tis_w, mask))
                cases.append(dict(batch=bi, mode=mode, agg=agg, kl_type=kl, **cfg,
                                  loss=float(loss), metrics=metrics,
                                  grad_logp=flat(lp.grad), grad_entropy=flat(ent.grad)))
                idx += 1
    out = dict(
        generator="testdata/gen_golden.py (torch %s, float64 autograd)" % torch.__version__,
        batches=[{k: (flat(v) if torch.is_tensor(v) else v) for k, v in b.items()} for b in batches],
        cases=cases,
    )
    json.dump(out, sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
