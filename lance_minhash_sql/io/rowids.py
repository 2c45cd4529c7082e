"""Row ids of an index segment against the current dataset: compaction remaps and deletions.

What pylance 14.0.2 does with a ``MINHASHLSH`` index when ``ds.optimize.compact_files()``
rewrites fragments:

* by default the compaction **remaps the index itself**: the segment is rewritten under a
  new uuid with the rows of the removed fragments given their new addresses, rows
  deleted before the compaction dropped, and its fragment bitmap set to the new
  fragments. Any index in this format is remapped alike, including one this package wrote;
* with ``defer_index_remap=True`` the segment files are left as they are (old row
  addresses, fragments that no longer exist) while the manifest's fragment bitmap already
  names the new fragments, and the compaction records the old → new address mapping in a
  *fragment-reuse index* (``__lance_frag_reuse``, type URL
  ``/lance.table.FragmentReuseIndexDetails``), one *round* per compaction. Lance's reader
  maps every row id it loads through it: an address of a compacted fragment gets its new
  address (chained across rounds), a row the compaction dropped becomes null, an address
  of a live fragment is returned unchanged. ``ds.remap_row_addrs`` exposes that mapping.
  ``optimize_indices()`` that rewrites a segment (merge, or new rows appended to it)
  writes the remapped addresses. Lance does not trim rounds itself ("schedule an
  additional process to trim the index periodically"); a round whose addresses were
  trimmed is no longer remapped.

So a reader of this package maps a segment's row ids through :func:`remap` whenever the
dataset version has a fragment-reuse index (``io/manifest.py: frag_reuse``, read with the
index's segments), and a rewrite (optimize, merge) writes the remapped ids. With stable
row ids a compaction keeps every row id and nothing is remapped.
"""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.tuning import ROWID_CALL_ROWS

__all__ = ["remap", "live_rowids"]


def remap(ds: "lance.LanceDataset", rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(row ids, kept)``: ``rowids`` mapped through the fragment-reuse index; ``kept`` is
    False where the compaction dropped the row (its mapped id is then 0)."""
    rowids = np.asarray(rowids, dtype=np.uint64)
    out = np.empty(rowids.size, dtype=np.uint64)
    kept = np.ones(rowids.size, dtype=np.bool_)
    for s in range(0, rowids.size, ROWID_CALL_ROWS):
        part = rowids[s:s + ROWID_CALL_ROWS]
        got = ds.remap_row_addrs(pa.array(part, type=pa.uint64()))
        if got is None:  # no fragment-reuse index: nothing to map
            out[s:s + part.size] = part
            continue
        valid = got.is_valid().to_numpy(zero_copy_only=False)
        out[s:s + part.size] = got.fill_null(0).to_numpy(zero_copy_only=False)
        kept[s:s + part.size] = valid
    return out, kept


def live_rowids(ds: "lance.LanceDataset", fragment_ids) -> np.ndarray:
    """Sorted ``_rowid`` of the live rows of the given fragments of ``ds`` (a row-id-only
    scan: no column data is read)."""
    frags = [ds.get_fragment(int(f)) for f in fragment_ids]
    frags = [f for f in frags if f is not None]
    if not frags:
        return np.empty(0, dtype=np.uint64)
    parts = [b.column("_rowid").to_numpy() for b in
             ds.scanner(columns=[], with_row_id=True, fragments=frags, batch_size=ROWID_CALL_ROWS).to_batches()]
    ids = (np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)).astype(np.uint64, copy=False)
    if ids.size > 1 and not (ids[1:] > ids[:-1]).all():  # a scan is usually in id order already
        ids = np.sort(ids)
    return ids
