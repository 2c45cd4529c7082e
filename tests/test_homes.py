"""Each helper lives in one home and is imported from there: read-only arrays and
``sorted_unique`` (core/arrays.py), SQL quoting (duck/sqltext.py), byte sizes in messages
(core/sizes.py), the build's budget shares (core/tuning.py)."""

from __future__ import annotations

import ast
import pathlib
import re

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "lance_minhash_sql"


def sources() -> dict[str, str]:
    return {p.relative_to(PKG).as_posix(): p.read_text(encoding="utf-8") for p in sorted(PKG.rglob("*.py"))}


def where(pattern: str) -> set[str]:
    rx = re.compile(pattern)
    return {path for path, text in sources().items() if rx.search(text)}


def defined(name: str) -> set[str]:
    return {path for path, text in sources().items()
            if any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name for n in ast.walk(ast.parse(text)))}


def test_each_helper_is_written_once():
    assert where(r"setflags\(write=False\)|writeable = False") == {"core/arrays.py"}
    assert where(r"""replace\("'", "''"\)|replace\('"', '""'\)""") == {"duck/sqltext.py"}
    assert where(r'\("GiB", 1 << 30\)') == {"core/sizes.py"}
    assert defined("sorted_unique") == {"core/arrays.py"}
    assert defined("readonly") == {"core/arrays.py"}


def test_no_layer_below_the_self_join_takes_sorted_unique_from_the_kernels():
    below = ("core/", "kernels/", "runtime/", "io/", "index/", "build/", "query/", "lifecycle/", "diagnostics/",
             "duck/", "faces/")
    takers = where(r"from lance_minhash_sql\.kernels\.lsh import[^\n]*sorted_unique")
    assert not {path for path in takers if path.startswith(below)}, takers


def test_the_builds_shares_are_the_tuning_constants(monkeypatch):
    from lance_minhash_sql.core import tuning
    from lance_minhash_sql.index import band_sorter

    budget = 1 << 30
    assert band_sorter.pipeline_bytes(budget) == min(int(budget * tuning.PIPELINE_SHARE), tuning.MAX_PIPELINE_BYTES)
    assert band_sorter.writer_bytes(budget) == tuning.MAX_WRITER_BYTES
    monkeypatch.setattr(band_sorter, "WRITER_SHARE", 1 / 64)
    assert band_sorter.writer_bytes(budget) == budget // 64  # read from the constant, not typed inline
    assert "index/band_sorter.py" not in where(r"budget // [48]\b|, (?:32|96|256) << 20\)")


def test_dead_code_is_gone():
    assert not defined("signature_similarity") and not defined("result_schema")


def test_sorted_unique():
    from lance_minhash_sql.core.arrays import sorted_unique

    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 1000):
        a = rng.integers(0, 50, n).astype(np.uint32)
        assert sorted_unique(a).tolist() == np.unique(a).tolist()


def test_each_rule_is_chosen_in_one_home():
    """The candidate floor (the estimate a candidate must reach to be verified) is chosen
    by core/banding.py: candidate_floor alone, its margin written once; star's choice of
    a twin among a member's candidates is kernels/star.py: _twin_of, which its two walking
    kernels call."""
    assert defined("candidate_floor") == {"core/banding.py"}
    assert where(r"VERIFY_SIGMAS \*") == {"core/banding.py"}
    assert where(r"exact_candidate_floor\([^)]*\) if ") == {"core/banding.py"}  # no caller chooses again
    assert defined("_twin_of") == {"kernels/star.py"}
    star = sources()["kernels/star.py"]
    assert star.count("_twin_of(") == 3 and "break" not in star  # its definition and the two kernels' calls


def test_spill_and_pool_each_name_one_thing():
    """The word "spill" is the build's band sort writing band rows to partition files (an array in
    a temporary file is io/file_arrays.py's, star's centres are written to disk); "pool" is
    a group's candidate signatures (selfjoin/pool.py), never worker threads or a
    segment's page and doc stores (index/stores.py)."""
    assert where(r"(?i)spill") <= {"index/band_sorter.py", "indexer/builder.py", "kernels/sort.py", "index/results.py",
                                   "extras/distributed.py", "core/params.py", "core/tuning.py", "faces/warmup.py"}
    assert not where(r"\b\w*pool\w*\s*=\s*(?:ThreadPool|ProcessPool)|(?:Thread|Process)PoolExecutor\([^)]*\) as \w*pool")
    assert not where(r"\b(?:pool_docs|pool_keys|sig_pool|rowid_pool|_POOL|_pool)\b")
