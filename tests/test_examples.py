"""The examples in examples/ run as a new user would run them, and say what the README says."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys

import duckdb
import lance
import pytest

import lance_minhash_sql as lms
from lance_minhash_sql.faces.corpus import write_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
BIN = os.path.dirname(sys.executable)


def run(args, cwd, env=None, timeout=300, quiet: bool = False):
    """``args``' stdout; ``quiet``: no Python warning in its output either."""
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    if quiet:
        assert "Warning" not in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    # no log noise: Lance's "WARN ... No existing dataset at ..." on a first write
    assert "WARN" not in proc.stderr and "No existing dataset" not in proc.stderr, proc.stderr[-3000:]
    return proc.stdout


def test_quickstart_script(tmp_path):
    out = run([sys.executable, os.path.join(EXAMPLES, "quickstart.py"), str(tmp_path / "qs")], cwd=tmp_path)
    lines = out.splitlines()
    assert lines[0] == "indexed 5,000 rows into 1 segment(s)"
    assert lines[1].startswith("top 3 for the query: [(0, 0.015625), ")  # document 0 minus its last word
    uri = str(tmp_path / "qs" / "corpus.lance")
    plan = lms.dedup(uri, "text", threshold=0.8, keep="longest")
    assert f"dedup would keep {plan.kept:,} of {plan.rows:,} rows" in out


def test_sql_session(tmp_path):
    write_corpus(str(tmp_path / "demo" / "corpus.lance"), 3000, with_truth=True)
    out = run([os.path.join(BIN, "lance-minhash"), "sql", os.path.join(EXAMPLES, "sql_session.sql")], cwd=tmp_path)
    assert out.count("┌") == 6  # one table per statement
    assert "text_idx" in out and "│     0 │ original │" in out and "rows_removed" in out


def test_sql_session_output_file(tmp_path):
    write_corpus(str(tmp_path / "demo" / "corpus.lance"), 3000, with_truth=True)
    run([os.path.join(BIN, "lance-minhash"), "sql", os.path.join(EXAMPLES, "sql_session.sql"), "-o", "last.parquet"],
        cwd=tmp_path)
    rows = duckdb.sql(f"SELECT * FROM '{tmp_path / 'last.parquet'}'").fetchall()
    flags = lms.connect().sql(f"SELECT count(*) FILTER (WHERE NOT keep), count(DISTINCT cluster_id) FROM "
                              f"minhash_dedup('{tmp_path / 'demo' / 'corpus.lance'}', 'text', keep := 'longest')")
    assert rows == flags.fetchall()


def test_notebook(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(os.path.join(EXAMPLES, "quickstart.ipynb"), as_version=4)
    nbclient.NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    assert "WARN" not in stderr and "No existing dataset" not in stderr and "\x1b[" not in stderr
    text = "\n".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "text_idx" in text and "│     0 │         0 │ original │" in text
    plan = lms.dedup(str(tmp_path / "notebook" / "corpus.lance"), "text", threshold=0.8, keep="longest")
    assert f"keep {plan.kept:,} of {plan.rows:,} rows" in text


def test_dbt_project_runs_two_days_of_the_pipeline(tmp_path):
    pytest.importorskip("dbt.adapters.duckdb")
    project = tmp_path / "dbt_project"
    shutil.copytree(os.path.join(EXAMPLES, "dbt_project"), project)
    corpus = str(tmp_path / "corpus.lance")
    write_corpus(corpus, 3000)
    lms.build_index(corpus, "text", threshold=0.8)
    # later rows of the same generator: near-duplicates of corpus rows and of each other
    eval_set = str(tmp_path / "eval.lance")
    write_corpus(eval_set, 400, start=3000)
    batches = [str(tmp_path / f"batch{d}.lance") for d in (1, 2)]
    write_corpus(batches[0], 800, start=3400)
    write_corpus(batches[1], 800, start=4200)
    db = str(tmp_path / "dbt.duckdb")
    rows = lance.dataset(corpus).count_rows()
    for day, batch in enumerate(batches, 1):
        version = lance.dataset(corpus).version
        plan = lms.ingest_plan(corpus, batch, "text", 0.8, verify="exact")  # the oracle: the Python API
        out = run([os.path.join(BIN, "dbt"), "build", "--profiles-dir", ".", "--project-dir", "."], cwd=project,
                  env={"LMS_CORPUS": corpus, "LMS_EVAL_SET": eval_set, "LMS_NEW_BATCH": batch, "DBT_DUCKDB_PATH": db,
                       "LMS_RETENTION": "0 seconds", "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"},
                  quiet=True)  # all green: nothing to attend to
        assert "Completed successfully" in out and "ERROR=0" in out and "WARN=0" in out, out[-3000:]
        con = duckdb.connect(db, read_only=True)
        ingested = con.execute("SELECT rows_appended, index_action, dataset_version FROM corpus_ingest").fetchone()
        dbt_plan = con.execute("SELECT _rowid, keep, twin_rowid FROM ingest_plan ORDER BY _rowid").fetchall()
        contaminated = {r for (r,) in con.execute("SELECT eval_rowid FROM decontamination_report").fetchall()}
        con.close()
        assert dbt_plan == [(r["_rowid"], r["keep"], r["twin_rowid"]) for r in plan.to_pylist()]
        kept = sum(plan.column("keep").to_pylist())
        assert 0 < kept < 800 and ingested == (kept, "delta", version + 1)
        rows += kept
        ds = lance.dataset(corpus)
        assert ds.count_rows() == rows and [v["version"] for v in ds.versions()] == [version + 1]  # cleaned
        want = {r for b in lms.join(eval_set, corpus, "text", 0.8, verify="exact")
                for r in b.column("left_rowid").to_pylist()}
        assert contaminated == want and 0 < len(want) < 400


# --------------------------------------------------------------- each example's README, verbatim

_BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
_PIP_EXTRA = re.compile(r'^pip install -e "\.\[([a-z,]+)\]"(\s+#.*)?$')


def readme_commands(path: str) -> list[str]:
    """The command lines of a README's ```bash blocks, in order (```sh blocks are
    templates with the reader's own paths)."""
    lines = []
    for block in _BASH_BLOCK.findall(open(path).read()):
        lines += [ln for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return lines


def installed_extra(line: str) -> bool:
    """A ``pip install -e ".[extra]"`` line whose extra the package declares and whose
    requirements are already installed here (the suite runs in the environment it would
    install into)."""
    from importlib.metadata import PackageNotFoundError, distribution, metadata, requires

    m = _PIP_EXTRA.match(line.strip())
    if not m:
        return False
    name = "lance-minhash-sql"
    for extra in m.group(1).split(","):
        assert extra in metadata(name).get_all("Provides-Extra"), f"{line!r}: the package has no extra {extra!r}"
        reqs = [r for r in requires(name) if re.search(rf"extra == .{extra}.", r)]
        assert reqs, line
        for req in reqs:
            dep = re.split(r"[<>=!\[; ]", req, maxsplit=1)[0]
            try:
                distribution(dep)
            except PackageNotFoundError:
                pytest.fail(f"{line!r}: {dep} is not installed")
    return True


@pytest.mark.parametrize("readme", sorted(glob.glob(os.path.join(EXAMPLES, "*", "README.md"))),
                         ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_example_readme_runs_verbatim(tmp_path, readme):
    """Every command of an example's README, run as written from a copy of the repository's
    root, in one shell that stops at the first failure; a ``pip install -e ".[extra]"``
    line is checked (the extra exists and is installed) rather than re-run."""
    commands = readme_commands(readme)
    assert commands, readme
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    script = ["set -euo pipefail"] + [":" if installed_extra(c) else c for c in commands]
    assert len([c for c in script if c != ":"]) >= 3
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"], "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    proc = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    if "dbt build" in "\n".join(commands):
        assert "Completed successfully" in proc.stdout and re.search(r"PASS=\d+ WARN=0 ERROR=0 SKIP=0", proc.stdout), \
            proc.stdout[-3000:]
