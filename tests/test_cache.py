"""runtime/cache.py: one bounded, byte-accounted cache type behind every cache of the
package, and one clear_cache() that empties them all."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lance_minhash_sql as lms
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.diagnostics.report import cached_report
from lance_minhash_sql.faces.corpus import CorpusSpec, generate_batches
from lance_minhash_sql.query.topk import search
from lance_minhash_sql.runtime import cache as cache_mod
from lance_minhash_sql.runtime.cache import OBJECT_BYTES, ByteCache, clear_cache
from lance_minhash_sql.selfjoin.shards import pair_shards


class Value:
    def __init__(self):
        self.detached = 0

    def detach(self):
        self.detached += 1


def test_usage_never_exceeds_the_capacity_and_evicts_least_recent():
    cache = ByteCache("t", 100)
    a, b, c = Value(), Value(), Value()
    assert cache.put("a", a, 40) and cache.put("b", b, 40)
    assert cache.get("a") is a  # a is now the most recent
    assert cache.put("c", c, 40)  # evicts b
    assert "b" not in cache and b.detached == 1 and cache.usage == 80
    assert not cache.put("huge", Value(), 101) and cache.usage == 80
    assert cache.reserve("a", 20) and cache.usage == 100 and cache.size_of("a") == 60
    assert not cache.reserve("a", 50)  # would need c and a's own room: refused, nothing lost
    assert cache.usage == 100 and "c" in cache
    cache.settle("a", 10)
    assert cache.size_of("a") == 10 and cache.usage == 50
    cache.set_capacity(30)
    assert cache.usage <= 30 and "c" not in cache and c.detached == 1
    info = cache.info()
    assert info.capacity == 30 and info.usage == cache.usage and info.evictions == 2


def test_object_caches_charge_each_entry():
    cache = ByteCache.for_objects("objects", 3)
    for i in range(5):
        cache.put(i, object())
    assert len(cache) == 3 and cache.usage == 3 * OBJECT_BYTES and 0 not in cache and 4 in cache
    with pytest.raises(TypeError):
        ByteCache("sized", 100).put("k", object())


def test_clear_cache_empties_every_cache(tmp_path):
    uri = str(tmp_path / "c.lance")
    table = pa.Table.from_batches(list(generate_batches(2000, CorpusSpec(seed=4))))
    import lance

    lance.write_dataset(table, uri, max_rows_per_file=1500)
    build_index(uri, "text")
    lance.dataset(uri).delete("id < 5")  # the opened version differs from the index's
    con = lms.connect()
    q = table.column("text")[100].as_py()
    search(uri, "text", q, 5)
    con.execute("SELECT * FROM minhash_search(?, 'text', ?, 5)", [uri, q]).fetchall()
    con.execute("SELECT count(*) FROM minhash_pairs(?, 'text', 0.9)", [uri]).fetchall()
    pair_shards(uri, "text", 0.9)
    cached_report(uri, "text", sample=50)
    caches = list(cache_mod._REGISTRY)
    names = {c.name for c in caches if len(c)}
    assert {"segments", "opened indexes", "opened datasets", "self-join plans", "reports",
            "SQL result layouts", "SQL self-join plans"} <= names, names
    clear_cache()
    assert all(len(c) == 0 and c.usage == 0 for c in cache_mod._REGISTRY)


def test_a_capped_cache_bounds_what_the_block_adds_and_leaves_the_process_cache_alone(tmp_path):
    from lance_minhash_sql.runtime.cache import cache_capacity, cache_usage, capped_cache, segment_cache

    uri = str(tmp_path / "c.lance")
    table = pa.Table.from_batches(list(generate_batches(3000, CorpusSpec(seed=6))))
    import lance

    lance.write_dataset(table, uri)
    build_index(uri, "text")
    clear_cache()
    capacity = cache_capacity()
    q = table.column("text")[10].as_py()
    want = search(uri, "text", q, 5)
    list(lms.pairs(uri, "text", 0.8))
    held = cache_usage()  # the search's pages and signatures
    assert held > 4096
    with capped_cache(1024):
        assert cache_capacity() == capacity and cache_usage() == held  # nothing let go, no capacity changed
        clear_cache()
        assert search(uri, "text", q, 5).equals(want)  # answered with ranged reads
        list(lms.pairs(uri, "text", 0.8))
        assert cache_usage() <= 1024
        clear_cache()
        assert search(uri, "text", q, 5).equals(want)
        assert cache_usage() <= 1024
        with capped_cache(1 << 30):  # an inner block is bounded by the outer one too
            clear_cache()
            assert search(uri, "text", q, 5).equals(want)
            assert cache_usage() <= 1024
    assert cache_capacity() == capacity and segment_cache().bounds == []
    clear_cache()
    assert search(uri, "text", q, 5).equals(want)
    assert cache_usage() > 1024  # the bound ended with the block
    with pytest.raises(RuntimeError):
        with capped_cache(0):
            raise RuntimeError("a failing task")
    assert segment_cache().bounds == []  # removed on failure too
