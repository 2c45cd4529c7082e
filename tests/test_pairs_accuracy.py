"""Accuracy of the self-join against an exact similarity join and the generator's truth.

On a 20,000-row synthetic corpus (default index: k=128, b=16, threshold 0.8):

* every pair of shingle sets with Jaccard >= 0.5 is found exactly (:mod:`exact_join`,
  itself checked against naive pairwise Jaccard); below 0.5 a pair is reported with
  probability < 1e-9, so this is every pair ``pairs()`` could report;
* ``pairs()`` reports the pairs of true Jaccard >= 0.9 (all but the misses the model allows),
  few pairs below 0.7 (at most the model's count), and per
  bin of true Jaccard the fraction the model predicts (candidate AND verified, see
  :func:`exact_join.reported_probability`), within 4 standard errors;
* ``verify="exact"`` reports exactly the candidates whose estimate reaches the floor (4
  standard deviations under the threshold) with true Jaccard >= 0.8, with it;
* ``clusters()`` links only verified pairs, refines the all-pairs components and finds
  the generator's duplicate groups (``source_id``) at least as well as exact clusterings
  that bound it (floors from the exact join, not from this code's output).

Run with ``-s`` to see the figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import lance
import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse
from exact_join import exact_join, reported_probability
from naive import REPS, candidate_floor, estimates, exact_jaccard, lance_tokens, representative_links, shingles
from scipy.sparse.csgraph import connected_components

from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.faces.corpus import ground_truth, write_corpus
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.kernels.bucket_pairs import min_matches
from lance_minhash_sql.selfjoin.clusters import clusters
from lance_minhash_sql.selfjoin.pairs import pairs
from lance_minhash_sql.selfjoin.shards import pair_shards

N = 20_000
THRESHOLD = 0.8
LOW = 0.5  # the exact join's threshold: a pair below is reported with probability < 1e-9
PARAMS = MinHashParams()
BINS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)  # last bin: exactly 1.0
SIGMAS = 4


@dataclass
class Corpus:
    uri: str
    rowids: np.ndarray  # u64, ascending (scan order)
    ids: np.ndarray  # generator ids
    texts: pa.Array
    offsets: np.ndarray  # CSR shingle sets (the index's tokenizer and hashes)
    hashes: np.ndarray
    true_left: np.ndarray  # exact join at LOW: row positions i < j, Jaccard
    true_right: np.ndarray
    true_jaccard: np.ndarray
    rep_left: np.ndarray  # pairs() at THRESHOLD, as row positions i < j
    rep_right: np.ndarray
    rep_similarity: np.ndarray

    def positions(self, rowids) -> np.ndarray:
        pos = np.searchsorted(self.rowids, rowids)
        assert (self.rowids[pos] == rowids).all()
        return pos

    def codes(self, left, right) -> np.ndarray:
        return np.asarray(left, np.int64) * N + np.asarray(right, np.int64)

    def jaccard(self, left, right) -> np.ndarray:
        """Exact Jaccard of the rows' shingle-hash sets, by numpy set operations."""
        sets = [self.hashes[self.offsets[r]:self.offsets[r + 1]] for r in range(N)]
        return np.array([np.intersect1d(sets[a], sets[b]).size / np.union1d(sets[a], sets[b]).size
                         for a, b in zip(np.asarray(left).tolist(), np.asarray(right).tolist())])


def as_positions(c: Corpus, batches) -> tuple[np.ndarray, ...]:
    t = pa.Table.from_batches(batches)
    left = c.positions(t.column("left_rowid").to_numpy())
    right = c.positions(t.column("right_rowid").to_numpy())
    assert (left < right).all()
    rest = tuple(t.column(name).to_numpy() for name in t.column_names[2:])
    return (left, right) + rest


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    uri = str(tmp_path_factory.mktemp("accuracy") / "corpus.lance")
    write_corpus(uri, N, rows_per_fragment=8000)
    build_index(uri, "text")
    t = lance.dataset(uri).to_table(columns=["id", "text"], with_row_id=True)
    rowids = t.column("_rowid").to_numpy()
    assert (np.diff(rowids.astype(np.int64)) > 0).all()
    texts = t.column("text").combine_chunks()
    offsets, hashes = signer_for(PARAMS).shingle_sets(texts)
    tl, tr, tj = exact_join(offsets, hashes, LOW)
    c = Corpus(uri, rowids, t.column("id").to_numpy(), texts, offsets, hashes, tl, tr, tj, *(None,) * 3)
    c.rep_left, c.rep_right, c.rep_similarity = as_positions(c, list(pairs(uri, "text", THRESHOLD)))
    return c


# --------------------------------------------------------------------------- the oracles


def test_exact_join_equals_naive_pairwise_jaccard(corpus):
    """On the rows of the 6 largest duplicate groups plus 150 random rows: every pair with
    Jaccard >= LOW, and each Jaccard, equal to naive set operations on lance.tokenize's
    shingles (strings, not hashes)."""
    truth = ground_truth(0, N).column("source_id").to_numpy()[corpus.ids]
    src, count = np.unique(truth, return_counts=True)
    big = src[np.argsort(count)[-6:]]
    rng = np.random.default_rng(0)
    rows = np.union1d(np.flatnonzero(np.isin(truth, big)), rng.choice(N, 150, replace=False))
    texts = corpus.texts.take(pa.array(rows)).to_pylist()
    sets = [set(shingles(lance_tokens(t, PARAMS.tokenizer), PARAMS.shingle_size)) for t in texts]
    want = {}
    for a in range(rows.size):
        for b in range(a + 1, rows.size):
            if sets[a] and sets[b]:
                j = len(sets[a] & sets[b]) / len(sets[a] | sets[b])
                if j >= LOW:
                    want[(a, b)] = j
    sub = [corpus.hashes[corpus.offsets[r]:corpus.offsets[r + 1]] for r in rows]
    offsets = np.concatenate(([0], np.cumsum([s.size for s in sub])))
    left, right, jac = exact_join(offsets, np.concatenate(sub), LOW)
    got = dict(zip(zip(left.tolist(), right.tolist()), jac.tolist()))
    assert len(want) > 1000
    assert got.keys() == want.keys()
    assert all(got[p] == pytest.approx(want[p], abs=1e-12) for p in want)
    # and the join on the whole corpus agrees with those rows' pairs
    inside = np.isin(corpus.true_left, rows) & np.isin(corpus.true_right, rows)
    pos = {int(r): i for i, r in enumerate(rows)}
    assert {(pos[a], pos[b]) for a, b in zip(corpus.true_left[inside].tolist(),
                                              corpus.true_right[inside].tolist())} == want.keys()


def test_reported_probability_matches_enumeration_and_the_s_curve():
    # min_eq 0: only the S-curve (a band complete) is left: 1 - (1 - p^r)^b
    for j in (0.3, 0.7, 0.8, 0.9):
        got = reported_probability(j, 128, 16, 0)[0]
        p = j + (1 - j) * 2.0**-16  # two different values still collide in 16 bits
        assert got == pytest.approx(1 - (1 - p**8) ** 16, rel=1e-12)
    # k = 6, b = 3: every pattern of equal positions enumerated
    for p in (0.25, 0.6, 0.95):
        for min_eq in range(7):
            want = 0.0
            for mask in range(64):
                bits = [(mask >> i) & 1 for i in range(6)]
                band = any(all(bits[2 * j:2 * j + 2]) for j in range(3))
                if band and sum(bits) >= min_eq:
                    want += p ** sum(bits) * (1 - p) ** (6 - sum(bits))
            j = (p - 2.0**-16) / (1 - 2.0**-16)
            assert reported_probability(j, 6, 3, min_eq)[0] == pytest.approx(want, rel=1e-9, abs=1e-15)
    assert [min_matches(t, 128) for t in (0.5, 0.8, 0.9, 1.0)] == [_min_equal(t, 128) for t in (0.5, 0.8, 0.9, 1.0)]
    curve = reported_probability(np.linspace(0, 1, 101), 128, 16, _min_equal(THRESHOLD, 128))
    assert (np.diff(curve) >= -1e-15).all() and curve[-1] == pytest.approx(1.0)
    assert curve[50] < 1e-9  # J = 0.5: why the exact join may stop there


# --------------------------------------------------------------------------- pairs


def test_pairs_at_jaccard_0_9_or_more_are_reported(corpus):
    """All but a count the model makes improbable: pair ``i`` is missed with probability
    ``q_i = 1 - P(J_i)`` (S-curve and verification, :func:`exact_join.reported_probability`);
    for independent misses, ``P(at least c missed) <= (sum q_i)^c / c!`` (a union bound over
    the sets of ``c`` pairs). The test allows fewer than the smallest ``c`` where that bound
    is below 1e-4, the false-failure probability. (Asking for every pair would fail with
    probability ``1 - prod P(J_i)``, printed: several percent here.)"""
    high = corpus.true_jaccard >= 0.9
    assert high.sum() > 1000
    prob = reported_probability(corpus.true_jaccard[high], PARAMS.num_hashes, PARAMS.num_bands,
                                _min_equal(THRESHOLD, PARAMS.num_hashes))
    expected_misses = (1 - prob).sum()
    c = next(c for c in range(1, 100) if expected_misses ** c / math.factorial(c) < 1e-4)
    found = np.isin(corpus.codes(corpus.true_left[high], corpus.true_right[high]),
                    corpus.codes(corpus.rep_left, corpus.rep_right))
    print(f"\nrecall at true J >= 0.9: {found.mean():.4f} of {high.sum():,} pairs; expected misses "
          f"{expected_misses:.3f}, P(any missed) {-np.expm1(np.log(prob).sum()):.2e}; allowed misses {c - 1}")
    assert (~found).sum() < c


def test_reported_pairs_are_near_duplicates(corpus):
    """Few reported pairs lie below ``THRESHOLD - 0.1``: their count is at most the model's
    expectation over the exact join's pairs there (``sum P(J_i)``) plus 4 standard errors
    (the larger of the binomial and the cluster-robust one, as in the per-bin test) plus 1;
    a false failure has probability about 3e-5 (one-sided, normal approximation)."""
    jac = corpus.jaccard(corpus.rep_left, corpus.rep_right)
    low = THRESHOLD - 0.1
    near = (jac >= low).mean()
    above = (jac >= THRESHOLD).mean()
    m = corpus.true_jaccard < low
    prob = reported_probability(corpus.true_jaccard[m], PARAMS.num_hashes, PARAMS.num_bands,
                                _min_equal(THRESHOLD, PARAMS.num_hashes))
    got = np.isin(corpus.codes(corpus.true_left[m], corpus.true_right[m]),
                  corpus.codes(corpus.rep_left, corpus.rep_right)).astype(np.float64)
    group = _components(N, corpus.true_left, corpus.true_right)[corpus.true_left[m]]
    _, inv = np.unique(group, return_inverse=True)
    se = max(np.sqrt((prob * (1 - prob)).sum()), np.sqrt((np.bincount(inv, weights=got - prob) ** 2).sum()))
    ceiling = prob.sum() + SIGMAS * se + 1
    print(f"\n{jac.size:,} reported pairs: {near:.4f} with true J >= {low:.1f}, {above:.4f} >= "
          f"{THRESHOLD}, lowest true J {jac.min():.3f}; below {low:.1f}: {int((jac < low).sum())} reported, "
          f"model {prob.sum():.1f}, ceiling {ceiling:.1f} of {m.sum():,} pairs")
    assert jac.size > 3000
    assert (jac < low).sum() == got.sum() <= ceiling
    assert jac.min() >= LOW  # so the exact join holds every reported pair
    reported = np.isin(corpus.codes(corpus.rep_left, corpus.rep_right),
                       corpus.codes(corpus.true_left, corpus.true_right))
    assert reported.all()


def _components(n: int, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """A component label per row of the graph of the pairs (scipy's connected components)."""
    graph = scipy.sparse.coo_matrix((np.ones(len(left), np.int8), (np.asarray(left), np.asarray(right))),
                                    shape=(n, n))
    return connected_components(graph, directed=False)[1].astype(np.int64)


def _min_equal(threshold: float, k: int) -> int:
    """The verification rule written out: the fewest equal values ``e`` of ``k`` whose
    estimate ``e / k`` reaches the threshold."""
    return next(e for e in range(k + 1) if e / k >= threshold)


def _clustered(labels: np.ndarray) -> np.ndarray:
    """Labels of components of one row made unique negatives (a row alone is in no cluster)."""
    return np.where(np.bincount(labels, minlength=labels.size)[labels] >= 2, labels, -1 - np.arange(labels.size))


def test_recall_per_bin_follows_the_s_curve_and_verification(corpus):
    """Per bin of true Jaccard, the reported count ``O`` against the model's expectation
    ``E = sum P(J_i)``. Pairs of one duplicate group share rows and so are correlated: the
    standard error is the larger of the independent one, ``sqrt(sum P (1 - P))``, and the
    cluster-robust one, ``sqrt(sum over groups (sum (x - P))^2)`` (groups: components of
    the true pairs). Requires ``|O - E| <= 4 SE + 1``."""
    tj = corpus.true_jaccard
    prob = reported_probability(tj, PARAMS.num_hashes, PARAMS.num_bands, _min_equal(THRESHOLD, PARAMS.num_hashes))
    got = np.isin(corpus.codes(corpus.true_left, corpus.true_right),
                  corpus.codes(corpus.rep_left, corpus.rep_right)).astype(np.float64)
    group = _components(N, corpus.true_left, corpus.true_right)[corpus.true_left]
    print(f"\n{'true J':>11} {'pairs':>7} {'reported':>8} {'recall':>7} {'model':>7} {'SE indep':>8} "
          f"{'SE robust':>9} {'z':>6}")
    failures = []
    for lo, hi in zip(BINS, BINS[1:] + (1.0,)):
        m = (tj >= lo) & (tj < hi) if lo < hi else tj >= lo
        n = int(m.sum())
        assert n >= 100, f"bin [{lo}, {hi}) holds {n} pairs"
        obs, exp = got[m].sum(), prob[m].sum()
        se_ind = np.sqrt((prob[m] * (1 - prob[m])).sum())
        _, inv = np.unique(group[m], return_inverse=True)
        se_rob = np.sqrt((np.bincount(inv, weights=got[m] - prob[m]) ** 2).sum())
        se = max(se_ind, se_rob)
        z = (obs - exp) / se if se > 0 else 0.0
        label = f"[{lo:.2f},{hi:.2f})" if lo < hi else "1.00"
        print(f"{label:>11} {n:7,} {obs:8,.0f} {obs / n:7.4f} {exp / n:7.4f} {se_ind:8.2f} {se_rob:9.2f} {z:6.2f}")
        if abs(obs - exp) > SIGMAS * se + 1:
            failures.append((label, obs, exp, se))
    assert not failures


def test_recall_at_the_threshold_meets_the_binomial_floor(corpus):
    """Of the pairs with true Jaccard >= the threshold, ``pairs()`` reports at least the
    model's expectation less 4 standard errors: each pair ``i`` is reported with
    probability ``P_i`` (the S-curve ``1 - (1 - J^r)^b`` with verification, from
    :func:`exact_join.reported_probability`), so the count is a sum of Bernoulli trials,
    mean ``sum P_i``, variance ``sum P_i (1 - P_i)`` (or the cluster-robust one if larger,
    as pairs of one duplicate group are correlated)."""
    k, b = PARAMS.num_hashes, PARAMS.num_bands
    m = corpus.true_jaccard >= THRESHOLD
    tj = corpus.true_jaccard[m]
    prob = reported_probability(tj, k, b, _min_equal(THRESHOLD, k))
    s_curve = 1 - (1 - tj ** (k // b)) ** b
    assert (prob <= s_curve + 1e-12).all()  # verification only removes candidates
    got = np.isin(corpus.codes(corpus.true_left[m], corpus.true_right[m]),
                  corpus.codes(corpus.rep_left, corpus.rep_right)).astype(np.float64)
    group = _components(N, corpus.true_left, corpus.true_right)[corpus.true_left[m]]
    _, inv = np.unique(group, return_inverse=True)
    se = max(np.sqrt((prob * (1 - prob)).sum()), np.sqrt((np.bincount(inv, weights=got - prob) ** 2).sum()))
    floor = (prob.sum() - SIGMAS * se) / tj.size
    print(f"\nrecall at true J >= {THRESHOLD}: {got.mean():.4f} of {tj.size:,} pairs; model {prob.mean():.4f}, "
          f"floor {floor:.4f}")
    assert tj.size > 2000 and floor > 0.9
    assert got.mean() >= floor


def test_verify_exact_equals_the_exact_join(corpus):
    left, right, sim, jac = as_positions(corpus, list(pairs(corpus.uri, "text", THRESHOLD, verify="exact")))
    codes = corpus.codes(left, right)
    # the pairs: the exact join's pairs at the threshold that share a band key and whose
    # estimate reaches the floor
    signer = signer_for(PARAMS)
    sigs, has = signer.sign(corpus.texts)
    assert has.all()
    keys = signer.band_keys(sigs)
    high = corpus.true_jaccard >= THRESHOLD
    tl, tr = corpus.true_left[high], corpus.true_right[high]
    est = estimates(sigs, np.stack([tl, tr], axis=1), PARAMS.num_hashes)
    keep = (keys[tl] == keys[tr]).any(axis=1) & (est >= candidate_floor(THRESHOLD, PARAMS.num_hashes))
    order = np.argsort(codes)
    assert np.array_equal(codes[order], np.sort(corpus.codes(tl[keep], tr[keep])))
    assert np.array_equal(sim[order], est[keep][np.argsort(corpus.codes(tl[keep], tr[keep]))])
    assert (est[keep] < THRESHOLD).any(), "pairs whose estimate is under the threshold are found"
    # each jaccard: the exact join's value
    true_codes = corpus.codes(corpus.true_left, corpus.true_right)
    at = np.searchsorted(true_codes, codes)
    assert (true_codes[at] == codes).all()
    assert np.allclose(jac, corpus.true_jaccard[at], rtol=0, atol=1e-12)
    sample = np.random.default_rng(2).choice(codes.size, 10, replace=False)
    for i in sample:
        a, b = corpus.texts.take(pa.array([left[i], right[i]])).to_pylist()
        assert exact_jaccard(a, b, PARAMS) == pytest.approx(jac[i], abs=1e-12)


# --------------------------------------------------------------------------- clusters


def same_cluster_counts(a: np.ndarray, b: np.ndarray) -> tuple[int, int, int]:
    """Row pairs together in labelling ``a``, in ``b``, in both (labels: one int per row)."""
    def pairs_in(*labels):
        _, counts = np.unique(np.stack(labels, axis=1), axis=0, return_counts=True)
        return int((counts * (counts - 1) // 2).sum())
    return pairs_in(a), pairs_in(b), pairs_in(a, b)


def b_cubed(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """B-cubed precision and recall of labelling ``a`` against ``b`` (per row, averaged)."""
    def sizes(*labels):
        _, inv, counts = np.unique(np.stack(labels, axis=1), axis=0, return_inverse=True, return_counts=True)
        return counts[inv.reshape(-1)]
    both = sizes(a, b)
    return float((both / sizes(a)).mean()), float((both / sizes(b)).mean())


def cluster_labels(c: Corpus, table: pa.Table) -> np.ndarray:
    """A label per row: its cluster id, or ``-1 - row`` when it is in no cluster."""
    labels = -1 - np.arange(N, dtype=np.int64)
    labels[c.positions(table.column("_rowid").to_numpy())] = table.column("cluster_id").to_numpy().astype(np.int64)
    return labels


@pytest.fixture(scope="module")
def cluster_table(corpus):
    return clusters(corpus.uri, "text", THRESHOLD)


def test_pairs_and_clusters_equal_at_every_budget(corpus, cluster_table, self_join_budget):
    """The oracles above check ``pairs()`` and ``clusters()`` under the default budget; the
    same calls under a budget that reads this corpus in many groups and windows, and
    under one that holds it all, give the same answers."""
    def ordered(left, right, sim):
        o = np.lexsort((right, left))
        return left[o], right[o], sim[o]

    got = ordered(*as_positions(corpus, list(pairs(corpus.uri, "text", THRESHOLD))))
    want = ordered(corpus.rep_left, corpus.rep_right, corpus.rep_similarity)
    assert got[0].size > 1000 and all(np.array_equal(x, y) for x, y in zip(got, want))
    assert clusters(corpus.uri, "text", THRESHOLD).equals(cluster_table)


def test_every_link_is_a_verified_pair(corpus, monkeypatch):
    """Every link the clusters unite (global doc ids, read as row ids) is a verified pair."""
    from lance_minhash_sql.selfjoin import parent
    from lance_minhash_sql.selfjoin.pool import row_ids

    links = []
    union = parent.UnionFind.union

    def recorded(self, a, b):
        links.append((a.copy(), b.copy()))
        return union(self, a, b)

    monkeypatch.setattr(parent.UnionFind, "union", recorded)
    clusters(corpus.uri, "text", THRESHOLD)
    monkeypatch.undo()
    gids = np.concatenate([np.concatenate([x, y]) for x, y in links]).astype(np.int64)
    docs = np.unique(gids)
    rowid = row_ids(pair_shards(corpus.uri, "text", THRESHOLD)[0].plan, docs.astype(np.uint32), 1 << 20)
    a = corpus.positions(rowid[np.searchsorted(docs, np.concatenate([x for x, _ in links]))])
    b = corpus.positions(rowid[np.searchsorted(docs, np.concatenate([y for _, y in links]))])
    assert a.size > 1000 and (a != b).all()
    verified = np.isin(corpus.codes(np.minimum(a, b), np.maximum(a, b)),
                       corpus.codes(corpus.rep_left, corpus.rep_right))
    print(f"\n{a.size:,} links for {corpus.rep_left.size:,} verified pairs; all verified: {verified.all()}")
    assert verified.all()


def guaranteed_links(corpus) -> tuple[np.ndarray, np.ndarray, int]:
    """Row pairs that the rule of ``selfjoin/links.py`` must put in one cluster, found
    bucket by bucket from the signatures (not from the clustering code):

    * the first member of a bucket (lowest row id) is always a representative and every
      later member is verified against it: each member that passes it is linked to it;
    * a *clean* bucket, where "verified" is an equivalence relation on the members (the
      verified pairs form disjoint cliques) with at most ``naive.REPS`` classes, links every
      class together (each class's first member becomes a rep; the later ones pass it).
      Checked on buckets of up to 256 members (an ``m x m`` comparison each).

    Returns ``(a, b, clean buckets)``: positions of the linked rows."""
    signer = signer_for(PARAMS)
    sigs, has = signer.sign(corpus.texts)
    rows = np.flatnonzero(has)
    sigs = sigs[has]
    keys = signer.band_keys(sigs)
    min_eq = _min_equal(THRESHOLD, PARAMS.num_hashes)
    a, b, clean = [], [], 0
    for j in range(keys.shape[1]):
        order = np.lexsort((rows, keys[:, j]))
        for grp in np.split(order, np.flatnonzero(np.diff(keys[order, j])) + 1):
            if grp.size < 2:
                continue
            first = (sigs[grp] == sigs[grp[0]]).sum(axis=1) >= min_eq
            a.append(np.full(int(first.sum()), rows[grp[0]]))
            b.append(rows[grp[first]])
            if grp.size <= 256:
                s = sigs[grp]
                verified = (s[:, None, :] == s[None, :, :]).sum(axis=2) >= min_eq
                label = verified.argmax(axis=1)  # the first member verified with each (itself at the latest)
                if (np.array_equal(verified, label[:, None] == label[None, :])
                        and np.unique(label).size <= REPS):
                    clean += 1
                    a.append(rows[grp])
                    b.append(rows[grp[label]])
    return np.concatenate(a), np.concatenate(b), clean


def test_clusters_refine_the_all_pairs_components(corpus, cluster_table):
    """Exact on both sides, no measured floor: every cluster lies inside one component of
    the graph of ``pairs()`` (precision), and every pair that the rule guarantees to link
    (:func:`guaranteed_links`) is in one cluster (recall); the recall against the
    all-pairs components is printed. ``clusters()`` equals the rule applied naively
    (the test below), so what the rule loses beyond these guarantees is the rule's cost."""
    ours = cluster_labels(corpus, cluster_table)
    allpairs = _clustered(_components(N, corpus.rep_left, corpus.rep_right))
    in_ours, in_all, both = same_cluster_counts(ours, allpairs)
    bp, br = b_cubed(ours, allpairs)
    a, b, clean = guaranteed_links(corpus)
    floor = _clustered(_components(N, a, b))
    in_floor, _, floor_both = same_cluster_counts(floor, allpairs)
    print(f"\nclusters vs all-pairs components: pairwise precision {both / in_ours:.4f} recall "
          f"{both / in_all:.4f} ({in_ours:,} / {in_all:,} same-cluster pairs); B-cubed precision {bp:.4f} "
          f"recall {br:.4f}; guaranteed by the rule: {floor_both / in_all:.4f} of the pairs "
          f"({a.size:,} links, {clean:,} clean buckets)")
    assert both == in_ours and bp == 1.0  # every cluster lies inside one all-pairs component
    assert (ours[a] == ours[b]).all()  # every guaranteed link holds
    assert floor_both == in_floor  # (so are the guarantees: each is a verified pair)
    assert a.size > 1000 and clean > 1000  # the guarantees cover this corpus's duplicate groups


def test_clusters_are_the_components_of_the_naive_rule(corpus, cluster_table):
    """The representative rule of ``selfjoin/links.py`` applied bucket by bucket in plain
    numpy (``naive.representative_links``) gives the same clusters."""
    signer = signer_for(PARAMS)
    sigs, has = signer.sign(corpus.texts)
    rows = np.flatnonzero(has)
    links = representative_links(corpus.rowids[rows], sigs[has], signer.band_keys(sigs[has]),
                                 _min_equal(THRESHOLD, PARAMS.num_hashes), REPS)
    a = corpus.positions(np.array([x for x, _ in links], np.uint64))
    b = corpus.positions(np.array([y for _, y in links], np.uint64))
    want = _clustered(_components(N, a, b))
    got = cluster_labels(corpus, cluster_table)
    in_got, in_want, both = same_cluster_counts(got, want)
    assert in_got == in_want == both > 3000
    assert np.array_equal(got < 0, want < 0)


def test_clusters_against_the_generators_truth(corpus, cluster_table):
    """Rows derived from one original (``source_id``) belong together. Copies edited below
    the threshold cannot be found (recall), and unrelated near-identical short texts may
    be joined (precision). The floors come from exact clusterings of the same rows (the
    exact join's pairs, components by scipy), not from this code's output:

    * precision at least that of the components of every pair with Jaccard >= LOW, a
      coarsening of every link ``clusters()`` can make (each reported pair is >= LOW);
    * recall at least that of the components of the pairs with Jaccard >= 0.9, all of
      which ``pairs()`` reports (S-curve and verification give each P > 0.999; the test above
      bounds the misses)."""
    ours = cluster_labels(corpus, cluster_table)
    truth = ground_truth(0, N).column("source_id").to_numpy()[corpus.ids]

    def figures(labels):
        in_labels, in_truth, both = same_cluster_counts(labels, truth)
        return (both / in_labels, both / in_truth) + b_cubed(labels, truth)

    def exact_clusters(lo):
        m = corpus.true_jaccard >= lo
        return _clustered(_components(N, corpus.true_left[m], corpus.true_right[m]))

    got, coarse, strict = figures(ours), figures(exact_clusters(LOW)), figures(exact_clusters(0.9))
    assert reported_probability(0.9, PARAMS.num_hashes, PARAMS.num_bands,
                                _min_equal(THRESHOLD, PARAMS.num_hashes))[0] > 0.999
    for name, f in (("clusters()", got), (f"exact components J >= {LOW}", coarse), ("exact components J >= 0.9",
                                                                                     strict)):
        print(f"\n{name:>28}: pairwise precision {f[0]:.4f} recall {f[1]:.4f}; B-cubed precision {f[2]:.4f} "
              f"recall {f[3]:.4f}", end="")
    print(f"\n{int((ours >= 0).sum()):,} rows in {np.unique(ours[ours >= 0]).size:,} clusters")
    assert got[0] >= coarse[0] and got[2] >= coarse[2]  # precision: pairwise, B-cubed
    assert got[1] >= strict[1] and got[3] >= strict[3]  # recall: pairwise, B-cubed
