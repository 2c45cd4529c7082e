"""Rows of a dataset version by row id: the one take the index layer uses.

``take_rows`` asks Lance for the given rows (pylance's ``_take_rows``, which accepts row
ids: row addresses, or stable row ids) and checks that every asked row came back, in
order: a row deleted between a search and its fetch makes the caller's answer wrong, so
it is an error naming the dataset, never a shorter result.

:class:`RowFetcher` serves a search's few result rows from one opened dataset version.
When the row ids are row addresses that all lie in one fragment without a deletion file,
it asks that fragment through a kept ``FragmentSession`` of the asked columns (Lance's
reader for repeated takes of the same columns, cheaper than a dataset take, which plans
the projection and maps the addresses on every call). A
fragment session takes rows by their position among the fragment's live rows, which is
the row address's offset only when nothing in the fragment is deleted; every other case
(stable row ids, several fragments, deletions, a session busy in another thread) is one
``take_rows``.
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.errors import DatasetError
from lance_minhash_sql.core.tuning import MAX_TAKE

__all__ = ["MAX_TAKE", "take_rows", "take_expression", "RowFetcher"]



def take_rows(ds, rowids, columns: list[str], what: str, uri: str | None = None) -> pa.Table:
    """``columns`` of the rows ``rowids`` (in that order) of dataset version ``ds``, plus
    ``_rowid`` when asked; :class:`DatasetError` when a row is missing (the dataset changed
    during ``what``, e.g. "the search")."""
    ids = rowids if isinstance(rowids, pa.Array) else pa.array(np.asarray(rowids), type=pa.uint64())
    t = ds._take_rows(ids, list(columns))
    ok = t.num_rows == len(ids)
    if ok and "_rowid" in columns:
        ok = np.array_equal(t.column("_rowid").to_numpy(), ids.to_numpy(zero_copy_only=False))
    if not ok:
        _changed(ds, uri, what, len(ids), t.num_rows)
    return t


def _changed(ds, uri: str | None, what: str, asked: int, fetched: int):
    name = uri if uri is not None else str(ds.uri)
    raise DatasetError(f"dataset {name!r} changed during {what} ({asked} rows asked, {fetched} "
                       "fetched); run it again")


_OFFSET_BITS = np.uint64(32)  # a row address: fragment id << 32 | offset in the fragment
_OFFSET_MASK = np.uint64(0xFFFFFFFF)


class _Session:
    """A fragment's kept ``FragmentSession`` for one set of columns, used by one thread
    at a time."""

    __slots__ = ("session", "rows", "lock")

    def __init__(self, session, rows: int):
        self.session = session
        self.rows = rows  # physical rows: an offset at or past it names no row
        self.lock = threading.Lock()


class RowFetcher:
    """``columns`` of rows by row id, in the asked order, from one dataset version ``ds``
    (see the module doc); ``stable_row_ids`` tells whether ids are row addresses."""

    def __init__(self, ds, stable_row_ids: bool):
        self.ds = ds
        self.addresses = not stable_row_ids
        self._sessions: dict = {}  # (fragment id, columns) -> _Session; None: use take_rows; False: no fragment
        self._lock = threading.Lock()

    def _session(self, fragment_id: int, columns: tuple):
        key = (fragment_id, columns)
        with self._lock:
            if key in self._sessions:
                return self._sessions[key]
        frag = self.ds.get_fragment(fragment_id)
        entry = False if frag is None else None  # False: no such fragment in this version
        if frag is not None and frag.deletion_file() is None:
            entry = _Session(frag.open_session(list(columns)), int(frag.physical_rows))
        with self._lock:
            return self._sessions.setdefault(key, entry)

    def take(self, rowids: np.ndarray, columns: list[str], what: str, uri: str | None = None) -> pa.Table:
        """The rows ``rowids`` (uint64); :class:`DatasetError` when one is missing."""
        rowids = np.asarray(rowids, dtype=np.uint64)
        if self.addresses and rowids.size and columns and "_rowid" not in columns:
            frag = rowids >> _OFFSET_BITS
            first = int(frag[0])
            if (frag == first).all():
                entry = self._session(first, tuple(columns))
                if entry is False:
                    _changed(self.ds, uri, what, rowids.size, 0)
                if entry is not None:
                    t = self._from_session(entry, rowids & _OFFSET_MASK, what, uri)
                    if t is not None:
                        return t
        return take_rows(self.ds, pa.array(rowids, type=pa.uint64()), columns, what, uri)

    def _from_session(self, entry: _Session, offsets: np.ndarray, what: str, uri: str | None) -> pa.Table | None:
        """The rows at ``offsets`` of a fragment without deletions, in the asked order; None
        when the session is busy in another thread or an offset repeats (take_rows then)."""
        offsets = offsets.astype(np.int64)
        order = np.argsort(offsets, kind="stable")
        ordered = offsets[order]  # a session takes strictly increasing offsets
        if int(ordered[-1]) >= entry.rows:  # past the fragment's end: no such row
            _changed(self.ds, uri, what, offsets.size, int((ordered < entry.rows).sum()))
        if (ordered[1:] == ordered[:-1]).any() or not entry.lock.acquire(blocking=False):
            return None
        try:
            t = entry.session.take(ordered.tolist())
        finally:
            entry.lock.release()
        if t.num_rows != offsets.size:
            _changed(self.ds, uri, what, offsets.size, t.num_rows)
        if (order != np.arange(order.size)).any():
            inverse = np.empty_like(order)
            inverse[order] = np.arange(order.size)
            t = t.take(pa.array(inverse))
        return t


def take_expression(ds, rowids: np.ndarray, expressions: dict[str, str]) -> pa.Table:
    """The SQL ``expressions`` (name -> expression) evaluated on the live rows among
    ``rowids`` (deleted rows are left out: a take drops them)."""
    return ds._take_rows(pa.array(rowids, type=pa.uint64()), expressions)
