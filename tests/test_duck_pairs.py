"""minhash_pairs / minhash_clusters / minhash_dedup in SQL, and the dedup writer, against
the Python engine and slow obvious references (brute-force pairs from test_pairs.py, a
dict union-find and keep policies written out longhand here)."""

from __future__ import annotations

import os
import warnings

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pytest
from conftest import groups_table, indexed_corpus
from naive import exact_jaccard, exact_pairs, oracle_clusters
from test_pairs import as_dict, bucket_relation_is_equivalence, oracle

import lance_minhash_sql as lms
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.errors import LowRecallWarning
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.duck import self_join as duck_pairs
from lance_minhash_sql.faces import cli
from lance_minhash_sql.faces.corpus import vocabulary
from lance_minhash_sql.selfjoin import sizing
from lance_minhash_sql.selfjoin.clusters import clusters, linked_components
from lance_minhash_sql.selfjoin.dedup import dedup, keep_flags
from lance_minhash_sql.selfjoin.pairs import PAIRS_EXACT_SCHEMA, pairs

PARAMS = MinHashParams()


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def sql_pairs(con, uri: str, extra: str = "") -> dict:
    rows = con.sql(f"SELECT left_rowid, right_rowid, similarity FROM minhash_pairs({lit(uri)}, 'text'{extra})").fetchall()
    out = {(a, b): s for a, b, s in rows}
    assert len(out) == len(rows), "a pair was reported twice"
    assert all(a < b for a, b in out)
    return out


def rows_of(con, sql: str) -> list[dict]:
    rel = con.sql(sql)
    names = [d[0] for d in rel.description]
    return [dict(zip(names, r)) for r in rel.fetchall()]


def sql_error(con, sql: str) -> str:
    with pytest.raises(duckdb.Error) as info:
        con.sql(sql).fetchall()
    return str(info.value)


# --------------------------------------------------------------------------- references


def components(edges) -> dict:
    """``{row: smallest row of its component}`` of an edge list: a dict union-find."""
    parent: dict = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict = {}
    for x in list(parent):
        groups.setdefault(find(x), []).append(x)
    return {x: min(g) for g in groups.values() for x in g}


def keepers(cluster_of: dict, better) -> set:
    """The kept row of each cluster: the row no other member beats under ``better(a, b)``."""
    members: dict = {}
    for r, c in cluster_of.items():
        members.setdefault(c, []).append(r)
    out = set()
    for rows in members.values():
        best = rows[0]
        for r in rows[1:]:
            if better(r, best):
                best = r
        out.add(best)
    return out


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def con():
    return lms.connect()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    """Two indexed fragments and a half, an unindexed appended fragment, deleted rows."""
    return indexed_corpus(str(tmp_path_factory.mktemp("sqlpairs") / "corpus.lance"), 3000, 1200, "id % 11 = 4",
                          appended=600)


@pytest.fixture(scope="module")
def oracle_08(corpus) -> dict:
    return oracle(corpus, 0.8)


def grouped_table(seed: int = 5) -> pa.Table:
    """Groups of near-identical texts (a word changed, or an exact copy) among unrelated
    texts, with a ``quality`` column full of ties."""
    return groups_table(np.random.default_rng(seed), [], groups=40, max_copies=7, change_every=3, unrelated=300)


@pytest.fixture(scope="module")
def grouped(tmp_path_factory) -> str:
    uri = str(tmp_path_factory.mktemp("grouped") / "grouped.lance")
    lance.write_dataset(grouped_table(), uri, max_rows_per_file=300)
    build_index(uri, "text")
    return uri


@pytest.fixture
def fresh(tmp_path):
    """A new small indexed copy of the grouped data per test (for writes)."""
    uri = str(tmp_path / "fresh.lance")
    lance.write_dataset(grouped_table(seed=9), uri, max_rows_per_file=300)
    build_index(uri, "text")
    return uri


# --------------------------------------------------------------------------- pairs


def test_pairs_equal_python_and_brute_force(con, corpus, oracle_08, self_join_budget):
    rel = con.sql(f"SELECT * FROM minhash_pairs({lit(corpus)}, 'text')")
    assert [d[0] for d in rel.description] == ["left_rowid", "right_rowid", "similarity", "jaccard"]
    assert [str(t) for t in rel.types] == ["UBIGINT", "UBIGINT", "DOUBLE", "DOUBLE"]
    got = sql_pairs(con, corpus)
    assert len(oracle_08) > 200
    assert got == oracle_08 == as_dict(pairs(corpus, "text", 0.8))
    assert con.sql(f"SELECT count(jaccard) FROM minhash_pairs({lit(corpus)}, 'text')").fetchall() == [(0,)]
    assert sql_pairs(con, corpus, ", threshold := 0.9") == oracle(corpus, 0.9)


def test_one_udf_call_per_shard(con, corpus, oracle_08, monkeypatch):
    monkeypatch.setattr(sizing, "SHARD_BAND_ROWS", 5000)
    seen = []
    real_scalars = duck_pairs.scalar_rows

    def spy(fn, **columns):
        rows = real_scalars(fn, **columns)
        if "shard" in columns:
            seen.extend((len(rows), r["shard"], r["num_shards"]) for r in rows)
        return rows

    monkeypatch.setattr(duck_pairs, "scalar_rows", spy)
    plan = con.sql(f"SELECT _lms_pairs_plan({lit(corpus)}, 'text', 0.8, false, NULL, NULL, 'estimate', 'local', "
                   "NULL)").fetchall()[0][0]
    n = plan.count("_lms_pair_shard(")
    assert n > 10 and plan.count(" UNION ALL ") == n - 1
    seen.clear()
    assert sql_pairs(con, corpus) == oracle_08
    assert sorted(s for _, s, _ in seen) == list(range(n))  # each shard once ...
    assert {(c, m) for c, _, m in seen} == {(1, n)}  # ... in a call of its own


def test_shard_calls_pool_their_candidates_once_per_group(con, corpus, oracle_08, monkeypatch):
    """The shards' calls of one statement share the Python self-join's pool: with shards
    small and the pool large, the corpus is one group, so each candidate's signature is
    fetched once for the statement (fewer than the shards' candidates counted call by
    call); with a pool of a few rows, consecutive shards form several groups and a
    signature is fetched once per group. The pairs do not change; a statement run again
    fetches again."""
    from lance_minhash_sql.runtime.cache import clear_cache
    from lance_minhash_sql.selfjoin import pool as pools, shared
    from lance_minhash_sql.core.arrays import sorted_unique
    from lance_minhash_sql.selfjoin.shards import pair_shards

    monkeypatch.setattr(sizing, "SHARD_BAND_ROWS", 5000)
    shards = pair_shards(corpus, "text", 0.8, shard_rows=sizing.shard_rows(Budget.parse(None)))
    per_shard = [sorted_unique(got[1]) for got in map(pools.read_multi, shards) if got is not None]
    union = sorted_unique(np.concatenate(per_shard))
    assert len(shards) > 10 and union.size < sum(u.size for u in per_shard)
    for run in (1, 2):
        before = pools.STATS["fetched_rows"]
        assert sql_pairs(con, corpus) == oracle_08
        assert pools.STATS["fetched_rows"] - before == union.size  # one group, fetched once a statement
    most = (union.size + max(u.size for u in per_shard)) // 2  # every shard fits, not all together
    monkeypatch.setattr(shared, "pool_rows", lambda limit, k: most)
    clear_cache()  # (the groups are kept with the statement's state: planned again here)
    before = pools.STATS["fetched_rows"]
    assert sql_pairs(con, corpus) == oracle_08
    fetched = pools.STATS["fetched_rows"] - before
    assert union.size < fetched < sum(u.size for u in per_shard)  # several groups, each fetched once


def test_evicted_plan_is_planned_again_for_its_version(con, corpus, oracle_08):
    plan = con.sql(f"SELECT _lms_pairs_plan({lit(corpus)}, 'text', 0.8, false, NULL, NULL, 'estimate', 'local', "
                   "NULL)").fetchall()[0][0]
    version = lance.dataset(corpus).version
    assert f", {version}, 0, " in plan
    duck_pairs._PLANS.clear()
    got = {(a, b): s for a, b, s, _ in con.sql(plan).fetchall()}
    assert got == oracle_08


def test_verify_exact_fills_jaccard(con, corpus, oracle_08):
    rows = con.sql(f"SELECT left_rowid, right_rowid, similarity, jaccard FROM minhash_pairs({lit(corpus)}, 'text', "
                   "verify := 'exact')").fetchall()
    py = pa.Table.from_batches(list(pairs(corpus, "text", 0.8, verify="exact")), schema=PAIRS_EXACT_SCHEMA)
    want = {(a, b): (s, j) for a, b, s, j in zip(*(py.column(i).to_pylist() for i in range(4)))}
    assert {(a, b): (s, j) for a, b, s, j in rows} == want and len(rows) == len(want)
    brute = exact_pairs(corpus, 0.8, PARAMS)
    assert want.keys() == brute.keys() and all(want[p][0] == brute[p][0] for p in brute)
    assert set(oracle_08) - set(want), "some estimates >= 0.8 have a true Jaccard below"
    older = con.sql(f"SELECT left_rowid, right_rowid, similarity, jaccard FROM minhash_pairs({lit(corpus)}, 'text', "
                    "exact := true)").fetchall()
    assert {(a, b): (s, j) for a, b, s, j in older} == want  # the older spelling of verify := 'exact'

    # jaccard equals the SQL shingle_jaccard of the two texts, and the naive reference
    t = lance.dataset(corpus).to_table(columns=["text"], with_row_id=True)
    con.register("docs_exact", t)
    agree = con.sql(f"""SELECT count(*), count(*) FILTER (WHERE p.jaccard = shingle_jaccard(l.text, r.text))
        FROM minhash_pairs({lit(corpus)}, 'text', verify := 'exact') p
        JOIN docs_exact l ON l._rowid = p.left_rowid JOIN docs_exact r ON r._rowid = p.right_rowid""").fetchall()
    assert agree == [(len(want), len(want))]
    texts = dict(zip(t.column("_rowid").to_pylist(), t.column("text").to_pylist()))
    for a, b in list(want)[:15]:
        assert want[(a, b)][1] == pytest.approx(exact_jaccard(texts[a], texts[b], PARAMS), abs=1e-12)


def test_pairs_compose_with_sql(con, corpus, oracle_08):
    u = lit(corpus)
    assert con.sql(f"SELECT count(*) FROM minhash_pairs({u}, 'text') WHERE similarity >= 0.95").fetchall() == \
        [(sum(s >= 0.95 for s in oracle_08.values()),)]
    limited = con.sql(f"SELECT left_rowid, right_rowid, similarity FROM minhash_pairs({u}, 'text') LIMIT 7").fetchall()
    assert len(limited) == 7 and all(oracle_08[(a, b)] == s for a, b, s in limited)
    degree: dict = {}
    for a, b in oracle_08:
        degree[a] = degree.get(a, 0) + 1
    top = con.sql(f"SELECT left_rowid, count(*) AS n FROM minhash_pairs({u}, 'text') GROUP BY left_rowid "
                  "ORDER BY n DESC, left_rowid LIMIT 5").fetchall()
    assert top == sorted(degree.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    # join to the user's table by row id: pairs of ids
    ids = lance.dataset(corpus).to_table(columns=["id"], with_row_id=True)
    con.register("ids_compose", ids)
    id_of = dict(zip(ids.column("_rowid").to_pylist(), ids.column("id").to_pylist()))
    joined = con.sql(f"""SELECT l.id, r.id FROM minhash_pairs({u}, 'text') p
        JOIN ids_compose l ON l._rowid = p.left_rowid JOIN ids_compose r ON r._rowid = p.right_rowid""").fetchall()
    assert sorted(joined) == sorted((id_of[a], id_of[b]) for a, b in oracle_08)
    # a CTE used twice, and pairs unioned with clusters' row ids
    both = con.sql(f"""WITH p AS (SELECT * FROM minhash_pairs({u}, 'text'))
        SELECT (SELECT count(*) FROM p), (SELECT count(DISTINCT left_rowid) FROM p)""").fetchall()
    assert both == [(len(oracle_08), len({a for a, _ in oracle_08}))]


def test_low_threshold_warns_through_sql(con, corpus):
    with pytest.warns(LowRecallWarning, match="threshold := 0.5 .* 64 bands of 2 rows"):
        got = sql_pairs(con, corpus, ", threshold := 0.5")
    assert got == oracle(corpus, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LowRecallWarning)
        assert "LowRecallWarning" in sql_error(con, f"SELECT * FROM minhash_pairs({lit(corpus)}, 'text', 0.5)")
        sql_pairs(con, corpus)  # none at the S-curve


def test_a_shard_too_large_for_sql_fails_clearly(con, corpus, monkeypatch):
    monkeypatch.setattr(duck_pairs, "MAX_SQL_SHARD_PAIRS", 3)
    msg = sql_error(con, f"SELECT count(*) FROM minhash_pairs({lit(corpus)}, 'text')")
    assert "ResourceLimitError" in msg and "--output pairs.parquet" in msg and "minhash_clusters" in msg


# --------------------------------------------------------------------------- clusters


def test_clusters_equal_python(con, corpus, self_join_budget):
    rel = con.sql(f"SELECT * FROM minhash_clusters({lit(corpus)}, 'text')")
    assert [str(t) for t in rel.types] == ["UBIGINT", "UBIGINT", "BIGINT"]
    got = rel.fetchall()
    want = clusters(corpus, "text", 0.8)
    assert dict(zip(want.column(0).to_pylist(), want.column(1).to_pylist())) == oracle_clusters(corpus, "text", 0.8,
                                                                                                  PARAMS)
    assert got == list(zip(*(want.column(i).to_pylist() for i in range(3))))
    assert len(got) > 100
    sizes = con.sql(f"SELECT count(*) FROM (SELECT cluster_id, count(*) AS n, any_value(cluster_size) AS s "
                    f"FROM minhash_clusters({lit(corpus)}, 'text', threshold := 0.8) GROUP BY cluster_id) "
                    "WHERE n <> s OR n < 2").fetchall()
    assert sizes == [(0,)]


def test_clusters_are_the_pair_components_here(con, grouped, self_join_budget):
    threshold = 0.7
    assert bucket_relation_is_equivalence(grouped, threshold)  # the documented exactness condition
    want = components(oracle(grouped, threshold))
    got = con.sql(f"SELECT _rowid, cluster_id FROM minhash_clusters({lit(grouped)}, 'text', {threshold})").fetchall()
    assert dict(got) == want and len(set(want.values())) >= 30


# --------------------------------------------------------------------------- dedup


def reference_keep(uri: str, threshold: float, policy: str) -> tuple[dict, set]:
    """``(cluster of each clustered row, kept rows)`` from the brute-force pair list."""
    cluster_of = components(oracle(uri, threshold))
    t = lance.dataset(uri).to_table(columns=["text", "quality"], with_row_id=True).to_pydict()
    text = dict(zip(t["_rowid"], t["text"]))
    quality = dict(zip(t["_rowid"], t["quality"]))
    better = {
        "first": lambda a, b: a < b,
        "longest": lambda a, b: (len(text[a]), -a) > (len(text[b]), -b),
        "quality DESC": lambda a, b: (quality[a], -a) > (quality[b], -b),
        "quality, length(text) DESC": lambda a, b: (-quality[a], len(text[a]), -a) > (-quality[b], len(text[b]), -b),
    }[policy]
    return cluster_of, keepers(cluster_of, better)


@pytest.mark.parametrize("policy", ["first", "longest", "quality DESC", "quality, length(text) DESC"])
def test_dedup_keep_policies_match_the_reference(con, grouped, policy, self_join_budget):
    threshold = 0.7
    cluster_of, kept = reference_keep(grouped, threshold, policy)
    arg = f"keep := {lit(policy)}" if policy in ("first", "longest") else f"order_by := {lit(policy)}"
    rel = con.sql(f"SELECT * FROM minhash_dedup({lit(grouped)}, 'text', {threshold}, {arg})")
    assert [d[0] for d in rel.description] == ["_rowid", "cluster_id", "cluster_size", "keep"]
    assert [str(t) for t in rel.types] == ["UBIGINT", "UBIGINT", "BIGINT", "BOOLEAN"]
    got = rel.fetchall()
    assert {r: c for r, c, _, _ in got} == cluster_of
    assert {r for r, _, _, k in got if k} == kept
    assert len(kept) == len(set(cluster_of.values()))
    kw = {"keep": policy} if policy in ("first", "longest") else {"order_by": policy}
    assert keep_flags(grouped, "text", threshold, **kw).to_pylist() == \
        [dict(_rowid=r, cluster_id=c, cluster_size=s, keep=k) for r, c, s, k in got]


@pytest.mark.parametrize("policy", ["longest", "quality, length(text) DESC"])
def test_keep_policies_take_the_rows_in_batches(grouped, policy, monkeypatch):
    """The clustered rows' values are fetched a batch of rows at a time; with batches of 7
    rows (many batches, the last one partial) the kept rows are the reference's."""
    from lance_minhash_sql.selfjoin import dedup as dedup_mod

    monkeypatch.setattr(dedup_mod, "TAKE_ROWS", 7)
    cluster_of, kept = reference_keep(grouped, 0.7, policy)
    assert len(cluster_of) > 7 * 10 and len(cluster_of) % 7
    kw = {"keep": policy} if policy == "longest" else {"order_by": policy}
    got = keep_flags(grouped, "text", 0.7, **kw).to_pydict()
    assert dict(zip(got["_rowid"], got["cluster_id"])) == cluster_of
    assert {r for r, k in zip(got["_rowid"], got["keep"]) if k} == kept


@pytest.mark.parametrize("kw", [{"keep": "first"}, {"keep": "longest"}, {"order_by": "quality DESC"}])
def test_keep_policies_on_a_dataset_without_near_duplicates(tmp_path, kw):
    """No pair reaches the threshold (the brute-force oracle finds none): every policy
    flags no row and the dry run removes none."""
    uri = str(tmp_path / "distinct.lance")
    rng = np.random.default_rng(3)
    vocab = np.array(vocabulary().to_pylist())
    texts = [" ".join(rng.choice(vocab, int(rng.integers(8, 40)))) for _ in range(300)]
    lance.write_dataset(pa.table({"id": np.arange(300), "text": texts,
                                  "quality": pa.array(rng.integers(0, 3, 300), pa.int32())}), uri)
    build_index(uri, "text")
    if oracle(uri, 0.7):  # random texts of one vocabulary: drop the rows of any chance pair
        lance.dataset(uri).delete("id IN (" + ", ".join(str(i) for i in paired_ids(uri, 0.7)) + ")")
    assert oracle(uri, 0.7) == {} and lance.dataset(uri).count_rows() > 200
    flags = keep_flags(uri, "text", 0.7, **kw)
    assert flags.num_rows == 0 and [f.name for f in flags.schema] == ["_rowid", "cluster_id", "cluster_size", "keep"]
    r = dedup(uri, "text", 0.7, **kw)
    assert (r.removed, r.clusters, r.clustered_rows, r.dry_run) == (0, 0, 0, True)


def paired_ids(uri: str, threshold: float) -> set:
    t = lance.dataset(uri).to_table(columns=["id"], with_row_id=True).to_pydict()
    id_of = dict(zip(t["_rowid"], t["id"]))
    return {id_of[r] for pair in oracle(uri, threshold) for r in pair}


def test_longest_differs_from_first_here(con, grouped):
    """The policies are not vacuous on this data."""
    _, first = reference_keep(grouped, 0.7, "first")
    _, longest = reference_keep(grouped, 0.7, "longest")
    _, quality = reference_keep(grouped, 0.7, "quality DESC")
    assert first != longest and first != quality


def test_dedup_query_gives_the_deduplicated_table(con, grouped):
    t = lance.dataset(grouped).to_table(with_row_id=True)
    con.register("grouped_rows", t)
    rows = con.sql(f"""SELECT count(*) FROM grouped_rows g
        ANTI JOIN (SELECT _rowid FROM minhash_dedup({lit(grouped)}, 'text', 0.7) WHERE NOT keep) d
        ON g._rowid = d._rowid""").fetchall()[0][0]
    cluster_of, kept = reference_keep(grouped, 0.7, "first")
    assert rows == t.num_rows - (len(cluster_of) - len(kept))


def test_dedup_writes_a_new_dataset(fresh, tmp_path):
    out = str(tmp_path / "deduped.lance")
    version = lance.dataset(fresh).version
    cluster_of, kept = reference_keep(fresh, 0.7, "longest")
    removed = set(cluster_of) - kept
    r = dedup(fresh, "text", 0.7, keep="longest", output=out)
    assert (r.removed, r.clustered_rows, r.clusters, r.dry_run) == (len(removed), len(cluster_of), len(kept), False)
    src = lance.dataset(fresh).to_table(with_row_id=True)
    written = lance.dataset(out).to_table()
    assert written.num_rows == r.output_rows == src.num_rows - len(removed) == r.kept
    assert (r.output, r.output_version) == (out, lance.dataset(out).version)
    assert written.schema.equals(lance.dataset(fresh).schema)
    want = src.filter(pa.array([x not in removed for x in src.column("_rowid").to_pylist()])).drop(["_rowid"])
    assert written.sort_by("id").equals(want.sort_by("id"))
    assert lance.dataset(fresh).version == version and lance.dataset(fresh).count_rows() == src.num_rows


def test_dedup_deletes_in_place_in_one_new_version(fresh):
    before = lance.dataset(fresh)
    v0, n0 = before.version, before.count_rows()
    cluster_of, kept = reference_keep(fresh, 0.7, "quality DESC")
    removed = set(cluster_of) - kept
    r = dedup(fresh, "text", 0.7, order_by="quality DESC", delete_in_place=True)
    now = lance.dataset(fresh)
    assert (r.version, r.output_version, now.version, r.output, r.dry_run) == (v0, v0 + 1, v0 + 1, fresh, False)
    assert now.count_rows() == r.output_rows == n0 - len(removed)
    left = set(now.to_table(columns=["id"], with_row_id=True).column("_rowid").to_pylist())
    all_rows = set(lance.dataset(fresh, version=v0).to_table(columns=["id"], with_row_id=True)
                   .column("_rowid").to_pylist())
    assert left == all_rows - removed and len(all_rows) == n0
    assert lance.dataset(fresh, version=v0).count_rows() == n0  # the old version keeps every row
    # the index still answers on the new version, without the deleted rows
    assert set(clusters(fresh, "text", 0.7).column("_rowid").to_pylist()).isdisjoint(removed)


def test_dry_run_changes_nothing(fresh, tmp_path):
    v0 = lance.dataset(fresh).version
    cluster_of, kept = reference_keep(fresh, 0.7, "first")
    r = dedup(fresh, "text", 0.7)
    assert r.dry_run and r.output is None and r.removed == len(cluster_of) - len(kept) > 0
    assert (r.dataset, r.version) == (fresh, v0)
    assert sorted(r.removed_rowids.tolist()) == sorted(set(cluster_of) - kept)
    assert lance.dataset(fresh).version == v0 and lance.dataset(fresh).count_rows() == r.rows


def test_cli_dedup_pairs_clusters(fresh, tmp_path, capsys):
    v0 = lance.dataset(fresh).version
    n0 = lance.dataset(fresh).count_rows()
    assert cli.main(["dedup", fresh, "text", "--threshold", "0.7", "--keep", "longest", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing written" in out and lance.dataset(fresh).version == v0
    pq = str(tmp_path / "pairs.parquet")
    assert cli.main(["pairs", fresh, "text", "--threshold", "0.7", "--output", pq, "--quiet"]) == 0
    import pyarrow.parquet as papq

    written = papq.read_table(pq)
    assert {(a, b): s for a, b, s in zip(*(written.column(i).to_pylist() for i in range(3)))} == oracle(fresh, 0.7)
    csv = str(tmp_path / "clusters.csv")
    assert cli.main(["clusters", fresh, "text", "--threshold", "0.7", "--output", csv]) == 0
    assert "clusters holding" in capsys.readouterr().out
    assert sum(1 for _ in open(csv)) == clusters(fresh, "text", 0.7).num_rows + 1
    assert cli.main(["dedup", fresh, "text", "--threshold", "0.7", "--delete-in-place", "--quiet"]) == 0
    out = capsys.readouterr().out
    removed = n0 - lance.dataset(fresh).count_rows()
    assert f"deleted {removed:,} rows: version {v0} ({n0:,} rows) -> version {v0 + 1}" in out and removed > 0
    assert cli.main(["pairs", fresh, "text", "--output", str(tmp_path / "p.txt")]) == 2
    assert "parquet or .csv" in capsys.readouterr().err


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("bad", ["0", "-0.1", "1.5", "NULL"])
def test_threshold_errors_name_the_value(con, fresh, bad):
    u = lit(fresh)
    version = lance.dataset(fresh).version
    for sql in (f"SELECT * FROM minhash_pairs({u}, 'text', threshold := {bad})",
                f"SELECT * FROM minhash_clusters({u}, 'text', threshold := {bad})",
                f"SELECT * FROM minhash_dedup({u}, 'text', threshold := {bad})"):
        msg = sql_error(con, sql)
        assert "InvalidParameterError" in msg and "threshold" in msg and "0 < threshold <= 1" in msg or \
            (bad == "NULL" and "threshold is NULL" in msg), (sql, msg)
        assert "minhash_" in msg
    with pytest.raises(lms.InvalidParameterError, match="threshold"):
        dedup(fresh, "text", None if bad == "NULL" else float(bad), delete_in_place=True)
    assert lance.dataset(fresh).version == version


def test_other_errors(con, fresh, tmp_path):
    u = lit(fresh)
    plain = str(tmp_path / "plain.lance")
    lance.write_dataset(pa.table({"text": ["a b c", "a b c"], "n": [1, 2]}), plain)
    version = lance.dataset(fresh).version
    missing = lit(str(tmp_path / "missing.lance"))
    per_macro = [  # (arguments, error class, a fragment of the message) for each of the three macros
        (f"{lit(plain)}, 'text'", "IndexNotFoundError", "minhash_build"),
        (f"{lit(plain)}, 'n'", "DatasetError", "string"),
        (f"{u}, 'nope'", "DatasetError", "'nope'"),
        (f"{missing}, 'text'", "DatasetError", "missing.lance"),
        ("NULL, 'text'", "InvalidInputError", "dataset is NULL"),
        (f"{u}, NULL", "InvalidInputError", "column is NULL"),
    ]
    cases = [(f"SELECT * FROM {m}({args})", cls, frag) for args, cls, frag in per_macro
             for m in ("minhash_pairs", "minhash_clusters", "minhash_dedup")]
    dedup_sql = f"SELECT * FROM minhash_dedup({u}, 'text', "
    cases += [
        (f"SELECT * FROM minhash_pairs({u}, 'text', exact := NULL)", "InvalidInputError", "exact is NULL"),
        (dedup_sql + "keep := 'newest')", "InvalidParameterError", "keep := 'newest'"),
        (dedup_sql + "keep := NULL)", "InvalidParameterError", "keep := NULL"),
        (dedup_sql + "order_by := 'nope DESC')", "InvalidParameterError", "order_by := 'nope DESC'"),
        (dedup_sql + "order_by := '  ')", "InvalidParameterError", "ORDER BY"),
        (dedup_sql + "keep := 'longest', order_by := 'quality')", "InvalidParameterError", "give one"),
    ]
    for sql, cls, fragment in cases:
        msg = sql_error(con, sql)
        assert cls in msg and fragment in msg, (sql, msg)
    out = str(tmp_path / "out.lance")
    with pytest.raises(lms.InvalidParameterError, match="give one"):
        dedup(fresh, "text", output=out, delete_in_place=True)
    with pytest.raises(lms.InvalidParameterError) as e:
        dedup(fresh, "text", order_by="nope DESC", output=out)
    msg = str(e.value)  # names the dataset, DuckDB's reason and the columns there are
    assert msg.startswith(f"order_by='nope DESC' is not a valid SQL ORDER BY over the columns of {fresh!r} (Binder "
                          "Error: ") and "column nope not found" in msg.replace('"', ''), msg
    assert msg.endswith("; its columns are ['id', 'text', 'quality'] (plus _rowid); e.g. order_by := "
                        "'length(text) DESC'"), msg
    with pytest.raises(lms.DatasetError, match="already exists"):
        dedup(fresh, "text", output=plain)
    with pytest.raises(lms.InvalidParameterError, match="keep="):
        dedup(fresh, "text", keep="nope", delete_in_place=True)
    assert not os.path.exists(out)
    assert lance.dataset(fresh).version == version
    assert lance.dataset(plain).count_rows() == 2


def test_dedup_argument_errors_come_before_any_work(fresh, tmp_path, capsys):
    """Each invalid argument gets its own message, before the output path is looked at or
    anything is written; the default writes no progress bar."""
    plain = str(tmp_path / "exists.lance")
    lance.write_dataset(pa.table({"text": ["a b c"]}), plain)
    version = lance.dataset(fresh).version
    with pytest.raises(lms.InvalidParameterError) as e:
        dedup(fresh, "text", order_by="  ", output=plain)  # order_by refused before the existing output
    assert str(e.value).startswith("order_by='  ' must be a SQL ORDER BY list")
    with pytest.raises(lms.InvalidParameterError) as e:
        dedup(fresh, "text", delete_in_place=1)
    assert str(e.value) == "delete_in_place=1 must be true or false"
    with pytest.raises(lms.InvalidParameterError) as e:
        dedup(fresh, "text", output=str(tmp_path / "o.lance"), delete_in_place=True)
    assert str(e.value) == (f"output={str(tmp_path / 'o.lance')!r} and delete_in_place=True both say where to "
                            "write: give one (a new dataset, or a new version of this one without the "
                            "duplicates), or neither for a dry run")
    for bad in ("", 3):
        with pytest.raises(lms.InvalidInputError) as e:
            dedup(fresh, "text", output=bad)
        assert str(e.value) == f"output={bad!r} must be the path of a new Lance dataset, e.g. 'deduped.lance'"
    assert lance.dataset(fresh).version == version  # nothing written
    assert sorted(os.listdir(tmp_path)) == ["exists.lance", "fresh.lance"]
    out = str(tmp_path / "written.lance")
    dedup(fresh, "text", 0.7, output=out)
    assert capsys.readouterr().err == ""


def test_dedup_progress_bar_counts_every_row(fresh, tmp_path, capsys):
    n = lance.dataset(fresh).count_rows()
    dedup(fresh, "text", 0.7, output=str(tmp_path / "out.lance"), progress=True)
    err = capsys.readouterr().err
    assert "dedup write: 100%" in err and f"{n}/{n}" in err, err


def test_clusters_and_keep_flags_progress_bars_reach_their_totals(grouped, capsys):
    """``progress=True``: a bar of the shards linked (every shard counted, empty ones
    included) and, for star, one of the rows walked; the answer is the one without bars,
    and without bars no bar reaches stderr."""
    import re

    quiet = lms.clusters(grouped, "text", 0.7, memory_limit="16MiB")
    assert "clusters:" not in capsys.readouterr().err  # (the first compile's notice may be there)
    assert lms.clusters(grouped, "text", 0.7, memory_limit="16MiB", progress=True).equals(quiet)
    err = capsys.readouterr().err
    done = re.findall(r"clusters: 100%\S* (\d+)/(\d+) \[", err)
    assert done and all(a == b and int(a) >= 1 for a, b in done), err
    assert "shards" in err
    quiet = lms.keep_flags(grouped, "text", 0.7, clustering="star", verify="exact")
    assert "star:" not in capsys.readouterr().err
    flags = lms.keep_flags(grouped, "text", 0.7, clustering="star", verify="exact", progress=True)
    assert flags.equals(quiet)
    err = capsys.readouterr().err
    assert re.search(r"clusters: 100%\S* (\d+)/\1 \[", err), err
    n = linked_components(grouped, "text", 0.7, "exact", Budget.parse(None), None, "star").num_rows
    assert n >= flags.num_rows > 0 and f"star: 100%" in err and f"{n}/{n}" in err, err
    lms.clusters(grouped, "text", 0.7, clustering="star", progress=True)
    assert "star: 100%" in capsys.readouterr().err
    with pytest.raises(lms.InvalidParameterError, match="progress"):
        lms.keep_flags(grouped, "text", 0.7, progress="yes")


def test_dedup_checks_the_rows_it_wrote(fresh, tmp_path, monkeypatch):
    """A write that loses a row (simulated) is an error naming both counts; the source is
    untouched."""
    from lance_minhash_sql.selfjoin import dedup as dedup_mod

    real = dedup_mod.write_without

    def lossy(ds, remove, output, progress=None):
        written = real(ds, remove, output, progress)
        first_id = written.to_table(columns=["id"]).column("id")[0].as_py()
        written.delete(f"id = {first_id}")
        return lance.dataset(output)

    monkeypatch.setattr(dedup_mod, "write_without", lossy)
    out = str(tmp_path / "out.lance")
    cluster_of, kept = reference_keep(fresh, 0.7, "first")
    want = lance.dataset(fresh).count_rows() - (len(cluster_of) - len(kept))
    version = lance.dataset(fresh).version
    with pytest.raises(lms.DatasetError) as e:
        dedup(fresh, "text", 0.7, output=out)
    assert str(e.value) == (f"dedup wrote {want - 1:,} rows to {out!r} but {want:,} were expected; the source is "
                            "unchanged: remove the output and run again")
    assert lance.dataset(fresh).version == version


def test_keep_policy_message():
    from lance_minhash_sql.selfjoin.dedup import check_keep

    with pytest.raises(lms.InvalidParameterError) as e:
        check_keep("newest", None)
    assert str(e.value) == ("keep='newest' is not a keep policy: use one of 'first', 'longest' ('first': lowest row "
                            "id; 'longest': longest text), or keep := 'first' with order_by := '<SQL ORDER BY over "
                            "the dataset columns>', e.g. order_by := 'quality DESC'")
    with pytest.raises(lms.InvalidParameterError) as e:
        check_keep("first", " ")
    assert str(e.value) == ("order_by=' ' must be a SQL ORDER BY list over the dataset's columns, e.g. "
                            "'quality DESC' or 'length(text) DESC, id'")
    with pytest.raises(lms.InvalidParameterError) as e:
        check_keep("longest", "quality")
    assert str(e.value) == ("keep='longest' and order_by='quality' both choose the kept row: give one of them "
                            "(order_by keeps the first row in its order; keep := 'longest' is order_by := "
                            "'length(<column>) DESC')")


def test_keep_flags_errors_name_the_dataset_and_the_default_threshold_is_0_8(fresh):
    """An ORDER BY that binds but fails on the clustered rows' values (a cast of the text)
    is refused with DuckDB's reason and the dataset; a missing column names the dataset."""
    with pytest.raises(lms.InvalidParameterError) as e:
        keep_flags(fresh, "text", 0.7, order_by="CAST(text AS INTEGER)")
    assert str(e.value).startswith(f"order_by='CAST(text AS INTEGER)' is not a valid SQL ORDER BY over the columns "
                                   f"of {fresh!r} (Conversion Error: "), str(e.value)
    with pytest.raises(lms.DatasetError) as e:
        keep_flags(fresh, "nope")
    assert repr(fresh) in str(e.value) and "'nope'" in str(e.value)
    cluster_of, kept = reference_keep(fresh, 0.8, "first")
    got = keep_flags(fresh, "text").to_pydict()
    assert dict(zip(got["_rowid"], got["cluster_id"])) == cluster_of
    assert {r for r, k in zip(got["_rowid"], got["keep"]) if k} == kept


def test_dedup_checks_the_rows_it_deleted(fresh, monkeypatch):
    """A delete commit that removes fewer rows than asked (simulated) is an error that says
    how to reach the version that still has every row."""
    from lance_minhash_sql.selfjoin import dedup as dedup_mod

    real = dedup_mod.delete_rows
    monkeypatch.setattr(dedup_mod, "delete_rows", lambda ds, remove: real(ds, remove[1:]))
    v0 = lance.dataset(fresh).version
    cluster_of, kept = reference_keep(fresh, 0.7, "first")
    asked = len(cluster_of) - len(kept)
    with pytest.raises(lms.DatasetError) as e:
        dedup(fresh, "text", 0.7, delete_in_place=True)
    assert str(e.value) == (f"the delete commit removed {asked - 1:,} rows from {fresh!r} but {asked:,} were asked "
                            f"(version {v0 + 1}); version {v0} still has every row: lance.dataset({fresh!r}, "
                            f"version={v0})")
    assert lance.dataset(fresh, version=v0).count_rows() == lance.dataset(fresh).count_rows() + asked - 1


def test_in_place_dedup_of_a_dataset_object_reads_its_version(fresh):
    """A ``LanceDataset`` opened at version v0 is deduplicated as of v0 even after rows were
    appended (v0 + 1): the rows removed are the v0 reference's, and the appended rows stay."""
    old = lance.dataset(fresh)
    v0 = old.version
    cluster_of, kept = reference_keep(fresh, 0.7, "first")
    lance.write_dataset(pa.table({"id": pa.array([10_000], pa.int64()), "text": ["an appended row of its own"],
                                  "quality": pa.array([1], pa.int32())}), fresh, mode="append")
    r = dedup(old, "text", 0.7, delete_in_place=True)
    assert r.version == v0 and sorted(r.removed_rowids.tolist()) == sorted(set(cluster_of) - kept)
    now = lance.dataset(fresh)
    assert 10_000 in now.to_table(columns=["id"]).column("id").to_pylist()
    assert now.count_rows() == old.count_rows() + 1 - r.removed


def test_dedup_uses_its_threshold(fresh):
    """At threshold 1.0 only rows with equal signatures cluster: fewer removed than at 0.7."""
    removed = {}
    for t in (1.0, 0.7):
        cluster_of, kept = reference_keep(fresh, t, "first")
        removed[t] = set(cluster_of) - kept
        r = dedup(fresh, "text", t)
        assert sorted(r.removed_rowids.tolist()) == sorted(removed[t]) and r.removed == len(removed[t])
    assert 0 < len(removed[1.0]) < len(removed[0.7])


def test_in_place_with_stable_row_ids(tmp_path):
    uri = str(tmp_path / "stable.lance")
    lance.write_dataset(grouped_table(seed=11), uri, max_rows_per_file=300, enable_stable_row_ids=True)
    build_index(uri, "text")
    lance.dataset(uri).delete("id % 13 = 0")  # stable ids no longer equal row addresses' offsets
    cluster_of, kept = reference_keep(uri, 0.7, "longest")
    n0 = lance.dataset(uri).count_rows()
    r = dedup(uri, "text", 0.7, keep="longest", delete_in_place=True)
    assert r.removed == len(cluster_of) - len(kept) > 0
    left = set(lance.dataset(uri).to_table(columns=["id"], with_row_id=True).column("_rowid").to_pylist())
    assert len(left) == n0 - r.removed and left.isdisjoint(set(cluster_of) - kept) and kept <= left


def test_a_failed_write_leaves_no_dataset(fresh, tmp_path, monkeypatch):
    from lance_minhash_sql.io import rewrite
    from lance_minhash_sql.io.rewrite import write_without

    monkeypatch.setattr(rewrite, "SCAN_BATCH_ROWS", 20)
    out = str(tmp_path / "broken.lance")
    calls = []

    def boom(rows):
        calls.append(rows)
        if len(calls) == 15:  # after some batches were handed to Lance
            raise RuntimeError("disk full")

    with pytest.raises(lms.DatasetError, match="disk full"):
        write_without(lance.dataset(fresh), np.array([1], np.uint64), out, boom)
    assert not os.path.exists(out)
    assert lance.dataset(fresh).count_rows() == grouped_table(seed=9).num_rows
