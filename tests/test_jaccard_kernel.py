"""The exact-verification kernels (kernels/similarity.py: jaccard_at_least and the join's
jaccard_at_least_between, and star's
kernels/similarity.py: jaccard_if_at_least) against Python's
own set arithmetic: every pair it keeps has the Jaccard ``len(a & b) / len(a | b)`` and
reaches the threshold, every pair it drops does not, at thresholds where the sizes alone
settle a pair, where the merge stops early, and exactly at a reachable Jaccard."""

from __future__ import annotations

import numpy as np
import pytest

from lance_minhash_sql.kernels.similarity import jaccard_at_least, jaccard_at_least_between
from lance_minhash_sql.kernels.similarity import COUNT_BUCKETS, bucket_counts, jaccard_if_at_least


def _sets(rng, n: int) -> list[set[int]]:
    """Sets built to overlap: each draws most of its values from one of a few bases."""
    bases = [rng.integers(0, 2**64, 60, dtype=np.uint64).tolist() for _ in range(4)]
    out = []
    for _ in range(n):
        base = bases[rng.integers(0, len(bases))]
        keep = rng.random(len(base)) < rng.uniform(0.6, 1.0)
        extra = rng.integers(0, 2**64, rng.integers(0, 12), dtype=np.uint64).tolist()
        out.append({v for v, k in zip(base, keep) if k} | set(extra))
    for i in range(5):  # copies, and copies less one value (J = 1 and J ~ 0.97)
        out.append(set(out[i]))
        out.append(set(sorted(out[i])[1:]))
    out.append(set())  # an empty set: nan against anything
    return out


def _counts(sets: list[set[int]]) -> np.ndarray:
    """Each set's values per bucket of their top four bits (saturating at 255), counted here."""
    out = np.zeros((len(sets), COUNT_BUCKETS), dtype=np.uint8)
    for i, values in enumerate(sets):
        for v in values:
            out[i, v >> 60] = min(255, int(out[i, v >> 60]) + 1)
    return out


def _layout(sets: list[set[int]]):
    """Sets stored out of order in one array (starts/ends, as the shingle file holds them),
    with their bucket counts."""
    order = np.random.default_rng(1).permutation(len(sets))
    values, starts, ends = [], np.zeros(len(sets), np.int64), np.zeros(len(sets), np.int64)
    for i in order:
        starts[i] = len(values)
        values.extend(sorted(sets[i]))
        ends[i] = len(values)
    return starts, ends, np.array(values, dtype=np.uint64), _counts(sets)


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 0.8, 0.9, 1.0])
def test_kept_pairs_and_their_jaccard_equal_set_arithmetic(threshold):
    rng = np.random.default_rng(int(threshold * 10))
    sets = _sets(rng, 60)
    starts, ends, values, counts = _layout(sets)
    ia, ib = np.triu_indices(len(sets), 1)
    got = jaccard_at_least(starts, ends, values, counts, ia.astype(np.int64), ib.astype(np.int64), threshold)
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


@pytest.mark.parametrize("threshold", [0.5, 0.8])
def test_sets_of_two_collections_equal_set_arithmetic(threshold):
    """The join's sets: the left's in one collection, the right's in another of other
    sizes, their sets in other orders (each pair's sides read from their own arrays)."""
    rng = np.random.default_rng(int(threshold * 100))
    sets = _sets(rng, 70)
    left, right = sets[:25], sets[25:]
    a, b = _layout(left), _layout(right)
    ia, ib = (x.ravel().astype(np.int64) for x in np.meshgrid(np.arange(len(left)), np.arange(len(right)),
                                                               indexing="ij"))
    got = jaccard_at_least_between(*a, *b, ia, ib, threshold)
    kept = 0
    for p, (i, j) in enumerate(zip(ia, ib)):
        sa, sb = left[i], right[j]
        if not sa or not sb:
            assert np.isnan(got[p])
            continue
        jac = len(sa & sb) / len(sa | sb)
        assert got[p] == (jac if jac >= threshold else -1.0)
        kept += jac >= threshold
    assert 0 < kept < ia.size // 2


def test_a_pair_exactly_at_the_threshold_is_kept():
    a = set(range(1, 41))
    b = set(range(1, 37)) | {100, 101, 102, 103}  # 36 common of 44: J = 36/44
    a = {v * 0x9E3779B97F4A7C15 % 2**64 for v in a}  # spread over the buckets
    b = {v * 0x9E3779B97F4A7C15 % 2**64 for v in b}
    starts, ends, values, counts = _layout([a, b])
    t = 36 / 44
    got = jaccard_at_least(starts, ends, values, counts, np.array([0]), np.array([1]), t)
    assert got[0] == t
    assert jaccard_at_least(starts, ends, values, counts, np.array([0]), np.array([1]), np.nextafter(t, 1.0))[0] == -1.0


def test_bucket_counts_and_the_bound_they_give():
    rng = np.random.default_rng(5)
    sets = _sets(rng, 40)
    sets.append(set(range(1, 301)))  # 300 values in bucket 0: saturated, so the bound is void
    sets.append(set(range(2, 302)))
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(x) for x in sets])
    hashes = np.array([v for x in sets for v in sorted(x)], dtype=np.uint64)
    counts = bucket_counts(offsets, hashes)
    assert np.array_equal(counts, _counts(sets))
    assert counts[-1, 0] == 255
    # the saturated pair is still settled by its sets: J = 299/301
    n = len(sets)
    starts, ends = offsets[:-1], offsets[1:]
    got = jaccard_at_least(starts, ends, hashes, counts, np.array([n - 2]), np.array([n - 1]), 0.99)
    assert got[0] == 299 / 301
