"""One message, each interface's syntax.

The package's error messages name the value in Python's syntax (``threshold=1.5``, as the
checks of ``core/checks.py`` write it) and give their advice in SQL's syntax
(``threshold := 0.8``, ``NULL``, ``true``). Each interface shows the whole message in its
own: :func:`in_python` for a Python caller (``threshold=0.8``, ``None``, ``True``,
``build_index(...)``), through :func:`python_errors` on the public functions at the
package's root (their warnings too, through :data:`~lance_minhash_sql.core.errors.PHRASING`);
:func:`in_sql` for SQL (``threshold := 1.5``), through :func:`sql_errors` on every UDF;
:func:`in_cli` for the command line (``--threshold 1.5``, ``lance-minhash build ...``).
"""

from __future__ import annotations

import functools
import re
from types import MappingProxyType
from typing import Callable

from lance_minhash_sql.core.errors import PHRASING, LanceMinHashError

__all__ = ["in_cli", "in_python", "in_sql", "python_errors", "sql_errors"]

_NAMED = re.compile(r"\b([a-z_]+) := ('[^']*'|[^\s,;)]+)")
_PY_VALUES = MappingProxyType({"NULL": "None", "true": "True", "false": "False"})
_NULL = re.compile(r"\bNULL\b")
_SQL_FUNCTIONS = MappingProxyType({"minhash_build(": "build_index(", "minhash_pairs(": "pairs(", "minhash_clusters(": "clusters(",
                  "minhash_dedup(": "dedup(", "minhash_optimize(": "optimize(", "minhash_search(": "search("})


def in_python(message: str) -> str:
    """``message`` with its SQL advice in Python's syntax."""
    out = _NAMED.sub(lambda m: f"{m.group(1)}={_PY_VALUES.get(m.group(2), m.group(2))}", message)
    out = _NULL.sub("None", out)
    for sql, py in _SQL_FUNCTIONS.items():
        out = out.replace("SELECT * FROM " + sql, py).replace(sql, py)
    return out


def _rephrased(fn: Callable, phrase: Callable[[str], str], warnings_too: bool) -> Callable:
    @functools.wraps(fn)
    def call(*args, **kwargs):
        token = PHRASING.set(phrase) if warnings_too else None
        try:
            return fn(*args, **kwargs)
        except LanceMinHashError as exc:
            if exc.args and isinstance(exc.args[0], str):
                exc.args = (phrase(exc.args[0]),) + exc.args[1:]
            raise
        finally:
            if token is not None:
                PHRASING.reset(token)

    return call


def python_errors(fn: Callable) -> Callable:
    """``fn`` whose :class:`LanceMinHashError` messages, and the package's warnings during
    the call, read in Python's syntax."""
    return _rephrased(fn, in_python, True)


# --------------------------------------------------------------------------- SQL

_PY_VALUE = r"('[^']*'|\[[^\[\]]*\]|(?:-?\d[\w.+-]*|-?inf|nan|None|True|False|NULL)\b)"  # a flat list too
_PY_SUBJECT = re.compile(r"(?<![\w:<>=!])([a-z_][a-z0-9_]*)=(?!=)" + _PY_VALUE)
_SQL_VALUES = MappingProxyType({"None": "NULL", "True": "true", "False": "false"})


def in_sql(message: str) -> str:
    """``message`` with the values it names in SQL's syntax: ``threshold=1.5`` becomes
    ``threshold := 1.5``, ``None`` ``NULL``."""
    return _PY_SUBJECT.sub(lambda m: f"{m.group(1)} := {_SQL_VALUES.get(m.group(2), m.group(2))}", message)


def sql_errors(fn: Callable) -> Callable:
    """A UDF whose :class:`LanceMinHashError` messages read in SQL's syntax."""
    return _rephrased(fn, in_sql, False)


# --------------------------------------------------------------------------- the command line

_SQL_CALL = re.compile(r"(?:SELECT \* FROM )?minhash_(build|optimize|pairs|clusters|dedup|report)\(([^()]*)\)")


_PY_NAMED = re.compile(r"\b([a-z_]+)=(True|'[^']*')")  # Python's keyword syntax, in a message of the Python API
_CLI_PHRASES = MappingProxyType({"or NULL for no limit with a threshold": "or -k all for no limit with --threshold",
                "k is NULL (no limit), which needs a threshold, but threshold is NULL too":
                    "-k all (no limit) needs --threshold"})


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


def in_cli(message: str, options: frozenset = frozenset()) -> str:
    """An error message's SQL advice in the command line's terms: ``SELECT * FROM
    minhash_build('d', 'c')`` becomes ``lance-minhash build 'd' 'c'``, ``order_by := 'x'``
    becomes ``--order-by 'x'``; a value named in Python's syntax (``threshold=1.5``) becomes
    ``--threshold 1.5`` when ``--threshold`` is one of the command's ``options``."""
    for phrase, cli in _CLI_PHRASES.items():
        message = message.replace(phrase, cli)
    message = _PY_NAMED.sub(_cli_argument, _NAMED.sub(_cli_argument, _SQL_CALL.sub(_cli_call, message)))

    def option(m: re.Match) -> str:
        flag = "-k" if m.group(1) == "k" else "--" + m.group(1).replace("_", "-")
        value = m.group(2)
        if value.startswith("["):  # a list is the option's values, one after another
            value = " ".join(v.strip() for v in value[1:-1].split(",") if v.strip())
        return f"{flag} {value}" if flag in options else m.group(0)

    return _PY_SUBJECT.sub(option, message)
