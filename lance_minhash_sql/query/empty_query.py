"""Why a search query found nothing, said as a warning (an empty result cannot say it).

Two reasons are the index's, not the data's: the query has no tokens (an empty text, or
only punctuation and spaces for the tokenizer), so it has no signature and matches
nothing; or its signature shares no LSH band with any indexed row, so no row is even a
candidate. Both give 0 rows; :func:`warn_empty_queries` names which, once per call. A
threshold search warns of the first only: that no row shares a band with a query is its
answer (no row reaches the threshold), and an index too coarse for the threshold is
:class:`~lance_minhash_sql.LowRecallWarning`'s to say.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.errors import EmptySearchWarning, warn

__all__ = ["warn_empty_queries"]


def _quote(texts: pa.Array, i: int) -> str:
    text = texts[int(i)].as_py() or ""
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _which(texts: pa.Array, idx: np.ndarray, numbers) -> str:
    if len(texts) == 1 and numbers is None:
        return f"the query {_quote(texts, idx[0])}"
    i = int(idx[0])
    name = f"queries[{i}]" if numbers is None else f"the query of row {int(numbers[i])}"
    return f"{idx.size:,} of {len(texts):,} queries (e.g. {name}, {_quote(texts, i)})"


def warn_empty_queries(texts: pa.Array, has: np.ndarray, candidates: np.ndarray | None, numbers=None) -> None:
    """Warn for queries without tokens (``has`` false) and, of the others, those with no
    candidate (``candidates``: candidate counts of the queries with tokens, in order).
    A query is named by its position in ``texts`` (``queries[i]``, as a Python list), or
    by its row in ``numbers`` (SQL: the statement's row, counted from 1, NULL queries too)."""
    no_tokens = np.flatnonzero(~has)
    if no_tokens.size:
        warn(EmptySearchWarning(
            f"{_which(texts, no_tokens, numbers)} {'has' if no_tokens.size == 1 else 'have'} no tokens (it is empty, or only punctuation and spaces for the "
            "index's tokenizer), so it has no MinHash signature and matches no row: 0 rows for it"))
    if candidates is not None and candidates.size:
        none = np.flatnonzero(candidates == 0)
        if none.size:
            active = np.flatnonzero(has)
            warn(EmptySearchWarning(
                f"{_which(texts, active[none], numbers)} {'shares' if none.size == 1 else 'share'} no LSH band with any indexed row, so no row is a candidate: "
                "0 rows for it (no indexed text is near-duplicate enough; an index with more bands, e.g. "
                "minhash_build(..., threshold := 0.5), finds less similar rows)"))
