"""A corpus of real English text from files installed on this machine, written to a Lance
dataset with our index, for ``benchmarks/quality.py --uri``.

    python benchmarks/real_text.py /tmp/bench/real.lance
    python benchmarks/quality.py --uri /tmp/bench/real.lance

Rows (column ``text``, with ``source``: the file it came from, and ``kind``):

* ``docstring``: every module, class and function docstring of the Python files of the
  site-packages folders (``--site-packages``, default: this interpreter's), of at least
  :data:`MIN_WORDS` words;
* ``licence``: every licence file of the installed distributions (``*.dist-info/LICEN[CS]E*``,
  ``*.dist-info/licenses/*``, ``COPYING*``, ``NOTICE*``) and every ``/usr/share/doc/*/copyright``
  file, whole;
* ``readme``: the paragraphs (blank-line separated) of each distribution's ``METADATA``
  description, of at least :data:`MIN_WORDS` words.

Near-duplicates are those of real software: licence texts copied with other copyright
lines, docstrings copied between classes and versions, README paragraphs shared by sibling
packages. Files are read in sorted path order, so a machine with the same packages gives
the same rows.
"""

from __future__ import annotations

import argparse
import ast
import glob
import os
import sys
import sysconfig
import warnings

import pyarrow as pa

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

MIN_WORDS = 10
LICENCE_NAMES = ("LICENSE*", "LICENCE*", "COPYING*", "NOTICE*", "licenses/*", "licenses/**/*")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def docstrings(path: str):
    """The docstrings of a Python file (module, classes, functions)."""
    src = _read(path)
    if src is None:
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield doc


def licences(site: str):
    seen = set()
    for info in sorted(glob.glob(os.path.join(site, "*.dist-info"))):
        for pattern in LICENCE_NAMES:
            for path in sorted(glob.glob(os.path.join(info, pattern), recursive=True)):
                if path not in seen and os.path.isfile(path):
                    seen.add(path)
                    yield path


def readme_paragraphs(metadata: str):
    text = _read(metadata)
    if text is None:
        return
    head, _, body = text.partition("\n\n")  # headers, then the description
    for para in body.split("\n\n"):
        yield para.strip()


def rows(sites: list[str], docs: str = "/usr/share/doc"):
    """``(text, source, kind)`` of every row, in a fixed order."""
    for site in sites:
        for path in sorted(glob.glob(os.path.join(site, "**", "*.py"), recursive=True)):
            for doc in docstrings(path):
                yield doc, path, "docstring"
        for path in licences(site):
            text = _read(path)
            if text:
                yield text, path, "licence"
        for path in sorted(glob.glob(os.path.join(site, "*.dist-info", "METADATA"))):
            for para in readme_paragraphs(path):
                yield para, path, "readme"
    for path in sorted(glob.glob(os.path.join(docs, "*", "copyright"))):
        text = _read(path)
        if text:
            yield text, path, "licence"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("output", help="the Lance dataset to write (must not exist)")
    ap.add_argument("--site-packages", action="append", help="a site-packages folder (repeatable; default: this "
                    "interpreter's)")
    args = ap.parse_args()
    sites = args.site_packages or [sysconfig.get_paths()["purelib"]]
    texts, sources, kinds = [], [], []
    for text, source, kind in rows(sites):
        if len(text.split()) >= MIN_WORDS:
            texts.append(text)
            sources.append(source)
            kinds.append(kind)
    import lance

    from lance_minhash_sql.indexer.builder import build_index

    table = pa.table({"text": pa.array(texts, pa.string()), "source": sources, "kind": kinds})
    lance.write_dataset(table, args.output)
    build_index(args.output, "text")
    counts = {k: kinds.count(k) for k in sorted(set(kinds))}
    print(f"{args.output}: {len(texts):,} rows ({', '.join(f'{v:,} {k}' for k, v in counts.items())}), "
          f"{sum(len(t) for t in texts) / 2**20:.1f} MiB of text")


if __name__ == "__main__":
    main()
