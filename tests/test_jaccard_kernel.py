"""The exact-verification kernels (kernels/pairs.py: jaccard_at_least, and star's
kernels/similarity.py: jaccard_if_at_least) against Python's
own set arithmetic: every pair it keeps has the Jaccard ``len(a & b) / len(a | b)`` and
reaches the threshold, every pair it drops does not, at thresholds where the sizes alone
settle a pair, where the merge stops early, and exactly at a reachable Jaccard."""

from __future__ import annotations

import numpy as np
import pytest

from lance_minhash_sql.kernels.pairs import jaccard_at_least
from lance_minhash_sql.kernels.similarity import jaccard_if_at_least


def _sets(rng, n: int) -> list[set[int]]:
    """Sets built to overlap: each draws most of its values from one of a few bases."""
    bases = [rng.integers(0, 2**63, 60).tolist() for _ in range(4)]
    out = []
    for _ in range(n):
        base = bases[rng.integers(0, len(bases))]
        keep = rng.random(len(base)) < rng.uniform(0.6, 1.0)
        extra = rng.integers(0, 2**63, rng.integers(0, 12)).tolist()
        out.append({v for v, k in zip(base, keep) if k} | set(extra))
    for i in range(5):  # copies, and copies less one value (J = 1 and J ~ 0.97)
        out.append(set(out[i]))
        out.append(set(sorted(out[i])[1:]))
    out.append(set())  # an empty set: nan against anything
    return out


def _layout(sets: list[set[int]]):
    """Sets stored out of order in one array (starts/ends, as the shingle file holds them)."""
    order = np.random.default_rng(1).permutation(len(sets))
    values, starts, ends = [], np.zeros(len(sets), np.int64), np.zeros(len(sets), np.int64)
    for i in order:
        starts[i] = len(values)
        values.extend(sorted(sets[i]))
        ends[i] = len(values)
    return starts, ends, np.array(values, dtype=np.uint64)


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 0.8, 0.9, 1.0])
def test_kept_pairs_and_their_jaccard_equal_set_arithmetic(threshold):
    rng = np.random.default_rng(int(threshold * 10))
    sets = _sets(rng, 60)
    starts, ends, values = _layout(sets)
    ia, ib = np.triu_indices(len(sets), 1)
    got = jaccard_at_least(starts, ends, values, ia.astype(np.int64), ib.astype(np.int64), threshold)
    kept = 0
    for p, (a, b) in enumerate(zip(ia, ib)):
        sa, sb = sets[a], sets[b]
        if not sa or not sb:
            assert np.isnan(got[p])
            continue
        j = len(sa & sb) / len(sa | sb)
        one = jaccard_if_at_least(values, starts[a], ends[a], values, starts[b], ends[b], threshold)  # star's
        if j >= threshold:
            assert got[p] == j == one
            kept += 1
        else:
            assert got[p] == -1.0 == one
    assert kept > 0 and kept < ia.size - len(sets)  # both outcomes occur


def test_a_pair_exactly_at_the_threshold_is_kept():
    a = set(range(1, 41))
    b = set(range(1, 37)) | {100, 101, 102, 103}  # 36 common of 44: J = 36/44
    starts, ends, values = _layout([a, b])
    t = 36 / 44
    got = jaccard_at_least(starts, ends, values, np.array([0]), np.array([1]), t)
    assert got[0] == t
    assert jaccard_at_least(starts, ends, values, np.array([0]), np.array([1]), np.nextafter(t, 1.0))[0] == -1.0
