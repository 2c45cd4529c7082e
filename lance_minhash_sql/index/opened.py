"""An opened MinHash LSH index: one dataset version and column.

:func:`open_index` is the one call a search opens its dataset through. It opens the
latest version (``io/handles.py: open_version``: the URI, the version and the storage
options, which no other record holds) and returns the :class:`OpenedIndex` kept for that
version, column and storage options in one bounded cache of :mod:`..runtime.cache`
(emptied with the segment data by :func:`clear_cache`): a version never changes, so its
manifest is read once. On a version's first use it checks the column (a string column,
``io/scan.py: text_field``), reads its index as the manifest records it
(``io/manifest.py: column_index``; a column without segments is refused) and turns that
into the opened index: each segment's cache entry (:mod:`.entries`: files opened and
validated by ``io/segments.py: open_segment``), the parameters (identical across
segments, or the index is refused), the fragments the segments cover and the dataset's
current fragments (the rest are *unindexed* and are searched by signing them on the
fly), ``io/liveness.py: Liveness``, which tells deleted row ids from live ones, the
signer of the index's parameters and the fetcher of result rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.errors import CorruptIndexError, UnsupportedIndexError
from lance_minhash_sql.core.params import SIGNATURE_VERSION, MinHashParams
from lance_minhash_sql.core.tuning import MAX_OPENED_INDEXES
from lance_minhash_sql.index.entries import DROPPED_ROWID, SegmentEntry, flat_entry, needs_remap, segment_entry
from lance_minhash_sql.index.stores import BandStore, DocStore
from lance_minhash_sql.index.sign import Signer, signer_for
from lance_minhash_sql.io.handles import DatasetVersion, open_version
from lance_minhash_sql.io.liveness import Liveness
from lance_minhash_sql.io.manifest import ColumnIndex, FragReuse, SegmentInfo, column_index
from lance_minhash_sql.io.scan import text_field
from lance_minhash_sql.io.takes import RowFetcher
from lance_minhash_sql.runtime.cache import (CACHE_ENV, DEFAULT_CACHE_BYTES, ByteCache, CacheInfo, cache_capacity,
                                             cache_info, cache_usage, clear_cache, set_cache_capacity)

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "CACHE_ENV",
    "CacheInfo",
    "cache_capacity",
    "set_cache_capacity",
    "cache_usage",
    "cache_info",
    "clear_cache",
    "BandStore",
    "DocStore",
    "SegmentEntry",
    "Liveness",
    "OpenedIndex",
    "SearchView",
    "open_index",
    "needs_remap",
    "DROPPED_ROWID",
]


# --------------------------------------------------------------------------- opened index


@dataclass
class OpenedIndex:
    """A column's MinHash LSH index in one dataset version: the version as
    ``io/handles.py`` opened it (:attr:`handle`, which alone holds the storage options), the
    index's parameters and segments, and what a search reads beside them, resolved once
    here: the signer of those parameters (``index/sign.py``), which rows count
    (:attr:`liveness`) and the row fetcher; the version's schema is the handle's."""

    handle: DatasetVersion
    column: str
    params: MinHashParams
    segments: tuple[SegmentInfo, ...]
    covered: frozenset
    fragments: tuple[int, ...]
    unindexed: tuple[int, ...]
    liveness: Liveness
    signer: Signer = field(repr=False)  # the index's parameters resolved for signing (queries, unindexed rows)
    reuse: FragReuse | None = None  # a deferred compaction remap to apply to old segments
    fetcher: RowFetcher | None = field(default=None, repr=False)  # the user's columns of result rows

    @property
    def uri(self) -> str:
        return self.handle.uri

    @property
    def ds(self):
        return self.handle.ds

    @property
    def version(self) -> int:
        return self.handle.version

    @property
    def storage_options(self) -> dict | None:
        return self.handle.storage_options

    @property
    def schema(self) -> pa.Schema:
        """The dataset version's schema (``io/handles.py: DatasetVersion.schema``)."""
        return self.handle.schema

    def segment_entries(self) -> list[SegmentEntry]:
        """Each segment's cache entry (re-opened if it was evicted)."""
        return [segment_entry(self.handle, info, self.reuse) for info in self.segments]

    def unindexed_entry(self) -> SegmentEntry | None:
        if not self.unindexed:
            return None
        return flat_entry(self, self.unindexed)

    def search_view(self, fast_search: bool = False, filter: str | None = None) -> "SearchView":
        """Everything a search reads of this index, in one call: the signer, the
        segments to search (with the unindexed rows as one more unless ``fast_search``)
        and which candidate rows count. A bad ``filter`` is refused here, whether or not
        any row is a candidate."""
        if filter is not None:
            self.liveness.check_filter(filter)
        flat = [] if fast_search or not self.unindexed else [self.unindexed_entry()]
        return SearchView(self.signer, self.segment_entries() + flat, self.liveness, filter,
                          self.liveness.checks(filter))

    @property
    def stable_row_ids(self) -> bool:
        return self.liveness.stable


class SearchView:
    """What a search reads of an opened index (:meth:`OpenedIndex.search_view`): the index's
    signer, the segments to search, and which candidate rows count: live and, with a
    ``filter``, matching it (``checked`` False: every row counts, nothing to ask)."""

    __slots__ = ("signer", "entries", "liveness", "filter", "checked")

    def __init__(self, signer: Signer, entries: list[SegmentEntry], liveness: Liveness,
                 filter: str | None, checked: bool):
        self.signer = signer
        self.entries = entries
        self.liveness = liveness
        self.filter = filter
        self.checked = checked

    def ok_of(self, ids: np.ndarray) -> np.ndarray:
        """``bool[n]``: which candidate row ids count."""
        if not self.checked:
            return np.ones(ids.size, dtype=np.bool_)
        return self.liveness.rows_ok(ids, self.filter)


_opened = ByteCache.for_objects("opened indexes", MAX_OPENED_INDEXES)  # (uri, version, column, options) -> index


def open_index(dataset, column: str, storage_options=None) -> OpenedIndex:
    """The MinHash LSH index of ``column`` in the latest version of ``dataset`` (a URI, or
    a ``LanceDataset`` as given): the one kept for that version, else, on the version's
    first use, the index read from its manifest and segments (:func:`_read_index`).
    ``io/manifest.py: missing_index``'s error when the column has no segment, a
    :class:`DatasetError` when it is not a string column of the version."""
    handle = open_version(dataset, storage_options)
    key = (handle.uri, handle.version, column, handle.options_key)
    hit = _opened.get(key)  # each get and put locks the cache; two first calls may both read
    if hit is not None:
        return hit
    text_field(handle.ds, column, handle.uri)
    layout = column_index(handle.ds, column, handle.uri)
    opened = _read_index(handle, column, layout)
    _opened.put(key, opened)
    return opened


def _read_index(handle: DatasetVersion, column: str, layout: ColumnIndex) -> OpenedIndex:
    """The index of ``column`` whose segments the version ``handle`` records (``layout``):
    each segment's cache entry, the parameters they share (:func:`_index_params`), which
    rows count, and the signer of those parameters."""
    entries = [segment_entry(handle, info, layout.reuse) for info in layout.segments]
    params = _index_params(handle.uri, column, layout, [entry.params for entry in entries])
    covered = frozenset().union(*(s.fragment_ids for s in layout.segments))
    liveness = Liveness(handle.ds, covered)
    if any(needs_remap(info, layout.reuse) for info in layout.segments):
        liveness.trivial = False  # rows a compaction dropped carry DROPPED_ROWID
    fragments = tuple(int(f) for f in liveness.current)
    unindexed = tuple(f for f in fragments if f not in covered)
    return OpenedIndex(handle, column, params, layout.segments, covered, fragments, unindexed, liveness,
                       signer_for(params), layout.reuse, RowFetcher(handle.ds, liveness.stable))


def _index_params(uri: str, column: str, layout: ColumnIndex, files: list[MinHashParams]) -> MinHashParams:
    """The index's parameters: the segments' files (``files``, in manifest order) must all
    carry the same ones, and those the manifest records for each segment, as Lance
    requires ("index file details ... do not match index details")."""
    params = files[0]
    for info, other in zip(layout.segments[1:], files[1:]):
        if other != params:
            raise UnsupportedIndexError(
                f"the MinHash LSH index on {column!r} of {uri!r} has segments with different parameters: "
                f"segment {layout.segments[0].uuid} vs segment {info.uuid}: {'; '.join(params.differences(other))}. "
                f"Lance refuses such an index too; rebuild it with minhash_build('{uri}', '{column}', replace := true)")
    for info, path in zip(layout.segments, layout.dirs):
        details = info.details
        if not details:
            continue
        version = details.get("signature_version") or 0
        if version != SIGNATURE_VERSION:
            raise UnsupportedIndexError(
                f"the MinHash LSH index on {column!r} of {uri!r} was built with signature_version {version}, "
                f"but this package computes version {SIGNATURE_VERSION} (pylance 14.0.x); rebuild it with "
                f"minhash_build('{uri}', '{column}')")
        diffs = [f"{key}: files {getattr(params, key)!r}, manifest {details[key]!r}"
                 for key in ("num_hashes", "num_bands", "shingle_size")
                 if key in details and details[key] != getattr(params, key)]
        recorded = details.get("tokenizer") or {}
        diffs += [f"tokenizer.{key}: files {value!r}, manifest {recorded[key]!r}"
                  for key, value in params.tokenizer.to_dict().items() if key in recorded and recorded[key] != value]
        if diffs:
            raise CorruptIndexError(
                f"the files of segment {info.uuid} ({path}) were written with parameters other than the "
                f"index details in the manifest ({'; '.join(diffs)}); Lance refuses them too. Rebuild the "
                f"index with minhash_build('{uri}', '{column}', replace := true)")
    return params
