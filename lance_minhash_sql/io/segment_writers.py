"""Writing index segment files: ``signatures.lance`` and ``bands.lance`` in the format
``io/segments.py`` describes and reads (the schemas, their field metadata and the schema
metadata are written here)."""

from __future__ import annotations

import os
from types import MappingProxyType

import numpy as np
import pyarrow as pa
from lance.file import LanceFileWriter

from lance_minhash_sql.core.errors import CorruptIndexError
from lance_minhash_sql.core.lance_format import page_ends
from lance_minhash_sql.core.params import DEFAULT_PAGE_ROWS, INDEX_VERSION, MinHashParams
from lance_minhash_sql.io.details import details_hex
from lance_minhash_sql.io.segments import (BANDS_FILE, FILE_VERSION, KEY_DETAILS, KEY_NUM_DOCS, KEY_PAGE_ROWS,
                                           KEY_PAGE_TABLE, KEY_VERSION, SIGNATURES_FILE)
from lance_minhash_sql.kernels.config import numba_loaded
from lance_minhash_sql.kernels.sort import is_sorted_pairs

__all__ = ["signatures_schema", "BANDS_SCHEMA", "SignaturesWriter", "BandsWriter"]

_UNCOMPRESSED = MappingProxyType({"lance-encoding:compression": "none"})


def signatures_schema(num_hashes: int) -> pa.Schema:
    return pa.schema([
        pa.field("_rowid", pa.uint64(), nullable=False),
        pa.field("signature", pa.list_(pa.field("item", pa.uint16(), nullable=False), num_hashes),
                 nullable=False,
                 metadata={"lance-encoding:structural-encoding": "fullzip", **_UNCOMPRESSED}),
    ])


BANDS_SCHEMA = pa.schema([
    pa.field("band_key", pa.uint64(), nullable=False, metadata=_UNCOMPRESSED),
    pa.field("doc_id", pa.uint32(), nullable=False, metadata=_UNCOMPRESSED),
])


def _writer(path: str, schema: pa.Schema, storage_options) -> LanceFileWriter:
    return LanceFileWriter(path, schema, version=FILE_VERSION, storage_options=storage_options)


class SignaturesWriter:
    """Streams ``(_rowid, signature)`` batches into ``signatures.lance``."""

    def __init__(self, seg_dir: str, params: MinHashParams, storage_options=None):
        self.path = os.path.join(seg_dir, SIGNATURES_FILE)
        self.params = params
        self.schema = signatures_schema(params.num_hashes)
        self.num_docs = 0
        self._w = _writer(self.path, self.schema, storage_options)

    def write(self, rowids: np.ndarray, signatures: np.ndarray) -> None:
        n, k = signatures.shape
        if k != self.params.num_hashes or len(rowids) != n:
            raise ValueError(f"signature batch shape {signatures.shape} / {len(rowids)} row ids does not fit k={self.params.num_hashes}")
        if n == 0:
            return
        values = pa.array(np.ascontiguousarray(signatures, dtype=np.uint16).reshape(-1), type=pa.uint16())
        fsl = pa.FixedSizeListArray.from_arrays(values, type=self.schema.field("signature").type)
        self._w.write_batch(pa.record_batch([pa.array(rowids, type=pa.uint64()), fsl], schema=self.schema))
        self.num_docs += n

    def close(self) -> None:
        if self.num_docs == 0:  # an empty segment still has one (empty) batch
            empty = self.schema.empty_table()
            self._w.write_batch(empty)
        self._w.add_schema_metadata(KEY_DETAILS, details_hex(self.params))
        self._w.add_schema_metadata(KEY_VERSION, str(INDEX_VERSION))
        self._w.close()
        self.size_bytes = int(self._w.size_bytes)


def _sorted(keys: np.ndarray, docs: np.ndarray) -> bool:
    """Whether ``(keys[i], docs[i])`` is strictly ascending: by the kernel once numba is
    loaded (one pass without the GIL and without temporaries: the writer runs on a
    thread), by numpy before (a small build signed by numpy, ``index/numpy_sign.py``)."""
    if numba_loaded():
        return is_sorted_pairs(keys, docs)
    k0, k1 = keys[:-1], keys[1:]
    return bool(np.all((k0 < k1) | ((k0 == k1) & (docs[:-1] < docs[1:]))))


class BandsWriter:
    """Streams sorted ``(band_key, doc_id)`` runs into ``bands.lance`` and builds the page table.

    Chunks must arrive in global ``(band_key, doc_id)`` order; this is checked, because an
    unsorted bands file gives wrong answers silently in Lance.
    """

    def __init__(self, seg_dir: str, params: MinHashParams, num_docs: int,
                 page_rows: int = DEFAULT_PAGE_ROWS, storage_options=None):
        self.path = os.path.join(seg_dir, BANDS_FILE)
        self.params = params
        self.num_docs = num_docs
        self.page_rows = page_rows
        self.rows = 0
        self._pages: list[np.ndarray] = []
        self._last = (-1, -1)
        self._w = _writer(self.path, BANDS_SCHEMA, storage_options)

    def write(self, keys: np.ndarray, docs: np.ndarray) -> None:
        n = len(keys)
        if n == 0:
            return
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        docs = np.ascontiguousarray(docs, dtype=np.uint32)
        first = (int(keys[0]), int(docs[0]))
        if first <= self._last or not _sorted(keys, docs):
            raise CorruptIndexError(f"{self.path}: band rows are not sorted by (band_key, doc_id)")
        self._last = (int(keys[-1]), int(docs[-1]))
        self._pages.append(keys[page_ends(self.rows, n, self.page_rows)])
        self.rows += n
        self._tail_key = keys[-1]
        self._w.write_batch(pa.record_batch([pa.array(keys), pa.array(docs)], schema=BANDS_SCHEMA))

    def close(self) -> None:
        expected = self.num_docs * self.params.num_bands
        if self.rows != expected:
            raise CorruptIndexError(f"{self.path}: {self.rows} band rows written, expected {expected}")
        if self.rows == 0:
            self._w.write_batch(BANDS_SCHEMA.empty_table())
        pages = list(self._pages)
        if self.rows % self.page_rows:
            pages.append(np.array([self._tail_key], dtype=np.uint64))
        table = np.concatenate(pages).astype("<u8") if pages else np.empty(0, "<u8")
        buf = self._w.add_global_buffer(table.tobytes())
        meta = {KEY_DETAILS: details_hex(self.params), KEY_VERSION: str(INDEX_VERSION),
                KEY_NUM_DOCS: str(self.num_docs), KEY_PAGE_ROWS: str(self.page_rows), KEY_PAGE_TABLE: str(buf)}
        for k, v in meta.items():
            self._w.add_schema_metadata(k, v)
        self._w.close()
        self.size_bytes = int(self._w.size_bytes)
