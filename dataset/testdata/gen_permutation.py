#!/usr/bin/python3
"""Golden epoch orders for dataset.Permutation, from an independent Python
implementation of the algorithm documented in dataset/sampler.go
(SplitMix64 started at seed XOR mix64(epoch), Lemire's bounded integers with
rejection, Fisher-Yates from the end). Python integers are unbounded, so the
64-bit wrap-around is written out with explicit masks rather than inherited
from uint64 arithmetic as in Go.

Run from the repository root:

    python3 dataset/testdata/gen_permutation.py > dataset/testdata/permutations.json
"""
import json

M = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


class SplitMix64:
    def __init__(self, state):
        self.state = state & M

    def next(self):
        self.state = (self.state + GAMMA) & M
        return mix64(self.state)

    def below(self, b):
        # Lemire 2019: the high word of x*b, rejecting low words under 2^64 mod b.
        x = self.next()
        prod = x * b
        lo = prod & M
        if lo < b:
            thresh = (1 << 64) % b
            while lo < thresh:
                x = self.next()
                prod = x * b
                lo = prod & M
        return prod >> 64


def permutation(n, seed, epoch):
    rng = SplitMix64(seed ^ mix64(epoch))
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


cases = []
for n, seed, epoch in [
    (1, 0, 0),
    (2, 0, 0),
    (10, 0, 0),
    (10, 0, 1),
    (10, 42, 0),
    (10, 42, 1),
    (10, 42, 7),
    (37, 1234567, 3),
    (100, 0xFFFFFFFFFFFFFFFF, 2),
    (1000, 2025, 0),
]:
    cases.append({"n": n, "seed": seed, "epoch": epoch, "perm": permutation(n, seed, epoch)})

first = SplitMix64(0)
print(json.dumps({
    "splitmix64_seed0": [first.next() for _ in range(3)],
    "cases": cases,
}))
