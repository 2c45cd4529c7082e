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

from typing import TYPE_CHECKING, Any

from . import errors
from .errors import *  # noqa: F403  (the exception tree: errors.__all__)

if TYPE_CHECKING:
    from .duck.install import connect, install
    from .index.build import build_index
    from .index.clusters import clusters
    from .index.dedup import dedup
    from .index.join import join
    from .index.pairs import pairs
    from .index.search import search, search_ids
    from .warmup import warmup

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
] + errors.__all__

_LAZY = {"install": ".duck.install", "connect": ".duck.install"}
_LAZY.update(build_index=".index.build", search=".index.search", search_ids=".index.search", pairs=".index.pairs",
             clusters=".index.clusters", dedup=".index.dedup", join=".index.join", warmup=".warmup")


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

        value = getattr(import_module(_LAZY[name], __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
