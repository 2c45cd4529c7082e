"""install()/connect() and the scalar UDFs against the Python engine, at table scale."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import duckdb
import naive
import numpy as np
import pyarrow as pa
import pytest
from torture import TORTURE_TEXTS

import lance_minhash_sql as lms
from lance_minhash_sql.core.banding import lsh_probability
from lance_minhash_sql.core.params import MinHashParams, TokenizerParams
from lance_minhash_sql.duck import udfs
from lance_minhash_sql.duck.install import ALL_UDFS, macro_files
from lance_minhash_sql.index.sign import Signer

KNOWN = "SELECT minhash_signature('The quick brown fox', num_hashes := 4, shingle_size := 2)"
KNOWN_SIG = [45071, 22998, 20762, 52524]


def random_texts(n: int, seed: int = 0, null_every: int = 97) -> list[str | None]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(400)] + ["Café", "ÉCOLE", "naïve", "x" * 45]
    texts = [" ".join(rng.choice(words, int(rng.integers(0, 40)))) for _ in range(n)]
    for i in range(0, n, null_every):
        texts[i] = None
    return texts


def load(con, texts, name="docs", **extra):
    tbl = pa.table({"id": pa.array(range(len(texts)), pa.int64()), "t": pa.array(texts, pa.string()), **extra})
    con.register("_arrow_src", tbl)
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM _arrow_src")
    con.unregister("_arrow_src")


def python_signatures(texts, params=MinHashParams()):
    sigs, has = Signer(params).sign(pa.array(texts, pa.string()))
    return [s.tolist() if h else None for s, h in zip(sigs, has)]


def udf_names(con) -> list[str]:
    """The package's Python UDFs registered on ``con`` (its ``_lms_*`` helper macros apart)."""
    return [r[0] for r in con.execute(
        "SELECT function_name FROM duckdb_functions() WHERE function_name LIKE '\\_lms\\_%' ESCAPE '\\' "
        "AND function_type <> 'macro'"
    ).fetchall()]


# --------------------------------------------------------------------------- install


def test_install_on_a_connection_returns_it_and_registers_every_udf():
    con = duckdb.connect()
    with pytest.raises(duckdb.CatalogException):
        con.execute(KNOWN)
    assert lms.install(con) is con
    assert con.execute(KNOWN).fetchall() == [(KNOWN_SIG,)]
    assert sorted(udf_names(con)) == sorted(s.name for s in ALL_UDFS)


def test_install_on_a_cursor():
    con = lms.connect()
    cur = con.cursor()
    # UDFs are per database, macros per connection: the cursor sees the former only.
    assert cur.execute("SELECT _lms_similarity([1, 2]::USMALLINT[], [1, 3]::USMALLINT[])").fetchall() == [(0.5,)]
    with pytest.raises(duckdb.CatalogException, match="minhash_signature"):
        cur.execute(KNOWN)
    assert lms.install(cur) is cur
    assert cur.execute(KNOWN).fetchall() == [(KNOWN_SIG,)]


def test_install_on_the_default_connection():
    con = lms.install()
    assert con is duckdb.default_connection()
    assert duckdb.sql("SELECT minhash_similarity([1, 2, 3, 4], [1, 2, 3, 5])").fetchall() == [(0.75,)]


def catalogue(con) -> list[tuple]:
    """Every function and macro of the package on ``con``, one row per overload."""
    return sorted(con.execute(
        "SELECT function_name, function_type, parameters::VARCHAR FROM duckdb_functions() "
        "WHERE function_name LIKE 'minhash\\_%' ESCAPE '\\' OR function_name LIKE '\\_lms\\_%' ESCAPE '\\'"
    ).fetchall())


def test_install_twice_is_idempotent(record_property):
    """Installing again adds no overload and no duplicate UDF, and the functions still answer
    (the timings are printed as figures, not asserted)."""
    con = duckdb.connect()
    t0 = time.perf_counter()
    lms.install(con)
    first = time.perf_counter() - t0
    once = catalogue(con)
    assert {name for name, _, _ in once} >= {s.name for s in ALL_UDFS} | {"minhash_signature", "minhash_search"}
    t0 = time.perf_counter()
    for _ in range(20):
        lms.install(con)
    repeated = (time.perf_counter() - t0) / 20
    record_property("install_first_ms", round(first * 1e3, 2))
    record_property("install_repeated_ms", round(repeated * 1e3, 2))
    print(f"install: first {first * 1e3:.1f} ms, repeated {repeated * 1e3:.1f} ms")
    assert sorted(udf_names(con)) == sorted(s.name for s in ALL_UDFS)  # no duplicates
    assert catalogue(con) == once
    assert con.execute(KNOWN).fetchall() == [(KNOWN_SIG,)]


def test_install_on_a_connection_with_a_half_fetched_result():
    con = duckdb.connect()
    con.execute("SELECT * FROM range(100000)")
    assert con.fetchone() == (0,)
    lms.install(con)  # create_function alone would raise ResourceInUseException here
    assert con.execute(KNOWN).fetchall() == [(KNOWN_SIG,)]


def test_two_connections_to_the_same_database(tmp_path):
    path = str(tmp_path / "same.duckdb")
    a = lms.connect(path)
    b = duckdb.connect(path, config={"allow_unredacted_secrets": True})  # a file opens with one configuration
    assert udf_names(b)  # registered once, for the database
    lms.install(b)  # the UDFs already exist: only the macros are created
    for con in (a, b):
        assert con.execute(KNOWN).fetchall() == [(KNOWN_SIG,)]
    a.execute("CREATE TABLE t AS SELECT 'The quick brown fox' AS x")
    assert b.execute("SELECT minhash_signature(x, 4, 2) FROM t").fetchall() == [(KNOWN_SIG,)]
    a.close()
    b.close()


def test_connect_to_a_file_a_plain_connection_opened(tmp_path):
    path = str(tmp_path / "plain-first.duckdb")
    plain = duckdb.connect(path)
    con = lms.connect(path)  # the file is open without unredacted secrets: connect with it off too
    assert con.execute("SELECT current_setting('allow_unredacted_secrets')").fetchone() == (False,)
    assert con.execute(KNOWN).fetchall() == [(KNOWN_SIG,)]
    con.close()
    plain.close()


def test_connections_to_different_databases(tmp_path):
    a = lms.connect()
    plain = duckdb.connect()
    assert udf_names(plain) == []  # another database: nothing registered there
    b = lms.connect(str(tmp_path / "other.duckdb"))
    for con in (a, b):
        assert con.execute(KNOWN).fetchall() == [(KNOWN_SIG,)]


def test_connect_passes_duckdb_settings():
    con = lms.connect(threads=1, memory_limit="512MB")
    assert con.execute("SELECT current_setting('threads')").fetchone() == (1,)
    assert con.execute(KNOWN).fetchall() == [(KNOWN_SIG,)]


def test_install_on_a_read_only_database(tmp_path):
    path = str(tmp_path / "ro.duckdb")
    duckdb.connect(path).close()
    con = lms.connect(path, read_only=True)
    assert con.execute(KNOWN).fetchall() == [(KNOWN_SIG,)]


def test_macro_files_are_ordered_and_scalar_first():
    names = [name for name, _ in macro_files()]
    assert names[0] == "scalar.sql"
    assert names[1:] == sorted(names[1:])
    assert all("CREATE OR REPLACE TEMP MACRO" in sql for _, sql in macro_files())


CRASH_SCRIPT = textwrap.dedent("""
    import gc, sys, duckdb
    import lance_minhash_sql as lms
    path = sys.argv[1]
    first = lms.connect(path)                # registers the UDFs
    cur = first.cursor(); lms.install(cur)
    second = duckdb.connect(path, config={"allow_unredacted_secrets": True}); lms.install(second)
    cur.close(); first.close(); del cur, first
    gc.collect()
    print(second.execute("SELECT minhash_signature('The quick brown fox', 4, 2)").fetchall())
    second.close(); del second; gc.collect()
    third = lms.connect()                    # a new database after everything was closed
    print(third.execute("SELECT minhash_similarity(minhash_signature('a b c'), minhash_signature('a b c'))").fetchall())
""")


def test_closing_connections_and_gc_then_calling_does_not_crash(tmp_path):
    # In a subprocess: a freed callable would crash the interpreter, not fail an assert.
    proc = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, str(tmp_path / "gc.duckdb")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # (DuckDB draws a progress bar on stdout when a statement runs over 2 s: skip it)
    assert [line for line in proc.stdout.splitlines() if line.startswith("[(")] == [f"[({KNOWN_SIG},)]", "[(1.0,)]"]


IMPORT_SCRIPT = textwrap.dedent("""
    import sys, time
    t = time.perf_counter()
    import lance_minhash_sql
    took = time.perf_counter() - t
    loaded = [m for m in ("numba", "duckdb", "pyarrow", "lance") if m in sys.modules]
    con = lance_minhash_sql.connect()
    after_install = [m for m in ("numba", "lance") if m in sys.modules]
    con.execute("SELECT minhash_similarity([1], [1])").fetchall()
    after_numpy_udf = "numba" in sys.modules
    con.execute("SELECT minhash_signature('a')").fetchall()
    after_short_text = "numba" in sys.modules  # signed by numpy: cheaper than loading numba
    con.execute("SELECT minhash_signature(repeat('a b c ', 500000))").fetchall()
    print(loaded, after_install, after_numpy_udf, after_short_text, "numba" in sys.modules, "lance" in sys.modules,
          lance_minhash_sql.__version__, f"{took * 1e3:.1f}")
""")


def test_import_is_cheap_and_numba_loads_on_first_use():
    proc = subprocess.run([sys.executable, "-c", IMPORT_SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip().splitlines()[-1].split()  # the last line: after any DuckDB progress bar
    print("import lance_minhash_sql:", out[-1], "ms")
    assert out[:-2] == ["[]", "[]", "False", "False", "True", "False"]
    assert out[-2] == "0.1.0" or out[-2] == "0+unknown"


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lance-minhash-sql")
    except PackageNotFoundError:
        return "0+unknown"


def test_public_api():
    assert {"install", "connect", "__version__", "LanceMinHashError", "InvalidParameterError",
            "InvalidInputError"} <= set(lms.__all__)
    import lance_minhash_sql.core.errors as errors
    from lance_minhash_sql.duck.install import connect, install
    from lance_minhash_sql.query.topk import search
    from lance_minhash_sql.api.entries import dedup

    # each public name is the object its module defines (lazy names resolve to the real ones), the
    # Python API's functions wrapped to give their advice in Python's syntax (core/advice.py)
    assert lms.install is install and lms.connect is connect
    assert lms.dedup.__wrapped__ is dedup and lms.search.__wrapped__ is search
    # every exception of errors.py is public, and is the class errors.py defines
    assert set(errors.__all__) <= set(lms.__all__)
    for name in errors.__all__:
        assert getattr(lms, name) is getattr(errors, name)
    assert lms.__version__ == _installed_version()
    # one base class catches every public error, whichever public function raises it
    public_errors = [getattr(lms, n) for n in lms.__all__ if n.endswith("Error")]
    assert len(public_errors) == 11
    assert all(issubclass(e, lms.LanceMinHashError) for e in public_errors)
    with pytest.raises(lms.LanceMinHashError, match="no_such.lance"):
        lms.search("/no_such.lance", "text", "a b c")
    with pytest.raises(lms.LanceMinHashError, match="no_such.lance"):
        lms.build_index("/no_such.lance", "text")
    with pytest.raises(AttributeError):
        lms.no_such_name


def test_docstring_examples():
    import doctest

    import lance_minhash_sql.duck.install as install_module

    for module in (lms, install_module):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_macros_rolled_back_with_a_transaction_come_back_with_install():
    con = duckdb.connect()
    con.begin()
    lms.install(con)
    con.rollback()
    with pytest.raises(duckdb.CatalogException):
        con.execute(KNOWN)
    assert lms.install(con).execute(KNOWN).fetchall() == [(KNOWN_SIG,)]


# --------------------------------------------------------------------------- results vs Python


def test_signatures_of_a_table_equal_signer():
    texts = [t for t in TORTURE_TEXTS] + random_texts(300, seed=1)
    con = lms.connect()
    load(con, texts)
    got = [r[0] for r in con.execute("SELECT minhash_signature(t) FROM docs ORDER BY id").fetchall()]
    assert got == python_signatures(texts)
    assert sum(s is None for s in got) >= 5  # NULLs and token-less texts are covered
    # the macro defaults are MinHashParams' defaults
    assert len(got[0]) == MinHashParams().num_hashes
    keys = con.execute("SELECT len(minhash_band_keys(minhash_signature(t))) FROM docs WHERE id = 0").fetchone()
    assert keys == (MinHashParams().num_bands,)


def test_five_thousand_texts_over_several_chunks_and_threads():
    texts = random_texts(5000, seed=2)
    con = lms.connect(threads=2)
    load(con, texts)
    params = MinHashParams(num_hashes=64, num_bands=8, shingle_size=2)
    rows = con.execute("""
        SELECT minhash_signature(t, 64, 2) AS s, minhash_band_keys(minhash_signature(t, 64, 2), 8) AS k
        FROM docs ORDER BY id
    """).fetchall()
    signer = Signer(params)
    sigs, has = signer.sign(pa.array(texts, pa.string()))
    keys = signer.band_keys(sigs)
    assert [r[0] for r in rows] == [s.tolist() if h else None for s, h in zip(sigs, has)]
    assert [r[1] for r in rows] == [k.tolist() if h else None for k, h in zip(keys, has)]

    # similarity of each text with its neighbour, against the engine's kernel
    sims = con.execute("""
        SELECT minhash_similarity(minhash_signature(t, 64, 2), minhash_signature(lead(t) OVER (ORDER BY id), 64, 2))
        FROM docs ORDER BY id
    """).fetchall()
    expected = [None if not (has[i] and i + 1 < len(texts) and has[i + 1])
                else float(np.float32((sigs[i] == sigs[i + 1]).sum()) / np.float32(64)) for i in range(len(texts))]
    assert [r[0] for r in sims] == expected


def test_shingle_jaccard_of_a_table_equals_the_naive_oracle():
    texts = random_texts(120, seed=3, null_every=29)
    other = random_texts(120, seed=3, null_every=31)
    rng = np.random.default_rng(4)
    for i in range(0, 120, 3):  # near duplicates: drop a few words
        if texts[i]:
            words = texts[i].split()
            other[i] = " ".join(w for w in words if rng.random() > 0.2)
    con = lms.connect()
    load(con, texts, u=pa.array(other, pa.string()))
    got = [r[0] for r in con.execute("SELECT shingle_jaccard(t, u) FROM docs ORDER BY id").fetchall()]
    params = MinHashParams()
    expected = [None if a is None or b is None else naive.exact_jaccard(a, b, params) for a, b in zip(texts, other)]
    assert got == expected
    assert sum(0 < g < 1 for g in got if g is not None) >= 20


def test_lsh_probability_of_a_column_equals_python():
    rng = np.random.default_rng(5)
    s = rng.random(3000)
    b = rng.integers(1, 64, 3000)
    r = rng.integers(1, 32, 3000)
    con = lms.connect()
    con.register("_p", pa.table({"i": np.arange(3000), "s": s, "b": b, "r": r}))
    got = np.array([x[0] for x in con.execute("SELECT lsh_probability(s, b, r) FROM _p ORDER BY i").fetchall()])
    expected = np.array([lsh_probability(float(x), int(y), int(z)) for x, y, z in zip(s, b, r)])
    # numpy's vectorised pow may differ from Python's libm pow in the last bits
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_parameters_varying_per_row():
    texts = random_texts(600, seed=6, null_every=50)
    rng = np.random.default_rng(7)
    choices = [
        (128, 3, None),
        (16, 1, json.dumps({"base_tokenizer": "whitespace"})),
        (64, 2, json.dumps({"lower_case": False, "ascii_folding": False})),
        (5, 4, json.dumps({"base_tokenizer": "ngram", "min_ngram_length": 2, "max_ngram_length": 3})),
    ]
    pick = rng.integers(0, len(choices), len(texts))
    con = lms.connect()
    load(con, texts, k=pa.array([choices[p][0] for p in pick], pa.int32()),
         w=pa.array([choices[p][1] for p in pick], pa.int32()),
         tok=pa.array([choices[p][2] for p in pick], pa.string()))
    got = con.execute("""
        SELECT minhash_signature(t, k, w, tok), shingle_jaccard(t, t || ' extra words here', w, tok)
        FROM docs ORDER BY id
    """).fetchall()
    for i, (text, p) in enumerate(zip(texts, pick)):
        k, w, tok = choices[p]
        params = MinHashParams(num_hashes=k, num_bands=1, shingle_size=w, tokenizer=TokenizerParams.parse(tok))
        assert got[i][0] == python_signatures([text], params)[0], i
    # each group was really computed with its own parameters
    assert {len(g[0]) for g in got if g[0] is not None} == {128, 16, 64, 5}
    ws = con.execute("SELECT count(*) FROM docs WHERE shingle_jaccard(t, t, w, tok) = 1.0").fetchone()[0]
    assert ws == sum(g[1] is not None for g in got)


def test_explain_does_not_run_the_udf_work(monkeypatch):
    calls = []
    real = udfs._engine

    def counting():
        calls.append(1)
        return real()

    monkeypatch.setattr(udfs, "_engine", counting)
    con = lms.connect()
    query = ("SELECT minhash_signature('The quick brown fox'), minhash_band_keys(minhash_signature('x y z')), "
             "shingle_jaccard('a b c', 'a b c') FROM range(3000000)")
    plan = con.execute("EXPLAIN " + query).fetchall()
    assert "_lms_signature" in plan[0][1]
    assert calls == []  # not constant-folded at plan time (side_effects=True)
    con.execute("SELECT minhash_signature('The quick brown fox', 4, 2)").fetchall()
    assert calls, "the UDF did not go through udfs._engine"
