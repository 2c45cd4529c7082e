"""The records kernels and their callers share by slot (a meter, the pruning's cursor, a
vocabulary record) are named once, and the metered kernels, stopped and resumed through
those slots as often as the meter says, give what the kernels without a meter give."""

from __future__ import annotations

import numpy as np
import pytest

from lance_minhash_sql.kernels import components, prune, vocab


def test_slots_are_distinct_and_fill_their_arrays():
    assert sorted([components.METER_SHIFT, components.METER_MOST, components.METER_USED]) == [0, 1, 2]
    assert sorted([prune.CURSOR_BUCKET, prune.CURSOR_ROW, prune.CURSOR_ROOT]) == [0, 1, 2]
    columns = [vocab.REC_HASH, vocab.REC_WORD0, vocab.REC_WORD1, vocab.REC_LENGTH, vocab.REC_FORM_WORD0,
               vocab.REC_FORM_WORD1, vocab.REC_FORM_LENGTH, vocab.REC_FORM_START]
    assert sorted(columns) == list(range(vocab.RECORD))
    assert vocab.REC_FORM_WORD1 == vocab.REC_FORM_WORD0 + 1  # index/sign.py writes the two words as one slice
    meter = components.new_meter(3, 5)
    assert meter.dtype == np.int64 and meter.size == 3
    assert (meter[components.METER_SHIFT], meter[components.METER_MOST], meter[components.METER_USED]) == (3, 5, 0)
    assert prune.new_prune_cursor().tolist() == [0, 0, 0]


def _links(rng, n, m):
    a = rng.integers(0, n, m).astype(np.uint32)
    b = rng.integers(0, n, m).astype(np.uint32)
    return a, b


@pytest.mark.parametrize("seed", range(4))
def test_metered_union_flatten_and_pruning_equal_the_plain_kernels(seed):
    rng = np.random.default_rng(seed)
    n = 256
    a, b = _links(rng, n, 120)
    plain = np.arange(n, dtype=np.int32)
    merges = components.union_min(plain, a, b)

    metered = np.arange(n, dtype=np.int32)
    seen, meter = components.new_marks(n), components.new_meter(2, 4)  # 4 ids a block, 4 blocks at a time
    i, got, stops = 0, 0, 0
    while i < a.size:
        i, m = components.union_within(metered, a, b, np.int64(i), seen, meter)
        got += m
        assert meter[components.METER_USED] <= meter[components.METER_MOST]
        components.clear_meter(seen, meter)
        stops += 1
    assert got == merges and stops > 1  # the meter stopped it, and resuming lost nothing

    keys = np.sort(rng.integers(0, 40, 300)).astype(np.uint64)
    gids = rng.integers(0, n, 300).astype(np.uint32)
    want = prune.drop_joined(keys, gids, plain.copy())
    keep = np.zeros(keys.size, dtype=np.bool_)
    at = prune.new_prune_cursor()
    while not prune.joined_within(keys, gids, metered, keep, at, seen, meter):
        components.clear_meter(seen, meter)
    got_k, got_g = prune.kept_rows(keys, gids, keep)
    assert got_k.tolist() == want[0].tolist() and got_g.tolist() == want[1].tolist()

    components.flatten_roots(plain)
    x = 0
    while x < n:
        x = components.flatten_within(metered, np.int64(x), seen, meter)
        components.clear_meter(seen, meter)
    assert metered.tolist() == plain.tolist()
