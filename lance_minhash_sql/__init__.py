"""Near-duplicate detection for text in Lance datasets, in DuckDB SQL.

>>> import lance_minhash_sql as lms
>>> con = lms.connect()
>>> con.sql("SELECT minhash_signature('The quick brown fox', num_hashes := 4, shingle_size := 2)").fetchall()
[([45071, 22998, 20762, 52524],)]

``import lance_minhash_sql`` stays cheap: :func:`install`, :func:`connect` (DuckDB,
pyarrow) and ``__version__`` load on first access, and the numba engine on the first
SQL call that needs it. On a fresh install each numba kernel compiles on its first call
(once: numba caches it on disk); :func:`warmup` compiles them all ahead of time.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from lance_minhash_sql.core import errors
from lance_minhash_sql.core.errors import *  # noqa: F403  (the exception tree: errors.__all__)
from lance_minhash_sql.runtime import memory as _memory  # noqa: F401  (malloc arenas limited before any thread: limit_arenas)
from lance_minhash_sql.core import sql_order as _sql_order
from lance_minhash_sql.runtime import compile_ahead as _compile_ahead  # noqa: F401  (the helper process the first compilation starts)

if TYPE_CHECKING:
    from lance_minhash_sql.api.entries import build_index, clusters, dedup, ingest, ingest_plan, join, keep_flags, pairs
    from lance_minhash_sql.lifecycle.cleanup import cleanup
    from lance_minhash_sql.duck.install import connect, install
    from lance_minhash_sql.faces.warmup import warmup
    from lance_minhash_sql.query.topk import search, search_ids
    from lance_minhash_sql.lifecycle.optimize import optimize
    from lance_minhash_sql.lifecycle.prewarm import prewarm
    from lance_minhash_sql.diagnostics.report import report
    from lance_minhash_sql.diagnostics.estimate import estimate
    from lance_minhash_sql.runtime.cache import cache_info, clear_cache, set_cache_capacity
    from lance_minhash_sql.faces.corpus import write_corpus
    from lance_minhash_sql.diagnostics.plots import save_plots
    from lance_minhash_sql.faces.review import review
    from lance_minhash_sql.faces.review_ingest import review_ingest

__all__ = [
    "__version__",
    "install",
    "connect",
    "build_index",
    "search",
    "search_ids",
    "pairs",
    "clusters",
    "dedup",
    "warmup",
    "join",
    "keep_flags",
    "optimize",
    "ingest_plan",
    "ingest",
    "cleanup",
    "prewarm",
    "report",
    "estimate",
    "set_cache_capacity",
    "cache_info",
    "clear_cache",
    "write_corpus",
    "save_plots",
    "review",
    "review_ingest",
] + errors.__all__

# each public name and the module that holds it (imported on first access)
_LAZY = MappingProxyType({
    "install": "lance_minhash_sql.duck.install",
    "connect": "lance_minhash_sql.duck.install",
    "build_index": "lance_minhash_sql.api.entries",
    "search": "lance_minhash_sql.query.topk",
    "search_ids": "lance_minhash_sql.query.topk",
    "pairs": "lance_minhash_sql.api.entries",
    "clusters": "lance_minhash_sql.api.entries",
    "dedup": "lance_minhash_sql.api.entries",
    "join": "lance_minhash_sql.api.entries",
    "warmup": "lance_minhash_sql.faces.warmup",
    "keep_flags": "lance_minhash_sql.api.entries",
    "optimize": "lance_minhash_sql.lifecycle.optimize",
    "ingest_plan": "lance_minhash_sql.api.entries",
    "ingest": "lance_minhash_sql.api.entries",
    "cleanup": "lance_minhash_sql.lifecycle.cleanup",
    "prewarm": "lance_minhash_sql.lifecycle.prewarm",
    "report": "lance_minhash_sql.diagnostics.report",
    "estimate": "lance_minhash_sql.diagnostics.estimate",
    "set_cache_capacity": "lance_minhash_sql.runtime.cache",
    "cache_info": "lance_minhash_sql.runtime.cache",
    "clear_cache": "lance_minhash_sql.runtime.cache",
    "write_corpus": "lance_minhash_sql.faces.corpus",
    "save_plots": "lance_minhash_sql.diagnostics.plots",
    "review": "lance_minhash_sql.faces.review",
    "review_ingest": "lance_minhash_sql.faces.review_ingest",
})
_AS_IS = frozenset({"install", "connect", "clear_cache", "cache_info"})  # connect/install: SQL gives SQL advice


def _sorted_values(table, column: str, order_by: str):
    """``order_by`` evaluated by DuckDB (``duck/order_by.py``, imported on the first call):
    what the engine sorts rows by SQL with (``core/sql_order.py``)."""
    from lance_minhash_sql.duck.order_by import sorted_values

    return sorted_values(table, column, order_by)


_sql_order.install(_sorted_values)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lance-minhash-sql")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value = _version()
    elif name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(_LAZY[name]), name)
        if name not in _AS_IS:
            from lance_minhash_sql.core.advice import python_errors

            value = python_errors(value)  # advice in Python's syntax (threshold=0.8, None)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
