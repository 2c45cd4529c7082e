"""Every docstring example of the package runs, module by module (``>>>`` lines marked
``# doctest: +SKIP`` need a dataset and are shown, not run)."""

from __future__ import annotations

import doctest
import importlib
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "lance_minhash_sql"
MODULES = sorted(
    "lance_minhash_sql." + p.relative_to(PKG).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
    for p in PKG.rglob("*.py") if ">>>" in p.read_text())


def test_there_are_examples():
    assert "lance_minhash_sql.duck.sqltext" in MODULES and "lance_minhash_sql.core.arrays" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, name
