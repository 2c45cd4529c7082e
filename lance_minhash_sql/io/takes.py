"""Rows of a dataset version by row id: the one take the index layer uses.

``take_rows`` asks Lance for the given rows (pylance's ``_take_rows``, which accepts row
ids: row addresses, or stable row ids) and checks that every asked row came back, in
order: a row deleted between a search and its fetch makes the caller's answer wrong, so
it is an error naming the dataset, never a shorter result.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import DatasetError

__all__ = ["MAX_TAKE", "take_rows", "take_expression"]

MAX_TAKE = 1 << 20  # row ids per Lance take call


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
        name = uri if uri is not None else str(ds.uri)
        raise DatasetError(f"dataset {name!r} changed during {what} ({len(ids)} rows asked, {t.num_rows} "
                           "fetched); run it again")
    return t


def take_expression(ds, rowids: np.ndarray, expressions: dict[str, str]) -> pa.Table:
    """The SQL ``expressions`` (name -> expression) evaluated on the live rows among
    ``rowids`` (deleted rows are left out: a take drops them)."""
    return ds._take_rows(pa.array(rowids, type=pa.uint64()), expressions)
