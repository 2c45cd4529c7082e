"""The command line: demo, sql, bench harness pieces, errors."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from lance_minhash_sql.faces import cli
from lance_minhash_sql.faces.bench import PeerResult, format_table


def test_demo_runs_sql_over_a_generated_corpus(tmp_path, capsys):
    assert cli.main(["demo", "--rows", "3000", "--dir", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "wrote 3,000 synthetic rows" in out
    for title, _ in cli.DEMO_QUERIES + cli.INDEX_QUERIES + cli.PAIRS_QUERIES:
        assert title in out
    assert "mean_abs_error" in out and "candidate_probability" in out
    assert (tmp_path / "corpus.lance").is_dir()


def test_sql_command_argument_and_stdin(capsys, monkeypatch):
    assert cli.main(["sql", "SELECT minhash_similarity(minhash_signature('a b c d'), minhash_signature('a b c d')) AS s"]) == 0
    assert "1.0" in capsys.readouterr().out
    import io
    monkeypatch.setattr(sys, "stdin", io.StringIO("SELECT lsh_probability(1.0, 16, 8) AS p"))
    assert cli.main(["sql", "-"]) == 0
    assert "1.0" in capsys.readouterr().out


def test_package_errors_exit_2_with_message(capsys):
    assert cli.main(["sql", "SELECT minhash_signature('x', num_hashes := 0)"]) == 2
    err = capsys.readouterr().err
    assert "InvalidParameterError" in err and "num_hashes" in err


def test_bench_rejects_unknown_peer(capsys):
    assert cli.main(["bench", "--rows", "10", "--peers", "ours,nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_bench_table_ratios():
    ours = PeerResult("ours", "sign", 1000, 1.0, 100.0, 10.0)
    lance = PeerResult("lance", "build", 1000, 4.0, 200.0, 10.0)
    table = format_table([ours, lance])
    assert "4.0x" in table and "ours ÷ Lance native build: 4.00x" in table
    assert "nan" not in table  # the ours row has no ratio to itself


def test_console_script_help():
    proc = subprocess.run([sys.executable, "-m", "lance_minhash_sql.faces.cli", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "demo" in proc.stdout and "bench" in proc.stdout


def test_build_and_search_commands(tmp_path, capsys):
    from lance_minhash_sql.faces.corpus import generate_texts, write_corpus

    uri = str(tmp_path / "c.lance")
    write_corpus(uri, 2000)
    assert cli.main(["build", uri, "text", "--threshold", "0.8", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "2,000 rows indexed" in out and "b=16" in out  # recall_bands(0.8)
    query = generate_texts(5, 6)[0].as_py()
    assert cli.main(["search", uri, "text", query, "-k", "3", "--columns", "id"]) == 0
    out = capsys.readouterr().out
    assert "_distance" in out and "│     5 │" in out
    assert cli.main(["search", uri, "nope", query]) == 2
    assert "DatasetError" in capsys.readouterr().err


def test_threshold_rule_is_the_same_for_build_and_the_self_joins(tmp_path, capsys):
    """One rule, 0 < threshold <= 1, with one message: 1 builds one band of all rows (only
    identical signatures need to collide) and keeps identical signatures in pairs."""
    from lance_minhash_sql.core.checks import THRESHOLD_RULE
    from lance_minhash_sql.faces.corpus import write_corpus

    uri = str(tmp_path / "c.lance")
    write_corpus(uri, 500)
    assert cli.main(["build", uri, "text", "--threshold", "1", "--quiet"]) == 0
    assert "b=1, r=128," in capsys.readouterr().out
    assert cli.main(["pairs", uri, "text", "--threshold", "1"]) == 0
    capsys.readouterr()
    for command in ("build", "pairs", "clusters", "dedup"):
        for bad in ("1.5", "0"):
            args = [command, uri, "text", "--threshold", bad]
            if command == "dedup":
                args += ["--output", str(tmp_path / "out.lance")]
            assert cli.main(args + (["--quiet"] if command == "build" else [])) == 2
            err = capsys.readouterr().err
            assert f"--threshold {float(bad)!r} is out of range: {THRESHOLD_RULE}; e.g. 0.8" in err, (command, err)


def test_every_command_says_what_it_does_and_lists_its_choices(capsys):
    """Each subcommand's --help opens with a description; --keep lists its choices; the
    bench's --data states its default; search has SQL's threshold, exact and quiet."""
    from lance_minhash_sql.core.params import KEEP_POLICIES
    from lance_minhash_sql.faces.cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, p in sub.choices.items():
        assert p.description and len(p.description) > 20, name
    assert "{" + ",".join(KEEP_POLICIES) + "}" in sub.choices["dedup"].format_help()
    assert "default ./bench-data" in sub.choices["bench"].format_help()
    search_help = sub.choices["search"].format_help()
    assert all(flag in search_help for flag in ("--threshold", "--verify", "--quiet", "all"))
    assert "--exact" not in search_help  # an older spelling: accepted, never shown


def test_progress_bars_only_on_a_terminal(tmp_path, capsys, monkeypatch):
    """No bar into a pipe or a file (here: pytest's captured stderr); a terminal gets one."""
    import io

    from lance_minhash_sql.faces.corpus import write_corpus

    uri = str(tmp_path / "c.lance")
    write_corpus(uri, 300)
    assert cli.main(["build", uri, "text"]) == 0
    err = capsys.readouterr().err
    assert "it/s" not in err and "rows/s" not in err and "%|" not in err, err

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    tty = Terminal()
    monkeypatch.setattr("sys.stderr", tty)
    assert cli.main(["build", uri, "text"]) == 0
    assert "%|" in tty.getvalue() or "rows/s" in tty.getvalue(), tty.getvalue()


def test_demo_tables_say_what_they_show(tmp_path, capsys):
    """The demo's tables name the row a column describes, show pairs across the range (not
    only the borderline ones), give the exact Jaccard of pairs between originals, and say
    the query document is its own first hit; the eval set and batch are written beside."""
    import re

    assert cli.main(["demo", "--dir", str(tmp_path), "--rows", "3000", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "eval.lance").is_dir() and (tmp_path / "batch.lance").is_dir()
    assert "the first is document 14 itself" in out and "│ right_edit │" in out and "mean_exact_jaccard" in out
    sample = out.split("-- A sample of near-duplicate pairs", 1)[1].split("\n-- ", 1)[0]
    sims = [float(x) for x in re.findall(r"│\s+\d+ │\s+\d+ │\s+([\d.]+) │", sample)]
    assert len(sims) == 6 and max(sims) - min(sims) > 0.05 and sims == sorted(sims, reverse=True)
    truth = out.split("-- Pairs at 0.8 against the generator's truth", 1)[1].split("\n-- ", 1)[0]
    (original,) = re.findall(r"│ original\s+│\s+\d+ │\s+([\d.]+) │\s+([\d.]+) │", truth)
    assert float(original[0]) == 0.0 and float(original[1]) > 0.7  # different originals, truly similar


def test_ticker_keeps_a_long_step_from_being_silent():
    """On a terminal a step longer than a second shows a status line every second, erased
    at the end; off a terminal (or for a short step) nothing is written."""
    import io
    import time

    from lance_minhash_sql.faces.sinks import Ticker

    out = io.StringIO()
    with Ticker("working", True, out, every=0.05):
        time.sleep(0.3)
    text = out.getvalue()
    assert text.count("\r  working ... ") >= 3 and text.endswith("\r")
    quiet = io.StringIO()
    with Ticker("working", False, quiet, every=0.05):
        time.sleep(0.2)
    assert quiet.getvalue() == ""


def test_demo_run_again_gives_the_same_corpus_and_the_folder_does_not_grow(tmp_path, capsys):
    """A second ``demo`` replaces the corpus with a fresh one: the same rows under the same
    row ids, the same versions and index folders, the same bytes on disk."""
    import lance

    def state():
        ds = lance.dataset(str(tmp_path / "corpus.lance"))
        t = ds.to_table(columns=["id", "text"], with_row_id=True)
        files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
        return t, ds.version, len(list((tmp_path / "corpus.lance" / "_indices").iterdir())), len(files), size

    assert cli.main(["demo", "--rows", "3000", "--dir", str(tmp_path), "--quiet"]) == 0
    first = state()
    assert cli.main(["demo", "--rows", "3000", "--dir", str(tmp_path), "--quiet"]) == 0
    second = state()
    capsys.readouterr()
    assert second[0].equals(first[0]) and second[0].column("_rowid").to_pylist()[-1] < 1 << 32
    assert second[1:4] == first[1:4]
    assert abs(second[4] - first[4]) <= first[4] // 100, (first[4], second[4])
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def wait_for(predicate, what: str) -> None:
    """Poll until ``predicate()`` holds (no figure of time is asserted)."""
    import time

    for _ in range(2000):
        if predicate():
            return
        time.sleep(0.005)
    raise AssertionError(f"never saw {what}")


def test_a_status_line_gives_way_to_a_progress_bar():
    import io

    from lance_minhash_sql.faces.sinks import Ticker
    from lance_minhash_sql.runtime.progress import progress_bar

    out = io.StringIO()
    with Ticker("finding the clusters", True, out, every=0.01):
        wait_for(lambda: "finding the clusters ..." in out.getvalue(), "the status line")
        bar = progress_bar(True, 10, "dedup write", unit="rows")
        erased = out.getvalue()
        assert erased.endswith("\r") and erased.rstrip("\r ").endswith("s\x1b[K")  # the line, cleared to its end
        wait_for(lambda: True, "")
        bar.close()
        assert out.getvalue() == erased  # the line stays erased while the bar runs


def test_long_self_join_steps_show_a_status_line_on_a_terminal_only(tmp_path, capsys, monkeypatch):
    """clusters (and dedup, review) show a status line with the seconds spent on a
    terminal, nothing into a pipe or file; the line is erased before the result."""
    import io

    from lance_minhash_sql.faces import sinks
    from lance_minhash_sql.faces.corpus import write_corpus
    from lance_minhash_sql.api import entries as module

    uri = str(tmp_path / "c.lance")
    write_corpus(uri, 1000)
    assert cli.main(["build", uri, "text", "--quiet"]) == 0
    assert cli.main(["clusters", uri, "text", "--limit", "1"]) == 0
    assert capsys.readouterr().err == ""  # not a terminal: nothing

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    class Quick(sinks.Ticker):
        def __init__(self, what, enabled, stream=None, every=1.0):
            super().__init__(what, enabled, stream, every=0.01)

    tty = Terminal()
    monkeypatch.setattr("sys.stderr", tty)
    monkeypatch.setattr(cli, "Ticker", Quick)
    real = module.clusters

    def slow(*args, **kwargs):  # runs once the status line is up
        wait_for(lambda: "finding the clusters ... " in tty.getvalue(), "the status line")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "clusters", slow)
    assert cli.main(["clusters", uri, "text", "--limit", "1"]) == 0
    import re

    status, rest = tty.getvalue().rsplit("finding the clusters ... ", 1)
    assert re.match(r"\d+s\x1b\[K\r +\r", rest), rest  # erased before the rows are counted


@pytest.mark.parametrize("argv, named", [
    (["pairs", "corpus.lance", "text", "--threshold", "abc"], "--threshold abc"),
    (["dedup", "corpus.lance", "text", "--keep", "bogus"], "--keep bogus"),
    (["clusters", "corpus.lance", "text", "--clustering", "stars"], "--clustering stars"),
    (["search", "corpus.lance", "text", "a b c", "-k", "abc"], "-k abc"),
    (["review", "corpus.lance", "text"], "--out"),
    (["pairs", "corpus.lance", "text", "--memory-limit", "-1GiB"], "--memory-limit '-1GiB'"),
    (["pairs", "corpus.lance", "text", "--threshold"], "--threshold"),
    (["pairs", "corpus.lance", "text", "--bogus"], "--bogus"),
    (["estimate", "corpus.lance", "text", "--thresholds", "0.8", "x"], "--thresholds x"),
    (["nosuchcommand"], "nosuchcommand"),
])
def test_a_usage_error_is_one_line_naming_the_argument(argv, named, capsys):
    """A usage error: exit status 2, one error line naming the argument as typed on the
    command line (and at most one hint line), never argparse's usage block."""
    try:
        code = cli.main(argv)
    except SystemExit as done:
        code = done.code
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert code == 2, err
    assert 1 <= len(lines) <= 2 and lines[0].startswith("lance-minhash") and "error: " in lines[0], err
    assert named in lines[0], err
    assert "usage:" not in err and "expected one argument" not in err
    assert len(lines) == 1 or lines[1].startswith("hint: ")
