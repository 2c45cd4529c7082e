"""Signing with numpy (index/numpy_sign.py, kernels/xxh64_arrays.py) against the kernels and
Lance on the same inputs: XXH64 against the xxhash package, signatures and band keys
against the kernels' signer, a small build's files against Lance's and against the
kernels' build, and a new process that builds a small index and searches it once without
loading numba."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import lance
import numpy as np
import pyarrow as pa
import pytest
import xxhash
from test_build import assert_same_files, corpus_table, pair, private_tmp  # noqa: F401  (fixture)
from test_signatures import PARAMS, _param_id
from torture import TORTURE_TEXTS

from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.index import band_sorter
from lance_minhash_sql.index import numpy_sign
from lance_minhash_sql.io import segment_writers as writers
from lance_minhash_sql.index.sign import Signer
from lance_minhash_sql.index import sign as sign_mod
from lance_minhash_sql.kernels.xxh64_arrays import xxh64_ranges

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_xxh64_ranges_equal_the_xxhash_package():
    rng = random.Random(3)
    data = bytes(rng.randrange(256) for _ in range(4000))
    lengths = list(range(0, 130)) + [rng.randrange(0, 1000) for _ in range(200)]
    starts = [rng.randrange(0, len(data) - n + 1) for n in lengths]
    for seed in (0, 42, 2**64 - 1):
        got = xxh64_ranges(np.frombuffer(data, np.uint8), np.array(starts), np.array(lengths), seed)
        assert got.tolist() == [xxhash.xxh64_intdigest(data[s:s + n], seed) for s, n in zip(starts, lengths)]
    # a range ending at the last byte, and no range at all
    assert xxh64_ranges(np.frombuffer(b"abc", np.uint8), np.array([1]), np.array([2]), 42).tolist() == \
        [xxhash.xxh64_intdigest(b"bc", 42)]
    assert xxh64_ranges(np.empty(0, np.uint8), np.empty(0, np.int64), np.empty(0, np.int64), 42).size == 0


def _texts() -> list:
    """ASCII rows (the numpy tokenizer's), others (Lance's tokenizer), NULL, empty, rows
    without tokens, fewer tokens than a shingle, tokens at and around the length limit."""
    table = corpus_table(400)
    edge = [None, "", "!!! ...", "one", "two words", "x" * 100 + " yy " + "z" * 39 + " " + "w" * 40,
            "Café naïve ½ ÆØÅ 日本語のテキスト", "a b c d", "MiXeD CaSe 123abc 4_5-6",
            "tab\tand\nnewline\x1fsep"]
    return edge + [t for t in TORTURE_TEXTS] + table.column("text").to_pylist()


@pytest.mark.parametrize("params", PARAMS, ids=_param_id)
def test_numpy_signatures_and_band_keys_equal_the_kernels(params):
    texts = _texts()
    signer = Signer(params)
    ref, ref_has = signer.sign(pa.array(texts, pa.string()))
    ref_keys = signer.band_keys(ref)
    arrays = [pa.array(texts, pa.string()), pa.array(texts, pa.large_string()),
              pa.array(["pad", "pad"] + texts, pa.string()).slice(2)]  # offsets not starting at 0
    for array in arrays:
        sigs, has = numpy_sign.sign_numpy(signer, array)
        assert has.tolist() == ref_has.tolist()
        assert has.sum() > 30  # rows with tokens (the raw tokenizer drops texts of 40 bytes or more)
        assert np.array_equal(sigs, np.where(ref_has[:, None], ref, 0))
        keys = numpy_sign.band_keys_numpy(sigs, params.num_bands)
        assert np.array_equal(keys[has], ref_keys[has])


def test_rows_split_between_the_ascii_route_and_lances_tokenizer_stay_in_order():
    signer = Signer(MinHashParams())
    texts = ["plain ascii words here", "ünïcode wörds here", None, "more ascii words", "日本 語",
             "end words"] * 50
    sigs, has = numpy_sign.sign_numpy(signer, texts)
    ref, ref_has = signer.sign(pa.array(texts, pa.string()))
    assert has.tolist() == ref_has.tolist() and np.array_equal(sigs[has], ref[has])


def _numpy_route(monkeypatch, on: bool):
    """The build's route forced: numpy as in a process without numba, or the kernels."""
    if on:
        for module in (numpy_sign, band_sorter, writers):
            monkeypatch.setattr(module, "numba_loaded", lambda: False)
        monkeypatch.setattr(numpy_sign, "KERNEL_LOAD_SECONDS", float("inf"))
    else:
        monkeypatch.setattr(numpy_sign, "KERNEL_LOAD_SECONDS", 0.0)
    calls = []
    real = sign_mod.sign_numpy
    monkeypatch.setattr(sign_mod, "sign_numpy", lambda *a: (calls.append(1), real(*a))[1])
    return calls


@pytest.mark.parametrize("route", ["numpy", "kernels"])
@pytest.mark.parametrize("params", [MinHashParams(), MinHashParams(64, 8, 5)], ids=_param_id)
def test_a_small_build_writes_lances_files_by_either_route(tmp_path, monkeypatch, route, params):
    calls = _numpy_route(monkeypatch, route == "numpy")
    table = corpus_table(2000)
    texts = table.column("text").to_pylist()
    texts[::97] = ["Ünïcode row ½ " + t for t in texts[::97]]  # some rows through Lance's tokenizer
    texts[5::101] = [None] * len(texts[5::101])
    table = table.set_column(table.schema.get_field_index("text"), "text", pa.array(texts, pa.string()))
    native, ours, result = pair(tmp_path, table, params)
    assert bool(calls) == (route == "numpy")
    assert result.rows_indexed == sum(t is not None for t in texts)
    assert_same_files(native, ours)


def test_the_rental_takes_numpy_until_its_time_reaches_the_kernels_load(monkeypatch):
    for module in (numpy_sign,):
        monkeypatch.setattr(module, "numba_loaded", lambda: False)
    monkeypatch.setattr(numpy_sign.NUMPY_SECONDS, "value", 0.0)
    monkeypatch.setattr(numpy_sign, "KERNEL_LOAD_SECONDS", 0.5)
    assert numpy_sign.numpy_pays(0.4) and not numpy_sign.numpy_pays(0.5)
    numpy_sign.NUMPY_SECONDS.add(0.3)
    assert numpy_sign.numpy_pays(0.1) and not numpy_sign.numpy_pays(0.2)
    monkeypatch.setattr(numpy_sign, "numba_loaded", lambda: True)
    assert not numpy_sign.numpy_pays(0.0)  # numba loaded anyway: the kernels


SMALL_DATA = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import random
    import lance, pyarrow as pa
    import lance_minhash_sql as lms
    from lance_minhash_sql.kernels.config import numba_loaded
    uri = sys.argv[1]
    rng = random.Random(7)
    words = ["w%d" % i for i in range(3000)] + ["Ünï", "½"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(1, 60))) for _ in range(1000)]
    lance.write_dataset(pa.table({"text": pa.array(texts, pa.string())}), uri)
    con = lms.connect()
    built = con.sql(f"SELECT rows_indexed FROM minhash_build('{uri}', 'text')").fetchall()[0][0]
    after_build = numba_loaded()
    hits = con.sql(f"SELECT count(*) FROM minhash_search('{uri}', 'text', 'a b c d e f', 5)").fetchall()[0][0]
    print(json.dumps({"built": built, "after_build": after_build, "after_search": numba_loaded(), "hits": hits}))
""")


def test_a_new_process_builds_a_small_index_and_searches_it_without_numba(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", SMALL_DATA, str(tmp_path / "s.lance")], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["built"] == 1000 and out["hits"] <= 5
    assert (out["after_build"], out["after_search"]) == (False, False)
    assert lance.dataset(str(tmp_path / "s.lance")).count_rows() == 1000


SIGNATURE_FIRST = textwrap.dedent("""
    import json
    import lance_minhash_sql as lms
    from lance_minhash_sql.kernels.config import numba_loaded
    con = lms.connect()
    texts = ["The quick brown fox", "Ünïcode ½ row with a few words", "", None, "one"]
    rows = con.execute("SELECT minhash_signature(t) FROM unnest(?::VARCHAR[]) AS u(t)", [texts]).fetchall()
    first = numba_loaded()
    grouped = con.execute("SELECT minhash_signature(t, num_hashes := n) FROM (SELECT unnest(?::VARCHAR[]) AS t, "
                          "unnest([128, 64, 128, 64, 128]) AS n)", [texts]).fetchall()
    print(json.dumps({"numba": first, "rows": [r[0] for r in rows], "grouped": [r[0] for r in grouped]}))
""")


def test_a_new_processs_first_signatures_take_numpy_and_equal_the_kernels():
    """``minhash_signature`` in a process that has not loaded numba signs by numpy while
    that costs less than loading it (``index/sign.py: sign_by_cost``): numba stays
    unloaded, and the values are the kernels' (constant and per-row parameters)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", SIGNATURE_FIRST], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["numba"] is False
    texts = ["The quick brown fox", "Ünïcode ½ row with a few words", "", None, "one"]
    for key, ks in (("rows", [128] * 5), ("grouped", [128, 64, 128, 64, 128])):
        for text, k, got in zip(texts, ks, out[key]):
            sigs, has = Signer(MinHashParams(num_hashes=k)).sign(pa.array([text], pa.string()))
            assert got == (sigs[0].tolist() if has[0] else None), (key, text)
