"""UDFs behind minhash_pairs, minhash_clusters and minhash_dedup (``sql/pairs.sql``).

``minhash_pairs`` streams shard by shard on DuckDB's threads. DuckDB calls a UDF once
per chunk of up to 2048 input rows, so a ``range(n)`` of shard numbers would hand all
shards to one call; instead:

1. ``_lms_pairs_plan(...)`` (cheap, constant-folded at plan time) plans the shards of
   the index's current version (:func:`lance_minhash_sql.selfjoin.steps.shards_for`; the plan is kept in a
   process-wide cache keyed by ``(dataset, version, column, threshold, shards, storage
   token)``) and
   returns a SQL text for ``query()``: a ``UNION ALL`` of one one-row branch per shard
   (DuckDB plans about 3,000 branches a second);
2. each branch calls ``_lms_pair_shard(dataset, column, threshold, version, shard,
   shards, storage, memory_limit, executor, ray_address)`` (``_lms_pair_shard_verified``
   with ``verify := 'exact'``; ``side_effects``: run at execution), which takes the plan
   from the cache (or plans that version again) and returns that shard's pairs as one
   list, computed by the executor (``selfjoin/executor.py``: on DuckDB's thread, or in a
   Ray task it waits for). ``storage`` is the token of the storage options
   (:mod:`.storage`): the SQL text never holds their values.

So each call holds one shard's pairs, and DuckDB runs the branches on its threads (the
numba kernels release the GIL). A shard whose pairs exceed :data:`MAX_SQL_SHARD_PAIRS`
(a giant bucket of identical rows) fails with :class:`ResourceLimitError` instead of
exhausting memory; the Python :func:`lance_minhash_sql.selfjoin.pairs.pairs` and ``lance-minhash pairs``
stream such shards in chunks.

:class:`lance_minhash_sql.LowRecallWarning` is a Python warning issued by the planning call,
in the thread that runs the statement.
"""

from __future__ import annotations

from functools import partial

import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.errors import ResourceLimitError
from lance_minhash_sql.core.tuning import MAX_SQL_SHARD_PAIRS, SQL_PLANS
from lance_minhash_sql.duck.args import Udf, clustering as clustering_of, executor as executor_of, prefixed, require
from lance_minhash_sql.duck.args import scalar_rows, verify as verify_of, verify_exact
from lance_minhash_sql.duck.results import collect_columns, lists_of_columns, lists_of_tables, rows_type
from lance_minhash_sql.duck.sqltext import literal
from lance_minhash_sql.duck.storage import options_of
from lance_minhash_sql.index.results import (CLUSTERS_SCHEMA, DEDUP_SCHEMA, DEDUP_STAR_SCHEMA, PAIRS_EXACT_SCHEMA,
                                             PAIRS_SCHEMA)
from lance_minhash_sql.runtime.cache import ByteCache

__all__ = ["PAIR_UDFS", "pairs_sql"]


_PAIRS_ARROW, PAIRS_TYPE = rows_type(PAIRS_SCHEMA)
_PAIRS_EXACT_ARROW, PAIRS_EXACT_TYPE = rows_type(PAIRS_EXACT_SCHEMA)
_CLUSTERS_ARROW, CLUSTERS_TYPE = rows_type(CLUSTERS_SCHEMA)
_DEDUP_ARROW, DEDUP_TYPE = rows_type(DEDUP_SCHEMA)
_DEDUP_STAR_ARROW, DEDUP_STAR_TYPE = rows_type(DEDUP_STAR_SCHEMA)


_PLANS = ByteCache.for_objects("SQL self-join plans", SQL_PLANS)  # (uri, version, column, threshold, shards, token)


def pairs_sql(uri: str, column: str, threshold: float, version: int, num_shards: int, storage: str | None,
              memory_limit: int, verify: str, executor: str, ray_address: str | None) -> str:
    """The SQL that ``query()`` runs for one ``minhash_pairs`` call: one branch per shard
    (with ``verify := 'estimate'`` the shards return three columns and ``jaccard`` is added
    as NULL). Each branch names its executor: DuckDB's thread runs the shard (``local``) or
    waits for the Ray task that runs it (``ray``)."""
    head = ", ".join(literal(a) for a in (uri, column, threshold, version))
    tail = ", ".join(literal(a) for a in (storage, memory_limit, executor, ray_address))
    udf = "_lms_pair_shard_verified" if verify == "exact" else "_lms_pair_shard"
    union = " UNION ALL ".join(f"SELECT unnest({udf}({head}, {s}, {num_shards}, {tail}), recursive := true)"
                               for s in range(num_shards))
    return union if verify == "exact" else f"SELECT *, NULL::DOUBLE AS jaccard FROM ({union})"


def pairs_plan(dataset, column, threshold, exact, storage, memory_limit, verify, executor, ray_address) -> pa.Array:
    from lance_minhash_sql.selfjoin.steps import shards_for

    fn = "minhash_pairs"
    out = []
    for row in scalar_rows(fn, dataset=dataset, column=column, threshold=threshold, exact=exact, storage=storage,
                           memory_limit=memory_limit, verify=verify, executor=executor, ray_address=ray_address):
        require(fn, row, "dataset", "column")
        verify_ = verify_exact(fn, row["verify"], row["exact"])
        run = executor_of(fn, row["executor"], row["ray_address"])
        token = row["storage"]
        budget = prefixed(fn, Budget.parse, row["memory_limit"])
        shards = prefixed(fn, partial(shards_for, budget=budget, storage_options=options_of(token)),
                          row["dataset"], row["column"], row["threshold"])
        s = shards[0]
        _PLANS.put((s.uri, s.version, s.column, s.threshold, len(shards), token), shards)
        out.append(pairs_sql(s.uri, s.column, s.threshold, s.version, len(shards), token, budget.total, verify_,
                             run.name, row["ray_address"]))
    return pa.array(out, pa.string())


def _shards_of(uri: str, column: str, threshold: float, version: int, num_shards: int, storage: str | None) -> list:
    key = (uri, version, column, threshold, num_shards, storage)
    shards = _PLANS.get(key)
    if shards is None:  # evicted, or planned in another process: plan that version again
        from lance_minhash_sql.io.scan import open_dataset
        from lance_minhash_sql.selfjoin.shards import pair_shards

        options = options_of(storage)
        shards = pair_shards(open_dataset(uri, options, version=version), column, threshold, num_shards=num_shards,
                             storage_options=options)
        _PLANS.put(key, shards)
    return shards


def _shard_columns(fn: str, shards: list, index: int, verify: str, budget: Budget, run, storage: str | None
                   ) -> list[pa.Array] | None:
    """Shard ``shards[index]``'s pairs as one array per column, or ``None``
    (:func:`.results.collect_columns`), within ``budget``, computed by the executor
    ``run`` (the statement's calls share ``shards``: what they share is fetched once)."""
    shard = shards[index]

    def too_many() -> ResourceLimitError:
        return ResourceLimitError(
            f"{fn}: shard {shard.index} of {shard.num_shards} of {shard.uri!r} holds more than "
            f"{MAX_SQL_SHARD_PAIRS:,} pairs at threshold={shard.threshold:g} (a bucket of many identical rows): "
            "too many for one SQL result. Stream them with lance-minhash pairs ... --output pairs.parquet or "
            "the Python pairs(), raise the threshold, or use minhash_clusters / minhash_dedup, which never "
            "list all pairs")

    return collect_columns(run.shard_pairs(shards, index, verify, budget, options_of(storage)), MAX_SQL_SHARD_PAIRS,
                           too_many)


def _pair_shard(type_: pa.DataType, verify: str):
    def run(dataset, column, threshold, version, shard, num_shards, storage, memory_limit, executor,
            ray_address) -> pa.Array:
        fn = "minhash_pairs"
        out = []
        for row in scalar_rows(fn, dataset=dataset, column=column, threshold=threshold, version=version, shard=shard,
                               num_shards=num_shards, storage=storage, memory_limit=memory_limit, executor=executor,
                               ray_address=ray_address):
            shards = _shards_of(row["dataset"], row["column"], row["threshold"], int(row["version"]),
                                int(row["num_shards"]), row["storage"])
            out.append(_shard_columns(fn, shards, int(row["shard"]), verify, Budget.of(int(row["memory_limit"])),
                                      executor_of(fn, row["executor"], row["ray_address"]), row["storage"]))
        return lists_of_columns(out, type_)

    run.__name__ = "pair_shard_verified" if verify == "exact" else "pair_shard"
    return run


def clusters(dataset, column, threshold, clustering, verify, storage, memory_limit, executor, ray_address
             ) -> pa.Array:
    from lance_minhash_sql.selfjoin.clusters import clusters as run

    fn = "minhash_clusters"
    out = []
    for row in scalar_rows(fn, dataset=dataset, column=column, threshold=threshold, clustering=clustering,
                           verify=verify, storage=storage, memory_limit=memory_limit, executor=executor,
                           ray_address=ray_address):
        require(fn, row, "dataset", "column")
        out.append(prefixed(fn, partial(run, clustering=clustering_of(fn, row["clustering"]),
                                        verify=verify_of(fn, row["verify"]), memory_limit=row["memory_limit"],
                                        storage_options=options_of(row["storage"]),
                                        executor=executor_of(fn, row["executor"], row["ray_address"])),
                            row["dataset"], row["column"], row["threshold"]))
    return lists_of_tables(out, _CLUSTERS_ARROW)


def dedup_plan(dataset, column, threshold, keep, order_by, clustering, verify, storage, memory_limit, executor,
               ray_address) -> pa.Array:
    """The SQL ``query()`` runs for one ``minhash_dedup`` call: ``_lms_dedup`` (today's
    four columns) or, with ``clustering := 'star'``, ``_lms_dedup_star`` (the twin columns
    too); the other arguments are passed on as they came (checked there)."""
    fn = "minhash_dedup"
    out = []
    for row in scalar_rows(fn, dataset=dataset, column=column, threshold=threshold, keep=keep, order_by=order_by,
                           clustering=clustering, verify=verify, storage=storage, memory_limit=memory_limit,
                           executor=executor, ray_address=ray_address):
        udf = "_lms_dedup_star" if clustering_of(fn, row["clustering"]) == "star" else "_lms_dedup"
        verify_of(fn, row["verify"])
        executor_of(fn, row["executor"], row["ray_address"])
        t = row["threshold"]
        args = [literal(row["dataset"]), literal(row["column"]),
                "NULL::DOUBLE" if t is None else f"{literal(repr(float(t)))}::DOUBLE",
                *(f"{literal(row[name])}::VARCHAR" for name in ("keep", "order_by", "verify", "storage",
                                                                "memory_limit", "executor", "ray_address"))]
        out.append(f"SELECT unnest({udf}({', '.join(args)}), recursive := true)")
    return pa.array(out, pa.string())


def _dedup(star: bool, type_: pa.DataType):
    def run(dataset, column, threshold, keep, order_by, verify, storage, memory_limit, executor,
            ray_address) -> pa.Array:
        from lance_minhash_sql.selfjoin.dedup import keep_flags

        fn = "minhash_dedup"
        out = []
        for row in scalar_rows(fn, dataset=dataset, column=column, threshold=threshold, keep=keep, order_by=order_by,
                               verify=verify, storage=storage, memory_limit=memory_limit, executor=executor,
                               ray_address=ray_address):
            require(fn, row, "dataset", "column")
            out.append(prefixed(fn, partial(keep_flags, keep=row["keep"], order_by=row["order_by"],
                                            clustering="star" if star else "components",
                                            verify=verify_of(fn, row["verify"]),
                                            memory_limit=row["memory_limit"], storage_options=options_of(row["storage"]),
                                            executor=executor_of(fn, row["executor"], row["ray_address"])),
                                row["dataset"], row["column"], row["threshold"]))
        return lists_of_tables(out, type_)

    run.__name__ = "dedup_star" if star else "dedup"
    return run


# dataset, column, threshold, keep, order_by, verify, storage token, memory limit, executor, ray address
_DEDUP_ARGS = ("VARCHAR", "VARCHAR", "DOUBLE") + ("VARCHAR",) * 7
# dataset, column, threshold, version, shard, shards, storage token, memory limit in bytes, executor, ray address
_SHARD_ARGS = ("VARCHAR", "VARCHAR", "DOUBLE", "BIGINT", "BIGINT", "BIGINT", "VARCHAR", "BIGINT", "VARCHAR", "VARCHAR")
PAIR_UDFS: tuple[Udf, ...] = (
    Udf("_lms_pairs_plan", pairs_plan, ("VARCHAR", "VARCHAR", "DOUBLE", "BOOLEAN") + ("VARCHAR",) * 5, "VARCHAR",
        False),
    Udf("_lms_pair_shard", _pair_shard(_PAIRS_ARROW, "estimate"), _SHARD_ARGS, PAIRS_TYPE, True),
    Udf("_lms_pair_shard_verified", _pair_shard(_PAIRS_EXACT_ARROW, "exact"), _SHARD_ARGS, PAIRS_EXACT_TYPE, True),
    Udf("_lms_clusters", clusters, ("VARCHAR", "VARCHAR", "DOUBLE") + ("VARCHAR",) * 6, CLUSTERS_TYPE, True),
    Udf("_lms_dedup_plan", dedup_plan, ("VARCHAR",) * 2 + ("DOUBLE",) + ("VARCHAR",) * 8, "VARCHAR", False),
    Udf("_lms_dedup", _dedup(False, _DEDUP_ARROW), _DEDUP_ARGS, DEDUP_TYPE, True),
    Udf("_lms_dedup_star", _dedup(True, _DEDUP_STAR_ARROW), _DEDUP_ARGS, DEDUP_STAR_TYPE, True),
)
