"""Result records described once: a frozen dataclass is the record, its Arrow schema is
derived from the field annotations, and the SQL type from that schema (``duck/results.py``).

Plain annotations map to ``int`` -> int64, ``float`` -> float64, ``str`` -> string,
``bool`` -> bool, ``tuple[str, ...]`` -> list<string>, ``X | None`` -> X (nullable);
``Annotated[int, pa.int32()]`` (:data:`Int32`, :data:`UInt32List`) names a narrower
Arrow type where the SQL column has one.

>>> import dataclasses
>>> @dataclasses.dataclass(frozen=True)
... class Row:
...     name: str
...     count: Int32
...     ids: UInt32List
...     note: "str | None"
>>> record_schema(Row).types
[DataType(string), DataType(int32), ListType(list<item: uint32>), DataType(string)]
"""

from __future__ import annotations

import dataclasses
import types
import typing
from types import MappingProxyType
from typing import Annotated, Any

import pyarrow as pa

__all__ = ["Int32", "UInt32List", "record_schema", "record_dict"]

Int32 = Annotated[int, pa.int32()]
UInt32List = Annotated[tuple[int, ...], pa.list_(pa.uint32())]

_PLAIN = MappingProxyType({int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()})


def _arrow(hint: Any, where: str) -> tuple[pa.DataType, bool]:
    """``(type, nullable)`` of one annotation."""
    if typing.get_origin(hint) is Annotated:
        return typing.get_args(hint)[1], False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return _arrow(args[0], where)[0], True
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return pa.list_(_arrow(args[0], where)[0]), False
    if hint in _PLAIN:
        return _PLAIN[hint], False
    raise TypeError(f"{where}: annotation {hint!r} has no Arrow type; use int, float, str, bool, "
                    "tuple[X, ...], X | None or Annotated[X, <pyarrow type>]")


def record_schema(cls: type) -> pa.Schema:
    """The Arrow schema of a dataclass record: one field per dataclass field, in order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = []
    for f in dataclasses.fields(cls):
        t, nullable = _arrow(hints[f.name], f"{cls.__name__}.{f.name}")
        fields.append(pa.field(f.name, t, nullable=nullable))
    return pa.schema(fields)


SECONDS_DIGITS = 3  # timings in a SQL result: to the millisecond


def record_dict(record: Any) -> dict[str, Any]:
    """A record's fields by name, as ``pa.array(..., type=struct)`` takes them; timings
    (``seconds``, ``*_seconds``) rounded to the millisecond."""
    out = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    for name, value in out.items():
        if (name == "seconds" or name.endswith("_seconds")) and isinstance(value, float):
            out[name] = round(value, SECONDS_DIGITS)
    return out
