"""The search's engine policy: which engine answers a search's queries, and the top-k they answer.

Two engines answer a search, each signing (query/query_sign.py) and ranking: the
kernels (query/kernel_topk.py) and, for a few short queries, numpy (query/probe.py),
which needs no numba. Both apply the same rules: the candidates of a query are the docs
sharing a band key with it, live and passing the filter; its top ``limit`` is ordered
by (mismatches, row id) over every segment at once (query/ranking.py).
tests/test_probe.py runs both on the same inputs.

The policy (``engine="auto"``) is a ski rental: loading numba costs a process about half a
second (its import and compiler set-up, the search kernels' cache loads; a fresh install
compiles them for seconds more); once loaded, the kernels are faster per query.
So a few short queries take numpy until the time this
process has spent on numpy answers reaches that cost, or until the kernels are loaded
anyway (a batch of queries, a join, a prewarmed search); then the kernels. With numba
loaded, a few queries on segments read from their files still take query/probe.py's
reads in place (no segment stores), their bucket search compiled (kernels/gather.py): for 1-16
queries it costs less than the batch kernels' windows and stores; more queries, segments
held whole in memory (there the kernels' lookups are faster), or a segment the probe
cannot read, take the kernels.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.checks import check_choice
from lance_minhash_sql.core.tuning import KERNEL_LOAD_SECONDS, whole_read_pays
from lance_minhash_sql.index.numpy_sign import NUMPY_SECONDS
from lance_minhash_sql.index.opened import OpenedIndex
from lance_minhash_sql.kernels.lsh import search_kernels_loaded
from lance_minhash_sql.query.empty_query import warn_empty_queries
from lance_minhash_sql.query.kernel_topk import kernel_topk
from lance_minhash_sql.query.probe import probe_topk, reads_files
from lance_minhash_sql.query.query_sign import MAX_QUERIES, fits, sign_texts

__all__ = ["topk", "numpy_texts", "check_engine", "ENGINES", "NUMPY_SECONDS"]


ENGINES = ("auto", "numpy", "kernels")


def check_engine(engine: Any) -> str:
    """``engine`` of a search, lower-cased: one of :data:`ENGINES`."""
    return check_choice("engine", engine, ENGINES, "a search engine",
                        "'auto' (numpy for a few short queries until numba pays for itself, the default), "
                        "'numpy' (numpy whenever the queries are few and short) or 'kernels' (always numba)")


def numpy_texts(texts: pa.Array, engine: str = "auto") -> list[str] | None:
    """The query texts when the numpy engine is to answer them, else None (the kernels).

    ``engine="kernels"`` never takes numpy; ``"numpy"`` takes it whenever the queries fit
    it (:func:`.query_sign.fits`: a few short ones); ``"auto"`` applies the ski rental
    above. The numpy engine may still decline at the index (:func:`.probe.probe_topk`: an
    object store, too many candidates); the kernels then answer."""
    if engine == "kernels" or len(texts) > MAX_QUERIES:
        return None
    if engine == "auto" and (search_kernels_loaded()
                             or whole_read_pays(NUMPY_SECONDS.value, 0.0, KERNEL_LOAD_SECONDS)):
        return None
    few = texts.to_pylist()
    return few if fits(few) else None


def topk(opened: OpenedIndex, texts: pa.Array, limit: int, *, fast_search: bool = False,
         filter: str | None = None, engine: str = "auto", numbers=None,
         threshold: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(query_index int64, _rowid uint64, _distance float32)`` of every query's top ``limit``,
    ordered by query, then ``(distance, row id)``; ``engine`` as :func:`numpy_texts`;
    ``numbers``: how warnings number the queries (:func:`.empty_query.warn_empty_queries`);
    ``threshold``: a threshold search, whose queries sharing no band are answered (no row
    reaches it), not warned about."""
    engine = check_engine(engine)
    t0 = time.thread_time()
    view = opened.search_view(fast_search, filter)
    few = numpy_texts(texts, engine)
    has, active, qsigs, qkeys = sign_texts(view.signer, texts, few)
    # numba loaded, a few queries on segments read from their files: the probe's reads in place
    in_place = few is None and engine == "auto" and 0 < active.size <= MAX_QUERIES and reads_files(view.entries)
    answer = None
    if active.size == 0:  # no query has tokens: nothing to look up, no candidate counts
        answer = np.empty(0, np.int64), np.empty(0, np.uint64), np.empty(0, np.float32), None
    elif few is not None or in_place:
        answer = probe_topk(view.entries, qsigs, qkeys, limit, view.ok_of, compiled=in_place)
        if few is not None:
            NUMPY_SECONDS.add(time.thread_time() - t0)
    if answer is None:
        answer = kernel_topk(view.entries, qsigs, qkeys, limit, view.ok_of, view.checked)
    q, rid, dist, counts = answer
    warn_empty_queries(texts, has, None if threshold else counts, numbers)
    return active[q].astype(np.int64), rid, dist
