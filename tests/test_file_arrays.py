"""The clusters' union-find in a temporary file (``selfjoin/parent.py``,
``io/file_arrays.py``): the same answers as in memory, its file gone whatever happens, its
resident pages within its share (read from ``/proc/self/smaps``), and the budget that
cannot hold even the bit set refused.

The shares are module attributes of ``core/budget.py``: ``PARENT_SHARE = 0`` puts the
union-find of any corpus in its file, ``PARENT_PAGES_SHARE = 0`` leaves it the fewest blocks
(``selfjoin/parent.py``: ``MIN_BLOCKS``), and a smaller ``BLOCK_BYTES`` makes a few-thousand-row union-find
many blocks, so the metered kernels stop and resume over and over."""

from __future__ import annotations

import os
import re
import tempfile

import numpy as np
import pytest

from conftest import TIGHT_BUDGET, indexed_corpus
from naive import oracle_clusters
from test_pairs import PARAMS, as_clusters

from lance_minhash_sql.core import budget as core_budget
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.errors import ResourceLimitError
from lance_minhash_sql.io import file_arrays
from lance_minhash_sql.kernels.components import flatten_roots, linked_members, new_marks, union_min
from lance_minhash_sql.selfjoin import parent, pool, sizing, steps
from lance_minhash_sql.selfjoin.clusters import clusters
from lance_minhash_sql.selfjoin.dedup import keep_flags
from lance_minhash_sql.selfjoin.links import MAX_REPS, data_links


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    return indexed_corpus(str(tmp_path_factory.mktemp("in_file") / "corpus.lance"), 6000, 2500, "id % 13 = 5")


@pytest.fixture
def temp(tmp_path, monkeypatch) -> str:
    """A private system temp folder for the test (where the files go)."""
    folder = str(tmp_path / "tmp")
    os.mkdir(folder)
    monkeypatch.setattr(tempfile, "tempdir", folder)
    return folder


def to_file(monkeypatch, block_bytes: int = 256) -> None:
    """Every union-find in its file, 4 blocks of ``block_bytes`` resident at once."""
    monkeypatch.setattr(core_budget, "PARENT_SHARE", 0)
    monkeypatch.setattr(core_budget, "PARENT_PAGES_SHARE", 0)
    monkeypatch.setattr(parent, "BLOCK_BYTES", block_bytes)


def reset_stats() -> None:
    pool.STATS.update(parent_in_file=0, parent_handbacks=0, max_parent_blocks=0)


def answers(uri: str) -> list:
    """Clusters (estimate and exact), dedup's keep flags (components and star)."""
    return [clusters(uri, "text", 0.8), clusters(uri, "text", 0.8, verify="exact"),
            keep_flags(uri, "text", 0.8), keep_flags(uri, "text", 0.8, clustering="star"),
            keep_flags(uri, "text", 0.8, clustering="star", verify="exact")]


@pytest.mark.parametrize("budget", ["default", "tight"])
def test_a_union_find_in_its_file_gives_the_same_answers(corpus, temp, monkeypatch, budget):
    if budget == "tight":
        monkeypatch.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", TIGHT_BUDGET)
        monkeypatch.setattr(sizing, "MIN_SHARD_ROWS", 1024)
    reset_stats()
    in_memory = answers(corpus)
    assert pool.STATS["parent_in_file"] == 0
    to_file(monkeypatch)
    got = answers(corpus)
    assert pool.STATS["parent_in_file"] == len(got)  # every one of them went through run_clusters
    assert pool.STATS["parent_handbacks"] > 100  # 6,000 docs are 94 blocks of 64: the kernels stopped often
    assert 0 < pool.STATS["max_parent_blocks"] <= parent.MIN_BLOCKS  # never more blocks touched at once
    for want, have in zip(in_memory, got):
        assert have.equals(want)
    assert as_clusters(got[0]) == oracle_clusters(corpus, "text", 0.8, PARAMS)
    # exact components: scipy's components of the brute-force exact pairs
    exact = oracle_clusters(corpus, "text", 0.8, PARAMS, verify="exact")
    assert len(exact) > 500 and as_clusters(got[1]) == exact
    keep = got[2].column("keep").to_numpy(zero_copy_only=False)  # dedup keeps exactly one row of each component
    cid = got[2].column("cluster_id").to_numpy()
    assert np.array_equal(np.sort(cid[keep]), np.unique(cid))
    assert os.listdir(temp) == []  # each file removed when its self-join ended


def test_the_file_is_removed_when_the_join_fails(corpus, temp, monkeypatch):
    to_file(monkeypatch)
    monkeypatch.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", TIGHT_BUDGET)
    monkeypatch.setattr(sizing, "MIN_SHARD_ROWS", 1024)
    seen = []

    def failing_links(shard, data):
        seen.append([f for f in os.listdir(temp) if f.startswith(file_arrays.TEMP_PREFIX)])
        if len(seen) == 3:
            raise RuntimeError("a verifier failed midway")
        yield from data_links(shard, data)

    with pytest.raises(RuntimeError, match="midway"):
        steps.run_clusters(corpus, "text", 0.8, links=failing_links, max_reps=MAX_REPS,
                                 budget=Budget.parse(None))
    assert len(seen) >= 3 and all(len(s) == 1 for s in seen)  # the union-find was in its file meanwhile
    assert os.listdir(temp) == []


def smaps_rss(address: int) -> int:
    """Resident bytes of the mapping holding ``address``, from ``/proc/self/smaps``."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", head[0]):
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                inside = lo <= address < hi
            elif inside and head[0] == "Rss:":
                return int(head[1]) * 1024
    raise AssertionError("no mapping holds the address")


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="reads Linux's /proc/self/smaps")
def test_the_resident_pages_stay_within_the_share(temp, monkeypatch):
    """A 32 MiB union-find (16 blocks of the real 2 MiB) in a share of 4 blocks: before
    every hand-back, the pages of its mapping resident in the process (the kernel's own
    count) are at most the share, through the fill, the unions, the flattening and the
    members' sweeps; the components equal those of the union-find in memory."""
    monkeypatch.setattr(core_budget, "PARENT_SHARE", 0)
    monkeypatch.setattr(core_budget, "PARENT_PAGES_SHARE", 0)
    total, share = 8 << 20, parent.MIN_BLOCKS * parent.BLOCK_BYTES
    assert parent.parent_share(total, Budget.of(1 << 30)) == share
    peaks = []
    hand_back = file_arrays.FileArray.hand_back

    def measured(self, *args):
        peaks.append(smaps_rss(self.array.ctypes.data))
        hand_back(self, *args)

    monkeypatch.setattr(file_arrays.FileArray, "hand_back", measured)
    rng = np.random.default_rng(5)
    links = [(rng.integers(0, total, 400).astype(np.uint32), rng.integers(0, total, 400).astype(np.uint32))
             for _ in range(5)]
    links.append((np.arange(0, 2000, dtype=np.uint32), np.arange(1, 2001, dtype=np.uint32)))  # a chain
    reset_stats()
    uf = parent.UnionFind(total, Budget.of(1 << 30))
    try:
        assert uf.in_file and len(os.listdir(temp)) == 1
        merges = sum(uf.union(a, b) for a, b in links)
        members, roots = uf.members(new_marks(total))
    finally:
        uf.close()
    assert os.listdir(temp) == []
    assert len(peaks) == pool.STATS["parent_handbacks"] > 20
    assert max(peaks) <= share and max(peaks) > 0
    ref = np.arange(total, dtype=np.int32)
    assert merges == sum(union_min(ref, a, b) for a, b in links)
    flatten_roots(ref)
    want = linked_members(ref, new_marks(total))
    assert np.array_equal(members, want) and np.array_equal(roots, ref[want])


def test_a_billion_rows_fit_a_gib():
    """The components of 10^9 rows under 1 GiB: the bit set (125 MB) and the file-held
    union-find's share, not its 4 GB; a pool of millions of signatures is left."""
    budget = Budget.of(1 << 30)
    fixed = sizing.components_bytes(10**9, budget)
    assert fixed == (10**9 + 7) // 8 + budget.parent_pages
    assert sizing.pool_rows(budget, 128, fixed) > 1_000_000
    # and 10^8 rows keep theirs in memory (412 MB)
    assert sizing.components_bytes(10**8, budget) == 10**8 * 4 + 10**8 // 8


def test_a_budget_that_cannot_hold_the_bit_set_is_refused(corpus, monkeypatch):
    """In its file, the union-find still needs its blocks and the bit set a bit a row: below
    that the error names memory_limit, what the components take and the least budget,
    which then works."""
    monkeypatch.setattr(core_budget, "MIN_SELF_JOIN_MEMORY", 1024)
    monkeypatch.setattr(core_budget, "PARENT_SHARE", 0)
    with pytest.raises(ResourceLimitError, match=r"memory_limit=64 KiB .* is too small for the clusters of the 6,000 "
                                                 r"rows .*their bit set of candidates \(a bit a row: 750 bytes\) and "
                                                 r"their union-find \(8 MiB .*moved to a temporary file.*at least 4 "
                                                 r"blocks of 2 MiB.*raise memory_limit to at least .*"
                                                 r"memory_limit := '(\d+)MiB'") as e:
        clusters(corpus, "text", memory_limit="64KiB")
    least = int(re.search(r"memory_limit := '(\d+)MiB'", str(e.value)).group(1))
    assert least == 13  # the 8 MiB of four 2 MiB blocks and a pool of 128 signatures: 62.5 % of 12.9 MiB
    assert as_clusters(clusters(corpus, "text", memory_limit=f"{least}MiB")) == oracle_clusters(corpus, "text", 0.8,
                                                                                                PARAMS)


def test_appended_values_read_back_through_the_map_and_leave_no_file(temp):
    """AppendedValues: each append's position, every value read back through the view
    (old views still valid after more appends), the file never listed in the temp folder,
    and a full disk refused with the fix named (``posix`` write errors, here ENOSPC)."""
    values = file_arrays.AppendedValues(np.uint64)
    try:
        rng = np.random.default_rng(0)
        parts = [rng.integers(0, 2**63, n).astype(np.uint64) for n in (0, 5, 1000, 3)]
        starts = [values.append(p) for p in parts]
        assert starts == [0, 0, 5, 1005]
        first = values.view()
        more = values.append(np.arange(7, dtype=np.uint64))
        assert more == 1008 and np.array_equal(first, np.concatenate(parts))  # the old view unchanged
        assert np.array_equal(values.view(), np.concatenate(parts + [np.arange(7, dtype=np.uint64)]))
        assert not values.view().flags.writeable and os.listdir(temp) == []

        class Full:
            def write(self, data):
                raise OSError(28, "No space left on device")

        values.file, keep = Full(), values.file
        with pytest.raises(ResourceLimitError, match="No space left on device.*set TMPDIR"):
            values.append(np.arange(3, dtype=np.uint64))
        values.file = keep
    finally:
        values.close()


def test_arrays_never_closed_leave_no_file_and_no_warning(tmp_path):
    """A FileArray and an AppendedValues the caller never closes (as a SQL statement's shared
    state may keep them to the end): collected, or still referenced when the interpreter
    exits, their files are closed and the FileArray's folder removed, without a
    ResourceWarning."""
    import subprocess
    import sys

    script = (
        "import gc, warnings, numpy as np\n"
        "from lance_minhash_sql.io import file_arrays\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    a = file_arrays.FileArray(10, np.int64); folder = a.folder\n"
        "    v = file_arrays.AppendedValues(np.uint64); v.append(np.arange(4, dtype=np.uint64))\n"
        "    del a, v; gc.collect()\n"
        "import os; print(len(seen), os.path.exists(folder))\n"
        "KEPT = [file_arrays.FileArray(10, np.int64), file_arrays.AppendedValues(np.uint64)]\n"
        "KEPT[1].append(np.arange(4, dtype=np.uint64))\n"
        "print(KEPT[0].folder)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(file_arrays.__file__))))
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", script], env=env,
                         capture_output=True, text=True, check=True)
    collected, kept = out.stdout.split("\n")[:2]
    assert collected == "0 False"  # no warning while collected, and the folder gone
    assert "ResourceWarning" not in out.stderr and not os.path.exists(kept)  # and at exit
    assert os.listdir(tmp_path) == []
