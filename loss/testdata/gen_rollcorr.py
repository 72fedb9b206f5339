#!/usr/bin/env python3
"""Generate rollcorr_golden.json for the loss package's rollout-correction tests.

Run from the loss/ directory with a python3 that has PyTorch (the golden file
was made with Debian's python3-torch 1.13, CPU):

    python3 testdata/gen_rollcorr.py > testdata/rollcorr_golden.json

The formulas are written here, independently of the Go code, after verl's
rollout correction: verl/trainer/ppo/rollout_corr_helper.py (importance
weights, rejection options, their metrics, the off-policy metrics),
verl/trainer/ppo/core_algos.py (compute_policy_loss_bypass_mode and
compute_policy_loss_reinforce), verl/utils/debug/metrics.py
(calculate_debug_metrics) and verl/workers/actor/dp_actor.py (which mask the
entropy and KL terms use). The policy loss, agg_loss and kl_penalty come from
gen_golden.py. Gradients come from torch autograd in float64; batch values are
float32 numbers, so the Go side reads the very same inputs.

    python3 testdata/gen_rollcorr.py --verl DIR > /dev/null

also loads verl's own rollout_corr_helper.py and debug/metrics.py from DIR (a
verl checkout's root), with small stand-ins for the verl modules they import,
runs them on the same inputs in float32, as verl does, and fails unless they
agree with this script's values (1e-5, relative to the magnitude). Nothing of
verl is copied into this file.
"""
import argparse
import importlib.util
import json
import math
import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import agg_loss, f32, flat, kl_penalty, masked_mean, policy_loss  # noqa: E402

torch.set_default_dtype(torch.float64)

BOUND = 20.0


def mmean(x, m, dim=None):
    """masked mean, Σ x·m / (Σ m + 1e-8), over everything or along dim"""
    if dim is None:
        return (x * m).sum() / (m.sum() + 1e-8)
    return (x * m).sum(dim) / (m.sum(dim) + 1e-8)


def parse_rs(options, thresholds):
    opts = []
    for o in options.split(","):
        o = o.strip()
        if o and o not in opts:
            opts.append(o)
    specs = [s.strip() for s in str(thresholds).split(",") if s.strip()]
    if len(specs) == 1:
        specs = specs * len(opts)
    out = []
    for o, s in zip(opts, specs):
        if o.endswith("k1"):
            if "_" in s:
                lo, hi = (float(x) for x in s.split("_", 1))
            else:
                hi = float(s)
                lo = 1.0 / hi
            out.append((o, lo, hi))
        else:
            out.append((o, None, float(s)))
    return out


def is_weights(lr, mask, level, thr, normalize, metrics):
    """truncated IS weights, with the statistics of the raw ones"""
    lo = 1.0 / thr
    if level == "token":
        raw = torch.exp(lr.clamp(-BOUND, BOUND)) * mask
        valid = mask.bool()
        metrics["rollout_is_max"] = raw[valid].max().item()
        metrics["rollout_is_min"] = raw[valid].min().item()
        metrics["rollout_is_ratio_fraction_high"] = mmean((raw > thr).double(), mask).item()
        metrics["rollout_is_ratio_fraction_low"] = mmean((raw < lo).double(), mask).item()
    else:
        s = (lr * mask).sum(-1)
        raw = torch.exp(s.clamp(-BOUND, BOUND)).unsqueeze(-1) * mask
        metrics["rollout_is_max"] = math.exp(min(s.max().item(), BOUND))
        metrics["rollout_is_min"] = math.exp(s.min().item())
        metrics["rollout_is_ratio_fraction_high"] = (s > math.log(thr)).double().mean().item()
        metrics["rollout_is_ratio_fraction_low"] = (s < math.log(lo)).double().mean().item()
    metrics["rollout_is_mean"] = mmean(raw, mask).item()
    c = raw.clamp(lo, thr)
    mu = mmean(c, mask)
    if mask.sum() > 1:
        metrics["rollout_is_std"] = math.sqrt(max(mmean(c * c, mask).item() - mu.item() ** 2, 0.0))
    else:
        metrics["rollout_is_std"] = 0.0
    metrics["rollout_is_eff_sample_size"] = 1.0 / mmean((c / (mu + 1e-8)) ** 2, mask).item()
    rows = mmean(raw, mask, -1)
    metrics["rollout_is_seq_mean"] = rows.mean().item()
    metrics["rollout_is_seq_std"] = rows.std().item() if rows.numel() > 1 else 0.0
    metrics["rollout_is_seq_max"] = rows.max().item()
    metrics["rollout_is_seq_min"] = rows.min().item()
    metrics["rollout_is_seq_max_deviation"] = (rows - 1).abs().max().item()
    metrics["rollout_is_seq_fraction_high"] = (rows > thr).double().mean().item()
    metrics["rollout_is_seq_fraction_low"] = (rows < lo).double().mean().item()
    w = raw.clamp(max=thr)
    if normalize:
        if level == "token":
            mean = mmean(w, mask).item()
        else:
            valid = mask.sum(-1) > 0
            mean = mmean(w, mask, -1)[valid].sum().item() / max(valid.sum().item(), 1e-8)
        if mean > 1e-8:
            w = w / mean
            metrics["rollout_is_batch_norm_factor"] = mean
        else:
            metrics["rollout_is_batch_norm_factor"] = 1.0
    return w


def rejection(lr, mask, options, thresholds, metrics):
    """the keep mask (1 keep, 0 reject) and each option's metrics"""
    d = lr.clamp(-BOUND, BOUND)
    div = {"k1": -d, "k2": 0.5 * d * d, "k3": torch.exp(d) - 1 - d}
    n = mask.sum(-1)
    valid = n > 0
    keep = torch.ones_like(mask)
    for name, lo, hi in parse_rs(options, thresholds):
        where, k = name.rsplit("_", 1)
        tok = div[k]
        if where == "token":
            stat, seq = tok, None
        else:
            if where == "seq_sum":
                seq = (tok * mask).sum(-1)
            elif where == "seq_mean":
                seq = mmean(tok, mask, -1)
            else:  # seq_max
                seq = torch.where(mask.bool(), tok, torch.full_like(tok, -math.inf)).max(-1).values
                seq = torch.where(valid, seq, torch.zeros_like(seq))
            stat = seq.unsqueeze(-1).expand_as(mask)
        if k == "k1":
            top, bottom = math.log(hi), math.log(lo)
            ok = (stat >= bottom) & (stat <= top)
        else:
            top, bottom = hi, 0.0
            ok = stat <= hi
        ok = ok.double()
        keep = keep * ok
        p = "rollout_rs_" + name
        rows = seq if seq is not None else mmean(stat, mask, -1)
        vals = rows[valid]
        metrics[p + "_mean"] = mmean(stat, mask).item()
        if seq is not None:
            metrics[p + "_max"] = vals.max().item()
            metrics[p + "_min"] = vals.min().item()
            metrics[p + "_fraction_high"] = (vals > top).double().mean().item()
            metrics[p + "_fraction_low"] = (vals < bottom).double().mean().item() if k == "k1" else 0.0
        else:
            metrics[p + "_max"] = stat[mask.bool()].max().item()
            metrics[p + "_min"] = stat[mask.bool()].min().item()
            metrics[p + "_fraction_high"] = mmean((stat > top).double(), mask).item()
            metrics[p + "_fraction_low"] = mmean((stat < bottom).double(), mask).item() if k == "k1" else 0.0
        if mask.sum() > 1:
            c = stat.clamp(bottom, top)
            metrics[p + "_std"] = math.sqrt(max(mmean(c * c, mask).item() - mmean(c, mask).item() ** 2, 0.0))
        else:
            metrics[p + "_std"] = 0.0
        metrics[p + "_seq_mean"] = vals.mean().item()
        metrics[p + "_seq_std"] = vals.std().item() if vals.numel() > 1 else 0.0
        metrics[p + "_seq_max"] = vals.max().item()
        metrics[p + "_seq_min"] = vals.min().item()
        metrics[p + "_seq_max_deviation"] = vals.abs().max().item()
        metrics[p + "_seq_fraction_high"] = (vals > top).double().mean().item()
        if k == "k1":
            metrics[p + "_seq_fraction_low"] = (vals < bottom).double().mean().item()
        metrics[p + "_masked_fraction"] = mmean(1 - ok, mask).item()
        rejected_rows = ((ok == 0) & mask.bool()).any(-1)
        metrics[p + "_seq_masked_fraction"] = rejected_rows[valid].double().mean().item()
    metrics["rollout_rs_masked_fraction"] = mmean(1 - keep, mask).item()
    metrics["rollout_rs_seq_masked_fraction"] = ((keep == 0) & mask.bool()).any(-1).double().mean().item()
    return keep


def off_policy(pi, ro, mask, metrics):
    a, r = mmean(pi, mask, -1), mmean(ro, mask, -1)
    lr = pi - ro
    metrics["training_ppl"] = torch.exp(-a).mean().item()
    metrics["training_log_ppl"] = (-a).mean().item()
    metrics["rollout_ppl"] = torch.exp(-r).mean().item()
    metrics["rollout_log_ppl"] = (-r).mean().item()
    metrics["kl"] = mmean(ro - pi, mask).item()
    metrics["k3_kl"] = mmean(torch.exp(lr) - lr - 1, mask).item()
    diff = r - a
    metrics["log_ppl_diff"] = diff.mean().item()
    metrics["log_ppl_abs_diff"] = diff.abs().mean().item()
    metrics["log_ppl_diff_max"] = diff.max().item()
    metrics["log_ppl_diff_min"] = diff.min().item()
    metrics["ppl_ratio"] = torch.exp(diff).mean().item()
    metrics["chi2_token"] = (mmean(torch.exp(lr.clamp(-BOUND, BOUND)) ** 2, mask) - 1).item()
    metrics["chi2_seq"] = (torch.exp(2 * (lr * mask).sum(-1).clamp(-BOUND, BOUND)).mean() - 1).item()


def probs_diff(pi, ro, mask, metrics):
    sel = mask.bool()
    p, q = torch.exp(pi[sel]), torch.exp(ro[sel])
    d = (p - q).abs()
    metrics["training/rollout_probs_diff_valid"] = 1.0
    metrics["training/rollout_probs_diff_max"] = d.max().item()
    metrics["training/rollout_probs_diff_mean"] = d.mean().item()
    if d.numel() > 1:
        metrics["training/rollout_probs_diff_std"] = d.std().item()
        if p.std() > 0 and q.std() > 0:
            metrics["training/rollout_actor_probs_pearson_corr"] = torch.corrcoef(torch.stack([p, q]))[0, 1].item()


def correct(pi, ro, mask, rc):
    """(weights to apply or None, keep or None, metrics with the rollout_corr/ prefix)"""
    metrics = {}
    lr = pi - ro
    w = keep = None
    if rc.get("rollout_is"):
        w = is_weights(lr, mask, rc["rollout_is"], rc.get("rollout_is_threshold", 2.0),
                       rc.get("rollout_is_batch_normalize", False), metrics)
    if rc.get("rollout_rs"):
        keep = rejection(lr, mask, rc["rollout_rs"], rc["rollout_rs_threshold"], metrics)
    if rc.get("bypass_mode"):
        off_policy(pi, ro, mask, metrics)
        if rc.get("loss_type", "ppo_clip") == "ppo_clip":
            w = None  # computed for the metrics only
    return w, keep, {"rollout_corr/" + k: v for k, v in metrics.items()}


def make_batch(gen, B, T, lengths, gaps):
    mask = torch.zeros(B, T)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    for b, t in gaps:
        mask[b, t] = 0
    lp = f32(-torch.exp(torch.randn(B, T, generator=gen)) * 0.7)
    old = f32(lp + 0.3 * torch.randn(B, T, generator=gen))
    rollout = f32(old + 0.4 * torch.randn(B, T, generator=gen))
    ref = f32(lp + 0.3 * torch.randn(B, T, generator=gen))
    adv = f32(torch.randn(B, T, generator=gen))
    ent = f32(3 * torch.rand(B, T, generator=gen))
    return dict(B=B, T=T, logp=lp, old=old, adv=adv, mask=mask, ref=ref, rollout=rollout, entropy=ent)


CASES = [
    # (batch, agg, entropy_coef, kl_coef, rollout_correction)
    (0, "token-mean", 0.01, 0.05, dict(rollout_is="token", rollout_is_threshold=2.0)),
    (1, "seq-mean-token-mean", 0.0, 0.0, dict(rollout_is="token", rollout_is_threshold=1.5, rollout_is_batch_normalize=True)),
    (0, "seq-mean-token-sum", 0.01, 0.0, dict(rollout_is="sequence", rollout_is_threshold=2.0)),
    (1, "token-mean", 0.0, 0.05, dict(rollout_is="sequence", rollout_is_threshold=5.0, rollout_is_batch_normalize=True)),
    (0, "token-mean", 0.01, 0.05, dict(rollout_is="sequence", rollout_is_threshold=2.0, rollout_rs="seq_sum_k1",
                                        rollout_rs_threshold="0.5_2.0")),  # Seq-MIS
    (1, "seq-mean-token-mean", 0.01, 0.05, dict(rollout_is="sequence", rollout_is_threshold=2.0, rollout_rs="seq_sum_k1",
                                                 rollout_rs_threshold="0.3_2.5")),
    (1, "token-mean", 0.0, 0.0, dict(rollout_rs="token_k1", rollout_rs_threshold="0.6_1.4")),
    (0, "seq-mean-token-mean", 0.01, 0.0, dict(rollout_rs="token_k2", rollout_rs_threshold=0.05)),
    (1, "seq-mean-token-sum-norm", 0.0, 0.05, dict(rollout_rs="token_k3", rollout_rs_threshold="0.04")),
    (0, "token-mean", 0.0, 0.0, dict(rollout_rs="seq_sum_k2", rollout_rs_threshold="0.3")),
    (1, "token-mean", 0.01, 0.0, dict(rollout_rs="seq_sum_k3", rollout_rs_threshold="0.3")),
    (0, "seq-mean-token-sum", 0.0, 0.05, dict(rollout_is="token", rollout_rs="seq_mean_k1", rollout_rs_threshold="0.94_1.06")),
    (1, "token-mean", 0.0, 0.0, dict(rollout_rs="seq_mean_k2", rollout_rs_threshold="0.1")),
    (0, "token-mean", 0.01, 0.0, dict(rollout_is="sequence", rollout_rs="seq_mean_k3", rollout_rs_threshold="0.05")),
    (1, "seq-mean-token-mean", 0.0, 0.0, dict(rollout_rs="seq_max_k2", rollout_rs_threshold="0.3")),
    (0, "token-mean", 0.0, 0.05, dict(rollout_rs="seq_max_k3", rollout_rs_threshold="0.2")),
    (1, "token-mean", 0.01, 0.05, dict(rollout_is="token", rollout_is_threshold=2.5, rollout_rs="token_k1,seq_max_k3",
                                        rollout_rs_threshold="0.4_1.8,3.0")),
    (0, "token-mean", 0.0, 0.0, dict(rollout_rs="seq_mean_k1", rollout_rs_threshold="0.999_1.001")),  # Geo-RS defaults
    # bypass mode: the old log-probs are the rollout's
    (0, "token-mean", 0.01, 0.05, dict(bypass_mode=True, loss_type="ppo_clip")),
    (1, "token-mean", 0.01, 0.05, dict(bypass_mode=True, loss_type="ppo_clip", rollout_is="token",
                                        rollout_rs="seq_mean_k1", rollout_rs_threshold="0.6_1.6")),
    (0, "seq-mean-token-sum", 0.01, 0.05, dict(bypass_mode=True, loss_type="ppo_clip", rollout_rs="token_k3",
                                                rollout_rs_threshold=0.05)),
    (1, "seq-mean-token-sum", 0.01, 0.0, dict(bypass_mode=True, loss_type="reinforce", rollout_is="sequence",
                                               rollout_is_threshold=2.0)),
    (0, "token-mean", 0.01, 0.05, dict(bypass_mode=True, loss_type="reinforce", rollout_is="token",
                                        rollout_is_threshold=1.5, rollout_rs="token_k1", rollout_rs_threshold="0.7_1.4")),
    (1, "seq-mean-token-mean", 0.0, 0.05, dict(bypass_mode=True, loss_type="reinforce", rollout_is="token",
                                                rollout_is_batch_normalize=True, rollout_rs="seq_max_k2",
                                                rollout_rs_threshold=0.4)),
]

PPO = dict(clip_low=0.2, clip_high=0.28, clip_c=3.0, tau_pos=1.0, tau_neg=1.05)


def case(bt, agg, ent_coef, kl_coef, rc):
    bypass = rc.get("bypass_mode", False)
    lp = bt["logp"].clone().requires_grad_(True)
    ent = bt["entropy"].clone().requires_grad_(True)
    mask, adv = bt["mask"], bt["adv"]
    if bypass:
        old = bt["rollout"]  # the rollout's log-probs are the old policy
        w, keep, rc_metrics = correct(lp.detach(), old, mask, rc)
    else:
        old = bt["old"]
        w, keep, rc_metrics = correct(old, bt["rollout"], mask, rc)
    pg_mask = mask * keep if keep is not None else mask
    aux_mask = mask if bypass else pg_mask  # dp_actor aggregates entropy and KL with response_mask
    if bypass and rc.get("loss_type") == "reinforce":
        pg = -adv * lp
        if w is not None:
            pg = pg * w
        pg_loss = agg_loss(pg, pg_mask, agg)
        metrics = dict(ppo_kl=masked_mean(old - lp, pg_mask), pg_clipfrac=0.0, pg_clipfrac_lower=0.0)
    else:
        pg_loss, metrics = policy_loss("vanilla", lp, old, adv, pg_mask, PPO, agg, None, w)
    ent_agg = agg_loss(ent, aux_mask, agg)
    kl_agg = agg_loss(kl_penalty(lp, bt["ref"], "k3"), aux_mask, agg)
    loss = pg_loss - ent_coef * ent_agg + kl_coef * kl_agg
    loss.backward()
    metrics = {k: float(v) for k, v in metrics.items()}
    metrics.update(rc_metrics)
    metrics.update(pg_loss=float(pg_loss), entropy=float(ent_agg), kl=float(kl_agg), loss=float(loss))
    return dict(loss=float(loss), metrics=metrics, grad_logp=flat(lp.grad), grad_entropy=flat(ent.grad))


def mismatch(bt, sources):
    out = {}

    def add(rows, suffix):
        m = {}
        off_policy(bt["old"][rows], bt["rollout"][rows], bt["mask"][rows], m)
        m = {"rollout_corr/" + k: v for k, v in m.items()}
        probs_diff(bt["old"][rows], bt["rollout"][rows], bt["mask"][rows], m)
        out.update({k + suffix: v for k, v in m.items()})

    add(list(range(bt["B"])), "")
    for s in sorted(set(sources)):
        add([i for i, x in enumerate(sources) if x == s], "/" + s)
    return out


def load_verl(root):
    """verl's rollout_corr_helper and debug metrics, with stand-ins for the
    verl modules they import"""
    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    def masked_sum(values, mask, axis=None):
        return (torch.where(mask.bool(), values, torch.zeros_like(values)) * mask).sum(axis=axis)

    def masked_mean_f(values, mask, axis=None):
        return masked_sum(values, mask, axis) / (mask.sum(axis=axis) + 1e-8)

    class DataProto:
        def __init__(self, batch):
            self.batch = batch

        @classmethod
        def from_dict(cls, tensors):
            return cls(dict(tensors))

    for name in ["verl", "verl.utils", "verl.trainer", "verl.trainer.config", "verl.workers", "verl.workers.config"]:
        module(name)
    module("verl.utils.torch_functional", masked_sum=masked_sum, masked_mean=masked_mean_f)
    sys.modules["verl.utils"].torch_functional = sys.modules["verl.utils.torch_functional"]
    module("verl.protocol", DataProto=DataProto)
    module("verl.trainer.config.algorithm", RolloutCorrectionConfig=dict)
    module("verl.workers.config.actor", PolicyLossConfig=dict)
    mods = []
    for rel in ["verl/trainer/ppo/rollout_corr_helper.py", "verl/utils/debug/metrics.py"]:
        spec = importlib.util.spec_from_file_location("verl_" + os.path.basename(rel)[:-3], os.path.join(root, rel))
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        mods.append(m)
    return mods


def check_verl(root, batches, cases, mismatches):
    helper, debug = load_verl(root)
    torch.set_default_dtype(torch.float32)
    bad = []

    def near(a, b, key=""):
        if key.endswith("_std"):
            # √(E[x²] − E[x]²) in float32 keeps about 1e-7 of the squares,
            # which the square root lifts to a few 1e-5 near zero
            return abs(a * a - b * b) <= 1e-6 * max(1.0, b * b)
        return abs(a - b) <= 1e-5 * max(1.0, abs(b))

    for c in cases:
        bt = batches[c["batch"]]
        rc = c["rollout_correction"]
        f = {k: (v.float() if torch.is_tensor(v) else v) for k, v in bt.items()}
        if rc.get("bypass_mode"):
            pi, ro = f["logp"], f["rollout"]
        else:
            pi, ro = f["old"], f["rollout"]
        w, mask, metrics = helper.compute_rollout_correction_and_rejection_mask(
            pi, ro, f["mask"], rollout_is=rc.get("rollout_is"), rollout_is_threshold=rc.get("rollout_is_threshold", 2.0),
            rollout_is_batch_normalize=rc.get("rollout_is_batch_normalize", False), rollout_rs=rc.get("rollout_rs"),
            rollout_rs_threshold=rc.get("rollout_rs_threshold"))
        if not rc.get("bypass_mode"):  # decoupled mode: the trainer logs the off-policy metrics separately
            for k in list(metrics):
                if k[len("rollout_corr/"):] in ("training_ppl", "training_log_ppl", "rollout_ppl", "rollout_log_ppl",
                                                "kl", "k3_kl", "log_ppl_diff", "log_ppl_abs_diff", "log_ppl_diff_max",
                                                "log_ppl_diff_min", "ppl_ratio", "chi2_token", "chi2_seq"):
                    del metrics[k]
        mine = {k: v for k, v in c["metrics"].items() if k.startswith("rollout_corr/")}
        if set(metrics) != set(mine):
            bad.append("case %d: keys differ: verl only %s, here only %s"
                       % (c["index"], sorted(set(metrics) - set(mine)), sorted(set(mine) - set(metrics))))
        for k, v in metrics.items():
            if k in mine and not near(mine[k], float(v), k):
                bad.append("case %d: %s = %r here, %r in verl" % (c["index"], k, mine[k], float(v)))
        if c["keep"] is not None:
            kept = [float(x) for x in (mask > 0).reshape(-1).tolist()]
            want = [m * k for m, k in zip(flat(bt["mask"]), c["keep"])]
            if kept != want:
                bad.append("case %d: rejection mask differs" % c["index"])
        if c["weights"] is not None:
            for x, y in zip(flat(w.batch["rollout_is_weights"].double() * f["mask"].double()), c["weights"]):
                if not near(y, x):
                    bad.append("case %d: IS weight %r here, %r in verl" % (c["index"], y, x))
                    break
    for mm in mismatches:
        bt = batches[mm["batch"]]
        f = {k: (v.float() if torch.is_tensor(v) else v) for k, v in bt.items()}
        verl = {"rollout_corr/" + k: float(v) for k, v in helper.compute_offpolicy_metrics(f["old"], f["rollout"], f["mask"]).items()}
        responses = torch.zeros(bt["B"], bt["T"])
        data = types.SimpleNamespace(batch={"rollout_log_probs": f["rollout"], "old_log_probs": f["old"],
                                            "response_mask": f["mask"], "responses": responses})
        verl.update({k: float(v) for k, v in debug.calculate_debug_metrics(data).items()})
        for k, v in verl.items():
            if not near(mm["metrics"][k], v, k):
                bad.append("mismatch %d: %s = %r here, %r in verl" % (mm["batch"], k, mm["metrics"][k], v))
    torch.set_default_dtype(torch.float64)
    if bad:
        sys.exit("disagreements with verl:\n" + "\n".join(bad))
    print("verl's code agrees on %d cases and %d mismatch batches" % (len(cases), len(mismatches)), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--verl", help="a verl checkout to check the values against")
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(20260130)
    batches = [
        make_batch(gen, 4, 6, [6, 4, 0, 5], [(0, 2), (3, 1)]),  # an all-padding row, tool-output gaps
        make_batch(gen, 5, 5, [5, 3, 4, 2, 5], [(4, 2)]),
    ]
    cases = []
    for i, (bi, agg, ent_coef, kl_coef, rc) in enumerate(CASES):
        bt = batches[bi]
        out = case(bt, agg, ent_coef, kl_coef, rc)
        bypass = rc.get("bypass_mode", False)
        pi = bt["logp"] if bypass else bt["old"]
        ro = bt["rollout"]
        w, keep, _ = correct(pi, ro, bt["mask"], dict(rc, bypass_mode=False))
        cases.append(dict(index=i, batch=bi, agg=agg, entropy_coef=ent_coef, kl_coef=kl_coef, rollout_correction=rc,
                          weights=flat(w) if w is not None else None, keep=flat(keep) if keep is not None else None, **out))
    sources = [["math", "code", "math", "code"], ["a", "b", "", "a", "b"]]
    mismatches = []
    for bi, bt in enumerate(batches):
        labels = [s or "unknown" for s in sources[bi]]
        mismatches.append(dict(batch=bi, sources=sources[bi], metrics=mismatch(bt, labels)))
    if args.verl:
        check_verl(args.verl, batches, cases, mismatches)
    out = dict(
        generator="testdata/gen_rollcorr.py (torch %s, float64 autograd)" % torch.__version__,
        batches=[{k: (flat(v) if torch.is_tensor(v) else v) for k, v in b.items()} for b in batches],
        cases=cases,
        mismatch=mismatches,
    )
    json.dump(out, sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
