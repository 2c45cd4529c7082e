"""The self-join as a shuffle on Ray (``extras/shuffle.py``, the Ray executor of
``extras/ray_executor.py``): pairs and clusters equal the local executor's at three
budgets, on local disk and on the S3 test server, with the shuffle's stats; on the store
the requests for signatures follow the bytes read, not the candidates sent; a shard over
its task's pool (a giant bucket) is never held whole."""

from __future__ import annotations

import os
import re
import tempfile

import lance
import numpy as np
import pyarrow as pa
import pytest

ray = pytest.importorskip("ray")

from test_build import corpus_table  # noqa: E402
from test_distributed import FRAGMENT_ROWS, build_index_distributed, local_ray, write  # noqa: E402,F401 (local_ray: this module's Ray)

from lance_minhash_sql.core import budget as core_budget  # noqa: E402
from lance_minhash_sql.indexer.builder import build_index  # noqa: E402
from lance_minhash_sql.core.errors import DistributedTaskError, InvalidParameterError  # noqa: E402
import lance_minhash_sql as lms  # noqa: E402
from lance_minhash_sql.extras.ray_executor import RayExecutor  # noqa: E402
from lance_minhash_sql.io import file_arrays, manifest  # noqa: E402
from lance_minhash_sql.selfjoin import parent, pool, sizing  # noqa: E402
from lance_minhash_sql.selfjoin.clusters import clusters  # noqa: E402
from lance_minhash_sql.selfjoin.pairs import pairs  # noqa: E402

KEY = [("left_rowid", "ascending"), ("right_rowid", "ascending")]


def pairs_shuffled(dataset, column, threshold, *, stats=None, max_in_flight=None, **kw):
    """The pairs computed by the Ray executor, the shuffle's figures in ``stats``."""
    return pairs(dataset, column, threshold, executor=RayExecutor(max_in_flight=max_in_flight, stats=stats), **kw)


def clusters_shuffled(dataset, column, threshold, *, stats=None, **kw):
    return clusters(dataset, column, threshold, executor=RayExecutor(stats=stats), **kw)


def rows(batches) -> pa.Table:
    return pa.Table.from_batches(list(batches)).sort_by(KEY)


def check_stats(stats: dict, budget: str) -> None:
    """What the run says it moved: every band row shuffled once; every signature read once
    per segment and sent once per group of shards that asked for it (never more often
    than the shards asked)."""
    assert stats["band_rows"] > 0 and stats["band_bytes"] == 12 * stats["band_rows"]
    assert 0 < stats["signature_rows_read"] <= stats["signature_rows_sent"] <= stats["candidates"]
    assert set(stats["tasks"]) >= {"band", "request", "signature", "verify"}
    assert stats["tasks"]["band"]["tasks"] == stats["tasks"]["signature"]["tasks"] == stats["runs"]
    assert stats["tasks"]["request"]["tasks"] == stats["shards"]
    assert stats["tasks"]["verify"]["tasks"] == stats["groups"] <= stats["shards"]
    assert stats["max_pool_rows"] <= stats["max_docs"]
    if budget == "tight":  # many shards in many groups: a signature goes to several of them
        assert stats["shards"] >= 10 and stats["groups"] >= 5
        assert stats["signature_rows_sent"] > 2 * stats["signature_rows_read"]
    else:  # one group: each signature sent once
        assert stats["groups"] == 1 and stats["signature_rows_sent"] == stats["signature_rows_read"]


def test_shuffle_equals_one_process(tmp_path, self_join_budget):
    """Two segments, rows no segment covers and deleted rows: the same pairs (also with
    exact Jaccard) and the same clusters as the single process under the same budget."""
    ds = write(str(tmp_path / "c.lance"))
    build_index_distributed(ds.uri, "text", fragment_groups=2)
    lance.write_dataset(corpus_table(400), ds.uri, mode="append")  # rows no segment covers
    uri = ds.uri
    want = rows(pairs(uri, "text", 0.7))
    assert want.num_rows > 100
    stats: dict = {}
    assert rows(pairs_shuffled(uri, "text", 0.7, stats=stats)).equals(want)
    assert stats["runs"] == 3
    check_stats(stats, self_join_budget)
    exact = rows(pairs_shuffled(uri, "text", 0.7, verify="exact", max_in_flight=1))
    assert exact.equals(rows(pairs(uri, "text", 0.7, verify="exact")))
    want_c = clusters(uri, "text", 0.7)
    assert want_c.num_rows > 50
    stats = {}
    assert clusters_shuffled(uri, "text", 0.7, stats=stats).equals(want_c)
    check_stats(stats, self_join_budget)
    assert stats["links"] > 0 and stats["tasks"]["rowids"]["tasks"] == 3


def _signature_gets(s3, prefix: str) -> tuple[int, int]:
    """``(GET requests, bytes asked)`` on the ``signatures.lance`` files under ``prefix``
    since the last reset of the test server."""
    n = size = 0
    for method, path, rng in s3.counts()["log"]:
        if method == "GET" and path.startswith(prefix) and path.endswith("signatures.lance"):
            n += 1
            m = re.match(r"bytes=(\d+)-(\d+)", rng or "")
            size += int(m.group(2)) - int(m.group(1)) + 1 if m else 0
    return n, size


def test_shuffle_on_the_s3_test_server(tmp_path, s3, monkeypatch):
    """No shared file system: the dataset on the S3 test server, the same answers as one
    process on local disk. The signature requests do not grow with the candidates sent:
    with many groups of shards (each signature sent to several, 5x more in all) the
    segments fetch no more bytes than with one group, in as few reads."""
    opts = s3.storage_options()
    bucket = s3.make_bucket("lms-shuffle")
    table = corpus_table()
    single = write(str(tmp_path / "single.lance"), table)
    build_index(single.uri, "text")
    uris = {}
    for name in ("tight", "default"):  # two copies: each run's workers open their segments cold
        uri = f"s3://{bucket}/{name}.lance"
        ds = lance.write_dataset(table, uri, max_rows_per_file=FRAGMENT_ROWS, max_rows_per_group=FRAGMENT_ROWS,
                                 storage_options=opts)
        ds.delete("id % 13 == 0")
        build_index_distributed(uri, "text", fragment_groups=2, storage_options=opts)
        uris[name] = uri
    want = rows(pairs(single.uri, "text", 0.7))
    want_c = clusters(single.uri, "text", 0.7)
    assert want.num_rows > 100
    gets, sent, blocks = {}, {}, {}
    for name, uri in uris.items():
        with monkeypatch.context() as m:
            if name == "tight":
                m.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", 256 << 10)
                m.setattr(sizing, "MIN_SHARD_ROWS", 1024)
            stats: dict = {}
            s3.reset()
            got = rows(pairs_shuffled(uri, "text", 0.7, storage_options=opts, stats=stats))
            gets[name] = _signature_gets(s3, f"/{bucket}/{name}.lance/")
            assert got.equals(want), name
            check_stats(stats, name)
            sent[name] = stats["signature_rows_sent"]
            blocks[name] = stats["signature_blocks"]
            assert clusters_shuffled(uri, "text", 0.7, storage_options=opts).equals(want_c), name
    assert sent["tight"] > 3 * sent["default"]
    (n_tight, bytes_tight), (n_default, bytes_default) = gets["tight"], gets["default"]
    assert 0 < n_default and 0 < bytes_default
    assert bytes_tight <= bytes_default * 1.1, gets  # every signature fetched once (or the file once)
    assert blocks["tight"] > blocks["default"] >= 1
    # a file read whole, or ranged reads of a block's runs of nearby docs: never a read
    # per signature sent
    assert n_tight <= 3 * n_default and 50 * n_tight < sent["tight"], (gets, sent)


@pytest.fixture(scope="module")
def giant(tmp_path_factory) -> str:
    """One text repeated 1,000 times among 2,000 ordinary rows, a few copies deleted."""
    from lance_minhash_sql.faces.corpus import generate_batches

    uri = str(tmp_path_factory.mktemp("giant") / "giant.lance")
    base = pa.Table.from_batches(list(generate_batches(2000)))
    text = "the same boilerplate footer appended to every page of the crawl, word for word"
    texts = pa.concat_arrays([base.column("text").combine_chunks(), pa.array([text] * 1000, pa.string())])
    order = np.random.default_rng(5).permutation(len(texts))
    table = pa.table({"id": pa.array(np.arange(len(texts))), "text": texts.take(pa.array(order))})
    lance.write_dataset(table, uri, max_rows_per_file=FRAGMENT_ROWS)
    build_index_distributed(uri, "text", fragment_groups=2)
    lance.dataset(uri).delete("id % 101 = 3")
    return uri


def test_a_giant_bucket_over_the_pool_is_never_held_whole(giant, monkeypatch):
    """Under a 256 KiB budget a task's pool holds 611 signatures: the shards holding the
    bucket of ~1,000 copies ask the segments for nothing and are verified window by
    window, the bucket's links in chunks of rows; no task holds the whole bucket, and
    the answers equal the single process's."""
    monkeypatch.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", 256 << 10)
    monkeypatch.setattr(sizing, "MIN_SHARD_ROWS", 1024)
    want_c = clusters(giant, "text", 0.8)
    assert want_c.column("cluster_size").to_numpy().max() > 950
    stats: dict = {}
    assert clusters_shuffled(giant, "text", 0.8, stats=stats).equals(want_c)
    assert stats["over_pool_shards"] >= 1
    assert 0 < stats["max_pool_rows"] < 950
    stats = {}
    assert rows(pairs_shuffled(giant, "text", 0.8, stats=stats)).equals(rows(pairs(giant, "text", 0.8)))
    assert stats["over_pool_shards"] >= 1


def test_the_drivers_union_find_in_its_file_gives_the_same_clusters(giant, tmp_path, monkeypatch):
    """The driver's union-find in its temporary file (the share rules of
    ``core/budget.py`` set so any union-find goes to its file, four blocks of 64 docs
    resident): the same clusters as the single process, the file gone afterwards."""
    want_c = clusters(giant, "text", 0.8)
    monkeypatch.setattr(core_budget, "PARENT_SHARE", 0)
    monkeypatch.setattr(core_budget, "PARENT_PAGES_SHARE", 0)
    monkeypatch.setattr(parent, "BLOCK_BYTES", 256)
    temp = str(tmp_path / "tmp")
    os.mkdir(temp)
    monkeypatch.setattr(tempfile, "tempdir", temp)
    pool.STATS.update(parent_in_file=0, parent_handbacks=0, max_parent_blocks=0)
    stats: dict = {}
    assert clusters_shuffled(giant, "text", 0.8, stats=stats).equals(want_c)
    assert pool.STATS["parent_in_file"] == 1  # the driver's (the tasks hold no union-find)
    assert pool.STATS["parent_handbacks"] > 50 and pool.STATS["max_parent_blocks"] <= parent.MIN_BLOCKS
    assert stats["links"] > 1000
    assert not [f for f in os.listdir(temp) if f.startswith(file_arrays.TEMP_PREFIX)]


def test_a_failed_task_names_its_stage_and_run(tmp_path):
    """A segment's band file gone after the driver opened the index: every band task fails
    opening the index, and the error names the stage and the first run."""
    import os

    ds = write(str(tmp_path / "gone.lance"))
    build_index_distributed(ds.uri, "text", fragment_groups=2)
    batches = pairs_shuffled(ds.uri, "text", 0.7)  # the index opened and the shards planned here
    seg = manifest.minhash_segments(lance.dataset(ds.uri), "text")[1]
    os.remove(os.path.join(manifest.segment_dir(lance.dataset(ds.uri), seg.uuid), "bands.lance"))
    failed = r"the band task of run 0 of the shuffle on 'text'.*bands\.lance"
    with pytest.raises(DistributedTaskError, match=failed) as err:
        list(batches)
    assert list(err.value.failures) == [(0,)]


def test_bad_arguments_are_refused_before_any_task(tmp_path):
    ds = write(str(tmp_path / "d.lance"))
    build_index(ds.uri, "text")
    with pytest.raises(InvalidParameterError, match="memory_limit"):
        pairs_shuffled(ds.uri, "text", 0.8, memory_limit="1KiB")
    with pytest.raises(InvalidParameterError, match="threshold=1.5"):
        clusters_shuffled(ds.uri, "text", 1.5)
    with pytest.raises(InvalidParameterError, match="exact='yes'"):
        lms.pairs(ds.uri, "text", 0.8, exact="yes", executor="ray")
    with pytest.raises(InvalidParameterError, match="verify='exactly'"):
        lms.clusters(ds.uri, "text", 0.8, verify="exactly", executor="ray")


def test_importing_the_shuffle_does_not_import_ray():
    import subprocess
    import sys

    from test_distributed import ROOT

    code = ("import sys, lance_minhash_sql.extras.shuffle, lance_minhash_sql.extras.ray_executor; "
            "assert 'ray' not in sys.modules, 'ray imported'")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
