"""The package's exceptions: one base class, one subclass per kind of failure.

Every message names the offending value, the rule it breaks and how to fix it, e.g.::

    num_bands=7 must divide num_hashes=128 (rows per band = num_hashes / num_bands);
    use a divisor such as 8 or 16.
"""

from __future__ import annotations

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
