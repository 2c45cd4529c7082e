"""The dry run's cost model (``diagnostics/workload.py``, ``diagnostics/costs.py``,
``diagnostics/calibration.py``, ``diagnostics/machine_load.py``).

Oracles: the self-join's work counted by brute force from every row's band keys
(``tests/naive.py``: the signatures and band keys of each row, buckets as groups of equal
keys), and what the self-join itself counts (``selfjoin/pool.py``'s ``STATS``).
"""

from __future__ import annotations

import numpy as np
import pytest

import lance_minhash_sql as lms
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.diagnostics.calibration import calibrate
from lance_minhash_sql.diagnostics.costs import Rates, Work, project, work
from lance_minhash_sql.diagnostics.workload import sampled_loads
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.selfjoin.pool import STATS
from lance_minhash_sql.faces.corpus import CorpusSpec, write_corpus

import naive


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> str:
    """3,000 rows of the synthetic corpus (heavy-tailed clusters), indexed, none deleted."""
    uri = str(tmp_path_factory.mktemp("costs") / "corpus.lance")
    write_corpus(uri, 3000, CorpusSpec(seed=7, source_skew=3.0), rows_per_fragment=1000)
    lms.build_index(uri, "text")
    return uri


def brute_loads(keys: np.ndarray, classes=(2, 16, 256, 4096)):
    """Per row: bands whose bucket holds another row, those whose bucket is not within the
    row's bucket of the band before, ``sum (m - 1)`` over each set, and the same sums per
    class of bucket size (a bucket of ``m`` rows in the last class whose bound is at most
    ``m``), from the band keys of every row (a bucket: the rows of one band with equal
    keys); and every bucket of two rows or more: ``{key: (rows, kept)}``."""
    n, b = keys.shape
    groups = [np.unique(keys[:, j], return_inverse=True)[1] for j in range(b)]
    bands, kept, visits, kept_visits = (np.zeros(n) for _ in range(4))
    by_class, kept_by_class = np.zeros((n, len(classes))), np.zeros((n, len(classes)))
    buckets = {}
    for i in range(n):
        for j in range(b):
            members = np.flatnonzero(groups[j] == groups[j][i])
            if members.size < 2:
                continue
            c = max(x for x in range(len(classes)) if classes[x] <= members.size)
            bands[i] += 1
            visits[i] += members.size - 1
            by_class[i, c] += members.size - 1
            inside = j > 0 and (groups[j - 1][members] == groups[j - 1][i]).all()
            if not inside:
                kept[i] += 1
                kept_visits[i] += members.size - 1
                kept_by_class[i, c] += members.size - 1
            buckets[int(keys[i, j])] = (members, not inside)
    return bands, kept, visits, kept_visits, by_class, kept_by_class, buckets


def test_every_rows_loads_are_the_brute_force_counts(plain):
    opened = open_index(plain, "text")
    _, _, keys, _, texts = naive.signed(plain, opened.params)
    loads = sampled_loads(opened, texts)
    bands, kept, visits, kept_visits, by_class, kept_by_class, buckets = brute_loads(np.asarray(keys))
    assert visits.sum() > 0 and (kept_visits < visits).any()  # the corpus has buckets of both kinds
    assert (by_class.sum(axis=0) > 0).sum() >= 2  # and of several classes of size
    np.testing.assert_array_equal(loads.bands, bands)
    np.testing.assert_array_equal(loads.kept_bands, kept)
    np.testing.assert_array_equal(loads.visits, visits)
    np.testing.assert_array_equal(loads.kept_visits, kept_visits)
    np.testing.assert_array_equal(loads.class_visits, by_class)
    np.testing.assert_array_equal(loads.kept_class_visits, kept_by_class)
    # every bucket, once: its rows (the index's docs are the rows in order, none deleted)
    assert loads.bucket_keys.tolist() == sorted(buckets)
    for key, docs, kept_one in zip(loads.bucket_keys.tolist(), loads.bucket_docs, loads.bucket_kept.tolist()):
        assert docs.tolist() == buckets[key][0].tolist() and kept_one == buckets[key][1]


def test_work_of_one_group_is_what_the_self_join_fetches(plain):
    """Every row sampled, a budget whose pool holds every candidate: the rows fetched are
    the self-join's own count, the visits half the rows' sums."""
    opened = open_index(plain, "text")
    _, _, keys, _, texts = naive.signed(plain, opened.params)
    loads = sampled_loads(opened, texts)
    n = len(texts)
    w = work(opened, n, loads, 10.0, 0.0, Budget.of(256 << 20))
    STATS.reset()
    pairs = sum(b.num_rows for b in lms.pairs(plain, "text", 0.8, memory_limit="256MiB"))
    assert pairs > 0 and STATS["groups"] == 1
    assert w.fetched_rows == pytest.approx(STATS["fetched_rows"])
    assert w.visits == pytest.approx(loads.visits.sum() / 2) == pytest.approx(sum(w.class_visits))
    assert w.candidate_rows == pytest.approx(loads.bands.sum())
    assert w.band_rows == n * opened.params.num_bands and w.groups == 1


def test_work_under_a_small_budget_drops_the_labelled_buckets(plain):
    """A budget whose pool holds fewer rows than have a candidate: each candidate band row
    is fetched, less the buckets the labels drop (between the kept and all counts)."""
    opened = open_index(plain, "text")
    _, _, keys, _, texts = naive.signed(plain, opened.params)
    loads = sampled_loads(opened, texts)
    small = work(opened, len(texts), loads, 0.0, 0.0, Budget.of(128 << 10))  # a pool of ~300 rows
    assert loads.kept_bands.sum() <= small.candidate_rows <= loads.bands.sum()
    assert small.candidate_rows < loads.bands.sum()
    assert small.fetched_rows == small.candidate_rows > np.count_nonzero(loads.bands)
    assert small.groups > 1
    kept = len(small.class_visits) // 2  # the kept buckets' visits by class, then the others' left
    assert sum(small.class_visits) == pytest.approx(small.visits)
    assert small.class_visits[:kept] == pytest.approx(loads.kept_class_visits.sum(axis=0) / 2)


@pytest.mark.parametrize("verify", ["estimate", "exact"])
def test_calibration_measures_every_step(plain, verify):
    opened = open_index(plain, "text")
    r = calibrate(opened, 0.7, verify, Budget.of(256 << 20))
    for name in ("candidate_row", "fetched_row", "group_fetch", "visit", "bucket_row", "pair", "exact_pair"):
        assert 0 <= getattr(r, name) < 1.0, (name, r)  # CPU seconds per unit: a rate, never negative
    assert r.band_row > 0 and r.parallel > 0
    assert (r.exact_row > 0) == (verify == "exact")  # rows were taken and shingled only then
    for name in ("link_row", "union_link", "index_row", "table_row", "keep_row"):  # the clusters' and dedup's steps
        assert 0 < getattr(r, name) < 1.0, (name, r)
    if verify == "estimate":
        assert r.exact_pair == 0
    assert r.by_threshold == ()  # no sampled buckets: no rate per class of bucket size


def test_calibration_times_each_class_of_bucket_size(plain):
    """With the sampled rows' buckets: a rate per class of bucket size and kind (kept or
    not) at each threshold asked, positive for those the sample found buckets of."""
    opened = open_index(plain, "text")
    _, _, keys, _, texts = naive.signed(plain, opened.params)
    loads = sampled_loads(opened, texts[:500])
    r = calibrate(opened, 0.7, "estimate", Budget.of(256 << 20), loads, [0.7, 0.9])
    assert [t for t, _ in r.by_threshold] == [0.7, 0.9]
    found = np.zeros(8, dtype=bool)
    sizes = np.array([d.size for d in loads.bucket_docs])
    classes = np.searchsorted([2, 16, 256, 4096], sizes, side="right") - 1 + 4 * ~loads.bucket_kept
    found[classes] = True
    assert found.sum() >= 2
    for t, rates in r.by_threshold:
        assert len(rates) == 8 and all(0 <= x < 1e-3 for x in rates)
        assert all(rates[c] > 0 for c in np.flatnonzero(found))
        assert r.at(t).class_visit == rates


def test_projection_prices_each_step():
    rates = Rates(band_row=1e-9, candidate_row=2e-9, fetched_row=3e-9, group_fetch=7e-3, visit=4e-9, bucket_row=8e-9, pair=5e-9,
                  exact_pair=6e-9, exact_row=9e-9, parallel=2.0)
    w = Work(band_rows=1e6, candidate_rows=1e5, fetched_rows=1e4, groups=3, visits=1e7, pairs=1e3, exact_pairs=1e2,
             exact_rows=1e3, shingle_bytes=5e5)
    p = project(w, rates, 1000, Budget.of(256 << 20))
    serial = 3e-5 + 2.1e-2  # the groups' pools filled, on the self-join's own thread
    threads = 1e-3 + 2e-4 + 4e-2 + 8e-4 + 5e-6 + 6e-7 + 9e-6
    assert p.cpu_seconds == pytest.approx(threads + serial)
    assert p.seconds == pytest.approx(threads / 2 + serial)
    assert p.temp_disk == 5e5
    # with a rate per class of bucket size (kept buckets, then the others): the visits of
    # each class at its rate, in place of the visits', candidate band rows' and pairs' rates
    by_class = Rates(**{**rates.__dict__, "by_threshold": ((0.8, (1e-9, 2e-9, 3e-9, 4e-9, 5e-9, 6e-9, 7e-9, 8e-9)),)})
    assert by_class.at(0.9).class_visit == () and project(w, by_class.at(0.9), 1000, Budget.of(256 << 20)) == p
    wc = Work(**{**w.__dict__, "class_visits": (1e6, 2e6, 3e6, 0.0, 4e5, 0.0, 0.0, 5e5)})
    q = project(wc, by_class.at(0.8), 1000, Budget.of(256 << 20))
    visits = 1e-3 + 4e-3 + 9e-3 + 2e-3 + 4e-3
    assert q.cpu_seconds == pytest.approx(threads - 4e-2 - 8e-4 - 5e-6 + visits + serial)


def test_clusters_work_of_one_group_is_what_their_self_join_fetches(plain):
    """The clusters' work (every row sampled): one group under a large budget, its rows
    fetched the self-join's own count; under a small one (whose pool also leaves room
    for the union-find and the bit set) at least the pairs' groups, and candidate band
    rows between the kept and all counts."""
    opened = open_index(plain, "text")
    _, _, keys, _, texts = naive.signed(plain, opened.params)
    loads = sampled_loads(opened, texts)
    n = len(texts)
    w = work(opened, n, loads, 10.0, 0.0, Budget.of(256 << 20), clustered=123.0)
    STATS.reset()
    assert lms.clusters(plain, "text", 0.8, memory_limit="256MiB").num_rows > 0 and STATS["groups"] == 1
    assert w.fetched_rows == pytest.approx(STATS["fetched_rows"]) and w.groups == 1
    assert w.index_rows == n and w.clustered == 123.0
    small = work(opened, n, loads, 0.0, 0.0, Budget.of(128 << 10), clustered=0.0)
    assert small.groups >= work(opened, n, loads, 0.0, 0.0, Budget.of(128 << 10)).groups > 1
    assert loads.kept_bands.sum() <= small.candidate_rows < loads.bands.sum()


def test_projection_prices_the_clusters_steps():
    """Clusters: the pairs' reads and fetches, a link per candidate band row instead of
    the visits and pairs, and the one-thread steps at one core at most; dedup adds its
    keep order per clustered row; the clustered rows' table in the peak."""
    from lance_minhash_sql.core.tuning import CLUSTERED_ROW_BYTES

    rates = Rates(band_row=1e-9, candidate_row=2e-9, fetched_row=3e-9, group_fetch=7e-3, visit=4e-9, bucket_row=8e-9,
                  pair=5e-9, exact_pair=6e-9, exact_row=9e-9, parallel=2.0, link_row=1e-8, union_link=2e-8,
                  index_row=3e-8, table_row=4e-8, keep_row=5e-8)
    w = Work(band_rows=1e6, candidate_rows=1e5, fetched_rows=1e4, groups=3, visits=1e7, pairs=1e3, exact_pairs=0,
             index_rows=1e6, clustered=1e4)
    threads = 1e-3 + 2e-4 + 1e-3
    one = 3e-5 + 2.1e-2 + 2e-3 + 3e-2 + 4e-4  # the pools filled, then the one-thread steps
    c = project(w, rates, 1000, Budget.of(256 << 20))
    assert c.cpu_seconds == pytest.approx(threads + one)
    assert c.seconds == pytest.approx(threads / 2 + one)
    d = project(w, rates, 1000, Budget.of(256 << 20), dedup=True)
    assert d.cpu_seconds == pytest.approx(threads + one + 5e-4)
    assert d.peak_memory == c.peak_memory == project(Work(1e6, 1e5, 1e4, 3, 1e7, 1e3, 0), rates, 1000,
                                                     Budget.of(256 << 20)).peak_memory + int(1e4 * CLUSTERED_ROW_BYTES)
    slow = project(w, Rates(**{**rates.__dict__, "parallel": 0.5}), 1000, Budget.of(256 << 20))
    assert slow.seconds == pytest.approx((threads + one) / 0.5)


def _recorded_appends(monkeypatch) -> list:
    """The temporary files the exact verification's shingle sets write
    (``io/file_arrays.py: AppendedValues``, as ``selfjoin/shingles.py`` makes them)."""
    from lance_minhash_sql.selfjoin import shingles

    files = []
    real = shingles.AppendedValues

    class Recorded(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            files.append(self)

    monkeypatch.setattr(shingles, "AppendedValues", Recorded)
    return files


@pytest.mark.parametrize("verify", ["estimate", "exact"])
def test_temp_disk_is_what_the_pairs_self_join_writes(plain, monkeypatch, verify):
    """Every row sampled: ``temp_disk`` is the bytes of the temporary file the pairs'
    self-join writes (the shingle sets of exact verification), 0 when it writes none,
    under the smallest budget too."""
    n = len(naive.live_rows(plain)[1])
    for limit in ("4MiB", "256MiB"):
        row = lms.estimate(plain, "text", [0.8], sample_rows=n, memory_limit=limit, verify=verify).to_pylist()[0]
        files = _recorded_appends(monkeypatch)
        for _ in lms.pairs(plain, "text", 0.8, memory_limit=limit, verify=verify):
            pass
        written = sum(f.size * f.dtype.itemsize for f in files)
        assert row["temp_disk"] == pytest.approx(written)
        assert (written > 0) == (verify == "exact")


@pytest.mark.parametrize("in_file", [False, True])
def test_clusters_temp_disk_is_the_union_finds_file(plain, monkeypatch, in_file):
    """``clusters_temp_disk`` against the temporary file ``clusters`` writes: none under a
    budget whose union-find fits (the 3,000 rows need 12 KB), else the same bytes (the
    union-find's share shrunk so that it goes to its file)."""
    from lance_minhash_sql.core import budget as core_budget
    from lance_minhash_sql.selfjoin import parent

    if in_file:
        monkeypatch.setattr(core_budget, "PARENT_SHARE", 1e-4)
    written = []
    real = parent.FileArray

    class Recorded(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            written.append(self.nbytes)

    monkeypatch.setattr(parent, "FileArray", Recorded)
    row = lms.estimate(plain, "text", [0.8], sample_rows=200, memory_limit="16MiB").to_pylist()[0]
    written.clear()  # (the calibration times a small union-find under the same budget)
    lms.clusters(plain, "text", 0.8, memory_limit="16MiB")
    assert written == ([row["clusters_temp_disk"]] if in_file else [])
    assert (row["clusters_temp_disk"] > 0) == in_file


def test_loads_among_rows_with_a_candidate_are_the_same(plain):
    """Looking up only the rows whose search found another row: the same loads (a row
    alone in all its buckets has none)."""
    opened = open_index(plain, "text")
    _, _, keys, _, texts = naive.signed(plain, opened.params)
    whole = sampled_loads(opened, texts)
    among = whole.bands > 0
    assert 0 < among.sum() < among.size
    part = sampled_loads(opened, texts, among=among)
    for name in ("bands", "kept_bands", "visits", "kept_visits"):
        np.testing.assert_array_equal(getattr(part, name), getattr(whole, name))


def test_cores_count_the_threads_runnable_now_when_fewer_than_the_minutes_average(tmp_path, monkeypatch):
    """The last minute's load average still counts work that has ended (a full run just
    before, the calibration itself): the threads runnable now, read from the running count
    of ``/proc/loadavg`` less the reader, take its place when fewer."""
    from lance_minhash_sql.diagnostics import machine_load

    monkeypatch.setattr(machine_load, "num_threads", lambda: 2)
    monkeypatch.setattr(machine_load.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(machine_load.os, "getloadavg", lambda: (1.8, 1.5, 1.0))
    fake = tmp_path / "loadavg"
    monkeypatch.setattr(machine_load, "LOADAVG", str(fake))
    fake.write_text("1.80 1.50 1.00 1/345 6789\n")  # only the reader runs now
    assert machine_load.runnable_others() == 0.0 and machine_load.cores_now() == 2.0
    fake.write_text("1.80 1.50 1.00 5/345 6789\n")  # four others: the minute's 1.8 is fewer
    assert machine_load.runnable_others() == 4.0
    assert machine_load.cores_now() == pytest.approx(2 * 2 / (1.8 + 2))
    fake.write_text("garbled\n")  # unreadable: the minute's average alone
    assert machine_load.runnable_others() is None and machine_load.cores_now() == pytest.approx(2 * 2 / (1.8 + 2))


@pytest.fixture(scope="module")
def crowded(tmp_path_factory) -> str:
    """6,000 rows, 90% of them near-duplicates: more candidate band rows than a small
    budget's group keeps from its marking pass."""
    uri = str(tmp_path_factory.mktemp("costs") / "crowded.lance")
    write_corpus(uri, 6000, CorpusSpec(seed=7, duplicate_fraction=0.9), rows_per_fragment=2000)
    lms.build_index(uri, "text")
    return uri


def test_band_rows_read_again(crowded, monkeypatch):
    """The band rows the self-join reads a second time (a group's shards past the rows it
    keeps), counted from its own reads of each shard's key range, against the work's."""
    from lance_minhash_sql.selfjoin import groups

    opened = open_index(crowded, "text")
    _, _, keys, _, texts = naive.signed(crowded, opened.params)
    keys = np.sort(np.asarray(keys).ravel())
    loads = sampled_loads(opened, texts)
    read = groups.read_multi
    for limit in (4 << 20, 5 << 20, 6 << 20, 256 << 20):
        seen, again = set(), []

        def counted(shard):
            if shard.index in seen:
                again.append(int(np.searchsorted(keys, shard.hi) - np.searchsorted(keys, shard.lo)))
            seen.add(shard.index)
            return read(shard)

        monkeypatch.setattr(groups, "read_multi", counted)
        assert sum(b.num_rows for b in lms.pairs(crowded, "text", 0.8, memory_limit=limit)) > 0
        w = work(opened, len(texts), loads, 0.0, 0.0, Budget.of(limit))
        if limit == 256 << 20:
            assert sum(again) == w.read_again == 0
        else:
            assert sum(again) > 0
            assert w.read_again == pytest.approx(sum(again), rel=0.25)


def test_calibration_lays_out_a_shard_as_its_own_pool_does(plain):
    """A calibration shard laid out over the bit set's ranks (as the self-join lays out a
    group's shard) is the shard over a pool of its own rows: the same buckets, each band
    row on its own row's signature; over as many rows back to back, the same layout."""
    from lance_minhash_sql.diagnostics.calibration import _loaded
    from lance_minhash_sql.selfjoin.pool import read_multi, span_data
    from lance_minhash_sql.selfjoin.shards import pair_shards, plan_for

    opened = open_index(plain, "text")
    plan = plan_for(opened)
    shard = next(s for s in pair_shards(opened.ds, opened.column, 0.8, num_shards=4) if read_multi(s) is not None)
    keys, gids = read_multi(shard)
    want = span_data(plan, keys, gids)
    for own in (True, False):
        out: dict = {}
        got = _loaded(plan, keys, gids, own, out)
        for name in ("keys", "docs", "starts", "ends", "gids"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
        assert ("fetch" in out) == own and out["candidates"] == keys.size and out["lay"] >= 0
        if own:  # each band row on its own row's signature
            np.testing.assert_array_equal(got.sigs[got.docs], want.sigs[want.docs])
