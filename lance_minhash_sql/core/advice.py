"""One message, each interface's syntax.

The package's error messages give their advice in SQL's syntax (``threshold := 0.8``,
``NULL``, ``true``), the interface most of them come from. :func:`in_python` rewrites a
message for a Python caller (``threshold=0.8``, ``None``, ``True``, ``build_index(...)``);
the public functions at the package's root raise their errors through
:func:`python_errors`. :func:`in_cli` rewrites it for the command line
(``--threshold 0.8``, ``lance-minhash build ...``), the Python API's ``name=value`` too.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

from lance_minhash_sql.core.errors import LanceMinHashError

__all__ = ["in_cli", "in_python", "python_errors"]

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


# --------------------------------------------------------------------------- the command line

_SQL_CALL = re.compile(r"(?:SELECT \* FROM )?minhash_(build|optimize|pairs|clusters|dedup|report)\(([^()]*)\)")


_PY_NAMED = re.compile(r"\b([a-z_]+)=(True|'[^']*')")  # Python's keyword syntax, in a message of the Python API
_CLI_PHRASES = {"or NULL for no limit with a threshold": "or -k all for no limit with --threshold",
                "k is NULL (no limit), which needs a threshold, but threshold is NULL too":
                    "-k all (no limit) needs --threshold"}


def _cli_argument(m: re.Match) -> str:
    name, value = m.group(1), m.group(2)
    if name == "replace":  # the CLI replaces by default; --no-replace refuses
        return "" if value == "true" else "--no-replace"
    if value in ("true", "True"):
        return f"--{name.replace('_', '-')}"
    return f"{'-k' if name == 'k' else '--' + name.replace('_', '-')} {value}"


def _cli_call(m: re.Match) -> str:
    args = [a.strip() for a in m.group(2).split(",") if a.strip()]
    words = ["lance-minhash", m.group(1)]
    for a in args:
        named = _NAMED.fullmatch(a)
        words.append(_cli_argument(named) if named else a.upper() if a in ("dataset", "column") else a)
    return " ".join(w for w in words if w)


def in_cli(message: str) -> str:
    """An error message's SQL advice in the command line's terms: ``SELECT * FROM
    minhash_build('d', 'c')`` becomes ``lance-minhash build 'd' 'c'``, ``order_by := 'x'``
    becomes ``--order-by 'x'``."""
    for phrase, cli in _CLI_PHRASES.items():
        message = message.replace(phrase, cli)
    return _PY_NAMED.sub(_cli_argument, _NAMED.sub(_cli_argument, _SQL_CALL.sub(_cli_call, message)))
