"""A giant duplicate cluster (5,000 identical rows among 20,000): clusters keeps it whole
without enumerating its pairs, and its 12.5 million pairs stream in bounded chunks.

The benchmark runs the same at 2M rows with 300,000 copies
(``python benchmarks/pairs.py --giant``).
"""

from __future__ import annotations

import threading
import time
import tracemalloc

import lance
import numpy as np
import pytest

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.faces.corpus import giant_cluster, write_corpus
from lance_minhash_sql.runtime import pipeline
from lance_minhash_sql.selfjoin import executor, parent, sizing, steps
from lance_minhash_sql.selfjoin import pairs as pairs_mod
from lance_minhash_sql.selfjoin import shards as shards_mod
from lance_minhash_sql.selfjoin import verify as verify_mod
from lance_minhash_sql.selfjoin.clusters import clusters
from lance_minhash_sql.selfjoin.shards import pair_shards
from lance_minhash_sql.selfjoin.verify import pair_verifier

ROWS = 20_000
COPIES = 5_000
THRESHOLD = 0.8
CHUNK = 100_000  # pairs per batch


@pytest.fixture(scope="module")
def giant(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("giant") / "giant.lance")
    write_corpus(uri, ROWS, rows_per_fragment=8_000, giant_copies=COPIES)
    build_index(uri, "text")
    t = lance.dataset(uri).to_table(columns=["id"], with_row_id=True)
    ids, _ = giant_cluster(0, ROWS, COPIES)
    rowids = t.column("_rowid").to_numpy()
    copies = np.sort(rowids[np.isin(t.column("id").to_numpy(), ids)])
    assert copies.size == COPIES
    return uri, copies


def test_clusters_keep_the_giant_cluster_whole_without_its_pairs(giant, monkeypatch):
    uri, copies = giant
    links = []
    union = parent.UnionFind.union

    def counted(self, a, b):
        links.append(len(a))
        return union(self, a, b)

    monkeypatch.setattr(parent.UnionFind, "union", counted)
    table = clusters(uri, "text", THRESHOLD)
    rid = table.column("_rowid").to_numpy()
    cid = table.column("cluster_id").to_numpy()
    size = table.column("cluster_size").to_numpy()
    inside = np.isin(rid, copies)
    assert inside.sum() == COPIES
    assert set(cid[inside].tolist()) == {int(copies[0])} and set(size[inside].tolist()) == {COPIES}
    assert (cid[~inside] != copies[0]).all()
    # links: identical copies pass their bucket's first rep, one link each per band (a
    # band whose bucket is one component already is pruned); a bucket of m rows never
    # costs more than m x MAX_REPS verifications
    links = sum(links)
    print(f"\n{links:,} links in all, against {COPIES * (COPIES - 1) // 2:,} pairs of copies")
    assert COPIES - 1 <= links < 2 * 16 * ROWS < COPIES * (COPIES - 1) // 2 // 10


def test_pairs_of_the_giant_cluster_stream_with_flat_memory(giant):
    uri, copies = giant
    n = COPIES
    seen = np.zeros(n * n, dtype=np.bool_)  # pair (i, j) of copies at i * n + j
    batches = others = 0
    tracemalloc.start()
    try:
        for shard in pair_shards(uri, "text", THRESHOLD):
            for b in steps.run_shard(shard, Budget.parse(None), pair_verifier("estimate"),
                                                 CHUNK):
                assert b.num_rows <= CHUNK
                batches += 1
                left = np.searchsorted(copies, b.column("left_rowid").to_numpy())
                right = np.searchsorted(copies, b.column("right_rowid").to_numpy())
                left, right = left.clip(max=n - 1), right.clip(max=n - 1)
                inside = (copies[left] == b.column("left_rowid").to_numpy()) & \
                         (copies[right] == b.column("right_rowid").to_numpy())
                others += int((~inside).sum())
                code = left[inside] * n + right[inside]
                assert not seen[code].any(), "a pair of copies reported twice"
                seen[code] = True
                assert (b.column("similarity").to_numpy()[inside] == 1.0).all()
                del b, left, right, inside, code
                if batches == 3:
                    tracemalloc.reset_peak()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    total = n * (n - 1) // 2
    assert int(seen.sum()) == total and batches > total // CHUNK
    # all the pairs at once: 12.5M x 24 bytes = 300 MB; a chunk's buffers and batch: ~4.4 MB
    print(f"\n{total:,} pairs of the giant cluster (+{others:,} others) in {batches} batches of <= {CHUNK:,}; "
          f"traced peak after batch 3: {peak / 2**20:.1f} MiB")
    assert peak < 4 * CHUNK * 24 + (8 << 20)


def test_a_stream_closed_early_stops_its_workers(giant, monkeypatch):
    """Regression: the shards of bands 1..15 visit every pair of the copies and write none
    (each pair comes from band 0), so their generators never yield; closing ``pairs()``
    waited for them to visit all their pairs (300,000 copies: hours). Now each worker
    stops after its current kernel call. (Kernel calls slowed down by 1 ms here, so a
    band's 12.5M pairs take thousands of calls and seconds.)"""
    uri, _ = giant
    calls = []
    kernel = verify_mod.pair_chunk

    def slow(*args):
        calls.append(1)
        time.sleep(0.001)
        return kernel(*args)

    monkeypatch.setattr(verify_mod, "pair_chunk", slow)
    monkeypatch.setattr(verify_mod, "VISIT_BUDGET", 1_000)
    monkeypatch.setattr(executor, "DEFAULT_CHUNK_PAIRS", 10_000)
    monkeypatch.setattr(shards_mod, "SHARD_BAND_ROWS", 20_000)  # a shard per band
    monkeypatch.setattr(sizing, "SHARD_BAND_ROWS", 20_000)
    assert len(pair_shards(uri, "text", THRESHOLD)) >= 16
    for verify in ("estimate", "exact"):
        stream = pairs_mod.pairs(uri, "text", THRESHOLD, verify=verify)
        assert 0 < next(stream).num_rows <= 10_000
        before = len(calls)
        stream.close()
        after = len(calls) - before
        # each worker finished at most its current call (and one it had queued); visiting a
        # band's pairs to the end would take thousands
        assert after <= 2 * pipeline.MAX_WORKERS, f"closing made {after} more kernel calls"
        assert not [t for t in threading.enumerate() if t.name.startswith("minhash-pairs")]  # all stopped
