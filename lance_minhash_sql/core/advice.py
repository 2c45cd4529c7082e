"""One message, each interface's syntax.

The package's error messages give their advice in SQL's syntax (``threshold := 0.8``,
``NULL``, ``true``), the interface most of them come from. :func:`in_python` rewrites a
message for a Python caller (``threshold=0.8``, ``None``, ``True``, ``build_index(...)``);
the public functions at the package's root raise their errors through
:func:`python_errors`. The command line's rewriting (``--threshold 0.8``) is
``lance_minhash_sql.faces.cli.cli_advice``.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

from lance_minhash_sql.core.errors import LanceMinHashError

__all__ = ["in_python", "python_errors"]

_NAMED = re.compile(r"\b([a-z_]+) := ('[^']*'|[^\s,;)]+)")
_PY_VALUES = {"NULL": "None", "true": "True", "false": "False"}
_NULL = re.compile(r"\bNULL\b")
_SQL_FUNCTIONS = {"minhash_build(": "build_index(", "minhash_pairs(": "pairs(", "minhash_clusters(": "clusters(",
                  "minhash_dedup(": "dedup(", "minhash_optimize(": "optimize(", "minhash_search(": "search("}


def in_python(message: str) -> str:
    """``message`` with its SQL advice in Python's syntax."""
    out = _NAMED.sub(lambda m: f"{m.group(1)}={_PY_VALUES.get(m.group(2), m.group(2))}", message)
    out = _NULL.sub("None", out)
    for sql, py in _SQL_FUNCTIONS.items():
        out = out.replace("SELECT * FROM " + sql, py).replace(sql, py)
    return out


def python_errors(fn: Callable) -> Callable:
    """``fn`` whose :class:`LanceMinHashError` messages read in Python's syntax."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except LanceMinHashError as exc:
            if exc.args and isinstance(exc.args[0], str):
                exc.args = (in_python(exc.args[0]),) + exc.args[1:]
            raise

    return call
