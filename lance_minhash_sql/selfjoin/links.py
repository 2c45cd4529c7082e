"""The links of a self-join's clusters: which candidate pairs are verified, and how.

A cluster is a connected component of *links*, pairs of rows verified similar. Which
links are verified is the rule below; :func:`link_rule` adds how (the threshold the links
are verified at and whether by exact Jaccard) for a clustering and a ``verify`` mode, and
:func:`link_verifier` turns the rule into what verifies one loaded shard. Every executor
verifies links with these functions (``selfjoin/executor.py``, ``extras/ray_executor.py``).

**Which links are verified** (the rule, per LSH bucket, i.e. per run of equal band keys
in any band; a bucket of ``m`` live rows costs ``O(m * MAX_REPS)``, never ``O(m^2)``):

1. The bucket's members are taken in ascending row id order.
2. The first member is a *representative* (rep).
3. Every later member ``x`` is verified against **every** current rep ``y`` — MinHash
   similarity ``float32(eq) / float32(k) >= threshold`` over the full signatures, as
   :func:`.pairs.pairs` verifies — and linked to each rep it passes.
4. A member that passes no rep becomes a rep itself, while the bucket holds fewer than
   :data:`MAX_REPS` (16) reps; past that it is left unlinked in this bucket.

Clusters are the connected components of all links of all buckets (union-find). The
links depend only on each bucket's set of live rows, so the answer does not depend on
the number of shards, segments or threads.

**Compared with all-pairs clustering** (single linkage over every verified candidate
pair, i.e. the components of the graph of :func:`.pairs.pairs`):

* *Precision*: every link is a verified candidate pair, so every cluster lies inside one
  all-pairs component: rows are never put together that all-pairs clustering would keep
  apart (the clusters refine the all-pairs components).
* *Recall*: an all-pairs component can be split. A verified pair ``u < v`` (row ids)
  shares at least one bucket. There it is linked directly when ``u`` is a rep; otherwise
  ``u`` was linked to some rep ``A`` (or reps had run out) and ``v`` still lands in
  ``u``'s cluster when it passes ``A`` or any rep already connected to ``A``. The pair is
  lost only when this fails in *every* bucket the two share: non-transitive similarity
  (``u ~ A``, ``u ~ v``, but ``v`` passes only reps of other clusters, or none), or a
  bucket with more than ``MAX_REPS`` mutually dissimilar members ahead of ``u``.
  Near-duplicates at a high similarity share many bands, so they get many chances.
* *Exactness*: if in every bucket "verified" is an equivalence relation on the live
  members (the verified pairs within a bucket form disjoint cliques) and every bucket has
  at most ``MAX_REPS`` classes, the clusters equal the all-pairs components exactly: each
  class's first member becomes a rep (it fails the other classes' reps), every later
  member of the class passes it, and no link joins two classes.

**Exact verification** (``verify="exact"``): for ``clustering="components"`` the links are
every candidate pair of a bucket whose estimate reaches
:func:`lance_minhash_sql.core.banding.exact_candidate_floor` and whose exact shingle Jaccard
reaches the threshold (:func:`exact_links`): the components of the exact pairs. For
``clustering="star"`` the links are the representatives' links verified down to that floor
(a wider component, inside which the star walk compares exact Jaccard).
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, NamedTuple

import numpy as np

from lance_minhash_sql.core.errors import LowRecallWarning
from lance_minhash_sql.core.banding import candidate_floor
from lance_minhash_sql.core.params import MinHashParams, warn_if_low_recall
from lance_minhash_sql.core.tuning import DEFAULT_CHUNK_PAIRS, LINK_CHUNK
from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.kernels.bucket_pairs import link_chunk, min_matches, new_bucket_cursor, order_buckets
from lance_minhash_sql.selfjoin.verify import Verifier, data_pairs
from lance_minhash_sql.selfjoin.shards import Shard, ShardData, shard_windows
from lance_minhash_sql.selfjoin.shingles import ShingleSets

__all__ = ["MAX_REPS", "Links", "LinkRule", "link_rule", "link_verifier", "planning", "data_links", "exact_links"]

MAX_REPS = 16  # representatives per bucket: a member is verified against at most this many


class Links(NamedTuple):
    """A chunk of links, as global doc ids: ``a[i]`` is linked to ``b[i]`` (a member and
    the representative it passed, or the two rows of an exact pair)."""

    a: np.ndarray
    b: np.ndarray


@dataclass(frozen=True)
class LinkRule:
    """How one clustering's links are verified (:func:`link_rule`)."""

    threshold: float  # the similarity the links are verified at (the estimate's floor for exact star)
    exact: bool  # links are the exact pairs (components with verify="exact")
    max_reps: int  # representatives per bucket; 0: every pair of a bucket is a candidate link
    floor: bool = False  # threshold is exact star's floor (low recall was warned of for the user's threshold)


def link_rule(params: MinHashParams, threshold: float, verify: str, clustering: str) -> LinkRule:
    """The links of ``clustering`` (checked) under ``verify`` (checked) at ``threshold``
    (checked), for an index of ``params``. Exact star warns of low recall for
    ``threshold`` itself, not for the floor it links down to."""
    if verify == "exact" and clustering == "components":
        return LinkRule(threshold, True, 0)
    if verify == "exact":
        warn_if_low_recall(params, threshold)
        return LinkRule(candidate_floor(threshold, params.num_hashes, verify), False, MAX_REPS, floor=True)
    return LinkRule(threshold, False, MAX_REPS)


def link_verifier(rule: LinkRule, opened):
    """What verifies the links of one loaded shard under ``rule``, for a self-join of
    ``opened`` (an opened index): :func:`data_links`, or :func:`exact_links` over the
    rows' shingle sets, each row fetched and shingled once per self-join."""
    if rule.exact:
        return Verifier(exact_links, ShingleSets(opened))
    return Verifier(data_links)


@contextmanager
def planning(rule: LinkRule | None) -> Iterator[None]:
    """The context a self-join under ``rule`` is planned in: planning warns of low recall
    at the threshold it plans for, which for exact star is the floor; the warning was
    given for the user's threshold (:func:`link_rule`). ``None``: pairs, planned as is."""
    with warnings.catch_warnings():
        if rule is not None and rule.floor:
            warnings.simplefilter("ignore", LowRecallWarning)
        yield


def data_links(shard: Shard, data: ShardData, chunk: int = LINK_CHUNK) -> Iterator[Links]:
    """:class:`Links` chunks of a shard's loaded data (a shard, or a part of one,
    loaded over its group's pool under a memory budget: :mod:`.steps`, :mod:`.pool`), as
    global doc ids."""
    if not data.rowids_ascend():
        order_buckets(data.docs, data.slot, data.rowids, data.starts, data.ends)
    k = shard.params.num_hashes
    min_eq = min_matches(shard.threshold, k)
    cap = max(chunk, MAX_REPS)
    out_a = np.empty(cap, dtype=np.uint32)
    out_b = np.empty(cap, dtype=np.uint32)
    reps = np.empty(MAX_REPS, dtype=np.int64)
    held: list[tuple[np.ndarray, np.ndarray]] = []
    count = 0
    for w in shard_windows(data):
        cursor = new_bucket_cursor()
        done = False
        while not done:
            n, done = link_chunk(w.keys, w.docs, w.starts, w.ends, w.words, w.slot, k, min_eq, MAX_REPS, cursor,
                                 reps, out_a, out_b)
            if not n:
                continue
            if count + n > chunk and held:
                yield _concatenated(held)
                held, count = [], 0
            held.append((w.global_ids(data, out_a[:n]), w.global_ids(data, out_b[:n])))
            count += n
    if held:
        yield _concatenated(held)


def exact_links(shard: Shard, data: ShardData, chunk: int = DEFAULT_CHUNK_PAIRS, shingles: ShingleSets | None = None
                ) -> Iterator[Links]:
    """:class:`Links` chunks of a shard's loaded data for ``verify="exact"``
    components: every candidate pair of a bucket whose estimate reaches
    :func:`lance_minhash_sql.core.banding.exact_candidate_floor` and whose exact shingle
    Jaccard reaches the threshold
    (:func:`.verify.data_pairs`, the pairs of ``verify := 'exact'``), as global doc ids.
    Not the representatives' rule: a pair verified by exact Jaccard is a link whatever
    the other members of its bucket, so the components are those of all the exact pairs.
    ``shingles``: the rows' shingle sets, shared by the shards (:func:`.verify.pair_verifier`)."""
    local = sorted_unique(data.docs)
    rowid, gid = data.local_rowids(local), data.global_ids(local)
    order = np.argsort(rowid)
    rowid, gid = rowid[order], gid[order]
    for batch in data_pairs(shard, data, chunk, verify="exact", shingles=shingles):
        left = batch.column(0).to_numpy()
        right = batch.column(1).to_numpy()
        yield Links(gid[np.searchsorted(rowid, left)], gid[np.searchsorted(rowid, right)])


def _concatenated(held: list[tuple[np.ndarray, np.ndarray]]) -> Links:
    return Links(np.concatenate([a for a, _ in held]), np.concatenate([b for _, b in held]))
