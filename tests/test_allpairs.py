"""benchmarks/allpairs.py, the whole-corpus reference of benchmarks/quality.py: every pair
at or above the threshold, none below, against Python sets over all pairs."""

from __future__ import annotations

import itertools
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

from allpairs import all_pairs  # noqa: E402


def csr(sets: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in sets])
    return offsets, np.concatenate([np.array(sorted(s), dtype=np.uint64) for s in sets] + [np.empty(0, np.uint64)])


@pytest.mark.parametrize("t", [0.5, 0.8, 1.0])
def test_all_pairs_equals_brute_force(t):
    rng = np.random.default_rng(4)
    sets = []
    for _ in range(120):  # groups of edited copies of a base set, frequent shared items, empty sets
        base = set(rng.integers(0, 5000, int(rng.integers(3, 60))).tolist()) | {1, 2}
        for _ in range(int(rng.integers(1, 5))):
            s = set(base)
            for x in rng.choice(sorted(base), int(rng.integers(0, 4))):
                s.discard(int(x))
            s |= set(rng.integers(0, 5000, int(rng.integers(0, 4))).tolist())
            sets.append(sorted(s))
    sets += sets[::4] + [[], [7]]  # exact copies too
    a, b, j = all_pairs(*csr(sets), t)
    got = {(int(x), int(y)): float(z) for x, y, z in zip(a, b, j)}
    want = {}
    for x, y in itertools.combinations(range(len(sets)), 2):
        sx, sy = set(sets[x]), set(sets[y])
        if sx and sy and len(sx & sy) / len(sx | sy) >= t:
            want[(x, y)] = len(sx & sy) / len(sx | sy)
    assert len(want) > 25
    assert got.keys() == want.keys()
    assert all(got[p] == pytest.approx(want[p], abs=1e-12) for p in want)
