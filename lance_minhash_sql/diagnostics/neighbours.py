"""The near-duplicates of sampled rows, found by threshold search, and the components and
star walks around them (what :mod:`.estimate` counts; ``docs/estimate.md``).

A row's *neighbours* are what a threshold search of its own text returns
(:func:`lance_minhash_sql.query.engine.topk` with no limit; searched here by
:mod:`.lookups`, whose cost per row does not grow with the corpus), its own hit removed:
the live rows sharing a band key with it, scored over the full signatures. They are exactly the
row's pairs in the self-join (same candidate rule, same verification:
:func:`lance_minhash_sql.query.scores.verified`), so a row has a pair in ``minhash_pairs``
iff it has a neighbour. Hits are kept down to the lowest estimate any asked threshold
needs (with ``verify="exact"`` the exact Jaccard of each hit too) and cut per threshold.
A row with many candidates may keep the hits of a random subset of them only
(:mod:`.lookups`): :meth:`Neighbourhoods.degree` then scales its count.

:meth:`Neighbourhoods.explore` walks the link graph outwards from each sampled row,
breadth first, in rounds: every round searches, in one batch, the next rows of every
walk's queue (one row at first, twice as many each round; texts fetched by row id in row
order), until a component is complete or holds ``cap`` rows.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.tuning import ESTIMATE_VERIFY_ROWS, STAR_BUCKET_CENTERS
from lance_minhash_sql.diagnostics.lookups import ENOUGH, candidates, verify_some
from lance_minhash_sql.index.opened import OpenedIndex
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io.scan import take_texts
from lance_minhash_sql.kernels.star import star_walk
from lance_minhash_sql.core.banding import candidate_floor
from lance_minhash_sql.query.scores import at_threshold, exact_scores, verified
from lance_minhash_sql.selfjoin.verify import candidate_matches

__all__ = ["Neighbourhoods", "Component"]


class Component:
    """The rows of a sampled row's component found by :meth:`Neighbourhoods.explore`:
    ``members`` (row ids, sorted), and ``complete`` False when the walk stopped at ``cap``."""

    __slots__ = ("members", "complete")

    def __init__(self, members: np.ndarray, complete: bool):
        self.members = members
        self.complete = complete


class Neighbourhoods:
    """The neighbours, signatures (and with ``verify="exact"`` shingle sets) of the rows
    searched so far, by row id."""

    def __init__(self, opened: OpenedIndex, thresholds: list[float], verify: str, seed: int = 0):
        self.opened = opened
        self.thresholds = list(thresholds)
        self.rng = np.random.default_rng(seed)  # the subsets of candidates verified (.lookups)
        self.params = opened.params
        self.k = opened.params.num_hashes
        self.verify = verify
        self.exact = verify == "exact"
        self.cut = min(candidate_floor(t, self.k, verify) for t in thresholds)
        self.signer = signer_for(opened.params)
        # the hits of each searched batch (row ids, distances, exact Jaccard or None), and
        # each searched row's span in its batch; masks per (batch, threshold, kind), lazily
        self.blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []
        self.hits: dict[int, tuple[int, int, int]] = {}
        self.masks: dict[tuple[int, float, str], np.ndarray] = {}
        self.sigs: dict[int, np.ndarray] = {}
        self.sets: dict[int, np.ndarray] = {}
        self.share: dict[int, tuple[int, int]] = {}  # per searched row: (candidates, verified)
        self.searched = 0  # rows searched
        self.hit_count = 0  # hits kept (down to the lowest cut)

    # ------------------------------------------------------------------ searching

    def add(self, rowids: np.ndarray, texts: pa.Array) -> np.ndarray:
        """Search the rows ``rowids`` (their texts ``texts``) and keep what they find
        (:mod:`.lookups`: all their candidates verified, or a subset); returns each row's
        candidates (live rows sharing a band key with it, itself included)."""
        if rowids.size == 0:
            return np.empty(0, np.int64)
        sigs, has = self.signer.sign(texts)
        view = self.opened.search_view()
        active = np.flatnonzero(has)
        qsigs = readonly(np.ascontiguousarray(sigs[active]))
        found = candidates(view, readonly(np.ascontiguousarray(self.signer.band_keys(qsigs))))
        own = rowids[active]

        def enough(q, rid, dist) -> np.ndarray:
            keep = (rid != own[q]) & at_threshold(dist, self.k, self.cut)
            q, dist = q[keep], dist[keep]
            jac = exact_scores(self.opened, texts, active[q], rid[keep]) if self.exact else None
            counts = [np.bincount(q[verified(dist, jac, self.k, t, self.verify)], minlength=active.size)
                      for t in self.thresholds]
            if self.exact:  # the star walk's links, down to the exact floor
                counts += [np.bincount(q[at_threshold(dist, self.k, candidate_floor(t, self.k, "exact"))],
                                       minlength=active.size) for t in self.thresholds]
            return np.minimum.reduce(counts) >= ENOUGH

        q, rid, dist, checked = verify_some(view, qsigs, found, self.rng, ESTIMATE_VERIFY_ROWS, enough)
        q = active[q]
        keep = (rid != rowids[q]) & at_threshold(dist, self.k, self.cut)
        q, rid, dist = q[keep], rid[keep], dist[keep]
        jac = exact_scores(self.opened, texts, q, rid) if self.exact else None
        bounds = np.searchsorted(q, np.arange(rowids.size + 1))
        total = np.zeros(rowids.size, np.int64)
        total[active] = found.total
        done = np.zeros(rowids.size, np.int64)
        done[active] = checked
        if self.exact:
            offsets, hashes = self.signer.shingle_sets(texts)
        block = len(self.blocks)
        self.blocks.append((rid, dist, jac))
        for i, r in enumerate(rowids.tolist()):
            self.hits[r] = (block, int(bounds[i]), int(bounds[i + 1]))
            self.sigs[r] = sigs[i] if has[i] else None
            self.share[r] = (int(total[i]), int(done[i]))
            if self.exact:
                self.sets[r] = hashes[offsets[i]:offsets[i + 1]]
        self.searched += rowids.size
        self.hit_count += int(rid.size)
        return total

    def fetch(self, rowids) -> None:
        """Search the rows of ``rowids`` not searched yet (texts fetched by row id)."""
        todo = np.array(sorted(r for r in set(rowids) if r not in self.hits), dtype=np.uint64)
        if todo.size:
            self.add(todo, take_texts(self.opened.ds, self.opened.column, todo, self.opened.uri))

    # ------------------------------------------------------------------ links at a threshold

    def _links(self, rowid: int, threshold: float, kind: str) -> np.ndarray:
        block, a, b = self.hits[rowid]
        mask = self.masks.get((block, threshold, kind))
        if mask is None:
            rid, dist, jac = self.blocks[block]
            if kind == "pair":
                mask = verified(dist, jac, self.k, threshold, self.verify)
            else:
                mask = at_threshold(dist, self.k, candidate_floor(threshold, self.k, "exact"))
            self.masks[(block, threshold, kind)] = mask
        return self.blocks[block][0][a:b][mask[a:b]]

    def pair_links(self, rowid: int, threshold: float) -> np.ndarray:
        """The row's pairs at ``threshold`` (the self-join's rule under ``verify``)."""
        return self._links(rowid, threshold, "pair")

    def star_links(self, rowid: int, threshold: float) -> np.ndarray:
        """The links the star walk's components are made of: the pairs, or with
        ``verify="exact"`` every candidate whose estimate reaches the exact floor."""
        return self._links(rowid, threshold, "star" if self.exact else "pair")

    def degree(self, rowids: np.ndarray, threshold: float, star: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(count, variance)`` of each row's pairs at ``threshold`` (``star``: its star
        links): the count of its hits, or for a row whose subset of candidates was
        verified (:mod:`.lookups`) ``n h / s``, with the variance of that draw,
        ``n^2 (1 - s / n) p (1 - p) / (s - 1)`` (``p = h / s``; 0 when all were verified)."""
        links = self.star_links if star else self.pair_links
        h = np.array([links(r, threshold).size for r in rowids.tolist()], dtype=np.float64)
        n, s = (np.array(v, dtype=np.float64) for v in zip(*(self.share[r] for r in rowids.tolist()))) \
            if rowids.size else (np.zeros(0), np.zeros(0))
        part = (s > 1) & (s < n)
        count = np.where(part, h * n / np.maximum(s, 1), h)
        p = h / np.maximum(s, 1)
        var = np.where(part, n * n * (1 - s / np.maximum(n, 1)) * p * (1 - p) / np.maximum(s - 1, 1), 0.0)
        return count, var

    # ------------------------------------------------------------------ components

    def explore(self, starts: np.ndarray, links: Callable[[int], np.ndarray], cap: int) -> list[Component]:
        """The component of each row of ``starts`` in the graph of ``links``, walked
        breadth first until it is complete or holds ``cap`` rows: in rounds, each
        searching in one batch the next rows of every walk's queue, one at first and
        twice as many each round (a walk that fills its cap from a few rows' links
        searches no more)."""
        members = [{int(r)} for r in starts.tolist()]
        queue = [[int(r)] for r in starts.tolist()]
        done = [0] * starts.size  # rows of each queue expanded
        step = [1] * starts.size
        complete = [False] * starts.size
        active = list(range(starts.size))
        while active:
            self.fetch([u for i in active for u in queue[i][done[i]:done[i] + step[i]]])
            still = []
            for i in active:
                full = False
                turn = queue[i][done[i]:done[i] + step[i]]
                for u in turn:
                    for v in links(u).tolist():
                        if v not in members[i]:
                            members[i].add(v)
                            queue[i].append(v)
                            if len(members[i]) >= cap:
                                full = True
                                break
                    if full:
                        break
                if full:
                    continue
                done[i] += len(turn)
                step[i] *= 2
                if done[i] < len(queue[i]):
                    still.append(i)
                else:
                    complete[i] = True
            active = still
        return [Component(np.array(sorted(m), dtype=np.uint64), c) for m, c in zip(members, complete)]

    def star_dropped(self, row: int, comp: Component, threshold: float) -> bool:
        """Whether star's walk drops ``row``: :func:`lance_minhash_sql.kernels.star.star_walk`
        (the rule of :mod:`lance_minhash_sql.selfjoin.star`) over the component's members
        walked by row id as one chunk (those searched, so all of a complete component), with
        the self-join's floor (:func:`candidate_matches`) and bucket cap
        (:data:`STAR_BUCKET_CENTERS`)."""
        walk = [r for r in comp.members.tolist() if r in self.hits and self.sigs.get(r) is not None]
        if row not in walk:
            return False
        n = len(walk)
        sigs = np.stack([self.sigs[r] for r in walk])
        keys = readonly(np.ascontiguousarray(self.signer.band_keys(sigs), dtype=np.uint64))
        sets = [self.sets[r] for r in walk] if self.exact else []
        offsets = readonly(np.concatenate(([0], np.cumsum([s.size for s in sets], dtype=np.int64))).astype(np.int64)
                           if self.exact else np.zeros(n + 1, dtype=np.int64))
        hashes = readonly(np.concatenate(sets).astype(np.uint64) if sets else np.empty(0, dtype=np.uint64))
        twin = star_walk(sigs, keys, offsets, hashes, np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64),
                         np.zeros(keys.shape, dtype=np.int64), np.int64(STAR_BUCKET_CENTERS),
                         np.int64(candidate_matches(threshold, self.k, self.verify)), float(threshold), self.exact)[0]
        return bool(twin[walk.index(row)] >= 0)
