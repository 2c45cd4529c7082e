"""The review page (faces/review.py): what it shows is the dedup plan's own answer, and it
renders in a real headless browser without a network."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import lance
import numpy as np
import pytest

import lance_minhash_sql as lms
from lance_minhash_sql.faces import cli


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("review") / "corpus.lance")
    lms.write_corpus(uri, 2000, with_truth=True)
    lms.build_index(uri, "text")
    return uri


def chromium(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                               "--disable-component-update", "--disable-sync", "--no-first-run",
                               f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=timeout)


def test_page_shows_the_dedup_plan(corpus):
    """Sampled clusters are the plan's clusters: the largest by size, the kept row the one
    keep_flags keeps, every member listed with its exact Jaccard (shingle_jaccard in SQL)."""
    r = lms.review(corpus, "text", 0.8, keep="longest")
    flags = lms.keep_flags(corpus, "text", 0.8, keep="longest").to_pylist()
    members: dict[int, list] = {}
    for f in flags:
        members.setdefault(f["cluster_id"], []).append(f)
    assert r.rows == len(flags) and r.dropped == sum(not f["keep"] for f in flags)
    assert r.num_clusters == len(members) and sum(s * n for s, n in r.sizes) == len(flags)
    kinds = [c.kind for c in r.clusters]
    assert kinds == ["largest"] * 3 + ["borderline"] * 3 + ["random"] * 3
    largest = sorted(members, key=lambda c: (-len(members[c]), c))[:3]
    assert [c.cluster_id for c in r.clusters[:3]] == largest
    assert len({c.cluster_id for c in r.clusters}) == 9
    con = lms.connect()
    for c in r.clusters:
        rows = members[c.cluster_id]
        (kept,) = [f["_rowid"] for f in rows if f["keep"]]
        assert c.kept.rowid == kept and c.kept.kept and c.size == len(rows)
        assert {m.rowid for m in c.members} <= {f["_rowid"] for f in rows}
        assert len(c.members) == min(len(rows), 8)
        for m in c.members[1:]:
            (want,) = con.execute("SELECT shingle_jaccard(?, ?)", [c.kept.text, m.text]).fetchone()
            assert abs(m.jaccard - want) < 1e-12 and not m.kept
        assert [m.jaccard for m in c.members[1:]] == sorted(m.jaccard for m in c.members[1:])
    # borderline: no pooled cluster has a member less similar to its kept row
    lows = [c.min_jaccard for c in r.clusters if c.kind == "borderline"]
    others = [c.min_jaccard for c in r.clusters if c.kind == "random"]
    assert max(lows) <= min(others)
    ds = lance.dataset(corpus)  # each member's text is the dataset's
    for c in r.clusters:
        ids = [m.rowid for m in c.members]
        assert ds._take_rows(ids, ["text"]).column(0).to_pylist() == [m.text for m in c.members]


def test_page_renders_in_headless_chromium(corpus, tmp_path):
    page = str(tmp_path / "review.html")
    assert main_ok(["review", corpus, "text", "--out", page])
    r = lms.review(corpus, "text")
    source = open(page, encoding="utf-8").read()
    assert source.startswith("<!DOCTYPE html>")
    # self-contained: no script, no stylesheet or image fetched from anywhere
    assert "<script" not in source and not re.search(r'(src|href)=["\'](https?:)?//', source)
    png = str(tmp_path / "review.png")
    shot = chromium("--window-size=1280,2000", f"--screenshot={png}", "file://" + page)
    assert os.path.exists(png), shot.stderr[-2000:]
    from matplotlib.image import imread

    pixels = imread(png)[..., :3]
    assert pixels.shape[:2] == (2000, 1280)
    ink = (pixels < 0.9).any(axis=2).mean()  # share of pixels that are not (near) white
    colours = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0).shape[0]
    assert ink > 0.03 and colours > 50, (ink, colours)
    dom = chromium("--dump-dom", "file://" + page).stdout
    shown = re.findall(r'<article class="cluster" data-cluster-id="(\d+)" data-kind="(\w+)" data-size="(\d+)"', dom)
    assert [(int(c), k, int(s)) for c, k, s in shown] == [(c.cluster_id, c.kind, c.size) for c in r.clusters]
    for c in r.clusters:  # each cluster's members, the kept one first, with their Jaccard
        block = dom.split(f'data-cluster-id="{c.cluster_id}"', 1)[1].split("</article>", 1)[0]
        rows = [int(x) for x in re.findall(r'class="member (?:kept|dropped)" data-rowid="(\d+)"', block)]
        assert rows == [m.rowid for m in c.members]
        assert f'class="member kept" data-rowid="{c.kept.rowid}"' in block
        for m in c.members[1:]:
            assert f'data-rowid="{m.rowid}" data-jaccard="{m.jaccard:.6f}"' in block
    assert "<svg" in dom and "polyline" in dom  # the S-curve


def main_ok(argv) -> bool:
    return cli.main(argv) == 0


def test_notebook_display_and_bad_input(corpus, tmp_path, capsys):
    r = lms.review(corpus, "text", per_kind=1, max_members=3)
    fragment = r._repr_html_()
    assert fragment.startswith('<div class="lms-review">') and "<html" not in fragment
    assert all(len(c.members) <= 3 for c in r.clusters) and len(r.clusters) == 3
    with pytest.raises(lms.InvalidParameterError, match="per_kind=0"):
        lms.review(corpus, "text", per_kind=0)
    with pytest.raises(lms.InvalidParameterError, match="keep='shortest'"):
        lms.review(corpus, "text", keep="shortest")
    assert cli.main(["review", corpus, "text", "--out", str(tmp_path / "r.txt")]) == 2
    assert "--out" in capsys.readouterr().err and not (tmp_path / "r.txt").exists()
