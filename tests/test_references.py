"""Every reference the docstrings and docs make to the package's code names something that
exists: a dotted ``lance_minhash_sql.x.y``, a ``path.py:name``, and the targets of
``:mod:`` / ``:func:`` / ``:data:`` / ``:class:`` / ``:meth:`` / ``:attr:`` / ``:exc:``
roles.

How a role's target is read (``~`` only shortens how it prints):

* ``lance_minhash_sql.a.b`` is absolute, and so is a target in another library
  (``numpy.sort``);
* leading dots are Python's relative-import rule from the module that holds the
  docstring (``.steps`` a sibling, ``..runtime.cache`` a module of the package above);
* ``kernels.bucket_pairs.pair_chunk`` (dots, no leading dot) is relative to the package root;
* a bare name (``pipeline_floor``, ``Class.method``, ``lock``) is a name of the module,
  of one of its classes (an attribute a method assigns, ``self.lock = ...``, or a
  dataclass field included), or of the package root's public API.

A ``path.py:name`` is looked up from the repository root, from ``lance_minhash_sql/`` and
(in a module) from the module's own folder.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "lance_minhash_sql"
ROLE = re.compile(r":(?:mod|func|data|class|meth|attr|exc|obj):`~?([\w.]+)`")
DOTTED = re.compile(r"\blance_minhash_sql(?:\.\w+)+")
FILE_NAME = re.compile(r"\b((?:[\w-]+/)*\w+\.py)::?([A-Za-z_]\w*(?:\.\w+)*)")
OTHER_LIBRARIES = {"numpy", "pyarrow", "lance", "duckdb", "numba", "ray", "xxhash", "glob", "os", "mmap",
                   "threading", "concurrent", "functools", "collections", "typing", "dataclasses"}

# Broken references of modules the self-join rewrite replaces (owned by selfjoin rewrite):
# checked to stay within this list, which only shrinks.
NOT_YET_RESOLVED: dict = {}  # (path, references) that may not resolve yet: none


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG).with_suffix("").as_posix().replace("/", ".")
    return ("lance_minhash_sql." + rel).removesuffix(".__init__").removesuffix(".")


@functools.cache
def resolves(dotted: str) -> bool:
    """``dotted`` names an importable module, or an attribute chain of one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for j, part in enumerate(parts[i:]):
            if hasattr(obj, part):
                obj = getattr(obj, part)
            elif isinstance(obj, type) and j == len(parts) - i - 1 and part in instance_attributes(obj):
                return True
            else:
                return False
        return True
    return False


@functools.cache
def instance_attributes(cls: type) -> frozenset[str]:
    """Attributes of ``cls`` set on its instances: dataclass fields, annotations and
    ``self.x = ...`` in the source of its methods."""
    names = set(getattr(cls, "__annotations__", {})) | set(getattr(cls, "__dataclass_fields__", {}))
    for klass in cls.__mro__:
        module = getattr(importlib.import_module(klass.__module__), "__file__", None)
        if not module or klass.__module__.split(".")[0] != "lance_minhash_sql":
            continue
        for node in ast.walk(ast.parse(pathlib.Path(module).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name == klass.__name__:
                names |= {t.attr for sub in ast.walk(node) if isinstance(sub, (ast.Assign, ast.AnnAssign))
                          for t in (sub.targets if isinstance(sub, ast.Assign) else [sub.target])
                          if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return frozenset(names)


def role_target_resolves(module: str, is_package: bool, target: str) -> bool:
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (dots - 1)]
        return resolves(".".join(base + [target.lstrip(".")]))
    head = target.split(".")[0]
    if head == "lance_minhash_sql" or head in OTHER_LIBRARIES:
        return resolves(target)
    if hasattr(builtins, target):
        return True
    if resolves(f"{module}.{target}") or resolves(f"lance_minhash_sql.{target}"):
        return True
    mod = importlib.import_module(module)
    if "." not in target:  # a method or attribute of one of the module's classes
        return any(isinstance(obj, type) and obj.__module__ == module and resolves(f"{module}.{name}.{target}")
                   for name, obj in vars(mod).items())
    return False


def modules() -> list[pathlib.Path]:
    return sorted(PKG.rglob("*.py"))


def broken_role_references(path: pathlib.Path) -> list[str]:
    module = module_name(path)
    text = path.read_text(encoding="utf-8")
    bad = [m.group(0) for m in ROLE.finditer(text)
           if not role_target_resolves(module, path.name == "__init__.py", m.group(1))]
    return bad + [m.group(0) for m in DOTTED.finditer(text) if not resolves(m.group(0))]


def broken_file_references(path: pathlib.Path) -> list[str]:
    bad = []
    text = path.read_text(encoding="utf-8")
    for m in FILE_NAME.finditer(text):
        rel, name = m.groups()
        places = [ROOT / rel, PKG / rel] + ([path.parent / rel] if path.suffix == ".py" else [])
        found = next((p for p in places if p.is_file()), None)
        if found is None:
            bad.append(m.group(0) + " (no such file)")
        elif found.is_relative_to(PKG):
            if not resolves(f"{module_name(found)}.{name}"):
                bad.append(m.group(0))
        elif not re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{name.split('.')[-1]}\b|^{name}\s*[:=]",
                           found.read_text(encoding="utf-8"), re.M):
            bad.append(m.group(0))
    return bad


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_references_in_the_package_resolve(path):
    bad = set(broken_role_references(path) + broken_file_references(path))
    bad -= NOT_YET_RESOLVED.get(path.relative_to(PKG).as_posix(), set())
    assert not bad, sorted(bad)


@pytest.mark.parametrize("path", sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "CONTRIBUTING.md"],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_references_in_the_docs_resolve(path):
    text = path.read_text(encoding="utf-8")
    bad = [m.group(0) for m in DOTTED.finditer(text) if not resolves(m.group(0))] + broken_file_references(path)
    assert not bad, bad


def test_a_stale_reference_is_caught(tmp_path):
    """The checks fail on what no longer exists, whatever form the reference takes."""
    assert not resolves("lance_minhash_sql.params.DEFAULT_SELF_JOIN_MEMORY")
    assert resolves("lance_minhash_sql.core.params.DEFAULT_SELF_JOIN_MEMORY")
    assert not role_target_resolves("lance_minhash_sql.index.entries", False, ".cache")
    assert role_target_resolves("lance_minhash_sql.index.entries", False, "..runtime.cache")
    assert role_target_resolves("lance_minhash_sql.index.entries", False, "lock")  # self.lock of SegmentEntry
    assert not role_target_resolves("lance_minhash_sql.index.entries", False, "no_such_attribute")
    page = tmp_path / "page.md"
    page.write_text("`query/topk.py:search_ids` and `query/topk.py:no_such_function`\n", encoding="utf-8")
    assert broken_file_references(page) == ["query/topk.py:no_such_function"]


# Examples of modules the self-join rewrite replaces (owned by selfjoin rewrite).
DEEP_EXAMPLES_NOT_YET_MOVED = {"selfjoin/clusters.py", "selfjoin/dedup.py", "selfjoin/pairs.py"}
DEEP_IMPORT = re.compile(r">>> (?:from (lance_minhash_sql\.[\w.]+) import ([\w, ]+)|import (lance_minhash_sql\.[\w.]+))")


def deep_public_imports(text: str) -> list[str]:
    """Docstring examples that import a public name from a module path instead of the root."""
    import lance_minhash_sql as lms

    public = set(lms.__all__)
    bad = []
    for m in DEEP_IMPORT.finditer(text):
        if m.group(3) or {n.strip() for n in m.group(2).split(",")} <= public:
            bad.append(m.group(0))
    return bad


def test_examples_import_public_names_from_the_package_root():
    assert deep_public_imports(">>> from lance_minhash_sql.query.topk import search") == [
        ">>> from lance_minhash_sql.query.topk import search"]
    assert deep_public_imports(">>> from lance_minhash_sql.core.sizes import parse_bytes") == []
    bad = {p.relative_to(PKG).as_posix(): deep_public_imports(p.read_text(encoding="utf-8")) for p in modules()}
    bad = {path: found for path, found in bad.items() if found and path not in DEEP_EXAMPLES_NOT_YET_MOVED}
    assert not bad, bad
