"""Index builds on an S3-compatible store (moto on localhost)."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.errors import DatasetError
from lance_minhash_sql.faces.corpus import CorpusSpec, generate_batches


def test_build_writes_segment_files_to_the_store(s3):
    bucket = s3.make_bucket("lms-build")
    uri = f"s3://{bucket}/corpus.lance"
    opts = s3.storage_options()
    table = pa.Table.from_batches(list(generate_batches(1500, CorpusSpec(seed=3))))
    lance.write_dataset(table, uri, storage_options=opts, max_rows_per_file=1000)
    res = build_index(uri, "text", storage_options=opts)
    assert res.rows_indexed == 1500 and res.segments == 1
    seg = res.segment_uuids[0]
    sizes = {o["Key"]: o["Size"] for o in s3.client().list_objects_v2(
        Bucket=bucket, Prefix=f"corpus.lance/_indices/{seg}/")["Contents"]}
    assert set(sizes) == {f"corpus.lance/_indices/{seg}/{f}" for f in ("bands.lance", "signatures.lance")}
    assert res.bytes == sum(sizes.values())  # the writers' reported sizes are the stored sizes
    ds = lance.dataset(uri, storage_options=opts)
    assert [str(s.uuid) for d in ds.describe_indices() for s in d.segments] == [seg]


def test_unsupported_scheme_is_refused_without_the_secret(s3):
    opts = s3.storage_options()
    with pytest.raises(DatasetError) as err:
        build_index("ftp://user:hunter2pass@host/corpus.lance", "text", storage_options=opts)
    msg = str(err.value)
    assert "'ftp'" in msg and "ftp://host/corpus.lance" in msg
    assert "hunter2pass" not in msg and s3.SECRET_KEY not in msg


def test_missing_bucket_names_the_uri_not_the_secret(s3):
    opts = s3.storage_options()
    with pytest.raises(DatasetError) as err:
        build_index("s3://lms-no-such-bucket/corpus.lance", "text", storage_options=opts)
    assert "s3://lms-no-such-bucket/corpus.lance" in str(err.value)
    assert s3.SECRET_KEY not in str(err.value)


def test_opened_index_repr_leaves_the_options_out(s3):
    from lance_minhash_sql.index.opened import open_index

    bucket = s3.make_bucket("lms-repr")
    uri = f"s3://{bucket}/corpus.lance"
    opts = s3.storage_options()
    lance.write_dataset(pa.Table.from_batches(list(generate_batches(200, CorpusSpec(seed=5)))), uri,
                        storage_options=opts)
    build_index(uri, "text", storage_options=opts)
    opened = open_index(uri, "text", opts)
    assert opened.storage_options == opts and s3.SECRET_KEY not in repr(opened)


def test_no_secret_is_stored_with_the_dataset_or_index(s3):
    """Manifests, index files and details hold no credential (they travel with the data)."""
    bucket = s3.make_bucket("lms-secrets")
    uri = f"s3://{bucket}/corpus.lance"
    opts = s3.storage_options()
    table = pa.Table.from_batches(list(generate_batches(800, CorpusSpec(seed=5))))
    lance.write_dataset(table, uri, storage_options=opts)
    build_index(uri, "text", storage_options=opts)
    client = s3.client()
    keys = s3.keys(bucket)
    assert any("/_indices/" in k for k in keys) and any("/_versions/" in k for k in keys)
    for key in keys:
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert s3.SECRET_KEY.encode() not in body and s3.ACCESS_KEY.encode() not in body, key


@pytest.mark.parametrize("writer", ["lance", "ours"])
def test_bands_file_opens_from_one_read_of_its_tail(s3, writer):
    """With the segment's size from the manifest, bands.lance opens from one read of its
    tail (no size request, no second read of its column metadata): 5 requests for both
    files instead of 7, and the same segment as Lance's reader opens."""
    from lance.indices import IndexConfig

    from lance_minhash_sql.core.params import MinHashParams
    from lance_minhash_sql.io.manifest import minhash_segments, segment_dir
    from lance_minhash_sql.io.segments import open_segment

    bucket = s3.make_bucket(f"lms-tail-{writer}")
    uri = f"s3://{bucket}/corpus.lance"
    opts = s3.storage_options()
    lance.write_dataset(pa.Table.from_batches(list(generate_batches(3000, CorpusSpec(seed=7)))), uri,
                        storage_options=opts)
    if writer == "lance":
        lance.dataset(uri, storage_options=opts).create_scalar_index(
            "text", IndexConfig("MINHASHLSH", MinHashParams(num_hashes=64, num_bands=8).to_lance_config()))
    else:
        build_index(uri, "text", num_hashes=64, num_bands=8, storage_options=opts)
    ds = lance.dataset(uri, storage_options=opts)
    (info,) = minhash_segments(ds, "text")
    where = segment_dir(ds, info.uuid)

    def opened(total_bytes):
        s3.reset()
        files = open_segment(where, opts, total_bytes)
        return files, s3.counts()

    tail, counts = opened(info.size_bytes)
    assert counts["by_method"] == {"HEAD": 1, "GET": 4}, counts["log"]  # signatures.lance: size and tail
    assert not any(m == "HEAD" and p.endswith("bands.lance") for m, p, _ in counts["log"])
    assert tail.band_file is None and tail.fast_path
    full, counts = opened(None)  # no size: Lance's reader opens bands.lance
    assert counts["requests"] == 7 and full.band_file is not None
    assert (tail.page_table == full.page_table).all() and tail.params == full.params
    assert (tail.num_docs, tail.page_rows, tail.num_band_rows) == (full.num_docs, full.page_rows, full.num_band_rows)
    rows = np.arange(0, tail.num_band_rows, 97)
    for a, b in zip(tail.read_band_rows(rows), full.read_band_rows(rows)):
        assert (a == b).all()
    wrong, counts = opened(info.size_bytes + 1)  # a size that is not the files': Lance's reader, same segment
    assert wrong.band_file is not None and (wrong.page_table == full.page_table).all()


def test_a_failing_store_is_an_error_not_a_fallback(s3, monkeypatch):
    # the tail read of bands.lance falls back to Lance's reader only when the manifest's size
    # is not the files'; a store that fails says so
    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.core.errors import DatasetError
    from lance_minhash_sql.io import segments
    from lance_minhash_sql.io.manifest import minhash_segments, segment_dir

    bucket = s3.make_bucket("lms-tail-fails")
    uri = f"s3://{bucket}/corpus.lance"
    opts = s3.storage_options()
    lance.write_dataset(pa.Table.from_batches(list(generate_batches(500, CorpusSpec(seed=3)))), uri,
                        storage_options=opts)
    build_index(uri, "text", storage_options=opts)
    ds = lance.dataset(uri, storage_options=opts)
    (info,) = minhash_segments(ds, "text")

    def failing(read_range, path, size):
        raise OSError(f"connection reset by peer (key {s3.SECRET_KEY})")

    monkeypatch.setattr(segments, "read_file_tail", failing)
    with pytest.raises(DatasetError, match="cannot read index file .connection reset") as err:
        segments.open_segment(segment_dir(ds, info.uuid), opts, info.size_bytes)
    assert s3.SECRET_KEY not in str(err.value)  # the store's message, redacted


def test_a_dense_fetch_within_a_capped_cache_reads_the_file_in_order(s3, tmp_path):
    """A self-join's fetch of a quarter of the docs, the segment cache capped below the
    file (a shuffle task under its budget): ranged reads of at most a few MiB that cover
    signatures.lance about once (its row ids included), never a read per run of nearby
    docs; the signatures are those of the same index on local disk."""
    import re

    from lance_minhash_sql.core.tuning import READ_SPAN_BYTES
    from lance_minhash_sql.runtime.cache import capped_cache, clear_cache
    from lance_minhash_sql.selfjoin.pool import fetch_signatures
    from lance_minhash_sql.selfjoin.shards import plan_shards

    opts = s3.storage_options()
    table = pa.Table.from_batches(list(generate_batches(40_000, CorpusSpec(seed=8))))
    uri = f"s3://{s3.make_bucket('lms-dense-fetch')}/c.lance"
    lance.write_dataset(table, uri, storage_options=opts)
    build_index(uri, "text", storage_options=opts)
    local = str(tmp_path / "c.lance")
    lance.write_dataset(table, local)
    build_index(local, "text")
    clear_cache()
    docs = np.sort(np.random.default_rng(2).choice(len(table), len(table) // 4, replace=False)).astype(np.uint32)
    want = np.empty((docs.size, 128), dtype=np.uint16)
    fetch_signatures(plan_shards(local, "text", 0.8, None, None)[0].plan, docs, want)
    with capped_cache(1 << 20):
        plan = plan_shards(uri, "text", 0.8, None, opts)[0].plan
        got = np.empty_like(want)
        s3.reset()
        fetch_signatures(plan, docs, got)
    assert (got == want).all()
    reads = [(m.group(1), m.group(2)) for method, path, rng in s3.counts()["log"]
             if method == "GET" and path.endswith("signatures.lance")
             for m in [re.match(r"bytes=(\d+)-(\d+)", rng or "")] if m]
    spans = sorted((int(a), int(b)) for a, b in reads)
    asked = sum(b - a + 1 for a, b in spans)
    file_bytes = len(table) * 256
    assert spans and all(b0 < a1 for (_, b0), (a1, _) in zip(spans, spans[1:]))  # no byte asked twice
    assert max(int(b) - int(a) + 1 for a, b in reads) <= READ_SPAN_BYTES
    assert 0.7 * file_bytes < asked <= 1.05 * file_bytes
    assert len(reads) <= file_bytes // READ_SPAN_BYTES + 4
