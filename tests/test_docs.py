"""The repository documents itself: docstrings and docs cite files that exist in it, and
the figures the docs state are the code's."""

from __future__ import annotations

import pathlib
import re

import pyarrow as pa
import pytest

from lance_minhash_sql.core.banding import lsh_probability, optimal_bands, recall_bands
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.core.sizes import parse_bytes
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.kernels.minhash import coefficients

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def sources() -> list[pathlib.Path]:
    files = list((ROOT / "lance_minhash_sql").rglob("*.py")) + list((ROOT / "lance_minhash_sql").rglob("*.sql"))
    files += list((ROOT / "tests").rglob("*.py")) + list((ROOT / "tests").rglob("*.sql"))
    files += list(DOCS.glob("*.md")) + [ROOT / "README.md"]
    return [f for f in files if f.name != "test_docs.py"]


def test_nothing_cites_documents_outside_the_repository():
    banned = re.compile(r"contract §|contract section|DESIGN §|DESIGN\.md|\.\./shared|/work/shared")
    for path in sources():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not banned.search(line), f"{path.relative_to(ROOT)}:{n}: {line.strip()}"


def test_every_cited_docs_page_exists():
    cited = set()
    for path in sources():
        cited |= set(re.findall(r"docs/([\w.-]+\.md)", path.read_text(encoding="utf-8")))
    assert {"signatures.md", "parameters.md"} <= cited
    assert {"index-format.md", "search.md"} <= cited
    missing = {name for name in cited if not (DOCS / name).exists()}
    assert not missing, missing


def test_known_answer_vectors_of_signatures_md_are_the_codes():
    text = (DOCS / "signatures.md").read_text(encoding="utf-8")
    a, b, c = coefficients(4)
    for name, values in (("a", a), ("b", b), ("c", c)):
        assert f"{name} = " + " ".join(f"{int(x):016x}" for x in values) in text
    signer = signer_for(MinHashParams(4, 2, 2))
    texts = ["The quick brown fox", "Fox"]
    sigs, has = signer.sign(pa.array(texts))
    assert has.all()
    for t, sig, keys in zip(texts, sigs, signer.band_keys(sigs)):
        line = next(l for l in text.splitlines() if l.startswith(f'"{t}"'))
        assert line.split()[-6:] == ["signature", *(f"{int(v):04x}" for v in sig), "band", "keys",
                                     *(f"{int(k):016x}" for k in keys)][-6:]
        assert "signature " + " ".join(f"{int(v):04x}" for v in sig) in line


def test_byte_size_table_of_parameters_md_is_the_rule():
    text = (DOCS / "parameters.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (`[^|]+`) \| ([\d,]+) \|$", text, re.M)
    assert len(rows) == 4
    for texts, n in rows:
        for t in re.findall(r"`([^`]+)`", texts):
            assert parse_bytes(t, "x") == int(n.replace(",", "")), t


def test_band_table_of_parameters_md_is_the_math():
    text = (DOCS / "parameters.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([\d.]+) \| (\d+) x (\d+) \| ([\d.]+) \| (\d+) x (\d+) \| ([\d.]+) \|$", text, re.M)
    assert len(rows) == 5
    for t, rb, rr, rp, ob, orr, op in rows:
        t = float(t)
        assert recall_bands(t, 128) == (int(rb), int(rr)) and optimal_bands(t, 128) == (int(ob), int(orr))
        for b, r, p in ((rb, rr, rp), (ob, orr, op)):
            decimals = len(p.split(".")[-1]) if "." in p else 0
            assert abs(lsh_probability(t, int(b), int(r)) - float(p)) < 10 ** -decimals


# ------------------------------------------------------------- every SQL example keeps running

_BLOCK = re.compile(r"(<!-- not run: [^>]+ -->\n)?^```(sql|bash)\n(.*?)^```", re.S | re.M)


def doc_pages() -> list[pathlib.Path]:
    return [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))


def blocks(path: pathlib.Path, language: str) -> list[str]:
    """The ``language`` code blocks of a page, except those marked ``<!-- not run: why -->``."""
    return [code for skip, lang, code in _BLOCK.findall(path.read_text(encoding="utf-8"))
            if lang == language and not skip]


@pytest.fixture(scope="module")
def example_data(tmp_path_factory):
    """The names the examples use, in one folder: corpus.lance (indexed), eval.lance and
    batch.lance (later rows of the same generator, indexed), demo/corpus.lance."""
    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.faces.corpus import write_corpus

    d = tmp_path_factory.mktemp("docs")
    write_corpus(str(d / "corpus.lance"), 3000, with_truth=True)
    write_corpus(str(d / "eval.lance"), 300, start=3000)
    write_corpus(str(d / "batch.lance"), 500, start=3300, with_truth=True)  # the corpus's columns: it is ingested
    write_corpus(str(d / "demo" / "corpus.lance"), 3000, with_truth=True)
    for name in ("corpus.lance", "eval.lance", "batch.lance"):
        build_index(str(d / name), "text")
    return d


def _tables(con) -> None:
    """Nothing but SQL: the examples read the datasets' rows with minhash_rows, as any SQL
    session can (lance-minhash sql, dbt)."""
    con.execute("SET enable_progress_bar = false")


@pytest.mark.parametrize("page", [p.relative_to(ROOT).as_posix() for p in doc_pages() if blocks(p, "sql")])
def test_sql_examples_run(page, example_data, monkeypatch):
    """Each SQL block of the page, statement by statement, over example datasets; a block
    that needs what the suite cannot give (a cloud bucket) is marked ``<!-- not run: -->``."""
    import lance_minhash_sql as lms

    monkeypatch.chdir(example_data)
    con = lms.connect()
    _tables(con)
    ran = 0
    for block in blocks(ROOT / page, "sql"):
        for stmt in con.extract_statements(block):
            con.execute(stmt.query).fetchall()
            ran += 1
    assert ran


def test_sql_command_examples_of_the_docs_run(example_data, monkeypatch, capsys):
    """The ``lance-minhash sql`` blocks of the docs run as written, and a transcript
    (``$ lance-minhash sql "..."`` then its output) shows what the command prints."""
    import shlex

    from lance_minhash_sql.faces import cli

    monkeypatch.chdir(example_data)
    ran = 0
    for page in doc_pages()[1:]:
        for block in blocks(page, "bash"):
            if block.startswith("lance-minhash sql "):
                assert cli.main(shlex.split(block)[1:]) == 0, (page.name, capsys.readouterr().err)
                out, err = capsys.readouterr()
                assert "_rowid" not in err and out.count("\n") > 3 and not err, (page.name, out, err)
                ran += 1
        text = page.read_text(encoding="utf-8")
        for command, shown in re.findall(r"^\$ (lance-minhash sql [^\n]*)\n(.*?)^```", text, re.S | re.M):
            code = cli.main(shlex.split(command)[1:])
            out, err = capsys.readouterr()
            assert " ".join((out + err).split()) == " ".join(shown.split()), (page.name, command, out + err)
            ran += 1
    assert ran >= 2


def test_python_md_keep_policy_examples_run(example_data, monkeypatch, capsys):
    """python.md's ``keep_flags(..., order_by=...)`` and ``--order-by`` lines name columns
    the example corpus has."""
    import shlex

    import lance_minhash_sql as lms
    from lance_minhash_sql.faces import cli

    monkeypatch.chdir(example_data)
    text = (DOCS / "python.md").read_text(encoding="utf-8")
    calls = re.findall(r"^(lms\.keep_flags\(.*?\))\s*(?:#.*)?$", text, re.M)
    commands = re.findall(r"^(lance-minhash dedup .*--order-by.*?)\s*(?:#.*)?$", text, re.M)
    assert calls and commands
    for call in calls:
        flags = eval(call, {"lms": lms})  # noqa: S307  (the page's own line)
        assert flags.num_rows > 0 and "keep" in flags.column_names
    for command in commands:
        argv = shlex.split(command)[1:]
        assert cli.main(argv) == 0, capsys.readouterr().err
        output = argv[argv.index("--output") + 1]
        assert (example_data / output).is_dir()
        import shutil

        shutil.rmtree(example_data / output)


def test_readme_shell_tour_runs(example_data):
    """The README's command-line tour, verbatim, from the folder the demo writes into."""
    import os
    import subprocess
    import sys

    setup, *rest = blocks(ROOT / "README.md", "bash")
    tour = "".join(rest)  # the tour, then the review page
    assert "pip install" in setup and "lance-minhash review" in tour
    bin_dir = os.path.dirname(sys.executable)
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + tour], cwd=example_data, capture_output=True,
                          text=True, env={**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"]})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "built text_idx" in proc.stdout and "count_star()" in proc.stdout and "warning" not in proc.stderr
    assert (example_data / "review.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_quoted_error_messages_are_the_real_ones(example_data, monkeypatch):
    """An error message quoted in the docs is a prefix of what the call really says."""
    import duckdb

    import lance_minhash_sql as lms

    monkeypatch.chdir(example_data)
    con = lms.connect()
    quoted = set()
    for page in doc_pages():
        text = page.read_text(encoding="utf-8").replace("\n", " ")
        quoted |= set(re.findall(r"InvalidParameterError: (minhash_\w+): threshold := 1\.5 is out of range: ([^.`]*?)"
                                 r"(?: \.\.\.|\(|`)", text))
    assert len(quoted) >= 2, quoted  # the README and docs/sql.md
    for fn, rest in quoted:
        with pytest.raises(duckdb.Error) as info:
            con.sql(f"SELECT * FROM {fn}('corpus.lance', 'text', threshold := 1.5)").fetchall()
        assert f"InvalidParameterError: {fn}: threshold := 1.5 is out of range: {rest.strip()}" in str(info.value)



def test_docs_are_guides_within_their_length():
    """docs/scale.md is a sizing guide, not a log of runs; the docs as a whole stay within
    their length (the pipelines guide included)."""
    lines = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in DOCS.glob("*.md")}
    assert lines["scale.md"] <= 300, lines["scale.md"]
    assert sum(lines.values()) < 3300, sum(lines.values())


def test_benchmarks_readme_names_every_benchmark_and_its_command():
    """benchmarks/README.md has a row per script with the command that runs it, and every
    benchmark command that docs/scale.md quotes runs a script the table names."""
    bench = ROOT / "benchmarks"
    readme = (bench / "README.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+\.py)` \|.*\| `(python benchmarks/[^`]+)` \|$",
                                                        readme, re.M)}
    helpers = {"allpairs.py", "datatrove_minhash.py"}
    scripts = {p.name for p in bench.glob("*.py")}
    assert set(rows) == scripts - helpers, set(rows) ^ (scripts - helpers)
    assert all(rows[name].split()[1] == f"benchmarks/{name}" for name in rows)
    assert all(f"`{name}`" in readme for name in helpers)
    quoted = set(re.findall(r"python benchmarks/(\w+\.py)", (DOCS / "scale.md").read_text(encoding="utf-8")))
    assert quoted and quoted <= set(rows), quoted - set(rows)


def test_the_pylance_versions_the_docs_state_include_the_one_tested():
    """Where the README and docs name the pylance versions the index is identical to, the
    one installed (the one these tests ran against) is among them."""
    import lance

    stated = []
    for page in doc_pages():
        text = " ".join(page.read_text(encoding="utf-8").split())
        stated += [(page.name, m.group(1)) for m in re.finditer(r"pylance (14\.\d+\.\d+(?: and 14\.\d+\.\d+)*)", text)]
    assert any(name == "README.md" for name, _ in stated), stated
    assert all(lance.__version__ in versions.split(" and ") for _, versions in stated), (lance.__version__, stated)
