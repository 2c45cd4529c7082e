"""Distributed build, pairs and clusters on a local Ray: the same index, answers, pairs and
clusters as the single-process engine; a failed task commits nothing; bad fragment groups
are refused before anything is written."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import lance
import pyarrow as pa
import pytest

ray = pytest.importorskip("ray")

from test_build import _queries, corpus_table, query, seg_files  # noqa: E402

from lance_minhash_sql.build.builder import build_index, marker_dir  # noqa: E402
from lance_minhash_sql.core.errors import DistributedTaskError, InvalidParameterError, MissingDependencyError  # noqa: E402
from lance_minhash_sql.extras.distributed import (  # noqa: E402
    build_index_distributed,
    clusters_distributed,
    fragment_groups_of,
    pairs_distributed,
)
from lance_minhash_sql.io import manifest  # noqa: E402
from lance_minhash_sql.query.topk import search  # noqa: E402
from lance_minhash_sql.selfjoin.clusters import clusters  # noqa: E402
from lance_minhash_sql.selfjoin.pairs import pairs  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
FRAGMENT_ROWS = 750  # 3000 rows: 4 fragments


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", autouse=True)
def local_ray(tmp_path_factory):
    """A local Ray cluster of 2 CPUs in its own process group, started by ``ray start`` and
    joined with ``ray.init(address=...)``. (``ray.init()`` alone would start it from this
    process, whose fork before exec runs lance's at-fork hook: lance is not fork-safe.)"""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    log = open(tmp_path_factory.mktemp("ray") / "head.log", "w")
    head = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "ray"), "start", "--head", "--block",
                             f"--port={port}", "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
                             f"--temp-dir={temp}"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    try:
        deadline = time.monotonic() + 180  # only guards against a head that never comes up
        while True:
            try:
                ray.init(address=f"127.0.0.1:{port}", log_to_driver=False,
                         runtime_env={"env_vars": {"PYTHONPATH": path}})
                break
            except ConnectionError:
                if head.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(1)
        yield
    finally:
        ray.shutdown()
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def write(uri, table=None, **kw):
    table = corpus_table() if table is None else table
    ds = lance.write_dataset(table, uri, max_rows_per_file=FRAGMENT_ROWS, max_rows_per_group=FRAGMENT_ROWS, **kw)
    ds.delete("id % 13 == 0")
    return lance.dataset(uri)


def twins(tmp_path, **single_kw):
    """Identical 4-fragment datasets, the first indexed by the single-process build."""
    single = write(str(tmp_path / "single.lance"))
    build_index(single.uri, "text", **single_kw)
    return lance.dataset(single.uri), write(str(tmp_path / "dist.lance"))


def indices_dir(ds):
    path = os.path.join(ds.uri, "_indices")
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def markers():
    path = marker_dir()
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


# --------------------------------------------------------------------------- build


def test_four_groups_answer_like_the_single_process_index(tmp_path):
    single, dist = twins(tmp_path)
    before = dist.version
    r = build_index_distributed(dist.uri, "text", fragment_groups=4)
    dist = lance.dataset(dist.uri)
    assert dist.version == before + 1  # all segments in one commit
    segs = manifest.minhash_segments(dist, "text")
    assert r.segments == len(segs) == 4
    assert [sorted(s.fragment_ids) for s in segs] == [[f] for f in manifest.fragment_ids(dist)]
    assert r.rows_indexed == seg_files(single)[0].num_rows == single.count_rows() - r.rows_without_tokens
    queries = _queries()
    found = 0
    for q in queries:
        a = search(single.uri, "text", q, 10, columns=["id"])
        b = search(dist.uri, "text", q, 10, columns=["id"])
        assert b.equals(a), q
        assert query(dist, q).equals(query(single, q)), q  # Lance's MinHashQuery on our segments
        found += b.num_rows
    assert found > 100
    assert not [m for m in markers() if m[:-5] in r.segment_uuids]


def test_merge_gives_the_single_process_segment_files(tmp_path):
    single, dist = twins(tmp_path, num_hashes=64, num_bands=8)
    build_index(dist.uri, "text")  # an old index, replaced
    old = {s.uuid for s in manifest.minhash_segments(lance.dataset(dist.uri), "text")}
    r = build_index_distributed(dist.uri, "text", fragment_groups=[[0, 1], [2, 3]], num_hashes=64, num_bands=8,
                                merge=True)
    dist = lance.dataset(dist.uri)
    segs = manifest.minhash_segments(dist, "text")
    assert len(segs) == r.segments == 1 and segs[0].uuid == r.segment_uuids[0]
    assert not old & {s.uuid for s in segs}
    a, b = seg_files(single), seg_files(dist)
    assert b[0].num_rows > 0
    assert b[0].equals(a[0]), "signatures differ"
    assert b[1].equals(a[1]), "bands differ"
    assert b[2] == a[2] and b[3] == a[3] and b[4] == a[4]
    for q in _queries()[:60]:
        assert query(dist, q).equals(query(single, q)), q


def test_explicit_groups_and_one_group_per_fragment(tmp_path):
    single, dist = twins(tmp_path)
    build_index_distributed(dist.uri, "text", fragment_groups=[[3, 0], [1], [2]])
    segs = manifest.minhash_segments(lance.dataset(dist.uri), "text")
    assert [sorted(s.fragment_ids) for s in segs] == [[0, 3], [1], [2]]
    r = build_index_distributed(dist.uri, "text")  # None: one task per fragment, replacing
    assert r.segments == 4
    dist = lance.dataset(dist.uri)
    assert len(manifest.minhash_segments(dist, "text")) == 4
    for q in _queries()[:40]:
        assert search(dist.uri, "text", q, 5, columns=["id"]).equals(search(single.uri, "text", q, 5, columns=["id"]))


# --------------------------------------------------------------------------- pairs and clusters


def test_pairs_and_clusters_equal_single_process(tmp_path):
    _, dist = twins(tmp_path)
    build_index_distributed(dist.uri, "text", fragment_groups=2)
    lance.write_dataset(corpus_table(400), dist.uri, mode="append")  # rows no segment covers
    uri = dist.uri
    want = list(pairs(uri, "text", 0.7))
    got = list(pairs_distributed(uri, "text", 0.7))
    assert sum(b.num_rows for b in want) > 100
    assert len(got) == len(want) and all(g.equals(w) for g, w in zip(got, want))  # batch for batch

    def rows(batches):
        t = pa.Table.from_batches(batches)
        return t.sort_by([("left_rowid", "ascending"), ("right_rowid", "ascending")])

    many = list(pairs_distributed(uri, "text", 0.7, num_shards=7, shards_per_task=3, max_in_flight=1))
    assert rows(many).equals(rows(want))
    exact = list(pairs_distributed(uri, "text", 0.7, exact=True, num_shards=3))
    assert rows(exact).equals(rows(list(pairs(uri, "text", 0.7, exact=True))))

    want_c = clusters(uri, "text", 0.7)
    assert want_c.num_rows > 50
    assert clusters_distributed(uri, "text", 0.7).equals(want_c)
    assert clusters_distributed(uri, "text", 0.7, num_shards=5, shards_per_task=2).equals(want_c)


def test_build_and_pairs_on_an_object_store(tmp_path, s3):
    """Tasks write their segments straight to the store (no shared file system); the
    driver commits them; pairs tasks read the store with the same options."""
    opts = s3.storage_options()
    uri = f"s3://{s3.make_bucket('lms-ray')}/dist.lance"
    single = twins(tmp_path)[0]
    table = corpus_table()
    lance.write_dataset(table, uri, max_rows_per_file=FRAGMENT_ROWS, max_rows_per_group=FRAGMENT_ROWS,
                        storage_options=opts)
    lance.dataset(uri, storage_options=opts).delete("id % 13 == 0")
    r = build_index_distributed(uri, "text", fragment_groups=2, storage_options=opts)
    assert r.segments == 2
    dist = lance.dataset(uri, storage_options=opts)
    assert len(manifest.minhash_segments(dist, "text")) == 2
    for q in _queries()[:20]:
        assert search(uri, "text", q, 10, columns=["id"], storage_options=opts).equals(
            search(single.uri, "text", q, 10, columns=["id"])), q
        assert query(dist, q).equals(query(single, q)), q
    got = pa.Table.from_batches(list(pairs_distributed(uri, "text", 0.7, storage_options=opts)))
    want = pa.Table.from_batches(list(pairs(single.uri, "text", 0.7)))
    assert want.num_rows > 100 and got.equals(want)


# --------------------------------------------------------------------------- failures


def test_failed_task_commits_nothing_and_names_its_fragments(tmp_path):
    t = corpus_table()
    texts = t.column("text").to_pylist()
    for i in range(2 * FRAGMENT_ROWS, 3 * FRAGMENT_ROWS):  # fragment 2: no text at all
        texts[i] = None
    t = t.set_column(t.schema.get_field_index("text"), "text", pa.array(texts, pa.string()))
    ds = write(str(tmp_path / "d.lance"), t)
    build_index(ds.uri, "text", num_hashes=64, num_bands=8)  # an index that must stay
    ds = lance.dataset(ds.uri)
    before = (ds.version, indices_dir(ds), markers())
    with pytest.raises(DistributedTaskError, match=r"fragments \[2\]: DatasetError: .*NULL") as err:
        build_index_distributed(ds.uri, "text", fragment_groups=[[0], [1], [2], [3]])
    assert list(err.value.failures) == [(2,)]
    assert "nothing was committed" in str(err.value)
    ds = lance.dataset(ds.uri)
    assert (ds.version, indices_dir(ds), markers()) == before  # the three written segments removed
    assert manifest.minhash_segments(ds, "text")[0].fragment_ids == frozenset({0, 1, 2, 3})
    # the same dataset with fragment 2 in a group that has text builds
    r = build_index_distributed(ds.uri, "text", fragment_groups=[[0], [1, 2], [3]])
    assert r.segments == 3 and r.rows_without_tokens >= ds.get_fragment(2).count_rows() > 600


@pytest.mark.parametrize("groups, match", [
    ([[0, 1], [1, 2, 3]], r"fragment 1 of fragment_groups\[1\] is also in fragment_groups\[0\]"),
    ([[0, 0], [1, 2, 3]], "twice in that group"),
    ([[0, 1], [2]], r"leave fragment\(s\) \[3\] out"),
    ([[0, 1], [], [2, 3]], r"fragment_groups\[1\]=\[\] must be a non-empty list"),
    ([[0, 1], [2, 3, 9]], "names fragment 9, which the dataset"),
    ([[0, 1], [2, "3"]], "not a fragment id"),
    ([], "neither None, a number nor a list"),
    (0, "must be between 1 and the number of fragments"),
    (5, "must be between 1 and the number of fragments"),
    (True, "neither None, a number nor a list"),
])
def test_bad_fragment_groups_write_nothing(tmp_path, groups, match):
    ds = write(str(tmp_path / "d.lance"))
    before = (ds.version, indices_dir(ds), markers())
    with pytest.raises(InvalidParameterError, match=match):
        build_index_distributed(ds.uri, "text", fragment_groups=groups)
    ds = lance.dataset(ds.uri)
    assert (ds.version, indices_dir(ds), markers()) == before


def test_fragment_groups_split_contiguously():
    assert fragment_groups_of(3, [0, 1, 2, 4, 5]) == [[0, 1], [2, 4], [5]]
    assert fragment_groups_of(None, [2, 7]) == [[2], [7]]
    assert fragment_groups_of([[7], (2,)], [2, 7]) == [[7], [2]]


def test_bad_parameters_and_options_write_nothing(tmp_path):
    ds = write(str(tmp_path / "d.lance"))
    before_markers = markers()
    with pytest.raises(InvalidParameterError, match="num_bands=7"):
        build_index_distributed(ds.uri, "text", num_bands=7)
    with pytest.raises(InvalidParameterError, match="merge='yes' must be true or false"):
        build_index_distributed(ds.uri, "text", merge="yes")
    assert indices_dir(lance.dataset(ds.uri)) == [] and markers() == before_markers
    build_index(ds.uri, "text")
    with pytest.raises(InvalidParameterError, match="shards_per_task=0"):
        pairs_distributed(ds.uri, "text", 0.8, shards_per_task=0)
    with pytest.raises(InvalidParameterError, match="threshold=1.5"):
        clusters_distributed(ds.uri, "text", 1.5)


def test_missing_ray_is_a_clear_error(tmp_path, monkeypatch):
    ds = write(str(tmp_path / "d.lance"))
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install 'ray>=2.9'"):
        build_index_distributed(ds.uri, "text", fragment_groups=2)
    assert indices_dir(lance.dataset(ds.uri)) == []


def test_importing_the_package_does_not_import_ray():
    code = ("import sys, lance_minhash_sql, lance_minhash_sql.extras.distributed, lance_minhash_sql.faces.cli; "
            "assert 'ray' not in sys.modules, 'ray imported'")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
