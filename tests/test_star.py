"""Star clustering (``selfjoin/star.py``): every dropped row names a kept twin it is similar
to. Oracles: the star walk of tests/naive.py (brute-force pairs, scipy components, each
walked longhand over signatures signed again), and the rule's properties checked pair by
pair."""

from __future__ import annotations

import functools
import subprocess
import sys

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pytest
from conftest import copies_table, groups_table
import naive
from naive import exact_jaccard, signature
from test_pairs import signed

import lance_minhash_sql as lms
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.banding import candidate_floor
from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.faces.corpus import vocabulary
from lance_minhash_sql.index.results import CLUSTERS_SCHEMA, DEDUP_STAR_SCHEMA
from lance_minhash_sql.kernels.bucket_pairs import min_matches
from lance_minhash_sql.selfjoin import star as star_mod
from lance_minhash_sql.core import budget as core_budget
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.selfjoin.clusters import clusters, linked_components
from lance_minhash_sql.selfjoin.dedup import dedup, keep_flags

PARAMS = MinHashParams()
T = 0.75
CHAIN_WORDS = 200
CHAIN_EDITS = 7  # words replaced per step: J(step) ~ 0.81, J(two steps) ~ 0.65 at 3-word shingles


def chain_texts(rng, vocab, links: int = 4) -> list[str]:
    """A chain: each text is the previous with :data:`CHAIN_EDITS` other words replaced."""
    words = rng.choice(vocab, CHAIN_WORDS)
    out = [" ".join(words)]
    spots = rng.permutation(CHAIN_WORDS)
    for step in range(links - 1):
        words = words.copy()
        for p in spots[step * CHAIN_EDITS:(step + 1) * CHAIN_EDITS]:
            words[p] = rng.choice(vocab)
        out.append(" ".join(words))
    return out


def star_table(seed: int = 3) -> pa.Table:
    """Chains, groups of near-copies and unrelated texts, shuffled, with a ``quality``
    column full of ties."""
    rng = np.random.default_rng(seed)
    vocab = np.array(vocabulary().to_pylist())
    texts = []
    for _ in range(12):
        texts += chain_texts(rng, vocab)
    return groups_table(rng, texts, groups=25, max_copies=6, change_every=2, unrelated=200)


@pytest.fixture(scope="module")
def starred(tmp_path_factory) -> str:
    uri = str(tmp_path_factory.mktemp("star") / "star.lance")
    lance.write_dataset(star_table(), uri, max_rows_per_file=150)
    build_index(uri, "text")
    return uri


@pytest.fixture(scope="module")
def rows(starred):
    """``(sig of each row id, text of each row id, quality of each row id)``."""
    rowids, sigs, _, _, _ = signed(starred)
    t = lance.dataset(starred).to_table(columns=["text", "quality"], with_row_id=True).to_pydict()
    return ({int(r): s for r, s in zip(rowids, sigs)}, dict(zip(t["_rowid"], t["text"])),
            dict(zip(t["_rowid"], t["quality"])))


def similar(sig, a, b) -> bool:
    return int((sig[a] == sig[b]).sum()) >= min_matches(T, PARAMS.num_hashes)


@pytest.fixture(scope="module")
def bands(starred):
    """``{row id: set of its band keys}``."""
    rowids, _, keys, _, _ = signed(starred)
    return {int(r): set(k.tolist()) for r, k in zip(rowids, keys)}


def sim(sig, a, b) -> float:
    return float(np.float32(int((sig[a] == sig[b]).sum())) / np.float32(PARAMS.num_hashes))


KEYS = {
    "first": lambda text, quality: (lambda r: r),
    "longest": lambda text, quality: (lambda r: (-len(text[r]), r)),
    "quality DESC": lambda text, quality: (lambda r: (-quality[r], r)),
}


def reference_star(uri: str, rows, policy: str) -> dict:
    """``{row: twin or None}`` of every clustered row: tests/naive.py's star oracle at
    :data:`T` in the keep order of ``policy``."""
    _, text, quality = rows
    return naive.star_twins(uri, T, PARAMS, KEYS[policy](text, quality))


def in_stars(ref: dict) -> dict:
    """The rows of :func:`reference_star` that are in a star cluster: a kept row some row is
    dropped for, and the dropped rows."""
    centers = set(ref.values())
    return {r: t for r, t in ref.items() if t is not None or r in centers}


def policy_kw(policy: str) -> dict:
    return {"keep": policy} if policy in ("first", "longest") else {"order_by": policy}


def as_twins(table: pa.Table) -> dict:
    d = table.to_pydict()
    assert all(k == (t is None) for k, t in zip(d["keep"], d["twin_rowid"]))
    return dict(zip(d["_rowid"], d["twin_rowid"]))


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize("policy", ["first", "longest", "quality DESC"])
def test_star_equals_the_longhand_walk(starred, rows, policy, self_join_budget):
    got = keep_flags(starred, "text", T, clustering="star", **policy_kw(policy))
    assert got.schema.equals(DEDUP_STAR_SCHEMA)
    want = in_stars(reference_star(starred, rows, policy))
    assert as_twins(got) == want
    d = got.to_pydict()
    center = {r: r if t is None else t for r, t in want.items()}
    size = {c: list(center.values()).count(c) for c in center.values()}
    assert d["cluster_id"] == [center[r] for r in d["_rowid"]]
    assert d["cluster_size"] == [size[c] for c in d["cluster_id"]] and min(d["cluster_size"]) >= 2
    assert list(zip(d["cluster_id"], d["_rowid"])) == sorted(zip(d["cluster_id"], d["_rowid"]))


@pytest.mark.parametrize("policy", ["first", "longest", "quality DESC"])
def test_every_dropped_row_has_a_similar_kept_twin_and_kept_rows_are_apart(starred, rows, bands, policy):
    """Every dropped row's twin is kept, first in keep order, shares a band with it and is
    similar (the most similar such kept row); no kept row shares a band with an earlier kept
    row of its component and is similar to it (no bucket of this corpus holds the 16
    centres a bucket lists: tests/test_star_walk.py checks the cap)."""
    sig, text, quality = rows
    got = keep_flags(starred, "text", T, clustering="star", **policy_kw(policy)).to_pydict()
    keep = dict(zip(got["_rowid"], got["keep"]))
    cluster = dict(zip(got["_rowid"], got["cluster_id"]))
    comp = keep_flags(starred, "text", T, **policy_kw(policy)).to_pydict()
    component = dict(zip(comp["_rowid"], comp["cluster_id"]))
    key = KEYS[policy](text, quality)
    dropped = 0
    for r, twin, s in zip(got["_rowid"], got["twin_rowid"], got["twin_similarity"]):
        if twin is None:
            assert cluster[r] == r
            continue
        dropped += 1
        assert keep[twin] and cluster[r] == twin and component[twin] == component[r]
        assert key(twin) < key(r) and bands[r] & bands[twin]  # the twin comes first in keep order, in a band
        assert s == sim(sig, r, twin) >= T  # recomputed from the signatures
        rivals = [c for c, k in keep.items() if k and component[c] == component[r] and key(c) < key(r)
                  and bands[r] & bands[c]]
        assert s == max(sim(sig, r, c) for c in rivals)
    assert dropped > 50
    kept = {}
    for r in sorted((r for r in keep if keep[r]), key=key):
        assert not any(similar(sig, r, c) and bands[r] & bands[c] for c in kept.get(component[r], [])), \
            "a kept row duplicates an earlier one"
        kept.setdefault(component[r], []).append(r)
    # the first row of each component in keep order is the row components keep
    assert {r for r, k in zip(comp["_rowid"], comp["keep"]) if k} == {v[0] for v in kept.values()}


def test_chains_keep_their_far_ends(starred, rows):
    """Components drop rows far from the row they keep (chains: shingle Jaccard under the
    threshold too); star keeps more rows, and its twins reach the threshold by the slow
    reference signatures too (lance.tokenize, xxhash)."""
    sig, text, _ = rows
    comp = keep_flags(starred, "text", T).to_pydict()
    star = keep_flags(starred, "text", T, clustering="star").to_pydict()
    kept_of = {c: r for r, c, k in zip(comp["_rowid"], comp["cluster_id"], comp["keep"]) if k}
    far = [r for r, c, k in zip(comp["_rowid"], comp["cluster_id"], comp["keep"])
           if not k and not similar(sig, r, kept_of[c])]
    assert len(far) >= 5, "the corpus has chains"
    assert any(exact_jaccard(text[r], text[kept_of[c]], PARAMS) < T
               for r, c in zip(comp["_rowid"], comp["cluster_id"]) if r in far)
    assert sum(star["keep"]) > sum(comp["keep"])
    star_twin = dict(zip(star["_rowid"], star["twin_rowid"]))
    checked = 0
    for r in far:
        twin = star_twin.get(r)  # None: a kept row (in a star of its own or not)
        if twin is None:
            continue
        ref = [signature(text[x], PARAMS) for x in (r, twin)]
        assert ref[0] == sig[r].tolist()
        assert float(np.float32(sum(a == b for a, b in zip(*ref))) / np.float32(PARAMS.num_hashes)) >= T
        checked += 1
    assert checked or all(star_twin.get(r) is None for r in far)


def test_star_is_deterministic_and_chunks_do_not_change_it(starred, monkeypatch):
    one = keep_flags(starred, "text", T, clustering="star", keep="longest")
    assert keep_flags(starred, "text", T, clustering="star", keep="longest").equals(one)
    monkeypatch.setattr(star_mod, "STAR_ROWS", 7)  # many chunks, centers carried across them
    assert keep_flags(starred, "text", T, clustering="star", keep="longest").equals(one)


@pytest.mark.parametrize("verify", ["estimate", "exact"])
def test_centers_written_to_disk_and_small_chunks_give_the_same_twins(starred, rows, monkeypatch, verify):
    """Chunks of a few rows and every block of centers written to disk (the walk's memory
    under a tiny budget): the longhand walk's twins, and the same table as in memory."""
    whole = keep_flags(starred, "text", T, clustering="star", keep="longest", verify=verify)
    before = dict(star_mod.STATS)
    monkeypatch.setattr(core_budget, "STAR_CHUNK_SHARE", 0.0)  # one member a chunk
    monkeypatch.setattr(core_budget, "STAR_CENTERS_SHARE", 0.0)  # no center held in memory
    got = keep_flags(starred, "text", T, clustering="star", keep="longest", verify=verify)
    walked = linked_components(starred, "text", T, verify, Budget.parse(None), None, "star").num_rows
    assert star_mod.STATS["chunks"] - before["chunks"] == walked >= whole.num_rows
    assert star_mod.STATS["written_blocks"] - before["written_blocks"] > 20
    assert got.equals(whole)
    if verify == "estimate":
        assert as_twins(got) == in_stars(reference_star(starred, rows, "longest"))
    monkeypatch.setattr(core_budget, "STAR_CHUNK_SHARE", 0.003)  # chunks of a few rows
    assert keep_flags(starred, "text", T, clustering="star", keep="longest", verify=verify).equals(whole)


def test_star_centers_folder_is_removed(starred, monkeypatch, tmp_path):
    monkeypatch.setattr(star_mod.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(core_budget, "STAR_CENTERS_SHARE", 0.0)
    keep_flags(starred, "text", T, clustering="star")
    assert star_mod.STATS["written_blocks"] and list(tmp_path.iterdir()) == []


def test_star_clusters(starred, rows, self_join_budget):
    sig = rows[0]
    got = clusters(starred, "text", T, clustering="star")
    assert got.schema.equals(CLUSTERS_SCHEMA)
    d = got.to_pydict()
    ref = {r: t for r, t in reference_star(starred, rows, "first").items()}
    want: dict = {}
    for r, t in ref.items():
        want.setdefault(r if t is None else t, []).append(r)
    want = {r: c for c, g in want.items() if len(g) > 1 for r in g}
    assert dict(zip(d["_rowid"], d["cluster_id"])) == want
    assert all(c <= r and (c == r or similar(sig, r, c)) for r, c in want.items())
    sizes = {c: sum(1 for x in want.values() if x == c) for c in want.values()}
    assert d["cluster_size"] == [sizes[c] for c in d["cluster_id"]]
    assert list(zip(d["cluster_id"], d["_rowid"])) == sorted(zip(d["cluster_id"], d["_rowid"]))


def test_dedup_removes_the_dropped_rows(starred):
    flags = keep_flags(starred, "text", T, clustering="star").to_pydict()
    r = dedup(starred, "text", T, clustering="star")
    assert r.dry_run and r.removed == flags["keep"].count(False)
    assert sorted(r.removed_rowids.tolist()) == sorted(x for x, k in zip(flags["_rowid"], flags["keep"]) if not k)


def star_sets(table: pa.Table) -> dict:
    """``{cluster_id: set of its rows}``."""
    out: dict = {}
    for r, c in zip(table.column("_rowid").to_pylist(), table.column("cluster_id").to_pylist()):
        out.setdefault(c, set()).add(r)
    return out


@pytest.mark.parametrize("verify", ["estimate", "exact"])
def test_clusters_and_dedup_report_the_same_stars(starred, verify):
    """One meaning of a star cluster: clusters() and keep_flags() give the same rows per
    cluster; each cluster keeps exactly its cluster_id, every dropped row's twin is it,
    cluster_size counts the rows; dedup's counts are those clusters."""
    c = clusters(starred, "text", T, clustering="star", verify=verify)
    flags = keep_flags(starred, "text", T, clustering="star", verify=verify)
    assert star_sets(c) == star_sets(flags) and len(star_sets(c)) > 20
    assert c.equals(flags.select(c.schema.names).cast(c.schema))
    d = flags.to_pydict()
    for cid, rows in star_sets(flags).items():
        kept = [r for r, x, k in zip(d["_rowid"], d["cluster_id"], d["keep"]) if x == cid and k]
        assert kept == [cid] and len(rows) >= 2
    assert all(t == x for x, t, k in zip(d["cluster_id"], d["twin_rowid"], d["keep"]) if not k)
    assert all(n == len(star_sets(flags)[x]) for x, n in zip(d["cluster_id"], d["cluster_size"]))
    r = dedup(starred, "text", T, clustering="star", verify=verify)
    assert (r.clusters, r.clustered_rows, r.removed) == (len(star_sets(c)), c.num_rows, c.num_rows - r.clusters)


def test_one_text_many_times_keeps_one_row(tmp_path):
    """A giant bucket: 20,000 copies of one text among other rows; one comparison a copy."""
    uri = str(tmp_path / "giant.lance")
    lance.write_dataset(copies_table(20_000, 50, seed=1), uri)
    build_index(uri, "text")
    got = keep_flags(uri, "text", 0.8, clustering="star").to_pydict()
    assert len(got["_rowid"]) == 20_000 and got["keep"].count(True) == 1
    kept = got["_rowid"][got["keep"].index(True)]
    assert kept == min(got["_rowid"])
    assert set(got["twin_rowid"]) == {None, kept} and set(got["twin_similarity"]) == {None, 1.0}
    c = clusters(uri, "text", 0.8, clustering="star").to_pydict()
    assert set(c["cluster_id"]) == {kept} and set(c["cluster_size"]) == {20_000}


# --------------------------------------------------------------------------- verify := 'exact'


@pytest.mark.parametrize("policy", ["first", "longest"])
def test_exact_twins_reach_the_threshold_by_exact_jaccard(starred, rows, bands, policy, self_join_budget):
    """verify='exact': every dropped row's exact Jaccard to its twin (lance.tokenize, Python
    sets) reaches the threshold and is the reported twin_jaccard; no kept row reaches it
    with a kept row before it in its component that shares a band with it and whose
    estimate reaches the floor."""
    sig, text, quality = rows
    floor = min_matches(candidate_floor(T, PARAMS.num_hashes, "exact"), PARAMS.num_hashes)
    got = keep_flags(starred, "text", T, clustering="star", verify="exact", **policy_kw(policy)).to_pydict()
    key = KEYS[policy](text, quality)
    keep = dict(zip(got["_rowid"], got["keep"]))
    cluster = dict(zip(got["_rowid"], got["cluster_id"]))
    linked = linked_components(starred, "text", T, "exact", Budget.parse(None), None, "star").to_pydict()
    component = dict(zip(linked["_rowid"], linked["cluster_id"]))
    dropped = 0
    for r, twin, s, j in zip(got["_rowid"], got["twin_rowid"], got["twin_similarity"], got["twin_jaccard"]):
        if twin is None:
            assert s is None and j is None
            continue
        dropped += 1
        assert keep[twin] and cluster[r] == twin and component[twin] == component[r] and key(twin) < key(r)
        assert j == pytest.approx(exact_jaccard(text[r], text[twin], PARAMS), abs=1e-12) and j >= T
        assert s == sim(sig, r, twin)
    assert dropped > 50
    kept: dict = {}
    for r in sorted((r for r in keep if keep[r]), key=key):
        for c in kept.get(component[r], []):
            if bands[r] & bands[c] and int((sig[r] == sig[c]).sum()) >= floor:
                assert exact_jaccard(text[r], text[c], PARAMS) < T
        kept.setdefault(component[r], []).append(r)
    assert any(len(v) > 1 for v in kept.values()), "some component keeps several rows"
    assert keep_flags(starred, "text", T, clustering="star", verify="exact", **policy_kw(policy)).to_pydict() == got


def test_exact_twins_include_pairs_whose_estimate_is_under_the_threshold(tmp_path, monkeypatch):
    """Pairs of texts at exact Jaccard ~0.83 (tests/test_verify.py): some estimates fall
    under 0.8; with verify='exact' those rows are dropped for their exact twin."""
    from test_verify import edited_table

    uri = str(tmp_path / "edited.lance")
    lance.write_dataset(edited_table(), uri)
    build_index(uri, "text")
    got = keep_flags(uri, "text", 0.8, clustering="star", verify="exact").to_pydict()
    assert any(s < 0.8 <= j for s, j in zip(got["twin_similarity"], got["twin_jaccard"]) if s is not None)
    plain = keep_flags(uri, "text", 0.8, clustering="star").to_pydict()
    assert got["keep"].count(False) > plain["keep"].count(False)
    monkeypatch.setattr(star_mod, "STAR_ROWS", 5)
    assert keep_flags(uri, "text", 0.8, clustering="star", verify="exact").to_pydict() == got
    c = clusters(uri, "text", 0.8, clustering="star", verify="exact").to_pydict()
    centers = {r: t for r, t in zip(got["_rowid"], got["twin_rowid"])}
    assert set(c["cluster_id"]) == {t for t in centers.values() if t is not None}


def test_exact_components_keep_one_row_per_component(starred):
    """verify='exact' with components (tests/test_verify.py has the oracle): one kept row,
    the lowest row id, per component of the exact pairs; dedup removes the others."""
    comps = clusters(starred, "text", T, verify="exact").to_pydict()
    flags = keep_flags(starred, "text", T, verify="exact").to_pydict()
    assert list(zip(flags["_rowid"], flags["cluster_id"])) == list(zip(comps["_rowid"], comps["cluster_id"]))
    assert [k for k in flags["keep"]] == [r == c for r, c in zip(flags["_rowid"], flags["cluster_id"])]
    r = dedup(starred, "text", T, verify="exact")
    assert r.removed == flags["keep"].count(False) > 20


def test_exact_star_keeps_one_of_many_copies(tmp_path):
    rng = np.random.default_rng(2)
    vocab = np.array(vocabulary().to_pylist())
    texts = [" ".join(rng.choice(vocab, 40))] * 5_000 + [" ".join(rng.choice(vocab, 30)) for _ in range(20)]
    uri = str(tmp_path / "copies.lance")
    lance.write_dataset(pa.table({"text": pa.array(texts)}), uri)
    build_index(uri, "text")
    got = keep_flags(uri, "text", 0.8, clustering="star", verify="exact").to_pydict()
    assert got["keep"].count(True) == 1 and set(got["twin_jaccard"]) == {None, 1.0}


# --------------------------------------------------------------------------- interfaces


@pytest.fixture(scope="module")
def con():
    return lms.connect()


def test_sql_star_equals_python(con, starred):
    u = starred.replace("'", "''")
    rel = con.sql(f"SELECT * FROM minhash_dedup('{u}', 'text', {T}, order_by := 'quality DESC', "
                  "clustering := 'star') ORDER BY cluster_id, _rowid")
    assert [d[0] for d in rel.description] == DEDUP_STAR_SCHEMA.names
    assert [str(t) for t in rel.types] == ["UBIGINT", "UBIGINT", "BIGINT", "BOOLEAN", "UBIGINT", "DOUBLE", "DOUBLE"]
    want = keep_flags(starred, "text", T, order_by="quality DESC", clustering="star")
    assert rel.fetchall() == [tuple(r.values()) for r in want.to_pylist()]
    rel = con.sql(f"SELECT * FROM minhash_dedup('{u}', 'text', {T}, clustering := 'components')")
    assert [d[0] for d in rel.description] == ["_rowid", "cluster_id", "cluster_size", "keep"]
    got = con.sql(f"SELECT * FROM minhash_clusters('{u}', 'text', {T}, clustering := 'STAR')").fetchall()
    assert got == [tuple(r.values()) for r in clusters(starred, "text", T, clustering="star").to_pylist()]
    got = con.sql(f"SELECT * FROM minhash_dedup('{u}', 'text', {T}, clustering := 'star', verify := 'exact') "
                  "ORDER BY cluster_id, _rowid").fetchall()
    want = keep_flags(starred, "text", T, clustering="star", verify="exact")
    assert got == [tuple(r.values()) for r in want.to_pylist()]
    got = con.sql(f"SELECT * FROM minhash_clusters('{u}', 'text', {T}, clustering := 'star', verify := 'exact')")
    assert got.fetchall() == [tuple(r.values()) for r in
                              clusters(starred, "text", T, clustering="star", verify="exact").to_pylist()]
    got = con.sql(f"SELECT * FROM minhash_dedup('{u}', 'text', {T}, verify := 'exact') ORDER BY cluster_id, _rowid")
    assert got.fetchall() == [tuple(r.values()) for r in keep_flags(starred, "text", T, verify="exact").to_pylist()]
    got = con.sql(f"SELECT * FROM minhash_clusters('{u}', 'text', {T}, verify := 'exact')").fetchall()
    assert got == [tuple(r.values()) for r in clusters(starred, "text", T, verify="exact").to_pylist()]


def test_clustering_errors_name_the_value(con, starred):
    u = starred.replace("'", "''")
    for sql in (f"SELECT * FROM minhash_dedup('{u}', 'text', clustering := 'stars')",
                f"SELECT * FROM minhash_clusters('{u}', 'text', clustering := NULL)"):
        with pytest.raises(duckdb.Error, match=r"minhash_(dedup|clusters): clustering := ('stars'|NULL) is not a "
                                               r"clustering: use 'components'"):
            con.sql(sql).fetchall()
    for fn in (functools.partial(keep_flags, starred, "text"), functools.partial(clusters, starred, "text"),
               functools.partial(dedup, starred, "text")):
        with pytest.raises(InvalidParameterError, match="clustering='one' is not a clustering"):
            fn(clustering="one")


@pytest.mark.parametrize("verify", ["estimate", "exact"])
def test_cli_dedup_and_clusters_print_the_same_counts(starred, verify, tmp_path):
    def summary(command, *extra):
        run = subprocess.run([sys.executable, "-m", "lance_minhash_sql.faces.cli", command, starred, "text",
                              "--threshold", str(T), "--clustering", "star", "--verify", verify, "--quiet", *extra],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return run.stdout

    c = clusters(starred, "text", T, clustering="star", verify=verify)
    n = len(star_sets(c))
    want = f"{n:,} clusters holding {c.num_rows:,} rows"
    assert want in summary("clusters", "--output", str(tmp_path / "c.parquet"))
    out = summary("dedup")
    assert want in out and f"{c.num_rows - n:,} duplicates" in out


def test_cli_clustering(starred):
    run = [sys.executable, "-m", "lance_minhash_sql.faces.cli", "dedup", starred, "text", "--threshold", str(T),
           "--quiet"]
    star = subprocess.run(run + ["--clustering", "star"], capture_output=True, text=True)
    assert star.returncode == 0, star.stderr
    removed = dedup(starred, "text", T, clustering="star").removed
    assert f"{removed:,} duplicates" in star.stdout
    bad = subprocess.run(run + ["--clustering", "sta"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--clustering sta: must be one of components, star" in bad.stderr
