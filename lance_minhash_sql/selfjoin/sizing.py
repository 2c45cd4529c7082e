"""What each step of the self-join holds within its budget: the rows of a shard, of a
group's pool, of a window and of a batch of pairs, each a part of ``memory_limit``
(:class:`lance_minhash_sql.core.budget.Budget`), and what the pairs and the clusters hold
per index row whatever the budget. The steps that take these sizes are :mod:`.steps`;
the dry run prices the same sizes (``diagnostics/costs.py``).
"""

from __future__ import annotations

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.errors import ResourceLimitError
from lance_minhash_sql.core.sizes import format_bytes
from lance_minhash_sql.core.tuning import (MIN_CHUNK_PAIRS, MIN_SHARD_ROWS, MIN_WINDOW_ROWS, POOL_SHARE,
                                           READ_ROW_BYTES, SHARD_BAND_ROWS)
from lance_minhash_sql.selfjoin.parent import BLOCK_BYTES, MIN_BLOCKS, parent_share
from lance_minhash_sql.selfjoin.verify import SET_ROW_BYTES

__all__ = ["shard_rows", "chunk_pairs", "keep_rows", "pool_rows", "pool_size", "window_rows", "fixed_bytes",
           "pairs_pool", "components_bytes", "clusters_pool"]


def shard_rows(budget: Budget) -> int:
    """Band rows per shard: the budget's ``shard`` part (at least :data:`MIN_SHARD_ROWS`)."""
    return int(min(SHARD_BAND_ROWS, max(MIN_SHARD_ROWS, budget.shard // READ_ROW_BYTES)))


def chunk_pairs(budget: Budget, most: int) -> int:
    """Pairs per record batch: the budget's ``pairs`` part (at least
    :data:`MIN_CHUNK_PAIRS`), at most ``most``."""
    return int(min(most, max(MIN_CHUNK_PAIRS, budget.pairs // 24)))


def keep_rows(budget: Budget) -> int:
    """Band rows of a group kept from the marking pass: the budget's ``kept`` part at 12
    bytes a row; the group's other shards are read again."""
    return budget.kept // READ_ROW_BYTES


def pool_rows(budget: Budget, k: int, fixed: int = 0, extra: int = 0) -> int:
    """Candidates a group's pool holds: the budget's ``pool`` part, ``fixed`` bytes of it
    held elsewhere; signature, row id and doc id of each, and ``extra`` bytes beside."""
    return int((budget.pool - fixed) // (2 * k + 12 + extra))


def pool_size(budget: Budget, k: int, fixed: int = 0, exact: bool = False) -> int:
    """:func:`pool_rows`, at least :data:`MIN_WINDOW_ROWS` (what a window holds); with
    ``exact`` verification each row's set size and counts beside it
    (:data:`.verify.SET_ROW_BYTES`)."""
    return max(MIN_WINDOW_ROWS, pool_rows(budget, k, fixed, SET_ROW_BYTES if exact else 0))


def window_rows(max_docs: int) -> int:
    """Band rows of a window of a shard alone over a pool of ``max_docs`` candidates."""
    return max(MIN_WINDOW_ROWS, max_docs // 2)


def fixed_bytes(total_docs: int, per_doc: int) -> int:
    """What the self-join holds per index row whatever the budget: ``per_doc`` bytes (the
    clusters' union-find, the pairs' labels) and the candidates' bit set."""
    return total_docs * per_doc + (total_docs + 7) // 8


def pairs_pool(total_docs: int, k: int, budget: Budget, exact: bool = False) -> tuple[bool, int]:
    """``(labelled, rows)`` of the pairs' self-join within ``budget``: whether it keeps the
    labels in memory (4 bytes a row, while they fit the budget's ``labels`` part of the
    pool; past it in a file, ``selfjoin/groups.py: Labels``), and the candidates a group's
    pool holds beside them (:func:`pool_size`, with ``exact`` verification)."""
    labelled = fixed_bytes(total_docs, 4) <= budget.labels
    return labelled, pool_size(budget, k, fixed_bytes(total_docs, 4 if labelled else 0), exact)


def components_bytes(total_docs: int, budget: Budget) -> int:
    """What clusters hold in the pool's part of ``budget``: the candidates' bit set and the
    union-find's share (all of it, or its resident pages once in its file:
    :func:`.parent.parent_share`)."""
    return fixed_bytes(total_docs, 0) + parent_share(total_docs, budget)


def _least_limit(total_docs: int, k: int) -> int:
    """The smallest budget (to a KiB) whose pool holds :data:`MIN_WINDOW_ROWS` twice
    beside the clusters' components (their bytes only grow slower than the pool's share
    past a few hundred KiB)."""
    def fits(limit: int) -> bool:
        budget = Budget.of(limit)
        return pool_rows(budget, k, components_bytes(total_docs, budget)) >= 2 * MIN_WINDOW_ROWS

    lo, hi = 0, 1 << 20
    while not fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1024:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def clusters_pool(total: int, k: int, budget: Budget, uri: str) -> None:
    """Check that the clusters of the ``total`` rows of ``uri`` leave a pool of two windows
    in ``budget`` beside their components (:func:`components_bytes`); raises
    :class:`ResourceLimitError` naming the least ``memory_limit`` that does."""
    fixed = components_bytes(total, budget)
    if pool_rows(budget, k, fixed) >= 2 * MIN_WINDOW_ROWS:
        return
    need = _least_limit(total, k)
    raise ResourceLimitError(
        f"memory_limit={format_bytes(budget.total)} is too small for the clusters of the {total:,} rows of "
        f"{uri!r}: their bit set of candidates (a bit a row: {format_bytes(fixed_bytes(total, 0))}) "
        f"and their union-find ({format_bytes(fixed - fixed_bytes(total, 0))}: 4 bytes a row, or once moved to "
        f"a temporary file the pages it keeps resident, at least {MIN_BLOCKS} blocks of "
        f"{format_bytes(BLOCK_BYTES)}) "
        f"leave no room for a pool of {2 * MIN_WINDOW_ROWS} signatures in the {POOL_SHARE:.1%} of memory_limit "
        f"they share; raise memory_limit to at least {format_bytes(need)}, "
        f"e.g. memory_limit := '{-(-need // 2**20)}MiB'")
