"""Runs the SQL fixture files in ``tests/sql/*.sql``, each case on a fresh ``connect()``.

Fixture format (sqllogictest-like)::

    # name: known-answer signature (docs/signatures.md)
    SELECT minhash_signature('The quick brown fox', num_hashes := 4, shingle_size := 2)
    ----
    [45071, 22998, 20762, 52524]

* A case starts at a ``# name: ...`` line. Its SQL runs up to a line ``----``; it may hold
  several statements separated by ``;`` (the result of the last one is checked).
* After ``----`` come the expected rows, one per line, until a blank line or the next
  case. No lines: the query returns no rows.
* A row is its values separated by one tab. A value is written as Python's ``repr`` of
  what DuckDB's ``fetchall()`` returns (``1.0``, ``'abc'``, ``[1, 2]``, ``True``), except
  that SQL NULL is written ``NULL``.
* ``error: <Class>: <text>`` expects the statement to fail. ``<Class>`` is either one of
  the package's exceptions (``InvalidParameterError``, ...), which must appear in the
  message as ``<Class>: ``, or a DuckDB exception class (``ConversionException``), which
  must be the raised type. ``<text>`` must occur in the message.
* Other lines starting with ``#`` are comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

import lance_minhash_sql as lms
from lance_minhash_sql.core import errors

FIXTURES = Path(__file__).parent / "sql"
PACKAGE_ERRORS = set(errors.__all__)


@dataclass
class Case:
    file: str
    line: int
    name: str
    sql: str
    expected: list[str]

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}:{self.name}"


def parse(path: Path) -> list[Case]:
    cases: list[Case] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("# name:"):
            if line.strip() and not line.startswith("#"):
                raise ValueError(f"{path.name}:{i + 1}: text outside a case: {line!r}")
            i += 1
            continue
        start, name = i + 1, line[len("# name:"):].strip()
        i += 1
        sql: list[str] = []
        while i < len(lines) and lines[i] != "----":
            if lines[i].startswith("# name:"):
                raise ValueError(f"{path.name}:{start}: case {name!r} has no ---- line")
            if not lines[i].startswith("#"):
                sql.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"{path.name}:{start}: case {name!r} has no ---- line")
        i += 1
        expected: list[str] = []
        while i < len(lines) and lines[i].strip() and not lines[i].startswith("# name:"):
            expected.append(lines[i])
            i += 1
        if not "\n".join(sql).strip():
            raise ValueError(f"{path.name}:{start}: case {name!r} has no SQL")
        cases.append(Case(path.name, start, name, "\n".join(sql), expected))
    return cases


def render(value) -> str:
    return "NULL" if value is None else repr(value)


ALL_CASES = [case for path in sorted(FIXTURES.glob("*.sql")) for case in parse(path)]


def test_fixtures_exist_and_have_unique_names():
    assert len(ALL_CASES) >= 50
    ids = [(c.file, c.name) for c in ALL_CASES]
    assert len(ids) == len(set(ids)), "duplicate case names"


def test_every_scalar_macro_has_fixtures():
    scalar_sql = (Path(lms.__file__).parent / "sql" / "scalar.sql").read_text()
    macros = re.findall(r"CREATE OR REPLACE TEMP MACRO ([a-z]\w*)\(", scalar_sql)  # public: not _lms_*
    assert len(macros) == 5
    used = "\n".join(c.sql for c in ALL_CASES)
    for macro in macros:
        assert re.search(rf"\b{macro}\(", used), f"no fixture uses {macro}"
        assert any(re.search(rf"\b{macro}\(", c.sql) and c.expected[:1] and c.expected[0].startswith("error:")
                   for c in ALL_CASES), f"no error fixture for {macro}"


def test_parser_rejects_malformed_files(tmp_path):
    bad = tmp_path / "bad.sql"
    bad.write_text("# name: a\nSELECT 1\n")
    with pytest.raises(ValueError, match="no ---- line"):
        parse(bad)
    bad.write_text("SELECT 1\n----\n1\n")
    with pytest.raises(ValueError, match="outside a case"):
        parse(bad)


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_sql_fixture(case: Case):
    con = lms.connect()
    try:
        if case.expected and case.expected[0].startswith("error:"):
            assert len(case.expected) == 1, "an error case has exactly one expected line"
            cls, _, text = case.expected[0][len("error:"):].strip().partition(": ")
            assert cls and text, f"write 'error: <Class>: <text>', got {case.expected[0]!r}"
            with pytest.raises(duckdb.Error) as info:
                con.execute(case.sql).fetchall()
            message = str(info.value)
            if cls in PACKAGE_ERRORS:
                assert f"{cls}: " in message, message
            else:
                assert type(info.value).__name__ == cls, f"{type(info.value).__name__}: {message}"
            assert text in message, message
        else:
            rows = con.execute(case.sql).fetchall()
            got = ["\t".join(render(v) for v in row) for row in rows]
            assert got == case.expected
    finally:
        con.close()
