"""The self-join's budget (``core/budget.py``): its parts add up to at most the budget, and
each consumer takes the part the budget names, not a share of its own."""

from __future__ import annotations

import dataclasses
import pathlib
import re

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_minhash_sql.core import tuning
from lance_minhash_sql.core.budget import (EXACT_PARTS, POOL_PARTS, SELF_JOIN_PARTS, STAR_PARTS, Budget,
                                           memory_limit_bytes)
from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.core.params import DEFAULT_SELF_JOIN_MEMORY, MIN_SELF_JOIN_MEMORY
from lance_minhash_sql.selfjoin import parent, sizing
from lance_minhash_sql.selfjoin import star as star_mod

BUDGETS = [MIN_SELF_JOIN_MEMORY, MIN_SELF_JOIN_MEMORY + 1, 5_000_003, 10**8 + 7, DEFAULT_SELF_JOIN_MEMORY, 1 << 30,
           3 * (1 << 30) + 11, 1 << 40, (1 << 50) - 1]


def test_the_shares_of_each_phase_add_up_to_at_most_one():
    """Each part is ``floor(total * share)``: shares of at most 1 make parts of at most the
    budget, whatever the budget."""
    joined = (tuning.SHARD_SHARE * (1 + tuning.READ_AHEAD) + tuning.KEEP_SHARE
              + tuning.PAIR_SHARE * (1 + tuning.PAIRS_AHEAD) + tuning.POOL_SHARE + tuning.SHUFFLE_CACHE_SHARE)
    assert joined <= 1
    assert tuning.STAR_CHUNK_SHARE + tuning.STAR_CENTERS_SHARE <= 1
    assert max(tuning.PARENT_SHARE, tuning.PARENT_PAGES_SHARE, tuning.LABELS_SHARE) <= 1


def test_every_share_is_a_fraction_that_multiplies():
    """core/tuning.py's one convention: each ``*_SHARE`` is a fraction in ``(0, 1]`` of what
    it is a share of (the budget unless its comment says otherwise), multiplied, never a
    divisor."""
    shares = {name: value for name, value in vars(tuning).items() if name.endswith(("_SHARE", "_FRACTION"))}
    assert {"POOL_SHARE", "STAR_CENTERS_SHARE", "WHOLE_SIGNATURES_SHARE"} <= set(shares)
    assert all(0 < value <= 1 for value in shares.values()), shares
    package = pathlib.Path(tuning.__file__).resolve().parents[1]
    divided = [p.name for p in package.rglob("*.py") if re.search(r"/\s*[A-Z_]+_(?:SHARE|FRACTION)\b", p.read_text())]
    assert not divided


@pytest.mark.parametrize("total", BUDGETS)
def test_the_parts_add_up_to_at_most_the_budget(total):
    budget = Budget.of(total)
    assert budget.total == total
    parts = SELF_JOIN_PARTS + POOL_PARTS + STAR_PARTS + EXACT_PARTS
    assert set(parts) == {f.name for f in dataclasses.fields(Budget)} - {"total"}
    assert all(getattr(budget, p) >= 0 for p in parts)
    assert budget.sets <= total // 2  # what Budget.less leaves to verify in is the rest of the budget
    assert sum(getattr(budget, p) for p in SELF_JOIN_PARTS) <= total
    assert sum(getattr(budget, p) for p in STAR_PARTS) <= total
    assert all(getattr(budget, p) <= budget.pool for p in POOL_PARTS)
    for held in (0, 1, total // 3, total, 10 * total):
        left = budget.less(held)
        assert total // 2 <= left.total <= total and left == Budget.of(max(total // 2, total - held))


def test_the_parts_are_the_byte_counts_of_the_shares():
    """Each part is its share's bytes, written as the plain formula: a shard's band rows
    1/32 of the budget, the rows kept 1/16, a batch of pairs 1/64, the pool 5/8,
    a shuffle task's cache 1/8, the union-find 3/4 of the pool (1/4 once in its file), the
    labels half of it, star's chunk, centers and walked arrays a quarter each, the shingle
    sets' index in memory 1/8."""
    for total in BUDGETS:
        b = Budget.of(total)
        pool = int(total * 0.625)
        assert (b.shard, b.kept, b.pairs, b.pool, b.cache) == (total // 32, total // 16, total // 64, pool, total // 8)
        assert (b.read_ahead, b.pairs_ahead) == (tuning.READ_AHEAD * b.shard, tuning.PAIRS_AHEAD * b.pairs)
        assert (b.parent, b.parent_pages, b.labels) == (int(pool * 0.75), int(pool * 0.25), pool // 2)
        assert (b.star_chunk, b.star_centers, b.star_walked, b.sets) == (total // 4, total // 4, total // 4, total // 8)


def test_memory_limit_is_parsed_once_into_a_budget():
    assert Budget.parse(None) == Budget.of(DEFAULT_SELF_JOIN_MEMORY) == Budget.or_default(None)
    assert Budget.or_default(Budget.of(5 << 20)) == Budget.of(5 << 20)
    assert Budget.parse("1GiB") == Budget.of(1 << 30) and memory_limit_bytes(12 << 20) == 12 << 20
    with pytest.raises(InvalidParameterError, match="memory_limit"):
        Budget.parse("1KiB")


def odd_budget() -> Budget:
    """A budget whose parts are unlike any share of its total: a consumer that takes its
    own share of the total gives other answers than one that takes the named part."""
    return dataclasses.replace(Budget.of(1 << 30), shard=12 * 50_000 + 5, kept=12 * 7_777 + 3, pairs=24 * 3_333 + 1,
                               pool=9_999_991, parent=4_321_000, parent_pages=2_222_222, labels=1_234_567)


def test_each_consumer_of_the_self_join_takes_its_named_part():
    b = odd_budget()
    assert sizing.shard_rows(b) == 50_000
    assert sizing.keep_rows(b) == 7_777
    assert sizing.chunk_pairs(b, 1 << 30) == 3_333 and sizing.chunk_pairs(b, 100) == 100
    assert sizing.pool_rows(b, 128, 1_000) == (9_999_991 - 1_000) // (2 * 128 + 12)
    labels = sizing.fixed_bytes(246_913, 4)  # 987,652 + 30,865 bytes: within b.labels
    assert labels <= b.labels < sizing.fixed_bytes(300_000, 4)
    assert sizing.pairs_pool(246_913, 128, b)[0] and not sizing.pairs_pool(300_000, 128, b)[0]
    # the union-find held in memory while it and the bit set fit b.parent, else its pages b.parent_pages
    fits = 1_000_000  # 4,000,000 + 125,000 bytes <= 4,321,000
    assert not parent.in_file(fits, b) and parent.parent_share(fits, b) == parent.parent_bytes(fits)
    assert parent.in_file(1_100_000, b)
    assert parent.parent_share(1_100_000, b) == max(b.parent_pages, parent.MIN_BLOCKS * parent.BLOCK_BYTES)
    assert sizing.components_bytes(fits, b) == sizing.fixed_bytes(fits, 0) + parent.parent_bytes(fits)


@pytest.fixture(scope="module")
def unrelated(tmp_path_factory):
    from lance_minhash_sql.index.opened import open_index
    from lance_minhash_sql.indexer.builder import build_index

    uri = str(tmp_path_factory.mktemp("budget") / "unrelated.lance")
    rng = np.random.default_rng(3)
    vocab = np.array([f"w{i}" for i in range(5000)])
    lance.write_dataset(pa.table({"text": [" ".join(rng.choice(vocab, 30)) for _ in range(300)]}), uri)
    build_index(uri, "text")
    return open_index(uri, "text")


def test_the_star_walk_takes_its_chunk_and_centers_parts(unrelated, tmp_path, monkeypatch):
    """One component of unrelated rows (every row a center): with the budget's
    ``star_chunk`` and ``star_centers`` parts 0 the walk takes one member a chunk and
    writes its centers to disk, with them large one chunk and nothing written, whatever
    the budget's total; the twins are the same."""
    monkeypatch.setattr(star_mod.tempfile, "tempdir", str(tmp_path))
    rowid = unrelated.ds.to_table(columns=[], with_row_id=True).column("_rowid").to_numpy()
    cluster = np.zeros(rowid.size, dtype=np.uint64)
    order = np.arange(rowid.size)
    runs = {}
    for name, chunk, centers in (("tight", 0, 0), ("roomy", 1 << 30, 1 << 30)):
        b = dataclasses.replace(Budget.of(256 << 20), star_chunk=chunk, star_centers=centers)
        before = dict(star_mod.STATS)
        twin, _, _ = star_mod.star_twins(unrelated, 0.8, rowid, cluster, order, "estimate", b)
        runs[name] = (twin.tolist(), star_mod.STATS["chunks"] - before["chunks"],
                      star_mod.STATS["written_blocks"] - before["written_blocks"])
    assert runs["tight"][0] == runs["roomy"][0] == [-1] * rowid.size
    assert runs["tight"][1] == rowid.size and runs["tight"][2] > 0
    assert runs["roomy"][1:] == (1, 0)
