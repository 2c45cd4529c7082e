"""io/chunks.py: bands.lance read chunk by chunk equals Lance's own reader, on files Lance
and this package wrote, and a damaged chunk is caught."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader, LanceFileSession
from test_segments import native_arrays, write_segment

from lance_minhash_sql.core.errors import CorruptIndexError
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.io import mapped as mapped_mod
from lance_minhash_sql.io.chunks import CHUNK_HEADER, chunked_column, fixed_rows, read_columns
from lance_minhash_sql.io.lancefile import FileLayout, read_layout
from lance_minhash_sql.io.segments import BANDS_FILE, SIGNATURES_FILE, _band_chunks, open_segment

TEXTS = [f"doc {i % 700} words {i % 41} more {i % 13} text {i}" for i in range(12000)]


@pytest.fixture(scope="module")
def segments(tmp_path_factory):
    from conftest import build_native_index

    native = build_native_index(str(tmp_path_factory.mktemp("c") / "a.lance"), pa.table({"text": TEXTS}),
                                MinHashParams(num_hashes=64, num_bands=8))
    lance_seg = os.path.join(native.dataset.uri, "_indices", str(native.dataset.describe_indices()[0].segments[0].uuid))
    ours = str(tmp_path_factory.mktemp("c") / "seg")
    write_segment(ours, MinHashParams(num_hashes=64, num_bands=8), *native_arrays(native), page_rows=1000)
    return native, {"lance": lance_seg, "ours": ours}


def layout_of(path: str) -> FileLayout:
    """The file's layout, read from its own column metadata."""
    session = LanceFileSession(os.path.dirname(path))
    name = os.path.basename(path)
    return read_layout(lambda o, n: session.read_range(name, o, n), path, LanceFileReader(path).metadata())


def reference(seg_dir, rows):
    t = LanceFileReader(f"{seg_dir}/{BANDS_FILE}").take_rows(rows.astype(np.uint64).tolist()).to_table()
    return t.column(0).to_numpy(), t.column(1).to_numpy()


def row_sets(n, rng):
    yield np.array([0])
    yield np.array([n - 1])
    yield np.arange(n)
    yield np.array([0, 511, 512, 513, 1023, 1024, 2047, 2048, n - 2, n - 1])
    for size in (1, 7, 300, 5000):
        yield np.sort(rng.choice(n, size=min(size, n), replace=False))
    for start in (0, 4095, n // 2):
        yield np.arange(start, min(n, start + 3000))


@pytest.mark.parametrize("writer", ["lance", "ours"])
def test_rows_equal_lances_reader(segments, writer):
    native, dirs = segments
    seg = dirs[writer]
    files = open_segment(seg)
    chunks = _band_chunks(LanceFileSession(seg), f"{seg}/{BANDS_FILE}", layout_of(f"{seg}/{BANDS_FILE}"))
    assert chunks is not None, "bands.lance's layout is the one io/chunks.py reads"
    n = files.bands.metadata().num_rows
    assert n == native.bands.num_rows
    rng = np.random.default_rng(7)
    for rows in row_sets(n, rng):
        keys, docs = read_columns(list(chunks), rows)
        ref_keys, ref_docs = reference(seg, rows)
        assert keys.dtype == np.uint64 and docs.dtype == np.uint32
        assert (keys == ref_keys).all() and (docs == ref_docs).all()
        # a second read of the same rows uses the cached chunk tables and gives the same values
        again = read_columns(list(chunks), rows)
        assert (again[0] == keys).all() and (again[1] == docs).all()


def test_chunk_tables_are_read_once(segments):
    _, dirs = segments
    seg = dirs["ours"]
    session = LanceFileSession(seg)
    calls = []

    def read(offset, length):
        calls.append((offset, length))
        return session.read_range(BANDS_FILE, offset, length)

    meta = layout_of(f"{seg}/{BANDS_FILE}")
    keys = chunked_column(read, "bands", meta, 0, np.uint64)
    rows = np.array([3, 4, 5])
    assert (keys.read_rows(rows) == reference(seg, rows)[0]).all()
    assert len(calls) == 2  # the page's chunk table, then its one chunk
    calls.clear()
    keys.read_rows(np.array([6, 700]))
    assert len(calls) == 1  # same page: the table is kept; chunks 0 and 1 are adjacent, one read


def test_other_layouts_are_declined(segments):
    _, dirs = segments
    meta = layout_of(f"{dirs['ours']}/{SIGNATURES_FILE}")
    # signatures.lance's column 1 is a fixed-size list: not a flat mini-block column
    assert chunked_column(lambda o, n: b"", "sigs", meta, 1, np.uint32) is None
    bands = layout_of(f"{dirs['ours']}/{BANDS_FILE}")
    assert chunked_column(lambda o, n: b"", "bands", bands, 0, np.uint32) is None  # wrong width
    assert chunked_column(lambda o, n: b"", "bands", bands, 5, np.uint64) is None  # no such column


def test_damaged_chunk_is_reported(segments, tmp_path):
    _, dirs = segments
    seg = str(tmp_path / "seg")
    shutil.copytree(dirs["ours"], seg)
    meta = layout_of(f"{seg}/{BANDS_FILE}")
    data = meta.columns[1][0].buffers[1][0]
    with open(f"{seg}/{BANDS_FILE}", "r+b") as f:  # the first doc_id chunk claims 4 more value bytes
        f.seek(data + 2)
        size = int.from_bytes(f.read(4), "little")
        f.seek(data + 2)
        f.write((size + 4).to_bytes(4, "little"))
    session = LanceFileSession(seg)
    docs = chunked_column(lambda o, n: session.read_range(BANDS_FILE, o, n), "bands", meta, 1, np.uint32)
    with pytest.raises(CorruptIndexError, match="header does not match"):
        docs.read_rows(np.array([0, 1]))
    with pytest.raises(CorruptIndexError, match="outside"):
        docs.read_rows(np.array([0, 10 ** 9]))


@pytest.mark.parametrize("writer", ["lance", "ours"])
def test_signature_rows_equal_lances_reader(segments, writer):
    _, dirs = segments
    seg = dirs[writer]
    reader = LanceFileReader(f"{seg}/{SIGNATURES_FILE}")
    session = LanceFileSession(seg)
    calls = []

    def read(offset, length):
        calls.append((offset, length))
        return session.read_range(SIGNATURES_FILE, offset, length)

    rows_of = fixed_rows(read, "sigs", layout_of(f"{seg}/{SIGNATURES_FILE}"), 1, 64, 2)
    assert rows_of is not None and rows_of.num_rows == len(TEXTS)
    rng = np.random.default_rng(3)
    for rows in row_sets(len(TEXTS), rng):
        got = rows_of.read_rows(rows).view("<u2").reshape(-1, 64)
        ref = reader.take_rows(rows.astype(np.uint64).tolist()).to_table().column(1)
        assert (got == np.stack(ref.to_numpy(zero_copy_only=False))).all()
    calls.clear()
    rows_of.read_rows(np.array([10, 11, 12, 20, 5000]))
    assert len(calls) == 2  # rows 10-20 lie within a few KiB: one read; row 5000 another
    assert fixed_rows(read, "sigs", layout_of(f"{seg}/{SIGNATURES_FILE}"), 0, 64, 2) is None  # _rowid: not fixed-size lists
    assert fixed_rows(read, "sigs", layout_of(f"{seg}/{SIGNATURES_FILE}"), 1, 128, 2) is None  # other width


@pytest.mark.parametrize("writer", ["lance", "ours"])
def test_a_wide_gap_reads_a_dense_request_in_bounded_sequential_reads(segments, writer, monkeypatch):
    """The object stores' gap: rows a few KiB apart share reads, which follow the file in
    order, none longer than READ_SPAN_BYTES (or a row), and at most READ_WINDOW_BYTES of
    them are held at once; the values stay Lance's."""
    import lance_minhash_sql.io.chunks as chunks

    _, dirs = segments
    seg = dirs[writer]
    reader = LanceFileReader(f"{seg}/{SIGNATURES_FILE}")
    session = LanceFileSession(seg)
    calls, held, most_held = [], [0], [0]
    span_bytes, window_bytes = 64 << 10, 256 << 10  # small, so the 1.5 MB file needs several of each
    monkeypatch.setattr(chunks, "READ_SPAN_BYTES", span_bytes)
    monkeypatch.setattr(chunks, "READ_WINDOW_BYTES", window_bytes)
    real_fetch = chunks._fetch

    def fetch(jobs):
        held[0] = sum(span[1] for _, span in jobs)
        most_held[0] = max(most_held[0], held[0])
        return real_fetch(jobs)

    monkeypatch.setattr(chunks, "_fetch", fetch)

    def read(offset, length):
        calls.append((offset, length))
        return session.read_range(SIGNATURES_FILE, offset, length)

    rows_of = fixed_rows(read, "sigs", layout_of(f"{seg}/{SIGNATURES_FILE}"), 1, 64, 2)
    rng = np.random.default_rng(5)
    rows = np.sort(rng.choice(len(TEXTS), size=len(TEXTS) // 25, replace=False))  # 4%: ~3 KiB apart
    ref = np.stack(reader.take_rows(rows.astype(np.uint64).tolist()).to_table().column(1).to_numpy(
        zero_copy_only=False))
    narrow = rows_of.read_rows(rows).view("<u2").reshape(-1, 64)
    n_narrow = len(calls)
    calls.clear()
    wide = rows_of.read_rows(rows, gap=64 << 10).view("<u2").reshape(-1, 64)
    assert (narrow == ref).all() and (wide == ref).all()
    # few reads for a dense request: about one per READ_SPAN_BYTES of the file (and page)
    pages = rows_of.starts.size - 1
    assert len(calls) <= (rows[-1] - rows[0] + 1) * 128 // span_bytes + pages + 1 < n_narrow / 4
    offsets = [o for o, _ in calls]
    assert offsets == sorted(offsets)  # in file order
    assert max(n for _, n in calls) <= span_bytes
    assert window_bytes / 2 < most_held[0] <= window_bytes


@pytest.mark.parametrize("writer", ["lance", "ours"])
def test_mapped_files_equal_lances_reader(segments, writer, monkeypatch):
    """The memory-mapped readers (a local query's path) give Lance's values for sorted,
    shuffled and repeated rows, and refuse a row outside the file."""
    _, dirs = segments
    seg = dirs[writer]
    files = open_segment(seg)
    keys, docs = files.band_map
    sigs = files.signature_map
    reader = LanceFileReader(f"{seg}/{SIGNATURES_FILE}")
    rng = np.random.default_rng(5)
    n = keys.num_rows
    for rows in list(row_sets(n, rng)) + [rng.permutation(n)[:900], np.array([5, 5, 2, n - 1, 0])]:
        uniq, back = np.unique(rows, return_inverse=True)  # Lance's file reader takes sorted rows
        ref_keys, ref_docs = reference(seg, uniq)
        assert (keys.read_rows(rows) == ref_keys[back]).all() and (docs.read_rows(rows) == ref_docs[back]).all()
    paged = open_segment(seg).signature_map
    paged._rows = None  # as where the pages do not lie back to back: a few rows gathered page by page
    monkeypatch.setattr(mapped_mod, "numba_loaded", lambda: False)  # by numpy (a process without numba)
    for rows in list(row_sets(len(TEXTS), rng)) + [rng.permutation(len(TEXTS))[:500], np.array([9, 3, 9])]:
        uniq, back = np.unique(rows, return_inverse=True)
        ref = reader.take_rows(uniq.astype(np.uint64).tolist()).to_table().column(1)
        want = np.stack(ref.to_numpy(zero_copy_only=False))[back]
        assert (sigs.read_rows(rows) == want).all() and (paged.read_rows(rows) == want).all()
        wide = np.zeros((rows.size, 70), dtype=want.dtype)  # into the first columns of a wider buffer
        assert (paged.read_rows(rows, out=wide[:, :64]) == want).all() and not wide[:, 64:].any()
    for reader_of, bad in ((keys, n), (docs, -1), (sigs, len(TEXTS)), (paged, len(TEXTS))):
        with pytest.raises(CorruptIndexError, match="outside"):
            reader_of.read_rows(np.array([0, bad]))


@pytest.mark.parametrize("column, chunk, byte, value",
                         [(1, 0, 2, 1), (0, -1, 0, 1), (1, -1, 1, 2), (0, -2, 5, 7)])
def test_a_damaged_chunk_header_of_a_mapped_file_is_reported(segments, tmp_path, column, chunk, byte, value):
    """Opening a local segment checks every chunk header of bands.lance's two columns
    (levels, then the value bytes' four bytes), the first chunk as the last ones."""
    _, dirs = segments
    seg = str(tmp_path / "seg")
    shutil.copytree(dirs["ours"], seg)
    mapped = open_segment(dirs["ours"]).band_map[column]
    head = int(mapped.value_index[chunk]) * mapped.dtype.itemsize - CHUNK_HEADER
    with open(f"{seg}/{BANDS_FILE}", "r+b") as f:
        f.seek(head + byte)
        old = f.read(1)[0]
        f.seek(head + byte)
        f.write(bytes([old ^ value]))
    with pytest.raises(CorruptIndexError, match="header does not match"):
        open_segment(seg)


def test_mapped_pages_are_handed_back_in_batches(segments, monkeypatch):
    """A gather's touched pages go back to the OS once they may reach RELEASE_BYTES: one
    system call per batch of queries, not one per query."""
    from lance_minhash_sql.io import mapped as chunks

    _, dirs = segments
    sigs = open_segment(dirs["ours"]).signature_map
    calls = []

    class Map:
        def madvise(self, *args):
            calls.append(args)

    sigs._map = Map()
    monkeypatch.setattr(chunks, "RELEASE_BYTES", 64 * chunks._OS_PAGE)
    for i in range(20):  # 20 gathers of 3 rows: at most 2 pages each, released every 32 pages
        sigs.read_rows(np.array([i, 4000 + i, 9000 + i]))
    assert 1 <= len(calls) <= 2
    big = np.arange(0, len(TEXTS), 7)
    sigs.read_rows(big)  # a large gather is handed back at once
    assert len(calls) >= 2 and calls[-1][2] > 64 * chunks._OS_PAGE


def test_window_indices_are_every_windows_rows_once():
    from lance_minhash_sql.kernels.lsh import window_indices

    rng = np.random.default_rng(9)
    for _ in range(300):
        shape = tuple(rng.integers(1, 5, size=2))
        ws = rng.integers(-1, 60, size=shape)
        we = np.where(ws >= 0, ws + rng.integers(0, 25, size=shape), -1)
        want = sorted({r for s, e in zip(ws.ravel(), we.ravel()) if s >= 0 for r in range(s, e)})
        got = window_indices(ws.astype(np.int64), we.astype(np.int64))
        assert got.dtype == np.int64 and got.tolist() == want
