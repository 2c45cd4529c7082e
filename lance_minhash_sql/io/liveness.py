"""Which row ids of a dataset version are live (and match a filter): the one deletion
reader of the package, used by searches, the self-join, reports and ``optimize``."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.io.rowids import live_rowids
from lance_minhash_sql.io.store import lance_message
from lance_minhash_sql.io.takes import MAX_TAKE, take_expression

__all__ = ["Liveness", "member"]


def member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin`` against a sorted array by binary search (numpy's hash-based isin is
    far slower on few ids against many)."""
    if sorted_set.size == 0:
        return np.zeros(values.size, dtype=np.bool_)
    pos = np.minimum(np.searchsorted(sorted_set, values), sorted_set.size - 1)
    return sorted_set[pos] == values


class Liveness:
    """Which row ids of one dataset version are live.

    Cheap by construction: with row addresses, a version whose fragments have no deletion
    files and which still has every fragment the index covers needs no check at all, and
    ids of fragments that no longer exist are deleted without asking. Otherwise the ids
    that may be deleted (with row addresses: those in fragments with a deletion file; with
    stable row ids: all) are checked: row addresses against each such fragment's live rows,
    read once per version; stable row ids with one Lance take of the ``_rowid`` column,
    which drops deleted rows (the first take of a stable-row-id version builds Lance's row
    id index), answers remembered for the version.
    """

    def __init__(self, ds, covered: frozenset):
        frags = ds.get_fragments()
        self.ds = ds
        self.current = np.array(sorted(f.fragment_id for f in frags), dtype=np.uint64)
        self.with_deletions = np.array(
            sorted(f.fragment_id for f in frags if f.metadata.deletion_file is not None), dtype=np.uint64)
        self.stable = bool(ds.has_stable_row_ids)
        self.missing_fragments = frozenset(covered) - set(int(f) for f in self.current)
        self._valid_filters: set[str] = set()
        # With stable row ids an index can hold ids that no fragment has any more (rows
        # deleted before a compaction keep their ids in the index), so every candidate
        # is checked; with row addresses a deletion always leaves a deletion file (or
        # removes the fragment), and compaction makes Lance rewrite the index.
        self.trivial = not self.stable and self.with_deletions.size == 0 and not self.missing_fragments
        self._known = np.empty(0, dtype=np.uint64)
        self._alive = np.empty(0, dtype=np.bool_)
        self._live_rows: dict[int, np.ndarray] = {}  # fragment id -> bool[physical rows]
        self._all_live: np.ndarray | None = None  # every live stable row id (of_every_row)
        self._lock = threading.Lock()

    @classmethod
    def of_every_row(cls, ds) -> "Liveness":
        """A checker for many row ids at once (``optimize`` checks every stored row): never
        trivial (row ids a compaction dropped, and ids of vanished fragments, are dead), and
        stable row ids checked against all live ones, read with one scan."""
        live = cls(ds, frozenset())
        live.trivial = False
        if live.stable:
            live._all_live = live_rowids(ds, live.current.tolist())
        return live

    def _maybe_dead(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(alive-so-far, needs-check) for row ids."""
        if self.stable:
            return np.ones(rowids.size, dtype=np.bool_), np.ones(rowids.size, dtype=np.bool_)
        frag = rowids >> np.uint64(32)
        alive = np.isin(frag, self.current)
        return alive, alive & np.isin(frag, self.with_deletions)

    def alive(self, rowids: np.ndarray) -> np.ndarray:
        """``bool[n]`` for unique row ids."""
        if self.trivial or rowids.size == 0:
            return np.ones(rowids.size, dtype=np.bool_)
        alive, check = self._maybe_dead(rowids)
        ids = rowids[check]
        if ids.size:
            if self._all_live is not None:
                alive[check] = member(ids, self._all_live)
            else:
                alive[check] = self._lookup(ids) if self.stable else self._by_fragment(ids)
        return alive

    def _by_fragment(self, addresses: np.ndarray) -> np.ndarray:
        """Live flags of row addresses in fragments with a deletion file, from each
        fragment's live rows, read once per version (one read of the deletion file; a
        take would read it again on every query, one request each on an object store)."""
        frag = (addresses >> np.uint64(32)).astype(np.int64)
        offset = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
        out = np.zeros(addresses.size, dtype=np.bool_)
        for f in np.unique(frag).tolist():
            sel = frag == f
            live = self._fragment_live(f)
            off = offset[sel]
            inside = off < live.size
            out[np.flatnonzero(sel)[inside]] = live[off[inside]]
        return out

    def load(self) -> None:
        """Read the live rows of every fragment with a deletion file now (prewarm)."""
        if not self.stable:
            for f in self.with_deletions.tolist():
                self._fragment_live(int(f))

    def _fragment_live(self, fragment_id: int) -> np.ndarray:
        with self._lock:
            live = self._live_rows.get(fragment_id)
        if live is None:
            frag = self.ds.get_fragment(fragment_id)
            addr = frag.to_table(columns=[], with_row_address=True).column(0).to_numpy()
            offsets = (addr & np.uint64(0xFFFFFFFF)).astype(np.int64)
            size = max(int(frag.metadata.physical_rows or 0), int(offsets.max()) + 1 if offsets.size else 0)
            live = np.zeros(size, dtype=np.bool_)
            live[offsets] = True
            with self._lock:
                self._live_rows[fragment_id] = live
        return live

    def _lookup(self, ids: np.ndarray) -> np.ndarray:
        with self._lock:
            known, flags = self._known, self._alive
        out = np.zeros(ids.size, dtype=np.bool_)
        if known.size:
            pos = np.minimum(np.searchsorted(known, ids), known.size - 1)
            hit = known[pos] == ids
            out[hit] = flags[pos[hit]]
        else:
            hit = np.zeros(ids.size, dtype=np.bool_)
        new = ids[~hit]
        if new.size:
            live = self.live_of(new)
            out[~hit] = live
            with self._lock:
                k2 = np.concatenate((self._known, new))
                f2 = np.concatenate((self._alive, live))
                o = np.argsort(k2, kind="stable")
                self._known, self._alive = k2[o], f2[o]
        return out

    def live_of(self, ids: np.ndarray) -> np.ndarray:
        """Ask Lance: ``bool[n]`` live flags of row ids (a take drops deleted rows)."""
        out = np.zeros(ids.size, dtype=np.bool_)
        for s in range(0, ids.size, MAX_TAKE):
            part = ids[s:s + MAX_TAKE]
            got = take_expression(self.ds, part, {"_rowid": "_rowid"}).column(0).to_numpy()
            out[s:s + part.size] = np.isin(part, got)
        return out

    def _matches(self, ids: np.ndarray, expr: str) -> pa.Table:
        """``_rowid`` and ``_ok`` (the filter's value) of the live ones of ``ids``: one take."""
        try:
            t = take_expression(self.ds, ids, {"_rowid": "_rowid", "_ok": expr})
        except (ValueError, OSError, RuntimeError) as exc:
            msg = lance_message(exc)
            raise InvalidParameterError(
                f"filter={expr!r} is not a valid Lance filter expression for this dataset ({msg}); "
                "use SQL over the dataset's columns, e.g. \"id > 10 AND lang = 'en'\"") from None
        if not pa.types.is_boolean(t.column("_ok").type):
            raise InvalidParameterError(
                f"filter={expr!r} must be a boolean expression, but it has type {t.column('_ok').type}; "
                "e.g. \"id > 10\"")
        return t

    def checks(self, expr: str | None) -> bool:
        """True when candidates must be checked: the version has deletions (or a compaction
        dropped rows), or a filter applies."""
        return expr is not None or not self.trivial

    def rows_ok(self, ids: np.ndarray, expr: str | None) -> np.ndarray:
        """``bool[n]``: which of the row ids ``ids`` (any order, repeats allowed) are live and,
        with a filter ``expr``, match it; each distinct id asked once."""
        uniq = sorted_unique(ids)
        flags = self.filter_mask(uniq, expr) if expr is not None else self.alive(uniq)
        return flags[np.searchsorted(uniq, ids)]

    def check_filter(self, expr: str) -> None:
        """Refuse a filter that is not a boolean expression over this version's columns,
        whether or not any row is a candidate (checked once per version and filter)."""
        if expr not in self._valid_filters:
            self._matches(np.empty(0, dtype=np.uint64), expr)
            self._valid_filters.add(expr)

    def filter_mask(self, ids: np.ndarray, expr: str) -> np.ndarray:
        """``bool[n]``: row ids that are live and match the Lance filter ``expr`` (one take)."""
        self.check_filter(expr)
        out = np.zeros(ids.size, dtype=np.bool_)
        if ids.size == 0:
            return out
        maybe, _ = self._maybe_dead(ids) if not self.trivial else (np.ones(ids.size, np.bool_), None)
        ask = ids[maybe]
        res = np.zeros(ask.size, dtype=np.bool_)
        for s in range(0, ask.size, MAX_TAKE):
            part = ask[s:s + MAX_TAKE]
            t = self._matches(part, expr)
            got = t.column("_rowid").to_numpy()
            flags = t.column("_ok").fill_null(False).to_numpy(zero_copy_only=False)
            res[s:s + part.size] = np.isin(part, got[flags])
        out[maybe] = res
        return out
