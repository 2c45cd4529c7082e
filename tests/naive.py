"""Slow, obvious reference implementations used as oracles (docs/signatures.md: shingles, hashing).

Tokens come from ``lance.tokenize`` itself; hashing from the ``xxhash`` package.
"""

from __future__ import annotations

import math

import lance
import numpy as np
import xxhash

MASK = (1 << 64) - 1


def splitmix_coefficients(k):
    state = 42
    def nxt():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    ab = [(nxt() | 1, nxt()) for _ in range(k)]
    c = [nxt() | 1 for _ in range(k)]
    return [p[0] for p in ab], [p[1] for p in ab], c


def lance_tokens(text, tokenizer_params):
    return [t.text for t in lance.tokenize(text, **tokenizer_params.lance_tokenize_kwargs())]


def shingles(tokens, shingle_size):
    n = len(tokens)
    if n == 0:
        return []
    w = min(shingle_size, n)
    return ["\x1f".join(tokens[s:s + w]).encode("utf-8") for s in range(n - w + 1)]


def signature_of_tokens(tokens, num_hashes, shingle_size):
    sh = shingles(tokens, shingle_size)
    if not sh:
        return None
    a, b, c = splitmix_coefficients(num_hashes)
    xs = [xxhash.xxh64_intdigest(s, seed=42) for s in sh]
    sig = []
    for i in range(num_hashes):
        m = min((a[i] * x + b[i]) & MASK for x in xs)
        sig.append(((c[i] * m) & MASK) >> 48)
    return sig


def signature(text, params):
    if text is None:
        return None
    return signature_of_tokens(lance_tokens(text, params.tokenizer), params.num_hashes, params.shingle_size)


def band_keys(sig, num_bands):
    r = len(sig) // num_bands
    keys = []
    for j in range(num_bands):
        data = b"".join(v.to_bytes(2, "little") for v in sig[j * r:(j + 1) * r])
        keys.append((j << 56) | (xxhash.xxh64_intdigest(data, seed=42) & 0x00FFFFFFFFFFFFFF))
    return keys


def exact_jaccard(text_a, text_b, params):
    sa = set(shingles(lance_tokens(text_a, params.tokenizer), params.shingle_size))
    sb = set(shingles(lance_tokens(text_b, params.tokenizer), params.shingle_size))
    if not sa or not sb:
        return None
    return len(sa & sb) / len(sa | sb)


def representative_link_positions(rowids, sigs, keys, min_eq, max_reps):
    """Links of ``selfjoin/links.py``'s rule, bucket by bucket in plain numpy, as two arrays
    of row positions ``(member, rep)``, each link once: members by ascending row id; each
    later member verified against every rep before it (>= ``min_eq`` equal values) and
    linked to each it passes; one passing none becomes a rep while fewer than ``max_reps``
    are held. Vectorised by rep: the next rep is the first member after the last one that
    failed every rep so far."""
    out_a, out_b = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    n = rowids.size
    for j in range(keys.shape[1]):
        order = np.lexsort((rowids, keys[:, j]))
        k = keys[order, j]
        for grp in np.split(order, np.flatnonzero(np.diff(k)) + 1):
            if grp.size < 2:
                continue
            failed = np.ones(grp.size, dtype=bool)  # failed every rep so far
            at = 0  # position in the bucket of the newest rep
            reps = 0
            while True:
                reps += 1
                rest = grp[at + 1:]
                passed = (sigs[rest] == sigs[grp[at]]).sum(axis=1) >= min_eq
                out_a.append(rest[passed].astype(np.int64))
                out_b.append(np.full(int(passed.sum()), grp[at], np.int64))
                failed[at + 1:] &= ~passed
                if reps == max_reps:
                    break
                nxt = np.flatnonzero(failed[at + 1:])
                if nxt.size == 0:
                    break
                at = at + 1 + int(nxt[0])
        if len(out_a) > 64:  # each link once, and the lists short
            code = np.unique(np.concatenate(out_a) * n + np.concatenate(out_b))
            out_a, out_b = [code // n], [code % n]
    code = np.unique(np.concatenate(out_a) * n + np.concatenate(out_b))
    return code // n, code % n


def representative_links(rowids, sigs, keys, min_eq, max_reps):
    """:func:`representative_link_positions` as ``[(member rowid, rep rowid)]``."""
    a, b = representative_link_positions(rowids, sigs, keys, min_eq, max_reps)
    return list(zip(rowids[a].tolist(), rowids[b].tolist()))


# --------------------------------------------------------------------------- self-join oracles
#
# Brute force over every live row, independent of the self-join engine: rows signed again
# (index/sign.py's signer is checked bit-identical to Lance in test_signatures.py), every
# pair sharing a band key listed in plain numpy, components by scipy.

REPS = 16  # representatives per bucket in the clusters' link rule (selfjoin/links.py)


def live_rows(uri: str, column: str = "text"):
    """``(rowids, texts, ids)`` of every live row, from a plain Lance scan (``ids``: the
    ``id`` column, or the row positions when there is none)."""
    ds = lance.dataset(uri)
    names = ["id", column] if "id" in ds.schema.names else [column]
    t = ds.to_table(columns=names, with_row_id=True)
    ids = t.column("id").to_numpy() if "id" in names else np.arange(t.num_rows)
    return t.column("_rowid").to_numpy(), t.column(column).combine_chunks(), ids


def signed(uri: str, params, column: str = "text"):
    """``(rowids, sigs, band keys, ids, texts)`` of the live rows that have a signature."""
    import pyarrow as pa

    from lance_minhash_sql.index.sign import signer_for

    rowids, texts, ids = live_rows(uri, column)
    signer = signer_for(params)
    sigs, has = signer.sign(texts)
    return rowids[has], sigs[has], signer.band_keys(sigs[has]), ids[has], texts.filter(pa.array(has))


def candidate_pairs(keys):
    """Index pairs ``(i, j)``, ``i < j``, sharing at least one band key (unique rows)."""
    n, b = keys.shape
    out = []
    for j in range(b):
        order = np.argsort(keys[:, j], kind="stable")
        k = keys[order, j]
        cut = np.flatnonzero(np.diff(k)) + 1
        for grp in np.split(order, cut):
            if grp.size > 1:
                g = np.sort(grp)
                ii, jj = np.triu_indices(g.size, 1)
                out.append(np.stack([g[ii], g[jj]], axis=1))
    if not out:
        return np.empty((0, 2), np.int64)
    return np.unique(np.concatenate(out), axis=0)


def estimates(sigs, cand, k: int):
    """The MinHash estimate of each candidate pair: ``float32(eq) / float32(k)`` as float64."""
    eq = (sigs[cand[:, 0]] == sigs[cand[:, 1]]).sum(axis=1)
    return (eq.astype(np.float32) / np.float32(k)).astype(np.float64)


def min_equal(threshold: float, k: int) -> int:
    """The fewest equal positions whose estimate ``float32(e) / float32(k)`` reaches ``threshold``."""
    return next(e for e in range(k + 1) if float(np.float32(e) / np.float32(k)) >= threshold)


def candidate_floor(threshold: float, k: int) -> float:
    """The estimate down to which ``verify='exact'`` looks at candidates: 4 standard
    deviations of the estimate (``sqrt(t (1 - t) / k)``) under the threshold."""
    return max(0.0, threshold - 4 * (threshold * (1 - threshold) / k) ** 0.5)


def oracle_pairs(uri: str, threshold: float, params, column: str = "text") -> dict:
    """``{(left_rowid, right_rowid): similarity}`` of every candidate pair whose estimate
    reaches ``threshold`` (``verify='estimate'``)."""
    rowids, sigs, keys, _, _ = signed(uri, params, column)
    cand = candidate_pairs(keys)
    sim = estimates(sigs, cand, params.num_hashes)
    keep = sim >= threshold
    a, b = rowids[cand[keep, 0]], rowids[cand[keep, 1]]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return {(int(x), int(y)): float(s) for x, y, s in zip(lo, hi, sim[keep])}


def shingle_set(text, params) -> frozenset:
    return frozenset(shingles(lance_tokens(text, params.tokenizer), params.shingle_size))


def exact_pairs(uri: str, threshold: float, params, column: str = "text") -> dict:
    """``{(left_rowid, right_rowid): (estimate, jaccard)}`` of ``verify='exact'``: every
    candidate pair whose estimate reaches :func:`candidate_floor`, kept iff its exact
    shingle Jaccard (``lance.tokenize``) reaches ``threshold``."""
    rowids, sigs, keys, _, texts = signed(uri, params, column)
    cand = candidate_pairs(keys)
    est = estimates(sigs, cand, params.num_hashes)
    over = est >= candidate_floor(threshold, params.num_hashes)
    texts = texts.to_pylist()
    sets: dict = {}

    def set_of(i):
        if i not in sets:
            sets[i] = shingle_set(texts[i], params)
        return sets[i]

    out = {}
    for (i, j), e in zip(cand[over].tolist(), est[over].tolist()):
        a, b = set_of(i), set_of(j)
        if not a or not b:
            continue
        jac = len(a & b) / len(a | b)
        if jac >= threshold:
            x, y = sorted((int(rowids[i]), int(rowids[j])))
            out[(x, y)] = (e, jac)
    return out


def component_labels(n: int, a, b):
    """The smallest node of each node's component (``0 .. n - 1``) over edges ``a[i] -- b[i]``,
    by scipy's connected components; and each component's size."""
    import scipy.sparse
    from scipy.sparse.csgraph import connected_components

    graph = scipy.sparse.coo_matrix((np.ones(len(a), np.int8), (np.asarray(a, np.int64), np.asarray(b, np.int64))),
                                    shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    smallest = np.full(labels.max() + 1 if n else 0, n, np.int64)
    np.minimum.at(smallest, labels, np.arange(n))
    return smallest[labels], np.bincount(labels)[labels]


def components(nodes, edges) -> dict:
    """``{node: smallest node of its component}`` over ``edges`` (components of >= 2 only),
    by scipy's connected components: an oracle independent of the package's union-find."""
    nodes = sorted(set(nodes) | {x for e in edges for x in e})
    pos = {v: i for i, v in enumerate(nodes)}
    a = np.array([pos[x] for x, _ in edges], dtype=np.int64)
    b = np.array([pos[y] for _, y in edges], dtype=np.int64)
    smallest, size = component_labels(len(nodes), a, b)
    return {v: nodes[s] for v, s, c in zip(nodes, smallest.tolist(), size.tolist()) if c > 1}


def oracle_clusters(uri: str, column: str, threshold: float, params, verify: str = "estimate",
                    reps: int = REPS) -> dict:
    """``{rowid: cluster_id}`` of ``clusters(..., clustering='components', verify=verify)``:
    the connected components of the representatives' links (:func:`representative_links`,
    ``reps`` a bucket) at ``threshold``, or with ``verify='exact'`` of
    :func:`exact_pairs`; the cluster id is the smallest row id of the component."""
    if verify == "exact":
        return components([], list(exact_pairs(uri, threshold, params, column)))
    rowids, sigs, keys, _, _ = signed(uri, params, column)
    order = np.argsort(rowids)  # positions in row id order: the smallest position is the smallest row id
    rowids, sigs, keys = rowids[order], sigs[order], keys[order]
    a, b = representative_link_positions(rowids, sigs, keys, min_equal(threshold, params.num_hashes), reps)
    smallest, size = component_labels(rowids.size, a, b)
    return dict(zip(rowids[size > 1].tolist(), rowids[smallest[size > 1]].tolist()))


def ingest_oracle(corpus_uri: str, batch_uri: str, threshold: float, params, verify: str = "estimate",
                  order=None, column: str = "text") -> dict:
    """The ingest plan's rule (``selfjoin/ingest.py``), row by row in plain Python:
    ``{batch rowid: (keep, twin rowid, twin_in, similarity, jaccard)}``. Batch rows are
    walked by row id (or in ``order``, a list of row ids); a row is similar to a corpus
    row or a kept batch row when they share a band key and the estimate reaches the
    threshold (exact: the candidate floor, and the exact shingle Jaccard the threshold);
    its twin is the most similar (the Jaccard with exact), ties to the corpus, then the
    lowest corpus row id or the batch row kept first."""
    k = params.num_hashes
    exact = verify == "exact"
    c_ids, c_sigs, c_keys, _, c_texts = signed(corpus_uri, params, column)
    b_all, _, _ = live_rows(batch_uri, column)
    b_ids, b_sigs, b_keys, _, b_texts = signed(batch_uri, params, column)
    c_texts, b_texts = c_texts.to_pylist(), b_texts.to_pylist()
    by_key: dict = {}
    for i, keys in enumerate(c_keys.tolist()):
        for key in keys:
            by_key.setdefault(key, []).append(i)
    floor = candidate_floor(threshold, k) if exact else threshold

    def score(sa, ta, sb, tb):
        est = float(np.float32((sa == sb).sum()) / np.float32(k))
        if est < floor:
            return None
        if not exact:
            return (est, est, None)
        a, b = shingle_set(ta, params), shingle_set(tb, params)
        if not a or not b:
            return None
        jac = len(a & b) / len(a | b)
        return (jac, est, jac) if jac >= threshold else None

    pos = {int(r): i for i, r in enumerate(b_ids)}
    walk = sorted(int(r) for r in b_all) if order is None else [int(r) for r in order]
    kept: list = []  # batch positions kept, in walk order
    out = {}
    for rid in walk:
        i = pos.get(rid)
        if i is None:  # no tokens: similar to nothing
            out[rid] = (True, None, None, None, None)
            kept.append(None)
            continue
        best = None  # (score, tie, twin rowid, twin_in, similarity, jaccard)
        mine = set(b_keys[i].tolist())
        for c in sorted({c for key in mine for c in by_key.get(key, [])}):
            s = score(b_sigs[i], b_texts[i], c_sigs[c], c_texts[c])
            if s is not None and (best is None or (s[0], 0, -int(c_ids[c])) > best[:3]):
                best = (s[0], 0, -int(c_ids[c]), int(c_ids[c]), "corpus", s[1], s[2])
        for rank, j in enumerate(kept):
            if j is None or not mine & set(b_keys[j].tolist()):
                continue
            s = score(b_sigs[i], b_texts[i], b_sigs[j], b_texts[j])
            if s is not None and (best is None or (s[0], -1, -rank) > best[:3]):
                best = (s[0], -1, -rank, int(b_ids[j]), "batch", s[1], s[2])
        if best is None:
            out[rid] = (True, None, None, None, None)
            kept.append(i)
        else:
            out[rid] = (False, best[3], best[4], best[5], best[6])
            kept.append(None)
    return out


# --------------------------------------------------------------------------- star clustering


STAR_BUCKET_CENTERS = 16  # the centres a bucket lists (core/tuning.py: STAR_BUCKET_CENTERS)


def _star_candidates(sigs, keys, i, centres, lists, min_eq):
    """``[(equal values, centre)]`` of row ``i``: the centres listed under its band keys
    (``lists``: key -> centres) with at least ``min_eq`` equal values, most equal values
    first, ties to the earlier centre (``centres`` in walk order)."""
    listed = {c for key in np.asarray(keys[i]).tolist() for c in lists.get(key, [])}
    out = [(int((np.asarray(sigs[c]) == np.asarray(sigs[i])).sum()), c) for c in listed]
    return sorted((x for x in out if x[0] >= min_eq), key=lambda x: (-x[0], centres.index(x[1])))


def _star_centre(keys, i, centres, lists, most):
    """Row ``i`` becomes a centre: listed under each of its keys whose list is shorter
    than ``most``."""
    centres.append(i)
    for key in np.asarray(keys[i]).tolist():
        if len(lists.setdefault(key, [])) < most:
            lists[key].append(i)


def star_walk(sigs, keys, comp, min_eq, most=STAR_BUCKET_CENTERS):
    """``(twin, eq)`` of the star walk of ``kernels/star.py`` (the rule of
    ``selfjoin/star.py``), longhand: row by row, each bucket (band key, ``keys``) of a
    component (``comp``) listing its first ``most`` centres, a row's twin is the centre
    listed in its buckets with the most equal values (at least ``min_eq``), ties to the
    centre first in the walk; a row with none becomes a centre (``-1`` and ``0``)."""
    twin, eq, walked = [-1] * len(comp), [0] * len(comp), {}
    for i in range(len(comp)):
        centres, lists = walked.setdefault(int(comp[i]), ([], {}))
        found = _star_candidates(sigs, keys, i, centres, lists, min_eq)
        if found:
            eq[i], twin[i] = found[0]
        else:
            _star_centre(keys, i, centres, lists, most)
    return twin, eq


def star_walk_exact(sets, sigs, keys, comp, min_eq, threshold, most=STAR_BUCKET_CENTERS):
    """``twin`` of the exact star walk, longhand over Python sets: the candidates of
    :func:`star_walk` (``min_eq``: the estimate floor) tried most equal values first, the
    first whose Jaccard reaches ``threshold`` (an empty set passes nothing; a row with an
    empty set is a centre, listed nowhere)."""
    twin, walked = [-1] * len(comp), {}
    for i in range(len(comp)):
        centres, lists = walked.setdefault(int(comp[i]), ([], {}))
        if not sets[i]:
            centres.append(i)
            continue
        for _, c in _star_candidates(sigs, keys, i, centres, lists, min_eq):
            if sets[c] and len(sets[i] & sets[c]) / len(sets[i] | sets[c]) >= threshold:
                twin[i] = c
                break
        else:
            _star_centre(keys, i, centres, lists, most)
    return twin


# --------------------------------------------------------------------------- the dry run's intervals


def finite_population_correction(n: int, population: int) -> float:
    """The variance of a mean of ``n`` of ``population`` units drawn without replacement,
    over the same drawn with replacement: ``(N - n) / (N - 1)``."""
    return (population - n) / (population - 1)


def corrected_wilson(successes: float, n: int, population: int, z: float = 1.959963984540054) -> tuple:
    """``(low, high)`` of the dry run: Newcombe's (1998) method 4, the Wilson score interval
    with continuity correction, of ``successes / n``, its sample size the binomial one of
    the same variance, ``m = n / finite_population_correction(n, population)``; the point
    itself for the whole population; clipped to ``[0, 1]``."""
    p = successes / n
    if n >= population:
        return p, p
    m = n / finite_population_correction(n, population)
    if p <= 0:
        low = 0.0
    else:
        low = (2 * m * p + z * z - 1 - z * math.sqrt(z * z - 2 - 1 / m + 4 * p * (m * (1 - p) + 1))) / (2 * (m + z * z))
    if p >= 1:
        high = 1.0
    else:
        high = (2 * m * p + z * z + 1 + z * math.sqrt(z * z + 2 - 1 / m + 4 * p * (m * (1 - p) - 1))) / (2 * (m + z * z))
    return min(max(low, 0.0), 1.0), min(max(high, 0.0), 1.0)


def star_twins(uri: str, threshold: float, params, key, column: str = "text") -> dict:
    """``{rowid: twin rowid or None}`` of every row of star clustering (``selfjoin/star.py``)
    at ``threshold``: the components of :func:`oracle_pairs` (scipy), each walked in the
    keep order ``key`` (a sort key of a row id) by :func:`star_walk` over the rows'
    signatures and band keys."""
    rowids, sigs, keys, _, _ = signed(uri, params, column)
    sig = dict(zip(rowids.tolist(), sigs))
    band = dict(zip(rowids.tolist(), keys))
    pairs = oracle_pairs(uri, threshold, params, column)
    members: dict = {}
    for r, c in components([x for p in pairs for x in p], list(pairs)).items():
        members.setdefault(c, []).append(r)
    walk = [r for group in members.values() for r in sorted(group, key=key)]
    comp = [c for c, group in enumerate(members.values()) for _ in group]
    twin, _ = star_walk([sig[r] for r in walk], [band[r] for r in walk], comp, min_equal(threshold, params.num_hashes))
    return {r: None if t < 0 else walk[t] for r, t in zip(walk, twin)}


# --------------------------------------------------------------------------- join kernel oracle


def join_kernel_pairs(lkeys, ldocs, rkeys, rdocs, pool, rowids, k: int, num_bands: int, min_eq: int) -> list:
    """``[(left rowid, right rowid, equal positions)]`` that ``kernels/cross_pairs.py:
    join_chunk`` writes for its sorted band rows ``(lkeys, ldocs)`` and ``(rkeys, rdocs)``
    (docs: rows of ``pool``, whose first ``k`` values are the signature), in its order,
    longhand: for every key both sides hold, ascending, every left row of the key, then
    every right row, the pair kept when this key's band is the pair's first band with
    equal values, or, when no band has equal values, its first band with equal keys (a
    key collision), and at least ``min_eq`` of the ``k`` values are equal. The keys are
    taken as given, so a test can fake a collision (one band of a pair at most: the
    kernel recomputes the earlier bands' keys from the values)."""
    r = k // num_bands
    key_of: dict = {}  # (pool row, band) -> key
    lrows: dict = {}
    rrows: dict = {}
    for keys, docs, rows in ((lkeys, ldocs, lrows), (rkeys, rdocs, rrows)):
        for key, d in zip(keys.tolist(), docs.tolist()):
            key_of[d, key >> 56] = key
            rows.setdefault(key, []).append(d)

    def reporting_band(x, y):
        for j in range(num_bands):
            if all(int(pool[x, t]) == int(pool[y, t]) for t in range(j * r, j * r + r)):
                return j
        for j in range(num_bands):
            if key_of.get((x, j)) is not None and key_of.get((x, j)) == key_of.get((y, j)):
                return j
        return None

    out = []
    for key in sorted(set(lrows) & set(rrows)):
        for x in lrows[key]:
            for y in rrows[key]:
                eq = sum(int(pool[x, t]) == int(pool[y, t]) for t in range(k))
                if eq >= min_eq and reporting_band(x, y) == key >> 56:
                    out.append((int(rowids[x]), int(rowids[y]), eq))
    return out
