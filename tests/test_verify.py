"""verify := 'exact' (selfjoin/verify.py): candidates down to a margin under the threshold,
kept by their exact shingle Jaccard. Oracle: every pair of rows sharing a band key (brute
force over the signatures), its estimate, and its exact Jaccard from lance.tokenize, down
to a floor the tests compute themselves (tests/naive.py: exact_pairs, candidate_floor)."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pytest
from conftest import copies_table, indexed_corpus
import naive
from naive import candidate_floor, candidate_pairs, exact_jaccard, exact_pairs
from test_pairs import as_clusters, components, signed

import lance_minhash_sql as lms
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.core.banding import exact_candidate_floor
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.faces.corpus import vocabulary
from lance_minhash_sql.index.results import PAIRS_EXACT_SCHEMA
from lance_minhash_sql.selfjoin.clusters import clusters
from lance_minhash_sql.selfjoin.dedup import keep_flags
from lance_minhash_sql.selfjoin.pairs import pairs

PARAMS = MinHashParams()
T = 0.8


def brute_force(uri: str, threshold: float) -> dict:
    """``{(left, right): (estimate, jaccard)}``: candidates whose estimate reaches the
    floor, kept when their exact Jaccard reaches the threshold."""
    return exact_pairs(uri, threshold, PARAMS)


def pairs_table(uri: str, threshold: float = T, **kw) -> pa.Table:
    return pa.Table.from_batches(list(pairs(uri, "text", threshold, **kw)))


def as_pairs(table: pa.Table) -> dict:
    d = table.to_pydict()
    return {(a, b): (s, j) for a, b, s, j in zip(d["left_rowid"], d["right_rowid"], d["similarity"],
                                                 d.get("jaccard", [None] * table.num_rows))}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    return indexed_corpus(str(tmp_path_factory.mktemp("verify") / "corpus.lance"), 2500, 1000, "id % 13 = 5",
                          appended=400)  # unindexed rows too


def edited_table(seed: int = 7, groups: int = 60) -> pa.Table:
    """Pairs of 200-word texts with 6 words replaced apart: exact Jaccard of 3-word
    shingles about 0.83, estimates scattered around it (standard deviation 0.033)."""
    rng = np.random.default_rng(seed)
    vocab = np.array(vocabulary().to_pylist())
    texts = []
    for _ in range(groups):
        words = rng.choice(vocab, 200)
        texts.append(" ".join(words))
        edited = words.copy()
        for p in rng.choice(np.arange(0, 200, 7), 6, replace=False):
            edited[p] = rng.choice(vocab)
        texts.append(" ".join(edited))
    return pa.table({"id": pa.array(np.arange(len(texts))), "text": pa.array(texts)})


@pytest.fixture(scope="module")
def edited(tmp_path_factory) -> str:
    uri = str(tmp_path_factory.mktemp("edited") / "edited.lance")
    lance.write_dataset(edited_table(), uri)
    build_index(uri, "text")
    return uri


def test_the_floor_is_four_standard_deviations():
    for t, k in ((0.8, 128), (0.9, 256), (0.5, 64), (1.0, 128)):
        assert exact_candidate_floor(t, k) == pytest.approx(candidate_floor(t, k))
    with pytest.raises(InvalidParameterError, match="threshold=1.5"):
        exact_candidate_floor(1.5, 128)


@pytest.mark.parametrize("k", [16, 64, 128, 256])
def test_every_caller_verifies_candidates_down_to_the_oracles_floor(k):
    """The estimate a candidate must reach is chosen in one place (core/banding.py:
    candidate_floor): the threshold, or with verify='exact' four standard deviations
    under it (tests/naive.py: candidate_floor). The equal values the self-join and the
    join (candidate_matches), the search (threshold_cut) and exact star's links
    (link_rule) ask of a candidate are those of that floor."""
    import warnings

    from lance_minhash_sql.core.banding import candidate_floor as floor_of
    from lance_minhash_sql.core.params import threshold_cut
    from lance_minhash_sql.selfjoin.links import link_rule
    from lance_minhash_sql.selfjoin.verify import candidate_matches

    params = MinHashParams(num_hashes=k, num_bands=8)
    assert floor_of(0.8, 128, "exact") == pytest.approx(0.8 - 4 * (0.8 * 0.2 / 128) ** 0.5) == pytest.approx(0.65858,
                                                                                                         abs=1e-5)
    for t in (0.5, 0.7, 0.8, 0.9, 0.95, 1.0):
        for verify, want in (("estimate", t), ("exact", candidate_floor(t, k))):
            assert floor_of(t, k, verify) == pytest.approx(want, abs=1e-12)
            need = naive.min_equal(want, k)
            assert candidate_matches(t, k, verify) == need
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (low recall at some of these thresholds)
                assert threshold_cut(params, t, verify).min_eq == need
                if verify == "exact":
                    assert link_rule(params, t, verify, "star").threshold == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("threshold", [0.8, 0.7])
def test_verify_exact_equals_brute_force(corpus, threshold, self_join_budget):
    want = brute_force(corpus, threshold)
    got = as_pairs(pairs_table(corpus, threshold, verify="exact"))
    assert len(want) > 100
    assert got.keys() == want.keys()
    for p, (est, jac) in got.items():
        assert est == want[p][0] and jac == pytest.approx(want[p][1], abs=1e-12)


def test_verify_exact_finds_pairs_the_estimate_drops(edited):
    t = 0.8
    want = brute_force(edited, t)
    got = as_pairs(pairs_table(edited, t, verify="exact"))
    assert got.keys() == want.keys()
    rescued = {p for p, (est, jac) in got.items() if est < t <= jac}
    assert len(rescued) >= 3, "the corpus has pairs above the threshold whose estimate is under it"
    estimate = as_pairs(pairs_table(edited, t))
    assert not rescued & estimate.keys()
    # exact := true is the older spelling of verify := 'exact' (with a FutureWarning)
    with pytest.warns(FutureWarning, match="exact=True is verify='exact'"):
        both = as_pairs(pa.Table.from_batches(list(lms.pairs(edited, "text", t, exact=True))))
    assert both == got
    assert all(jac >= t for _, jac in got.values())
    # the estimate keeps pairs under the threshold that verify := 'exact' drops
    assert {p for p in estimate if exact_jaccard(*texts_of(edited, p), PARAMS) < t} == estimate.keys() - got.keys()


@pytest.mark.parametrize("which", ["corpus", "edited"])
def test_exact_components_equal_the_components_of_brute_force_pairs(corpus, edited, which, self_join_budget):
    """clustering='components' with verify='exact': scipy's connected components over the
    brute-force exact pairs (candidates over the floor, exact Jaccard at the threshold)."""
    uri = corpus if which == "corpus" else edited
    exact_pairs = brute_force(uri, T)
    want = components([x for p in exact_pairs for x in p], list(exact_pairs))
    got = as_clusters(clusters(uri, "text", T, verify="exact"))
    assert got == want and len(want) > 40
    flags = keep_flags(uri, "text", T, verify="exact").to_pydict()
    assert {r for r, k in zip(flags["_rowid"], flags["keep"]) if k} == set(want.values())
    if which == "edited":  # rows linked only by pairs whose estimate is under the threshold
        assert got != as_clusters(clusters(uri, "text", T))


def test_exact_components_of_a_bucket_larger_than_a_window(tmp_path, monkeypatch):
    """A bucket of 300 copies under a budget whose windows hold a few dozen rows: read
    whole (every pair of it verified), one component."""
    from conftest import TIGHT_BUDGET

    from lance_minhash_sql.core import budget as core_budget
    from lance_minhash_sql.selfjoin import pool, sizing

    uri = str(tmp_path / "copies.lance")
    lance.write_dataset(copies_table(300, 40, seed=5), uri)
    build_index(uri, "text")
    monkeypatch.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", TIGHT_BUDGET // 4)
    monkeypatch.setattr(sizing, "MIN_SHARD_ROWS", 1024)
    before = pool.STATS["streamed_shards"]
    got = clusters(uri, "text", T, verify="exact").to_pydict()
    assert pool.STATS["streamed_shards"] > before
    assert len(got["_rowid"]) == 300 and set(got["cluster_size"]) == {300}


def floor_rows(uri: str, threshold: float = T) -> set:
    """The rows of the candidate pairs whose estimate reaches the floor."""
    rowids, sigs, keys, _, _ = signed(uri)
    cand = candidate_pairs(keys)
    eq = (sigs[cand[:, 0]] == sigs[cand[:, 1]]).sum(axis=1)
    est = (eq.astype(np.float32) / np.float32(PARAMS.num_hashes)).astype(np.float64)
    return {int(rowids[i]) for i in cand[est >= candidate_floor(threshold, PARAMS.num_hashes)].ravel()}


def bucket_rows(uri: str) -> set:
    """The rows that share a band key with another row (every row of a candidate pair)."""
    rowids, _, keys, _, _ = signed(uri)
    return {int(rowids[i]) for i in candidate_pairs(keys).ravel()}


def test_each_row_is_shingled_once_per_self_join(corpus, monkeypatch):
    """Under the default budget the live rows sharing a bucket with another (deleted
    rows' buckets too: what the index holds) are fetched and shingled once, before any
    pair is verified, though they are in pairs of several bands, shards and chunks; the
    rows of the candidates over the floor are among them."""
    from lance_minhash_sql.selfjoin import shingles

    found = []
    rows_of = shingles.candidate_rows
    monkeypatch.setattr(shingles, "candidate_rows", lambda shards: found.append(rows_of(shards)) or found[-1])
    before = dict(shingles.STATS)
    got = pairs_table(corpus, T, verify="exact")
    delta = {k: shingles.STATS[k] - before[k] for k in before}
    prefetched = set(found[0].tolist())
    assert len(found) == 1 and delta["prefetched_rows"] == len(prefetched) and delta["fetched_rows"] == 0
    assert floor_rows(corpus) <= bucket_rows(corpus) <= prefetched <= set(signed(corpus)[0].tolist())
    assert delta["asked_rows"] >= len(bucket_rows(corpus))  # every candidate row looked up, none fetched again
    assert as_pairs(got).keys() == brute_force(corpus, T).keys()


def test_shingle_sets_are_the_rows_sets_fetched_once(corpus):
    """ShingleSets gathers each asked row's set, the signer's, and its signature, the
    index's, fetching a row the first time it is asked only, whatever the order and
    repeats of the asks."""
    from lance_minhash_sql.index.opened import open_index
    from lance_minhash_sql.index.sign import signer_for
    from lance_minhash_sql.selfjoin import shingles
    from lance_minhash_sql.selfjoin.shingles import ShingleSets

    opened = open_index(corpus, "text")
    rowids, sigs, _, _, texts = signed(corpus)
    off, hashes = signer_for(PARAMS).shingle_sets(texts)
    want = {int(r): hashes[off[i]:off[i + 1]].tolist() for i, r in enumerate(rowids)}
    want_sig = {int(r): sigs[i].tolist() for i, r in enumerate(rowids)}
    rng = np.random.default_rng(0)
    sets = ShingleSets(opened, signatures=True)
    asked = set()
    before = shingles.STATS["fetched_rows"]
    try:
        for _ in range(50):
            rows = rng.choice(rowids, 40)
            asked |= set(rows.tolist())
            got_sigs, o, h = sets.gather(rows)
            for i, r in enumerate(rows):
                assert h[o[i]:o[i + 1]].tolist() == want[int(r)] and got_sigs[i].tolist() == want_sig[int(r)]
        assert shingles.STATS["fetched_rows"] - before == len(asked) == sets.index.ids.size
    finally:
        sets.close()


@pytest.mark.parametrize("held_most", [None, 0])
def test_shingle_sets_held_in_files_are_the_rows_sets(corpus, held_most):
    """Asked in scattered rounds, each merged into the index (held in memory, or with
    ``held_most=0`` in files, merged a slice at a time): every row's set and signature
    are the signer's and the index's, the index sorted by row id, and nothing of it in
    memory once it is in files."""
    from lance_minhash_sql.index.opened import open_index
    from lance_minhash_sql.index.sign import signer_for
    from lance_minhash_sql.selfjoin import shingles
    from lance_minhash_sql.selfjoin.shingles import INDEX_BYTES, ShingleSets

    opened = open_index(corpus, "text")
    rowids, sigs, _, _, texts = signed(corpus)
    off, hashes = signer_for(PARAMS).shingle_sets(texts)
    rng = np.random.default_rng(1)
    sets = ShingleSets(opened, signatures=True)
    sets.prefetch([], held_most=held_most)
    before = shingles.STATS["index_in_files"]
    try:
        for _ in range(6):
            rows = rng.choice(rowids, 300)
            got_sigs, o, h = sets.gather(rows)
            for i, r in enumerate(rows):
                at = int(np.flatnonzero(rowids == r)[0])
                assert h[o[i]:o[i + 1]].tolist() == hashes[off[at]:off[at + 1]].tolist()
                assert got_sigs[i].tolist() == sigs[at].tolist()
        ids = sets.index.ids
        assert (np.diff(ids.astype(np.int64)) > 0).all()
        if held_most is None:
            assert sets.held_bytes() == INDEX_BYTES * ids.size and shingles.STATS["index_in_files"] == before
        else:
            assert sets.held_bytes() == 0 and len(sets.files) == 5 and shingles.STATS["index_in_files"] == before + 6
    finally:
        sets.close()
    assert sets.files == []


def test_the_shingle_index_is_held_within_the_budgets_sets_part(corpus, monkeypatch):
    """Exact pairs hold the shingle sets' index in memory within the budget's ``sets``
    part (core/budget.py), in files past it, and take what it holds in memory from the
    budget they verify in (verify.remaining); the pairs are brute force's either way."""
    import dataclasses

    from lance_minhash_sql.core.budget import Budget
    from lance_minhash_sql.selfjoin import shingles, steps
    from lance_minhash_sql.selfjoin import verify as verify_mod
    from lance_minhash_sql.selfjoin.shingles import INDEX_BYTES

    seen = []
    remaining = verify_mod.remaining

    def spy(verifier, budget):
        sets = verifier.shingles
        seen.append((budget, sets.index.ids.size, sets.held_bytes(), len(sets.files), remaining(verifier, budget)))
        return seen[-1][-1]

    monkeypatch.setattr(steps, "remaining", spy)
    want = brute_force(corpus, T).keys()
    total, of = 64 << 20, Budget.of.__func__
    for sets_part in (0, 1 << 20, INDEX_BYTES * 400):
        monkeypatch.setattr(Budget, "of", classmethod(lambda cls, n, part=sets_part:
                                                      dataclasses.replace(of(cls, n), sets=part)))
        assert as_pairs(pairs_table(corpus, T, verify="exact", memory_limit=total)).keys() == want
        budget, rows, held, files, left = seen.pop()
        assert budget.sets == sets_part and rows > 400 and held <= budget.sets
        if rows * INDEX_BYTES > budget.sets:
            assert held == 0 and files == 5
        else:
            assert held == rows * INDEX_BYTES and files == 0
        assert left.total == max(total // 2, total - held - shingles.TEXT_READER_BYTES)


def texts_of(uri: str, pair) -> list[str]:
    t = lance.dataset(uri).to_table(columns=["text"], with_row_id=True).to_pydict()
    text = dict(zip(t["_rowid"], t["text"]))
    return [text[r] for r in pair]


def test_sql_and_cli_verify(corpus):
    con = lms.connect()
    u = corpus.replace("'", "''")
    rel = con.sql(f"SELECT * FROM minhash_pairs('{u}', 'text', {T}, verify := 'exact')")
    assert [d[0] for d in rel.description] == PAIRS_EXACT_SCHEMA.names
    got = {(a, b): (s, j) for a, b, s, j in rel.fetchall()}
    assert got == as_pairs(pairs_table(corpus, T, verify="exact"))
    with pytest.raises(duckdb.Error, match=r"minhash_pairs: verify := 'exactly' is not a verification: use 'estimate'"):
        con.sql(f"SELECT * FROM minhash_pairs('{u}', 'text', verify := 'exactly')").fetchall()
    with pytest.raises(InvalidParameterError, match="verify=None is not|verify=NULL is not"):
        pairs(corpus, "text", verify=None)
    run = subprocess.run([sys.executable, "-m", "lance_minhash_sql.faces.cli", "pairs", corpus, "text", "--verify",
                          "exact", "--quiet"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert f"{len(got):,} pairs at threshold 0.8" in run.stdout


def test_sql_shards_share_one_fetch_of_the_shingle_sets(corpus, monkeypatch):
    """A SQL statement's shards are independent calls (one per UNION ALL branch), yet with
    ``verify := 'exact'`` they fetch and shingle the candidate rows once, at the first
    call, as the Python self-join does; the sets are closed when the last shard is done,
    and the statement run again fetches them again. The pairs equal brute force."""
    from lance_minhash_sql.selfjoin import shingles
    found = []
    rows_of = shingles.candidate_rows
    monkeypatch.setattr(shingles, "candidate_rows", lambda shards: found.append((len(shards), rows_of(shards)))
                        or found[-1][1])
    closed = []
    close = shingles.ShingleSets.close
    monkeypatch.setattr(shingles.ShingleSets, "close", lambda self: closed.append(self) or close(self))
    con = lms.connect()
    sql = "SELECT * FROM minhash_pairs(?, 'text', ?, verify := 'exact', memory_limit := '4MiB')"
    for run in (1, 2):
        before = dict(shingles.STATS)
        got = {(a, b): (s, j) for a, b, s, j in con.sql(sql, params=[corpus, T]).fetchall()}
        delta = {k: shingles.STATS[k] - before[k] for k in before}
        shards, rows = found[-1]
        assert len(found) == run and shards >= 3  # one fetch for all the statement's shards
        assert delta["prefetched_rows"] == rows.size and delta["fetched_rows"] == 0
        assert len(closed) == run  # closed once the statement's last shard ran
        assert got.keys() == brute_force(corpus, T).keys()


def test_a_statement_stopped_early_lets_go_of_its_sets_when_evicted(corpus, monkeypatch):
    """A statement stopped before its last branch (a LIMIT) leaves its shared state with
    the shingle sets open; once SHARED_SHARD_STATES other lists of shards have taken its
    place, the evicted state closes them (not while a call of it runs)."""
    from lance_minhash_sql.core.budget import Budget
    from lance_minhash_sql.core.tuning import SHARED_SHARD_STATES
    from lance_minhash_sql.selfjoin import shingles, sizing
    from lance_minhash_sql.selfjoin.shards import pair_shards
    from lance_minhash_sql.selfjoin.shared import SharedShards

    closed = []
    close = shingles.ShingleSets.close
    monkeypatch.setattr(shingles.ShingleSets, "close", lambda self: closed.append(self) or close(self))
    monkeypatch.setattr(sizing, "MIN_SHARD_ROWS", 1024)
    limit = 4 << 20
    shards = pair_shards(corpus, "text", T, shard_rows=sizing.shard_rows(Budget.of(limit)))
    assert len(shards) >= 3
    state = SharedShards.of(shards, "exact", Budget.of(limit))
    calls = [state.pairs(i) for i in range(len(shards))]
    first = next((b for b in calls[0]), None)  # one shard's first batch, then the statement stops
    assert first is not None and state.verifier is not None and not closed
    calls[1].close()  # a call that never started: nothing changes
    assert not closed and state.running == 1
    others = [SharedShards.of(shards, "exact", Budget.of(limit + i)) for i in range(1, SHARED_SHARD_STATES + 1)]
    assert state.detached and not closed  # evicted while a call of it runs: its sets stay
    calls[0].close()  # the statement stops
    assert len(closed) == 1 and state.verifier is None  # the evicted state lets go
    assert all(o.verifier is None for o in others)  # never called: nothing to close

    again = SharedShards.of(shards, "exact", Budget.of(limit))  # a statement stopped early, not evicted
    call = again.pairs(0)
    assert next(call, None) is not None
    call.close()
    assert len(closed) == 1 and again.verifier is not None  # kept for the statement's other shards


@pytest.fixture(scope="module")
def two_sides(tmp_path_factory) -> tuple[str, str]:
    """The edited pairs split: originals on the left (not indexed), edits on the right."""
    table = edited_table(seed=11)
    base = tmp_path_factory.mktemp("sides")
    left, right = str(base / "left.lance"), str(base / "right.lance")
    lance.write_dataset(table.take(np.arange(0, table.num_rows, 2)), left)
    lance.write_dataset(table.take(np.arange(1, table.num_rows, 2)), right)
    build_index(right, "text")
    return left, right


def test_join_verify_exact_equals_brute_force(two_sides):
    from lance_minhash_sql.selfjoin.join import join

    left, right = two_sides
    lr, ls, lk, _, lt = signed(left)
    rr, rs, rk, _, rt = signed(right)
    floor = candidate_floor(T, PARAMS.num_hashes)
    lt, rt = lt.to_pylist(), rt.to_pylist()
    want = {}
    for i in range(lr.size):
        for j in np.flatnonzero((rk == lk[i]).any(axis=1)):
            est = float(np.float32((ls[i] == rs[j]).sum()) / np.float32(PARAMS.num_hashes))
            jac = exact_jaccard(lt[i], rt[j], PARAMS)
            if est >= floor and jac >= T:
                want[(int(lr[i]), int(rr[j]))] = (est, jac)
    got = as_pairs(pa.Table.from_batches(list(join(left, right, "text", T, verify="exact"))))
    assert got.keys() == want.keys() and len(want) > 20
    assert any(est < T for est, _ in got.values()), "pairs whose estimate is under the threshold are found"
    assert all(got[p][0] == want[p][0] and got[p][1] == pytest.approx(want[p][1], abs=1e-12) for p in want)
    con = lms.connect()
    rows = con.execute("SELECT * FROM minhash_join(?, ?, 'text', 0.8, verify := 'exact')", [left, right]).fetchall()
    assert {(a, b): (s, j) for a, b, s, j in rows} == got


def test_threshold_search_verify_exact_equals_brute_force(edited):
    """minhash_search_ids with a threshold and verify='exact': every row sharing a band key
    with the query whose estimate reaches the floor and exact Jaccard the threshold."""
    from lance_minhash_sql.query.topk import search_ids

    rowids, sigs, keys, _, texts = signed(edited)
    floor = candidate_floor(T, PARAMS.num_hashes)
    queries = texts.to_pylist()[:40]
    want = set()
    for qi, qt in enumerate(queries):
        qs, qk = sigs[qi], keys[qi]
        for j in np.flatnonzero((keys == qk).any(axis=1)):
            est = float(np.float32((qs == sigs[j]).sum()) / np.float32(PARAMS.num_hashes))
            if est >= floor and exact_jaccard(qt, texts[j].as_py(), PARAMS) >= T:
                want.add((qi, int(rowids[j])))
    got = search_ids(edited, "text", queries, None, threshold=T, verify="exact").to_pydict()
    assert set(zip(got["query_index"], got["_rowid"])) == want
    assert all(j >= T for j in got["_jaccard"])
    plain = search_ids(edited, "text", queries, None, threshold=T).to_pydict()
    assert set(zip(plain["query_index"], plain["_rowid"])) != want  # the estimate misses or adds some
    con = lms.connect()
    con.execute("CREATE TABLE q AS SELECT * FROM (SELECT unnest(?) AS text, generate_subscripts(?, 1) - 1 AS i)",
                [queries, queries])
    rows = con.execute("SELECT q.i, s._rowid FROM q, LATERAL minhash_search_ids(?, 'text', q.text, NULL, 0.8, "
                       "verify := 'exact') s", [edited]).fetchall()
    assert set(rows) == want
    top = search_ids(edited, "text", queries, 5, verify="exact").to_pydict()  # no threshold: the top k, scored
    plain = search_ids(edited, "text", queries, 5).to_pydict()
    assert (top["query_index"], top["_rowid"]) == (plain["query_index"], plain["_rowid"])
    assert top["_jaccard"] == [pytest.approx(exact_jaccard(queries[q], texts[int(np.flatnonzero(rowids == r)[0])].as_py(),
                                                           PARAMS), abs=1e-12)
                               for q, r in zip(top["query_index"], top["_rowid"])]


@pytest.mark.parametrize("consume", ["all", "one", "none", "clusters"])
def test_exact_verification_leaves_no_file_open(corpus, consume):
    """The shingle sets' temporary files are closed when the self-join ends, however its
    consumer stops: read to the end, dropped after one batch, never started; and after
    exact clusters."""
    import gc
    import warnings

    import lance_minhash_sql as lms

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        if consume == "clusters":
            assert lms.clusters(corpus, "text", T, verify="exact").num_rows > 0
        else:
            batches = lms.pairs(corpus, "text", T, verify="exact")
            if consume == "all":
                assert sum(b.num_rows for b in batches) > 0
            elif consume == "one":
                next(batches)
            del batches
        gc.collect()  # an unclosed file warns here (a warning raised as an error would be ignored there)
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
