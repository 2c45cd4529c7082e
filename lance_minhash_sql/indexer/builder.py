"""``build_index``: Lance's own ``MINHASHLSH`` index, written by this package's engine.

One build writes one segment, ``_indices/<uuid>/{signatures,bands}.lance`` (``docs/index-format.md``),
and registers it with one ``CreateIndex`` commit on top of the version it read
(removing the column's earlier MinHash segments when replacing), so Lance itself
answers ``MinHashQuery`` with it and other readers see either the old index or the new
one, never a mix.

Steps: validate everything (dataset, column, parameters, names, limits, room for spill
files) before writing anything; stream ``scan_text`` batches in scan order, sign them
(parallel numba kernel, or numpy in a small build: :func:`signed_batches`), keep the
rows with a signature (doc id = running count), append them to ``signatures.lance``
and hand their band keys to the sorter
(:mod:`..index.band_sorter`); write the band rows in global ``(band_key, doc_id)`` order to
``bands.lance``; commit.

Rules decided here:

* An **all-NULL column**, or one where no row has a token, is refused with
  :class:`DatasetError` (Lance would commit an empty index that can never answer). This is
  known only after the scan; the segment folder is then removed and nothing is committed.
* ``rows_without_tokens`` counts NULL rows and rows whose text has no token.
* ``replace=True`` removes every MinHash segment of the column (whatever its index
  name); with ``name=None`` the new index keeps the existing MinHash index's name, else
  ``<column>_idx`` as Lance names it. An index of another type with the target name is
  always an error, as is ``replace=False`` when the column has a MinHash index.
* More rows than :data:`MAX_SEGMENT_ROWS` (doc ids are u32) is refused from
  ``count_rows()`` before any work.

Atomicity: on any exception (``KeyboardInterrupt`` included) the new segment folder
and the spill folder are removed and nothing is committed. Against ``kill -9`` each
build records a marker ``<tmp>/lance-minhash-builds-<uid>/<segment uuid>.json``
(dataset URI, segment path, spill folder, pid, process start, start time, version read);
every build first removes the leftovers of dead builds on the same dataset whose
segment no manifest references (the latest one, and every version after the one the
dead build read).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from lance_minhash_sql.core.checks import check_bool
from lance_minhash_sql.core.errors import DatasetError, InvalidInputError, InvalidParameterError, ResourceLimitError
from lance_minhash_sql.core.params import MAX_SEGMENT_ROWS, MinHashParams
from lance_minhash_sql.core.tuning import BAND_WRITE_ROWS, SCAN_FRAGMENTS
from lance_minhash_sql.index.results import BuildResult
from lance_minhash_sql.index.sign import sign_by_cost, signer_for
from lance_minhash_sql.index.band_sorter import SPILL_PREFIX, BandSorter, plan_sort
from lance_minhash_sql.io import manifest, store
from lance_minhash_sql.io.details import TYPE_URL
from lance_minhash_sql.io.handles import options_for
from lance_minhash_sql.io.scan import (fragment_objects, open_dataset, row_count, scan_text, text_field, uri_of,
                                       version_of)
from lance_minhash_sql.io.segment_writers import BandsWriter, SignaturesWriter
from lance_minhash_sql.io.segments import BANDS_FILE, SIGNATURES_FILE
from lance_minhash_sql.runtime.memory import bounded_heap, release_memory
from lance_minhash_sql.runtime.progress import progress_bar

__all__ = ["BuildResult", "build_index", "marker_dir", "cleanup_leftovers", "WrittenSegment", "write_segment",
           "prepare_build", "sign_fragments", "signed_batches", "check_segment_rows"]


# --------------------------------------------------------------------------- markers


def marker_dir() -> str:
    """The per-user folder of in-progress build markers."""
    uid = os.getuid() if hasattr(os, "getuid") else os.getlogin()
    return os.path.join(tempfile.gettempdir(), f"lance-minhash-builds-{uid}")


def _proc_start(pid: int) -> str | None:
    """Start time of a process in clock ticks (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        return stat[stat.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int, proc_start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    if proc_start is not None:
        now = _proc_start(pid)
        if now is not None and now != proc_start:
            return False  # the pid was reused by another process
    return True


def _write_marker(path: str, record: dict) -> None:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, path)


def _remove_quietly(path: str | None) -> None:
    if path is None:
        return
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def cleanup_leftovers(uri: str, storage_options: dict | None = None) -> list[str]:
    """Remove segment and spill folders of dead builds of ``uri``; returns the removed
    segment folders. A folder any manifest version after the dead build's read version
    references is kept (only its marker goes)."""
    folder = marker_dir()
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    removed = []
    referenced = None
    for fname in names:
        if not fname.endswith(".json"):
            continue
        mpath = os.path.join(folder, fname)
        try:
            with open(mpath) as f:
                rec = json.load(f)
            if rec.get("dataset") != uri:
                continue
            if _alive(int(rec["pid"]), rec.get("proc_start")):
                continue
            seg_uuid = str(rec["uuid"])
            seg_path = str(rec["segment"])
            expected = os.path.join(uri, "_indices", seg_uuid)
            if os.path.normpath(seg_path) != os.path.normpath(expected) or fname != f"{seg_uuid}.json":
                continue  # not a marker this module wrote: leave it alone
            if referenced is None or rec.get("read_version") is not None:
                referenced = manifest.referenced_index_uuids(uri, rec.get("read_version"), storage_options)
            if seg_uuid not in referenced and store.dir_exists(seg_path, storage_options):
                store.remove_dir(seg_path, storage_options)
                removed.append(seg_path)
            spill = rec.get("spill")
            if spill and os.path.basename(os.path.normpath(spill)).startswith(SPILL_PREFIX):
                shutil.rmtree(spill, ignore_errors=True)
            _remove_quietly(mpath)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"lance_minhash_sql: could not clean up build marker {mpath}: {exc}", stacklevel=2)
    return removed


# --------------------------------------------------------------------------- validation


def resolve_dataset(dataset: Any, storage_options: dict | None):
    if manifest.is_lance_dataset(dataset):
        return dataset
    if isinstance(dataset, os.PathLike):
        dataset = os.fspath(dataset)
    if not isinstance(dataset, str):
        raise InvalidInputError(
            f"dataset={dataset!r} must be a dataset path / URI string or a lance.LanceDataset")
    return open_dataset(dataset, storage_options=storage_options)


def _target(ds, column: str, name: str | None, replace: bool) -> tuple[str, list]:
    """The index name to write and the MinHash segments it replaces."""
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise InvalidParameterError(f"name={name!r} must be a non-empty index name, or None for '{column}_idx'")
    entries = manifest.index_entries(ds)
    existing = [e for e in entries if e.type_url == TYPE_URL and column in e.columns]
    if existing and not replace:
        e = existing[0]
        raise DatasetError(
            f"column {column!r} of dataset {uri_of(ds)!r} already has a MinHash index {e.name!r} "
            f"({len(e.segment_uuids)} segment(s)) and replace=False; pass replace=True to rebuild it")
    target = name if name is not None else (existing[0].name if existing else manifest.default_index_name(column))
    for e in entries:
        if e.name != target:
            continue
        if e.type_url != TYPE_URL:
            raise DatasetError(
                f"dataset {uri_of(ds)!r} already has an index named {target!r} of type {e.index_type} on "
                f"{list(e.columns)}; a MinHash index cannot replace it: pass another name= or drop that index")
        if column not in e.columns:
            raise DatasetError(
                f"dataset {uri_of(ds)!r} already has a MinHash index named {target!r} on column(s) "
                f"{list(e.columns)}, not {column!r}; pass another name=")
    return target, manifest.minhash_segments(ds, column)


# --------------------------------------------------------------------------- build


class _Writer:
    """One background thread for a file writer (LanceFileWriter releases the GIL), with
    at most ``depth`` calls waiting; errors surface in the caller's thread."""

    def __init__(self, depth: int, bar=None):
        self.depth = depth
        self.bar = bar
        self.pending: deque = deque()
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minhash-writer")

    def submit(self, fn, *args, rows: int = 0) -> None:
        self.pending.append((self.thread.submit(fn, *args), rows))
        while len(self.pending) > self.depth:
            self._pop()

    def _pop(self) -> None:
        fut, rows = self.pending.popleft()
        fut.result()
        if self.bar is not None and rows:
            self.bar.update(rows)

    def drain(self) -> None:
        while self.pending:
            self._pop()

    def close(self) -> None:
        for fut, _ in self.pending:
            fut.cancel()
        self.pending.clear()
        self.thread.shutdown(wait=True)
        if self.bar is not None:
            self.bar.close()


@dataclass
class WrittenSegment:
    """What :func:`write_segment` wrote (and committed, unless ``commit`` was None)."""

    seg: manifest.NewSegment
    rows: int  # docs in the segment (rows with a signature)
    spilled_bytes: int
    bytes: int  # size of the two files
    dataset: Any  # the dataset version the commit made (None: left uncommitted)


def write_segment(ds, params: MinHashParams, fragment_ids, plan, rows, *, commit=None, check=None,
                  progress_rows: int = 0, progress: bool = False, storage_options: dict | None = None,
                  desc: str = "signing", seg_uuid: str | None = None) -> WrittenSegment:
    """Write one segment from ``rows`` and commit it: the pipeline of every index write
    (a build, an optimize's delta segment or merge).

    ``rows`` yields ``(row ids u64[n], signatures u16[n, k], input rows consumed)`` in doc
    order; each batch's signatures are appended to ``signatures.lance`` on a writer thread
    while its band keys go to the sorter (:class:`~..index.band_sorter.BandSorter`, sized by ``plan``),
    then the band rows are written in ``(band_key, doc_id)`` order to ``bands.lance``.
    ``check(docs)`` runs once the input is exhausted (it may refuse, e.g. an empty build);
    ``commit(segment)`` registers the segment and returns the new dataset version; with
    ``commit=None`` the written segment is left uncommitted for the caller to commit (a
    distributed build commits every task's segment in one commit), its marker kept so
    that a later build removes it if no manifest ever references it.

    Atomic: on any exception (``KeyboardInterrupt`` included) the segment folder and the
    spill folder are removed and nothing is committed; a marker (see the module
    docstring) lets a later build clean up after ``kill -9``. ``seg_uuid`` names the
    segment (default: a new uuid), so that a caller that loses the writing process (a
    distributed build whose node died) knows which folder to remove.
    """
    uri = uri_of(ds)
    seg = None
    sorter = None
    marker = None
    committed = False
    commit_tried = False
    heap = contextlib.ExitStack()
    # one try/finally around every step, so that whatever fails, nothing half-written stays
    # (its two phases are _write_signatures and _write_bands)
    try:
        if plan.tight:  # with room to spare, the heap's page faults are not worth it
            heap.enter_context(bounded_heap())
        seg = manifest.new_segment(ds, fragment_ids, params, seg_uuid)
        sorter = BandSorter(plan)
        marker = os.path.join(marker_dir(), f"{seg.uuid}.json")
        _write_marker(marker, {
            "dataset": uri, "uuid": seg.uuid, "segment": seg.path, "spill": sorter.spill_dir,
            "pid": os.getpid(), "proc_start": _proc_start(os.getpid()), "started": time.time(),
            "read_version": version_of(ds)})

        sig_writer = SignaturesWriter(seg.path, params, storage_options)
        signed = _write_signatures(rows, signer_for(params), sorter, sig_writer, plan,
                                   progress_bar(progress, progress_rows, desc))
        rows = None
        if check is not None:
            check(signed)
        sig_writer.close()
        seg.sizes[SIGNATURES_FILE] = sig_writer.size_bytes
        sig_writer = None
        sorter.finish()
        if plan.tight:
            release_memory()
        bands_writer = BandsWriter(seg.path, params, num_docs=signed, storage_options=storage_options)
        _write_bands(sorter, bands_writer, plan, progress_bar(progress, signed * params.num_bands, "writing bands"))
        bands_writer.close()
        seg.sizes[BANDS_FILE] = bands_writer.size_bytes
        spilled = sorter.spilled_bytes
        sorter.close()

        size = sum(manifest.segment_file_size(seg, f) for f in (SIGNATURES_FILE, BANDS_FILE))
        if commit is None:
            new_ds = None
            committed = True  # handed over: the caller commits it or removes it
        else:
            commit_tried = True
            new_ds = commit(seg)
            committed = True
    finally:
        heap.close()
        if sorter is not None:
            sorter.close()
        if seg is not None and not committed:
            keep = False
            if commit_tried:  # never delete what a manifest references
                try:
                    keep = seg.uuid in manifest.referenced_index_uuids(uri, None, storage_options)
                except Exception:  # cannot tell: keep the folder, a later cleanup decides
                    keep = True
            if not keep:
                store.remove_dir(seg.path, storage_options)
        if marker is not None and ((committed and commit is not None)
                                   or not store.dir_exists(seg.path, storage_options)):
            _remove_quietly(marker)
    return WrittenSegment(seg, signed, spilled, size, new_ds)


def _write_signatures(rows, signer, sorter: BandSorter, sig_writer: SignaturesWriter, plan, bar) -> int:
    """The first phase of :func:`write_segment`: every batch of ``rows`` appended to
    ``signatures.lance`` and its band keys handed to the sorter; returns the docs signed.
    Closes ``rows`` (the scanner and its buffers) however it ends."""
    signed = 0
    # signatures.lance is written on a second thread while the next batch is made; the
    # scanner's read-ahead, the batch size and the writer's queue are bounded by the plan's
    # pipeline share of the budget
    writer = _Writer(plan.writer_depth, bar)
    # each batch's band keys go to the sorter on a thread of their own (in doc order: one
    # thread, one batch at a time) while the next batch is scanned and signed; on one
    # thread the spill's partition and appends left a core idle
    adder = _Writer(1)
    try:
        for rowids, sigs, n in rows:
            if len(sigs):
                adder.submit(sorter.add, signer.band_keys(sigs))
                signed += len(sigs)
                writer.submit(sig_writer.write, rowids, sigs, rows=n)
            elif writer.bar is not None:
                writer.bar.update(n)
            del rowids, sigs  # the next batch is made without this one
        adder.drain()
        writer.drain()
    finally:
        adder.close()
        writer.close()
        close = getattr(rows, "close", None)
        if close is not None:
            close()
    return signed


def _write_bands(sorter: BandSorter, bands_writer: BandsWriter, plan, bar) -> None:
    """The second phase of :func:`write_segment`: the sorted band rows written to
    ``bands.lance``, one group while the next group is sorted (the sort's budget counts the
    group being written beside the next one; holding no chunk here lets a group go as soon
    as the writer is done with it)."""
    writer = _Writer(plan.writer_depth, bar)
    try:
        for keys, docs in sorter.sorted_chunks():
            for s in range(0, len(keys), BAND_WRITE_ROWS):
                e = min(s + BAND_WRITE_ROWS, len(keys))
                writer.submit(bands_writer.write, keys[s:e], docs[s:e], rows=e - s)
            del keys, docs
        writer.drain()
    finally:
        writer.close()


def signed_batches(signer, batches, stats: dict | None = None, rows: int = 0):
    """``(row ids, signatures, rows scanned)`` of scanned ``(row ids, texts)`` batches,
    keeping the rows with a signature; counts ``scanned`` and ``nulls`` into ``stats``.

    Each batch is signed by the kernels, or by numpy while that costs less than loading
    numba (``index/sign.py: sign_by_cost``: a small build in a process that has not
    loaded numba); both give the same signatures. The cost weighed is the rest of the scan
    (``rows`` expected in all, e.g. the dataset's count)."""
    left = rows
    for rowids, texts in batches:
        n = len(texts)
        sigs, has = sign_by_cost(signer, texts, left)
        left -= n
        if stats is not None:
            stats["scanned"] = stats.get("scanned", 0) + n
            stats["nulls"] = stats.get("nulls", 0) + texts.null_count
        del texts
        if not has.all():
            keep = np.flatnonzero(has)
            sigs, rowids = sigs[keep], rowids[keep]
        yield rowids, sigs, n
        del rowids, sigs, has  # the next batch is decoded without this one


def check_segment_rows(ds, rows: int) -> None:
    """A segment holds at most :data:`MAX_SEGMENT_ROWS` docs (u32 doc ids)."""
    if rows > MAX_SEGMENT_ROWS:
        raise ResourceLimitError(
            f"dataset {uri_of(ds)!r} has {rows:,} rows, but one MinHash segment holds at most "
            f"{MAX_SEGMENT_ROWS:,} (doc ids are u32); build per-fragment segments (fragment subsets of "
            f"fewer rows) and commit them together")


def sign_fragments(ds, column: str, params: MinHashParams, fragment_ids, plan, *, commit=None,
                   progress_rows: int = 0, progress: bool = False, storage_options: dict | None = None,
                   what: str = "", seg_uuid: str | None = None) -> tuple[WrittenSegment, dict]:
    """Sign the rows of ``fragment_ids`` (every fragment of ``ds``: the whole dataset in
    scan order) and write them as one segment through :func:`write_segment`, committed by
    ``commit`` or, with ``commit=None``, left uncommitted (a distributed build's task).
    Returns the written segment and the scan's counts (``scanned``, ``nulls``).

    A segment without a single signed row is refused with :class:`DatasetError` (Lance
    would hold an empty segment that can never answer); ``what`` names the rows in that
    message (e.g. a fragment group).
    """
    uri = uri_of(ds)
    fragment_ids = [int(f) for f in fragment_ids]
    whole = fragment_ids == manifest.fragment_ids(ds)
    frag_objs = None if whole else fragment_objects(ds, fragment_ids)
    stats: dict = {}
    batches = scan_text(ds, column, fragments=frag_objs, batch_rows=plan.scan_rows, batch_readahead=plan.readahead,
                        fragment_readahead=SCAN_FRAGMENTS, io_buffer_size=plan.io_buffer)

    def check(signed: int) -> None:
        scanned, nulls = stats.get("scanned", 0), stats.get("nulls", 0)
        if signed == 0:
            what_rows = (f"is NULL in all {scanned:,} rows" if nulls == scanned else
                         f"has no tokens in any of its {scanned:,} rows ({nulls:,} NULL, the rest empty or "
                         f"without words for tokenizer {params.tokenizer.base_tokenizer!r})")
            raise DatasetError(
                f"column {column!r} of dataset {uri!r}{what} {what_rows}: the index would be empty and "
                "answer nothing; index a column with text (or another tokenizer)")

    signed = signed_batches(signer_for(params), batches, stats, plan.rows)
    w = write_segment(ds, params, fragment_ids, plan, signed,
                      commit=commit, check=check, progress_rows=progress_rows, progress=progress,
                      storage_options=storage_options, seg_uuid=seg_uuid)
    return w, stats


def prepare_build(dataset, column: str, num_hashes, num_bands, shingle_size, tokenizer, threshold, replace, name,
                  storage_options):
    """The checks of every build before anything is written: ``(dataset, parameters, index
    name, MinHash segments it replaces, rows)``; a dataset without rows is refused."""
    ds = resolve_dataset(dataset, storage_options)
    text_field(ds, column)
    params = MinHashParams.create(num_hashes, num_bands, shingle_size, tokenizer, threshold)
    replace = check_bool("replace", replace)
    index_name, old_segments = _target(ds, column, name, replace)
    total_rows = row_count(ds)
    if total_rows == 0:
        raise DatasetError(f"dataset {uri_of(ds)!r} has no rows: there is nothing to index; add data first")
    return ds, params, index_name, old_segments, total_rows


def build_index(dataset, column: str, *, num_hashes: int = 128, num_bands: int | None = None,
                shingle_size: int = 3, threshold: float | None = None, tokenizer=None,
                replace: bool = True, name: str | None = None, memory_limit=None,
                temp_dir: str | None = None, storage_options: dict | None = None,
                progress: bool = False) -> BuildResult:
    """Build a MinHash LSH index on ``column``: Lance's own ``MINHASHLSH`` format, committed.

    ``dataset`` is a URI string or an opened ``lance.LanceDataset`` (the build reads that
    version and commits on top of it). ``num_bands`` defaults to 16, or to the best
    ``(b, r)`` for ``threshold`` when given. ``tokenizer`` is a mapping / JSON of
    :class:`~lance_minhash_sql.core.params.TokenizerParams` options. ``memory_limit`` (bytes or
    e.g. ``'512MiB'``) bounds the band sort; beyond it the sort spills to ``temp_dir``.

    Raises :class:`DatasetError` (missing dataset or column, not a string column, no rows,
    no row with tokens, conflicting index), :class:`InvalidParameterError`,
    :class:`ResourceLimitError` (too many rows, no room for spill files); the dataset is
    then unchanged.
    """
    t0 = time.perf_counter()
    progress = check_bool("progress", progress)
    storage_options = options_for(dataset, storage_options)
    ds, params, index_name, old_segments, total_rows = prepare_build(
        dataset, column, num_hashes, num_bands, shingle_size, tokenizer, threshold, replace, name, storage_options)
    check_segment_rows(ds, total_rows)
    plan = plan_sort(total_rows, params.num_bands, memory_limit, temp_dir, num_hashes=params.num_hashes)
    frags = manifest.fragment_ids(ds)
    uri = uri_of(ds)

    cleanup_leftovers(uri, storage_options)

    def commit(seg):
        return manifest.commit_replacing(ds, index_name, column, [seg], removed=old_segments,
                                         storage_options=storage_options)

    w, stats = sign_fragments(ds, column, params, frags, plan, commit=commit, progress_rows=total_rows,
                              progress=progress, storage_options=storage_options)
    return BuildResult(
        index_name=index_name, column=column, num_hashes=params.num_hashes,
        num_bands=params.num_bands, rows_per_band=params.rows_per_band,
        shingle_size=params.shingle_size, tokenizer=json.dumps(params.tokenizer.to_dict()),
        segments=1, rows_indexed=w.rows, rows_without_tokens=stats.get("scanned", 0) - w.rows,
        seconds=round(time.perf_counter() - t0, 3), bytes=w.bytes, dataset_version=version_of(w.dataset),
        segment_uuids=(w.seg.uuid,), spilled_bytes=w.spilled_bytes)
