"""Argument checks, written once: true/false flags, integers, similarities, thresholds.

Each check returns the value as a plain Python ``bool``, ``int`` or ``float``, or raises
:class:`~lance_minhash_sql.core.errors.InvalidParameterError` with a message naming the value,
the rule and a fix. Byte sizes have their own module (:mod:`lance_minhash_sql.core.sizes`).

The rules:

* a **flag** is ``True`` or ``False`` (NumPy's ``bool_`` too), never ``1``/``0`` or text;
* an **integer** is an integral number; a float with no fraction counts (SQL hands
  integer arguments over as ``DOUBLE``, JSON writes ``128.0``), ``True``/``False`` do not;
* a **real** is a finite number (``True``/``False`` are not), within the bounds given;
* a **duration** (how old a version must be to be removed) is a ``timedelta``, a number
  of seconds, or a text ``"<number> <unit>"`` (``s``, ``m``, ``h``, ``d``, ``w`` and their
  long names: ``"7 days"``, ``"12h"``), at least 0;
* a **similarity** (an argument of the S-curve) is a number in ``[0, 1]``;
* a **threshold** (the MinHash similarity a pair must reach, and the similarity a build
  chooses ``(b, r)`` for or a report measures at) is a number with
  ``0 < threshold <= 1``. 1 is allowed: it asks for identical signatures, which a
  build serves with one band of all ``k`` rows and a self-join finds exactly. 0 is not:
  a pair of similarity 0 shares no band, so LSH can never list "every pair". See
  ``docs/parameters.md``.
"""

from __future__ import annotations

import math
import numbers
import re
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import numpy as np

from lance_minhash_sql.core.errors import DeprecatedSpellingWarning, InvalidParameterError, warn

__all__ = ["check_bool", "check_int", "check_real", "check_similarity", "check_threshold", "THRESHOLD_RULE",
           "check_choice", "CLUSTERINGS", "check_clustering", "VERIFY_MODES", "check_verify", "check_clustering_verify",
           "check_duration"]

THRESHOLD_RULE = "requires 0 < threshold <= 1 (the MinHash similarity a pair must reach; 1: identical signatures)"


def check_bool(name: str, value: Any) -> bool:
    """``value`` as a ``bool``; anything but ``True``/``False`` is an error.

    >>> check_bool("exact", True)
    True
    """
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"{name}={value!r} must be true or false")
    return bool(value)


def _span(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f" in {lo}..{hi}"
    if lo is not None:
        return f" >= {lo}"
    if hi is not None:
        return f" <= {hi}"
    return ""


def check_int(name: str, value: Any, fix: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an ``int`` in ``lo..hi`` (either bound optional); ``fix`` ends the message.

    >>> check_int("k", 10.0, "e.g. 10", lo=1)
    10
    """
    span = _span(lo, hi)
    if value is None:
        raise InvalidParameterError(f"{name} is NULL; pass an integer{span}; {fix}")
    if isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InvalidParameterError(f"{name}={value!r} must be an integer{span}; {fix}")
    else:
        n = int(value)
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise InvalidParameterError(f"{name}={value!r} must be an integer{span}; {fix}")
    return n


def _real(value: Any) -> float | None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def check_real(name: str, value: Any, fix: str, lo: float | None = None, hi: float | None = None,
               lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a finite ``float`` within the bounds (closed unless ``*_open``).

    >>> check_real("zipf_exponent", 1, "e.g. 1.0", lo=0, hi=10)
    1.0
    """
    rule = " ".join(
        ([f"{lo:g}", "<" if lo_open else "<="] if lo is not None else []) + [name]
        + (["<" if hi_open else "<=", f"{hi:g}"] if hi is not None else []))
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(f"{name}={value!r} must be a number ({rule}); {fix}")
    x = _real(value)
    if x is None:
        raise InvalidParameterError(f"{name}={value!r} is out of range: requires a finite number ({rule}); {fix}")
    if (lo is not None and (x <= lo if lo_open else x < lo)) or (hi is not None and (x >= hi if hi_open else x > hi)):
        raise InvalidParameterError(f"{name}={value!r} is out of range: requires {rule}; {fix}")
    return x


_UNITS = MappingProxyType({"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "mins": 60, "minute": 60,
          "minutes": 60, "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400,
          "w": 604800, "week": 604800, "weeks": 604800})


def check_duration(name: str, value: Any) -> timedelta:
    """A duration (module doc) as a ``timedelta``.

    >>> check_duration("older_than", "7 days"), check_duration("older_than", 0)
    (datetime.timedelta(days=7), datetime.timedelta(0))
    """
    fix = "e.g. '7 days', '12 hours', '0 seconds' (a number of seconds, or a timedelta in Python)"
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([a-zA-Z]+)\s*", value)
        if m is None or m.group(2).lower() not in _UNITS:
            raise InvalidParameterError(f"{name}={value!r} is not a duration; {fix}")
        seconds = float(m.group(1)) * _UNITS[m.group(2).lower()]
    else:
        seconds = _real(value)
        if seconds is None:
            raise InvalidParameterError(f"{name}={value!r} must be a duration; {fix}")
    if seconds < 0:
        raise InvalidParameterError(f"{name}={value!r} is out of range: requires a duration of at least 0; {fix}")
    return timedelta(seconds=seconds)


def check_similarity(name: str, value: Any) -> float:
    """A Jaccard similarity: a number in ``[0, 1]``.

    >>> check_similarity("similarity", 1)
    1.0
    """
    x = _real(value)
    if x is None or not 0.0 <= x <= 1.0:
        raise InvalidParameterError(f"{name}={value!r} must be a number in [0, 1]; e.g. 0.8")
    return x


def check_threshold(value: Any, name: str = "threshold") -> float:
    """A similarity threshold: a number with ``0 < threshold <= 1``.

    >>> check_threshold(1)
    1.0
    """
    if value is None:
        raise InvalidParameterError(f"{name} is NULL; {THRESHOLD_RULE}; pass e.g. 0.8")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(f"{name}={value!r} must be a number, not {type(value).__name__}: "
                                    f"{THRESHOLD_RULE}; pass e.g. 0.8")
    x = _real(value)
    if x is None or not 0.0 < x <= 1.0:
        raise InvalidParameterError(f"{name}={value!r} is out of range: {THRESHOLD_RULE}; e.g. 0.8")
    return x


CLUSTERINGS = ("components", "star")  # selfjoin/clusters.py (connected components), selfjoin/star.py


def check_choice(name: str, value: Any, choices: tuple[str, ...], what: str, use: str) -> str:
    """``value`` lower-cased when it is one of ``choices`` (case-insensitive), else an error
    naming it: ``{name}={value} is not {what}: use {use}``.

    >>> check_choice("keep", "First", ("first", "longest"), "a keep policy", "'first' or 'longest'")
    'first'
    """
    if not isinstance(value, str) or value.lower() not in choices:
        shown = "NULL" if value is None else repr(value)
        raise InvalidParameterError(f"{name}={shown} is not {what}: use {use}")
    return value.lower()


def check_clustering(value: Any) -> str:
    """A clustering of the self-join: one of :data:`CLUSTERINGS` (case-insensitive).

    >>> check_clustering("Star")
    'star'
    """
    return check_choice("clustering", value, CLUSTERINGS, "a clustering",
                        "'components' (connected components of the verified links, the default) or 'star' "
                        "(every dropped row is similar to the kept row named as its twin)")


VERIFY_MODES = ("estimate", "exact")  # core/banding.py: exact_candidate_floor


def check_verify(value: Any) -> str:
    """How a candidate pair is verified: one of :data:`VERIFY_MODES` (case-insensitive).

    >>> check_verify("EXACT")
    'exact'
    """
    return check_choice("verify", value, VERIFY_MODES, "a verification",
                        "'estimate' (the MinHash estimate reaches the threshold, the default) or 'exact' (the exact "
                        "shingle Jaccard reaches it; candidates taken down to a margin under the threshold)")


def verify_or_exact(verify: Any, exact: Any) -> str:
    """``verify`` checked, ``exact`` being its older spelling: ``exact := true`` is
    ``verify := 'exact'`` (a :class:`DeprecatedSpellingWarning` says so, once; it gives the exact Jaccard of
    every pair it keeps, which the older rule did too).

    >>> verify_or_exact("estimate", False)
    'estimate'
    """
    verify = check_verify(verify)
    if check_bool("exact", exact):
        warn(DeprecatedSpellingWarning("exact := true is verify := 'exact': pass verify := 'exact' (exact is going "
                                       "away)"))
        return "exact"
    return verify


EXECUTORS = ("local", "ray")  # selfjoin/executor.py (this process), extras/ray_executor.py (Ray tasks)


def check_executor(value: Any) -> str:
    """Where a self-join or a build runs: one of :data:`EXECUTORS` (case-insensitive).

    >>> check_executor("Ray")
    'ray'
    """
    return check_choice("executor", value, EXECUTORS, "an executor",
                        "'local' (this process, the default) or 'ray' (Ray tasks on the running cluster)")


def check_clustering_verify(clustering: Any, verify: Any) -> tuple[str, str]:
    """``(clustering, verify)`` of a clustering call, each checked.

    >>> check_clustering_verify("star", "exact")
    ('star', 'exact')
    """
    clustering, verify = check_clustering(clustering), check_verify(verify)
    return clustering, verify
