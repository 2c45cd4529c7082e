"""Signatures gathered from a memory map (io/mapped.py) equal Lance's own reads."""

from __future__ import annotations

import os

import numpy as np
import pytest

from lance_minhash_sql.errors import CorruptIndexError
from lance_minhash_sql.io.mapped import MappedRows
from lance_minhash_sql.io.segments import SIGNATURES_FILE, BandsWriter, SignaturesWriter, open_segment
from lance_minhash_sql.kernels.similarity import band_keys
from lance_minhash_sql.params import MinHashParams

ROWS = 140_000  # three signature pages of 65,536 rows (k=128)


@pytest.fixture(scope="module")
def segment(tmp_path_factory):
    params = MinHashParams(num_hashes=128, num_bands=16, shingle_size=3)
    seg = str(tmp_path_factory.mktemp("seg"))
    rng = np.random.default_rng(5)
    sigs = rng.integers(0, 1 << 16, size=(ROWS, 128), dtype=np.uint16)
    w = SignaturesWriter(seg, params)
    for a in range(0, ROWS, 30_000):
        w.write(np.arange(a, min(a + 30_000, ROWS), dtype=np.uint64) * 3, sigs[a:a + 30_000])
    w.close()
    return seg, params, sigs


def test_mapped_rows_equal_the_written_signatures_across_pages(segment):
    seg, params, sigs = segment
    from lance.file import LanceFileReader

    from lance_minhash_sql.io.chunks import fixed_rows

    path = os.path.join(seg, SIGNATURES_FILE)
    layout = fixed_rows(None, path, LanceFileReader(path).metadata(), 1, params.num_hashes, 2)
    assert layout is not None and layout.starts.size == 4  # three pages: the rows are plain
    rows = MappedRows(path, layout.starts, layout.positions, layout.row_bytes)
    rng = np.random.default_rng(1)
    for picks in (np.array([0]), np.array([ROWS - 1]), np.array([65_535, 65_536, 131_071, 131_072]),
                  np.unique(rng.integers(0, ROWS, 5000)), np.arange(ROWS)):
        got = rows.read_rows(picks).view("<u2").reshape(-1, params.num_hashes)
        assert np.array_equal(got, sigs[picks])
    assert rows.read_rows(np.empty(0, np.int64)).shape == (0, 2 * params.num_hashes)
    with pytest.raises(CorruptIndexError, match="outside its 140000 rows"):
        rows.read_rows(np.array([ROWS]))


def test_open_segment_reads_local_signatures_through_the_map(segment):
    seg, params, sigs = segment
    keys = band_keys(np.ascontiguousarray(sigs).view(np.uint8).reshape(ROWS, -1), params.num_bands).reshape(-1)
    docs = np.repeat(np.arange(ROWS, dtype=np.uint32), params.num_bands)
    order = np.lexsort((docs, keys))
    w = BandsWriter(seg, params, num_docs=ROWS)
    w.write(keys[order], docs[order])
    w.close()
    files = open_segment(seg)
    assert isinstance(files.signature_rows, MappedRows)
    picks = np.unique(np.random.default_rng(2).integers(0, ROWS, 3000))
    assert np.array_equal(files.read_signature_rows(picks), sigs[picks])


def test_truncated_file_is_refused(tmp_path, segment):
    seg, params, _ = segment
    from lance.file import LanceFileReader

    from lance_minhash_sql.io.chunks import fixed_rows

    path = os.path.join(seg, SIGNATURES_FILE)
    layout = fixed_rows(None, path, LanceFileReader(path).metadata(), 1, params.num_hashes, 2)
    short = tmp_path / "short.lance"
    short.write_bytes(open(path, "rb").read()[: int(layout.positions[-1]) + 100])
    with pytest.raises(CorruptIndexError, match="truncated"):
        MappedRows(str(short), layout.starts, layout.positions, layout.row_bytes)
