"""A text column of a dataset version with its MinHash LSH index, as a search opens it.

:func:`open_column` is the one call the index layer makes to open a dataset for a
search (``index/opened.py``): the latest version with the storage options its files need
(``io/handles.py: open_version``), the column checked to be a string column
(``io/scan.py: text_field``), its index as the manifest records it
(``io/manifest.py: column_index``; a column without segments is refused), and the
version's schema. What it returns is kept per version in a bounded cache of
``runtime/cache.py`` (emptied by ``clear_cache()``): a version never changes, so its
manifest is read once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lance_minhash_sql.core.tuning import MAX_HANDLES
from lance_minhash_sql.io.handles import DatasetVersion, open_version
from lance_minhash_sql.io.manifest import ColumnIndex, column_index
from lance_minhash_sql.io.scan import text_field
from lance_minhash_sql.runtime.cache import ByteCache

__all__ = ["IndexedColumn", "open_column"]


@dataclass(frozen=True)
class IndexedColumn:
    """A string column of one dataset version and its MinHash LSH index: the version as
    ``io/handles.py`` opened it (:attr:`handle`, which alone holds the storage options),
    the column's name, its index as the manifest records it (:attr:`index`: segments in
    manifest order, their folders, a pending compaction remap) and the version's schema."""

    handle: DatasetVersion
    column: str
    index: ColumnIndex
    schema: pa.Schema = field(repr=False)
    # (uri, version, column, storage options key): names this column's index in caches
    key: tuple[str, int, str, Any] = field(repr=False)


_columns = ByteCache.for_objects("opened indexed columns", MAX_HANDLES)  # IndexedColumn.key -> IndexedColumn


def open_column(dataset, column: str, storage_options=None) -> IndexedColumn:
    """``column`` of the latest version of ``dataset`` (a URI, or a ``LanceDataset`` as
    given) with its MinHash LSH index; ``io/manifest.py: missing_index``'s error when the
    column has no segment, a :class:`DatasetError` when it is not a string column of the
    version."""
    handle = open_version(dataset, storage_options)
    key = (handle.uri, handle.version, column, handle.options_key)
    hit = _columns.get(key)  # each get and put locks the cache; two first calls may both read
    if hit is not None:
        return hit
    text_field(handle.ds, column, handle.uri)
    index = column_index(handle.ds, column, handle.uri)
    opened = IndexedColumn(handle, column, index, handle.ds.schema, key)
    _columns.put(key, opened)
    return opened

