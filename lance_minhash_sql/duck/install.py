"""Installing the SQL functions into DuckDB: UDFs once per database, macros per connection.

DuckDB 2.0.1 facts this module is built on:

* Python UDFs live in the database's catalog, so every connection and cursor of that
  database sees them; registering a name twice fails (``CatalogException: ... already
  exists``, or ``NotImplementedException`` on the connection that registered it). Asking
  ``duckdb_functions()`` whether they exist costs far more than a failed
  ``create_function``, so :func:`install` simply tries and treats
  "already exists" as done.
* TEMP macros belong to one connection: a cursor does not see its parent's macros.
  :func:`install` creates them on every call (``CREATE OR REPLACE``).
* ``create_function`` fails with ``ResourceInUseException`` on a connection with a
  half-fetched result, so UDFs are registered through a fresh cursor. ``execute`` on such
  a connection silently closes the pending result: installing macros on a connection
  discards a result that was not fetched to the end.
* Macros created inside an open transaction disappear on ``ROLLBACK`` (the UDFs, registered
  through an autocommit cursor, stay): call :func:`install` again after a rollback.
* The callable behind a UDF must outlive every connection: if it is garbage-collected
  after the registering connection closes, the next call crashes the process. Every
  registered callable is kept in :data:`_KEEP_ALIVE` for the life of the process.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import duckdb

from lance_minhash_sql.core.advice import sql_errors
from lance_minhash_sql.runtime.cache import memoized, register_state
from lance_minhash_sql.duck.args import ARG_UDFS
from lance_minhash_sql.duck.estimate import ESTIMATE_UDFS
from lance_minhash_sql.duck.ingest import INGEST_UDFS
from lance_minhash_sql.duck.cross_join import JOIN_UDFS
from lance_minhash_sql.duck.lifecycle import LIFECYCLE_UDFS
from lance_minhash_sql.duck.self_join import PAIR_UDFS
from lance_minhash_sql.duck.report import REPORT_UDFS
from lance_minhash_sql.duck.storage import STORAGE_UDFS, register_connection
from lance_minhash_sql.duck.tables import TABLE_UDFS
from lance_minhash_sql.duck.udfs import UDFS

# Every function the package registers, in registration order.
ALL_UDFS = (ARG_UDFS + UDFS + STORAGE_UDFS + TABLE_UDFS + PAIR_UDFS + JOIN_UDFS + LIFECYCLE_UDFS + REPORT_UDFS
             + ESTIMATE_UDFS + INGEST_UDFS)

__all__ = ["install", "connect", "macro_files", "ALL_UDFS"]

# Files run first, in this order; the other .sql files follow in name order.
_FIRST = ("scalar.sql",)

# Strong references to every callable handed to DuckDB (see the module docstring).
_KEEP_ALIVE: set = set()
register_state("callables handed to DuckDB", _KEEP_ALIVE)  # never cleared: DuckDB holds them


@memoized(1)
def macro_files() -> tuple[tuple[str, str], ...]:
    """``(file name, SQL text)`` of the shipped macro files, in installation order."""
    root = resources.files("lance_minhash_sql") / "sql"
    names = sorted(p.name for p in root.iterdir() if p.name.endswith(".sql"))
    ordered = [n for n in _FIRST if n in names] + [n for n in names if n not in _FIRST]
    return tuple((n, (root / n).read_text(encoding="utf-8")) for n in ordered)


_SQL_PHRASED: dict = {}  # each UDF, its errors in SQL's syntax (core/advice.py: sql_errors), made once
register_state("UDFs with their errors in SQL's syntax", _SQL_PHRASED)  # never cleared: DuckDB holds them


def _in_sql(spec) -> object:
    if spec.name not in _SQL_PHRASED:
        _SQL_PHRASED[spec.name] = sql_errors(spec.function)
    return _SQL_PHRASED[spec.name]


def _register_udfs(con: duckdb.DuckDBPyConnection) -> None:
    cur = con.cursor()
    try:
        for spec in ALL_UDFS:
            try:
                cur.create_function(spec.name, _in_sql(spec), list(spec.parameters), spec.return_type,
                                    type="arrow" if spec.arrow else "native",
                                    null_handling="special", side_effects=spec.side_effects)
            except (duckdb.CatalogException, duckdb.NotImplementedException) as exc:
                if "already" not in str(exc):
                    raise
            else:
                _KEEP_ALIVE.add(_in_sql(spec))
    finally:
        cur.close()


def _create_macros(con: duckdb.DuckDBPyConnection) -> None:
    register_connection(con)  # the macros pass it to _lms_storage, which may look up secrets
    for name, sql in macro_files():
        try:
            con.execute(sql)
        except duckdb.Error as exc:
            if hasattr(exc, "add_note"):
                exc.add_note(f"while running lance_minhash_sql/sql/{name}")
            raise


def install(con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """Make the package's SQL functions available on ``con`` and return it.

    ``con`` is a connection or a cursor (``None``: the ``duckdb`` module's default
    connection, used by ``duckdb.sql``). Run it on every connection and cursor that
    needs the functions: UDFs are registered once per database, macros on each call.

    >>> import duckdb
    >>> con = install(duckdb.connect())
    >>> con.sql("SELECT minhash_similarity([1, 2, 3, 4], [1, 2, 3, 5]) AS s").fetchall()
    [(0.75,)]
    """
    if con is None:
        con = duckdb.default_connection()
    _register_udfs(con)
    _create_macros(con)
    return con


def connect(database: str = ":memory:", *, read_only: bool = False, **config: Any) -> duckdb.DuckDBPyConnection:
    """A new DuckDB connection with the package's functions installed.

    ``config`` holds DuckDB settings, e.g. ``connect(threads=2, memory_limit="1GB")``.

    ``allow_unredacted_secrets`` is on unless set here: the table functions read the
    DuckDB S3 secret of an ``s3://`` dataset when no ``storage_options`` are given. It
    also lets any SQL on this connection read secrets with ``duckdb_secrets(redact :=
    false)``; pass ``allow_unredacted_secrets=False`` (and ``storage_options``) to avoid
    that. DuckDB opens a database file once per process with one configuration: open more
    connections to the file with ``connect(path)`` or ``con.cursor()`` (a plain
    ``duckdb.connect(path)`` then fails); when the file is already open with the setting
    off, this connects with it off too.
    """
    if "allow_unredacted_secrets" in config:
        return install(duckdb.connect(database, read_only=read_only, config=config))
    try:
        con = duckdb.connect(database, read_only=read_only, config={**config, "allow_unredacted_secrets": True})
    except duckdb.ConnectionException as exc:
        if "different configuration" not in str(exc):
            raise
        con = duckdb.connect(database, read_only=read_only, config=config)
    return install(con)
