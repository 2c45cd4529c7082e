"""Who sorts rows by a SQL ``ORDER BY`` list (``order_by`` of the dedup and the ingest,
``selfjoin/dedup.py``).

DuckDB evaluates the list, and only ``duck/`` (and ``faces/``) speak DuckDB: the engine
calls :func:`sorted_values`, which hands the work to the function installed with
:func:`install`. The package root installs ``duck/order_by.py:sorted_values`` (imported
on the first call), so every import of the package has it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["install", "sorted_values"]

# (table, column, order_by) -> the values of ``column`` in the order of ``order_by``; raises
# InvalidParameterError with the SQL engine's first line of complaint for a list that does
# not bind
Sorter = Callable[["pa.Table", str, str], "np.ndarray"]
SORTER: list[Sorter] = []


def install(sorter: Sorter) -> None:
    """Make ``sorter`` the one that evaluates ``ORDER BY`` lists."""
    SORTER[:] = [sorter]


def sorted_values(table: "pa.Table", column: str, order_by: str) -> "np.ndarray":
    """``table``'s ``column`` in the order of the SQL ``ORDER BY`` list ``order_by`` over its
    columns (the table is ``t``); :class:`InvalidParameterError` naming the SQL engine's
    complaint if the list does not bind."""
    return SORTER[0](table, column, order_by)
