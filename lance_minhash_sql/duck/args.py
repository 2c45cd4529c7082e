"""SQL arguments decoded once, for every UDF, and the record of a UDF's SQL signature.

How arguments arrive: an Arrow UDF gets one pyarrow array per argument for a chunk of up
to 2048 rows (parameters too: a constant is a column of equal values); a native UDF gets
one Python value per argument and row. The macros declare integer arguments ``DOUBLE``,
so ``1.5`` or ``5e9`` reach the package's own checks (``lance_minhash_sql/core/checks.py``)
and messages instead of a DuckDB binder error, and pass nested arguments (tokenizer,
``merge``, storage options) as their ``to_json()`` text.

The same rules for every UDF:

* :func:`require`: NULL where a value is required is an :class:`InvalidInputError`
  ``"<function>: <name> is NULL; pass a value"``;
* :func:`number`: ``128.0`` becomes ``128`` (messages then quote what the user typed);
  :func:`integer` also refuses a fraction; :func:`flag` takes true or false only;
* :func:`json_value`: the value of a ``to_json()`` text; :func:`tokenizer`: tokenizer
  options from one (a JSON object, or text holding one);
* :func:`prefixed`: a parameter error raised by the Python API gets the SQL function's
  name in front (DuckDB puts the exception class before it);
* :func:`as_number`: the table macros pass each numeric argument through the macro
  ``_lms_number(function, name, value)`` of ``sql/scalar.sql``, which hands it to this
  UDF with its ``try_cast`` to DOUBLE and its type: a value that is no number (text, a
  boolean, a list, ...) is an error naming the argument, where DuckDB would say only
  ``Could not convert string 'abc' to DOUBLE``;
* values and names written into generated SQL are :mod:`.sqltext`'s.
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any, Callable, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from lance_minhash_sql.runtime.cache import memoized
from lance_minhash_sql.core.checks import check_bool, check_clustering, check_int, check_verify, verify_or_exact
from lance_minhash_sql.core.errors import InvalidInputError, InvalidParameterError
from lance_minhash_sql.core.params import TokenizerParams
from lance_minhash_sql.duck.sqltext import literal

__all__ = [
    "Udf",
    "column",
    "scalar_rows",
    "require",
    "number",
    "integer",
    "flag",
    "clustering",
    "verify",
    "text",
    "check_text_types",
    "json_value",
    "tokenizer",
    "prefixed",
    "as_number",
    "ARG_UDFS",
]


class Udf(NamedTuple):
    """One ``con.create_function(name, function, parameters, return_type, ...)`` call."""

    name: str
    function: Callable
    parameters: tuple[str, ...]
    return_type: str
    side_effects: bool  # True: never constant-folded at plan time (heavy work, or reads a dataset)
    arrow: bool = True  # Arrow in and out (batches); False: Python values, one call per row


def column(values) -> pa.Array:
    """An argument column as one Arrow array."""
    if isinstance(values, pa.ChunkedArray):
        return values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()
    return values


def scalar_rows(fn: str, **columns) -> list[dict[str, Any]]:
    """The rows of a table UDF's argument columns, as Python values by argument name."""
    arrays = {k: column(v).to_pylist() for k, v in columns.items()}
    n = len(next(iter(arrays.values())))
    return [{k: arrays[k][i] for k in arrays} for i in range(n)]


def require(fn: str, row: dict, *names: str) -> None:
    """Each of ``names`` has a value in ``row``."""
    for name in names:
        if row[name] is None:
            raise InvalidInputError(f"{fn}: {name} is NULL; pass a value")


def number(x: Any) -> Any:
    """``128.0`` -> ``128``; anything else as it is, for the Python API to check."""
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return x


def integer(fn: str, name: str, value: Any) -> int | None:
    """NULL, or a whole number (a ``DOUBLE`` argument with no fraction) as an ``int``."""
    return None if value is None else prefixed(fn, check_int, name, value, "pass a whole number")


def flag(fn: str, name: str, value: Any) -> bool:
    """true or false."""
    return prefixed(fn, check_bool, name, value)


def clustering(fn: str, value: Any) -> str:
    """'components' or 'star' (:func:`lance_minhash_sql.core.checks.check_clustering`)."""
    return prefixed(fn, check_clustering, value)


def verify(fn: str, value: Any) -> str:
    """'estimate' or 'exact' (:func:`lance_minhash_sql.core.checks.check_verify`)."""
    return prefixed(fn, check_verify, value)


def verify_exact(fn: str, value: Any, exact: Any) -> str:
    """``verify``, with ``exact := true`` as its older spelling
    (:func:`lance_minhash_sql.core.checks.verify_or_exact`); ``exact := NULL`` is refused
    as every NULL argument is."""
    require(fn, {"exact": exact}, "exact")
    return prefixed(fn, verify_or_exact, value, flag(fn, "exact", exact))


def executor(fn: str, name: Any, ray_address: Any):
    """The executor named ``name`` (:func:`lance_minhash_sql.api.entries.executor_of`)."""
    from lance_minhash_sql.api.entries import executor_of

    return prefixed(fn, executor_of, name, ray_address)


def text(fn: str, name: str, value: Any) -> str:
    """A text value (a query): NULL or another type is an :class:`InvalidInputError`."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{fn}: {name} is {'NULL' if value is None else type(value).__name__}; pass a text")
    return value


# ``typeof(x)`` values accepted for text arguments. An untyped NULL literal is '"NULL"'.
_TEXT_TYPES = frozenset({"VARCHAR", '"NULL"'})


def check_text_types(fn: str, name: str, types) -> None:
    """A text argument's ``typeof()`` column: anything but VARCHAR is refused with the
    conversion that fixes it."""
    for t in pc.unique(column(types)).to_pylist():
        if t in _TEXT_TYPES:
            continue
        if t == "BLOB":
            fix = f"decode UTF-8 bytes first, e.g. {fn}(decode({name}), ...)"
        elif t.endswith("]"):
            fix = f"join the list into one string first, e.g. {fn}(array_to_string({name}, ' '), ...)"
        elif t == "JSON":
            fix = f"extract the text, e.g. json_extract_string({name}, '$.field'), or cast with {name}::VARCHAR"
        else:
            fix = f"cast it, e.g. {fn}(CAST({name} AS VARCHAR), ...), if its text form is what you mean"
        raise InvalidInputError(f"{fn}: {name} has type {t}, but a VARCHAR is required; {fix}")


def json_value(value: str | None) -> Any:
    """The value of a ``to_json()`` text (``None`` for NULL); text that is not JSON (a
    UDF called without its macro) is returned as it is."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


@memoized(256)
def tokenizer(fn: str, value: str | None) -> TokenizerParams:
    """Tokenizer options from the macro's ``to_json(tokenizer)``.

    ``to_json`` of a VARCHAR is a JSON string holding the user's text (parsed again as a
    JSON object); of a STRUCT, MAP or JSON value it is the object itself; NULL (or JSON
    ``null``) means the defaults.
    """
    options = json_value(value)
    if isinstance(options, str) and options.strip():
        inner = json_value(options)
        if inner is not options and not isinstance(inner, dict):  # JSON, but not an object
            raise InvalidParameterError(
                f"{fn}: tokenizer={options!r} must be a JSON object of tokenizer options, e.g. "
                "'{\"base_tokenizer\": \"whitespace\"}' or {'base_tokenizer': 'whitespace'}")
    return prefixed(fn, TokenizerParams.parse, options)


def prefixed(fn: str, make: Callable, *args, **kwargs):
    """``make(*args, **kwargs)``, with the SQL function's name in front of a parameter error."""
    try:
        return make(*args, **kwargs)
    except InvalidParameterError as exc:
        if str(exc).startswith(f"{fn}: "):  # prefixed already, by a check inside ``make``
            raise
        raise type(exc)(f"{fn}: {exc}") from None


# an example value of each numeric argument of the table macros (sql/*.sql), for the fix
_NUMBER_EXAMPLES = MappingProxyType({"threshold": "0.8", "k": "10", "num_hashes": "128", "num_bands": "16",
                                     "shingle_size": "3", "sample": "2000", "sample_rows": "2000", "seed": "0",
                                     "top": "10"})


_NOT_NUMBERS = frozenset({"VARCHAR", "BOOLEAN", "BLOB"})  # types DuckDB would cast, that are no number here


def as_number(fn: str, name: str, cast: float | None, sql_type: str, value: str | None) -> float | None:
    """A numeric argument of a table macro (``_lms_number`` in ``sql/scalar.sql``): ``cast``,
    its ``try_cast`` to DOUBLE (NULL stays NULL); a value of a type in :data:`_NOT_NUMBERS`,
    or one the cast refuses, is an :class:`InvalidParameterError`: ``minhash_pairs: threshold
    := 'abc' must be a number, not VARCHAR; pass e.g. threshold := 0.8``."""
    if value is None or (cast is not None and sql_type not in _NOT_NUMBERS):
        return cast
    shown = literal(value) if sql_type == "VARCHAR" else value
    example = _NUMBER_EXAMPLES.get(name)
    fix = f"pass e.g. {name} := {example}" if example else "pass a number"
    raise InvalidParameterError(f"{fn}: {name} := {shown} must be a number, not {sql_type}; {fix}")


ARG_UDFS: tuple[Udf, ...] = (
    Udf("_lms_as_number", as_number, ("VARCHAR", "VARCHAR", "DOUBLE", "VARCHAR", "VARCHAR"), "DOUBLE", False, False),
)
