"""Why two rows of a connected component are in one cluster: the chain of verified links
from the kept row to a dropped one, each link with its exact Jaccard.

A link is what the self-join verifies (``selfjoin/``, ``kernels/bucket_pairs.py``): the two rows
share an LSH band and their MinHash estimate reaches the threshold (``verify="estimate"``),
or their estimate reaches :func:`lance_minhash_sql.core.banding.exact_candidate_floor` and
their exact shingle Jaccard reaches the threshold (``verify="exact"``). The rows are signed
again with the index's own parameters (the same signatures, bit for bit), and a
breadth-first search from the kept row finds a shortest chain to every member.

The search compares every row it reaches with every row of the cluster: it runs on
clusters of at most :data:`CHAIN_ROWS` rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.banding import candidate_floor
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.kernels.bucket_pairs import min_matches
from lance_minhash_sql.kernels.similarity import pair_jaccard

__all__ = ["CHAIN_ROWS", "Link", "chains"]

CHAIN_ROWS = 2_000  # largest cluster whose chains are searched (a search compares up to CHAIN_ROWS**2 pairs)


@dataclass(frozen=True)
class Link:
    """One verified link of a chain, by positions in the cluster's rows."""

    left: int
    right: int
    similarity: float  # MinHash estimate
    jaccard: float  # exact shingle Jaccard (nan when a row has no shingles)


def chains(params, texts: pa.Array, start: int, threshold: float, verify: str) -> dict[int, tuple[Link, ...]]:
    """For every row of ``texts`` (one cluster) that a chain of verified links reaches from
    row ``start``: its shortest chain, the links in order from ``start``. ``start`` maps
    to ``()``; a row no chain reaches is absent."""
    signer = signer_for(params)
    texts = texts.cast(pa.large_string())
    sigs, has = signer.sign(texts)
    keys = signer.band_keys(sigs)
    offsets, hashes = signer.shingle_sets(texts)
    k = params.num_hashes
    need = min_matches(candidate_floor(threshold, k, verify), k)
    parent = np.full(sigs.shape[0], -1, dtype=np.int64)
    parent[start] = start
    found: dict[int, tuple[Link, ...]] = {start: ()}
    frontier = [start]
    while frontier:
        nxt = []
        for u in frontier:
            eq = (sigs == sigs[u]).sum(axis=1)
            near = np.flatnonzero(has & (parent < 0) & (eq >= need) & (keys == keys[u]).any(axis=1))
            if not near.size:
                continue
            j = pair_jaccard(offsets, hashes, np.full(near.size, u, dtype=np.int64), near.astype(np.int64))
            ok = j >= threshold if verify == "exact" else np.ones(near.size, dtype=np.bool_)
            for v, jv in zip(near[ok], j[ok]):
                parent[v] = u
                found[int(v)] = found[u] + (Link(u, int(v), float(eq[v]) / k, float(jv)),)
                nxt.append(int(v))
        frontier = nxt
    return found
