"""Lance 14.0.2's per-code-point tokenizer tables, as NumPy arrays for the Numba tokenizer.

Lance's MinHash tokenizer (``docs/signatures.md``, *Tokenizer*) depends on three pieces of character data
compiled into the pylance binary:

* ``alnum`` -- Rust ``char::is_alphanumeric`` (the ``simple`` base tokenizer splits on every
  char that is not alphanumeric);
* ``lower`` -- Rust ``char::to_lowercase`` as applied by the LowerCaser (full, context free,
  at most 2 chars; e.g. U+0130 -> "i" + U+0307);
* ``fold`` -- the AsciiFoldingFilter's per-char mapping (1..5 ASCII chars; e.g. "½" -> "12",
  NBSP -> " ", "Ⅻ" -> "XII").

Python's ``unicodedata``/``str`` methods use another Unicode version and are **not** a
substitute (thousands of code points differ).  The tables are derived from ``lance.tokenize``
by ``scripts/derive_unicode_tables.py`` (probing all 1,112,064 scalar values, as
``docs/signatures.md`` explains under *The character tables*) and shipped as
``lance_minhash_sql/data/unicode_tables.npz``; this module only reads that file and does
not import lance.  **Re-derive the tables after any Lance upgrade** (run the
script, then ``tests/test_unicode_tables.py``, which compares them with ``lance.tokenize``).

Layout of the loaded tables (all C-contiguous, fixed dtypes, for Numba kernels; treat them as
read-only -- they are cached and shared):

* ``alnum[cp]`` (uint8, length 0x110000) is 1 iff cp is alphanumeric;
* ``lower_index[cp]`` (int32, length 0x110000) is -1 if cp lower-cases to itself, else an
  entry e whose mapping is ``lower_values[lower_offsets[e]:lower_offsets[e + 1]]`` (code points);
* ``fold_index`` / ``fold_offsets`` / ``fold_values``: the same scheme for ASCII folding.
"""

from __future__ import annotations

import importlib.resources
from typing import NamedTuple

import numpy as np

from lance_minhash_sql.core.arrays import NPY_HEADER_LOCK
from lance_minhash_sql.core.errors import LanceMinHashError
from lance_minhash_sql.runtime.cache import memoized

__all__ = ["UnicodeTables", "load_tables", "table_sizes", "tables_lance_version", "DATA_FILE"]

#: The data file, relative to the top-level package (it ships as package data).
DATA_PACKAGE = "lance_minhash_sql"
DATA_FILE = "data/unicode_tables.npz"

NUM_CODE_POINTS = 0x110000
_REQUIRED = (
    "alnum_ranges",
    "lower_keys",
    "lower_offsets",
    "lower_values",
    "fold_keys",
    "fold_offsets",
    "fold_values",
    "lance_version",
)
_REDERIVE = "re-create it with `python scripts/derive_unicode_tables.py` (needs pylance installed)"


class UnicodeTables(NamedTuple):
    alnum: np.ndarray  # uint8[0x110000], 1 where Rust char::is_alphanumeric in Lance 14.0.2
    lower_index: np.ndarray  # int32[0x110000], -1 = maps to itself, else entry e into lower_offsets
    lower_offsets: np.ndarray  # int32[n_lower + 1]
    lower_values: np.ndarray  # int32 code points
    fold_index: np.ndarray  # int32[0x110000], same scheme for ASCII folding
    fold_offsets: np.ndarray  # int32[n_fold + 1]
    fold_values: np.ndarray  # int32 code points (all ASCII)


def _corrupt(path, msg: str) -> LanceMinHashError:
    return LanceMinHashError(f"Unicode table file {path} is invalid: {msg}; {_REDERIVE}.")


@memoized(1)
def _read_npz() -> dict:
    resource = importlib.resources.files(DATA_PACKAGE).joinpath(DATA_FILE)
    try:
        with importlib.resources.as_file(resource) as path:
            try:
                with np.load(path, allow_pickle=False) as z:
                    missing = [name for name in _REQUIRED if name not in z.files]
                    if missing:
                        raise _corrupt(path, f"missing arrays {missing}")
                    data = {name: z[name] for name in _REQUIRED}
            except FileNotFoundError:
                raise
            except LanceMinHashError:
                raise
            except Exception as exc:  # zipfile.BadZipFile, ValueError, OSError, ...
                raise _corrupt(path, f"cannot be read ({type(exc).__name__}: {exc})") from exc
    except FileNotFoundError as exc:
        raise LanceMinHashError(
            f"Unicode table file {resource} (package data {DATA_PACKAGE}/{DATA_FILE}) is missing; "
            f"{_REDERIVE}."
        ) from exc
    data["_path"] = str(resource)
    return data


def _csr_index(path, name: str, keys, offsets, values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys = np.asarray(keys)
    offsets = np.asarray(offsets)
    values = np.asarray(values)
    if keys.ndim != 1 or offsets.ndim != 1 or values.ndim != 1:
        raise _corrupt(path, f"{name} arrays must be 1-D")
    if len(offsets) != len(keys) + 1:
        raise _corrupt(path, f"{name}_offsets has {len(offsets)} entries, expected {len(keys) + 1}")
    if len(keys) and (keys.min() < 0 or keys.max() >= NUM_CODE_POINTS or np.any(np.diff(keys) <= 0)):
        raise _corrupt(path, f"{name}_keys must be strictly ascending code points")
    if offsets[0] != 0 or offsets[-1] != len(values) or np.any(np.diff(offsets) < 1):
        raise _corrupt(path, f"{name}_offsets is not a valid CSR offset array over {len(values)} values")
    if len(values) and (values.min() < 0 or values.max() >= NUM_CODE_POINTS):
        raise _corrupt(path, f"{name}_values holds values outside 0..0x10FFFF")
    index = np.full(NUM_CODE_POINTS, -1, dtype=np.int32)
    index[keys.astype(np.int64)] = np.arange(len(keys), dtype=np.int32)
    return (
        index,
        np.ascontiguousarray(offsets, dtype=np.int32),
        np.ascontiguousarray(values, dtype=np.int32),
    )


def load_tables() -> UnicodeTables:
    """Load (once, cached) the tables from the package's ``data/unicode_tables.npz``.

    Raises LanceMinHashError if the file is missing or malformed. Threads that ask at
    once wait for one load (:data:`lance_minhash_sql.core.arrays.NPY_HEADER_LOCK`;
    ``tests/test_concurrency.py``, eight cold openers).
    """
    with NPY_HEADER_LOCK:
        return _load_tables()


@memoized(1)
def _load_tables() -> UnicodeTables:
    data = _read_npz()
    path = data["_path"]
    ranges = np.asarray(data["alnum_ranges"])
    if ranges.ndim != 2 or ranges.shape[1] != 2:
        raise _corrupt(path, f"alnum_ranges has shape {ranges.shape}, expected (n, 2)")
    starts = ranges[:, 0].astype(np.int64)
    ends = ranges[:, 1].astype(np.int64)
    if len(ranges) and (
        starts.min() < 0
        or ends.max() >= NUM_CODE_POINTS
        or np.any(ends < starts)
        or np.any(starts[1:] <= ends[:-1] + 1)  # sorted, disjoint and maximal
    ):
        raise _corrupt(path, "alnum_ranges must be sorted, disjoint, maximal inclusive [start, end] ranges")
    # Build alnum via a difference array: +1 at start, -1 after end.
    diff = np.zeros(NUM_CODE_POINTS + 1, dtype=np.int8)
    diff[starts] += 1
    diff[ends + 1] -= 1
    alnum = np.ascontiguousarray(np.cumsum(diff[:-1], dtype=np.int8).astype(np.uint8))

    lower = _csr_index(path, "lower", data["lower_keys"], data["lower_offsets"], data["lower_values"])
    fold = _csr_index(path, "fold", data["fold_keys"], data["fold_offsets"], data["fold_values"])
    return UnicodeTables(alnum, *lower, *fold)


def tables_lance_version() -> str:
    """The ``lance.__version__`` the tables were derived from (e.g. "14.0.2")."""
    return str(_read_npz()["lance_version"][()])


def table_sizes() -> dict:
    """Sizes of the loaded tables.

    For Lance 14.0.2: ``{"alnum": 149106, "alnum_ranges": 844, "lower": 1488, "fold": 2207}``.
    """
    t = load_tables()
    edges = np.diff(np.concatenate(([0], t.alnum.astype(np.int8), [0])))
    return {
        "alnum": int(t.alnum.sum(dtype=np.int64)),
        "alnum_ranges": int(np.count_nonzero(edges == 1)),
        "lower": int(len(t.lower_offsets) - 1),
        "fold": int(len(t.fold_offsets) - 1),
    }
