"""Imports flow one way: kernels <- io <- index <- duck <- cli; only io/ (and the benchmark
peers) import lance; kernels are pure numpy + numba."""

from __future__ import annotations

import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parents[1] / "lance_minhash_sql"
LAYER_ORDER = ["kernels", "io", "index", "duck", "cli"]


def imports_of(path: pathlib.Path) -> set[str]:
    """Absolute module names imported by a file (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    rel = path.relative_to(PKG.parent).with_suffix("")
    package = list(rel.parts[:-1])
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "lance_minhash_sql" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYER_ORDER else None


def modules():
    return [p for p in PKG.rglob("*.py")]


def test_there_are_modules_to_check():
    names = {p.relative_to(PKG).as_posix() for p in modules()}
    assert {"kernels/minhash.py", "io/segments.py", "index/sign.py", "cli.py"} <= names


def test_kernels_are_pure():
    # sys, threading, time: config.py's log of numba compilations and its one-line notice
    allowed_roots = {"numpy", "numba", "math", "os", "functools", "typing", "types", "__future__", "dataclasses",
                     "sys", "threading", "time"}
    for path in (PKG / "kernels").glob("*.py"):
        for mod in imports_of(path):
            root = mod.split(".")[0]
            if root == "lance_minhash_sql":
                assert mod.startswith("lance_minhash_sql.kernels"), (path.name, mod)
            else:
                assert root in allowed_roots, (path.name, mod)


def test_only_io_imports_lance():
    for path in modules():
        rel = path.relative_to(PKG).as_posix()
        if rel.startswith("io/") or rel == "bench.py":  # bench runs Lance itself as a peer
            continue
        for mod in imports_of(path):
            assert mod.split(".")[0] != "lance", (rel, mod)


def test_imports_point_down_the_layers():
    for path in modules():
        rel = path.relative_to(PKG)
        own = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if own not in LAYER_ORDER:
            continue
        for mod in imports_of(path):
            other = layer_of(mod)
            if other is not None:
                assert LAYER_ORDER.index(other) <= LAYER_ORDER.index(own), (rel.as_posix(), mod)
