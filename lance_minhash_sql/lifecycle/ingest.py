"""``ingest``: append a batch's new rows to a corpus and extend the corpus index over them,
as one outcome (``docs/pipelines.md``).

>>> import lance_minhash_sql as lms
>>> lms.ingest("corpus.lance", "batch.lance", "text", 0.8, verify="exact")  # doctest: +SKIP
IngestResult(rows_offered=2000, rows_appended=1712, rows_dropped=288, dataset_version=9, index_action='delta', ...)

Steps, all on the corpus version read at the start:

1. the batch's columns must be the corpus's (names and types; :func:`..io.append.check_appendable`),
   checked before any work;
2. without a MinHash index on the column, the corpus is indexed first (``index_action =
   'build'``, with bands chosen for ``threshold``): a commit of its own, which leaves the
   corpus's rows as they were;
3. the plan (:func:`..selfjoin.ingest.plan_ingest`): the batch rows to keep;
4. the kept rows, every column, in row id order, are appended as new fragments, and the
   index is extended over every fragment it does not cover by :func:`.optimize.optimize`
   (the kept rows signed by the plan: their texts are not read again): a delta segment,
   or, when the index would then hold more than
   :data:`~lance_minhash_sql.core.tuning.INGEST_MAX_SEGMENTS` segments, one segment merged from
   the new rows and every segment but the largest (``index_action`` ``'delta'`` or
   ``'merge'``); both commits are detached versions;
5. the last of them becomes the corpus's next version in one commit
   (:func:`..io.append.publish`), checked to hold exactly the rows read plus the rows kept.

Whole or absent: the corpus shows the version read, or the next one with the rows and
an index covering them; a run killed at any moment leaves the former, and a rerun plans
again on whatever the corpus holds. A rerun after a run that completed finds every
batch row in the corpus (each is its own twin) and appends none. Ingests into one local
corpus run one at a time (:func:`..io.append.ingest_lock`); any other write that lands
while an ingest runs makes it fail with nothing appended.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.checks import check_bool, check_threshold, check_verify
from lance_minhash_sql.core.errors import DatasetError
from lance_minhash_sql.core.tuning import INGEST_MAX_SEGMENTS, TAKE_ROWS
from lance_minhash_sql.index.results import IngestResult
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.io import manifest
from lance_minhash_sql.io.append import append_detached, check_appendable, ingest_lock, publish
from lance_minhash_sql.io.handles import dataset_handle, options_for
from lance_minhash_sql.io.scan import open_dataset, row_count, schema_of, text_field, version_of
from lance_minhash_sql.io.takes import take_rows
from lance_minhash_sql.lifecycle.optimize import KnownSignatures, optimize
from lance_minhash_sql.runtime.memory import bounded_heap, trim_heap
from lance_minhash_sql.selfjoin.dedup import check_keep
from lance_minhash_sql.selfjoin.executor import LOCAL, Executor
from lance_minhash_sql.selfjoin.ingest import plan_ingest

__all__ = ["IngestResult", "ingest", "merge_choice"]


def merge_choice(segments) -> list[str] | int:
    """What the index update merges (:func:`.optimize.optimize`'s ``merge``): nothing (0, a
    delta segment) while the index holds fewer than :data:`INGEST_MAX_SEGMENTS` segments,
    else the uuids of every segment but the largest (by bytes; ties to the oldest)."""
    if len(segments) < INGEST_MAX_SEGMENTS:
        return 0
    largest = max(range(len(segments)), key=lambda i: (segments[i].size_bytes or 0, -i))
    return [s.uuid for i, s in enumerate(segments) if i != largest]


def _kept_batches(batch_ds, rowids: np.ndarray, schema: pa.Schema, uri: str):
    """The kept rows, every column of ``schema`` (the corpus's), :data:`TAKE_ROWS` at a time."""
    for s in range(0, rowids.size, TAKE_ROWS):
        t = take_rows(batch_ds, rowids[s:s + TAKE_ROWS], schema.names, "the ingest", uri)
        yield from t.select(schema.names).cast(schema).to_batches()


def ingest(corpus, batch, column: str, threshold: float = 0.8, *, verify: str = "estimate",
           order_by: str | None = None, memory_limit=None, corpus_storage_options: dict | None = None,
           batch_storage_options: dict | None = None, executor: Executor = LOCAL,
           progress: bool = False) -> IngestResult:
    """Append the rows of ``batch`` that :func:`..selfjoin.ingest.ingest_plan` keeps to
    ``corpus`` and bring its MinHash index on ``column`` up to date, in one new version
    (the module doc). ``memory_limit`` bounds the plan's join and the index update.
    Raises :class:`DatasetError` (columns that differ, a concurrent write),
    :class:`InvalidParameterError`; the corpus is then unchanged."""
    t0 = time.perf_counter()
    threshold = check_threshold(threshold)
    verify = check_verify(verify)
    _, order_by = check_keep("first", order_by)
    budget = Budget.parse(memory_limit)
    progress = check_bool("progress", progress)
    corpus_options = options_for(corpus, corpus_storage_options)
    batch_options = options_for(batch, batch_storage_options)
    corpus_uri, _ = dataset_handle(corpus, corpus_options)
    batch_uri, batch_ds = dataset_handle(batch, batch_options)
    with ingest_lock(corpus_uri):
        corpus_ds = open_dataset(corpus_uri, corpus_options)  # the latest, read under the lock
        text_field(corpus_ds, column, corpus_uri)
        text_field(batch_ds, column, batch_uri)
        check_appendable(schema_of(corpus_ds), schema_of(batch_ds), corpus_uri, batch_uri)
        action = None
        if not manifest.minhash_segments(corpus_ds, column):
            build_index(corpus_ds, column, threshold=threshold, memory_limit=memory_limit,
                        storage_options=corpus_options, progress=progress)
            corpus_ds = open_dataset(corpus_uri, corpus_options)
            action = "build"
        read_version = version_of(corpus_ds)
        rows_before = row_count(corpus_ds)
        plan = plan_ingest(corpus_ds, batch_ds, column, threshold, verify, order_by, budget, corpus_options,
                           batch_options, executor)
        kept = plan.kept_rowids
        trim_heap()  # (the plan's arrays are gone: hand their pages back before the append reads rows)
        offered = plan.table.num_rows
        schema = schema_of(corpus_ds)
        with bounded_heap():  # (the rows read for the append handed back once written)
            appended = (append_detached(corpus_ds, _kept_batches(batch_ds, kept, schema, batch_uri), schema,
                                        corpus_options) if kept.size else corpus_ds)
        trim_heap()
        segments = manifest.minhash_segments(appended, column)
        segments = [s for s in segments if s.name == segments[0].name]
        before = set(manifest.fragment_ids(corpus_ds))
        known = KnownSignatures(tuple(f for f in manifest.fragment_ids(appended) if f not in before),
                                plan.kept_sigs, plan.kept_has)
        del plan
        update = optimize(appended, column, merge=merge_choice(segments), memory_limit=memory_limit,
                          storage_options=corpus_options, progress=progress, detached_as=read_version + 1,
                          known=known if known.fragment_ids else None)
        del known
        if update.action == "none" and not kept.size:
            return IngestResult(offered, 0, offered, read_version, action or "none",
                                round(time.perf_counter() - t0, 3))
        final = publish(corpus_uri, read_version, update.dataset_version if update.action != "none"
                        else version_of(appended), corpus_options)
        got = row_count(final)
        if got != rows_before + kept.size:
            raise DatasetError(
                f"the ingest into {corpus_uri!r} made version {version_of(final)} with {got:,} rows, but "
                f"{rows_before:,} + {kept.size:,} were expected; version {read_version} is intact: "
                f"lance.dataset({corpus_uri!r}, version={read_version})")
    return IngestResult(offered, int(kept.size), offered - int(kept.size), version_of(final),
                        action or update.action, round(time.perf_counter() - t0, 3))
