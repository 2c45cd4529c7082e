"""Opening Lance datasets and streaming a text column with its row ids."""

from __future__ import annotations

from typing import Iterator

import lance
import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.errors import DatasetError
from lance_minhash_sql.core.tuning import SCAN_BATCH_ROWS
from lance_minhash_sql.io.store import absolute_uri, check_uri, open_error
from lance_minhash_sql.io.takes import take_rows

__all__ = ["open_dataset", "fragments_of", "uri_of", "version_of", "schema_of",
           "row_count", "fragment_objects", "fragment_rows", "text_field", "scan_text", "read_rows", "take_offsets"]


def fragments_of(ds, fragment_ids) -> tuple[list, tuple]:
    """The fragments ``fragment_ids`` of ``ds``, and a key naming their data files (it
    changes when a fragment is rewritten)."""
    frags = [ds.get_fragment(f) for f in fragment_ids]
    return frags, tuple((f.fragment_id, tuple(d.path for d in f.data_files())) for f in frags)


def open_dataset(uri: str, storage_options: dict | None = None, version: int | None = None) -> "lance.LanceDataset":
    """``lance.dataset(uri)`` with a clear error when it is missing or unreadable; a local
    path is opened absolute (``io/store.py:absolute_uri``), so the dataset's ``uri`` names it
    from any working directory."""
    if not isinstance(uri, str) or not uri:
        raise DatasetError(f"dataset={uri!r} must be a non-empty path or URI of a Lance dataset")
    check_uri(uri)
    try:
        return lance.dataset(absolute_uri(uri), version=version, storage_options=storage_options)
    except (ValueError, OSError, RuntimeError) as exc:
        raise open_error(uri, exc, storage_options) from None


# What a dataset version says about itself: the index layer asks through these, never the
# LanceDataset object (tests/test_layers.py holds every module outside io/ to that).


def uri_of(ds: "lance.LanceDataset") -> str:
    """The dataset's URI, a local path made absolute (``io/store.py:absolute_uri``: a
    ``LanceDataset`` opened by the caller keeps the path it was opened with)."""
    return absolute_uri(str(ds.uri)).rstrip("/")


def version_of(ds: "lance.LanceDataset") -> int:
    """The number of the version ``ds`` is checked out at."""
    return int(ds.version)


def schema_of(ds: "lance.LanceDataset") -> pa.Schema:
    """The dataset version's Arrow schema."""
    return ds.schema


def row_count(ds: "lance.LanceDataset") -> int:
    """Live rows of the dataset version."""
    return int(ds.count_rows())


def fragment_objects(ds: "lance.LanceDataset", fragment_ids) -> list:
    """The fragments ``fragment_ids`` of the version, for :func:`scan_text` and the writers."""
    return [ds.get_fragment(int(f)) for f in fragment_ids]


def fragment_rows(ds: "lance.LanceDataset", fragment_ids) -> int:
    """Live rows of the fragments ``fragment_ids``."""
    return sum(int(f.count_rows()) for f in fragment_objects(ds, fragment_ids))


def text_field(ds: "lance.LanceDataset", column: str, uri: str = "") -> pa.Field:
    """The column's Arrow field, required to be a string type."""
    if not isinstance(column, str) or not column:
        raise DatasetError(f"column={column!r} must be the name of a string column")
    schema = ds.schema
    if column not in schema.names:
        raise DatasetError(
            f"column {column!r} is not in dataset {uri or ds.uri!r}; its columns are {schema.names}"
        )
    field = schema.field(column)
    t = field.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)):
        raise DatasetError(
            f"column {column!r} of dataset {uri or ds.uri!r} has type {t}, but MinHash needs a string "
            "column; index a text column or cast this one to string"
        )
    return field


def scan_text(ds: "lance.LanceDataset", column: str, *, batch_rows: int = SCAN_BATCH_ROWS,
              fragments=None, batch_readahead: int | None = None, fragment_readahead: int | None = None,
              io_buffer_size: int | None = None) -> Iterator[tuple[np.ndarray, pa.Array]]:
    """Yield ``(row_ids uint64, texts)`` in scan order (fragment order, then offset).

    Row ids are row addresses, or stable row ids when the dataset has them: exactly what
    Lance's own index build records.

    ``batch_readahead`` (decoded batches queued ahead), ``fragment_readahead`` (fragments
    read at once) and ``io_buffer_size`` (bytes of reads in flight) bound the scanner's
    own memory; ``None`` keeps Lance's defaults (in pylance 14: 2 GiB of I/O buffer and
    several fragments ahead, hundreds of MB in flight when the consumer is slower than
    the scan).
    """
    opts = {k: v for k, v in (("batch_readahead", batch_readahead), ("fragment_readahead", fragment_readahead),
                              ("io_buffer_size", io_buffer_size)) if v is not None}
    scanner = ds.scanner(columns=[column], with_row_id=True, batch_size=batch_rows,
                         fragments=fragments, scan_in_order=True, **opts)
    for batch in scanner.to_batches():
        if batch.num_rows == 0:
            continue
        texts = batch.column(column)
        rowids = batch.column("_rowid").to_numpy()
        del batch
        yield rowids, texts


def read_rows(uri: str, columns: list[str] | None = None, storage_options: dict | None = None) -> pa.Table:
    """The dataset's rows (every column, or ``columns``) with their ``_rowid``, whole."""
    ds = open_dataset(uri, storage_options)
    names = ds.schema.names
    if columns is not None:
        missing = [c for c in columns if c not in names]
        if missing:
            raise DatasetError(f"column(s) {missing} are not in dataset {uri!r}; its columns are {names}")
    return ds.to_table(columns=columns, with_row_id=True)


def fragment_ids(ds: "lance.LanceDataset") -> list[int]:
    """The ids of the dataset version's fragments, in order."""
    return [int(f.fragment_id) for f in ds.get_fragments()]


def fragment_table(ds: "lance.LanceDataset", fragment_id: int, columns: list[str]) -> pa.Table:
    """One fragment's live rows (``columns``) with their ``_rowid``, in row order."""
    return ds.get_fragment(int(fragment_id)).to_table(columns=columns, with_row_id=True)


def take_texts(ds: "lance.LanceDataset", column: str, rowids: np.ndarray, uri: str = "") -> pa.Array:
    """The ``column`` values of sorted unique ``rowids`` (as ``large_string``), in that order;
    :class:`DatasetError` if a row is gone (the dataset changed under a running job)."""
    t = take_rows(ds, rowids, [column, "_rowid"], "a read of its texts", uri or None)
    return t.column(column).combine_chunks().cast(pa.large_string())


def take_offsets(ds: "lance.LanceDataset", column: str, offsets: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """``(row ids uint64, texts large_string)`` of the live rows at ``offsets`` (positions
    among the version's live rows, in scan order: deleted rows are skipped), in that order."""
    if offsets.size == 0:
        return np.empty(0, np.uint64), pa.array([], pa.large_string())
    t = ds.take(np.asarray(offsets, dtype=np.int64).tolist(), columns=[column, "_rowid"])
    return (t.column("_rowid").to_numpy().astype(np.uint64, copy=False),
            t.column(column).combine_chunks().cast(pa.large_string()))
