"""prewarm loads signatures, then band pages, into the bounded process cache: never above
its capacity, earlier segments never evicted by later ones, answers unchanged."""

from __future__ import annotations

import os
import subprocess
import sys

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.query import MinHashQuery

import lance_minhash_sql as lms
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.errors import IndexNotFoundError, InvalidParameterError
from lance_minhash_sql.index.opened import (CACHE_ENV, DEFAULT_CACHE_BYTES, cache_capacity, cache_usage, clear_cache,
                                            open_index, set_cache_capacity)
from lance_minhash_sql.lifecycle.optimize import optimize
from lance_minhash_sql.lifecycle.prewarm import PrewarmResult, prewarm, warm
from lance_minhash_sql.query.topk import search_ids

ROWS = 6000
SIG_BYTES = 8 + 2 * 64  # row id + 64 u16 hashes


def _texts(n: int) -> list[str]:
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(500)]
    return [" ".join(rng.choice(words, 20)) for _ in range(n)]


TEXTS = _texts(ROWS)


@pytest.fixture(autouse=True)
def fresh_cache():
    clear_cache()
    old = set_cache_capacity(DEFAULT_CACHE_BYTES)
    yield
    clear_cache()
    set_cache_capacity(old)


@pytest.fixture
def three_segments(tmp_path) -> str:
    uri = str(tmp_path / "ds.lance")
    t = pa.table({"id": np.arange(ROWS), "text": TEXTS})
    lance.write_dataset(t.slice(0, 4000), uri)
    build_index(uri, "text", num_hashes=64, num_bands=8, shingle_size=2)
    for lo in (4000, 5000):
        lance.dataset(uri).insert(t.slice(lo, 1000))
        optimize(uri, "text", merge=0)
    clear_cache()
    return uri


QUERIES = TEXTS[::250] + ["w1 w2 w3 w4"]


def answers(uri: str) -> list:
    t = search_ids(uri, "text", QUERIES, 5)
    return list(zip(t.column("query_index").to_pylist(), t.column("_rowid").to_pylist(),
                    t.column("_distance").to_pylist()))


def lance_answers(uri: str) -> list:
    ds = lance.dataset(uri)
    out = []
    for i, q in enumerate(QUERIES):
        t = ds.to_table(nearest=MinHashQuery(q, "text"), limit=5, with_row_id=True, columns=["_distance"])
        out += [(i, r, d) for r, d in zip(t.column("_rowid").to_pylist(), t.column("_distance").to_pylist())]
    return out


def reads(uri: str) -> int:
    return sum(e.stats["docs_read"] + e.stats["band_pages_read"] + e.stats["window_rows_read"] +
               e.stats["full_loads"] for e in open_index(uri, "text").segment_entries())


def test_prewarm_loads_everything_that_fits_and_queries_then_read_nothing(three_segments):
    uri = three_segments
    r = prewarm(uri, "text")
    assert isinstance(r, PrewarmResult)
    assert (r.segments, r.signatures_loaded, r.signatures_total) == (3, ROWS, ROWS)
    assert r.band_pages_loaded == r.band_pages_total > 0 and r.complete
    assert r.bytes_loaded >= ROWS * (SIG_BYTES + 8 * 12)  # signatures, row ids and 8 band rows per doc
    assert r.cache_capacity == cache_capacity() == DEFAULT_CACHE_BYTES
    assert r.cache_bytes == cache_usage() <= r.cache_capacity
    before = reads(uri)
    assert answers(uri) == lance_answers(uri)
    assert reads(uri) == before  # every query answered from the cache
    again = prewarm(uri, "text")
    assert again.bytes_loaded == 0 and again.complete
    assert warm(open_index(uri, "text")).complete is True


def test_prewarm_under_a_small_capacity_loads_signatures_first(three_segments):
    uri = three_segments
    cap = 4500 * SIG_BYTES  # the first segment's 4,000 signatures, not the next 1,000 nor band pages
    r = prewarm(uri, "text", cache_bytes=cap)
    assert r.cache_capacity == cap == cache_capacity()
    assert r.cache_bytes <= cap
    assert r.signatures_loaded == 4000
    assert r.band_pages_loaded == 0 and not r.complete
    entries = open_index(uri, "text").segment_entries()
    assert entries[0].cached and entries[0].docs.full  # not evicted by the later segments
    assert entries[1].docs.used == entries[2].docs.used == 0
    assert answers(uri) == lance_answers(uri)
    assert cache_usage() <= cap


def test_prewarm_with_room_for_signatures_and_some_band_pages(three_segments):
    uri = three_segments
    cap = ROWS * SIG_BYTES + 100_000 + ROWS * 8 * 12 // 3
    r = prewarm(uri, "text", cache_bytes=cap)
    assert r.signatures_loaded == ROWS
    assert 0 < r.band_pages_loaded < r.band_pages_total
    assert r.cache_bytes <= cap and not r.complete
    assert answers(uri) == lance_answers(uri)
    assert cache_usage() <= cap


def test_prewarm_capacity_zero_loads_nothing(three_segments):
    r = prewarm(three_segments, "text", cache_bytes=0)
    assert (r.bytes_loaded, r.signatures_loaded, r.band_pages_loaded, r.cache_bytes) == (0, 0, 0, 0)
    assert answers(three_segments) == lance_answers(three_segments)


def test_prewarm_errors(tmp_path, three_segments):
    uri = str(tmp_path / "plain.lance")
    lance.write_dataset(pa.table({"text": ["a b c"]}), uri)
    with pytest.raises(IndexNotFoundError, match="minhash_build"):
        prewarm(uri, "text")
    for bad in (-1, "1 parsec", 1.5, True):
        with pytest.raises(InvalidParameterError, match="cache capacity"):
            prewarm(three_segments, "text", cache_bytes=bad)
    assert cache_capacity() == DEFAULT_CACHE_BYTES


def test_capacity_from_the_environment(three_segments):
    code = ("from lance_minhash_sql.lifecycle.prewarm import prewarm; "
            f"r = prewarm({three_segments!r}, 'text'); "
            "print(r.cache_capacity, r.cache_bytes <= r.cache_capacity, r.complete)")
    env = {**os.environ, CACHE_ENV: "300K",
           "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(lms.__file__)))}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(300_000), "True", "False"]


def test_sql_minhash_prewarm(three_segments):
    uri = three_segments
    con = lms.connect()
    row = con.sql(f"SELECT segments, signatures_loaded, complete, cache_capacity, bytes_loaded > 0 "
                  f"FROM minhash_prewarm('{uri}', 'text')").fetchall()
    assert row == [(3, ROWS, True, DEFAULT_CACHE_BYTES, True)]
    clear_cache()
    row = con.sql(f"SELECT cache_capacity, cache_bytes <= cache_capacity, complete "
                  f"FROM minhash_prewarm('{uri}', 'text', cache_bytes := '400KiB')").fetchall()
    assert row == [(400 << 10, True, False)]
    row = con.sql(f"SELECT cache_capacity FROM minhash_prewarm('{uri}', 'text', cache_bytes := 2000000)").fetchall()
    assert row == [(2_000_000,)]
    for bad, msg in (("NULL, 'text'", "dataset is NULL"), (f"'{uri}', NULL", "column is NULL"),
                     (f"'{uri}', 'text', cache_bytes := 'lots'", "cache_bytes := 'lots'")):
        with pytest.raises(Exception, match=msg):
            con.sql(f"SELECT * FROM minhash_prewarm({bad})").fetchall()


def test_prewarm_loads_a_prefix_of_a_segment_that_does_not_fit(three_segments):
    uri = three_segments
    cap = 2000 * SIG_BYTES
    r = prewarm(uri, "text", cache_bytes=cap)
    entries = open_index(uri, "text").segment_entries()
    assert 1500 < r.signatures_loaded < 2000 and r.cache_bytes <= cap
    assert entries[0].docs.used == r.signatures_loaded and not entries[0].docs.full
    before = reads(uri)
    assert answers(uri) == lance_answers(uri)
    assert reads(uri) > before  # the rest is read as queries need it
    assert cache_usage() <= cap
