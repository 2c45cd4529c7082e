"""kernels/lanes.py: the pair kernel's first pass against the same test in plain numpy."""

from __future__ import annotations

import numpy as np
import pytest

from lance_minhash_sql.kernels.config import load_numba
from lance_minhash_sql.kernels.lanes import BAND_VALUES, WIDTH


def first_pass(halves, docs, slot, s, ra, lo, hi, min_eq, earlier):
    numba = load_numba()
    from lance_minhash_sql.kernels.lanes import verified_partners

    @numba.njit
    def run(halves, docs, slot, s, ra, lo, hi, min_eq, earlier, passed, passed_miss):
        return verified_partners(halves, docs, slot, s, ra, lo, hi, min_eq, earlier, passed, passed_miss)

    passed = np.full(hi - lo + 1, -7, dtype=np.int64)
    passed_miss = np.full(hi - lo + 1, -7, dtype=np.int64)
    n = run(halves, docs, slot, s, ra, lo, hi, min_eq, earlier, passed, passed_miss)
    return passed[:n].tolist(), passed_miss[:n].tolist()


def numpy_pass(halves, docs, slot, s, ra, lo, hi, min_eq, earlier):
    want, miss = [], []
    for t in range(lo, hi):
        rb = int(docs[s + t]) if slot.size == 0 else int(slot[docs[s + t]])
        same = halves[ra] == halves[rb]
        bands = same.reshape(-1, BAND_VALUES).all(axis=1)
        shared = any(bands[j] for j in range(bands.size) if earlier >> j & 1)
        if same.sum() >= min_eq and not shared:
            want.append(t)
            miss.append(WIDTH - int(same.sum()))
    return want, miss


@pytest.mark.parametrize("mapped", [False, True])
def test_verified_partners_is_the_count_and_the_earlier_bands(mapped):
    rng = np.random.default_rng(11)
    rows = 300
    base = rng.integers(0, 1 << 16, WIDTH).astype(np.uint16)
    halves = np.repeat(base[None, :], rows, axis=0)
    # each row differs from the base in a random number of random positions: counts on
    # both sides of min_eq, and bands equal or not in every combination
    for r in range(1, rows):
        where = rng.choice(WIDTH, size=rng.integers(0, 60), replace=False)
        halves[r, where] = rng.integers(0, 1 << 16, where.size).astype(np.uint16)
    halves[rows - 1] = halves[0]  # all 128 equal
    halves[rows - 2, 5] = halves[0, 5] ^ 1  # one value off
    order = rng.permutation(rows).astype(np.uint32)
    if mapped:  # docs are ids mapped to pool rows through slot
        slot = rng.permutation(rows).astype(np.int32)
        docs = np.argsort(slot).astype(np.uint32)[order]
    else:
        slot = np.empty(0, dtype=np.int32)
        docs = order
    for a in (halves, docs, slot):
        a.setflags(write=False)
    for ra, earlier, min_eq in [(0, 0, 103), (0, (1 << 7) - 1, 103), (3, (1 << 16) - 1, 90), (0, 0b1010, 1),
                                (int(order[7]), (1 << 15) - 1, 128), (1, 0, 0)]:
        for s, lo, hi in [(0, 0, rows), (10, 5, 200), (0, 17, 17)]:
            got = first_pass(halves, docs, slot, s, ra, lo, hi, min_eq, earlier)
            want = numpy_pass(halves, docs, slot, s, ra, lo, hi, min_eq, earlier)
            assert got == want
    assert len(numpy_pass(halves, docs, slot, 0, 0, 0, rows, 103, 0)[0]) > 10  # some pass
