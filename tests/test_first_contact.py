"""What a new user meets first: the demo's answers, the CLI's errors and hints, warnings
that explain an empty result, and no noise (one test per trap found walking through the
README, the examples and the command line)."""

from __future__ import annotations

import os
import sys
import warnings

import duckdb
import lance
import pyarrow as pa
import pytest

import lance_minhash_sql as lms
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.errors import EmptySearchWarning, InvalidParameterError
from lance_minhash_sql.core.params import check_threshold
from lance_minhash_sql.faces import cli
from lance_minhash_sql.faces.corpus import write_corpus


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("fc") / "corpus.lance")
    write_corpus(uri, 3000, with_truth=True)
    build_index(uri, "text")
    return uri


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# 1. the demo's batch search compares ids, not _rowid with id
def test_demo_batch_search_skips_the_query_itself_when_rowids_are_not_ids(tmp_path):
    uri = str(tmp_path / "corpus.lance")
    write_corpus(uri, 2000, with_truth=True)
    write_corpus(uri, 2000, mode="overwrite", with_truth=True)  # the demo's second run: fragment 1
    build_index(uri, "text")
    ds = lance.dataset(uri)
    rowids = ds.to_table(columns=["id"], with_row_id=True)
    assert rowids.column("_rowid")[0].as_py() != rowids.column("id")[0].as_py()  # _rowid == id no longer holds
    con = lms.connect()
    con.register("corpus", ds)
    con.register("corpus_rows", ds.to_table(columns=["id", "source_id", "edit"], with_row_id=True))
    title, sql = next(q for q in cli.INDEX_QUERIES if q[0].startswith("Batch search"))
    rows = con.sql(sql.replace("{uri}", "'" + uri + "'")).fetchall()
    assert [r[0] for r in rows] == [7, 14, 20, 23, 32]  # every query shown, once
    assert all(match != query for query, match, _ in rows)
    assert any(match is not None for _, match, _ in rows)


# 2. sql FILE that does not exist
def test_sql_names_a_missing_file(capsys, tmp_path):
    code, _, err = run(capsys, "sql", str(tmp_path / "missing.sql"))
    assert code == 2 and "no such file" in err and "missing.sql" in err and "Parser Error" not in err
    code, _, err = run(capsys, "sql", "missing.sql")
    assert code == 2 and "no such file 'missing.sql'" in err


# 3. one threshold rule, one message, in every command
@pytest.mark.parametrize("command", ["build", "pairs", "clusters", "dedup"])
def test_threshold_rule_is_one_rule_in_every_command(capsys, indexed, command):
    code, _, err = run(capsys, command, indexed, "text", "--threshold", "1.5", "--quiet")
    assert code == 2
    with pytest.raises(InvalidParameterError) as exc:
        check_threshold(1.5)
    assert str(exc.value).replace("threshold=1.5", "--threshold 1.5") in err  # the rule, in the CLI's syntax
    assert "0 < threshold <= 1" in err and "e.g. 0.8" in err


def test_threshold_one_is_accepted_by_build_and_pairs(capsys, tmp_path):
    uri = str(tmp_path / "c.lance")
    write_corpus(uri, 500)
    assert run(capsys, "build", uri, "text", "--threshold", "1", "--quiet")[0] == 0
    assert run(capsys, "pairs", uri, "text", "--threshold", "1", "--quiet")[0] == 0
    pairs_at_one = pa.Table.from_batches(list(lms.pairs(uri, "text", 1.0)))
    assert pairs_at_one.num_rows > 0 and set(pairs_at_one.column("similarity").to_pylist()) == {1.0}
    in_pairs = set(pairs_at_one.column("left_rowid").to_pylist()) | set(pairs_at_one.column("right_rowid").to_pylist())
    assert set(lms.clusters(uri, "text", 1.0).column("_rowid").to_pylist()) == in_pairs


# 4. an empty result says why
def test_query_without_tokens_warns_in_python_sql_and_cli(capsys, indexed):
    with pytest.warns(EmptySearchWarning, match="has no tokens"):
        assert lms.search(indexed, "text", "!!! ...").num_rows == 0
    con = lms.connect()
    with pytest.warns(EmptySearchWarning, match="has no tokens"):
        assert con.sql(f"SELECT count(*) FROM minhash_search_ids('{indexed}', 'text', '', 3)").fetchall() == [(0,)]
    code, _, err = run(capsys, "search", indexed, "text", "...")
    assert code == 0 and "lance-minhash: warning:" in err and "has no tokens" in err


def test_warnings_point_at_the_users_line_never_the_package(indexed, tmp_path):
    """A warning from Python names the caller's own file and line; from SQL (a UDF DuckDB
    runs: no caller outside the package) it names the package alone, with no code line;
    lance-minhash warmup, which asked for nothing, prints none."""
    import os
    import subprocess
    import sys

    package = os.path.dirname(lms.__file__)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        lms.search(indexed, "text", "!!! ...")
        list(lms.pairs(indexed, "text", 0.3))  # LowRecallWarning, from the self-join's planning
        lms.connect().sql(f"SELECT count(*) FROM minhash_search_ids('{indexed}', 'text', '', 3)").fetchall()
    assert [w.category.__name__ for w in got] == ["EmptySearchWarning", "LowRecallWarning", "EmptySearchWarning"]
    assert all(w.filename in (__file__, "lance_minhash_sql") for w in got), [w.filename for w in got]
    assert got[0].filename == got[1].filename == __file__
    for w in got:  # no file or code line of the package's
        assert package not in warnings.formatwarning(w.message, w.category, w.filename, w.lineno)
    proc = subprocess.run([sys.executable, "-m", "lance_minhash_sql.faces.cli", "warmup"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": os.path.dirname(package)})
    assert proc.returncode == 0 and "warning" not in proc.stderr.lower(), proc.stderr


def test_advice_in_the_syntax_of_the_interface_used(capsys, indexed, tmp_path):
    """The same rule's advice reads as SQL in SQL, as Python in Python, as options on the
    command line."""
    con = lms.connect()
    with pytest.raises(duckdb.Error) as sql:
        con.sql(f"SELECT * FROM minhash_dedup('{indexed}', 'text', keep := 'shortest')").fetchall()
    assert "keep := 'first' with order_by := " in str(sql.value)
    with pytest.raises(InvalidParameterError) as py:
        lms.dedup(indexed, "text", keep="shortest")
    assert "keep='first' with order_by='" in str(py.value) and ":=" not in str(py.value)
    with pytest.raises(InvalidParameterError) as py:
        lms.search(indexed, "text", "a b c", k=-1)
    assert "or None for no limit with a threshold" in str(py.value) and "NULL" not in str(py.value)
    with pytest.raises(SystemExit):  # the command line lists its choices itself
        cli.main(["dedup", indexed, "text", "--keep", "shortest"])
    assert "--keep shortest: must be one of first, longest" in capsys.readouterr().err
    assert cli.cli_advice("keep := 'first' with order_by := 'quality DESC'") == \
        "--keep 'first' with --order-by 'quality DESC'"
    code, _, err = run(capsys, "search", indexed, "text", "a b c", "-k", "-1")
    assert code == 2 and "or -k all for no limit with --threshold" in err and "NULL" not in err
    code, _, err = run(capsys, "dedup", indexed, "text", "--output", str(tmp_path / "x.lance"), "--delete-in-place")
    assert code == 2 and "--output '" in err and "and --delete-in-place both" in err and "=True" not in err
    assert not (tmp_path / "x.lance").exists()


def test_sql_errors_name_their_function_and_seconds_are_rounded(indexed):
    con = lms.connect()
    for fn in ("minhash_build", "minhash_pairs", "minhash_clusters"):
        with pytest.raises(duckdb.Error) as info:
            con.sql(f"SELECT * FROM {fn}('{indexed}', 'text', threshold := 1.5)").fetchall()
        assert f"InvalidParameterError: {fn}: threshold := 1.5 is out of range: requires 0 < threshold <= 1" \
            in str(info.value), str(info.value)
    for fn in ("minhash_prewarm", "minhash_optimize"):  # to the millisecond, as SQL shows it
        (seconds,) = con.execute(f"SELECT seconds FROM {fn}('{indexed}', 'text')").fetchone()
        assert seconds == round(seconds, 3)


def test_empty_dataset_says_add_rows_not_build(tmp_path, capsys):
    """No circle: on a dataset without rows, the functions that need an index say to add
    rows, as the build does, instead of sending the user to a build that refuses."""
    uri = str(tmp_path / "empty.lance")
    lance.write_dataset(pa.table({"text": pa.array([], pa.string())}), uri)
    con = lms.connect()
    for sql in (f"SELECT * FROM minhash_pairs('{uri}', 'text')", f"SELECT * FROM minhash_search('{uri}', 'text', 'a')",
                f"SELECT * FROM minhash_clusters('{uri}', 'text')", f"SELECT * FROM minhash_optimize('{uri}', 'text')",
                f"SELECT * FROM minhash_build('{uri}', 'text')"):
        with pytest.raises(duckdb.Error) as info:
            con.sql(sql).fetchall()
        assert "DatasetError" in str(info.value) and "no rows" in str(info.value) and "add" in str(info.value), sql
    code, _, err = run(capsys, "pairs", uri, "text")
    assert code == 2 and "no rows" in err and "add rows first" in err


def test_query_sharing_no_band_warns(capsys, indexed):
    with pytest.warns(EmptySearchWarning, match="shares no LSH band"):
        assert lms.search(indexed, "text", "zebra quantum xylophone marmalade").num_rows == 0
    with pytest.warns(EmptySearchWarning, match="1 of 2 queries"):
        t = lms.search_ids(indexed, "text", ["zebra quantum xylophone marmalade",
                                             lance.dataset(indexed).take([5], ["text"]).column(0)[0].as_py()])
    assert set(t.column("query_index").to_pylist()) == {1}
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmptySearchWarning)
        assert lms.search(indexed, "text", lance.dataset(indexed).take([5], ["text"]).column(0)[0].as_py()).num_rows
    code, _, err = run(capsys, "search", indexed, "text", "zebra quantum xylophone marmalade")
    assert "shares no LSH band" in err and "lance-minhash build" in err and "minhash_build(" not in err


def test_a_threshold_search_that_finds_nothing_is_an_answer_not_a_warning(indexed):
    """No row shares a band with the query: at a threshold that means no row reaches it,
    which is what was asked (a query without tokens still warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmptySearchWarning)
        assert lms.search(indexed, "text", "zebra quantum xylophone marmalade", None, threshold=0.8).num_rows == 0
        assert lms.search_ids(indexed, "text", ["zebra quantum xylophone marmalade"], None,
                              threshold=0.8).num_rows == 0
        con = lms.connect()
        assert con.sql(f"SELECT count(*) FROM (VALUES ('zebra quantum xylophone marmalade')) q(t), LATERAL "
                       f"minhash_search_ids('{indexed}', 'text', q.t, k := NULL, threshold := 0.8)").fetchall() == [(0,)]
    with pytest.warns(EmptySearchWarning, match="has no tokens"):
        lms.search(indexed, "text", "!!!", None, threshold=0.8)


# 5. LATERAL minhash_search points at minhash_search_ids
def test_lateral_minhash_search_error_names_minhash_search_ids(capsys, indexed):
    code, _, err = run(capsys, "sql", f"SELECT * FROM (SELECT 'a b c' AS t) q, "
                                      f"LATERAL minhash_search('{indexed}', 'text', q.t, 2)")
    assert code == 2 and "lateral" in err.lower() and "minhash_search_ids" in err


# 6. Lance's errors without its Rust sources, with the path as given
def test_missing_dataset_names_the_path_without_rust_sources(capsys, tmp_path):
    missing = str(tmp_path / "nowhere.lance")
    code, _, err = run(capsys, "search", missing, "text", "abc")
    assert code == 2 and f"'{missing}'" in err and ".rs:" not in err and "/home/runner" not in err
    assert f" {missing.lstrip('/')}" not in err  # Lance's path without its leading /


def test_bad_filter_error_has_no_rust_sources(capsys, indexed):
    code, _, err = run(capsys, "search", indexed, "text", "abc", "--filter", "nonsense ==")
    assert code == 2 and "filter" in err and ".rs:" not in err


# 7. the CLI's errors give the CLI's advice
def test_cli_errors_give_cli_advice(capsys, tmp_path):
    uri = str(tmp_path / "c.lance")
    write_corpus(uri, 200)
    code, _, err = run(capsys, "search", uri, "text", "abc")
    assert code == 2 and "lance-minhash build" in err and "minhash_build(" not in err and "SELECT" not in err
    build_index(uri, "text")
    code, _, err = run(capsys, "dedup", uri, "text", "--keep", "longest", "--order-by", "id")
    assert code == 2 and "--order-by" in err and ":=" not in err, err


# 8. report --out without matplotlib fails before the work, with a hint that installs
def test_report_out_without_matplotlib_fails_first(capsys, monkeypatch, indexed, tmp_path):
    import lance_minhash_sql.diagnostics.report as report_mod

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setattr(report_mod, "report", lambda *a, **k: pytest.fail("the report ran before the check"))
    code, _, err = run(capsys, "report", indexed, "text", "--out", str(tmp_path / "plots"))
    assert code == 2 and "MissingDependencyError" in err and "matplotlib" in err
    assert "lance-minhash-sql[" not in err  # the package installs from its repository


# 10. no noise
def test_overwrite_of_a_new_path_logs_no_lance_warning(tmp_path):
    import subprocess

    code = ("from lance_minhash_sql.faces.corpus import write_corpus; "
            f"write_corpus({str(tmp_path / 'new.lance')!r}, 100, mode='overwrite')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ | {"RUST_LOG": ""})
    assert proc.returncode == 0, proc.stderr
    assert "No existing dataset" not in proc.stderr and "WARN" not in proc.stderr


def test_build_seconds_are_rounded_to_milliseconds(indexed):
    con = lms.connect()
    [(seconds,)] = con.sql(f"SELECT seconds FROM minhash_build('{indexed}', 'text')").fetchall()
    assert seconds == round(seconds, 3)
    r = build_index(indexed, "text")
    assert r.seconds == round(r.seconds, 3)


# 11. help texts
def test_every_argument_has_help(capsys):
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        for action in p._actions:
            if action.dest != "help":
                assert action.help, (name, action.dest)
    assert "--quiet" in sub.choices["clusters"].format_help()
    assert "FILE" in sub.choices["sql"].format_help() and "stdin" in sub.choices["sql"].format_help()
    assert "aws_region=us-east-1 \\\n" in parser.format_help()  # the S3 example keeps its line break


# 13. the README says what the package is, then the two set-up commands CI runs
def test_readme_opens_with_what_it_is_then_the_two_commands():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    intro, rest = readme.split("```bash\n", 1)
    assert "Near-duplicate detection" in intro and "```" not in intro
    commands = rest.split("```", 1)[0].strip().splitlines()
    assert len(commands) == 2 and commands[0].endswith("lance-minhash demo")
    with open(os.path.join(root, ".ci", "run"), encoding="utf-8") as fh:
        ci = fh.read()
    # CI runs the README's test command (pip quietly), after the README's notebook example as a user runs it
    assert commands[1].split(" && ", 2)[2] == 'pip install -e ".[test]" && python -m pytest -q'
    steps = [line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    notebook = "jupyter execute examples/quickstart.ipynb"
    assert f"`{notebook}`" in readme
    at = steps.index('pip install -q -e ".[test]"')
    assert steps[at:at + 3] == ['pip install -q -e ".[test]"', notebook, "python -m pytest -q"], steps
    # a guide that points to the reference, not the reference itself
    assert len(readme.splitlines()) < 300
    for page in ("docs/sql.md", "docs/python.md", "docs/cli.md", "docs/object-storage.md", "docs/distributed.md",
                 "docs/scale.md", "docs/architecture.md", "CONTRIBUTING.md", "CHANGELOG.md"):
        assert f"]({page})" in readme and os.path.exists(os.path.join(root, page)), page
    assert "from lance_minhash_sql." not in readme  # the package root only
    assert os.path.exists(os.path.join(root, "examples", "dbt_project", "README.md"))
