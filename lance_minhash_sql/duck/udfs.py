"""The Python callables behind the scalar SQL functions (Arrow in, Arrow out).

DuckDB calls each one once per chunk of up to 2048 rows with one pyarrow array per
argument (parameters too: a constant argument arrives as a column of equal values).
The SQL macros in ``lance_minhash_sql/sql/scalar.sql`` are the public surface; these
``_lms_*`` functions are internal and their argument lists may change.

Conventions, shared by every function here (arguments are decoded by :mod:`.args`):

* Every argument column is read as a whole. Parameter columns (``num_hashes``,
  ``shingle_size``, ``tokenizer``, ``num_bands``, ...) are usually constant: that case
  costs one dictionary-encode per column; otherwise the rows are grouped by distinct
  parameter combination and each group is computed separately.
* A NULL *parameter* is an :class:`InvalidParameterError` naming it; a NULL *value*
  (text, signature, similarity) gives a NULL result.
* Integer parameters arrive as DOUBLE, so ``1.5`` or ``5e9`` reach
  :mod:`lance_minhash_sql.core.params` and get its messages instead of a DuckDB binder error.
* Text arguments arrive as ``text::VARCHAR`` plus ``typeof(text)`` from the macro: any
  static type other than VARCHAR (or an untyped NULL, which ``typeof`` spells ``"NULL"``)
  is an :class:`InvalidInputError` that says how to convert it.
* Messages start with the SQL function's name; DuckDB prefixes them with the exception
  class name (``Invalid Input Error: Python exception occurred while executing the UDF:
  InvalidParameterError: minhash_signature: num_hashes=0 ...``).

The numba engine (``index.sign``, ``kernels.similarity``) is imported on the first call,
so registering the functions does not load numba; signatures are signed by numpy while
that costs less than loading it (``index/sign.py: sign_by_cost``).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_minhash_sql.runtime.cache import memoized
from lance_minhash_sql.core.errors import InvalidInputError, InvalidParameterError
from lance_minhash_sql.core.lance_format import similarity as lance_similarity
from lance_minhash_sql.core.banding import lsh_probability as _lsh_probability_scalar
from lance_minhash_sql.core.banding import scurve
from lance_minhash_sql.core.params import MAX_NUM_HASHES, MinHashParams
from lance_minhash_sql.duck.args import Udf, check_text_types, number, prefixed
from lance_minhash_sql.duck.args import column as column_array
from lance_minhash_sql.duck.args import tokenizer as tokenizer_options
from lance_minhash_sql.duck.results import duck_type

__all__ = ["UDFS", "signature", "similarity", "band_keys", "shingle_jaccard", "lsh_probability"]

SIGNATURE_TYPE = pa.list_(pa.uint16())
BAND_KEYS_TYPE = pa.list_(pa.uint64())

# Signing does not use num_bands; 1 divides every num_hashes.
_SIGN_BANDS = 1
# shingle_jaccard needs only the tokenizer and shingle size; this num_hashes makes it share
# the cached Signer of default-sized signatures.
_JACCARD_HASHES = MinHashParams.num_hashes


# --------------------------------------------------------------------------- helpers


def _engine():
    """The numba-backed modules, imported on first use (numba costs ~0.4 s to import)."""
    from lance_minhash_sql.index import sign
    from lance_minhash_sql.kernels import similarity as kernels

    return sign, kernels


_NULL_FIX = MappingProxyType({
    "num_hashes": f"pass an integer in 1..{MAX_NUM_HASHES}, e.g. num_hashes := 128",
    "shingle_size": "pass an integer >= 1, e.g. shingle_size := 3",
    "num_bands": "pass a divisor of the signature length, e.g. num_bands := 16",
    "lsh_probability.num_bands": "pass an integer >= 1, e.g. 16",
    "rows_per_band": "pass an integer >= 1, e.g. 8",
})


def _encode(fn: str, name: str, column, nullable: bool = False) -> tuple[list, np.ndarray | None]:
    """Distinct values of a parameter column and each row's code (``None``: one value)."""
    arr = column_array(column)
    if not nullable and arr.null_count:
        raise InvalidParameterError(f"{fn}: {name} is NULL; {_NULL_FIX[name]}")
    enc = pc.dictionary_encode(arr, null_encoding="encode")
    values = enc.dictionary.to_pylist()
    if len(values) <= 1:
        return values, None
    return values, enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _groups(n: int, codes: list[np.ndarray | None]) -> list[tuple[tuple[int, ...], np.ndarray | None]]:
    """Rows grouped by their combination of codes: ``[(combo, rows or None = all rows)]``."""
    if all(c is None for c in codes):
        return [((0,) * len(codes), None)]
    stack = np.stack([np.zeros(n, np.int64) if c is None else c for c in codes], axis=1)
    combos, inverse = np.unique(stack, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(combos) + 1))
    return [(tuple(int(x) for x in combo), order[bounds[g]:bounds[g + 1]]) for g, combo in enumerate(combos)]


@memoized(256)
def _params(fn: str, num_hashes: Any, shingle_size: Any, tokenizer: str | None) -> MinHashParams:
    tok = tokenizer_options(fn, tokenizer)
    return prefixed(fn, MinHashParams, number(num_hashes), _SIGN_BANDS, number(shingle_size), tok)


def _fixed_lists(matrix: np.ndarray, valid: np.ndarray, type_: pa.DataType) -> pa.Array:
    """List array of the rows of ``matrix`` (NULL where not ``valid``; NULL rows take no space)."""
    n, k = matrix.shape
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(valid * np.int32(k), out=offsets[1:])
    values = matrix[valid].reshape(-1) if not valid.all() else matrix.reshape(-1)
    mask = None if valid.all() else pa.array(~valid)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=type_.value_type),
                                    type=type_, mask=mask)


def _scattered_lists(n: int, parts: list[tuple[np.ndarray, np.ndarray]], type_: pa.DataType) -> pa.Array:
    """List array of ``n`` rows from ``[(rows, matrix)]`` parts (rows not in a part are NULL)."""
    lengths = np.zeros(n, dtype=np.int64)
    for rows, matrix in parts:
        lengths[rows] = matrix.shape[1]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = np.empty(int(offsets[-1]), dtype=type_.value_type.to_pandas_dtype())
    for rows, matrix in parts:
        if len(rows):
            values[offsets[rows][:, None] + np.arange(matrix.shape[1])] = matrix
    valid = lengths > 0
    mask = None if valid.all() else pa.array(~valid)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values, type=type_.value_type),
                                    type=type_, mask=mask)


class _Lists(NamedTuple):
    valid: np.ndarray  # bool[n]
    lengths: np.ndarray  # int64[n], 0 where NULL
    starts: np.ndarray  # int64[n], start of each row in ``values``
    values: np.ndarray  # the non-NULL rows' elements, concatenated


def _lists(fn: str, name: str, column) -> _Lists:
    """A signature column (``list<uint16>``) taken apart; NULL elements and ``[]`` are errors."""
    arr = column_array(column)
    n = len(arr)
    valid = np.ones(n, dtype=bool) if arr.null_count == 0 else arr.is_valid().to_numpy(zero_copy_only=False)
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = arr.flatten()
    if flat.null_count:
        raise InvalidInputError(
            f"{fn}: {name} contains NULL elements; a signature is a list of non-NULL USMALLINT "
            "values, as minhash_signature returns it"
        )
    if (valid & (lengths == 0)).any():
        raise InvalidInputError(
            f"{fn}: {name} is an empty list; a signature has 1..{MAX_NUM_HASHES} values "
            "(minhash_signature returns NULL, not [], for a text without tokens)"
        )
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return _Lists(valid, lengths, starts, flat.to_numpy(zero_copy_only=False))


def _gather(lists: _Lists, rows: np.ndarray, k: int) -> np.ndarray:
    """``uint16[len(rows), k]`` matrix of rows that all have ``k`` values."""
    if rows.size == lists.starts.size and lists.values.size == rows.size * k:  # every row, no NULLs
        return lists.values.reshape(rows.size, k)
    return lists.values[lists.starts[rows][:, None] + np.arange(k)]


def _doubles(values: np.ndarray, valid: np.ndarray) -> pa.Array:
    return pa.array(values, type=pa.float64(), mask=None if valid.all() else ~valid)


# --------------------------------------------------------------------------- the UDFs


def signature(text, text_type, num_hashes, shingle_size, tokenizer) -> pa.Array:
    """``_lms_signature(text, typeof(text), num_hashes, shingle_size, to_json(tokenizer))``."""
    fn = "minhash_signature"
    text = column_array(text)
    n = len(text)
    check_text_types(fn, "text", text_type)
    ks, k_codes = _encode(fn, "num_hashes", num_hashes)
    ws, w_codes = _encode(fn, "shingle_size", shingle_size)
    toks, t_codes = _encode(fn, "tokenizer", tokenizer, nullable=True)
    if n == 0:
        return pa.array([], type=SIGNATURE_TYPE)
    sign, _ = _engine()
    groups = _groups(n, [k_codes, w_codes, t_codes])
    if groups[0][1] is None:  # constant parameters: the common case
        params = _params(fn, ks[0], ws[0], toks[0])
        sigs, has = sign.sign_by_cost(sign.signer_for(params), text)
        return _fixed_lists(sigs, has, SIGNATURE_TYPE)
    signers = [(sign.signer_for(_params(fn, ks[i], ws[j], toks[t])), rows) for (i, j, t), rows in groups]
    parts = []
    for signer, rows in signers:
        sigs, has = sign.sign_by_cost(signer, text.take(pa.array(rows)))
        parts.append((rows[has], sigs[has]))
    return _scattered_lists(n, parts, SIGNATURE_TYPE)


def similarity(sig_a, sig_b) -> pa.Array:
    """``_lms_similarity(sig_a, sig_b)``: fraction of equal positions, Lance's f32 as DOUBLE."""
    fn = "minhash_similarity"
    a = _lists(fn, "sig_a", sig_a)
    b = _lists(fn, "sig_b", sig_b)
    both = a.valid & b.valid
    out = np.zeros(len(both), dtype=np.float64)
    rows = np.flatnonzero(both)
    if rows.size:
        ka, kb = a.lengths[rows], b.lengths[rows]
        differ = np.flatnonzero(ka != kb)
        if differ.size:
            i = differ[0]
            raise InvalidInputError(
                f"{fn}: sig_a has {ka[i]} values but sig_b has {kb[i]}; signatures are comparable only "
                "when computed with the same num_hashes"
            )
        if (ka == ka[0]).all():
            k = int(ka[0])
            same = (_gather(a, rows, k) == _gather(b, rows, k)).sum(axis=1)
        else:  # signatures of several lengths in one chunk
            seg = np.zeros(rows.size, dtype=np.int64)
            np.cumsum(ka[:-1], out=seg[1:])
            within = np.arange(int(ka.sum())) - np.repeat(seg, ka)
            eq = a.values[np.repeat(a.starts[rows], ka) + within] == b.values[np.repeat(b.starts[rows], ka) + within]
            same = np.add.reduceat(eq.astype(np.int64), seg)
        out[rows] = lance_similarity(same, ka).astype(np.float64)
    return _doubles(out, both)


@memoized(1024)
def _band_params(fn: str, k: int, b: Any) -> int:
    try:
        return MinHashParams(num_hashes=k, num_bands=number(b)).num_bands
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"{fn}: the signature has {k} values (its num_hashes); {exc}") from None


def band_keys(sig, num_bands) -> pa.Array:
    """``_lms_band_keys(sig, num_bands)``: Lance's band keys (``UBIGINT[num_bands]``)."""
    fn = "minhash_band_keys"
    lists = _lists(fn, "sig", sig)
    bs, b_codes = _encode(fn, "num_bands", num_bands)
    n = len(lists.valid)
    rows_all = np.flatnonzero(lists.valid)
    if rows_all.size == 0:
        return pa.nulls(n, type=BAND_KEYS_TYPE)
    ks = lists.lengths[rows_all]
    b_rows = None if b_codes is None else b_codes[rows_all]
    parts = []
    for (k_code, b_code), sub in _groups(rows_all.size, [None if (ks == ks[0]).all() else ks, b_rows]):
        rows = rows_all if sub is None else rows_all[sub]
        k = int(lists.lengths[rows[0]])
        b = _band_params(fn, k, bs[b_code])
        parts.append((rows, k, b))
    _, kernels = _engine()
    out = []
    for rows, k, b in parts:
        matrix = np.ascontiguousarray(_gather(lists, rows, k), dtype=np.uint16)
        out.append((rows, kernels.band_keys_serial(matrix.view(np.uint8).reshape(rows.size, 2 * k), b)))
    return _scattered_lists(n, out, BAND_KEYS_TYPE)


def shingle_jaccard(text_a, type_a, text_b, type_b, shingle_size, tokenizer) -> pa.Array:
    """``_lms_shingle_jaccard(a, typeof(a), b, typeof(b), shingle_size, to_json(tokenizer))``."""
    fn = "shingle_jaccard"
    a, b = column_array(text_a), column_array(text_b)
    n = len(a)
    check_text_types(fn, "text_a", type_a)
    check_text_types(fn, "text_b", type_b)
    ws, w_codes = _encode(fn, "shingle_size", shingle_size)
    toks, t_codes = _encode(fn, "tokenizer", tokenizer, nullable=True)
    if n == 0:
        return pa.array([], type=pa.float64())
    sign, kernels = _engine()
    out = np.full(n, np.nan)
    groups = [(sign.signer_for(_params(fn, _JACCARD_HASHES, ws[j], toks[t])), rows)
              for (j, t), rows in _groups(n, [w_codes, t_codes])]
    for signer, rows in groups:
        sa, sb = (a, b) if rows is None else (a.take(pa.array(rows)), b.take(pa.array(rows)))
        jac = kernels.set_jaccard_serial(*signer.shingle_sets(sa), *signer.shingle_sets(sb))
        if rows is None:
            out = jac
        else:
            out[rows] = jac
    valid = ~np.isnan(out)
    return _doubles(np.where(valid, out, 0.0), valid)


def lsh_probability(similarity_, num_bands, rows_per_band) -> pa.Array:
    """``_lms_lsh_probability(similarity, num_bands, rows_per_band)``: ``1 - (1 - s**r)**b``.

    Vectorised :func:`lance_minhash_sql.core.banding.lsh_probability`; the first invalid row is
    passed to it so that the messages are the same.
    """
    fn = "lsh_probability"
    s = column_array(similarity_)
    cols = {}
    for name, col in (("num_bands", num_bands), ("rows_per_band", rows_per_band)):
        col = column_array(col)
        if col.null_count:
            fix = _NULL_FIX.get(f"{fn}.{name}", _NULL_FIX[name])
            raise InvalidParameterError(f"{fn}: {name} is NULL; {fix}")
        cols[name] = col.to_numpy(zero_copy_only=False).astype(np.float64)
    b, r = cols["num_bands"], cols["rows_per_band"]
    valid = np.ones(len(s), dtype=bool) if s.null_count == 0 else s.is_valid().to_numpy(zero_copy_only=False)
    sv = pc.fill_null(s, 0.0).to_numpy(zero_copy_only=False).astype(np.float64)
    with np.errstate(invalid="ignore"):
        bad = (valid & ~((sv >= 0.0) & (sv <= 1.0))) | ~(b >= 1.0) | ~(r >= 1.0) | (b != np.floor(b)) | (r != np.floor(r))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        prefixed(fn, _lsh_probability_scalar, float(sv[i]) if valid[i] else 0.0, number(float(b[i])),
                 number(float(r[i])))
        raise InvalidParameterError(  # unreachable unless the scalar check is looser than ours
            f"{fn}: similarity={sv[i]!r}, num_bands={b[i]!r}, rows_per_band={r[i]!r} are invalid"
        )
    with np.errstate(over="ignore", under="ignore"):
        out = scurve(sv, b, r)
    return _doubles(out, valid)


# --------------------------------------------------------------------------- registry


UDFS: tuple[Udf, ...] = (
    Udf("_lms_signature", signature, ("VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "VARCHAR"),
            duck_type(SIGNATURE_TYPE), True),
    Udf("_lms_similarity", similarity, (duck_type(SIGNATURE_TYPE),) * 2, duck_type(pa.float64()), False),
    Udf("_lms_band_keys", band_keys, (duck_type(SIGNATURE_TYPE), "DOUBLE"), duck_type(BAND_KEYS_TYPE), True),
    Udf("_lms_shingle_jaccard", shingle_jaccard,
            ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "VARCHAR"), duck_type(pa.float64()), True),
    Udf("_lms_lsh_probability", lsh_probability, ("DOUBLE", "DOUBLE", "DOUBLE"), duck_type(pa.float64()), False),
)
