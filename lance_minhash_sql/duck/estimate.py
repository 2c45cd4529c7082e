"""The UDF behind ``minhash_estimate`` (``sql/estimate.sql``): the dry run of the self-join,
one row per threshold (:mod:`lance_minhash_sql.diagnostics.estimate`).

``thresholds`` arrives as the ``to_json()`` text of the macro's argument (a list, or one
number), ``memory_limit`` as text (bytes or a size such as ``'1GiB'``), integers as
``DOUBLE`` (``duck/args.py``).
"""

from __future__ import annotations

import pyarrow as pa

from lance_minhash_sql.index.results import ESTIMATE_SCHEMA
from lance_minhash_sql.duck.args import Udf, integer, json_value, prefixed, require, scalar_rows, verify
from lance_minhash_sql.duck.results import list_of, lists_of_tables, rows_type
from lance_minhash_sql.duck.storage import options_of

__all__ = ["ESTIMATE_UDFS"]


def estimate(dataset, column, thresholds, sample_rows, verify_mode, seed, storage, memory_limit) -> pa.Array:
    """``_lms_estimate(dataset, column, thresholds, sample_rows, verify, seed, storage, memory_limit)``."""
    from lance_minhash_sql.diagnostics.estimate import estimate as run

    fn = "minhash_estimate"
    out = []
    for row in scalar_rows(fn, dataset=dataset, column=column, thresholds=thresholds, sample_rows=sample_rows,
                           verify=verify_mode, seed=seed, storage=storage, memory_limit=memory_limit):
        require(fn, row, "dataset", "column", "thresholds", "sample_rows", "verify", "seed")
        out.append(prefixed(fn, run, row["dataset"], row["column"], json_value(row["thresholds"]),
                            integer(fn, "sample_rows", row["sample_rows"]), verify=verify(fn, row["verify"]),
                            seed=integer(fn, "seed", row["seed"]), memory_limit=row["memory_limit"],
                            storage_options=options_of(row["storage"])))
    return lists_of_tables(out, list_of(ESTIMATE_SCHEMA))


ESTIMATE_UDFS: tuple[Udf, ...] = (
    Udf("_lms_estimate", estimate, ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "VARCHAR", "DOUBLE", "VARCHAR", "VARCHAR"),
        rows_type(ESTIMATE_SCHEMA)[1], True),
)
