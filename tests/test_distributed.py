"""The Ray executor on a local Ray: the build gives the same index and answers as the
single process; every self-join mode (pairs, components, star, keep policies; verify
estimate and exact) equals the brute-force oracles on both executors at three budgets; a
failed task commits nothing; bad fragment groups are refused before anything is written."""

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

import numpy as np  # noqa: E402
from naive import exact_pairs, oracle_clusters, oracle_pairs, shingle_set, signed  # noqa: E402
from test_build import _queries, corpus_table, query, seg_files  # noqa: E402

import lance_minhash_sql as lms  # noqa: E402
from lance_minhash_sql.indexer.builder import build_index, marker_dir  # noqa: E402
from lance_minhash_sql.core.errors import DistributedTaskError, InvalidParameterError, MissingDependencyError  # noqa: E402
from lance_minhash_sql.core.params import MinHashParams  # noqa: E402
from lance_minhash_sql.extras.distributed import build_distributed, fragment_groups_of  # noqa: E402
from lance_minhash_sql.extras.ray_executor import ShardTasks  # noqa: E402
from lance_minhash_sql.io import manifest  # noqa: E402
from lance_minhash_sql.query.topk import search  # noqa: E402
from lance_minhash_sql.core.budget import Budget  # noqa: E402
from lance_minhash_sql.selfjoin.sizing import shard_rows  # noqa: E402
from lance_minhash_sql.selfjoin.shards import pair_shards  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
FRAGMENT_ROWS = 750  # 3000 rows: 4 fragments


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RAY_ADDRESS: list = []  # the address of this module's Ray (for SQL's ray_address)


def build_index_distributed(dataset, column, **kw):
    """The build as one Ray task per fragment group (the public entry's Ray executor)."""
    return lms.build_index(dataset, column, executor="ray", **kw)


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
                RAY_ADDRESS[:] = [f"127.0.0.1:{port}"]
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


def test_sql_build_on_ray_answers_like_the_local_build(tmp_path):
    """minhash_build(..., executor := 'ray'): one task per fragment, one commit, and the
    same answers as the build in this process."""
    single, dist = twins(tmp_path)
    con = lms.connect()
    got = con.execute("SELECT segments, rows_indexed FROM minhash_build(?, 'text', executor := 'RAY', "
                      "ray_address := ?)", [dist.uri, RAY_ADDRESS[0]]).fetchall()
    assert got == [(len(manifest.fragment_ids(dist)), seg_files(single)[0].num_rows)]
    for q in _queries()[:20]:
        assert search(dist.uri, "text", q, 10).equals(search(single.uri, "text", q, 10)), q


def test_merge_gives_the_single_process_segment_files(tmp_path, capsys):
    single, dist = twins(tmp_path, num_hashes=64, num_bands=8)
    build_index(dist.uri, "text")  # an old index, replaced
    old = {s.uuid for s in manifest.minhash_segments(lance.dataset(dist.uri), "text")}
    r = build_index_distributed(dist.uri, "text", fragment_groups=[[0, 1], [2, 3]], num_hashes=64, num_bands=8,
                                merge=True, progress=True)
    bar = capsys.readouterr().err
    assert "build (ray)" in bar and "100%" in bar  # the bar reached the rows of every group
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


PARAMS = MinHashParams()
T = 0.7
EXECUTORS = ("local", "ray")
POLICIES = ({"keep": "first"}, {"keep": "longest"}, {"order_by": "id DESC"})


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> str:
    """Two segments built by Ray tasks, rows no segment covers, rows deleted before and
    after the build."""
    ds = write(str(tmp_path_factory.mktemp("mixed") / "mixed.lance"))
    build_index_distributed(ds.uri, "text", fragment_groups=2)
    lance.write_dataset(corpus_table(400), ds.uri, mode="append")  # rows no segment covers
    lance.dataset(ds.uri).delete("id % 17 == 3")
    return ds.uri


@pytest.fixture(scope="module")
def oracles(mixed) -> dict:
    """The brute-force answers (tests/naive.py) and what the star checks need: each row's
    signature, shingle set and text."""
    rowids, sigs, _, _, texts = signed(mixed, PARAMS)
    texts = texts.to_pylist()
    return {"pairs": oracle_pairs(mixed, T, PARAMS), "exact": exact_pairs(mixed, T, PARAMS),
            "components": oracle_clusters(mixed, "text", T, PARAMS),
            "exact_components": oracle_clusters(mixed, "text", T, PARAMS, verify="exact"),
            "sig": dict(zip(rowids.tolist(), sigs)),
            "set": {r: shingle_set(t, PARAMS) for r, t in zip(rowids.tolist(), texts)}}


def pair_dict(batches, ordered: bool = True) -> dict:
    """``{(left, right): (similarity, jaccard)}``, each pair once (``left < right`` in a
    self-join, ``ordered``)."""
    t = pa.Table.from_batches(list(batches)).to_pydict()
    out = {(a, b): (s, t["jaccard"][i] if "jaccard" in t else None)
           for i, (a, b, s) in enumerate(zip(t["left_rowid"], t["right_rowid"], t["similarity"]))}
    assert len(out) == len(t["left_rowid"]), "each pair once"
    assert not ordered or all(a < b for a, b in out), "left < right"
    return out


def cluster_dict(table: pa.Table) -> dict:
    d = table.to_pydict()
    return dict(zip(d["_rowid"], d["cluster_id"]))


def check_star(flags: pa.Table, oracles: dict, verify: str) -> None:
    """Every dropped row's twin is kept, in the same cluster, at or above the threshold:
    by its brute-force similarity (``float32(eq) / float32(k)``), or with ``verify='exact'``
    by the exact Jaccard of the two rows' shingle sets."""
    d = flags.to_pydict()
    keep = dict(zip(d["_rowid"], d["keep"]))
    cid = dict(zip(d["_rowid"], d["cluster_id"]))
    dropped = 0
    for r, k, twin, sim, jac in zip(d["_rowid"], d["keep"], d["twin_rowid"], d["twin_similarity"],
                                    d["twin_jaccard"]):
        if k:
            assert twin is None
            continue
        dropped += 1
        assert keep[twin] and cid[twin] == cid[r]
        eq = int((oracles["sig"][r] == oracles["sig"][twin]).sum())
        assert sim == float(np.float32(eq) / np.float32(PARAMS.num_hashes))
        if verify == "exact":
            a, b = oracles["set"][r], oracles["set"][twin]
            assert jac == pytest.approx(len(a & b) / len(a | b), abs=1e-12) and jac >= T
        else:
            assert sim >= T
    assert dropped > 50


def test_every_mode_on_both_executors_equals_the_oracles(mixed, oracles, self_join_budget):
    """Pairs (estimate and exact) equal brute force, components the oracle's, star's twins
    are kept, in their cluster, at the threshold; every keep policy and the SQL dedup give
    the same flags on both executors; at each budget (tests/conftest.py)."""
    flags: dict = {}
    for executor in EXECUTORS:
        run = {"executor": executor}
        got = pair_dict(lms.pairs(mixed, "text", T, **run))
        assert {p: s for p, (s, _) in got.items()} == oracles["pairs"] and len(got) > 100, executor
        got = pair_dict(lms.pairs(mixed, "text", T, verify="exact", **run))
        want = oracles["exact"]
        assert got.keys() == want.keys() and len(want) > 100, executor
        assert all(got[p][0] == want[p][0] and got[p][1] == pytest.approx(want[p][1], abs=1e-12) for p in want)
        assert cluster_dict(lms.clusters(mixed, "text", T, **run)) == oracles["components"], executor
        assert cluster_dict(lms.clusters(mixed, "text", T, verify="exact", **run)) == oracles["exact_components"]
        for verify in ("estimate", "exact"):
            star = lms.keep_flags(mixed, "text", T, clustering="star", verify=verify, **run)
            check_star(star, oracles, verify)
            flags[(executor, "star", verify)] = star
        for i, policy in enumerate(POLICIES):
            flags[(executor, "components", i)] = lms.keep_flags(mixed, "text", T, **policy, **run)
        flags[(executor, "star", "longest")] = lms.keep_flags(mixed, "text", T, clustering="star", keep="longest",
                                                              **run)
    for key in [k for k in flags if k[0] == "local"]:
        assert flags[("ray",) + key[1:]].equals(flags[key]), key
    kept = flags[("local", "components", 0)].to_pydict()  # keep := 'first': each component's smallest row id
    assert {r for r, k in zip(kept["_rowid"], kept["keep"]) if k} == set(oracles["components"].values())


def test_sql_star_exact_dedup_on_ray_equals_the_local_answer(mixed):
    con = lms.connect()
    sql = ("SELECT * FROM minhash_dedup(?, 'text', 0.7, clustering := 'star', verify := 'exact'{}) "
           "ORDER BY cluster_id, _rowid")
    local = con.execute(sql.format(""), [mixed]).fetchall()
    on_ray = con.execute(sql.format(", executor := 'ray', ray_address := ?"), [mixed, RAY_ADDRESS[0]]).fetchall()
    assert on_ray == local and len(local) > 100
    want = lms.keep_flags(mixed, "text", T, clustering="star", verify="exact", executor="ray")
    assert local == [tuple(r.values()) for r in want.sort_by([("cluster_id", "ascending"),
                                                             ("_rowid", "ascending")]).to_pylist()]


def test_sql_pairs_and_clusters_on_ray(mixed, oracles):
    """SQL runs minhash_pairs' shards as Ray tasks of ranges of shards, and minhash_clusters' components
    as the shuffle: the oracles' answers."""
    con = lms.connect()
    rows = con.execute("SELECT left_rowid, right_rowid, similarity FROM minhash_pairs(?, 'text', 0.7, "
                       "executor := 'ray')", [mixed]).fetchall()
    assert {(a, b): s for a, b, s in rows} == oracles["pairs"] and len(rows) == len(oracles["pairs"])
    rows = con.execute("SELECT _rowid, cluster_id FROM minhash_clusters(?, 'text', 0.7, executor := 'ray')",
                       [mixed]).fetchall()
    assert dict(rows) == oracles["components"]


def test_sql_pairs_on_ray_run_one_task_per_range_of_shards(tmp_path):
    """SQL minhash_pairs on Ray runs its shards in at most twice the cluster's CPUs tasks,
    each a range of consecutive shards verified as one local self-join shares them; the
    pairs equal brute force in both modes, and a statement run again submits again."""
    uri = str(tmp_path / "many.lance")
    lance.write_dataset(corpus_table(8000), uri, max_rows_per_file=2000)
    build_index(uri, "text")
    limit = 4 << 20
    shards = pair_shards(lance.dataset(uri), "text", T, shard_rows=shard_rows(Budget.of(limit)))
    cpus = int(ray.cluster_resources()["CPU"])
    assert len(shards) > 2 * cpus
    con = lms.connect()
    sql = ("SELECT left_rowid, right_rowid, similarity, jaccard FROM minhash_pairs(?, 'text', ?, verify := ?, "
           "memory_limit := '4MiB', executor := 'ray', ray_address := ?)")
    for verify, want in (("estimate", oracle_pairs(uri, T, PARAMS)), ("exact", exact_pairs(uri, T, PARAMS))):
        for _ in range(2):
            rows = con.execute(sql, [uri, T, verify, RAY_ADDRESS[0]]).fetchall()
            got = {(a, b): s if verify == "estimate" else (s, j) for a, b, s, j in rows}
            assert len(got) == len(rows) and len(want) > 100
            if verify == "estimate":
                assert got == want
            else:
                assert got.keys() == want.keys()
                assert all(got[p][0] == want[p][0] and got[p][1] == pytest.approx(want[p][1], abs=1e-12)
                           for p in want)
        tasks = ShardTasks.of(ray, shards, verify, Budget.of(limit), None, None)
        assert len(tasks.ranges) == 2 * cpus
        assert tasks.submitted == 2 * len(tasks.ranges)  # each statement: one task per range
        assert all(ref is None for ref in tasks.refs) and not tasks.done  # every object taken, the round over


def test_join_on_ray_equals_the_local_join(mixed, tmp_path):
    left = str(tmp_path / "left.lance")
    lance.write_dataset(corpus_table(600), left, max_rows_per_file=200)
    for verify in ("estimate", "exact"):
        want = pair_dict(lms.join(left, mixed, "text", T, verify=verify), ordered=False)
        assert pair_dict(lms.join(left, mixed, "text", T, verify=verify, executor="ray"), ordered=False) == want
        assert len(want) > 50


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
    got = pair_dict(lms.pairs(uri, "text", 0.7, storage_options=opts, executor="ray"))
    want = oracle_pairs(single.uri, 0.7, PARAMS)  # the same rows at the same row ids
    assert len(want) > 100 and {p: s for p, (s, _) in got.items()} == want
    got = cluster_dict(lms.clusters(uri, "text", 0.7, storage_options=opts, executor="ray"))
    assert got == oracle_clusters(single.uri, "text", 0.7, PARAMS)


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
    with pytest.raises(DistributedTaskError, match=r"fragments \[2\]: DatasetError: .*is None in all") as err:
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
        build_distributed(ds.uri, "text", merge="yes")
    assert indices_dir(lance.dataset(ds.uri)) == [] and markers() == before_markers
    build_index(ds.uri, "text")
    with pytest.raises(InvalidParameterError, match="executor='rayon'"):
        lms.pairs(ds.uri, "text", 0.8, executor="rayon")
    with pytest.raises(InvalidParameterError, match="ray_address='auto' is for executor='ray'; pass executor='ray' too"):
        lms.clusters(ds.uri, "text", 0.8, ray_address="auto")
    with pytest.raises(InvalidParameterError, match="fragment_groups=2 is for executor='ray'"):
        lms.build_index(ds.uri, "text", fragment_groups=2)
    with pytest.raises(InvalidParameterError, match="threshold=1.5"):
        lms.clusters(ds.uri, "text", 1.5, executor="ray")
    with pytest.raises(InvalidParameterError, match="memory_limit"):
        lms.pairs(ds.uri, "text", 0.8, memory_limit="1KiB", executor="ray")


def test_missing_ray_is_a_clear_error(tmp_path, monkeypatch):
    ds = write(str(tmp_path / "d.lance"))
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install 'ray>=2.9'"):
        build_index_distributed(ds.uri, "text", fragment_groups=2)
    assert indices_dir(lance.dataset(ds.uri)) == []


def test_importing_the_package_does_not_import_ray():
    code = ("import sys, lance_minhash_sql, lance_minhash_sql.extras.distributed, lance_minhash_sql.faces.cli, "
            "lance_minhash_sql.api.entries, lance_minhash_sql.extras.ray_executor; "
            "assert 'ray' not in sys.modules, 'ray imported'")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.mark.parametrize("verify", ["estimate", "exact"])
def test_the_ingest_on_ray_plans_and_appends_as_the_local_one(mixed, tmp_path, verify):
    """The ingest plan's join with the corpus as Ray tasks equals the local plan and the
    brute-force rule (tests/naive.py: ingest_oracle); the ingest appends its kept rows."""
    from naive import ingest_oracle

    batch = str(tmp_path / "batch.lance")
    lance.write_dataset(lance.dataset(mixed).to_table(columns=["id", "text"]).slice(0, 300), batch)
    lance.write_dataset(corpus_table(200).slice(0, 200), batch, mode="append")
    local = lms.ingest_plan(mixed, batch, "text", T, verify=verify)
    on_ray = lms.ingest_plan(mixed, batch, "text", T, verify=verify, executor="ray")
    assert on_ray.to_pylist() == local.to_pylist()
    oracle = ingest_oracle(mixed, batch, T, PARAMS, verify)
    assert {r["_rowid"]: (r["keep"], r["twin_rowid"], r["twin_in"]) for r in local.to_pylist()} == \
        {k: v[:3] for k, v in oracle.items()}
    kept = sum(local.column("keep").to_pylist())
    assert 0 < kept < local.num_rows
    corpus = str(tmp_path / "corpus.lance")
    shutil.copytree(mixed, corpus)
    r = lms.ingest(corpus, batch, "text", T, verify=verify, executor="ray")
    assert (r.rows_appended, r.rows_dropped) == (kept, local.num_rows - kept)


def test_relative_paths_reach_the_ray_workers_absolute(mixed, oracles, tmp_path, monkeypatch):
    """A relative dataset path names the dataset under the driver's working directory on
    every executor: the Ray workers run in the folder the cluster was started from, so
    the path leaves the driver absolute. SQL's pairs, the Python star dedup with exact
    verification and the build on Ray, each from another folder than the cluster's."""
    monkeypatch.chdir(os.path.dirname(mixed))
    rel = os.path.basename(mixed)
    assert os.getcwd() != str(ROOT) and not os.path.exists(ROOT / rel)
    con = lms.connect()
    got = con.execute("SELECT count(*) FROM minhash_pairs(?, 'text', 0.7, executor := 'ray', ray_address := ?)",
                      [rel, RAY_ADDRESS[0]]).fetchone()[0]
    assert got == len(oracles["pairs"]) > 100
    star = lms.keep_flags(rel, "text", T, clustering="star", verify="exact", executor="ray")
    assert star.equals(lms.keep_flags(mixed, "text", T, clustering="star", verify="exact"))
    out = tmp_path / "kept.lance"
    lms.dedup(rel, "text", T, clustering="star", verify="exact", output=str(out), executor="ray")
    dropped = star.column("keep").to_pylist().count(False)
    assert lance.dataset(str(out)).count_rows() == lance.dataset(mixed).count_rows() - dropped and dropped > 50
    write(str(tmp_path / "fresh.lance"))
    monkeypatch.chdir(tmp_path)
    assert build_index_distributed("fresh.lance", "text").segments == 4
