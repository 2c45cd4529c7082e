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
    # borderline: no drawn cluster has a member less similar to its kept row
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
            assert re.search(f'data-rowid="{m.rowid}"[^>]* data-jaccard="{m.jaccard:.6f}"', block)
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


@pytest.fixture(scope="module")
def fragmented(tmp_path_factory):
    """The corpus in fragments of 500 rows: row addresses (fragment << 32) are not the ids."""
    uri = str(tmp_path_factory.mktemp("review_frag") / "corpus.lance")
    lms.write_corpus(uri, 2000, rows_per_fragment=500)
    lms.build_index(uri, "text")
    return uri


def ids_of(uri, rowids) -> list:
    return lance.dataset(uri)._take_rows(list(rowids), ["id"]).column(0).to_pylist()


def test_members_are_named_by_the_dataset_id_column_never_by_row_addresses(fragmented, tmp_path):
    page = str(tmp_path / "r.html")
    r = lms.review(fragmented, "text", out=page)
    assert r.id_column == "id"
    members = [m for c in r.clusters for m in c.members]
    assert [m.id for m in members] == ids_of(fragmented, [m.rowid for m in members])
    assert any(m.rowid >= 1 << 32 for m in members)  # addresses past the first fragment are shown as ids
    visible = re.sub(r"<[^>]+>", " ", open(page, encoding="utf-8").read().split("<section id=\"clusters\">", 1)[1])
    for m in members:
        assert f"id {m.id} " in visible
        if m.rowid != m.id:
            assert str(m.rowid) not in visible
    assert not re.search(r"Cluster \d{6,}", visible)
    by_rowid = lms.review(fragmented, "text", id_column="_rowid", per_kind=1)
    assert all(m.id == m.rowid for c in by_rowid.clusters for m in c.members)
    with pytest.raises(lms.DatasetError, match="id_column='nope' is not a column"):
        lms.review(fragmented, "text", id_column="nope")


def test_star_exact_page_shows_each_dropped_row_with_its_twin(corpus):
    """clustering="star", verify="exact": the kept rows and twins are keep_flags' own, each
    dropped row's J is its exact Jaccard to its twin and reaches the threshold."""
    r = lms.review(corpus, "text", 0.8, clustering="star", verify="exact")
    flags = {f["_rowid"]: f for f in lms.keep_flags(corpus, "text", 0.8, clustering="star",
                                                    verify="exact").to_pylist()}
    assert r.clustering == "star" and r.verify == "exact"
    assert r.dropped == sum(not f["keep"] for f in flags.values())
    con = lms.connect()
    dropped = 0
    for c in r.clusters:
        members = [f for f in flags.values() if f["cluster_id"] == c.cluster_id]
        assert c.size == len(members) and [f["_rowid"] for f in members if f["keep"]] == [c.cluster_id]
        assert c.members[0].kept and c.members[0].rowid == c.cluster_id
        assert all(f["twin_rowid"] == c.cluster_id for f in members if not f["keep"])
        for m in c.members:
            assert m.kept == flags[m.rowid]["keep"]
            if m.kept:
                continue
            dropped += 1
            assert m.twin_rowid == flags[m.rowid]["twin_rowid"] and flags[m.twin_rowid]["keep"]
            (want,) = con.execute("SELECT shingle_jaccard(?, ?)", [m.text, m.twin_text]).fetchone()
            assert abs(m.jaccard - want) < 1e-12 and m.jaccard >= 0.8
            assert abs(m.jaccard - flags[m.rowid]["twin_jaccard"]) < 1e-12
    assert dropped > 0
    page = r.html()
    assert 'dropped for its twin, id' in page
    for i, c in enumerate(r.clusters, 1):  # a heading's rows are the star's: its kept row and those dropped for it
        assert f"Cluster {i} · {c.size} rows" in page and f"; drops the other {c.size - 1}" in page


@pytest.mark.parametrize("verify", ["estimate", "exact"])
def test_components_page_shows_the_chain_of_verified_links(corpus, verify):
    """Every dropped row shown has a chain from its cluster's kept row: consecutive links
    between rows of the cluster, each a verified link (a shared band; the estimate, or
    with exact the exact Jaccard, reaching the threshold), each with its exact Jaccard."""
    from lance_minhash_sql.core.banding import exact_candidate_floor
    from lance_minhash_sql.index.sign import signer_for
    from lance_minhash_sql.index.opened import open_index

    params = open_index(corpus, "text").params
    signer = signer_for(params)
    r = lms.review(corpus, "text", 0.7, verify=verify, per_kind=10, max_members=30)
    flags = lms.keep_flags(corpus, "text", 0.7, verify=verify).to_pylist()
    cluster_of = {f["_rowid"]: f["cluster_id"] for f in flags}
    con = lms.connect()
    ds = lance.dataset(corpus)
    text_of_id = dict(zip(*[ds.to_table(columns=["id", "text"]).column(n).to_pylist() for n in ("id", "text")]))
    row_of_id = dict(zip(ds.to_table(columns=["id"], with_row_id=True).column("id").to_pylist(),
                         ds.to_table(columns=["id"], with_row_id=True).column("_rowid").to_pylist()))
    chains = 0
    for c in r.clusters:
        for m in c.members[1:]:
            assert m.chained and m.chain, (c.cluster_id, m.id)
            assert m.chain[0][0] == c.kept.id and m.chain[-1][1] == m.id
            assert all(a[1] == b[0] for a, b in zip(m.chain, m.chain[1:]))
            for left, right, sim, jac in m.chain:
                assert cluster_of[row_of_id[left]] == cluster_of[row_of_id[right]] == c.cluster_id
                (want,) = con.execute("SELECT shingle_jaccard(?, ?)", [text_of_id[left], text_of_id[right]]).fetchone()
                assert abs(jac - want) < 1e-12
                sigs, _ = signer.sign([text_of_id[left], text_of_id[right]])
                keys = signer.band_keys(sigs)
                assert (keys[0] == keys[1]).any() and abs(sim - (sigs[0] == sigs[1]).mean()) < 1e-12
                if verify == "exact":
                    assert jac >= 0.7 and sim >= exact_candidate_floor(0.7, params.num_hashes) - 1e-6
                else:
                    assert sim >= 0.7 - 1e-6
            chains += len(m.chain) > 1
    assert chains > 0  # some dropped rows are reached through another row
    assert "verified link" in r.html()


def test_review_command_takes_every_mode_in_any_case(corpus, tmp_path, capsys):
    page = str(tmp_path / "r.html")
    assert cli.main(["review", corpus, "text", "--out", page, "--clustering", "Star", "--verify", "Exact",
                     "--keep", "Longest", "--memory-limit", "64MiB", "--id-column", "id", "--per-kind", "1"]) == 0
    out = capsys.readouterr().out
    assert "clustering='star', verify='exact'" in out and "keep='longest'" in out
    assert "dropped for its twin" in open(page, encoding="utf-8").read()


@pytest.fixture(scope="module")
def demo_corpus(tmp_path_factory):
    """The demo's corpus (faces/demo.py writes it so, 20,000 rows by default), where the
    components of star clustering hold several stars."""
    uri = str(tmp_path_factory.mktemp("review_demo") / "corpus.lance")
    lms.write_corpus(uri, 20_000, with_truth=True)
    lms.build_index(uri, "text")
    return uri


@pytest.mark.parametrize("verify, keep, max_members", [("estimate", "first", 8), ("exact", "longest", 8),
                                                       ("exact", "first", 3), ("estimate", "first", 2)])
def test_star_page_shows_every_twin_it_names(demo_corpus, verify, keep, max_members):
    """Every id the page names as a dropped row's twin is a row the page shows in that
    cluster (the page's HTML read back: each ``data-twin-rowid`` of a cluster is the
    ``data-rowid`` of one of its rows, and each named twin id one of its shown ids), and
    each shown row is one of the cluster's."""
    r = lms.review(demo_corpus, "text", 0.8, keep=keep, clustering="star", verify=verify, max_members=max_members,
                   per_kind=10)
    flags = lms.keep_flags(demo_corpus, "text", 0.8, keep=keep, clustering="star", verify=verify).to_pylist()
    cluster_of = {f["_rowid"]: f["cluster_id"] for f in flags}
    page = r.html()
    articles = re.findall(r'<article class="cluster".*?</article>', page, re.S)
    assert len(articles) == len(r.clusters) > 0
    named = 0
    for c, article in zip(r.clusters, articles):
        assert len(c.members) <= max_members and {cluster_of[m.rowid] for m in c.members} == {c.cluster_id}
        shown = set(map(int, re.findall(r'data-rowid="(\d+)"', article)))
        shown_ids = set(re.findall(r'<div class="member [^"]*" data-rowid="\d+" data-id="([^"]*)"', article))
        twins = set(map(int, re.findall(r'data-twin-rowid="(\d+)"', article)))
        assert twins <= shown, (c.cluster_id, twins - shown)
        assert set(re.findall(r"dropped for its twin, id ([^ ]+) \(kept\)", article)) <= shown_ids
        named += len(twins)
    assert named > 0
