"""Distributed build, pairs and clusters on a Ray cluster of separate nodes: a head and two
worker nodes, each its own raylet and object store (``ray start`` processes), with
the dataset on the S3 test server because the nodes share no disk. The answers equal the
single-process engine's; a worker node killed in the middle of a build leaves nothing
committed and nothing written, the error names the group that failed, and a rerun builds.

The kill is driven by events, not timing: every worker runs a setup hook
(:func:`_install_gate`) that records each build task's node and fragment group in a
signal folder when it starts, and makes the task stop after its first batch of band rows
until the folder holds a release file for its node. The test kills the node of one
started task (never released) and releases the other.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import lance
import pyarrow as pa
import pytest

ray = pytest.importorskip("ray")

from test_build import _queries, corpus_table  # noqa: E402

from lance_minhash_sql.indexer.builder import build_index  # noqa: E402
from lance_minhash_sql.core.errors import DistributedTaskError  # noqa: E402
import lance_minhash_sql as lms  # noqa: E402
from lance_minhash_sql.io import manifest  # noqa: E402
from lance_minhash_sql.query.topk import search  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
FRAGMENT_ROWS = 750  # 3000 rows: 4 fragments
SIGNALS = "LMS_TEST_SIGNALS"
WAIT = 120.0  # seconds an event may take on a loaded machine before the test gives up


def _install_gate():
    """Worker setup hook: gate build tasks on files in ``$LMS_TEST_SIGNALS``.

    ``started-<node>-<first fragment>.json`` (the task's fragment ids) is written when a build task
    starts; after its first signed batch the task waits for ``release-<node>`` or
    ``release-all``."""
    folder = os.environ.get(SIGNALS)
    if not folder:
        return
    from lance_minhash_sql.indexer import builder as build
    from lance_minhash_sql.extras import distributed

    def node() -> str:
        return ray.get_runtime_context().get_node_id()

    sign_fragments = distributed.sign_fragments

    def gated_sign_fragments(ds, column, params, fragment_ids, plan, **kw):
        path = os.path.join(folder, f"started-{node()}-{min(fragment_ids)}.json")
        with open(path + ".tmp", "w") as f:
            json.dump([int(x) for x in fragment_ids], f)
        os.replace(path + ".tmp", path)
        return sign_fragments(ds, column, params, fragment_ids, plan, **kw)

    signed_batches = build.signed_batches

    def gated_signed_batches(*args, **kw):
        mine = os.path.join(folder, f"release-{node()}")
        for i, batch in enumerate(signed_batches(*args, **kw)):
            yield batch
            if i == 0:  # the segment is being written: hold here until released (or killed)
                while not (os.path.exists(mine) or os.path.exists(os.path.join(folder, "release-all"))):
                    time.sleep(0.05)

    distributed.sign_fragments = gated_sign_fragments
    build.signed_batches = gated_signed_batches


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nodes:
    """Ray nodes on this machine, each a ``ray start --block`` in its own process group (its
    own raylet and object store), started from a process that never imported lance (lance
    is not fork-safe, and Ray forks the processes it starts)."""

    def __init__(self, temp: str, logs):
        self.temp, self.logs = temp, logs
        self.procs: dict[str, subprocess.Popen] = {}  # node id -> its ray start
        self.port = _free_port()
        self.ray = os.path.join(os.path.dirname(sys.executable), "ray")

    def _start(self, args: list[str], name: str) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "w")
        return subprocess.Popen([self.ray, "start", "--block", "--disable-usage-stats", *args], stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "RAY_AUTH_MODE": "disabled"})

    def start_head(self) -> None:
        self.head = self._start([f"--port={self.port}", "--head", "--num-cpus=0", "--include-dashboard=false",
                                 f"--temp-dir={self.temp}"], "head")

    def alive(self) -> set[str]:
        return {n["NodeID"] for n in ray.nodes() if n["Alive"]}

    def add_worker(self) -> str:
        before = self.alive()
        proc = self._start([f"--address=127.0.0.1:{self.port}", "--num-cpus=1"], f"worker{len(self.procs)}")
        wait_for("a worker node to join", lambda: len(self.alive() - before) == 1 or proc.poll() is not None)
        assert proc.poll() is None, "ray start of a worker node exited"
        (node,) = self.alive() - before
        self.procs[node] = proc
        return node

    def kill(self, node: str) -> None:
        """The node's raylet, object store and workers, at once (SIGKILL to its group)."""
        proc = self.procs.pop(node)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        for proc in [*self.procs.values(), getattr(self, "head", None)]:
            if proc is None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(60)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    signals = tmp_path_factory.mktemp("signals")
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    nodes = Nodes(temp, tmp_path_factory.mktemp("ray-logs"))
    path = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH")) if p)
    try:
        nodes.start_head()
        deadline = time.monotonic() + WAIT  # only guards against a head that never comes up
        while True:
            try:
                ray.init(address=f"127.0.0.1:{nodes.port}", log_to_driver=False,
                         runtime_env={"env_vars": {"PYTHONPATH": path, SIGNALS: str(signals)},
                                      "worker_process_setup_hook": _install_gate})
                break
            except ConnectionError:
                if nodes.head.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(1)
        workers = [nodes.add_worker() for _ in range(2)]
        (signals / "release-all").touch()
        yield nodes, workers, signals
    finally:
        ray.shutdown()
        nodes.stop()
        shutil.rmtree(temp, ignore_errors=True)


def write(uri, table, **kw):
    ds = lance.write_dataset(table, uri, max_rows_per_file=FRAGMENT_ROWS, max_rows_per_group=FRAGMENT_ROWS, **kw)
    ds.delete("id % 13 == 0")
    return ds


def rows(batches):
    return pa.Table.from_batches(list(batches)).sort_by([("left_rowid", "ascending"), ("right_rowid", "ascending")])


def wait_for(what: str, cond):
    deadline = time.monotonic() + WAIT
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def started(signals) -> dict:
    out = {}
    for p in signals.glob("started-*.json"):
        node = p.name[len("started-"):].rsplit("-", 1)[0]
        out.setdefault(node, []).append(json.loads(p.read_text()))
    return out


def test_nodes_answer_like_one_process_and_a_killed_node_commits_nothing(tmp_path, s3, cluster):
    nodes, workers, signals = cluster
    assert len(nodes.alive()) == 3
    opts = s3.storage_options()
    bucket = s3.make_bucket("lms-nodes")
    uri = f"s3://{bucket}/corpus.lance"
    table = corpus_table()
    single = write(str(tmp_path / "single.lance"), table)
    build_index(single.uri, "text")
    write(uri, table, storage_options=opts)

    # the tasks of a build run on both worker nodes and give the single-process answers
    r = lms.build_index(uri, "text", executor="ray", fragment_groups=4, storage_options=opts)
    assert r.segments == 4 and r.rows_indexed == lance.dataset(single.uri).count_rows()
    ran = started(signals)
    assert set(ran) == set(workers), "every worker node ran build tasks"
    assert sorted(f for groups in ran.values() for g in groups for f in g) == [0, 1, 2, 3]
    for q in _queries()[:15]:
        assert search(uri, "text", q, 10, columns=["id"], storage_options=opts).equals(
            search(single.uri, "text", q, 10, columns=["id"])), q
    got = rows(lms.pairs(uri, "text", 0.7, executor="ray", storage_options=opts))
    want = rows(lms.pairs(single.uri, "text", 0.7))
    assert want.num_rows > 100 and got.equals(want)
    assert lms.clusters(uri, "text", 0.7, executor="ray", storage_options=opts).equals(
        lms.clusters(single.uri, "text", 0.7))

    # a rebuild whose worker node is killed while a task writes its segment
    for p in signals.iterdir():
        p.unlink()
    ds = lance.dataset(uri, storage_options=opts)
    before = (ds.version, sorted(s3.keys(bucket, "corpus.lance/_indices/")))
    outcome: dict = {}

    def run():
        try:
            lms.build_index(uri, "text", executor="ray", fragment_groups=4, storage_options=opts)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = exc

    driver = threading.Thread(target=run)
    driver.start()
    wait_for("a build task on each worker node", lambda: len(started(signals)) == 2)
    victim = sorted(started(signals))[0]
    (victim_group,) = started(signals)[victim]
    (survivor,) = set(workers) - {victim}
    nodes.kill(victim)
    (signals / f"release-{survivor}").touch()
    driver.join(WAIT)
    assert not driver.is_alive(), "the build returned after the node died"
    err = outcome.get("error")
    assert isinstance(err, DistributedTaskError), err
    assert list(err.failures) == [tuple(victim_group)]
    assert f"fragments {victim_group}:" in str(err) and "nothing was committed" in str(err)
    ds = lance.dataset(uri, storage_options=opts)
    assert (ds.version, sorted(s3.keys(bucket, "corpus.lance/_indices/"))) == before
    assert len(manifest.minhash_segments(ds, "text")) == 4  # the first build's index, untouched

    # a rerun on the nodes left builds the same index
    (signals / "release-all").touch()
    r = lms.build_index(uri, "text", executor="ray", fragment_groups=2, storage_options=opts)
    assert r.segments == 2
    got = rows(lms.pairs(uri, "text", 0.7, executor="ray", storage_options=opts))
    assert got.equals(want)
