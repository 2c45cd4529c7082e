"""UDFs behind ``minhash_join`` (``sql/join.sql``): the cross-dataset join, shard by shard.

As for ``minhash_pairs`` (:mod:`.self_join`): ``_lms_join_plan(...)`` (constant-folded at
plan time) plans the shards of both datasets' current versions
(:func:`lance_minhash_sql.selfjoin.join_shards.join_shards`, kept in a process-wide cache keyed by both URIs,
versions, columns, the threshold, the shard count and both storage tokens) and returns a
SQL text for ``query()``: a ``UNION ALL`` of one branch per shard, each calling
``_lms_join_shard(...)`` (``side_effects``: run at execution) with the versions the
statement started on. Each side's storage options travel as their own token and reach
only that side's dataset.

DuckDB runs the ``UNION ALL`` branches of a statement whose result keeps its order (a
plain ``SELECT`` fetched to Arrow or Python) one after another, on one thread at a time
(duckdb 2.0.1; a ``count(*)`` or ``ORDER BY`` above them lets some run together). So each
call joins its shard's key range in parts on ``numba.get_num_threads()`` threads itself
(the local executor's ``join_shard``, ``selfjoin/executor.py``), or waits for the Ray task
that joins it (``executor := 'ray'``).
"""

from __future__ import annotations

from functools import partial

import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.errors import ResourceLimitError
from lance_minhash_sql.core.tuning import MAX_SQL_SHARD_PAIRS, SQL_PLANS
from lance_minhash_sql.duck.args import Udf, executor as executor_of, prefixed, require, scalar_rows
from lance_minhash_sql.duck.args import verify as verify_of, verify_exact
from lance_minhash_sql.duck.results import collect_columns, lists_of_columns, rows_type
from lance_minhash_sql.duck.sqltext import literal
from lance_minhash_sql.duck.storage import options_of
from lance_minhash_sql.index.results import JOIN_SCHEMA
from lance_minhash_sql.runtime.cache import ByteCache

__all__ = ["JOIN_UDFS", "join_sql"]

_FN = "minhash_join"
_JOIN_ARROW, JOIN_TYPE = rows_type(JOIN_SCHEMA)
_PLANS = ByteCache.for_objects("SQL join plans", SQL_PLANS)  # both sides' uris, versions, columns, ... -> shards


def join_sql(args: tuple, num_shards: int) -> str:
    """The SQL that ``query()`` runs for one ``minhash_join`` call: one branch per shard.
    ``args``: left, right, column, right column, threshold, left version, right version,
    left storage token, right storage token, verify, executor, ray address."""
    head = ", ".join(literal(a) for a in args[:7])
    tail = ", ".join(literal(a) for a in args[7:])
    return " UNION ALL ".join(
        f"SELECT unnest(_lms_join_shard({head}, {s}, {num_shards}, {tail}), recursive := true)"
        for s in range(num_shards))


def _plan(left, right, column, right_column, threshold, left_token, right_token, versions=None, num_shards=None,
          memory_limit=None):
    from lance_minhash_sql.selfjoin.join_shards import join_shards

    lopt, ropt = options_of(left_token), options_of(right_token)
    if versions is not None:  # the versions the statement started on
        from lance_minhash_sql.io.scan import open_dataset

        left = open_dataset(left, lopt, version=versions[0])
        right = open_dataset(right, ropt, version=versions[1])
    budget = None if memory_limit is None else prefixed(_FN, Budget.parse, memory_limit)
    return prefixed(_FN, partial(join_shards, right_column=right_column, num_shards=num_shards,
                                  budget=budget, left_storage_options=lopt, right_storage_options=ropt),
                     left, right, column, threshold)


def join_plan(left, right, column, right_column, threshold, exact, left_storage, right_storage,
              memory_limit, verify, executor, ray_address) -> pa.Array:
    out = []
    for row in scalar_rows(_FN, left=left, right=right, column=column, right_column=right_column, threshold=threshold,
                           exact=exact, ls=left_storage, rs=right_storage, memory_limit=memory_limit, verify=verify,
                           executor=executor, ray_address=ray_address):
        require(_FN, row, "left", "right", "column")
        verify_ = verify_exact(_FN, row["verify"], row["exact"])
        run = executor_of(_FN, row["executor"], row["ray_address"])
        shards = _plan(row["left"], row["right"], row["column"], row["right_column"], row["threshold"], row["ls"],
                       row["rs"], memory_limit=row["memory_limit"])
        p = shards[0].plan
        args = (p.left.uri, p.right.uri, p.left.column, p.right.column, p.threshold, p.left.version,
                p.right.version, row["ls"], row["rs"], verify_, run.name, row["ray_address"])
        _PLANS.put(args[:9] + (len(shards),), shards)
        out.append(join_sql(args, len(shards)))
    return pa.array(out, pa.string())


def _shard_columns(shard, verify: str, run, left_token, right_token) -> list[pa.Array] | None:
    def too_many() -> ResourceLimitError:
        return ResourceLimitError(
            f"{_FN}: shard {shard.index} of {shard.num_shards} holds more than {MAX_SQL_SHARD_PAIRS:,} pairs at "
            f"threshold={shard.threshold:g} (large buckets of identical rows on both sides): too many for one "
            "SQL result. Stream them with lance-minhash join ... --output pairs.parquet or the Python join(), "
            "or raise the threshold")

    return collect_columns(run.join_shard(shard, verify, options_of(left_token), options_of(right_token)),
                           MAX_SQL_SHARD_PAIRS, too_many)


def join_shard(left, right, column, right_column, threshold, left_version, right_version, shard,
               num_shards, left_storage, right_storage, verify, executor, ray_address) -> pa.Array:
    out = []
    for row in scalar_rows(_FN, left=left, right=right, column=column, right_column=right_column, threshold=threshold,
                           lv=left_version, rv=right_version, shard=shard, n=num_shards, ls=left_storage,
                           rs=right_storage, verify=verify, executor=executor, ray_address=ray_address):
        n = int(row["n"])
        key = (row["left"], row["right"], row["column"], row["right_column"], row["threshold"], int(row["lv"]),
               int(row["rv"]), row["ls"], row["rs"], n)
        shards = _PLANS.get(key)
        if shards is None:  # evicted, or planned in another process: plan those versions again
            shards = _plan(row["left"], row["right"], row["column"], row["right_column"], row["threshold"],
                           row["ls"], row["rs"], versions=(int(row["lv"]), int(row["rv"])), num_shards=n)
            _PLANS.put(key, shards)
        out.append(_shard_columns(shards[int(row["shard"])], verify_of(_FN, row["verify"]),
                                  executor_of(_FN, row["executor"], row["ray_address"]), row["ls"], row["rs"]))
    return lists_of_columns(out, _JOIN_ARROW)


JOIN_UDFS: tuple[Udf, ...] = (
    Udf("_lms_join_plan", join_plan,
        ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "BOOLEAN") + ("VARCHAR",) * 6, "VARCHAR", False),
    Udf("_lms_join_shard", join_shard,
        ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "BIGINT", "BIGINT", "BIGINT", "BIGINT")
        + ("VARCHAR",) * 5, JOIN_TYPE, True),
)
