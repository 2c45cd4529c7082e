"""Diagnostics kernels: exact Jaccard of sampled query rows against every row, stratified.

:func:`census_chunk` runs over one batch of rows (CSR shingle sets: sorted distinct
XXH64 hashes per row, as ``Signer.shingle_sets`` makes them) against a fixed set of
*query rows* given as an inverted index (distinct query shingle hashes ``qh``, sorted,
and for each the queries holding it). For every row ``o`` and every query ``q`` sharing at
least one shingle with it (``o != q``), it computes the exact Jaccard
``|q ∩ o| / |q ∪ o|`` from the intersection count and the two set sizes, and offers the
pair to the reservoir of its similarity bin (``bin = min(int(J * nbins), nbins - 1)``).

Every pair with ``J > 0`` that involves a query row is enumerated, whatever the index
says about it; pairs with ``J = 0`` share no shingle and are not enumerated. Each bin
keeps a uniform random sample of at most ``capacity`` of its pairs (reservoir sampling,
Algorithm R, with a SplitMix64 stream in ``rng``): which pairs are kept depends only on
their exact Jaccard and the random stream, never on band keys, so the fraction of kept
pairs that share a band estimates ``P(candidate | pairs of the bin)`` without bias.

The state (``seen``, reservoirs, ``rng``) carries over from batch to batch; ``counter``
is scratch that is all zero between calls.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.lsh import lower_bound

__all__ = ["new_reservoirs", "census_chunk"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def new_reservoirs(nbins: int, capacity: int, seed: int):
    """``(seen int64[nbins], res_q int32[nbins, capacity], res_o uint64[...], res_j float64[...],
    rng uint64[1])`` for :func:`census_chunk`."""
    return (np.zeros(nbins, dtype=np.int64),
            np.full((nbins, capacity), -1, dtype=np.int32),
            np.zeros((nbins, capacity), dtype=np.uint64),
            np.full((nbins, capacity), np.nan, dtype=np.float64),
            np.array([seed], dtype=np.uint64))


@njit(**JIT, inline="always")
def _next(rng):
    """SplitMix64: the next 64-bit value of the stream in ``rng[0]``."""
    rng[0] += _GOLDEN
    z = rng[0]
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(**JIT)
def census_chunk(row_off, row_hash, rowids, qh, qh_off, qh_q, q_size, q_rowid, nbins,
                 counter, touched, seen, res_q, res_o, res_j, rng):
    """Offer every ``(query, row)`` pair of this batch with ``J > 0`` to its bin's
    reservoir; returns the number of rows of the batch that have shingles."""
    capacity = res_q.shape[1]
    populated = 0
    for i in range(rowids.size):
        a0 = row_off[i]
        a1 = row_off[i + 1]
        size = a1 - a0
        if size == 0:
            continue
        populated += 1
        nt = 0
        lo = 0
        for s in range(a0, a1):
            p = lower_bound(qh, lo, qh.size, row_hash[s])
            if p == qh.size:
                break
            lo = p
            if qh[p] != row_hash[s]:
                continue
            for t in range(qh_off[p], qh_off[p + 1]):
                q = qh_q[t]
                if counter[q] == 0:
                    touched[nt] = q
                    nt += 1
                counter[q] += 1
        for t in range(nt):
            q = touched[t]
            inter = counter[q]
            counter[q] = 0
            if q_rowid[q] == rowids[i]:
                continue
            jac = inter / (q_size[q] + size - inter)
            b = min(np.int64(jac * nbins), nbins - 1)
            seen[b] += 1
            n = seen[b]
            if n <= capacity:
                slot = n - 1
            else:
                slot = np.int64(_next(rng) % np.uint64(n))
                if slot >= capacity:
                    continue
            res_q[b, slot] = q
            res_o[b, slot] = rowids[i]
            res_j[b, slot] = jac
    return populated
