"""Python values written into SQL text: the one quoting rule for literals and identifiers.

Imports nothing heavy, so the command line can quote a path without loading pyarrow.

>>> literal("it's"), literal(None), literal(True), literal(2), ident('a"b')
("'it''s'", 'NULL', 'true', '2', '"a""b"')
"""

from __future__ import annotations

__all__ = ["literal", "ident"]


def literal(value) -> str:
    """A Python value as a SQL literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def ident(name: str) -> str:
    """A name as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
