#!/usr/bin/python3
"""Golden values of the turn-level estimators of the Go package advantage.

Run from the package directory, with PyTorch installed (Debian's
python3-torch 1.13 was used):

    /usr/bin/python3 testdata/gen_turn_golden.py

It writes testdata/turn_golden.json in golden.json's layout (input batches,
and per case the expected advantages and returns), which golden_test.go
reads. The batches are multi-turn trajectories: ragged rows whose turns are
spans of generated tokens (mask 1) with environment answers between them
(mask 0), a reward and a state name per turn, token rewards, groups of
several sizes (one of size one), a trajectory without turns and a turn
that generated no token.

The estimators are computed the way verl-agent lays a batch out for GiGPO
(gigpo/core_gigpo.py, arXiv:2505.10978): one row per turn ("step"), each
with its trajectory's id, its group's id, its anchor state and its step
reward, the episode reward alongside. In that layout:
  * step returns are the discounted sums of the step rewards, per
    trajectory, last step first (the paper's Eq. 5);
  * gigpo: episode advantage = GRPO over the distinct trajectories of a
    group (Eq. 3; a group of one has mean 0 and std 1), step advantage =
    return minus the mean over the steps of the group with the same anchor
    state, over (std + eps) in mean_std_norm mode (Eqs. 6-7; a step group
    of one has mean = itself, std 1), combined as A^E + w * A^S (Eq. 8);
  * turn_grpo: the step returns normalised over the steps of a group with
    the same step index (rLLM's per-step grouping).
The per-step advantages are then written back onto each turn's mask-1
tokens of the trajectory's row. The Go package's conventions (stated in its
doc comments) decide what a step's reward is: the turn's Reward plus the
token rewards of its mask-1 tokens, with the score added on the last turn;
the episode reward is the score plus all token rewards plus all turn
rewards.
"""

import json
import random
from collections import defaultdict

import torch

EPS = 1e-6


def f32(x):
    """Round to the nearest float32, so Go reads back the same number."""
    return torch.tensor(x, dtype=torch.float32).tolist()


def make_batch(rng, group_sizes, states, max_turns, special_rows=False):
    groups, scores, mask, trew, turns = [], [], [], [], []
    for g, n in enumerate(group_sizes):
        for _ in range(n):
            groups.append("prompt-%d" % g)
            scores.append(round(rng.uniform(-1, 2), 6))
            row, tr, ts = [], [], []
            k = rng.randint(1, max_turns)
            for j in range(k):
                if j > 0:  # the environment's answer to the previous turn
                    row += [0.0] * rng.randint(1, 3)
                n_tok = rng.randint(1, 4)
                start = len(row)
                row += [1.0] * n_tok
                # The first turn of every trajectory is taken in the
                # prompt's state; later ones in one of a few states, so
                # that anchor states repeat across trajectories.
                state = "s0" if j == 0 else rng.choice(states)
                reward = round(rng.uniform(-1, 1), 6) if rng.random() < 0.6 else 0.0
                ts.append({"start": start, "end": len(row), "reward": reward, "state": state})
            trew.append([f32(round(rng.uniform(-0.2, 0.2), 6)) if rng.random() < 0.3 else 0.0 for _ in row])
            mask.append(row)
            turns.append(ts)
    if special_rows:
        # A trajectory that ended before its first turn: no tokens, no
        # turns, a score that still counts in its group's episode
        # statistics.
        groups.append("prompt-0")
        scores.append(0.25)
        mask.append([])
        trew.append([])
        turns.append([])
        # A turn that generated nothing: its reward still counts.
        groups.append("prompt-0")
        scores.append(-0.5)
        mask.append([1.0, 0.0, 0.0, 1.0])
        trew.append([0.0, 0.0, 0.0, 0.0])
        turns.append([
            {"start": 0, "end": 1, "reward": 0.5, "state": "s0"},
            {"start": 3, "end": 3, "reward": 0.25, "state": states[0]},
            {"start": 3, "end": 4, "reward": 0.0, "state": states[1]},
        ])
    return {"scores": scores, "groups": groups, "mask": mask, "token_rewards": trew, "turns": turns}


def steps_of(batch):
    """The batch as verl-agent's per-step rows: one dict per turn."""
    rows = []
    for i, ts in enumerate(batch["turns"]):
        for k, t in enumerate(ts):
            r = t["reward"]
            for p in range(t["start"], t["end"]):
                if batch["mask"][i][p] > 0:
                    r += batch["token_rewards"][i][p]
            if k == len(ts) - 1:
                r += batch["scores"][i]
            rows.append({"traj": i, "step": k, "group": batch["groups"][i], "state": t["state"], "reward": r})
    return rows


def discounted(rows, gamma):
    by_traj = defaultdict(list)
    for n, r in enumerate(rows):
        by_traj[r["traj"]].append(n)
    ret = torch.zeros(len(rows), dtype=torch.float64)
    for idx in by_traj.values():
        run = torch.tensor(0.0, dtype=torch.float64)
        for n in reversed(idx):
            run = rows[n]["reward"] + gamma * run
            ret[n] = run
    return ret


def normalise(values, keys, norm_by_std):
    """values minus their key's mean, over (std + EPS); a key of one: 0."""
    members = defaultdict(list)
    for n, k in enumerate(keys):
        members[k].append(n)
    out = values.clone()
    for idx in members.values():
        xs = values[idx]
        if len(idx) == 1:
            mean, std = xs[0], torch.tensor(1.0, dtype=torch.float64)
        else:
            mean, std = xs.mean(), xs.std()
        for n in idx:
            out[n] = values[n] - mean
            if norm_by_std:
                out[n] = out[n] / (std + EPS)
    return out


def episode_advantage(batch, norm_by_std):
    """GRPO over the trajectories of each group (Eq. 3)."""
    total = []
    for i in range(len(batch["mask"])):
        total.append(batch["scores"][i] + sum(batch["token_rewards"][i]) + sum(t["reward"] for t in batch["turns"][i]))
    total = torch.tensor(total, dtype=torch.float64)
    members = defaultdict(list)
    for i, g in enumerate(batch["groups"]):
        members[g].append(i)
    adv = total.clone()
    for idx in members.values():
        if len(idx) == 1:
            mean, std = torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64)
        else:
            mean, std = total[idx].mean(), total[idx].std()
        for i in idx:
            adv[i] = total[i] - mean
            if norm_by_std:
                adv[i] = adv[i] / (std + EPS)
    return adv


def to_tokens(batch, rows, per_step, returns=None):
    adv = [[0.0] * len(m) for m in batch["mask"]]
    ret = [[0.0] * len(m) for m in batch["mask"]]
    for n, r in enumerate(rows):
        t = batch["turns"][r["traj"]][r["step"]]
        for p in range(t["start"], t["end"]):
            m = batch["mask"][r["traj"]][p]
            adv[r["traj"]][p] = float(per_step[n]) * m
            ret[r["traj"]][p] = float(returns[n]) if returns is not None else float(per_step[n]) * m
    return adv, ret


def gigpo(batch, gamma, norm_by_std, weight):
    rows = steps_of(batch)
    g = discounted(rows, gamma)
    step = normalise(g, [(r["group"], r["state"]) for r in rows], norm_by_std)
    ep = episode_advantage(batch, norm_by_std)
    joint = torch.tensor([float(ep[r["traj"]]) for r in rows], dtype=torch.float64) + weight * step
    return to_tokens(batch, rows, joint)


def turn_grpo(batch, gamma, norm_by_std):
    rows = steps_of(batch)
    g = discounted(rows, gamma)
    adv = normalise(g, [(r["group"], r["step"]) for r in rows], norm_by_std)
    return to_tokens(batch, rows, adv, g)


def main():
    rng = random.Random(20251)
    batches = {
        "turns-a": make_batch(rng, [4, 3, 1], ["s1", "s2"], 4, special_rows=True),
        "turns-b": make_batch(rng, [5, 5], ["s1", "s2", "s3"], 5),
    }
    cases = []
    for bname, b in batches.items():
        for gamma in (1.0, 0.9):
            for norm in (True, False):
                adv, ret = turn_grpo(b, gamma, norm)
                cases.append({"name": "turn_grpo/%s/g%s/norm%s" % (bname, gamma, norm), "estimator": "turn_grpo", "batch": bname,
                              "config": {"norm_by_std": norm, "gamma": gamma, "lambda": 1.0, "epsilon": EPS, "step_weight": 1.0},
                              "advantages": adv, "returns": ret})
                for w in (1.0, 0.5):
                    adv, ret = gigpo(b, gamma, norm, w)
                    cases.append({"name": "gigpo/%s/g%s/norm%s/w%s" % (bname, gamma, norm, w), "estimator": "gigpo", "batch": bname,
                                  "config": {"norm_by_std": norm, "gamma": gamma, "lambda": 1.0, "epsilon": EPS, "step_weight": w},
                                  "advantages": adv, "returns": ret})
    with open("testdata/turn_golden.json", "w") as f:
        json.dump({"batches": batches, "cases": cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
