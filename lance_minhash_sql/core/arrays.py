"""Arrays as the kernels take them.

Numba compiles a kernel once per combination of argument types, and an array's
writability is part of its type. Arrow buffers and memory maps are read-only, so every
array handed to a kernel is passed read-only: one compilation, whatever its origin.
"""

from __future__ import annotations

import numpy as np

__all__ = ["readonly"]


def readonly(a: np.ndarray) -> np.ndarray:
    """A read-only, C-contiguous view of ``a`` (a copy only when ``a`` is not contiguous).

    >>> v = readonly(np.arange(3)); v.flags.writeable, v.tolist()
    (False, [0, 1, 2])
    """
    v = np.ascontiguousarray(a).view()
    v.setflags(write=False)
    return v
