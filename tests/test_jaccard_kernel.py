"""The exact-verification kernels (kernels/similarity.py: jaccard_at_least and the join's
jaccard_at_least_between, and star's
kernels/similarity.py: jaccard_if_at_least) against Python's
own set arithmetic: every pair it keeps has the Jaccard ``len(a & b) / len(a | b)`` and
reaches the threshold, every pair it drops does not, at thresholds where the sizes alone
settle a pair, where the merge stops early, and exactly at a reachable Jaccard. The pair
kernel's filter of exact verification's candidates (kernels/bucket_pairs.py: pair_chunk
given the sets' sizes and bucket counts) writes every pair that reaches the threshold."""

from __future__ import annotations

import numpy as np
import pytest

from lance_minhash_sql.kernels.similarity import jaccard_at_least, jaccard_at_least_between
from lance_minhash_sql.kernels.similarity import COUNT_BITS, COUNT_BUCKETS, bucket_counts, jaccard_if_at_least


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
    """Each set's values per bucket of their top COUNT_BITS bits (saturating at 255), counted here."""
    out = np.zeros((len(sets), COUNT_BUCKETS), dtype=np.uint8)
    shift = 64 - COUNT_BITS
    for i, values in enumerate(sets):
        for v in values:
            out[i, v >> shift] = min(255, int(out[i, v >> shift]) + 1)
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
    # counts without rows (pairs the pair kernel bounded already): the same answers
    unbound = jaccard_at_least(starts, ends, values, counts[:0], ia.astype(np.int64), ib.astype(np.int64), threshold)
    assert np.array_equal(got, unbound, equal_nan=True)
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


def _reachable(sa: set, sb: set, threshold: float) -> bool:
    """The pre-merge rule, slow and obvious: some count of common values the sizes and the
    bucket counts allow (at most ``sum_q min(a_q, b_q)``, void where a bucket saturated in
    both) gives ``c / (|a| + |b| - c) >= threshold``; never for an empty set."""
    if not sa or not sb:
        return False
    ca, cb = _counts([sa])[0], _counts([sb])[0]
    void = bool(((ca == 255) & (cb == 255)).any())
    most = min(len(sa), len(sb), len(sa) if void else int(np.minimum(ca, cb).sum()))
    return any(c / (len(sa) + len(sb) - c) >= threshold for c in range(most + 1))


def _in_bucket(q: int, ids) -> set[int]:
    return {(q << (64 - COUNT_BITS)) | i for i in ids}


def _tight_sets() -> list[set[int]]:
    """Pairs whose exact Jaccard is their bound's most: a bound one value too strict drops them."""
    a = _in_bucket(0, range(1, 9))
    s = _in_bucket(0, range(1000, 1300)) | _in_bucket(1, range(100))  # bucket 0 saturated
    return [a, a | _in_bucket(0, [9, 10]),  # a subset: J = 8/10, the sizes' most
            _in_bucket(0, range(1, 10)) | _in_bucket(1, [7]),  # 9 common of 11: J = 9/11, the counts' most
            _in_bucket(0, range(1, 10)) | _in_bucket(2, [7]),
            s, _in_bucket(0, range(1000, 1300)) | _in_bucket(1, range(60)),  # J = 360/400 with both saturated
            _in_bucket(5, range(1, 9))]  # a's size in another bucket: bound 0


@pytest.mark.parametrize("threshold", [0.5, 0.8, 9 / 11, 0.9])
def test_may_reach_is_the_pre_merge_rule(threshold):
    """The pair kernel's branch-free filter (kernels/bucket_pairs.py: pair_chunk) keeps what
    the exact check's pre-merge rule keeps (needed_common), and both what the obvious rule does."""
    from lance_minhash_sql.kernels.similarity import common_bound, may_reach, needed_common

    sets = _sets(np.random.default_rng(3), 30) + _tight_sets()
    counts = _counts(sets)
    for a in range(len(sets)):
        for b in range(len(sets)):
            na, nb = len(sets[a]), len(sets[b])
            want = _reachable(sets[a], sets[b], threshold)
            bound = common_bound(counts, a, counts, b)
            assert bool(may_reach(na, nb, bound, threshold)) == want
            if na and nb:
                assert (needed_common(na, nb, bound, threshold) >= 0) == want


@pytest.mark.parametrize("threshold", [0.5, 0.8, 9 / 11, 0.9])
@pytest.mark.parametrize("k, num_bands, cap", [(128, 16, 1), (128, 16, 1 << 12), (16, 4, 3)])
def test_pair_kernel_given_sets_drops_no_pair_that_reaches_the_threshold(threshold, k, num_bands, cap):
    """Exact verification's candidates (pair_chunk with the sets' sizes and bucket counts):
    every pair whose exact Jaccard reaches the threshold is written, and the pairs the
    bound refutes are not (every row shares every band, so every pair is a candidate)."""
    from lance_minhash_sql.kernels.bucket_pairs import bucket_bounds, new_bucket_cursor, pair_chunk
    from lance_minhash_sql.kernels.similarity import band_keys

    sets = _sets(np.random.default_rng(int(threshold * 100)), 40) + _tight_sets()
    n = len(sets)
    starts, ends, values, counts = _layout(sets)
    sigs = np.tile(np.random.default_rng(1).integers(0, 60000, k).astype(np.uint16), (n, 1))
    keys = band_keys(sigs.view(np.uint8).reshape(n, -1), num_bands)
    flat_k, flat_d = keys.T.reshape(-1), np.tile(np.arange(n, dtype=np.uint32), num_bands)
    o = np.lexsort((flat_d, flat_k))
    flat_k, flat_d = flat_k[o], flat_d[o]
    b_starts, b_ends = bucket_bounds(flat_k)
    out = [np.empty(cap, np.uint64), np.empty(cap, np.uint64), np.empty(cap, np.int32)]
    cursor, got, done = new_bucket_cursor(), [], False
    while not done:  # pool row r holds set r (its size and bucket counts given beside the pool)
        m, done = pair_chunk(flat_k, flat_d, b_starts, b_ends, sigs.view(np.uint64), sigs, np.empty(0, np.int32),
                             np.arange(n, dtype=np.uint64), k, num_bands, 1, cursor, *out, 5, ends - starts, counts,
                             threshold)
        got += list(zip(out[0][:m].tolist(), out[1][:m].tolist(), out[2][:m].tolist()))
    assert len(got) == len(set(got)) and all(e == k for _, _, e in got)
    got = {(a, b) for a, b, _ in got}
    true = {(a, b) for a in range(n) for b in range(a + 1, n)
            if sets[a] and sets[b] and len(sets[a] & sets[b]) / len(sets[a] | sets[b]) >= threshold}
    assert true <= got  # no pair reaching the threshold dropped
    assert got == {(a, b) for a in range(n) for b in range(a + 1, n) if _reachable(sets[a], sets[b], threshold)}
    assert len(got) < n * (n - 1) // 2 - n + 1  # the bound dropped pairs no empty set explains
    t = n - len(_tight_sets())  # the tight pairs, each kept up to its Jaccard
    assert [((t + i, t + i + 1) in got) for i in (0, 2, 4)] == [threshold <= j for j in (0.8, 9 / 11, 0.9)]
