"""Zero-copy access to Arrow string buffers for the numba kernels."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.errors import InvalidInputError

__all__ = ["StringBuffers", "string_buffers", "as_string_array"]

_EMPTY_U8 = readonly(np.empty(0, dtype=np.uint8))


class StringBuffers(NamedTuple):
    offsets: np.ndarray  # int64, length n + 1 (already shifted by the array offset)
    data: np.ndarray  # uint8, read-only view of the value buffer
    valid: np.ndarray  # uint8 validity bitmap, empty when the array has no NULLs
    valid_offset: int  # bit offset of row 0 in ``valid``


def as_string_array(values, what: str = "text") -> pa.Array:
    """One contiguous ``string`` or ``large_string`` array from Arrow data or Python strings."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    elif not isinstance(values, pa.Array):
        try:
            values = pa.array(values, type=pa.large_string())
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise InvalidInputError(
                f"{what} must contain only strings or None; could not convert it ({exc}); "
                "cast the values to text first"
            ) from None
    t = values.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return values
    if pa.types.is_string_view(t) or pa.types.is_null(t):
        return values.cast(pa.large_string())
    raise InvalidInputError(
        f"{what} has Arrow type {t}, but a string column is required; "
        "cast it to VARCHAR / pa.string() first"
    )


def string_buffers(array: pa.Array) -> StringBuffers:
    """Buffers of a ``string`` / ``large_string`` array; only int32 offsets are copied."""
    array = as_string_array(array)
    n = len(array)
    bufs = array.buffers()
    off_type = np.int64 if pa.types.is_large_string(array.type) else np.int32
    if bufs[1] is None:
        offsets = np.zeros(n + 1, dtype=np.int64)
    else:
        # int32 offsets are widened (8 bytes a row) so each kernel compiles for one type
        offsets = np.frombuffer(bufs[1], dtype=off_type)[array.offset: array.offset + n + 1].astype(np.int64, copy=False)
    data = _EMPTY_U8 if bufs[2] is None else np.frombuffer(bufs[2], dtype=np.uint8)
    if array.null_count and bufs[0] is not None:
        valid = np.frombuffer(bufs[0], dtype=np.uint8)
        valid_offset = array.offset
    elif array.null_count:  # all NULL without a bitmap (null-typed input cast)
        valid = np.zeros((n + 7) // 8 or 1, dtype=np.uint8)
        valid_offset = 0
    else:
        valid, valid_offset = _EMPTY_U8, 0
    return StringBuffers(readonly(offsets), readonly(data), readonly(valid), valid_offset)
