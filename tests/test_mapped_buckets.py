"""The buckets of a local segment searched in its band file's memory map
(``index/band_reads.py: BandReader.mapped_buckets``) against those its store reads
(``BandReader.buckets``): the same candidates and bands shared, for buckets of one row,
buckets spanning pages, keys no row has, and keys past the last page."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa

import lance_minhash_sql as lms
from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.kernels.lsh import bucket_pages, merge_candidates
from lance_minhash_sql.runtime.cache import clear_cache


def _merged(entry, qkeys, got):
    start, end, kind, page_slot, store_docs, win_docs = got
    return merge_candidates(readonly(start), readonly(end), readonly(kind), page_slot, store_docs,
                            entry.bands.page_rows, win_docs)


def test_mapped_buckets_match_the_page_store(tmp_path):
    rng = np.random.default_rng(9)
    words = [f"w{i}" for i in range(3000)]
    same = " ".join(rng.choice(words, 30))
    texts = [same] * 5000 + [" ".join(rng.choice(words, int(rng.integers(5, 40)))) for _ in range(3000)]
    uri = str(tmp_path / "pages.lance")
    lance.write_dataset(pa.table({"text": texts}), uri)
    lms.build_index(uri, "text")
    clear_cache()
    opened = open_index(uri, "text", None)
    (entry,) = opened.search_view(fast_search=True).entries
    assert entry.files.band_map is not None and entry.bands.num_pages > 3  # the 5,000 copies span pages
    signer = signer_for(opened.params)
    queries = pa.array([same, same + " more"] + texts[5000:5300]
                       + [" ".join(rng.choice(words, 20)) + " unseen" for _ in range(50)], pa.large_string())
    sigs, has = signer.sign(queries)
    qkeys = readonly(np.ascontiguousarray(signer.band_keys(sigs[has])))
    qkeys = readonly(np.concatenate([qkeys, np.full((1, qkeys.shape[1]), np.iinfo(np.uint64).max, np.uint64)]))
    with entry.lock:
        lo, hi = bucket_pages(entry.bands.page_table, qkeys)
        mapped = _merged(entry, qkeys, entry.mapped_buckets(qkeys, lo, hi))
        assert entry.stats["band_pages_read"] == 0  # nothing read into the page store
        stored = _merged(entry, qkeys, entry.buckets(qkeys, lo, hi))
    for a, b in zip(mapped, stored):
        assert np.array_equal(a, b)
    offsets = mapped[0]
    assert offsets[1] - offsets[0] == 5000  # the copies' buckets, across pages
    assert offsets[-1] - offsets[-2] == 0  # the largest key: no row
