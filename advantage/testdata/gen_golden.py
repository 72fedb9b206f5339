#!/usr/bin/python3
"""Golden values for the Go package advantage.

Run from the package directory, with PyTorch installed (Debian's
python3-torch 1.13 was used):

    /usr/bin/python3 testdata/gen_golden.py

It writes testdata/golden.json (the input batches, and per estimator the
expected advantages and returns), which golden_test.go reads. The script
re-implements, in PyTorch and in float64, the advantage estimators of verl
(verl/trainer/ppo/core_algos.py) and its masked_whiten
(verl/utils/torch_functional.py), on right-padded [B, T] tensors exactly as
verl holds a batch, and evaluates them on a few random batches with ragged
rows, tool-output spans (mask 0 inside a row), a zero-length row, a row with
no mask-1 token and groups of one.

Conventions of the Go package that the script applies around verl's
formulas (each is stated in the Go doc comments):
  * token_level_rewards = TokenRewards + Scores[i] on the last mask-1 token
    of row i (on a mask-0 column if the row has none);
  * advantages are multiplied by the mask at the end (verl leaves gae and
    remax advantages non-zero on mask-0 tokens; no loss reads them);
  * reinforce_plus_plus carries the running return through mask-0 tokens
    (verl's fix for issue #7278) instead of resetting it there;
  * "drgrpo" is grpo with norm_adv_by_std_in_grpo=False.
Padding columns are cut off before writing, so every row has its own length.
"""

import json
import os
import random
from collections import defaultdict

import torch

torch.set_default_dtype(torch.float64)

EPS = 1e-6


def masked_mean(values, mask):
    return (values * mask).sum() / mask.sum()


def masked_var(values, mask):
    mean = masked_mean(values, mask)
    var = masked_mean((values - mean) ** 2, mask)
    n = mask.sum()
    if n < 2:
        raise ValueError("need at least two mask-1 tokens")
    return var * n / (n - 1)


def masked_whiten(values, mask):
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    return (values - mean) * torch.rsqrt(var + 1e-8)


def group_lists(scores, index):
    members = defaultdict(list)
    for i in range(scores.shape[0]):
        members[index[i]].append(i)
    return members


def grpo(tlr, mask, index, norm_by_std):
    scores = tlr.sum(dim=-1)
    out = scores.clone()
    for _, idx in group_lists(scores, index).items():
        group = scores[idx]
        if len(idx) == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = group.mean(), group.std()  # torch.std is unbiased
        for i in idx:
            out[i] = (scores[i] - mean) / (std + EPS) if norm_by_std else scores[i] - mean
    adv = out.unsqueeze(-1) * mask
    return adv, adv


def grpo_passk(tlr, mask, index, norm_by_std):
    scores = tlr.sum(dim=-1)
    adv = torch.zeros_like(scores)
    for _, idx in group_lists(scores, index).items():
        rewards = scores[idx]
        assert len(idx) >= 2
        top, top_idx = torch.topk(rewards, 2)
        a = top[0] - top[1]
        if norm_by_std:
            a = a / (rewards.std() + EPS)
        adv[idx[top_idx[0].item()]] = a
    adv = adv.unsqueeze(-1) * mask
    return adv, adv


def rloo(tlr, mask, index):
    scores = tlr.sum(dim=-1)
    out = scores.clone()
    for _, idx in group_lists(scores, index).items():
        n = len(idx)
        if n > 1:
            mean = scores[idx].mean()
            for i in idx:
                out[i] = scores[i] * n / (n - 1) - mean * n / (n - 1)
    adv = out.unsqueeze(-1) * mask
    return adv, adv


def reinforce_plus_plus_baseline(tlr, mask, index):
    scores = tlr.sum(dim=-1)
    out = scores.clone()
    for _, idx in group_lists(scores, index).items():
        mean = scores[idx].mean() if len(idx) > 1 else torch.tensor(0.0)
        for i in idx:
            out[i] = scores[i] - mean
    tiled = out.unsqueeze(-1).tile([1, tlr.shape[-1]]) * mask
    adv = masked_whiten(tiled, mask) * mask
    return adv, adv


def gpg(tlr, mask, index):
    scores = tlr.sum(dim=-1)
    alpha = scores.shape[0] / torch.count_nonzero(scores).clamp(min=1)
    out = scores.clone()
    for _, idx in group_lists(scores, index).items():
        mean = scores[idx].mean() if len(idx) > 1 else torch.tensor(0.0)
        for i in idx:
            out[i] = alpha * (scores[i] - mean) / 1.0
    adv = out.unsqueeze(-1) * mask
    return adv, adv


def opo(tlr, mask, index):
    lengths = mask.sum(dim=-1)
    scores = tlr.sum(dim=-1)
    out = scores.clone()
    for _, idx in group_lists(scores, index).items():
        if len(idx) == 1:
            base = torch.tensor(0.0)
        else:
            base = (lengths[idx] * scores[idx]).sum() / lengths[idx].sum()
        for i in idx:
            out[i] = scores[i] - base
    adv = out.unsqueeze(-1) * mask
    return adv, adv


def reinforce_plus_plus(tlr, mask, gamma):
    returns = torch.zeros_like(tlr)
    running = torch.zeros(tlr.shape[0])
    for t in reversed(range(tlr.shape[1])):
        on = mask[:, t] > 0
        running = torch.where(on, tlr[:, t] + gamma * running, running)
        returns[:, t] = running
    adv = masked_whiten(returns, mask) * mask
    return adv, returns


def remax(tlr, mask, baselines):
    returns = (tlr * mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
    adv = returns - baselines.unsqueeze(-1) * mask
    return adv, returns


def gae(tlr, values, mask, gamma, lam):
    nextvalues = 0
    lastgaelam = 0
    rev = []
    for t in reversed(range(tlr.shape[-1])):
        delta = tlr[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam_ = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * mask[:, t] + (1 - mask[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * mask[:, t] + (1 - mask[:, t]) * lastgaelam
        rev.append(lastgaelam)
    adv = torch.stack(rev[::-1], dim=1)
    returns = adv + values
    adv = masked_whiten(adv, mask)
    return adv, returns


def f32(x):
    """Round to the nearest float32, so Go reads back the same number."""
    return torch.tensor(x, dtype=torch.float32).tolist()


def make_batch(rng, group_sizes, max_len, binary, token_rewards, special_rows=False):
    groups, scores = [], []
    for g, n in enumerate(group_sizes):
        for _ in range(n):
            groups.append("prompt-%d" % g)
            scores.append(float(rng.randint(0, 1)) if binary else round(rng.uniform(-2, 3), 6))
    b = len(groups)
    mask, values, trew = [], [], []
    for i in range(b):
        n = rng.randint(2, max_len)
        row = [1.0] * n
        # One or two tool-output spans inside the row.
        for _ in range(rng.randint(0, 2)):
            s = rng.randint(1, max(1, n - 2))
            for t in range(s, min(n - 1, s + rng.randint(1, 4))):
                row[t] = 0.0
        # Sometimes the row ends inside a tool output (truncated rollout).
        if rng.random() < 0.2:
            row[-1] = 0.0
        mask.append(row)
    if special_rows:
        mask[1] = []  # zero-length response
        mask[2] = [0.0] * len(mask[2])  # no token the policy produced
    for row in mask:
        values.append(f32([rng.gauss(0, 1) for _ in row]))
        trew.append(f32([rng.gauss(0, 0.05) for _ in row]))
    baselines = [round(rng.uniform(-1, 2), 6) for _ in range(b)]
    return {
        "scores": scores,
        "groups": groups,
        "mask": mask,
        "token_rewards": trew if token_rewards else None,
        "values": values,
        "baseline_scores": baselines,
    }


def padded(inp):
    mask_rows = inp["mask"]
    b = len(mask_rows)
    t_max = max(len(r) for r in mask_rows)
    mask = torch.zeros(b, t_max)
    values = torch.zeros(b, t_max)
    tlr = torch.zeros(b, t_max)
    for i, row in enumerate(mask_rows):
        n = len(row)
        mask[i, :n] = torch.tensor(row)
        values[i, :n] = torch.tensor(inp["values"][i])
        if inp["token_rewards"] is not None:
            tlr[i, :n] = torch.tensor(inp["token_rewards"][i])
        ones = [t for t, m in enumerate(row) if m != 0]
        if inp["scores"] is not None:
            # A row with no mask-1 token keeps its score on a mask-0 column:
            # it still counts in the group statistics of outcome estimators
            # (verl sums token_level_rewards whatever the mask), and the
            # token-level estimators ignore rewards on mask-0 tokens.
            tlr[i, ones[-1] if ones else 0] += inp["scores"][i]
    return tlr, values, mask


def run(name, inp, cfg):
    tlr, values, mask = padded(inp)
    index = inp["groups"]
    gamma, lam, norm = cfg["gamma"], cfg["lambda"], cfg["norm_by_std"]
    if name == "grpo":
        adv, ret = grpo(tlr, mask, index, norm)
    elif name == "drgrpo":
        adv, ret = grpo(tlr, mask, index, False)
    elif name == "grpo_passk":
        adv, ret = grpo_passk(tlr, mask, index, norm)
    elif name == "rloo":
        adv, ret = rloo(tlr, mask, index)
    elif name == "reinforce_plus_plus_baseline":
        adv, ret = reinforce_plus_plus_baseline(tlr, mask, index)
    elif name == "gpg":
        adv, ret = gpg(tlr, mask, index)
    elif name == "opo":
        adv, ret = opo(tlr, mask, index)
    elif name == "reinforce_plus_plus":
        adv, ret = reinforce_plus_plus(tlr, mask, gamma)
    elif name == "remax":
        adv, ret = remax(tlr, mask, torch.tensor(inp["baseline_scores"]))
    elif name == "gae":
        adv, ret = gae(tlr, values, mask, gamma, lam)
    else:
        raise KeyError(name)
    adv = adv * mask
    lens = [len(r) for r in inp["mask"]]
    return (
        [adv[i, :n].tolist() for i, n in enumerate(lens)],
        [ret[i, :n].tolist() for i, n in enumerate(lens)],
    )


ALL = [
    "grpo", "drgrpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline",
    "gpg", "opo", "remax", "grpo_passk", "gae",
]


def main():
    rng = random.Random(20251122)
    batches = [
        # Binary outcome scores, groups of 4, verl's default configuration.
        ("binary", make_batch(rng, [4, 4, 4], 24, True, False),
         {"norm_by_std": True, "gamma": 1.0, "lambda": 1.0}, ALL),
        # Continuous scores plus per-token rewards, discounting, no std norm.
        ("shaped", make_batch(rng, [3, 5, 2], 20, False, True),
         {"norm_by_std": False, "gamma": 0.99, "lambda": 0.95}, ALL),
        # Groups of one, a zero-length row and a row with no mask-1 token;
        # pass@k is undefined on groups of one and left out.
        ("singletons", make_batch(rng, [3, 1, 4, 1, 2], 16, False, True, special_rows=True),
         {"norm_by_std": True, "gamma": 0.9, "lambda": 0.8},
         [n for n in ALL if n != "grpo_passk"]),
    ]
    cases = []
    inputs = {}
    for bname, inp, cfg, names in batches:
        inputs[bname] = inp
        for name in names:
            adv, ret = run(name, inp, cfg)
            cases.append({
                "name": "%s/%s" % (bname, name),
                "estimator": name,
                "config": dict(cfg, epsilon=EPS),
                "batch": bname,
                "advantages": adv,
                "returns": ret,
            })
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "golden.json"), "w") as f:
        json.dump({"generator": "testdata/gen_golden.py", "torch": torch.__version__,
                   "batches": inputs, "cases": cases}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
