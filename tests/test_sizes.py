"""Byte sizes: the same text means the same number of bytes in environment variables, SQL,
the command line and Python (lance_minhash_sql/core/sizes.py), and bad text is refused with a
message naming the value, the rule and a fix."""

from __future__ import annotations

import os
import subprocess
import sys

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_minhash_sql as lms
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.core.sizes import parse_bytes
from lance_minhash_sql.faces import cli
from lance_minhash_sql.index import band_sorter
from lance_minhash_sql.index.opened import CACHE_ENV, cache_capacity, clear_cache, set_cache_capacity
from lance_minhash_sql.lifecycle.prewarm import prewarm

# each text and its bytes, worked out by hand from the rule (KB/K = 1000, KiB = 1024)
SIZES = {
    "2GB": 2_000_000_000,
    "2GiB": 2_147_483_648,
    "512MiB": 536_870_912,
    "1.5G": 1_500_000_000,
    "1.5 gib": 1_610_612_736,
    "64KiB": 65_536,
    "300K": 300_000,
    "123456": 123_456,
}
BAD = ["lots", "2 parsecs", "1,5GB", "1.5", "0x10", "", "2GB2"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(lms.__file__)))


def test_the_rule_matches_duckdb_memory_settings():
    """DuckDB reads its own size settings with the same units (its memory_limit refuses a
    bare number, which here is bytes, as Lance reads its variables)."""
    import duckdb

    con = duckdb.connect()
    for text, n in SIZES.items():
        assert parse_bytes(text, "x") == n
        if text.isdigit():
            continue
        con.execute(f"SET max_temp_directory_size = '{text}'")
        shown = con.execute("SELECT current_setting('max_temp_directory_size')").fetchone()[0]
        value, unit = shown.split()
        scale = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
        # DuckDB shows one decimal, truncated: 2GB is "1.8 GiB", 2GiB "2.0 GiB"
        assert float(value) * scale <= n < (float(value) + 0.1) * scale, (text, shown)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> str:
    uri = str(tmp_path_factory.mktemp("sizes") / "ds.lance")
    rng = np.random.default_rng(0)
    lance.write_dataset(pa.table({"text": [" ".join(rng.choice(["a", "b", "c", "d", "e"], 8)) for _ in range(200)]}),
                        uri)
    build_index(uri, "text", num_hashes=16, num_bands=4)
    return uri


@pytest.fixture
def restore_capacity():
    old = set_cache_capacity(1 << 30)
    yield
    clear_cache()
    set_cache_capacity(old)


@pytest.mark.parametrize("text", ["2GB", "2GiB", "512MiB", "1.5G"])
def test_same_bytes_everywhere(text, indexed, monkeypatch, restore_capacity):
    n = SIZES[text]
    # Python
    assert band_sorter.memory_budget(text) == n
    set_cache_capacity(text)
    assert cache_capacity() == n
    assert prewarm(indexed, "text", cache_bytes=text).cache_capacity == n
    # environment variables
    monkeypatch.setenv(band_sorter.ENV_MEMORY, text)
    assert band_sorter.memory_budget() == n
    monkeypatch.setenv(band_sorter.ENV_MAX_TEMP, text)
    assert band_sorter.max_temp_size() == n
    code = "from lance_minhash_sql.index.opened import cache_capacity; print(cache_capacity())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, CACHE_ENV: text, "PYTHONPATH": ROOT},
                         capture_output=True, text=True, check=True)
    assert int(out.stdout) == n
    # SQL
    set_cache_capacity(1 << 30)
    con = lms.connect()
    got = con.execute("SELECT cache_capacity FROM minhash_prewarm(?, 'text', cache_bytes := ?)",
                      [indexed, text]).fetchone()[0]
    assert got == n
    # command line: the text reaches the build as written, and the build reads it as above
    for command in ("build", "optimize"):
        args = cli.build_parser().parse_args([command, indexed, "text", "--memory-limit", text])
        assert band_sorter.memory_budget(args.memory_limit) == n


def test_command_line_build_takes_a_size(indexed, capsys):
    assert cli.main(["build", indexed, "text", "--num-hashes", "16", "--num-bands", "4", "--memory-limit", "512MiB",
                     "--quiet"]) == 0
    assert cli.main(["build", indexed, "text", "--memory-limit", "2 parsecs", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--memory-limit '2 parsecs'" in err and "powers of 1000" in err and "e.g. '512MiB'" in err  # CLI syntax


@pytest.mark.parametrize("text", BAD)
def test_bad_text_is_refused_everywhere_with_value_rule_and_fix(text, indexed, monkeypatch, restore_capacity):
    def check(message: str, name: str, sql: bool = False) -> None:
        assert (f"{name} := {text!r}" if sql else f"{name}={text!r}") in message, message
        assert "powers of 1000" in message and "powers of 1024" in message, message
        assert "e.g. '512MiB'" in message, message

    for call, name in ((lambda: band_sorter.memory_budget(text), "memory_limit"),
                       (lambda: set_cache_capacity(text), "cache capacity"),
                       (lambda: prewarm(indexed, "text", cache_bytes=text), "cache capacity")):
        with pytest.raises(InvalidParameterError) as exc:
            call()
        check(str(exc.value), name)
    if text.strip():  # an empty variable means "not set"
        monkeypatch.setenv(band_sorter.ENV_MEMORY, text)
        with pytest.raises(InvalidParameterError) as exc:
            band_sorter.memory_budget()
        check(str(exc.value), f"${band_sorter.ENV_MEMORY}")
        monkeypatch.setenv(band_sorter.ENV_MAX_TEMP, text)
        with pytest.raises(InvalidParameterError) as exc:
            band_sorter.max_temp_size()
        check(str(exc.value), f"${band_sorter.ENV_MAX_TEMP}")
    con = lms.connect()
    with pytest.raises(Exception, match="InvalidParameterError") as exc:
        con.execute("SELECT * FROM minhash_prewarm(?, 'text', cache_bytes := ?)", [indexed, text]).fetchall()
    check(str(exc.value), "cache_bytes", sql=True)


def test_a_negative_size_reads_alike_as_a_number_and_as_its_digits():
    """SQL hands a size over as text: -1 and '-1' are the same value, with one message."""
    for value in (-1, "-1", " -1 "):
        with pytest.raises(InvalidParameterError) as exc:
            band_sorter.memory_budget(value)
        assert str(exc.value).startswith("memory_limit=-1 (-1 bytes) must be positive; write e.g. '512MiB'")


def test_bad_cache_variable_fails_at_first_use_with_the_rule():
    code = "from lance_minhash_sql.index.opened import cache_capacity; print(cache_capacity())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, CACHE_ENV: "2 parsecs", "PYTHONPATH": ROOT},
                         capture_output=True, text=True)
    assert out.returncode != 0
    assert f"InvalidParameterError: ${CACHE_ENV}='2 parsecs' is not a byte size" in out.stderr
    assert "powers of 1000" in out.stderr


def test_limits():
    assert parse_bytes(0, "cache capacity", minimum=0) == 0
    assert parse_bytes(np.int64(7), "x") == 7 and parse_bytes(4096.0, "x") == 4096
    assert parse_bytes("1.5KB", "x") == 1500 and parse_bytes("2B", "x") == 2
    for bad, rule in ((0, "must be positive"), (-1, "must not be negative"), (True, "not a byte size"),
                      (None, "not a byte size"), (1.5, "not a byte size")):
        with pytest.raises(InvalidParameterError, match=rule):
            parse_bytes(bad, "x", minimum=0 if bad == -1 else 1)
    with pytest.raises(InvalidParameterError, match=r"below the minimum of 64 KiB \(65536 bytes\)"):
        parse_bytes("1KB", "x", minimum=64 << 10)
