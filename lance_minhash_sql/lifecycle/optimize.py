"""``optimize``: keep a MinHash LSH index current as the dataset changes, as Lance's own
``ds.optimize.optimize_indices()`` does, through the build's own pipeline.

What pylance 14.0.2 does with a ``MINHASHLSH`` index (``docs/index-format.md``):

* ``optimize_indices(num_indices_to_merge=0)`` adds a *delta segment* over the fragments
  no segment covers (appended since), signed with the parameters stored in the index;
* ``optimize_indices(num_indices_to_merge=N)`` (N defaults to 1) rewrites the newest N
  segments and the unindexed rows into one segment: the stored signatures of the old
  segments first (manifest order, doc order), then the new rows in scan order; the text
  of the old rows is never read again. With N >= 2 rows deleted since are dropped; with
  nothing unindexed and fewer than two segments to merge it does nothing.

``optimize(dataset, column, merge=...)`` does the same, with ``merge`` = 0 (delta
segment only), N (the newest N segments), ``"all"``, or a list of segment uuids (a
chosen group). Differences, on purpose: a rewrite always drops rows deleted since (Lance
keeps them when it appends new rows to a single segment, and masks them at query time;
answers are identical), and a segment older than a compaction whose index remap was
deferred (see :mod:`..io.rowids`) is rewritten with its remapped row ids even when
nothing else changed, so ``optimize`` after ``compact_files(defer_index_remap=True)``
brings the index up to date.

Steps: resolve the index (segments of the column's MinHash index, their parameters, which
must be identical: :class:`ParameterMismatchError` otherwise); choose the segments to
rewrite and the unindexed fragments; stream the rows (stored signatures with their row
ids mapped through the fragment-reuse index and deleted rows dropped, then the new rows
signed with the stored parameters) through :func:`..indexer.builder.write_segment`, which writes the
segment files and commits them in one ``CreateIndex`` (new segment in, rewritten segments
out) on top of the version read. A failed optimize removes its files and commits nothing.
"""

from __future__ import annotations

import json
import numbers
import time
from typing import Any, NamedTuple

import numpy as np

from lance_minhash_sql.indexer.builder import (SCAN_FRAGMENTS, check_segment_rows, cleanup_leftovers, resolve_dataset,
                                             signed_batches, write_segment)
from lance_minhash_sql.core.checks import check_bool
from lance_minhash_sql.core.errors import DatasetError, InvalidParameterError, ParameterMismatchError
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.index.entries import needs_remap
from lance_minhash_sql.io.manifest import missing_index
from lance_minhash_sql.index.results import OptimizeResult
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.index.band_sorter import plan_sort
from lance_minhash_sql.io import manifest
from lance_minhash_sql.io.liveness import Liveness
from lance_minhash_sql.io.rowids import live_rowids, remap
from lance_minhash_sql.io.handles import options_for
from lance_minhash_sql.io.scan import (fragment_objects, fragment_rows, scan_text, text_field, uri_of,
                                      version_of)
from lance_minhash_sql.io.segments import iter_signatures, open_segment

__all__ = ["KnownSignatures", "OptimizeResult", "optimize", "parse_merge"]

ALL = "all"


def parse_merge(merge: Any, segment_uuids: list[str]) -> list[str]:
    """The uuids (in manifest order) of the segments ``merge`` selects: 0 → none, N → the
    newest N (all when N exceeds the count, as Lance does), ``"all"``, or a list of uuids."""
    fix = ("pass 0 (a delta segment for new fragments only), a number N of newest segments to merge "
           "(Lance's num_indices_to_merge, default 1), 'all', or a list of segment uuids from minhash_indexes")
    if isinstance(merge, str):
        if merge.strip().lower() == ALL:
            return list(segment_uuids)
        try:
            merge = json.loads(merge)
        except ValueError:
            raise InvalidParameterError(f"merge={merge!r} is not understood; {fix}") from None
        if isinstance(merge, str):
            return parse_merge(merge, segment_uuids) if merge.strip().lower() == ALL else \
                parse_merge([merge], segment_uuids)
    if isinstance(merge, bool) or merge is None:
        raise InvalidParameterError(f"merge={merge!r} is not a number of segments; {fix}")
    if isinstance(merge, numbers.Real):
        if float(merge) != int(merge) or merge < 0:
            raise InvalidParameterError(f"merge={merge!r} must be a whole number >= 0; {fix}")
        n = int(merge)
        return list(segment_uuids[len(segment_uuids) - n:]) if n else []
    if isinstance(merge, (list, tuple)):
        if not merge or not all(isinstance(u, str) for u in merge):
            raise InvalidParameterError(f"merge={merge!r} must be a non-empty list of segment uuids; {fix}")
        unknown = [u for u in merge if u not in segment_uuids]
        if unknown:
            raise InvalidParameterError(
                f"merge names segment(s) {unknown} that the index does not have; its segments are "
                f"{segment_uuids}; {fix}")
        chosen = set(merge)
        return [u for u in segment_uuids if u in chosen]
    raise InvalidParameterError(f"merge={merge!r} has type {type(merge).__name__}; {fix}")


def _index_params(ds, column: str, segments, files: dict) -> MinHashParams:
    """The index's parameters: every segment's files must record the same ones."""
    params = None
    first = None
    for seg in segments:
        p = files[seg.uuid].params
        if params is None:
            params, first = p, seg
            continue
        diff = p.differences(params)
        if diff:
            raise ParameterMismatchError(
                f"cannot optimize the MinHash LSH index {seg.name!r} on {column!r} of {uri_of(ds)!r}: segment "
                f"{seg.uuid} has other parameters than segment {first.uuid}: {'; '.join(diff)}. Rule: the "
                "segments of an index must share identical parameters to be merged or searched together "
                f"(Lance refuses such an index too). Fix: rebuild it with minhash_build('{uri_of(ds)}', "
                f"'{column}', replace := true); nothing was changed")
    return params


def _stored_rows(ds, segments, files: dict, reuse, stats: dict):
    """``(row ids, signatures, rows read)`` of the segments' live rows, in manifest then doc
    order, row ids mapped through the fragment-reuse index."""
    liveness = Liveness.of_every_row(ds)
    for seg in segments:
        stale = needs_remap(seg, reuse)
        for rowids, sigs in iter_signatures(files[seg.uuid]):
            n = len(rowids)
            keep = np.ones(n, dtype=np.bool_)
            if stale:
                rowids, keep = remap(ds, rowids)
            keep &= liveness.alive(rowids)
            if not keep.all():
                idx = np.flatnonzero(keep)
                rowids, sigs = rowids[idx], sigs[idx]
            stats["dropped"] = stats.get("dropped", 0) + n - len(rowids)
            yield rowids, sigs, n
            del rowids, sigs, keep


class KnownSignatures(NamedTuple):
    """Signatures of the rows of some fragments that the caller holds already (an ingest
    signed its batch to plan it): row ``i`` of ``fragment_ids``' rows, in their order, has
    a signature iff ``has[i]``, the next row of ``sigs`` (the index's parameters)."""

    fragment_ids: tuple[int, ...]
    sigs: np.ndarray  # uint16[has.sum(), k]
    has: np.ndarray  # bool[rows of the fragments]


def _known_rows(ds, known: KnownSignatures, step: int, stats: dict):
    """``(row ids, signatures, rows read)`` of ``known``'s fragments, ``step`` rows at a
    time, as :func:`..indexer.builder.signed_batches` gives them (their row ids from a
    row-id-only scan: no text is read)."""
    rowids = live_rowids(ds, known.fragment_ids)
    if rowids.size != known.has.size:
        raise DatasetError(f"fragments {list(known.fragment_ids)} hold {rowids.size:,} rows, but "
                           f"{known.has.size:,} signed rows were given for them; nothing was committed")
    done = 0
    for a in range(0, rowids.size, step):
        has = known.has[a:a + step]
        n = int(has.sum())
        stats["scanned"] = stats.get("scanned", 0) + has.size
        yield rowids[a:a + step][has], known.sigs[done:done + n], has.size
        done += n


def _new_rows(ds, column: str, params: MinHashParams, plan, frag_objs: list, known: KnownSignatures | None,
              stats: dict):
    """``(row ids, signatures, rows read)`` of the fragments ``frag_objs``: scanned and
    signed with ``params``, but for the fragments whose signatures are ``known``."""
    own = set(known.fragment_ids) if known is not None else set()
    to_sign = [f for f in frag_objs if f.fragment_id not in own]
    if to_sign:
        batches = scan_text(ds, column, fragments=to_sign, batch_rows=plan.scan_rows, batch_readahead=plan.readahead,
                            fragment_readahead=SCAN_FRAGMENTS, io_buffer_size=plan.io_buffer)
        yield from signed_batches(signer_for(params), batches, stats)
    if own:
        yield from _known_rows(ds, known, plan.scan_rows, stats)


def optimize(dataset, column: str, *, merge: Any = 1, memory_limit=None, temp_dir: str | None = None,
             storage_options: dict | None = None, progress: bool = False, detached_as: int | None = None,
             known: KnownSignatures | None = None) -> OptimizeResult:
    """Bring the MinHash LSH index of ``column`` up to date; see the module docstring.

    ``merge``: 0 adds a delta segment for the fragments no segment covers; N (default 1,
    as Lance) rewrites the newest N segments together with those rows into one segment;
    ``"all"`` every segment; a list of segment uuids those segments. New rows are signed
    with the parameters stored in the index. ``memory_limit`` / ``temp_dir`` bound the band
    sort as in :func:`~..indexer.builder.build_index`. ``detached_as``: the commit is a detached
    version (``io/append.py``: :func:`~..io.append.publish` makes it version ``detached_as``),
    whose number the result's ``dataset_version`` gives. ``known``: the signatures of some
    of the new fragments' rows, held by the caller (their texts are then not read again).

    Raises :class:`IndexNotFoundError` (no index on the column), :class:`ParameterMismatchError`
    (segments with different parameters), :class:`InvalidParameterError`, :class:`DatasetError`;
    the dataset is then unchanged.
    """
    t0 = time.perf_counter()
    storage_options = options_for(dataset, storage_options)
    ds = resolve_dataset(dataset, storage_options)
    text_field(ds, column)
    progress = check_bool("progress", progress)
    all_segments = manifest.minhash_segments(ds, column)
    if not all_segments:
        raise missing_index(ds, uri_of(ds), column, "to optimize")
    name = all_segments[0].name
    segments = [s for s in all_segments if s.name == name]
    chosen = set(parse_merge(merge, [s.uuid for s in segments]))
    selected = [s for s in segments if s.uuid in chosen]
    files = {s.uuid: open_segment(manifest.segment_dir(ds, s.uuid), storage_options, s.size_bytes) for s in segments}
    params = _index_params(ds, column, segments, files)

    current = manifest.fragment_ids(ds)
    covered = set().union(*(s.fragment_ids for s in segments))
    new_frags = [f for f in current if f not in covered]
    reuse = manifest.frag_reuse(ds)
    stale = any(needs_remap(s, reuse) for s in selected)
    action = "merge" if selected else "delta"
    if not new_frags and len(selected) < 2 and not stale:
        return OptimizeResult(name, column, "none", len(segments), len(segments), 0, (), 0, 0, 0, 0, None,
                              time.perf_counter() - t0, 0, version_of(ds))

    frag_objs = fragment_objects(ds, new_frags)
    new_rows = fragment_rows(ds, new_frags)
    stored_rows = sum(files[s.uuid].num_docs for s in selected)
    total = stored_rows + new_rows
    check_segment_rows(ds, total)
    plan = plan_sort(max(total, 1), params.num_bands, memory_limit, temp_dir, num_hashes=params.num_hashes)
    current_set = set(current)
    fragments = sorted({f for s in selected for f in s.fragment_ids if f in current_set} | set(new_frags))

    cleanup_leftovers(uri_of(ds), storage_options)
    stats: dict = {}

    if known is not None and set(known.fragment_ids) - set(new_frags):
        raise InvalidParameterError(f"known signatures of fragments {sorted(set(known.fragment_ids) - set(new_frags))}"
                                    ", which no new segment would cover")

    def rows():
        yield from _stored_rows(ds, selected, files, reuse, stats)
        yield from _new_rows(ds, column, params, plan, frag_objs, known, stats)

    def commit(seg):
        return manifest.commit_replacing(ds, name, column, [seg], removed=selected, storage_options=storage_options,
                                         detached_as=detached_as)

    w = write_segment(ds, params, fragments, plan, rows(), commit=commit, progress_rows=total,
                      progress=progress, storage_options=storage_options,
                      desc="merging" if selected else "signing")
    scanned = stats.get("scanned", 0)
    kept_stored = stored_rows - stats.get("dropped", 0)
    added = w.rows - kept_stored
    return OptimizeResult(
        index_name=name, column=column, action=action, segments_before=len(segments),
        segments_after=len(segments) - len(selected) + 1, merged_segments=len(selected),
        new_fragments=tuple(new_frags), rows_indexed=w.rows, rows_added=added,
        rows_dropped=stats.get("dropped", 0), rows_without_tokens=scanned - added,
        segment_uuid=w.seg.uuid, seconds=round(time.perf_counter() - t0, 3), bytes=w.bytes,
        dataset_version=version_of(w.dataset))
