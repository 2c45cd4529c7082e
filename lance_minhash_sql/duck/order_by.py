"""``ORDER BY`` lists evaluated by DuckDB for the engine (``core/sql_order.py``: the engine
sorts the dedup's and the ingest's rows by ``order_by`` through it, and never imports
DuckDB)."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.errors import InvalidParameterError

__all__ = ["sorted_values"]


def sorted_values(table: pa.Table, column: str, order_by: str) -> np.ndarray:
    """``table``'s ``column`` sorted by the SQL ``ORDER BY`` list ``order_by`` (DuckDB, a
    private connection; the table is ``t``). A list that does not bind raises
    :class:`InvalidParameterError` with DuckDB's first line (at most 300 characters)."""
    con = duckdb.connect()
    try:
        con.register("t", table)
        return con.execute(f'SELECT "{column}" FROM t ORDER BY {order_by}').fetchnumpy()[column]
    except duckdb.Error as exc:
        raise InvalidParameterError(str(exc).splitlines()[0][:300]) from None
    finally:
        con.close()
