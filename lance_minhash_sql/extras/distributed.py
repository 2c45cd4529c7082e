"""The build on Ray, and the connection to Ray that every Ray task of the package uses
(the ``ray`` extra; ``extras/ray_executor.py`` is the executor that calls them).

>>> import lance_minhash_sql as lms
>>> lms.build_index("corpus.lance", "text", executor="ray")  # doctest: +SKIP

**Build.** The driver validates everything once — dataset, column, parameters
(:meth:`MinHashParams.create`), index name, and the fragment groups (non-empty, disjoint,
known fragment ids, covering every fragment of the version read, each group small enough
for one segment) — before any task starts. Each group goes to one Ray task, which opens
the dataset *at the version the driver read*, signs the group's rows with our engine and
writes an **uncommitted** segment through the build's own pipeline
(:func:`lance_minhash_sql.indexer.builder.sign_fragments` → :func:`lance_minhash_sql.indexer.builder.write_segment` with ``commit=None``), and
returns its :class:`~..io.manifest.NewSegment`. The driver checks the returned segments
(identical parameters, fragment sets exactly the groups) and registers all of them as
the segments of one index in **one** ``CreateIndex`` commit on top of the version read,
removing the column's old MinHash segments when ``replace`` (``docs/index-format.md``). With
``merge=True`` a second commit then merges them into one segment from their stored
signatures (:func:`lance_minhash_sql.lifecycle.optimize.optimize` with ``merge="all"``; no text is read again);
with contiguous ascending groups, the merged segment's files equal a single-process
build's.

If any task fails, nothing is committed: the driver waits for the other tasks, removes
the segment folders they wrote, and raises :class:`DistributedTaskError` naming each
failed group's fragment ids and its error. A group whose rows have no token at all is
such a failure (the segment would be empty): put those fragments in a group with text.
A task whose worker or node dies is such a failure too (Ray's error, e.g. the node that
died, is in the message): the driver names each task's segment before it starts, so it
also removes what the dead task had written, and build tasks are not retried (a retry
would race the dead task's writes). Rerun the build once the cluster is healthy.

**Where it runs** (:func:`connect_ray`): the Ray instance already initialised in this
process; else the address given (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``);
else ``RAY_ADDRESS`` from the environment; else a running cluster on this machine
(``"auto"``). A local Ray is never started from this process: ``ray.init()`` would fork
it, and Lance is not fork-safe; ``ray start --head`` starts one. Tasks receive
the dataset URI, the version and ``storage_options`` as arguments, so object-store URIs
work when every worker can reach the store with those options. Every worker needs this
package (and pylance) installed; local workers inherit the driver's environment.
Ray is imported only inside these functions: importing the package never imports Ray.
"""

from __future__ import annotations

import json
import numbers
import os
import time
import uuid as uuidlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from lance_minhash_sql.runtime.cache import memoized
from lance_minhash_sql.runtime.progress import progress_bar
from lance_minhash_sql.indexer.builder import (BuildResult, check_segment_rows, cleanup_leftovers, marker_dir,
                                             prepare_build, sign_fragments)
from lance_minhash_sql.core.checks import check_bool
from lance_minhash_sql.core.errors import DistributedTaskError, InvalidParameterError, MissingDependencyError
from lance_minhash_sql.core.params import MAX_SEGMENT_ROWS, MinHashParams
from lance_minhash_sql.index.band_sorter import plan_sort
from lance_minhash_sql.io import manifest, store
from lance_minhash_sql.io.handles import options_for
from lance_minhash_sql.io.scan import fragment_rows, open_dataset, uri_of, version_of
from lance_minhash_sql.lifecycle.optimize import optimize

__all__ = ["build_distributed", "fragment_groups_of", "connect_ray", "remote_function", "task_cause", "RAY_INSTALL"]

# the package installs from its repository (README), so the hint names the package itself
RAY_INSTALL = "pip install 'ray>=2.9' (in a clone of this repository: pip install -e '.[ray]')"


# --------------------------------------------------------------------------- Ray


def _ray():
    """The ``ray`` module, or :class:`MissingDependencyError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError(
            "the distributed functions need Ray, which is not installed; install the extra with "
            f"{RAY_INSTALL} (on the driver and on every worker)") from None
    return ray


def connect_ray(ray_address: str | None):
    """The ``ray`` module, connected (module doc, *Where it runs*)."""
    ray = _ray()
    if ray_address is not None and (not isinstance(ray_address, str) or not ray_address.strip()):
        raise InvalidParameterError(
            f"ray_address={ray_address!r} must be a Ray address such as 'auto' or 'ray://head:10001', "
            "or NULL for the Ray instance of this process, else RAY_ADDRESS, else the cluster running here")
    if ray.is_initialized():
        return ray
    address = ray_address or os.environ.get("RAY_ADDRESS") or "auto"
    try:
        ray.init(address=address)
    except ConnectionError as exc:
        raise DistributedTaskError(
            f"no Ray cluster answers at {address!r} ({str(exc).strip().splitlines()[0]}); start one with "
            "'ray start --head', or give its address: ray_address := 'ray://head:10001' (or RAY_ADDRESS)") from None
    return ray


def remote_function(ray, fn, **options):
    """``fn`` as a Ray remote function with ``options`` (memoized: Ray exports a remote
    function's code to the cluster once per remote function object)."""
    return _remote_of(ray, fn, tuple(sorted(options.items())))


@memoized(64)
def _remote_of(ray, fn, options: tuple):
    return ray.remote(**dict(options))(fn) if options else ray.remote(fn)


def task_cause(exc: BaseException) -> str:
    """The task's own exception as ``Type: first line`` (unwrapping Ray's task error)."""
    cause = getattr(exc, "cause", None) or exc
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"


# --------------------------------------------------------------------------- fragment groups


def fragment_groups_of(groups: Any, fragments: list[int]) -> list[list[int]]:
    """The fragment groups of a build, validated against the dataset's ``fragments``.

    ``None``: one group per fragment; ``n``: ``n`` contiguous groups of near-equal
    fragment counts, in fragment order; a list of lists of fragment ids: those groups,
    which must be non-empty, disjoint, name only fragments of the dataset and cover all
    of them. Each group is returned in ascending fragment order.
    """
    fix = ("pass None (one group per fragment), a number of groups in 1..{n}, or a list of non-empty, "
           "disjoint lists of fragment ids that together cover the dataset's fragments {frags}")
    fix = fix.format(n=len(fragments), frags=fragments)
    if groups is None:
        return [[f] for f in fragments]
    if isinstance(groups, numbers.Integral) and not isinstance(groups, (bool, np.bool_)):
        n = int(groups)
        if not 1 <= n <= len(fragments):
            raise InvalidParameterError(
                f"fragment_groups={groups!r} must be between 1 and the number of fragments "
                f"({len(fragments)}); {fix}")
        return [[int(f) for f in part] for part in np.array_split(np.asarray(fragments, dtype=np.int64), n)]
    if not isinstance(groups, (list, tuple)) or not groups:
        raise InvalidParameterError(f"fragment_groups={groups!r} is neither None, a number nor a list of lists; {fix}")
    out: list[list[int]] = []
    owner: dict[int, int] = {}
    known = set(fragments)
    for i, group in enumerate(groups):
        if not isinstance(group, (list, tuple, set, frozenset)) or not group:
            raise InvalidParameterError(
                f"fragment_groups[{i}]={group!r} must be a non-empty list of fragment ids; {fix}")
        ids = []
        for f in group:
            if isinstance(f, (bool, np.bool_)) or not isinstance(f, numbers.Integral):
                raise InvalidParameterError(f"fragment_groups[{i}] holds {f!r}, not a fragment id (an integer); {fix}")
            f = int(f)
            if f not in known:
                raise InvalidParameterError(
                    f"fragment_groups[{i}] names fragment {f}, which the dataset (version read) does not have; "
                    f"{fix}")
            if f in owner:
                where = "twice in that group" if owner[f] == i else f"also in fragment_groups[{owner[f]}]"
                raise InvalidParameterError(
                    f"fragment {f} of fragment_groups[{i}] is {where}: groups must be disjoint (a fragment "
                    f"in two segments would be indexed twice); {fix}")
            owner[f] = i
            ids.append(f)
        out.append(sorted(ids))
    missing = [f for f in fragments if f not in owner]
    if missing:
        raise InvalidParameterError(
            f"fragment_groups leave fragment(s) {missing} out: the groups must cover every fragment of the "
            f"dataset (an index must cover what it was built on); {fix}")
    return out


# --------------------------------------------------------------------------- build


@dataclass(frozen=True)
class _GroupSegment:
    """What a build task returns: its uncommitted segment and counts."""

    seg: manifest.NewSegment
    rows: int
    scanned: int
    bytes: int
    spilled_bytes: int


def _build_task(uri: str, version: int, column: str, params: MinHashParams, fragment_ids: list[int],
                memory_limit, temp_dir, storage_options, seg_uuid: str) -> _GroupSegment:
    """One group: sign its fragments at the driver's version and write an uncommitted
    segment named ``seg_uuid``."""
    ds = open_dataset(uri, storage_options, version)
    rows = fragment_rows(ds, fragment_ids)
    plan = plan_sort(max(rows, 1), params.num_bands, memory_limit, temp_dir, num_hashes=params.num_hashes)
    w, stats = sign_fragments(ds, column, params, fragment_ids, plan, storage_options=storage_options,
                              what=f" (fragment group {fragment_ids})", seg_uuid=seg_uuid)
    return _GroupSegment(w.seg, w.rows, int(stats.get("scanned", 0)), w.bytes, w.spilled_bytes)


def _remove_segments(ds, uuids: list[str], storage_options: dict | None) -> None:
    """Remove uncommitted segment folders (or object-store prefixes) and their build markers
    (this machine's)."""
    for seg_uuid in uuids:
        store.remove_dir(manifest.segment_dir(ds, seg_uuid), storage_options)
        try:
            os.remove(os.path.join(marker_dir(), f"{seg_uuid}.json"))
        except FileNotFoundError:
            pass


def _check_segments(ds, column: str, params: MinHashParams, groups: list[list[int]],
                    got: list[_GroupSegment]) -> None:
    """The tasks' segments: the driver's parameters, exactly the groups' fragments."""
    for group, g in zip(groups, got):
        diff = g.seg.params.differences(params)
        if diff:
            raise DistributedTaskError(
                f"the task of fragment group {group} wrote segment {g.seg.uuid} with other parameters than "
                f"the driver fixed: {'; '.join(diff)}. Rule: every segment of an index shares the same "
                "parameters. Fix: install the same lance-minhash-sql version on every worker; nothing was "
                "committed", {tuple(group): "; ".join(diff)})
        if set(g.seg.fragment_ids) != set(group):
            raise DistributedTaskError(
                f"the task of fragment group {group} wrote a segment over fragments "
                f"{sorted(g.seg.fragment_ids)}; nothing was committed", {tuple(group): "wrong fragments"})


def build_distributed(dataset, column: str, *, fragment_groups=None, num_hashes: int = 128,
                            num_bands: int | None = None, shingle_size: int = 3, threshold: float | None = None,
                            tokenizer=None, replace: bool = True, merge: bool = False, name: str | None = None,
                            memory_limit=None, temp_dir: str | None = None, storage_options: dict | None = None,
                            ray_address: str | None = None, progress: bool = False) -> BuildResult:
    """Build the MinHash LSH index of ``column`` with one Ray task per fragment group and
    commit every task's segment in one commit (see the module doc).

    ``fragment_groups``: ``None`` (one task per fragment), a number of contiguous groups,
    or explicit lists of fragment ids (disjoint, covering the dataset). The parameters
    and ``replace`` / ``name`` behave as in :func:`lance_minhash_sql.indexer.builder.build_index`; ``memory_limit`` and
    ``temp_dir`` apply to each task. ``merge=True`` merges the committed segments into one
    afterwards (a second commit). ``progress``: a bar of the rows of the groups whose
    task has ended. Returns a :class:`~lance_minhash_sql.indexer.builder.BuildResult` (``segments`` =
    segments of the index at the end).

    Raises :class:`InvalidParameterError` (bad groups or parameters), :class:`DatasetError`,
    :class:`ResourceLimitError` (a group too large for one segment) before any task runs,
    :class:`DistributedTaskError` when a task fails, :class:`MissingDependencyError`
    without Ray; the dataset is then unchanged.
    """
    t0 = time.perf_counter()
    merge = check_bool("merge", merge)
    progress = check_bool("progress", progress)
    storage_options = options_for(dataset, storage_options)
    ds, params, index_name, old_segments, _ = prepare_build(
        dataset, column, num_hashes, num_bands, shingle_size, tokenizer, threshold, replace, name, storage_options)
    fragments = manifest.fragment_ids(ds)
    groups = fragment_groups_of(fragment_groups, fragments)
    group_rows = [fragment_rows(ds, group) for group in groups]
    for rows in group_rows:
        if rows > MAX_SEGMENT_ROWS:
            check_segment_rows(ds, rows)
    plan_sort(1, params.num_bands, memory_limit, temp_dir, num_hashes=params.num_hashes)  # checks the options
    temp_dir = None if temp_dir is None else store.absolute_uri(os.fspath(temp_dir))  # as the driver names it
    ray = connect_ray(ray_address)
    cleanup_leftovers(uri_of(ds), storage_options)

    bar = progress_bar(progress, sum(group_rows), "build (ray)")
    try:
        got = _run_build_tasks(ray, ds, column, params, groups, memory_limit, temp_dir, storage_options,
                               None if bar is None else lambda i: bar.update(group_rows[i]))
    finally:
        if bar is not None:
            bar.close()
    new_ds, segs = _commit_segments(ds, index_name, column, params, groups, got, old_segments, storage_options)
    uuids = tuple(s.uuid for s in segs)
    total_bytes = sum(g.bytes for g in got)
    rows = sum(g.rows for g in got)
    if merge and len(segs) > 1:
        m = optimize(new_ds, column, merge="all", memory_limit=memory_limit, temp_dir=temp_dir,
                     storage_options=storage_options)
        uuids, total_bytes, version_after = (m.segment_uuid,), m.bytes, m.dataset_version
    else:
        version_after = version_of(new_ds)
    return BuildResult(
        index_name=index_name, column=column, num_hashes=params.num_hashes, num_bands=params.num_bands,
        rows_per_band=params.rows_per_band, shingle_size=params.shingle_size,
        tokenizer=json.dumps(params.tokenizer.to_dict()), segments=len(uuids), rows_indexed=rows,
        rows_without_tokens=sum(g.scanned for g in got) - rows, seconds=time.perf_counter() - t0,
        bytes=total_bytes, dataset_version=version_after, segment_uuids=uuids,
        spilled_bytes=sum(g.spilled_bytes for g in got))


def _run_build_tasks(ray, ds, column: str, params, groups, memory_limit, temp_dir, storage_options, ended=None
                     ) -> list["_GroupSegment"]:
    """One build task per fragment group; every task's segment, in group order, or an error
    once every task has ended (the segments written are then removed). ``ended(i)`` is
    called as group ``i``'s task ends, in the order they end.

    The driver names every task's segment, so it can remove what a task wrote even when the
    task's worker or node died mid-write; a task is not retried (a retry elsewhere would
    race the dead one's files): the build fails, names the group, and can be rerun."""
    uri, version = uri_of(ds), version_of(ds)
    seg_uuids = [str(uuidlib.uuid4()) for _ in groups]
    task = remote_function(ray, _build_task, max_retries=0)
    refs = [task.remote(uri, version, column, params, group, memory_limit, temp_dir, storage_options, u)
            for group, u in zip(groups, seg_uuids)]
    done: dict[int, _GroupSegment] = {}
    failed: dict[tuple, str] = {}
    index = {ref: i for i, ref in enumerate(refs)}
    pending = list(refs)
    while pending:  # wait for every task: a failure must not leave others' folders behind
        ready, pending = ray.wait(pending, num_returns=1)
        i = index[ready[0]]
        try:
            done[i] = ray.get(ready[0])
        except Exception as exc:  # a task's error (Ray wraps it) or a lost worker
            failed[tuple(groups[i])] = task_cause(exc)
        if ended is not None:
            ended(i)
    if failed:
        _remove_segments(ds, seg_uuids, storage_options)  # the failed tasks' partial folders too
        what = "; ".join(f"fragments {list(f)}: {why}" for f, why in failed.items())
        raise DistributedTaskError(
            f"{len(failed)} of {len(groups)} build task(s) on {column!r} of {uri!r} failed ({what}); nothing was "
            "committed and the segments the other tasks wrote were removed. Fix the cause and build again",
            failed)
    return [done[i] for i in range(len(groups))]


def _commit_segments(ds, index_name: str, column: str, params, groups, got, old_segments, storage_options):
    """``(new dataset, segments in fragment order)``: every task's segment registered in one
    commit (replacing ``old_segments``); on failure the segments no manifest references are
    removed."""
    uri = uri_of(ds)
    try:
        _check_segments(ds, column, params, groups, got)
        order = sorted(range(len(got)), key=lambda i: groups[i][0])  # manifest order = fragment order
        segs = [got[i].seg for i in order]
        new_ds = manifest.commit_replacing(ds, index_name, column, segs, removed=old_segments,
                                           storage_options=storage_options)
    except BaseException:
        referenced = set()
        try:
            referenced = manifest.referenced_index_uuids(uri, None, storage_options)
        except Exception:  # cannot tell: a later build's cleanup decides
            referenced = {g.seg.uuid for g in got}
        _remove_segments(ds, [g.seg.uuid for g in got if g.seg.uuid not in referenced], storage_options)
        raise
    for g in got:  # committed: their markers are done with
        try:
            os.remove(os.path.join(marker_dir(), f"{g.seg.uuid}.json"))
        except FileNotFoundError:
            pass
    return new_ds, segs
