"""Shared fixtures: Lance native indexes as oracles; a local S3-compatible server."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest

sys.path.insert(0, os.path.dirname(__file__))


@dataclass
class NativeIndex:
    """Files of a MINHASHLSH index that pylance built (the oracle: docs/index-format.md)."""

    dataset: object
    signatures: pa.Table  # _rowid, signature
    bands: pa.Table  # band_key, doc_id
    page_table: np.ndarray
    bands_metadata: dict
    signatures_metadata: dict


def copies_table(copies: int, others: int, seed: int) -> pa.Table:
    """One text of 40 words of the corpus vocabulary ``copies`` times, then ``others``
    unrelated texts of 30 words: a giant bucket among ordinary rows."""
    from lance_minhash_sql.faces.corpus import vocabulary

    rng = np.random.default_rng(seed)
    vocab = np.array(vocabulary().to_pylist())
    same = " ".join(rng.choice(vocab, 40))
    return pa.table({"text": pa.array([same] * copies + [" ".join(rng.choice(vocab, 30)) for _ in range(others)])})


def groups_table(rng, texts: list[str], groups: int, max_copies: int, change_every: int, unrelated: int) -> pa.Table:
    """``texts``, then ``groups`` groups of 2 to ``max_copies - 1`` texts of the same 60
    words of the corpus vocabulary (copy ``c`` with one word changed unless ``c %
    change_every == 0``), then ``unrelated`` texts of 5 to 49 words, shuffled; with an
    ``id`` column and a ``quality`` column full of ties (0, 1, 2)."""
    from lance_minhash_sql.faces.corpus import vocabulary

    vocab = np.array(vocabulary().to_pylist())
    texts = list(texts)
    for _ in range(groups):
        base = rng.choice(vocab, 60)
        for c in range(int(rng.integers(2, max_copies))):
            words = base.copy()
            if c % change_every:
                words[rng.integers(0, 60)] = rng.choice(vocab)
            texts.append(" ".join(words))
    for _ in range(unrelated):
        texts.append(" ".join(rng.choice(vocab, int(rng.integers(5, 50)))))
    texts = [texts[i] for i in rng.permutation(len(texts))]
    n = len(texts)
    return pa.table({"id": pa.array(np.arange(n)), "text": pa.array(texts),
                     "quality": pa.array(rng.integers(0, 3, n), pa.int32())})


def interrupted_after_first(real):
    """A stand-in for the generator function ``real``: its first item, then a Ctrl-C
    (``KeyboardInterrupt``) in the middle of the run."""
    def interrupted(*a, **k):
        it = real(*a, **k)
        yield next(it)
        raise KeyboardInterrupt
    return interrupted


def indexed_corpus(uri: str, rows: int, rows_per_fragment: int, delete: str, appended: int = 0) -> str:
    """The synthetic corpus (``faces/corpus.py``) of ``rows`` rows at ``uri``, indexed by us,
    then ``appended`` more rows of it (ids from ``rows`` on: fragments no segment covers),
    then the rows matching ``delete`` deleted (gaps the search and the self-join must skip)."""
    import lance

    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.faces.corpus import write_corpus

    write_corpus(uri, rows, rows_per_fragment=rows_per_fragment)
    build_index(uri, "text")
    if appended:
        write_corpus(uri, appended, rows_per_fragment=rows_per_fragment, mode="append", start=rows)
    lance.dataset(uri).delete(delete)
    return uri


def build_native_index(uri: str, table: pa.Table, params, column: str = "text", **write_kwargs) -> NativeIndex:
    import lance
    from lance.file import LanceFileReader
    from lance.indices import IndexConfig

    ds = lance.write_dataset(table, uri, **write_kwargs)
    ds.create_scalar_index(column, IndexConfig("MINHASHLSH", params.to_lance_config()))
    ds = lance.dataset(uri)
    seg = os.path.join(uri, "_indices", str(ds.describe_indices()[0].segments[0].uuid))
    sig_reader = LanceFileReader(os.path.join(seg, "signatures.lance"))
    sigs = sig_reader.read_all().to_table()
    band_reader = LanceFileReader(os.path.join(seg, "bands.lance"))
    bands = band_reader.read_all().to_table()
    meta = {k.decode(): v.decode() for k, v in (bands.schema.metadata or {}).items()}
    smeta = {k.decode(): v.decode() for k, v in (sigs.schema.metadata or {}).items()}
    page_table = np.frombuffer(band_reader.read_global_buffer(int(meta["minhash_lsh_page_table_buffer"])), dtype="<u8")
    return NativeIndex(ds, sigs, bands, page_table, meta, smeta)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (``CI=true``) a test skipped for a missing extra or tool fails instead: CI
    installs everything the suite uses, so a skip there hides a broken install."""
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (CI=true), where nothing may be missing: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a whole module skipped at import (``pytest.importorskip`` at its top)."""
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and report.skipped:
        report.outcome = "failed"
        report.longrepr = f"module skipped in CI (CI=true), where nothing may be missing: {report.longrepr}"


@pytest.fixture
def native_index(tmp_path):
    counter = iter(range(1000))

    def make(table, params, **kw):
        return build_native_index(str(tmp_path / f"native{next(counter)}.lance"), table, params, **kw)

    return make


@pytest.fixture(scope="session")
def s3():
    """A moto S3 server on localhost (tests/s3server.py), one per test session; each test
    makes its own bucket with ``s3.make_bucket(name)``."""
    import logging

    from s3server import S3Server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = S3Server().start()
    yield server
    server.stop()


TIGHT_BUDGET = 256 << 10  # a self-join budget no test corpus fits: many groups, windows, chunked buckets


@pytest.fixture(params=["default", "tight", "large"])
def self_join_budget(request, monkeypatch):
    """Runs a self-join oracle test at three memory budgets (``selfjoin/steps.py``): the
    default; :data:`TIGHT_BUDGET` with shards of 1,024 band rows, so a test corpus's
    candidates are pooled in many groups and its larger buckets in windows and chunks;
    and 64 GiB, where one group holds everything. The budget is the default the
    functions take when no ``memory_limit`` is given (Python, SQL and CLI alike); the
    answers must not change."""
    from lance_minhash_sql.core import budget as core_budget
    from lance_minhash_sql.selfjoin import sizing

    if request.param == "tight":
        monkeypatch.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", TIGHT_BUDGET)
        monkeypatch.setattr(sizing, "MIN_SHARD_ROWS", 1024)
    elif request.param == "large":
        monkeypatch.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", 64 << 30)
    return request.param
