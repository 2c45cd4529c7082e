"""Segment files written here equal Lance's, open cleanly, and bad files are refused."""

from __future__ import annotations

import os
import uuid

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.dataset import Index, IndexFile
from lance.file import LanceFileReader, LanceFileWriter
from lance.query import MinHashQuery

from lance_minhash_sql.core.errors import CorruptIndexError, UnsupportedIndexError
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.io.details import TYPE_URL, encode_details
from lance_minhash_sql.io.segment_writers import BANDS_SCHEMA, BandsWriter, SignaturesWriter
from lance_minhash_sql.io.segments import open_segment

TEXTS = [f"doc {i % 500} words {i % 37} more {i % 11} text" for i in range(9000)]


def native_arrays(native):
    rowids = native.signatures.column("_rowid").to_numpy()
    sigs = np.stack(native.signatures.column("signature").to_numpy(zero_copy_only=False))
    return rowids, sigs, native.bands.column(0).to_numpy(), native.bands.column(1).to_numpy()


def write_segment(seg, params, rowids, sigs, keys, docs, page_rows=4096, chunk=7000):
    os.makedirs(seg, exist_ok=True)
    sw = SignaturesWriter(seg, params)
    for a in range(0, len(rowids), 3000):
        sw.write(rowids[a:a + 3000], sigs[a:a + 3000])
    sw.close()
    bw = BandsWriter(seg, params, sw.num_docs, page_rows=page_rows)
    for a in range(0, len(keys), chunk):
        bw.write(keys[a:a + chunk], docs[a:a + chunk])
    bw.close()


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    from conftest import build_native_index

    return build_native_index(str(tmp_path_factory.mktemp("n") / "a.lance"), pa.table({"text": TEXTS}), MinHashParams())


def test_written_files_equal_native(native, tmp_path):
    seg = str(tmp_path / "seg")
    write_segment(seg, MinHashParams(), *native_arrays(native))
    assert LanceFileReader(f"{seg}/bands.lance").read_all().to_table().equals(native.bands)
    assert LanceFileReader(f"{seg}/signatures.lance").read_all().to_table().equals(native.signatures)
    s = open_segment(seg)
    assert (s.page_table == native.page_table).all()
    assert s.num_docs == len(TEXTS) and s.params == MinHashParams() and s.page_rows == 4096
    keys, docs = s.read_bands(4000, 300)
    assert (keys == native.bands.column(0).to_numpy()[4000:4300]).all()
    assert (s.read_signatures(np.array([1, 5, 8000])) == native_arrays(native)[1][[1, 5, 8000]]).all()
    assert (s.read_rowids() == native_arrays(native)[0]).all()


def test_native_segment_opens(native):
    uuid = str(native.dataset.describe_indices()[0].segments[0].uuid)
    s = open_segment(os.path.join(native.dataset.uri, "_indices", uuid))
    assert s.num_docs == len(TEXTS) and (s.page_table == native.page_table).all()


def commit(ds, seg_dir, params):
    u = str(uuid.uuid4())
    dst = os.path.join(ds.uri, "_indices", u)
    os.makedirs(dst)
    for f in ("signatures.lance", "bands.lance"):
        os.rename(os.path.join(seg_dir, f), os.path.join(dst, f))
    idx = Index(uuid=u, name="text_idx", fields=[0], dataset_version=ds.version, fragment_ids={0}, index_version=0,
                files=[IndexFile(path=f, size_bytes=os.path.getsize(os.path.join(dst, f)))
                       for f in ("signatures.lance", "bands.lance")],
                index_details=(TYPE_URL, encode_details(params)))
    return ds.commit_existing_index_segments("text_idx", "text", [idx])


@pytest.mark.parametrize("page_rows", [4096, 1000])
def test_lance_answers_on_our_files(native, tmp_path, page_rows):
    seg = str(tmp_path / "seg")
    write_segment(seg, MinHashParams(), *native_arrays(native), page_rows=page_rows)
    ds = commit(lance.write_dataset(pa.table({"text": TEXTS}), str(tmp_path / "b.lance")), seg, MinHashParams())
    for q in [TEXTS[17], TEXTS[4242], "doc 3 words 3 more 3 text"]:
        ours = ds.to_table(nearest=MinHashQuery(q, "text"), limit=10, columns=["text", "_distance"], with_row_id=True)
        theirs = native.dataset.to_table(nearest=MinHashQuery(q, "text"), limit=10, columns=["text", "_distance"],
                                         with_row_id=True)
        assert ours.equals(theirs) and ours.num_rows > 0


def test_unsorted_bands_refused(native, tmp_path):
    rowids, sigs, keys, docs = native_arrays(native)
    params = MinHashParams()
    bw = BandsWriter(str(tmp_path), params, len(rowids))
    with pytest.raises(CorruptIndexError, match="not sorted"):
        bw.write(keys[::-1].copy(), docs[::-1].copy())
    os.makedirs(tmp_path / "x")
    bw2 = BandsWriter(str(tmp_path / "x"), params, len(rowids))
    bw2.write(keys[100:200], docs[100:200])
    with pytest.raises(CorruptIndexError, match="not sorted"):
        bw2.write(keys[:100], docs[:100])


def test_wrong_row_count_refused(native, tmp_path):
    rowids, sigs, keys, docs = native_arrays(native)
    bw = BandsWriter(str(tmp_path), MinHashParams(), len(rowids))
    bw.write(keys[:100], docs[:100])
    with pytest.raises(CorruptIndexError, match="expected"):
        bw.close()


def rewrite_bands(src_seg, dst_seg, metadata, page_table=True):
    os.makedirs(dst_seg, exist_ok=True)
    os.link(os.path.join(src_seg, "signatures.lance"), os.path.join(dst_seg, "signatures.lance"))
    table = LanceFileReader(os.path.join(src_seg, "bands.lance")).read_all().to_table()
    w = LanceFileWriter(os.path.join(dst_seg, "bands.lance"), BANDS_SCHEMA, version="2.2")
    w.write_batch(table.cast(BANDS_SCHEMA))
    if page_table:
        w.add_global_buffer(np.frombuffer(LanceFileReader(os.path.join(src_seg, "bands.lance")).read_global_buffer(1), "<u8").tobytes())
    for k, v in metadata.items():
        w.add_schema_metadata(k, v)
    w.close()


@pytest.mark.parametrize("change, error, fragment", [
    ({"drop": "minhash_lsh_num_docs"}, CorruptIndexError, "missing schema metadata key 'minhash_lsh_num_docs'"),
    ({"drop": "minhash_lsh_details"}, CorruptIndexError, "missing schema metadata key 'minhash_lsh_details'"),
    ({"set": ("minhash_lsh_index_version", "1")}, UnsupportedIndexError, "minhash_lsh_index_version=1"),
    ({"set": ("minhash_lsh_num_docs", "5")}, CorruptIndexError, "signatures.lance has"),
    ({"set": ("minhash_lsh_page_rows", "0")}, CorruptIndexError, "must be positive"),
    ({"set": ("minhash_lsh_page_rows", "1000")}, CorruptIndexError, "page table has"),
    ({"set": ("minhash_lsh_details", "08401008180522220a0673696d706c65120922456e676c69736822202828014001480350036080017802")},
     CorruptIndexError, "different parameters"),
    ({"no_page_table": True}, CorruptIndexError, "page table"),
])
def test_bad_metadata_detected(native, tmp_path, change, error, fragment):
    src = os.path.join(native.dataset.uri, "_indices", str(native.dataset.describe_indices()[0].segments[0].uuid))
    meta = dict(native.bands_metadata)
    if "drop" in change:
        meta.pop(change["drop"])
    if "set" in change:
        meta[change["set"][0]] = change["set"][1]
    dst = str(tmp_path / "bad")
    rewrite_bands(src, dst, meta, page_table=not change.get("no_page_table"))
    with pytest.raises(error, match=fragment):
        open_segment(dst)


def test_truncated_file_detected(native, tmp_path):
    src = os.path.join(native.dataset.uri, "_indices", str(native.dataset.describe_indices()[0].segments[0].uuid))
    dst = tmp_path / "trunc"
    dst.mkdir()
    os.link(os.path.join(src, "signatures.lance"), dst / "signatures.lance")
    data = open(os.path.join(src, "bands.lance"), "rb").read()
    (dst / "bands.lance").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptIndexError, match="bands.lance"):
        open_segment(str(dst))
