"""Dedup: which row of each near-duplicate cluster to keep, and writing the result.

>>> import lance_minhash_sql as lms
>>> lms.keep_flags("corpus.lance", "text", 0.8, keep="longest")  # doctest: +SKIP
pyarrow.Table
_rowid: uint64 not null
cluster_id: uint64 not null
cluster_size: int64 not null
keep: bool not null
>>> lms.dedup("corpus.lance", "text", 0.8, output="deduped.lance")  # doctest: +SKIP

Clusters are :func:`.clusters.clusters` (verified links, see its module doc; with
``clustering="star"`` the stars of a walk in the keep order). In every cluster exactly one
row is kept: the first in the keep order, ties broken by the lowest row id. The keep order is

* ``keep="first"`` (default): the lowest row id (= ``cluster_id``);
* ``keep="longest"``: the longest text of the indexed column (Unicode code points);
* ``order_by="quality DESC, length(text)"``: a SQL ``ORDER BY`` list over the dataset's
  columns (and ``_rowid``), evaluated by DuckDB (``duck/order_by.py``, through
  ``core/sql_order.py``) on the clustered rows' values (fetched with a Lance ``take`` of
  only the columns the text names); ``keep`` stays ``"first"``: the
  first row in that order.

Rows in no cluster are always kept. :func:`keep_flags` returns one row per clustered row
with its ``keep`` flag (the rows to remove are ``keep = false``); :func:`dedup` writes
the dataset without the removed rows, as a new dataset or as a new version of the same
one (one delete commit), or only counts them (dry run).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.checks import check_bool, check_choice, check_clustering_verify, check_threshold
from lance_minhash_sql.core.errors import DatasetError, InvalidInputError, InvalidParameterError
from lance_minhash_sql.core.params import KEEP_POLICIES
from lance_minhash_sql.core.sql_order import sorted_values
from lance_minhash_sql.core.tuning import TAKE_ROWS
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.index.results import DEDUP_SCHEMA, DEDUP_STAR_SCHEMA
from lance_minhash_sql.io.handles import dataset_handle, options_for
from lance_minhash_sql.io.rewrite import dataset_exists, delete_rows, live_rows, write_without
from lance_minhash_sql.io.scan import open_dataset, schema_of, text_field, version_of
from lance_minhash_sql.io.takes import take_rows
from lance_minhash_sql.runtime.memory import bounded_heap, trim_heap
from lance_minhash_sql.runtime.progress import progress_bar
from lance_minhash_sql.selfjoin.clusters import linked_components
from lance_minhash_sql.selfjoin.executor import LOCAL, Executor
from lance_minhash_sql.selfjoin.star import star_members, star_twins, table_ordered

__all__ = ["KEEP_POLICIES", "DEDUP_SCHEMA", "DEDUP_STAR_SCHEMA", "DedupResult", "check_keep", "order_by_columns",
           "keep_order", "keep_flags", "dedup"]

_CLUSTER = "__lms_cluster"  # the cluster column's name while ranking (cannot clash with user columns)
_POS = "__lms_pos"  # a row's position in the clusters table while ranking


def check_keep(keep, order_by) -> tuple[str, str | None]:
    """``(keep, order_by)`` validated: ``keep`` one of :data:`KEEP_POLICIES`, ``order_by``
    ``None`` or a non-empty SQL ``ORDER BY`` list (only with ``keep="first"``)."""
    keep = check_choice("keep", keep, KEEP_POLICIES, "a keep policy",
                        f"one of {', '.join(repr(k) for k in KEEP_POLICIES)} ('first': lowest row id; 'longest': "
                        "longest text), or keep := 'first' with order_by := '<SQL ORDER BY over the dataset "
                        "columns>', e.g. order_by := 'quality DESC'")
    if order_by is None:
        return keep, None
    if not isinstance(order_by, str) or not order_by.strip():
        raise InvalidParameterError(
            f"order_by={order_by!r} must be a SQL ORDER BY list over the dataset's columns, e.g. "
            "'quality DESC' or 'length(text) DESC, id'")
    if keep != "first":
        raise InvalidParameterError(
            f"keep={keep!r} and order_by={order_by!r} both choose the kept row: give one of them "
            "(order_by keeps the first row in its order; keep := 'longest' is order_by := 'length(<column>) DESC')")
    return keep, order_by.strip()


def _referenced(schema: pa.Schema, order_by: str) -> list[str]:
    """The dataset columns whose name occurs in the text (a superset of those it uses)."""
    text = order_by.lower()
    return [f.name for f in schema if f.name.lower() in text and f.name not in ("_rowid", _CLUSTER, _POS)]


def _order_by_sql(table: pa.Table, order_by: str, uri: str, columns: list[str]) -> np.ndarray:
    """The rows' positions sorted by cluster, then ``order_by``, then row id (the SQL
    engine of ``core/sql_order.py``)."""
    try:
        return np.asarray(sorted_values(table, _POS, f"{_CLUSTER}, {order_by}, _rowid"), dtype=np.int64)
    except InvalidParameterError as exc:
        raise InvalidParameterError(
            f"order_by={order_by!r} is not a valid SQL ORDER BY over the columns of {uri!r} ({exc}); its columns "
            f"are {columns} (plus _rowid); e.g. order_by := 'length(text) DESC'") from None


def _check_order_by(ds, uri: str, order_by: str) -> list[str]:
    """Bind ``order_by`` against the dataset schema on an empty table; the columns it uses."""
    cols = _referenced(schema_of(ds), order_by)
    empty = pa.schema([pa.field("_rowid", pa.uint64()), pa.field(_CLUSTER, pa.uint64()), pa.field(_POS, pa.int64())]
                      + [schema_of(ds).field(c) for c in cols]).empty_table()
    _order_by_sql(empty, order_by, uri, schema_of(ds).names)
    return cols


def order_by_columns(ds, uri: str, order_by: str | None) -> list[str]:
    """The dataset columns an ``order_by`` list (checked by :func:`check_keep`) reads,
    after binding it against the dataset's schema (:class:`InvalidParameterError` if it
    does not bind); ``[]`` without one. What :func:`keep_order` takes as ``cols``."""
    return [] if order_by is None else _check_order_by(ds, uri, order_by)


def _take(ds, rowids: np.ndarray, columns: list[str]):
    """The columns of the given rows, :data:`TAKE_ROWS` at a time."""
    for s in range(0, rowids.size, TAKE_ROWS):
        ids = rowids[s:s + TAKE_ROWS]
        yield take_rows(ds, ids, columns + ["_rowid"], "the dedup")


def _longest_order(ds, column: str, rowid: np.ndarray, cluster: np.ndarray) -> np.ndarray:
    """Positions by cluster, then longest text first (code points), then lowest row id."""
    length = np.empty(rowid.size, dtype=np.int64)
    pos = 0
    for t in _take(ds, rowid, [column]):
        n = t.num_rows
        length[pos:pos + n] = pc.utf8_length(t.column(column)).fill_null(-1).to_numpy(zero_copy_only=False)
        pos += n
    return np.lexsort((rowid, -length, cluster))


def _sql_order(ds, uri: str, order_by: str, cols: list[str], rowid: np.ndarray, cluster: np.ndarray) -> np.ndarray:
    parts = list(_take(ds, rowid, cols)) if rowid.size else []
    data = {"_rowid": pa.array(rowid, pa.uint64()), _CLUSTER: pa.array(cluster, pa.uint64()),
            _POS: pa.array(np.arange(rowid.size, dtype=np.int64))}
    for c in cols:
        data[c] = (pa.chunked_array([p.column(c) for p in parts], type=schema_of(ds).field(c).type) if parts
                   else pa.array([], schema_of(ds).field(c).type))
    return _order_by_sql(pa.table(data), order_by, uri, schema_of(ds).names)


def keep_order(ds, uri: str, column: str, keep: str, order_by: str | None, cols: list[str], rowid: np.ndarray,
               cluster: np.ndarray) -> np.ndarray:
    """The clustered rows' positions in keep order: by cluster, then the keep policy (see
    the module doc), then lowest row id. The first of each cluster is its kept row (and the
    first center of :mod:`.star`)."""
    if keep == "longest":
        return _longest_order(ds, column, rowid, cluster)
    if order_by is not None:
        return _sql_order(ds, uri, order_by, cols, rowid, cluster)
    return np.lexsort((rowid, cluster))


def keep_flags(dataset, column: str, threshold: float = 0.8, *, keep: str = "first", order_by: str | None = None,
               clustering: str = "components", verify: str = "estimate", memory_limit=None,
               storage_options: dict | None = None, executor: Executor = LOCAL, progress: bool = False) -> pa.Table:
    """Every row of a near-duplicate cluster (see the module doc) with its ``keep`` flag,
    ordered by ``(cluster_id, _rowid)``. Rows not listed are in no cluster (always kept).
    ``memory_limit``: what the clusters may hold (:func:`.clusters.clusters`);
    ``executor`` runs the components (:mod:`.executor`), the rest runs here. ``progress``:
    progress bars on stderr, the shards linked and, for star, the rows walked.

    * ``clustering="components"``: :data:`DEDUP_SCHEMA`, one ``keep = true`` per cluster;
      with ``verify="exact"`` the clusters are the components of the exact pairs
      (:func:`.links.exact_links`);
    * ``clustering="star"`` (:mod:`.star`): :data:`DEDUP_STAR_SCHEMA`; each linked
      component is walked in keep order and a row is kept unless it is similar to a row
      kept before it in its component that shares a band with it; a dropped row's
      ``twin_rowid`` is the most similar such kept row (ties to the one kept first; the
      rule: :mod:`.star`) and ``twin_similarity`` their MinHash similarity (``>= threshold``); both
      NULL for a kept row. A cluster is a star (:func:`.star.star_members`): one kept row
      and the rows dropped for it, ``cluster_id`` the kept row's id, ``cluster_size`` ``1 +``
      the rows dropped for it; a kept row nobody is dropped for is in no cluster (not
      listed). So each cluster keeps exactly one row, and these are the clusters of
      :func:`.clusters.clusters` with the same arguments (``keep="first"``). With
      ``verify="exact"``, *similar* is the exact shingle Jaccard reaching the threshold
      (``twin_jaccard``, NULL otherwise; the twin the first such row tried, most similar
      estimate first), over components linked down to the estimate floor of
      :func:`lance_minhash_sql.core.banding.exact_candidate_floor`.
    """
    check_threshold(threshold)
    budget = Budget.parse(memory_limit)
    keep, order_by = check_keep(keep, order_by)
    clustering, verify = check_clustering_verify(clustering, verify)
    progress = check_bool("progress", progress)
    storage_options = options_for(dataset, storage_options)
    return _flags(dataset, column, threshold, keep, order_by, clustering, verify, budget, storage_options, executor,
                  progress)


def _flags(dataset, column: str, threshold: float, keep: str, order_by: str | None, clustering: str, verify: str,
           budget: Budget, storage_options, executor: Executor, progress: bool = False) -> pa.Table:
    """:func:`keep_flags` of checked arguments (``budget``: ``memory_limit`` parsed once)."""
    uri, ds = dataset_handle(dataset, storage_options)
    text_field(ds, column, uri)
    cols = order_by_columns(ds, uri, order_by)
    # the steps that free arrays of the table's width run within the self-join's heap
    # thresholds (steps.py's module doc, 7), so none stays in the heap under the next;
    # the walk reuses the heap's buffers chunk after chunk (each within its part)
    with bounded_heap():
        table = linked_components(ds, column, threshold, verify, budget, storage_options, clustering, executor,
                                  progress)
        trim_heap()  # (the self-join's small buffers freed amid the heap)
        rowid = table.column("_rowid").to_numpy()
        cluster = table.column("cluster_id").to_numpy()
        ordered = table_ordered(rowid, cluster)
        # (keep="first" without order_by: the table's own order, (cluster_id, _rowid); no permutation held)
        order = None if keep == "first" and order_by is None and ordered else keep_order(
            ds, uri, column, keep, order_by, cols, rowid, cluster)
        if clustering == "components":
            return table.append_column(DEDUP_SCHEMA.field("keep"), pa.array(_kept_first(cluster, order), pa.bool_()))
        del table  # (its cluster sizes: the walk reads the row ids and cluster ids alone)
    walk = [rowid, *star_twins(open_index(ds, column, storage_options), threshold, rowid, cluster, order, verify,
                               budget, progress)]
    del rowid, order, cluster
    trim_heap()  # (the walk's chunks)
    with bounded_heap():
        return _star_table(walk, ordered)


def _kept_first(cluster: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """The keep flags of a components table: the first row of each cluster in keep order
    (``order``; ``None``: the table's)."""
    ordered = cluster if order is None else cluster[order]
    first = np.ones(cluster.size, dtype=np.bool_)
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    del ordered
    if order is None:
        return first
    flags = np.zeros(cluster.size, dtype=np.bool_)
    flags[order[first]] = True
    return flags


def _star_table(walk: list, ordered: bool) -> pa.Table:
    """The star keep-flags table (:data:`DEDUP_STAR_SCHEMA`) of a walk, ``walk`` the
    walked rows' ids and :func:`.star.star_twins`' arrays, taken over (the list is
    cleared, each array let go once read): built a column at a time, each column's
    gathers written over in place (zeros under a NULL); ``ordered``: the walked table's
    order is ``(cluster_id, _rowid)`` (:func:`.star.star_members`)."""
    rowid, twin, sim, jac = walk
    walk.clear()
    pos, star_id, star_size = star_members(rowid, twin, ordered)
    columns = [pa.array(rowid[pos], pa.uint64()), pa.array(star_id, pa.uint64()), pa.array(star_size, pa.int64())]
    del star_id, star_size
    twin = twin[pos]  # (the walk's freed)
    flags = twin < 0
    columns.append(pa.array(flags, pa.bool_()))
    np.maximum(twin, 0, out=twin)
    twin_rowid = rowid[twin]
    del twin, rowid
    twin_rowid[flags] = 0
    columns.append(pa.array(twin_rowid, pa.uint64(), mask=flags))
    del twin_rowid
    twin_sim = sim[pos]
    del sim
    twin_sim[flags] = 0.0
    columns.append(pa.array(twin_sim, pa.float64(), mask=flags))
    del twin_sim
    if jac is None:  # (estimate: no Jaccard)
        columns.append(pa.nulls(pos.size, pa.float64()))
        return pa.Table.from_arrays(columns, schema=DEDUP_STAR_SCHEMA)
    twin_jac = jac[pos]
    del pos, jac
    no_jac = flags | np.isnan(twin_jac)
    twin_jac[no_jac] = 0.0
    columns.append(pa.array(twin_jac, pa.float64(), mask=no_jac))
    return pa.Table.from_arrays(columns, schema=DEDUP_STAR_SCHEMA)


@dataclass(frozen=True)
class DedupResult:
    """What :func:`dedup` found and did."""

    dataset: str
    version: int  # the version read
    rows: int  # its live rows
    clusters: int
    clustered_rows: int
    removed: int
    dry_run: bool
    output: str | None = None  # the dataset written (a new path, or ``dataset`` in place)
    output_version: int | None = None
    output_rows: int | None = None
    removed_rowids: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint64), repr=False)

    @property
    def kept(self) -> int:
        return self.rows - self.removed


def _check_output(output, delete_in_place) -> str | None:
    check_bool("delete_in_place", delete_in_place)
    if output is None:
        return None
    if delete_in_place:
        raise InvalidParameterError(
            f"output={output!r} and delete_in_place=True both say where to write: give one (a new dataset, or "
            "a new version of this one without the duplicates), or neither for a dry run")
    if not isinstance(output, str) or not output:
        raise InvalidInputError(f"output={output!r} must be the path of a new Lance dataset, e.g. 'deduped.lance'")
    if dataset_exists(output):
        raise DatasetError(f"output {output!r} already exists; choose a new path (the output is never overwritten)")
    return output


def dedup(dataset, column: str, threshold: float = 0.8, *, keep: str = "first", order_by: str | None = None,
          clustering: str = "components", verify: str = "estimate", output: str | None = None,
          delete_in_place: bool = False, progress: bool = False, memory_limit=None,
          storage_options: dict | None = None, executor: Executor = LOCAL) -> DedupResult:
    """Remove the rows :func:`keep_flags` does not keep: all but one row of each
    near-duplicate cluster (``clustering="components"``), or every row similar to a kept
    row before it in keep order (``clustering="star"``).

    * ``output="new.lance"``: write the kept rows (every column) to a new dataset;
    * ``delete_in_place=True``: delete the others from ``dataset`` in one commit: a new
      version; the version read stays readable (``lance.dataset(uri, version=v)``);
    * neither: a dry run that only counts (nothing is written).

    ``progress``: progress bars on stderr (those of :func:`keep_flags`, then the write).

    The rows written are checked: exactly ``rows - removed``. Arguments and the output
    path are checked before any work.
    """
    check_threshold(threshold)
    keep, order_by = check_keep(keep, order_by)
    clustering, verify = check_clustering_verify(clustering, verify)
    budget = Budget.parse(memory_limit)
    output = _check_output(output, delete_in_place)
    storage_options = options_for(dataset, storage_options)
    uri, ds = dataset_handle(dataset, storage_options)
    if delete_in_place:  # the delete moves the object it runs on to the new version: use our own
        ds = open_dataset(uri, storage_options, version=version_of(ds))
    version = version_of(ds)
    progress = check_bool("progress", progress)
    flags = _flags(ds, column, threshold, keep, order_by, clustering, verify, budget, storage_options, executor,
                   progress)
    keep_col = flags.column("keep").to_numpy(zero_copy_only=False)
    remove = np.sort(flags.column("_rowid").to_numpy()[~keep_col])
    rows = live_rows(ds)
    clusters = int(np.unique(flags.column("cluster_id").to_numpy()).size)
    base = dict(dataset=uri, version=version, rows=rows, clusters=clusters,
                clustered_rows=flags.num_rows, removed=int(remove.size), removed_rowids=remove)
    if output is None and not delete_in_place:
        return DedupResult(dry_run=True, **base)
    if output is not None:
        bar = progress_bar(progress, rows, "dedup write")
        try:
            written = write_without(ds, remove, output, bar.update if bar is not None else None)
        finally:
            if bar is not None:
                bar.close()
        got = live_rows(written)
        if got != rows - remove.size:
            raise DatasetError(f"dedup wrote {got:,} rows to {output!r} but {rows - remove.size:,} were expected; "
                               "the source is unchanged: remove the output and run again")
        return DedupResult(dry_run=False, output=output, output_version=int(written.version), output_rows=got, **base)
    deleted = delete_rows(ds, remove)
    if deleted != remove.size:
        raise DatasetError(
            f"the delete commit removed {deleted:,} rows from {uri!r} but {remove.size:,} were asked (version "
            f"{version_of(ds)}); version {version} still has every row: lance.dataset({uri!r}, version={version})")
    return DedupResult(dry_run=False, output=uri, output_version=version_of(ds), output_rows=live_rows(ds), **base)
