"""The fast read path: segment files that pylance writes (its own MINHASHLSH index and this
package's writer) are read directly — memory-mapped locally, ranged reads on an object
store — and a file in another encoding is named in a warning instead of being read
slowly without a word."""

from __future__ import annotations

import logging
import os
import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader, LanceFileWriter
from lance.indices import IndexConfig
from lance.query import MinHashQuery

from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.faces.corpus import CorpusSpec, generate_batches
from lance_minhash_sql.index.opened import clear_cache, open_index
from lance_minhash_sql.io.segments import BANDS_FILE, open_segment
from lance_minhash_sql.query.topk import search_ids

PARAMS = MinHashParams(num_hashes=64, num_bands=8)
ROWS = 3000


def corpus() -> pa.Table:
    return pa.Table.from_batches(list(generate_batches(ROWS, CorpusSpec(seed=11))))


def make_dataset(uri: str, writer: str, storage_options=None) -> str:
    opts = storage_options or {}
    lance.write_dataset(corpus(), uri, storage_options=opts or None)
    if writer == "lance":
        ds = lance.dataset(uri, storage_options=opts or None)
        ds.create_scalar_index("text", IndexConfig("MINHASHLSH", PARAMS.to_lance_config()))
    else:
        build_index(uri, "text", num_hashes=PARAMS.num_hashes, num_bands=PARAMS.num_bands,
                    storage_options=storage_options)
    return uri


def segment_dir(uri: str, storage_options=None) -> str:
    ds = lance.dataset(uri, storage_options=storage_options)
    return f"{uri}/_indices/{ds.describe_indices()[0].segments[0].uuid}"


def queries(n: int = 12) -> list[str]:
    texts = corpus().column("text").to_pylist()
    return [" ".join(t.split()[: max(1, 3 * len(t.split()) // 4)]) for t in texts[:: ROWS // n]][:n]


def lance_answer(uri: str, q: str, storage_options=None) -> list[tuple[int, float]]:
    ds = lance.dataset(uri, storage_options=storage_options)
    t = ds.to_table(nearest=MinHashQuery(q, "text"), limit=10, columns=["_distance"], with_row_id=True)
    return sorted(zip(t.column("_rowid").to_pylist(), t.column("_distance").to_pylist()), key=lambda r: (r[1], r[0]))


class NoLance:
    """Stands in for a segment's Lance readers: any use fails the test."""

    def __init__(self, what: str):
        self.what = what

    def __getattr__(self, name):
        raise AssertionError(f"{self.what}.{name} called: a query went through Lance's reader")


@pytest.mark.parametrize("writer", ["lance", "ours"])
def test_local_files_are_read_without_lance(tmp_path, writer):
    uri = make_dataset(str(tmp_path / "c.lance"), writer)
    files = open_segment(segment_dir(uri))
    assert files.fast_path and files.slow_reason is None
    assert files.band_map is not None and files.signature_map is not None
    clear_cache()
    qs = queries()
    first = search_ids(uri, "text", qs[0], 10)  # opens the segment and reads its row id column once
    assert first.num_rows > 0
    (entry,) = open_index(uri, "text").segment_entries()
    entry.files.bands = NoLance("bands.lance reader")
    entry.files.sig_file = NoLance("signatures.lance reader")
    for q in qs[1:]:
        got = search_ids(uri, "text", q, 10)
        ours = list(zip(got.column("_rowid").to_pylist(), got.column("_distance").to_pylist()))
        assert ours == lance_answer(uri, q)
    stats = entry.stats
    # band rows (pages and windows by the kernels, buckets by query/probe.py) and docs
    assert stats["window_rows_read"] + stats["band_pages_read"] + stats["bucket_rows_read"] > 0
    assert stats["docs_read"] > 0
    clear_cache()


@pytest.mark.parametrize("writer", ["lance", "ours"])
def test_object_store_files_are_read_by_range(s3, writer):
    bucket = s3.make_bucket(f"lms-fast-{writer}")
    opts = s3.storage_options()
    uri = make_dataset(f"s3://{bucket}/c.lance", writer, opts)
    files = open_segment(segment_dir(uri, opts), storage_options=opts)
    assert files.fast_path and files.slow_reason is None
    assert files.band_chunks is not None and files.signature_rows is not None
    for q in queries(4):
        got = search_ids(uri, "text", q, 10, storage_options=opts)
        ours = list(zip(got.column("_rowid").to_pylist(), got.column("_distance").to_pylist()))
        assert ours == lance_answer(uri, q, opts)


def test_another_encoding_is_named_in_a_warning(tmp_path, caplog):
    uri = make_dataset(str(tmp_path / "c.lance"), "ours")
    seg = segment_dir(uri)
    q = queries(1)[0]
    before = search_ids(uri, "text", q, 10)
    assert before.num_rows > 0
    clear_cache()
    path = os.path.join(seg, BANDS_FILE)
    reader = LanceFileReader(path)
    table = reader.read_all().to_table()
    meta = reader.metadata()
    page_table = reader.read_global_buffer(int(table.schema.metadata[b"minhash_lsh_page_table_buffer"]))
    # the same rows, but doc_id left to Lance's default compression (bit-packed): not a flat column
    schema = pa.schema([table.schema.field(0), pa.field("doc_id", pa.uint32(), nullable=False)])
    tmp = path + ".new"
    w = LanceFileWriter(tmp, schema, version="2.2")
    w.write_batch(pa.table([table.column(0), table.column(1)], schema=schema))
    buf = w.add_global_buffer(page_table)
    for k, v in table.schema.metadata.items():
        w.add_schema_metadata(k.decode(), str(buf) if k == b"minhash_lsh_page_table_buffer" else v.decode())
    w.close()
    shutil.move(tmp, path)
    assert meta.num_rows == LanceFileReader(path).metadata().num_rows
    clear_cache()
    with caplog.at_level(logging.WARNING, logger="lance_minhash_sql"):
        files = open_segment(seg)
    assert not files.fast_path and files.band_map is None
    message = " ".join(r.getMessage() for r in caplog.records)
    assert "bands.lance column 1" in message and "Bitpacking" in message, message
    # the same answer, through Lance's reader (Lance itself refuses the rewritten file: the
    # manifest records the index files' sizes)
    assert search_ids(uri, "text", q, 10).equals(before)
    clear_cache()


def test_fast_path_reads_equal_lances_reader(tmp_path):
    uri = make_dataset(str(tmp_path / "c.lance"), "lance")
    files = open_segment(segment_dir(uri))
    rng = np.random.default_rng(5)
    rows = np.sort(rng.choice(files.num_band_rows, 700, replace=False))
    keys, docs = files.read_band_rows(rows)
    t = files.bands.take_rows(rows.astype(np.uint64).tolist()).to_table()
    assert (keys == t.column(0).to_numpy()).all() and (docs == t.column(1).to_numpy()).all()
    keys, docs = files.read_bands(5, files.num_band_rows - 10)
    t = files.bands.read_range(5, files.num_band_rows - 10).to_table()
    assert (keys == t.column(0).to_numpy()).all() and (docs == t.column(1).to_numpy()).all()
    d = np.sort(rng.choice(files.num_docs, 300, replace=False))
    ref = files.signatures.take_rows(d.astype(np.uint64).tolist()).to_table().column(1)
    assert (files.read_signature_rows(d) == np.stack(ref.to_numpy(zero_copy_only=False))).all()
