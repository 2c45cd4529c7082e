"""The cross-dataset join's ``verify='exact'`` (selfjoin/join_sets.py) against brute force
on two datasets with near-duplicates planted across them, and what it fetches.

Oracle: every live (left, right) row pair sharing a band key (the signer is checked
bit-identical to Lance in test_signatures.py), its estimate, kept when the estimate
reaches a floor the test computes itself (tests/naive.py: candidate_floor) and the exact
Jaccard of the rows' shingles (tests/naive.py: shingle_set, from lance.tokenize) reaches
the threshold."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest
from naive import candidate_floor, shingle_set

import lance_minhash_sql as lms
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.faces.corpus import vocabulary
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.selfjoin.join import join
from lance_minhash_sql.selfjoin.join_shards import join_shards, shard_join

PARAMS = MinHashParams()
T = 0.8


def planted_tables(seed: int = 5) -> tuple[pa.Table, pa.Table, pa.Table]:
    """``(left, right, appended right)``: texts of 80-140 words; each left text an edit of
    a right text (0 to 7 words replaced: exact Jaccard from 1 down past the candidate
    floor), some right texts twice (a left row with two equal partners), unrelated texts
    on both sides, and left rows without tokens."""
    rng = np.random.default_rng(seed)
    vocab = np.array(vocabulary().to_pylist())
    right, left = [], []
    for g in range(120):
        words = rng.choice(vocab, int(rng.integers(80, 140)))
        right.append(" ".join(words))
        if g % 9 == 0:
            right.append(" ".join(words))  # the same text twice on the right
        if g % 10 != 9:  # most right texts have a near-duplicate on the left
            edited = words.copy()
            for p in rng.choice(words.size, int(rng.integers(0, 8)), replace=False):
                edited[p] = rng.choice(vocab)
            left.append(" ".join(edited))
    left += [" ".join(rng.choice(vocab, 60)) for _ in range(30)] + ["", None, "   "]
    right += [" ".join(rng.choice(vocab, 60)) for _ in range(30)]
    order = rng.permutation(len(left))
    left = [left[i] for i in order]
    appended = right[-40:]  # the right's last texts in a fragment its index does not cover
    right = right[:-40]

    def table(texts, first):
        return pa.table({"id": pa.array(np.arange(first, first + len(texts))), "text": pa.array(texts, pa.string())})

    return table(left, 0), table(right, 0), table(appended, len(right))


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[str, str, str]:
    """``(left, indexed left, right)``: the left without an index, a copy of it indexed
    with the right's parameters (its signatures reused), and the right indexed, then
    appended to; rows deleted on every side."""
    base = tmp_path_factory.mktemp("planted")
    lt, rt, appended = planted_tables()
    left, indexed, right = str(base / "left.lance"), str(base / "indexed.lance"), str(base / "right.lance")
    lance.write_dataset(lt, left, max_rows_per_file=40)
    lance.write_dataset(lt, indexed, max_rows_per_file=40)
    build_index(indexed, "text")
    lance.write_dataset(rt, right, max_rows_per_file=50)
    build_index(right, "text")
    lance.write_dataset(appended, right, mode="append")
    for uri in (left, indexed):
        lance.dataset(uri).delete("id % 17 = 4")
    lance.dataset(right).delete("id % 13 = 6")
    return left, indexed, right


def live_signed(uri: str):
    """``(rowids, signatures, band keys, texts)`` of the live rows that have tokens."""
    t = lance.dataset(uri).to_table(columns=["text"], with_row_id=True)
    texts = t.column("text").combine_chunks()
    sigs, has = signer_for(PARAMS).sign(texts)
    return (t.column("_rowid").to_numpy()[has], sigs[has], signer_for(PARAMS).band_keys(sigs[has]),
            [x for x, h in zip(texts.to_pylist(), has) if h])


def brute_force(left: str, right: str, threshold: float = T):
    """``({(left_rowid, right_rowid): (estimate, jaccard)}, left rows, right rows, rejected)``
    of the exact join (module doc): with the rows of every candidate pair of each side,
    and how many candidates over the floor the exact Jaccard rejects."""
    lr, ls, lk, lt = live_signed(left)
    rr, rs, rk, rt = live_signed(right)
    floor = candidate_floor(threshold, PARAMS.num_hashes)
    want, lrows, rrows, rejected = {}, set(), set(), 0
    for i in range(lr.size):
        for j in np.flatnonzero((rk == lk[i]).any(axis=1)):
            lrows.add(int(lr[i]))
            rrows.add(int(rr[j]))
            est = float(np.float32((ls[i] == rs[j]).sum()) / np.float32(PARAMS.num_hashes))
            a, b = shingle_set(lt[i], PARAMS), shingle_set(rt[j], PARAMS)
            jac = len(a & b) / len(a | b)
            if est >= floor and jac >= threshold:
                want[(int(lr[i]), int(rr[j]))] = (est, jac)
            rejected += est >= floor and jac < threshold
    return want, lrows, rrows, rejected


def as_pairs(batches) -> dict:
    out, n = {}, 0
    for b in batches:
        d = b.to_pydict()
        out.update({(x, y): (s, j) for x, y, s, j in zip(d["left_rowid"], d["right_rowid"], d["similarity"],
                                                         d["jaccard"])})
        n += b.num_rows
    assert n == len(out), "a pair was reported twice"
    return out


def assert_equal(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for p, (est, jac) in got.items():
        assert est == want[p][0] and jac == pytest.approx(want[p][1], abs=1e-12)


@pytest.fixture(scope="module")
def oracle(planted):
    left, _, right = planted
    want, _, _, rejected = brute_force(left, right)
    jacs = [j for _, j in want.values()]
    ests = [e for e, _ in want.values()]
    assert len(want) > 50 and min(jacs) < 0.85 and any(e < T for e in ests)  # near the threshold, under its estimate
    assert rejected > 5  # candidates over the floor whose exact Jaccard is under the threshold
    return want


@pytest.mark.parametrize("which", ["signed left", "indexed left"])
def test_join_exact_equals_brute_force(planted, oracle, which, self_join_budget):
    """Python, SQL, a shard at a time (each with its own sets, in chunks of a few pairs)
    and a shard in parts on threads: the oracle's pairs at every budget (the small one
    cuts the join into many shards). The indexed copy of the left has the left's row
    addresses (same writes, same deletions)."""
    left, indexed, right = planted
    lhs = left if which == "signed left" else indexed
    if self_join_budget == "tight":
        assert len(join_shards(lhs, right, "text", T)) >= 4
    got = as_pairs(join(lhs, right, "text", T, verify="exact"))
    assert_equal(got, oracle)
    con = lms.connect()
    rows = con.execute("SELECT * FROM minhash_join(?, ?, 'text', 0.8, verify := 'exact')", [lhs, right]).fetchall()
    assert {(a, b): (s, j) for a, b, s, j in rows} == got
    for threads in (1, 3):
        alone = {}
        for shard in join_shards(lhs, right, "text", T, num_shards=5):
            alone.update(as_pairs(shard_join(shard, verify="exact", chunk_pairs=7, threads=threads)))
        assert alone == got


def test_join_exact_at_other_thresholds(planted):
    left, _, right = planted
    for t in (0.7, 0.9):
        want, _, _, _ = brute_force(left, right, t)
        assert len(want) > 20
        assert_equal(as_pairs(join(left, right, "text", t, verify="exact")), want)


def recorded_takes(monkeypatch) -> list:
    """Every take of exact verification's texts, as ``(uri, row ids)``."""
    from lance_minhash_sql.selfjoin import shingles

    takes = []
    real = shingles.take_rows

    def take(ds, rows, columns, what, uri=None):
        takes.append((uri, np.asarray(rows, dtype=np.uint64).copy()))
        return real(ds, rows, columns, what, uri)

    monkeypatch.setattr(shingles, "take_rows", take)
    return takes


def fetched(takes: list, uri: str) -> np.ndarray:
    """The rows of ``uri`` taken, each take's rows ascending and the takes in row order:
    one sequential pass."""
    parts = sorted((rows for u, rows in takes if u == uri), key=lambda r: int(r[0]))
    rows = np.concatenate(parts) if parts else np.empty(0, np.uint64)
    assert (np.diff(rows.astype(np.int64)) > 0).all(), "a row taken twice, or out of row order"
    return rows


def test_each_candidate_row_is_fetched_once_per_side(planted, oracle, monkeypatch):
    """A join over many shards fetches each side's candidate rows (every live row sharing
    a band key with the other side's) once, in row order, before any pair is verified:
    none again for another band, shard or chunk of pairs, none asked for later. The same
    from SQL, whose shards are independent calls: one fetch at the statement's first
    call, the sets closed after its last, fetched again by the next statement. Python's
    join closes its sets after its last batch."""
    from lance_minhash_sql.core import budget as core_budget
    from lance_minhash_sql.selfjoin import join_sets, shingles, sizing

    left, _, right = planted
    monkeypatch.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", 256 << 10)  # (SQL's default too)
    monkeypatch.setattr(sizing, "MIN_SHARD_ROWS", 512)
    assert len(join_shards(left, right, "text", T)) >= 4
    _, lrows, rrows, _ = brute_force(left, right)
    live_left = set(live_signed(left)[0].tolist())
    live_right = set(live_signed(right)[0].tolist())
    takes = recorded_takes(monkeypatch)
    closed = []
    close = join_sets.JoinSets.close
    monkeypatch.setattr(join_sets.JoinSets, "close", lambda self: closed.append(self) or close(self))
    before = dict(shingles.STATS)
    got = as_pairs(join(left, right, "text", T, verify="exact"))
    assert_equal(got, oracle)
    assert len(closed) == 1  # the join's sets, closed after its last batch
    lf, rf = set(fetched(takes, left).tolist()), set(fetched(takes, right).tolist())
    assert lrows <= lf <= live_left and rrows <= rf <= live_right  # (rows keyed with deleted rows too)
    assert {a for a, _ in got} <= lf and {b for _, b in got} <= rf
    assert shingles.STATS["fetched_rows"] == before["fetched_rows"]  # nothing fetched once pairs were verified
    assert shingles.STATS["prefetched_rows"] - before["prefetched_rows"] == len(lf) + len(rf)

    con = lms.connect()
    sql = "SELECT * FROM minhash_join(?, ?, 'text', 0.8, verify := 'exact')"
    for run in (1, 2):
        takes.clear()
        rows = con.execute(sql, [left, right]).fetchall()
        assert {(a, b): (s, j) for a, b, s, j in rows} == got
        assert set(fetched(takes, left).tolist()) == lf and set(fetched(takes, right).tolist()) == rf
        assert len(closed) == 1 + run  # the statement's sets, closed after its last shard
    takes.clear()  # a count(*) above the branches lets DuckDB run several at once: still one fetch
    assert con.execute(sql.replace("SELECT *", "SELECT count(*)"), [left, right]).fetchone()[0] == len(got)
    assert set(fetched(takes, left).tolist()) == lf and set(fetched(takes, right).tolist()) == rf
    assert len(closed) == 4


def test_a_shard_alone_fetches_its_rows_once(planted, monkeypatch):
    """A shard joined alone (as a distributed task runs its shards) fetches its own
    candidate rows once, however many parts and chunks it is verified in."""
    left, _, right = planted
    takes = recorded_takes(monkeypatch)
    shard = join_shards(left, right, "text", T, num_shards=1)[0]
    got = as_pairs(shard_join(shard, verify="exact", chunk_pairs=5, threads=3))
    _, lrows, rrows, _ = brute_force(left, right)
    assert lrows <= set(fetched(takes, left).tolist()) and rrows <= set(fetched(takes, right).tolist())
    assert got == as_pairs(join(left, right, "text", T, verify="exact"))
