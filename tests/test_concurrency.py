"""Concurrency and load: many DuckDB cursors searching at once, while the index is rebuilt
and the dataset grows; answers stay those of a consistent version, memory stays flat.

The loads end on counts of commits and calls, never on the clock (a timeout guards only
against a hang); ``-m slow`` runs a longer one (``LMS_SLOW_LOAD_CALLS``).
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
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.usage import rss_mb
from lance_minhash_sql.faces.corpus import generate_texts
from lance_minhash_sql.index.opened import cache_usage
from lance_minhash_sql.query.topk import search_ids
from lance_minhash_sql.selfjoin.pairs import pairs

ROWS = 6000
THREADS = 8


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


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


HANG_SECONDS = 900  # only guards against a hang: the loads below end on counts, not on time


class Load:
    """Counts the readers' calls; lets the writer wait until readers ran in between."""

    def __init__(self, threads: int):
        self.calls = [0] * threads
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.deadline = time.monotonic() + HANG_SECONDS

    def total(self) -> int:
        return sum(self.calls)

    def count(self, w: int) -> None:
        with self.cond:
            self.calls[w] += 1
            self.cond.notify_all()

    def wait_for_calls(self, n: int) -> None:
        """Block until the readers made ``n`` more calls (or all of them stopped)."""
        with self.cond:
            target = self.total() + n
            ok = self.cond.wait_for(lambda: self.total() >= target or self.stop.is_set(),
                                    timeout=max(0.0, self.deadline - time.monotonic()))
        if not ok:
            raise TimeoutError(f"readers made {self.total()} calls, {target} awaited: hung?")


def _run_load(uri, queries, expected, calls_between, writer=None, steps=0, pair_set=None):
    """THREADS workers, each with its own cursor, mixing single searches, LATERAL batch
    searches and Python searches (and, given ``pair_set``, the self-join). ``writer(n)``
    makes commit ``n`` for n in 0..steps-1, each after the readers made ``calls_between``
    calls; the load ends ``calls_between`` calls after the last commit. Returns (errors,
    calls, rss) where ``rss`` samples the resident set less the index cache's bytes."""
    con = lms.connect()
    con.execute("CREATE TABLE queries AS SELECT * FROM (SELECT unnest(?::VARCHAR[]) AS q, "
                "unnest(range(?)) AS qid)", [queries, len(queries)])
    errors: list[str] = []
    load = Load(THREADS)
    rss: list[float] = []

    def worker(w: int) -> None:
        cur = lms.install(con.cursor())
        rng = np.random.default_rng(w)
        try:
            while not load.stop.is_set():
                kind = (w + load.calls[w]) % 3
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
                elif pair_set is not None and w == THREADS - 1 and load.calls[w] % 6 == 2:
                    got = _pair_set(uri)
                    if got != pair_set:
                        errors.append(f"worker {w}: pairs {len(got)} differ from the {len(pair_set)} expected")
                else:
                    t = search_ids(uri, "text", queries[:8], 10)
                    if t.num_rows != sum(len(expected[q]) for q in queries[:8]):
                        errors.append(f"worker {w}: python batch returned {t.num_rows} rows")
                load.count(w)
                if w == 0 and load.calls[w] % 20 == 0:
                    rss.append(rss_mb() - cache_usage() / 2**20)
        except Exception as exc:  # the test reports every failure, with its worker
            errors.append(f"worker {w}: {type(exc).__name__}: {exc}")
        finally:
            cur.close()

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(THREADS)]
    for t in threads:
        t.start()
    try:
        for n in range(steps):
            load.wait_for_calls(calls_between)
            writer(n)
        load.wait_for_calls(calls_between)
    except Exception as exc:
        errors.append(f"writer: {type(exc).__name__}: {exc}")
    finally:
        load.stop.set()
        for t in threads:
            t.join()
        con.close()
    return errors, load.total(), rss


def test_many_cursors_answer_consistently_while_the_index_is_rebuilt_and_rows_appended(corpus):
    """Six commits (index rebuilt, rows appended, in turn), each after the readers made 20
    more calls: every answer is the one of the first version."""
    uri, queries = corpus
    expected = _expected(uri, queries, 10)
    pairs_before = _pair_set(uri)
    commits = []

    def writer(n):
        """Rebuild the index (same parameters, replace) or append unrelated rows."""
        if n % 2 == 0:
            build_index(uri, "text")
        else:
            lance.write_dataset(_unrelated(50, 10_000_000 + 50 * n), uri, mode="append")
        commits.append(lance.dataset(uri).version)

    steps = int(os.environ.get("LMS_LOAD_STEPS", "6"))
    errors, calls, _ = _run_load(uri, queries, expected, 20, writer, steps)
    assert not errors, "\n".join(errors[:10])
    assert len(commits) == steps and commits == sorted(set(commits)) and calls >= 20 * (steps + 1), (commits, calls)
    # the answers did not change: appended rows share no tokens with the corpus
    assert _expected(uri, queries, 10) == expected
    assert _pair_set(uri) == pairs_before


def test_answers_stay_the_same_through_optimize_and_compaction(tmp_path):
    """With stable row ids, row ids survive compaction: searches and pairs give the same
    answers while appends, delta segments, merges, compactions and rebuilds commit, each
    after the readers made 10 more calls."""
    from lance_minhash_sql.lifecycle.optimize import optimize

    uri = str(tmp_path / "stable.lance")
    table = pa.table({"id": pa.array(np.arange(ROWS), pa.int64()), "text": generate_texts(0, ROWS)})
    lance.write_dataset(table, uri, max_rows_per_file=1500, enable_stable_row_ids=True)
    build_index(uri, "text")
    queries = generate_texts(0, 40).to_pylist()
    expected = _expected(uri, queries, 10)
    pair_set = _pair_set(uri)
    steps = []
    actions = [lambda n: lance.write_dataset(_unrelated(40, 20_000_000 + 40 * n), uri, mode="append"),
               lambda n: optimize(uri, "text", merge=0),
               lambda n: optimize(uri, "text", merge="all"),
               lambda n: lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=4000),
               lambda n: build_index(uri, "text")]

    def writer(n):
        actions[n % len(actions)](n)
        steps.append(lance.dataset(uri).version)

    rounds = int(os.environ.get("LMS_LOAD_ROUNDS", "2"))
    errors, calls, _ = _run_load(uri, queries, expected, 10, writer, rounds * len(actions), pair_set=pair_set)
    assert not errors, "\n".join(errors[:10])
    assert len(steps) == rounds * len(actions) and calls >= 10 * (len(steps) + 1), (steps, calls)
    # versions only grow, and most steps commit one (an optimize with nothing to merge does not)
    assert steps == sorted(steps) and len(set(steps)) >= len(actions), steps
    assert _expected(uri, queries, 10) == expected and _pair_set(uri) == pair_set


@pytest.mark.slow
def test_sustained_load_keeps_memory_flat(corpus):
    """10^4+ mixed searches from 8 cursors: no errors, and after warm-up the resident set
    less the index cache's bytes (bounded by its capacity, held on purpose) varies by less
    than one glibc malloc arena (64 MiB), the allocator's unit of slack."""
    uri, queries = corpus
    expected = _expected(uri, queries, 10)
    errors, calls, rss = _run_load(uri, queries, expected, int(os.environ.get("LMS_SLOW_LOAD_CALLS", "10000")))
    assert not errors, "\n".join(errors[:10])
    warm = rss[len(rss) // 5:]
    print(f"{calls:,} calls from {THREADS} cursors; resident less cache after warm-up {min(warm):.0f}-"
          f"{max(warm):.0f} MB")
    assert max(warm) - min(warm) < 64, (min(warm), max(warm))


def test_repeated_searches_retain_nothing_per_search(corpus):
    """2,000 SQL searches after 2,000 of warm-up retain no Python object, numpy array or
    Arrow buffer per search, and the index cache holds what it held. Leaking even the
    smallest Python object (16 bytes) per search would retain 32,000 bytes; the tolerance,
    half of that, leaves room only for caches that fill once. Objects allocated inside
    pylance are left out: Lance's own bounded caches (schemas of ``take_rows``) come and go
    by tens per thousand searches."""
    import tracemalloc

    uri, queries = corpus
    con = lms.connect()
    sql = [f"SELECT * FROM minhash_search({lit(uri)}, 'text', {lit(q)}, 10)" for q in queries]
    n = 2000
    not_lance = [tracemalloc.Filter(False, os.path.join(os.path.dirname(lance.__file__), "*"))]

    def held() -> tuple:
        gc.collect()
        traced = sum(t.size for t in tracemalloc.take_snapshot().filter_traces(not_lance).traces)
        return traced, pa.total_allocated_bytes(), cache_usage(), rss_mb()

    for s in sql * 5:  # compile, open, fill the cache
        con.execute(s).fetchall()
    tracemalloc.start()
    try:
        for i in range(n):  # warm-up under the trace: what is allocated once is allocated here
            con.execute(sql[i % len(sql)]).fetchall()
        before = held()
        for i in range(n):
            con.execute(sql[i % len(sql)]).fetchall()
        after = held()
    finally:
        tracemalloc.stop()
        con.close()
    traced, arrow, cached, rss = (a - b for a, b in zip(after, before))
    print(f"\nover {n:,} searches: traced {traced:+,} B, arrow pool {arrow:+,} B, cache {cached:+,} B, "
          f"resident {rss:+.1f} MB")
    assert traced < n * 16 // 2, f"{traced:,} bytes of Python objects retained over {n:,} searches"
    assert arrow <= 0, f"{arrow:,} bytes of Arrow buffers retained"
    assert cached == 0  # every query was answered during warm-up: nothing new to cache


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


def _lance_topk(uri: str, queries: list[str], k: int) -> list[tuple]:
    ds = lance.dataset(uri)
    out = []
    for i, q in enumerate(queries):
        t = ds.to_table(nearest=MinHashQuery(q, "text"), limit=k, with_row_id=True, columns=["_distance"])
        out += [(i, r, d) for r, d in zip(t.column("_rowid").to_pylist(), t.column("_distance").to_pylist())]
    return out


def _as_rows(answer) -> list[tuple]:
    qi, rowid, dist = answer
    return list(zip(qi.tolist(), rowid.tolist(), dist.tolist()))


def test_an_evicted_unindexed_segment_still_answers_its_holders(corpus, tmp_path):
    """Regression: eviction emptied the in-memory segment of unindexed rows while a search
    still held it ('NoneType' object has no attribute 'read_bands')."""
    import naive

    from lance_minhash_sql.index.opened import clear_cache, open_index
    from lance_minhash_sql.query.engine import topk

    uri = str(tmp_path / "appended.lance")
    lance.write_dataset(pa.table({"text": generate_texts(0, 500)}), uri)
    build_index(uri, "text")
    appended = generate_texts(500, 800)
    lance.write_dataset(pa.table({"text": appended}), uri, mode="append")
    opened = open_index(uri, "text")
    held = opened.unindexed_entry()
    assert held is not None and held.cached
    texts = generate_texts(500, 520).to_pylist()
    queries = pa.array(texts, pa.large_string())
    want = _lance_topk(uri, texts, 5)
    assert {(i, 0.0) for i in range(len(texts))} <= {(i, d) for i, _, d in want}  # each finds itself
    # most find their own row, in the appended fragment the index does not cover
    assert sum((i, (1 << 32) + i, 0.0) in want for i in range(len(texts))) >= len(texts) // 2
    assert _as_rows(topk(opened, queries, 5)) == want
    clear_cache()  # evicts every entry, as memory pressure would
    assert not held.cached and held.bands.full and held.docs.full
    assert _as_rows(topk(open_index(uri, "text"), queries, 5)) == want
    with held.lock:  # the evicted entry still answers for whoever holds it: every band row
        page_slot, keys, docs = held.band_arrays(np.ones(held.bands.num_pages, dtype=np.bool_))
    params = opened.params
    ref = sorted(key for t in appended.to_pylist()
                 for key in naive.band_keys(naive.signature(t, params), params.num_bands))
    assert keys.size == docs.size == held.bands.num_rows == len(ref)
    assert np.sort(keys).tolist() == ref


def test_concurrent_openers_share_one_cached_entry(corpus):
    """Regression: a second opener replaced (and emptied) the entry a first one was using.
    Eight threads open the index of a cold cache at once (a barrier releases them
    together): all get the same entry object per segment, cached, and Lance's answers."""
    from lance_minhash_sql.index.opened import clear_cache, open_index
    from lance_minhash_sql.query.engine import topk

    uri, queries = corpus
    want = _lance_topk(uri, queries[:4], 5)
    rounds, n = 5, 8
    for _ in range(rounds):
        clear_cache()
        barrier = threading.Barrier(n)
        got: list = [None] * n

        def opener(w: int) -> None:
            barrier.wait()
            opened = open_index(uri, "text")
            entries = opened.segment_entries()
            got[w] = (entries, _as_rows(topk(opened, pa.array(queries[:4], pa.large_string()), 5)))

        threads = [threading.Thread(target=opener, args=(w,)) for w in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        first = got[0][0]
        assert len(first) >= 1 and all(e.cached for e in first)
        for entries, answer in got:
            assert [id(e) for e in entries] == [id(e) for e in first]
            assert answer == want


def test_adopt_returns_the_entry_cached_first():
    """The cache's rule behind the test above, on its own: adopting a second value under a
    key returns the first, leaves it attached and does not cache the second."""
    from lance_minhash_sql.runtime.cache import ByteCache

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
