"""io/column.py: open_column, the one call a search opens its dataset through."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest
from conftest import build_native_index

from lance_minhash_sql.core.errors import DatasetError, IndexNotFoundError
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.io import manifest
from lance_minhash_sql.io.column import open_column
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
    real = manifest.minhash_segments
    monkeypatch.setattr(manifest, "minhash_segments", lambda *a, **k: reads.append(1) or real(*a, **k))
    col = open_column(uri, "text")
    ds = lance.dataset(uri)
    assert (col.handle.uri, col.handle.version, col.column) == (uri, ds.version, "text")
    assert [s.uuid for s in col.index.segments] == [str(s.uuid) for s in ds.describe_indices()[0].segments]
    assert col.schema == ds.schema and col.handle.storage_options is None
    assert open_column(uri, "text") is col and len(reads) == 1  # the manifest is read once per version
    lance.write_dataset(_table(10, 300), uri, mode="append")
    newer = open_column(uri, "text")
    assert newer.handle.version == col.handle.version + 1 and len(reads) == 2
    assert newer.index.segments == col.index.segments  # the appended fragment is unindexed
    held = {name: n for name, unit, n, _ in process_caches() if unit == "bytes"}
    assert held["opened indexed columns"] > 0  # registered, so clear_cache() sees it
    clear_cache()
    assert open_column(uri, "text") is not newer


def test_a_column_without_an_index_or_a_string_type_is_refused(tmp_path):
    uri = str(tmp_path / "plain.lance")
    lance.write_dataset(_table(20), uri)
    with pytest.raises(IndexNotFoundError, match=r"column 'text' .* has no MinHash LSH index.*minhash_build"):
        open_column(uri, "text")
    with pytest.raises(DatasetError, match="has type int64, but MinHash needs a string column"):
        open_column(uri, "id")
    with pytest.raises(DatasetError, match="'nope' is not in dataset"):
        open_column(uri, "nope")
    empty = str(tmp_path / "empty.lance")
    lance.write_dataset(_table(0), empty)
    with pytest.raises(DatasetError, match="has no rows, so column 'text' has no MinHash LSH index"):
        open_column(empty, "text")
