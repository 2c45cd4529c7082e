"""index/opened.py: open_index, the one call a search opens its dataset through, kept per version."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest
from conftest import build_native_index

from lance_minhash_sql.core.errors import DatasetError, IndexNotFoundError
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.index import opened as opened_mod
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.io import manifest
from lance_minhash_sql.runtime.cache import clear_cache, process_caches

PARAMS = MinHashParams(num_hashes=16, num_bands=4, shingle_size=2)


def _table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "text": pa.array([f"row {i} of the corpus with words {i % 7} {i % 11}" for i in range(start, start + n)], pa.string())})


def test_one_call_gives_the_version_the_column_and_its_segments_read_once_per_version(tmp_path, monkeypatch):
    uri = str(tmp_path / "c.lance")
    build_native_index(uri, _table(300), PARAMS)
    clear_cache()
    reads = []
    real = manifest.column_index
    monkeypatch.setattr(opened_mod, "column_index", lambda *a, **k: reads.append(1) or real(*a, **k))
    opened = open_index(uri, "text")
    ds = lance.dataset(uri)
    assert (opened.uri, opened.version, opened.column) == (uri, ds.version, "text")
    assert [s.uuid for s in opened.segments] == [str(s.uuid) for s in ds.describe_indices()[0].segments]
    assert opened.schema == ds.schema and opened.storage_options is None
    assert opened.unindexed == () and opened.params == PARAMS
    assert open_index(uri, "text") is opened and len(reads) == 1  # the manifest is read once per version
    lance.write_dataset(_table(10, 300), uri, mode="append")
    newer = open_index(uri, "text")
    assert newer.version == opened.version + 1 and len(reads) == 2
    assert newer.segments == opened.segments and len(newer.unindexed) == 1  # the appended fragment is unindexed
    held = {name: n for name, unit, n, _ in process_caches() if unit == "bytes"}
    assert held["opened indexes"] > 0  # registered, so clear_cache() sees it
    assert "opened indexed columns" not in held  # one cache per opened version, not two
    clear_cache()
    assert open_index(uri, "text") is not newer and len(reads) == 3


def test_a_column_without_an_index_or_a_string_type_is_refused(tmp_path):
    uri = str(tmp_path / "plain.lance")
    lance.write_dataset(_table(20), uri)
    with pytest.raises(IndexNotFoundError, match=r"column 'text' .* has no MinHash LSH index.*minhash_build"):
        open_index(uri, "text")
    with pytest.raises(DatasetError, match="has type int64, but MinHash needs a string column"):
        open_index(uri, "id")
    with pytest.raises(DatasetError, match="'nope' is not in dataset"):
        open_index(uri, "nope")
    empty = str(tmp_path / "empty.lance")
    lance.write_dataset(_table(0), empty)
    with pytest.raises(DatasetError, match="has no rows, so column 'text' has no MinHash LSH index"):
        open_index(empty, "text")
