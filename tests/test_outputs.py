"""Outputs whole or absent (io/outputs.py): missing folders created before any work, a
folder that cannot be made refused in one line, and a ``dedup --output`` killed at any
moment leaves its path absent, whole, or a leftover the rerun replaces."""

from __future__ import annotations

import os
import subprocess
import sys

import lance
import numpy as np
import pytest

import lance_minhash_sql as lms
from lance_minhash_sql.faces import cli
from lance_minhash_sql.io.outputs import uncommitted_lance

HERE = os.path.dirname(__file__)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("outputs") / "corpus.lance")
    lms.write_corpus(uri, 3000)
    lms.build_index(uri, "text")
    return uri


def no_partials(folder) -> bool:
    return not [f for f in os.listdir(folder) if ".partial-" in f]


@pytest.mark.parametrize("argv", [
    "pairs {c} text --quiet --output {d}/pairs.parquet",
    "clusters {c} text --quiet --output {d}/clusters.csv",
    "join {c} {c} text --quiet --output {d}/join.parquet",
    "review {c} text --per-kind 1 --out {d}/r.html",
    "report {c} text --sample 200 --quiet --out {d}/plots",
    "sql SELECT_1 --output {d}/x.csv",
    "dedup {c} text --quiet --output {d}/d.lance",
])
def test_missing_folders_are_created(corpus, tmp_path, argv, capsys):
    if argv.startswith("report"):
        pytest.importorskip("matplotlib")
    folder = str(tmp_path / "a" / "b")
    words = ["SELECT 1" if w == "SELECT_1" else w.replace("{c}", corpus).replace("{d}", folder) for w in argv.split()]
    assert cli.main(words) == 0
    path = words[-1]
    assert os.path.exists(path) and no_partials(folder)
    if argv.startswith("dedup"):
        assert lance.dataset(path).count_rows() == expected_rows(corpus)


@pytest.mark.parametrize("command, option", [("pairs", "--output"), ("clusters", "--output"), ("dedup", "--output"),
                                             ("review", "--out"), ("report", "--out"), ("sql", "--output")])
def test_an_output_folder_that_cannot_be_made_is_refused_before_any_work(corpus, tmp_path, capsys, monkeypatch,
                                                                      command, option):
    blocker = tmp_path / "afile"
    blocker.write_text("a file where a folder should be")
    name = {"review": "r.html", "report": "plots", "dedup": "d.lance", "sql": "x.csv"}.get(command, "p.parquet")
    path = str(blocker / "sub" / name)

    def no_work(*a, **k):
        raise AssertionError("the command started its work")

    for module, fn in (("lance_minhash_sql.faces.review", "review"), ("lance_minhash_sql.api.entries", "pairs"),
                       ("lance_minhash_sql.api.entries", "clusters"), ("lance_minhash_sql.api.entries", "dedup"),
                       ("lance_minhash_sql.diagnostics.report", "report"), ("lance_minhash_sql.duck.install", "connect")):
        monkeypatch.setattr(f"{module}.{fn}", no_work)
    argv = ["sql", "SELECT 1", option, path] if command == "sql" else [command, corpus, "text", option, path]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lance-minhash: error: DatasetError: ")
    assert f"{option} {path!r}: cannot create the folder" in err


def test_python_review_creates_the_folder_and_refuses_a_folder_as_a_file(corpus, tmp_path):
    page = tmp_path / "x" / "y" / "r.html"
    lms.review(corpus, "text", per_kind=1, out=str(page))
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>") and no_partials(page.parent)
    with pytest.raises(lms.DatasetError, match="is a folder; name a file in it"):
        lms.review(corpus, "text", per_kind=1, out=str(tmp_path / "x"))


def expected_rows(corpus) -> int:
    return lms.dedup(corpus, "text", 0.8).kept


def run_killed(corpus, output, kill_at: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, os.path.join(HERE, "kill_during_write.py"), corpus, output, str(kill_at)],
                          capture_output=True, text=True, env=env, timeout=600)


def test_dedup_output_killed_at_any_moment_is_absent_whole_or_replaced(corpus, tmp_path):
    """kill -9 at several moments of ``dedup --output``, chosen by counting the write's
    events (batches handed to Lance, file-system calls), up to the rename that publishes it:
    each time the path is absent, a dataset Lance opens whole, or a leftover the rerun
    replaces; the rerun then writes the whole dataset."""
    want = expected_rows(corpus)
    output = str(tmp_path / "k9.lance")
    counted = run_killed(corpus, output, 0)
    assert counted.returncode == 0, counted.stderr[-3000:]
    total, rename = map(int, counted.stdout.strip().splitlines()[-1].split()[1:])
    assert lance.dataset(output).count_rows() == want and rename > 0 and total > 10
    moments = sorted({1, rename - 1, rename, *np.random.default_rng(0).integers(2, rename - 1, 2).tolist()})
    assert len(moments) >= 4
    for k in moments:
        lms_rm(output)
        proc = run_killed(corpus, output, k)
        assert proc.returncode == -9, (k, proc.returncode, proc.stderr[-2000:])
        if os.path.exists(output):
            if uncommitted_lance(output):
                state = "leftover"
            else:
                assert lance.dataset(output).count_rows() == want, k
                state = "whole"
        else:
            state = "absent"
        assert state in ("absent", "whole", "leftover")
        if k > 1:  # killed inside the write: its temporary beside the path is what is left
            assert not no_partials(tmp_path), k
        if state == "whole":
            continue
        rerun = run_killed(corpus, output, 0)
        assert rerun.returncode == 0, (k, rerun.stderr[-2000:])
        assert lance.dataset(output).count_rows() == want and no_partials(tmp_path), k


def lms_rm(path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def test_a_killed_write_straight_into_the_path_is_recognised_and_replaced(corpus, tmp_path, capsys):
    """What a write straight into the path leaves when killed (data files, no manifest):
    the rerun replaces it rather than refusing the path; a real dataset is never replaced."""
    output = tmp_path / "k9.lance"
    (output / "data").mkdir(parents=True)
    (output / "data" / ".tmpAbC123").write_bytes(b"\0" * 100)
    assert uncommitted_lance(str(output))
    assert cli.main(["dedup", corpus, "text", "--output", str(output), "--quiet"]) == 0
    assert lance.dataset(str(output)).count_rows() == expected_rows(corpus)
    capsys.readouterr()
    assert cli.main(["dedup", corpus, "text", "--output", str(output), "--quiet"]) == 2
    assert "already exists" in capsys.readouterr().err
    mine = tmp_path / "mine"
    (mine / "data").mkdir(parents=True)
    (mine / "data" / "notes.txt").write_text("a user's own file")
    assert not uncommitted_lance(str(mine))


def git_root() -> str:
    """The clone's root (the test is skipped outside a git clone)."""
    import shutil

    root = os.path.dirname(HERE)
    if shutil.which("git") is None or not os.path.exists(os.path.join(root, ".git")):
        pytest.skip("not a git clone")
    return root


def doc_pages(root: str) -> list[str]:
    """The pages whose commands a user runs: the README, ``docs/*.md`` and every file of
    ``examples/``, as git tracks them (what running the examples writes beside them, a
    ``corpus.lance`` folder for instance, is not a page)."""
    proc = subprocess.run(["git", "ls-files", "-z", "--", "README.md", "docs", "examples"], cwd=root,
                          capture_output=True, text=True, check=True)
    names = [n for n in proc.stdout.split("\0") if n]
    keep = [n for n in names if n == "README.md" or (n.startswith("docs/") and n.count("/") == 1 and n.endswith(".md"))
            or (n.startswith("examples/") and "." in os.path.basename(n))]
    return [os.path.join(root, n) for n in keep if os.path.isfile(os.path.join(root, n))]


def test_what_the_docs_commands_write_into_the_clone_is_git_ignored():
    """Every --output / --out / -o path of the README, docs and examples, written from the
    clone's root (and the temporaries beside them), is ignored by git."""
    import re

    root = git_root()
    names = set()
    for page in doc_pages(root):
        with open(page, encoding="utf-8", errors="replace") as fh:
            for m in re.finditer(r"(?:--output|--out|-o) ([^\s`\]]+)", fh.read()):
                names |= {n for n in m.group(1).split("|") if "." in n or n.endswith("/")}
    assert {"result.parquet", "review.html", "report/", "deduped.lance"} <= names, names
    paths = sorted(n.rstrip("/") + ("/data/x.lance" if n.endswith(("/", ".lance")) else "") for n in names)
    paths.append(".result.parquet.partial-123.parquet")
    proc = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=root, capture_output=True, text=True)
    assert sorted(proc.stdout.split()) == sorted(paths), proc.stdout


def test_what_the_examples_write_is_git_ignored_and_no_page():
    """The README's steps (``jupyter execute examples/quickstart.ipynb``, then the suite):
    the notebook writes ``examples/notebook/corpus.lance`` (the path it names, from
    ``examples/``), a folder whose name reads like a file's. That folder and everything in
    it are ignored by git, and the pages read for commands are files only."""
    import json
    import re
    import tempfile

    root = git_root()
    with open(os.path.join(root, "examples", "quickstart.ipynb"), encoding="utf-8") as fh:
        cells = "".join("".join(c["source"]) for c in json.load(fh)["cells"])
    written = re.findall(r"write_corpus\('([^']+)'", cells)
    assert written == ["notebook/corpus.lance"], written
    folder = os.path.join(root, "examples", os.path.dirname(written[0]))
    os.makedirs(folder, exist_ok=True)
    made = tempfile.mkdtemp(suffix=".lance", dir=folder)  # what the notebook writes: a folder named *.lance
    try:
        open(os.path.join(made, "x.manifest"), "w").close()
        pages = doc_pages(root)
        assert os.path.join(root, "examples", "quickstart.ipynb") in pages
        assert all(os.path.isfile(p) for p in pages) and not [p for p in pages if p.startswith(made)]
        rel = [os.path.relpath(p, root) for p in (folder, made, os.path.join(made, "x.manifest"))]
        rel.append("examples/quickstart/corpus.lance/_versions/1.manifest")  # quickstart.py run from examples/
        proc = subprocess.run(["git", "check-ignore", "--no-index", *rel], cwd=root, capture_output=True, text=True)
        assert sorted(proc.stdout.split()) == sorted(rel), proc.stdout
    finally:
        import shutil

        shutil.rmtree(made, ignore_errors=True)
        if not os.listdir(folder):
            os.rmdir(folder)
