"""One message per rule, in the syntax of the interface that called: SQL ``threshold :=
1.5``, Python ``threshold=1.5``, the command line ``--threshold 1.5``; byte sizes by one rule
with one wording; choices case-insensitive everywhere; warnings in the caller's syntax."""

from __future__ import annotations

import warnings

import duckdb
import pytest

import lance_minhash_sql as lms
from lance_minhash_sql.faces import cli


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("messages") / "corpus.lance")
    lms.write_corpus(uri, 1000)
    lms.build_index(uri, "text")
    return uri


def sql_error(sql: str) -> str:
    with pytest.raises(duckdb.Error) as info:
        lms.connect().sql(sql).fetchall()
    return str(info.value).split("InvalidParameterError: ", 1)[1]


def python_error(call) -> str:
    with pytest.raises(lms.InvalidParameterError) as info:
        call()
    return str(info.value)


def cli_error(argv, capsys) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    return err.split("InvalidParameterError: ", 1)[1].strip()


RULE = "is out of range: requires 0 < threshold <= 1"


def test_the_threshold_rule_in_each_interface(corpus, capsys):
    sql = sql_error(f"SELECT * FROM minhash_pairs('{corpus}', 'text', threshold := 1.5)")
    py = python_error(lambda: lms.pairs(corpus, "text", 1.5))
    line = cli_error(["pairs", corpus, "text", "--threshold", "1.5"], capsys)
    assert sql.startswith(f"minhash_pairs: threshold := 1.5 {RULE}")
    assert py.startswith(f"threshold=1.5 {RULE}")
    assert line.startswith(f"--threshold 1.5 {RULE}")
    assert sql.split(RULE)[1] == py.split(RULE)[1] == line.split(RULE)[1]  # one rule, one wording


def test_num_bands_in_each_interface(corpus, capsys):
    sql = sql_error(f"SELECT * FROM minhash_build('{corpus}', 'text', num_bands := 7)")
    py = python_error(lambda: lms.build_index(corpus, "text", num_bands=7))
    line = cli_error(["build", corpus, "text", "--num-bands", "7", "--quiet"], capsys)
    assert sql.startswith("minhash_build: num_bands := 7 does not divide num_hashes := 128")
    assert py.startswith("num_bands=7 does not divide num_hashes=128")
    assert line.startswith("--num-bands 7 does not divide --num-hashes 128")


@pytest.mark.parametrize("value, sql_value", [(-1, "-1"), (0, "0"), ("'-2GB'", "'-2GB'")])
def test_byte_sizes_one_rule_one_wording(corpus, capsys, value, sql_value):
    """Python's -1 and SQL's -1 (handed over as text) say the same thing."""
    py_value = -1 if value == -1 else 0 if value == 0 else "-2GB"
    sql = sql_error(f"SELECT * FROM minhash_build('{corpus}', 'text', memory_limit := {sql_value})")
    py = python_error(lambda: lms.build_index(corpus, "text", memory_limit=py_value))
    line = cli_error(["build", corpus, "text", f"--memory-limit={py_value}", "--quiet"], capsys)
    rest = py.split(" ", 1)[1]
    assert py.startswith(f"memory_limit={py_value!r} (") and "must be positive" in rest
    assert sql == f"minhash_build: memory_limit := {py_value!r} {rest}"
    assert line == f"--memory-limit {py_value!r} {rest}"


def test_the_tokenizer_error_names_the_function_once(corpus):
    sql = sql_error(f"SELECT * FROM minhash_build('{corpus}', 'text', tokenizer := {{'base_tokenizer': 'nope'}})")
    assert sql.startswith("minhash_build: base_tokenizer := 'nope' is unknown") and sql.count("minhash_build") == 1


def test_choices_are_case_insensitive_everywhere(corpus, capsys):
    assert cli.main(["clusters", corpus, "text", "--clustering", "Star", "--verify", "Exact", "--limit", "1"]) == 0
    out = capsys.readouterr().out
    ((n,),) = lms.connect().sql(f"SELECT count(DISTINCT cluster_id) FROM minhash_clusters('{corpus}', 'text', "
                                "clustering := 'STAR', verify := 'Exact')").fetchall()
    assert len(lms.clusters(corpus, "text", clustering="Star", verify="EXACT")) >= n and f"{n:,} clusters" in out


def test_warnings_read_in_the_callers_syntax(corpus, capsys):
    """The low-recall advice: Python's keywords from Python, SQL's from SQL, options from
    the command line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lms.clusters(corpus, "text", 0.4)
    (py,) = [str(w.message) for w in caught if isinstance(w.message, lms.LowRecallWarning)]
    assert "threshold=0.4" in py and "build_index(dataset, column, num_hashes=128" in py and ":=" not in py
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lms.connect().sql(f"SELECT count(*) FROM minhash_clusters('{corpus}', 'text', threshold := 0.4)").fetchall()
    (sql,) = [str(w.message) for w in caught if isinstance(w.message, lms.LowRecallWarning)]
    assert "minhash_build(dataset, column, num_hashes := 128" in sql
    assert "threshold := 0.4 lies far below" in sql and "=" not in sql.replace(":=", "")
    assert cli.main(["clusters", corpus, "text", "--threshold", "0.4", "--limit", "1"]) == 0
    err = capsys.readouterr().err
    assert "warning: --threshold 0.4 lies far below" in err and "lance-minhash build DATASET COLUMN" in err
    assert "=" not in err and ":=" not in err and err.count("lies far below") == 1
    assert cli.main(["sql", f"SELECT count(*) FROM minhash_clusters('{corpus}', 'text', threshold := 0.4)"]) == 0
    err = capsys.readouterr().err  # SQL run by the command line: SQL's syntax, once
    assert err.count("warning: threshold := 0.4 lies far below") == 1 and "--" not in err and "=" not in \
        err.replace(":=", "")


NUMERIC_ARGUMENTS = [  # every numeric argument of the table macros of sql/*.sql
    ("minhash_build", "num_hashes"), ("minhash_build", "num_bands"), ("minhash_build", "shingle_size"),
    ("minhash_build", "threshold"), ("minhash_search", "k"), ("minhash_search", "threshold"),
    ("minhash_search_ids", "k"), ("minhash_search_ids", "threshold"), ("minhash_join", "threshold"),
    ("minhash_pairs", "threshold"), ("minhash_clusters", "threshold"), ("minhash_dedup", "threshold"),
    ("minhash_report", "sample"), ("minhash_report", "threshold"), ("minhash_report", "seed"),
    ("minhash_scurve", "sample"), ("minhash_scurve", "threshold"), ("minhash_scurve", "seed"),
    ("minhash_buckets", "top"), ("minhash_estimate", "sample_rows"), ("minhash_estimate", "seed"),
    ("minhash_ingest_plan", "threshold"), ("minhash_ingest", "threshold")]


@pytest.mark.parametrize("fn, name", NUMERIC_ARGUMENTS)
@pytest.mark.parametrize("value, sql_type", [("'abc'", "VARCHAR"), ("true", "BOOLEAN"), ("[1, 2]", "INTEGER[]")])
def test_a_numeric_sql_argument_of_another_type_is_named(corpus, fn, name, value, sql_type):
    """Not DuckDB's "Could not convert string 'abc' to DOUBLE": the function, the argument
    as written, the rule and a fix."""
    two = f"'{corpus}', '{corpus}', 'text'"
    first = {"minhash_join": two, "minhash_ingest_plan": two, "minhash_ingest": two}.get(fn, f"'{corpus}', 'text'")
    query = ", 'a b c'" if fn.startswith("minhash_search") else ""
    message = sql_error(f"SELECT * FROM {fn}({first}{query}, {name} := {value})")
    assert message.startswith(f"{fn}: {name} := {value} must be a number, not {sql_type}; pass e.g. {name} := ")


def test_every_numeric_argument_of_the_table_macros_is_checked():
    """NUMERIC_ARGUMENTS lists each _lms_number of the macro files, and nothing else."""
    import re

    from lance_minhash_sql.duck.install import macro_files

    checked = {m for _, sql in macro_files() for m in re.findall(r"_lms_number\('(\w+)', '(\w+)'", sql)}
    assert checked == set(NUMERIC_ARGUMENTS)


def test_a_list_argument_reads_in_sql(corpus):
    message = sql_error(f"SELECT * FROM minhash_estimate('{corpus}', 'text', thresholds := [])")
    assert message.startswith("minhash_estimate: thresholds := [] must be a non-empty list")


def test_a_threshold_of_the_wrong_type_says_so_in_python(corpus):
    message = python_error(lambda: lms.clusters(corpus, "text", "0.8"))
    assert message.startswith("threshold='0.8' must be a number, not str") and "out of range" not in message


def test_an_older_spelling_warns_once_in_the_callers_syntax(corpus, capsys):
    """exact := true (SQL), exact=True (Python), --exact (the command line): one warning,
    in that interface's words, however often the statement is bound."""
    lms.clear_cache()  # forget the spellings warned about before
    con = lms.connect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        relation = con.sql(f"SELECT count(*) FROM minhash_search('{corpus}', 'text', 'a b c', 3, exact := true)")
        relation.fetchall()  # bound once more
        relation.fetchall()
    said = [str(w.message) for w in caught if issubclass(w.category, lms.DeprecatedSpellingWarning)]
    assert said == ["exact := true is verify := 'exact': pass verify := 'exact' (exact is going away)"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        lms.pairs(corpus, "text", exact=True)
    said = [str(w.message) for w in caught if issubclass(w.category, lms.DeprecatedSpellingWarning)]
    assert said == ["exact=True is verify='exact': pass verify='exact' (exact is going away)"]
    assert cli.main(["pairs", corpus, "text", "--exact", "--limit", "0", "--quiet"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "exact" in line] == \
        ["lance-minhash: warning: --exact is --verify 'exact': pass --verify 'exact' (exact is going away)"]
    with pytest.warns(FutureWarning, match="exact=True"):  # a filter asking for every one sees every one
        lms.pairs(corpus, "text", exact=True)


def test_lateral_warnings_name_the_users_row(corpus):
    """A LATERAL search numbers its queries as the statement's rows, from 1, NULL queries
    counted: the row without tokens here is the third."""
    con = lms.connect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        con.sql(f"SELECT q.i, s._rowid FROM (VALUES (1, NULL), (2, 'a b c d e'), (3, '...'), (4, 'x y z')) q(i, t), "
                f"LATERAL minhash_search_ids('{corpus}', 'text', q.t, 3) s").fetchall()
    texts = [str(w.message) for w in caught if isinstance(w.message, lms.EmptySearchWarning)]
    assert any("the query of row 3, '...'" in t and "no tokens" in t for t in texts), texts
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lms.search_ids(corpus, "text", ["a b c d e", "..."], 3)
    texts = [str(w.message) for w in caught if isinstance(w.message, lms.EmptySearchWarning)]
    assert any("queries[1], '...'" in t for t in texts), texts
