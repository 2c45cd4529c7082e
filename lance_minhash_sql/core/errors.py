"""The package's exceptions: one base class, one subclass per kind of failure.

Every message names the offending value, the rule it breaks and how to fix it, e.g.::

    num_bands=7 must divide num_hashes=128 (rows per band = num_hashes / num_bands);
    use a divisor such as 8 or 16.
"""

from __future__ import annotations

import contextvars
import inspect
import warnings

__all__ = [
    "LanceMinHashError",
    "InvalidParameterError",
    "ParameterMismatchError",
    "InvalidInputError",
    "DatasetError",
    "IndexNotFoundError",
    "CorruptIndexError",
    "UnsupportedIndexError",
    "ResourceLimitError",
    "MissingDependencyError",
    "DistributedTaskError",
    "EmptySearchWarning",
    "LowRecallWarning",
    "DeprecatedSpellingWarning",
]


class LanceMinHashError(Exception):
    """Base class of every error raised by lance_minhash_sql."""


class InvalidParameterError(LanceMinHashError, ValueError):
    """A parameter (num_hashes, num_bands, threshold, tokenizer option, k, ...) is invalid."""


class ParameterMismatchError(InvalidParameterError):
    """Index segments that must share parameters do not (committing or merging segments)."""


class InvalidInputError(LanceMinHashError, TypeError):
    """An argument has the wrong type or shape (e.g. a non-string column or a NULL query)."""


class DatasetError(LanceMinHashError):
    """The dataset or column cannot be used: missing, empty, wrong type, unreadable."""


class IndexNotFoundError(LanceMinHashError):
    """The column has no MinHash LSH index where one is required."""


class CorruptIndexError(LanceMinHashError):
    """Index files are truncated, unsorted, or carry metadata that does not match."""


class UnsupportedIndexError(LanceMinHashError):
    """The index was written with a version or parameters this package does not read."""


class ResourceLimitError(LanceMinHashError):
    """A memory, temporary-space or size limit would be exceeded."""


class MissingDependencyError(LanceMinHashError, ImportError):
    """An optional package a feature needs is not installed (e.g. matplotlib for plots)."""


class DistributedTaskError(LanceMinHashError):
    """A task of a distributed (Ray) run failed; nothing was committed. ``failures`` maps each
    failed task's fragment ids (a build) or shard indices (pairs, clusters) to its error."""

    def __init__(self, message: str, failures: dict | None = None):
        super().__init__(message)
        self.failures = dict(failures or {})


class EmptySearchWarning(UserWarning):
    """A search query returns no rows for a reason the result cannot show: the query has
    no tokens (empty, or only punctuation for the tokenizer), or it shares no LSH band
    with any indexed row."""


class LowRecallWarning(UserWarning):
    """The threshold lies far below the index's S-curve: most pairs at it are never candidates."""


class DeprecatedSpellingWarning(FutureWarning):
    """An argument in an older spelling (``exact := true``, ``exact=True``, ``--exact``): the
    same meaning, the message names the spelling to use. Shown once per process and message
    (unless a filter says ``always`` or ``error``), however often DuckDB binds the statement
    that holds it."""


# How the package's warnings are phrased during a call: None (SQL's syntax, rewritten by the
# command line for its own), or core/advice.py's in_python while a public Python function runs.
PHRASING: contextvars.ContextVar = contextvars.ContextVar("lance_minhash_phrasing", default=None)

_NOT_CALLERS = frozenset({"lance_minhash_sql", "duckdb"})  # the package, and DuckDB running its UDFs
NO_CALLER_WARNINGS: dict = {}  # warnings issued with no caller outside the package (runtime/cache.py registers it)
ONCE_WARNINGS: dict = {}  # the texts of the once-only warnings issued so far (runtime/cache.py registers it)


def _action(warning: Warning, module: str) -> str:
    """The action of the first of ``warnings.filters`` that applies to ``warning`` issued in ``module``."""
    text = str(warning)
    for action, message, category, mod, lineno in warnings.filters:
        if (message is None or message.match(text)) and issubclass(type(warning), category) \
                and (mod is None or mod.match(module)) and lineno == 0:
            return action
    return warnings.defaultaction


def _said_already(warning: Warning, module: str) -> bool:
    """A :class:`DeprecatedSpellingWarning` whose text was shown before, with no filter
    asking to see every one; records the text otherwise."""
    if not isinstance(warning, DeprecatedSpellingWarning):
        return False
    text = str(warning)
    if ONCE_WARNINGS.get(text) and _action(warning, module) not in ("always", "error"):
        return True
    ONCE_WARNINGS[text] = True
    return False


def warn(warning: Warning) -> None:
    """Issue one of the package's warnings at the first caller outside the package (and
    outside DuckDB's Python code, which runs the package's SQL functions): the user's own
    line, as Python shows it (``file:line`` and that line's code), never a line of the
    package. Without such a caller (a UDF called from DuckDB's threads) the warning names
    the package alone, without a file, line or code, once per message like any warning.
    Its text is in the syntax of the interface that called (:data:`PHRASING`)."""
    phrase = PHRASING.get()
    if phrase is not None and warning.args and isinstance(warning.args[0], str):
        warning = type(warning)(phrase(warning.args[0]), *warning.args[1:])
    frame, level = inspect.currentframe().f_back, 2  # stacklevel 2: the caller of warn()
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in _NOT_CALLERS:
        frame, level = frame.f_back, level + 1
    if _said_already(warning, frame.f_globals.get("__name__", "") if frame is not None else "lance_minhash_sql"):
        return
    if frame is not None:
        warnings.warn(warning, stacklevel=level)
    else:
        warnings.warn_explicit(warning, type(warning), "lance_minhash_sql", 0, registry=NO_CALLER_WARNINGS)
