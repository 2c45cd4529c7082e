"""Self-join kernels: LSH buckets of sorted band rows, candidate pairs, verification.

Input of the pair and link kernels is a run of consecutive buckets of one shard: band
rows ``(keys u64[n], docs u32[n])`` sorted by ``(band_key, doc)`` (docs are local ids),
bucket bounds ``starts``/``ends``, and a signature pool: ``words u64[P, w]`` (and
``halves``, the same memory as u16) whose rows hold the ``k`` signature values padded to
whole words with equal lanes (:func:`padded_hashes`), with ``slot`` mapping a local id to
its pool row (``slot`` empty: the local id is the row), ``rowids u64[P]`` alongside. The
caller gathers each window of buckets into such a pool in row order (:func:`windows`,
:func:`gather_rows`), so a bucket's members are contiguous in memory. Band ``j``'s keys
start with byte ``j`` (``docs/signatures.md``), so the band of a bucket is ``key >> 56``.

* A **bucket** is a run of equal keys; only runs of two rows or more matter
  (:func:`multi_rows` drops the rest, :func:`bucket_bounds` lists them).
* **Candidate pair**: two docs sharing at least one band key. A pair sharing several
  bands is reported once, from the *first* band where the two signatures have equal
  values (equal values give equal keys): in a bucket of band ``j`` whose two members have
  equal band-``j`` values, the pair is skipped when some band ``j' < j`` has equal values
  too. A bucket can also hold a pair whose band-``j`` values differ (a 56-bit key
  collision, about 1e-17 per pair and band): such a pair is reported only if *no* band
  has equal values, from the first band whose keys are equal (earlier keys recomputed
  with ``XXH64``, exactly as the band keys were made). So the rule is exact, collisions
  included, and costs ``r``-value comparisons per earlier band instead of hashes.
* **Verification**: ``eq`` = equal positions of the full signatures; the pair is kept when
  ``eq >= min_eq``, the smallest ``eq`` whose ``float32(eq) / float32(k)`` (Lance's
  similarity, ``1 - _distance``) reaches the threshold (:func:`min_matches`). The pair
  kernel compares blocks of 128 values as vectors (:func:`pair_chunk`; at the default
  k = 128 with 16 bands, one compare giving the count and the equal bands as well,
  ``kernels/lanes.py``, which the join kernel uses too: ``kernels/cross_pairs.py``), and
  so does the link kernel at k = 128; the join kernel at other shapes, and the link
  kernel at other k, four at a time (SWAR over u64 words, :func:`count_matches`),
  stopping once the mismatches exceed ``k - min_eq``.
* **Exact verification's candidates** (down to a lower ``min_eq``): :func:`pair_chunk`
  given the rows' shingle-set sizes and bucket counts writes only the pairs that
  :func:`.similarity.may_reach` leaves a chance of reaching the threshold; the
  exact Jaccard of those decides (``selfjoin/verify.py``).
* **Bounded output**: :func:`pair_chunk` writes at most ``len(out_left)`` pairs and visits about
  ``budget`` pairs per call, then returns with a resumable ``cursor`` (bucket,
  row, column of the pair loop), so a bucket of 300,000 copies (4.5e10 pairs) streams in
  chunks and never exists as a whole.
* **Links for clusters** (:func:`link_chunk`): per bucket, members in order; the first
  member is a representative ("rep"); every later member is verified against every
  current rep and linked to each one it passes; a member passing none becomes a rep while
  there are fewer than ``max_reps``. ``O(m * max_reps)`` verifications per bucket of
  ``m``, never ``O(m^2)``. (Which links this means for clusters: ``selfjoin/clusters.py``.)

Parallelism is across shards: every kernel is serial and ``nogil``, and callers run
shards on threads (DuckDB runs one shard per call on its threads; ``selfjoin/pairs.py`` uses
worker threads). A shard is the unit of work, so OpenMP teams inside DuckDB's threads
would only oversubscribe the cores.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core import lance_format
from lance_minhash_sql.core.lance_format import min_matches  # its home; the pair kernels' callers take it here too
from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.lanes import BAND_VALUES, WIDTH, verified_partners
from lance_minhash_sql.kernels.order import order_by_pair
from lance_minhash_sql.kernels.similarity import COUNT_BUCKETS, common_bound, may_reach
from lance_minhash_sql.kernels.xxh64 import xxh64_u16_run

__all__ = [
    "CURSOR_SIZE",
    "min_matches",
    "multi_rows",
    "bucket_bounds",
    "new_bucket_cursor",
    "no_sets",
    "padded_hashes",
    "pair_chunk",
    "link_chunk",
    "order_buckets",
    "windows",
    "gather_rows",
]

SEED = np.uint64(lance_format.SEED)
_KEY_MASK = np.uint64(lance_format.BAND_HASH_MASK)
_U56 = np.uint64(lance_format.BAND_SHIFT)

# A cursor (int64[CURSOR_SIZE]) is where a chunked kernel stops and the next call goes on:
# the bucket, the row in it, the partner row (pair_chunk) and the representatives held
# (link_chunk). Its slots, by name:
CUR_BUCKET, CUR_ROW, CUR_PARTNER, CUR_REPS = 0, 1, 2, 3
CURSOR_SIZE = 4


def no_sets() -> tuple:
    """:func:`pair_chunk`'s ``set_sizes, set_counts`` without shingle sets (pairs verified
    by their estimate alone): empty, of the types exact verification passes (one
    specialization of the kernel for both)."""
    return np.empty(0, np.int64), np.empty((0, COUNT_BUCKETS), np.uint8)


def new_bucket_cursor() -> np.ndarray:
    """A cursor at the first bucket, for :func:`pair_chunk` and :func:`link_chunk`."""
    c = np.zeros(CURSOR_SIZE, dtype=np.int64)
    c[CUR_PARTNER] = 1
    return c


@njit(**JIT)
def multi_rows(keys, docs):
    """``(keys, docs)`` of the rows in buckets of two rows or more (order kept)."""
    n = keys.size
    keep = 0
    for i in range(n):
        if (i > 0 and keys[i] == keys[i - 1]) or (i + 1 < n and keys[i] == keys[i + 1]):
            keep += 1
    out_k = np.empty(keep, dtype=keys.dtype)
    out_d = np.empty(keep, dtype=docs.dtype)
    w = 0
    for i in range(n):
        if (i > 0 and keys[i] == keys[i - 1]) or (i + 1 < n and keys[i] == keys[i + 1]):
            out_k[w] = keys[i]
            out_d[w] = docs[i]
            w += 1
    return out_k, out_d


@njit(**JIT)
def bucket_bounds(keys):
    """``(starts, ends)`` int64 of the runs of equal keys with two rows or more."""
    n = keys.size
    count = 0
    i = 0
    while i < n:
        j = i + 1
        while j < n and keys[j] == keys[i]:
            j += 1
        if j - i >= 2:
            count += 1
        i = j
    starts = np.empty(count, dtype=np.int64)
    ends = np.empty(count, dtype=np.int64)
    c = 0
    i = 0
    while i < n:
        j = i + 1
        while j < n and keys[j] == keys[i]:
            j += 1
        if j - i >= 2:
            starts[c] = i
            ends[c] = j
            c += 1
        i = j
    return starts, ends


@njit(**JIT, inline="always")
def _row(slot, d):
    return np.int64(d) if slot.size == 0 else np.int64(slot[d])


# SWAR: a u64 word holds 4 signature values; a lane differs iff its 16 bits are not 0
_LOW15 = np.uint64(0x7FFF7FFF7FFF7FFF)
_HIGH = np.uint64(0x8000800080008000)
_LANES = np.uint64(0x0001000100010001)
_U15 = np.uint64(15)
_U48 = np.uint64(48)


def padded_hashes(num_hashes: int) -> int:
    """Row width (u16) of a kernel pool: ``num_hashes`` rounded up to whole u64 words."""
    return -(-num_hashes // 4) * 4


@njit(**JIT, inline="always")
def _lane_diffs(x):
    """Number of 16-bit lanes of ``x`` that are not 0, times 2**48 (summable, then >> 48)."""
    return (((((x & _LOW15) + _LOW15) | x) & _HIGH) >> _U15) * _LANES


@njit(**JIT, inline="always")
def count_matches(words, ra, rb, k, max_miss):
    """Equal positions of pool rows ``ra`` and ``rb`` (``k`` values; padding lanes are equal),
    or -1 once the mismatches exceed ``max_miss``."""
    n = words.shape[1]
    miss = 0
    t = 0
    while t + 4 <= n:  # fixed blocks of 16 values: unrolled
        c = (_lane_diffs(words[ra, t] ^ words[rb, t]) + _lane_diffs(words[ra, t + 1] ^ words[rb, t + 1])
             + _lane_diffs(words[ra, t + 2] ^ words[rb, t + 2]) + _lane_diffs(words[ra, t + 3] ^ words[rb, t + 3]))
        miss += np.int64(c >> _U48)
        if miss > max_miss:
            return -1
        t += 4
    while t < n:
        miss += np.int64(_lane_diffs(words[ra, t] ^ words[rb, t]) >> _U48)
        t += 1
    if miss > max_miss:
        return -1
    return k - miss


@njit(**JIT, inline="always")
def band_equal(words, halves, ra, rb, j, r):
    """Band ``j`` (``r`` values) of rows ``ra`` and ``rb`` equal? Whole words when ``r % 4 == 0``."""
    if r % 4 == 0:
        q = r // 4
        for t in range(j * q, j * q + q):
            if words[ra, t] != words[rb, t]:
                return False
        return True
    for t in range(j * r, j * r + r):
        if halves[ra, t] != halves[rb, t]:
            return False
    return True


@njit(**JIT, inline="always")
def values_equal(halves, ra, rb, lo, r):
    for t in range(lo, lo + r):
        if halves[ra, t] != halves[rb, t]:
            return False
    return True


@njit(**JIT)
def collision_pair_first(words, halves, ra, rb, band, num_bands, r):
    """For a pair sharing band ``band``'s key but not its values: True if this is the band
    that reports it (no band with equal values, no earlier band with equal keys)."""
    for j in range(num_bands):
        if band_equal(words, halves, ra, rb, j, r):
            return False
    a = halves[ra]
    b = halves[rb]
    for j in range(band):
        if (xxh64_u16_run(a, j * r, r, SEED) & _KEY_MASK) == (xxh64_u16_run(b, j * r, r, SEED) & _KEY_MASK):
            return False
    return True


@njit(**JIT, inline="always")
def reported_here(words, halves, ra, rb, band, num_bands, r, k, max_miss):
    """The equal positions of rows ``ra`` and ``rb`` when their pair is reported from a
    bucket of band ``band``, else -1: they share no earlier band (the pair is reported from
    its first shared band), they match in at least ``k - max_miss`` positions, and the
    bucket is really theirs (equal values in this band, or a key collision that no other
    band reports first). The self-join and the cross-dataset join apply this one rule."""
    for j in range(band):
        if band_equal(words, halves, ra, rb, j, r):
            return -1
    eq = count_matches(words, ra, rb, k, max_miss)
    if eq < 0:
        return -1
    # (value by value here: a second word-path call site slows the loop)
    if not values_equal(halves, ra, rb, band * r, r):
        if not collision_pair_first(words, halves, ra, rb, band, num_bands, r):
            return -1
    return eq


# One kernel of this length on purpose: its loop state (bucket, row, partner) must survive a
# return to Python in the middle of a bucket (the cursor), and numba compiles a helper again
# inside every caller (kernels/config.py), so the resumable loop stays in one body.
@njit(**JIT)
def pair_chunk(keys, docs, starts, ends, words, halves, slot, rowids, k, num_bands, min_eq, cursor,
               out_left, out_right, out_eq, budget, set_sizes, set_counts, threshold):
    """Verified pairs of the buckets ``starts``/``ends``, each from its first shared band,
    from ``cursor`` on: :func:`reported_here`'s rule.

    Exact verification's candidates (``set_counts`` not empty): pool row ``r``'s shingle
    set has ``set_sizes[r]`` distinct values and the bucket counts ``set_counts[r]``
    (:func:`.similarity.bucket_counts`, :data:`.similarity.COUNT_BUCKETS` bytes a row,
    compiled in: numba's cache of this file keeps the value it was compiled with, so
    clear it when the constant changes; gathered beside the pool, so a bucket's rows
    read them in order), and a pair is written only when
    :func:`.similarity.may_reach` leaves it a chance to reach ``threshold``: the pairs
    left out have an exact Jaccard under it (or an empty set: no Jaccard), so the
    exact check of the pairs written keeps the same pairs. Most candidates down to the
    exact floor end there, never written, copied and looked up again.

    The pool is given twice over the same memory: ``words`` (u64[P, w]) and ``halves``
    (u16[P, 4w]), rows of the ``k`` signature values padded with equal lanes
    (:func:`padded_hashes`). Writes ``out_left[i] < out_right[i]`` (row ids) and
    ``out_eq`` (equal positions); returns ``(count, done)``. ``cursor``
    (:func:`new_bucket_cursor`) carries the state between calls; a call stops when the output is
    full or about ``budget`` pairs were visited.

    The rule is written out in the loop rather than called (numba inlines a call with
    array arguments at the IR level, at a cost per visit). The three conditions of the
    rule are independent, so they are tested cheapest-first by outcome: verification first
    (most visits fail it), in blocks of 128 values whose fixed trip count compiles to
    vector compares (a bound such as ``min(u0 + 64, nh)`` compiles to scalar code), then
    the earlier bands, then this band's values; k = 128 is one block. The pairs and their
    order are those of testing the earlier bands first. Rows are indexed in two
    dimensions, not through a row view per visit.

    The loop runs in two passes per row: its partners are verified first, all of them,
    the ones that pass listed without a branch (which visits pass follows no pattern a
    branch predictor learns, and a mispredicted branch costs about what a compare does);
    then the listed partners alone go through the band conditions. Whole-word bands are
    tested as the least of the earlier bands' differences, again without a branch per
    band: a passing pair shares several bands, and which one is equal first is as
    unpredictable.

    At k = 128 with 16 bands (the default) the first pass is
    :func:`.lanes.verified_partners`: one 128-value compare per partner gives both the
    count and the bands whose values are equal, so the partners listed are those that
    pass verification *and* share no earlier band (a pair sharing several bands is
    skipped in all of them but its first, where before each visit listed it); the row's
    own values are read once for all its partners.
    """
    r = k // num_bands
    q = r // 4
    whole_words = r % 4 == 0
    nh = halves.shape[1]
    # k = 128 with 16 bands (the default): one compare gives the count and the equal bands
    one_compare = nh == WIDTH and r == BAND_VALUES
    max_miss = k - min_eq
    cap = out_left.size
    nb = starts.size
    bounded = set_counts.shape[0] > 0  # exact verification: the sets' sizes and bucket counts settle pairs
    bi = cursor[CUR_BUCKET]
    i = cursor[CUR_ROW]
    jj = cursor[CUR_PARTNER]
    # the partners of one row that pass verification, and their mismatches: no more than
    # a bucket's rows, nor than the output holds (a row's partners stop there)
    widest = 1
    for b in range(bi, nb):
        widest = max(widest, ends[b] - starts[b])
    widest = min(widest, max(cap, 1))
    passed = np.empty(widest, dtype=np.int64)
    passed_miss = np.empty(widest, dtype=np.int64)
    n_out = 0
    work = 0
    while bi < nb:
        s = starts[bi]
        m = ends[bi] - s
        band = np.int64(keys[s] >> _U56)
        # the bits of the bands before this one (verified_partners' mask of equal bands)
        earlier = (np.int64(1) << band) - 1 if one_compare else np.int64(0)
        while i < m - 1:
            if work >= budget or n_out == cap:
                cursor[CUR_BUCKET] = bi
                cursor[CUR_ROW] = i
                cursor[CUR_PARTNER] = jj
                return n_out, False
            ra = _row(slot, docs[s + i])
            ida = rowids[ra]
            # visits never outnumber the pairs written: this many cannot overflow the output
            stop = min(m, jj + (cap - n_out))
            if one_compare:
                # 1 and 2 at once: verified, and no earlier band with equal values
                n_passed = verified_partners(halves, docs, slot, s, ra, jj, stop, min_eq, earlier, passed,
                                             passed_miss)
            else:
                n_passed = 0
                for t in range(jj, stop):
                    rb = _row(slot, docs[s + t])
                    # 1. verification (most visits fail it, so it comes first): equal positions
                    # in blocks of 128 values, a fixed trip count that LLVM turns into vector
                    # compares, stopping once the mismatches exceed max_miss
                    if nh == 128:  # k = 128 (the default): one block, no block loop around it
                        c16 = np.uint16(0)
                        for u in range(128):
                            # 16-bit lanes, as the values: the compares' masks add without widening
                            c16 = np.uint16(c16 + np.uint16(halves[ra, u] != halves[rb, u]))
                        miss = np.int64(c16)
                    else:
                        miss = 0
                        u0 = 0
                        while u0 + 128 <= nh:
                            c = np.uint8(0)
                            for u in range(128):
                                # truncated each step: numba would add in int64, four lanes a vector
                                c = np.uint8(c + np.uint8(halves[ra, u0 + u] != halves[rb, u0 + u]))
                            miss += np.int64(c)
                            u0 += 128
                            if miss > max_miss:
                                break
                        if miss <= max_miss:
                            for u in range(u0, nh):
                                miss += np.int64(halves[ra, u] != halves[rb, u])
                    # kept without a branch: a pass is too frequent and too irregular to predict
                    passed[n_passed] = t
                    passed_miss[n_passed] = miss
                    n_passed += np.int64(miss <= max_miss)
            for p in range(n_passed):
                rb = _row(slot, docs[s + passed[p]])
                # 2. an earlier band with equal values reports the pair (tested in the
                # first pass when one_compare)
                if one_compare:
                    pass
                elif whole_words:
                    # the least of the earlier bands' differences, without a branch per band
                    # (which band of a passing pair is equal first is not predictable)
                    least = ~np.uint64(0)
                    if q == 2:  # k = 128 with 16 bands (the default): a band is two words
                        for j in range(band):
                            least = min(least, (words[ra, 2 * j] ^ words[rb, 2 * j])
                                        | (words[ra, 2 * j + 1] ^ words[rb, 2 * j + 1]))
                    else:
                        for j in range(band):
                            d = np.uint64(0)
                            for u in range(j * q, j * q + q):
                                d |= words[ra, u] ^ words[rb, u]
                            least = min(least, d)
                    if least == 0:
                        continue
                else:
                    shared = False
                    for j in range(band):
                        same = True
                        for u in range(j * r, j * r + r):
                            if halves[ra, u] != halves[rb, u]:
                                same = False
                                break
                        if same:
                            shared = True
                            break
                    if shared:
                        continue
                # 3. the bucket is theirs: equal values in this band, or a key collision
                # that no other band reports first
                if whole_words and q == 2:  # two words a band, compared without a branch
                    same = ((words[ra, 2 * band] ^ words[rb, 2 * band])
                            | (words[ra, 2 * band + 1] ^ words[rb, 2 * band + 1])) == 0
                else:
                    same = True
                    for u in range(band * r, band * r + r):
                        if halves[ra, u] != halves[rb, u]:
                            same = False
                            break
                if not same and not collision_pair_first(words, halves, ra, rb, band, num_bands, r):
                    continue
                idb = rowids[rb]
                keep = ida != idb
                if bounded:
                    # 4. exact verification: the sets' sizes and bucket counts leave the pair
                    # a chance (no branch: most pairs fail, in no pattern)
                    keep &= may_reach(set_sizes[ra], set_sizes[rb], common_bound(set_counts, ra, set_counts, rb),
                                      threshold)
                # written in any case (the row's listed partners fit), counted when kept
                out_left[n_out] = min(ida, idb)
                out_right[n_out] = max(ida, idb)
                out_eq[n_out] = k - passed_miss[p]
                n_out += np.int64(keep)
            work += stop - jj
            jj = stop
            if jj == m:
                i += 1
                jj = i + 1
        bi += 1
        i = 0
        jj = 1
    cursor[CUR_BUCKET] = bi
    cursor[CUR_ROW] = 0
    cursor[CUR_PARTNER] = 1
    return n_out, True


@njit(**JIT)
def link_chunk(keys, docs, starts, ends, words, slot, k, min_eq, max_reps, cursor, reps, out_a, out_b):
    """Verified links (member, representative) of every bucket, from ``cursor`` on.

    Per bucket the first member is a rep; each later member is verified against every
    current rep and linked to each one it passes; one passing none becomes a rep while
    fewer than ``max_reps`` are held. The pool is ``words`` as in :func:`pair_chunk`;
    at k = 128 a member and a rep are compared in one block of 16-bit lanes as there (no
    early exit: the whole block costs less than the word loop's tests on the way).
    Writes local doc ids ``out_a`` (member) and ``out_b`` (rep); returns ``(count,
    done)``. ``reps`` (int64[max_reps]) and ``cursor`` keep a bucket's state across calls;
    the output needs room for ``max_reps`` links.
    """
    max_miss = k - min_eq
    halves = words.view(np.uint16)  # the same memory, a value a lane
    nh = halves.shape[1]
    cap = out_a.size
    nb = starts.size
    bi = cursor[CUR_BUCKET]
    i = cursor[CUR_ROW]
    nreps = cursor[CUR_REPS]
    n_out = 0
    while bi < nb:
        s = starts[bi]
        m = ends[bi] - s
        if i == 0:
            reps[0] = s
            nreps = 1
            i = 1
        while i < m:
            if n_out + nreps > cap:
                cursor[CUR_BUCKET] = bi
                cursor[CUR_ROW] = i
                cursor[CUR_REPS] = nreps
                return n_out, False
            x = docs[s + i]
            rx = _row(slot, x)
            passed = False
            for q in range(nreps):
                y = docs[reps[q]]
                ry = _row(slot, y)
                if nh == 128:  # k = 128 (the default): one block of vector compares, as pair_chunk's
                    c16 = np.uint16(0)
                    for u in range(128):
                        c16 = np.uint16(c16 + np.uint16(halves[rx, u] != halves[ry, u]))
                    ok = np.int64(c16) <= max_miss
                else:
                    ok = count_matches(words, rx, ry, k, max_miss) >= 0
                if ok:
                    out_a[n_out] = x
                    out_b[n_out] = y
                    n_out += 1
                    passed = True
            if not passed and nreps < max_reps:
                reps[nreps] = s + i
                nreps += 1
            i += 1
        bi += 1
        i = 0
    cursor[CUR_BUCKET] = bi
    cursor[CUR_ROW] = 0
    cursor[CUR_REPS] = 0
    return n_out, True


@njit(**JIT)
def order_buckets(docs, slot, rowids, starts, ends):
    """Sort each bucket's ``docs`` by row id in place (stable); True if any bucket moved."""
    moved = False
    for b in range(starts.size):
        s = starts[b]
        e = ends[b]
        ok = True
        for i in range(s + 1, e):
            if rowids[_row(slot, docs[i])] < rowids[_row(slot, docs[i - 1])]:
                ok = False
                break
        if ok:
            continue
        moved = True
        seg = docs[s:e].copy()
        v = np.empty(e - s, dtype=rowids.dtype)
        idx = np.empty(e - s, dtype=np.int64)
        zero = np.empty(e - s, dtype=np.int32)
        for i in range(e - s):  # loops, not np.arange / np.zeros: constructors the search does not compile
            v[i] = rowids[_row(slot, seg[i])]
            idx[i] = i
            zero[i] = 0
        # by row id alone (a zero primary key): the (int64, int32, uint64) specialization the
        # search's top-k selection compiles too
        order = order_by_pair(idx, zero, v)
        for i in range(e - s):
            docs[s + i] = seg[order[i]]
    return moved


@njit(**JIT)
def windows(starts, ends, max_rows):
    """Consecutive buckets grouped into windows of at most ``max_rows`` rows (a larger
    bucket alone): ``int64[w, 2]`` bucket index ranges ``[b0, b1)``."""
    nb = starts.size
    out = np.empty((nb, 2), dtype=np.int64)
    w = 0
    b = 0
    while b < nb:
        b0 = b
        row0 = starts[b]
        b += 1
        while b < nb and ends[b] - row0 <= max_rows:
            b += 1
        out[w, 0] = b0
        out[w, 1] = b
        w += 1
    return out[:w]


@njit(**JIT)
def gather_rows(docs, lo, hi, sigs, slot, rowids, out_sigs, out_rowids):
    """Signatures and row ids of the docs of rows ``[lo, hi)``, in row order, into the
    first ``hi - lo`` rows of ``out_sigs`` / ``out_rowids``.

    ``out_sigs`` rows may be wider than ``sigs`` rows (padding: left as allocated). Bucket
    members are random docs, so the kernels' signature reads miss the cache;
    this loop issues independent loads, and the kernels then read
    each bucket's members contiguously.
    """
    k = sigs.shape[1]
    if slot.size == 0:
        for i in range(lo, hi):
            r = np.int64(docs[i])
            out_rowids[i - lo] = rowids[r]
            for t in range(k):
                out_sigs[i - lo, t] = sigs[r, t]
        return
    # a pool with a doc map: look every row up first, in a loop of independent loads (a
    # map larger than the CPU's cache would otherwise put a dependent miss before every copy)
    rows = np.empty(hi - lo, dtype=np.int64)
    for i in range(lo, hi):
        rows[i - lo] = slot[docs[i]]
    for i in range(hi - lo):
        r = rows[i]
        out_rowids[i] = rowids[r]
        for t in range(k):
            out_sigs[i, t] = sigs[r, t]
