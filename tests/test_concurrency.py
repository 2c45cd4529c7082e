"""Concurrency and load: many DuckDB cursors searching at once, while the index is rebuilt
and the dataset grows; answers stay those of a consistent version, memory stays flat.

The default run is short (``LMS_LOAD_SECONDS``, 8 s by default); ``-m slow`` runs the
several-minute version.
"""

from __future__ import annotations

import gc
import os
import threading
import time

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.query import MinHashQuery

import lance_minhash_sql as lms
from lance_minhash_sql.corpus import generate_texts
from lance_minhash_sql.index.build import build_index
from lance_minhash_sql.index.pairs import pairs
from lance_minhash_sql.index.search import search_ids

ROWS = 6000
THREADS = 8


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _unrelated(n: int, start: int) -> pa.Table:
    """Rows whose tokens never occur in the corpus (so no query's answer changes)."""
    return pa.table({"id": pa.array(np.arange(start, start + n), pa.int64()),
                     "text": pa.array([f"zq{i}x zq{i}y zq{i}z zq{i}w" for i in range(start, start + n)])})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("load") / "corpus.lance")
    table = pa.table({"id": pa.array(np.arange(ROWS), pa.int64()), "text": generate_texts(0, ROWS)})
    lance.write_dataset(table, uri, max_rows_per_file=2000)
    build_index(uri, "text")
    queries = generate_texts(0, 60).to_pylist()
    return uri, queries


def _expected(uri: str, queries: list[str], k: int) -> dict[str, list]:
    ds = lance.dataset(uri)
    out = {}
    for q in queries:
        t = ds.to_table(nearest=MinHashQuery(q, "text"), limit=k, columns=["id", "_distance"])
        out[q] = list(zip(t.column("id").to_pylist(), [float(np.float32(d)) for d in t.column("_distance").to_pylist()]))
    return out


def _pair_set(uri: str) -> set:
    return {(left, right) for b in pairs(uri, "text", 0.8)
            for left, right in zip(b.column("left_rowid").to_pylist(), b.column("right_rowid").to_pylist())}


def _run_load(uri, queries, expected, seconds, writer=None, pair_set=None):
    """THREADS workers, each with its own cursor, mixing single searches, LATERAL batch
    searches and Python searches (and, given ``pair_set``, the self-join) until ``seconds``
    pass; returns (errors, calls, rss)."""
    con = lms.connect()
    con.execute("CREATE TABLE queries AS SELECT * FROM (SELECT unnest(?::VARCHAR[]) AS q, "
                "unnest(range(?)) AS qid)", [queries, len(queries)])
    errors: list[str] = []
    calls = [0] * THREADS
    stop = time.monotonic() + seconds
    rss: list[float] = []

    def worker(w: int) -> None:
        cur = lms.install(con.cursor())
        rng = np.random.default_rng(w)
        try:
            while time.monotonic() < stop:
                kind = (w + calls[w]) % 3
                if kind == 0:
                    q = queries[int(rng.integers(len(queries)))]
                    got = cur.execute(f"SELECT id, _distance FROM minhash_search({lit(uri)}, 'text', {lit(q)}, 10)"
                                      ).fetchall()
                    if got != expected[q]:
                        errors.append(f"worker {w}: search {q[:30]!r} gave {got[:3]}... not {expected[q][:3]}...")
                elif kind == 1:
                    got = cur.execute(f"SELECT qid, count(*) FROM queries, LATERAL minhash_search_ids({lit(uri)}, "
                                      "'text', q, 10) GROUP BY qid ORDER BY qid").fetchall()
                    want = [(i, len(expected[q])) for i, q in enumerate(queries) if expected[q]]
                    if got != want:
                        errors.append(f"worker {w}: batch search counts {got[:3]}... not {want[:3]}...")
                elif pair_set is not None and w == THREADS - 1 and calls[w] % 6 == 2:
                    got = _pair_set(uri)
                    if got != pair_set:
                        errors.append(f"worker {w}: pairs {len(got)} differ from the {len(pair_set)} expected")
                else:
                    t = search_ids(uri, "text", queries[:8], 10)
                    if t.num_rows != sum(len(expected[q]) for q in queries[:8]):
                        errors.append(f"worker {w}: python batch returned {t.num_rows} rows")
                calls[w] += 1
                if w == 0 and calls[w] % 20 == 0:
                    rss.append(_rss_mb())
        except Exception as exc:  # the test reports every failure, with its worker
            errors.append(f"worker {w}: {type(exc).__name__}: {exc}")
        finally:
            cur.close()

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(THREADS)]
    for t in threads:
        t.start()
    if writer is not None:
        writer(stop)
    for t in threads:
        t.join()
    con.close()
    return errors, sum(calls), rss


def test_many_cursors_answer_consistently_while_the_index_is_rebuilt_and_rows_appended(corpus):
    uri, queries = corpus
    expected = _expected(uri, queries, 10)
    pairs_before = _pair_set(uri)
    seconds = float(os.environ.get("LMS_LOAD_SECONDS", "8"))
    commits = []

    def writer(stop):
        """Rebuild the index (same parameters, replace) and append unrelated rows, in turn."""
        n = 0
        while time.monotonic() < stop:
            if n % 2 == 0:
                build_index(uri, "text")
            else:
                lance.write_dataset(_unrelated(50, 10_000_000 + 50 * n), uri, mode="append")
            commits.append(lance.dataset(uri).version)
            n += 1

    errors, calls, _ = _run_load(uri, queries, expected, seconds, writer)
    assert not errors, "\n".join(errors[:10])
    assert len(commits) >= 2 and calls >= 50, (commits, calls)
    # the answers did not change: appended rows share no tokens with the corpus
    assert _expected(uri, queries, 10) == expected
    assert _pair_set(uri) == pairs_before


def test_answers_stay_the_same_through_optimize_and_compaction(tmp_path):
    """With stable row ids, row ids survive compaction: searches and pairs give the same
    answers while appends, delta segments, merges, compactions and rebuilds commit."""
    from lance_minhash_sql.index.optimize import optimize

    uri = str(tmp_path / "stable.lance")
    table = pa.table({"id": pa.array(np.arange(ROWS), pa.int64()), "text": generate_texts(0, ROWS)})
    # compile optimize's kernels first (a fresh checkout has no numba cache): the load
    # below must spend its seconds on commits, not on compiling
    warm = str(tmp_path / "warm.lance")
    lance.write_dataset(table.slice(0, 300), warm, max_rows_per_file=100, enable_stable_row_ids=True)
    build_index(warm, "text")
    lance.write_dataset(_unrelated(40, 30_000_000), warm, mode="append")
    optimize(warm, "text", merge=0)
    optimize(warm, "text", merge="all")
    lance.write_dataset(table, uri, max_rows_per_file=1500, enable_stable_row_ids=True)
    build_index(uri, "text")
    queries = generate_texts(0, 40).to_pylist()
    expected = _expected(uri, queries, 10)
    pair_set = _pair_set(uri)
    errors, _, _ = _run_load(uri, queries, expected, 0.5)  # every reader's kind once, compiled outside the load
    assert not errors, "\n".join(errors[:10])
    steps = []

    def writer(stop):
        actions = [lambda n: lance.write_dataset(_unrelated(40, 20_000_000 + 40 * n), uri, mode="append"),
                   lambda n: optimize(uri, "text", merge=0),
                   lambda n: optimize(uri, "text", merge="all"),
                   lambda n: lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=4000),
                   lambda n: build_index(uri, "text")]
        n = 0
        while time.monotonic() < stop:
            actions[n % len(actions)](n)
            steps.append(lance.dataset(uri).version)
            n += 1

    errors, calls, _ = _run_load(uri, queries, expected, float(os.environ.get("LMS_LOAD_SECONDS", "8")), writer,
                                 pair_set=pair_set)
    assert not errors, "\n".join(errors[:10])
    assert len(steps) >= 5 and calls >= 30, (steps, calls)  # every kind of commit at least once
    assert _expected(uri, queries, 10) == expected and _pair_set(uri) == pair_set


@pytest.mark.slow
def test_sustained_load_keeps_memory_flat(corpus):
    """Several minutes of mixed searches from 8 cursors (10^4+ queries): no errors, and the
    resident set after warm-up stays within a small band."""
    uri, queries = corpus
    expected = _expected(uri, queries, 10)
    errors, calls, rss = _run_load(uri, queries, expected, float(os.environ.get("LMS_SLOW_LOAD_SECONDS", "180")))
    assert not errors, "\n".join(errors[:10])
    assert calls >= 10_000, calls
    warm = rss[len(rss) // 5:]
    print(f"{calls:,} calls from {THREADS} cursors; resident after warm-up {min(warm):.0f}-{max(warm):.0f} MB")
    assert max(warm) - min(warm) < 64, (min(warm), max(warm))


def test_repeated_searches_do_not_grow_memory(corpus):
    """2,000 SQL searches after warm-up add no more than a few MB of resident memory."""
    uri, queries = corpus
    con = lms.connect()
    sql = [f"SELECT * FROM minhash_search({lit(uri)}, 'text', {lit(q)}, 10)" for q in queries]
    for s in sql * 5:
        con.execute(s).fetchall()
    gc.collect()
    before = _rss_mb()
    for i in range(2000):
        con.execute(sql[i % len(sql)]).fetchall()
    gc.collect()
    grown = _rss_mb() - before
    con.close()
    assert grown < 24, f"resident memory grew by {grown:.1f} MB over 2,000 searches"


def test_closing_cursors_under_load_never_leaves_a_dangling_function(corpus):
    """Cursors opened, used and closed from many threads, with garbage collection in
    between, leave every function callable on a fresh connection."""
    uri, queries = corpus
    con = lms.connect()

    def churn(w: int) -> None:
        for i in range(15):
            cur = lms.install(con.cursor())
            cur.execute(f"SELECT count(*) FROM minhash_search_ids({lit(uri)}, 'text', {lit(queries[(w + i) % 60])})"
                        ).fetchall()
            cur.close()
            del cur
            gc.collect()

    threads = [threading.Thread(target=churn, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    con.close()
    del con
    gc.collect()
    fresh = lms.connect()
    assert fresh.execute(f"SELECT count(*) FROM minhash_search({lit(uri)}, 'text', {lit(queries[0])}, 5)"
                         ).fetchone()[0] == 5


def test_an_evicted_unindexed_segment_still_answers_its_holders(corpus, tmp_path):
    """Regression: eviction emptied the in-memory segment of unindexed rows while a search
    still held it ('NoneType' object has no attribute 'read_bands')."""
    from lance_minhash_sql.index.opened import clear_cache, open_index
    from lance_minhash_sql.index.search import topk

    uri = str(tmp_path / "appended.lance")
    lance.write_dataset(pa.table({"text": generate_texts(0, 500)}), uri)
    build_index(uri, "text")
    lance.write_dataset(pa.table({"text": generate_texts(500, 800)}), uri, mode="append")
    opened = open_index(uri, "text")
    held = opened.unindexed_entry()
    assert held is not None and held.cached
    queries = pa.array(generate_texts(500, 520).to_pylist(), pa.large_string())
    before = topk(opened, queries, 5)
    clear_cache()  # evicts every entry, as memory pressure would
    assert not held.cached and held.bands.full and held.docs.full
    again = open_index(uri, "text")
    after = topk(again, queries, 5)
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    with held.lock:  # the evicted entry still answers for whoever holds it
        page_slot, keys, docs = held.band_arrays(np.arange(held.bands.num_pages))
    assert keys.size == held.bands.num_rows


def test_concurrent_openers_share_one_cached_entry():
    """Regression: a second opener replaced (and emptied) the entry a first one was using."""
    from lance_minhash_sql.index.cache import ByteCache

    class Entry:
        cached = False
        detached = 0

        def detach(self):
            self.detached += 1

    cache = ByteCache("test", 1 << 20)
    first, second = Entry(), Entry()
    assert cache.adopt("k", first, 100) is first and first.cached
    assert cache.adopt("k", second, 100) is first
    assert first.detached == 0 and not second.cached and cache.usage == 100
