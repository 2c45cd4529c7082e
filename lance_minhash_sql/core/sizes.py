"""Byte sizes: one rule for environment variables, SQL, the command line and Python.

A size is a whole number of bytes (an integer, or its digits as text: ``1073741824``),
or a number with a unit, read as DuckDB reads its own ``memory_limit`` and
``max_temp_directory_size``:

* ``KB``, ``MB``, ``GB``, ``TB`` (and the short ``K``, ``M``, ``G``, ``T``) are powers of 1000;
* ``KiB``, ``MiB``, ``GiB``, ``TiB`` are powers of 1024; ``B`` is bytes.

Units are case-insensitive, a space may separate number and unit, and the number may
have a decimal fraction (``1.5GB`` is 1,500,000,000 bytes; a fraction of a byte is
dropped). So ``2GB`` is 2,000,000,000 bytes and ``2GiB`` 2,147,483,648 wherever a size
is taken: ``LANCE_MINHASH_CACHE_BYTES``, ``LANCE_MEM_POOL_SIZE``,
``LANCE_MAX_TEMP_DIRECTORY_SIZE``, ``minhash_prewarm(cache_bytes := ...)``,
``lance-minhash build --memory-limit``, ``build_index(memory_limit=...)``,
``set_cache_capacity(...)``.

Lance itself reads ``LANCE_MEM_POOL_SIZE`` and ``LANCE_MAX_TEMP_DIRECTORY_SIZE`` as plain
integers only (it ignores other text with a warning), so a value meant for both Lance
and this package should be written in bytes.

>>> parse_bytes("2GB", "x"), parse_bytes("2GiB", "x"), parse_bytes("512MiB", "x"), parse_bytes("1.5G", "x")
(2000000000, 2147483648, 536870912, 1500000000)
"""

from __future__ import annotations

import numbers
import re
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from lance_minhash_sql.core.errors import InvalidParameterError

__all__ = ["SIZE_RULE", "SIZE_UNITS", "parse_bytes", "format_bytes"]

SIZE_UNITS = MappingProxyType({
    "": 1, "b": 1,
    "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
})
SIZE_RULE = ("a size is a whole number of bytes or a number with a unit: KB, MB, GB, TB (or K, M, G, T) "
             "are powers of 1000, KiB, MiB, GiB, TiB powers of 1024, as in DuckDB")
_SIZE = re.compile(r"^\s*(-\s*)?(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")
_INTEGER = re.compile(r"^\s*-?\d+\s*$")


def parse_bytes(value: Any, name: str, minimum: int = 1) -> int:
    """Bytes from an integer or a size text (see the module's rule), at least ``minimum``.

    ``name`` is what the message calls the value (a parameter, ``$VARIABLE`` or ``--option``).
    Anything else is an :class:`InvalidParameterError` naming the value, the rule and a fix.
    """
    fix = "write e.g. '512MiB', '2GB' or 1073741824"
    if isinstance(value, str) and _INTEGER.match(value):
        value = int(value)  # digits as text (SQL hands sizes over as VARCHAR) read, and named, as the number
    if isinstance(value, bool) or value is None:
        raise InvalidParameterError(f"{name}={value!r} is not a byte size; {SIZE_RULE}; {fix}")
    if isinstance(value, numbers.Integral):
        n = int(value)
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str):
        m = _SIZE.match(value)
        unit = m.group(3).lower() if m else None
        if m is None or unit not in SIZE_UNITS:
            raise InvalidParameterError(f"{name}={value!r} is not a byte size; {SIZE_RULE}; {fix}")
        exact = Decimal(m.group(2)) * SIZE_UNITS[unit] * (-1 if m.group(1) else 1)
        if unit in ("", "b") and exact != exact.to_integral_value():
            raise InvalidParameterError(
                f"{name}={value!r} is not a whole number of bytes; {SIZE_RULE}; {fix}")
        n = int(exact)
    else:
        raise InvalidParameterError(f"{name}={value!r} is not a byte size; {SIZE_RULE}; {fix}")
    if n < minimum:
        rule = {0: "must not be negative", 1: "must be positive"}.get(
            minimum, f"is below the minimum of {format_bytes(minimum)}")
        raise InvalidParameterError(f"{name}={value!r} ({n} bytes) {rule}; {fix}")
    return n


def format_bytes(n: int) -> str:
    """A byte count the way messages show it, with its binary unit when that is exact.

    >>> format_bytes(64 << 10), format_bytes(2 * 10**9), format_bytes(100)
    ('64 KiB (65536 bytes)', '2000000000 bytes', '100 bytes')
    """
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit} ({n} bytes)" if n % scale == 0 else f"{n} bytes"
    return f"{n} bytes"
