"""Everything on an S3-compatible store (moto on localhost, ``s3`` fixture): interop with
Lance's own index both ways, the self-join, lifecycle, the I/O bound of a query counted at
the server, and bad input."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.indices import IndexConfig
from lance.query import MinHashQuery
from naive import exact_pairs, oracle_clusters

from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.errors import DatasetError, LanceMinHashError
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.faces.corpus import CorpusSpec, generate_batches
from lance_minhash_sql.index.opened import clear_cache, open_index
from lance_minhash_sql.lifecycle.optimize import optimize
from lance_minhash_sql.lifecycle.prewarm import prewarm
from lance_minhash_sql.query.topk import search, search_ids
from lance_minhash_sql.selfjoin.clusters import clusters
from lance_minhash_sql.selfjoin.dedup import keep_flags
from lance_minhash_sql.selfjoin.pairs import pairs

N = 3000
PARAMS = MinHashParams(num_hashes=64, num_bands=16)


def corpus() -> pa.Table:
    t = pa.Table.from_batches(list(generate_batches(N, CorpusSpec(seed=11, duplicate_fraction=0.3))))
    return pa.table({"id": t.column("id"), "text": t.column("text")})


def queries(table: pa.Table, count: int = 40) -> list[str]:
    rng = np.random.default_rng(5)
    texts = [t for t in table.column("text").to_pylist() if t]
    out = [texts[i] for i in rng.integers(0, len(texts), count // 2)]
    for i in rng.integers(0, len(texts), count - len(out)):
        words = texts[i].split()
        out.append(" ".join(words[: max(1, len(words) - 3)]))
    return out


def write(uri: str, table: pa.Table, opts=None):
    ds = lance.write_dataset(table, uri, storage_options=opts, max_rows_per_file=1000)
    ds.delete("id % 23 = 5")
    return lance.dataset(uri, storage_options=opts)


def lance_answer(ds, q: str, k: int = 10) -> list[tuple[int, float]]:
    t = ds.to_table(nearest=MinHashQuery(q, "text"), limit=k, columns=["id", "_distance"], with_row_id=True)
    return list(zip(t.column("_rowid").to_pylist(), t.column("_distance").to_pylist()))


def answers(t: pa.Table) -> list[tuple[int, float]]:
    return list(zip(t.column("_rowid").to_pylist(), t.column("_distance").to_pylist()))


def keys(s3, bucket: str) -> dict[str, int]:
    return {o["Key"]: o["Size"] for o in s3.client().list_objects_v2(Bucket=bucket).get("Contents", [])}


@pytest.fixture(scope="module")
def stores(s3, tmp_path_factory):
    """The same corpus four times: on S3 with our index, on S3 with Lance's, on S3 without
    an index, and on local disk with our index."""
    table = corpus()
    opts = s3.storage_options()
    bucket = s3.make_bucket("lms-interop")
    ours, native, plain = (f"s3://{bucket}/{name}.lance" for name in ("ours", "native", "plain"))
    local = str(tmp_path_factory.mktemp("s3i") / "local.lance")
    write(ours, table, opts)
    build_index(ours, "text", num_hashes=PARAMS.num_hashes, num_bands=PARAMS.num_bands, storage_options=opts)
    ds = write(native, table, opts)
    ds.create_scalar_index("text", IndexConfig("MINHASHLSH", PARAMS.to_lance_config()))
    write(plain, table, opts)
    write(local, table)
    build_index(local, "text", num_hashes=PARAMS.num_hashes, num_bands=PARAMS.num_bands)
    return {"table": table, "opts": opts, "bucket": bucket, "ours": ours, "native": native, "plain": plain,
            "local": local}


def test_lance_answers_on_our_s3_index_as_on_its_own(stores):
    opts = stores["opts"]
    on_ours = lance.dataset(stores["ours"], storage_options=opts)
    on_native = lance.dataset(stores["native"], storage_options=opts)
    (d,), (nd,) = on_ours.describe_indices(), on_native.describe_indices()
    assert d.type_url == nd.type_url and d.num_rows_indexed == nd.num_rows_indexed
    for q in queries(stores["table"]):
        assert lance_answer(on_ours, q) == lance_answer(on_native, q)


@pytest.mark.parametrize("which", ["ours", "native"])
def test_our_search_on_s3_equals_lance(stores, which):
    clear_cache()
    uri, opts = stores[which], stores["opts"]
    ds = lance.dataset(uri, storage_options=opts)
    qs = queries(stores["table"])
    ids = search_ids(uri, "text", qs, 10, storage_options=opts)
    for i, q in enumerate(qs):
        ref = lance_answer(ds, q)
        got = ids.filter(pa.compute.equal(ids.column("query_index"), i))
        assert answers(got) == ref
    for q in qs[:8]:
        t = search(uri, "text", q, 10, storage_options=opts)
        assert t.column_names == ["id", "text", "_rowid", "_distance"]
        assert answers(t) == lance_answer(ds, q)


def _pair_set(uri, opts=None):
    t = pa.Table.from_batches(list(pairs(uri, "text", 0.7, verify="exact", storage_options=opts)))
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names)))


def test_pairs_clusters_dedup_on_s3_equal_local(stores):
    opts = stores["opts"]
    remote, local = stores["ours"], stores["local"]
    got = _pair_set(remote, opts)
    assert len(got) > 50 and got == _pair_set(local)
    assert clusters(remote, "text", 0.7, storage_options=opts).equals(clusters(local, "text", 0.7))
    assert keep_flags(remote, "text", 0.7, keep="longest", storage_options=opts).equals(
        keep_flags(local, "text", 0.7, keep="longest"))


@pytest.mark.parametrize("which", ["ours", "native"])
def test_self_join_on_s3_at_every_budget(stores, which, self_join_budget):
    """Our index and Lance's, both on S3, under each self-join budget: the exact pairs and
    the clusters of the brute-force oracles (tests/naive.py) on the local copy (the same
    rows at the same row ids), and its keep flags under another budget."""
    opts, uri, local = stores["opts"], stores[which], stores["local"]
    want = exact_pairs(local, 0.7, PARAMS)
    got = {(a, b): (s, j) for a, b, s, j in _pair_set(uri, opts)}
    assert len(want) > 50 and got.keys() == want.keys()
    assert all(got[p][0] == want[p][0] and got[p][1] == pytest.approx(want[p][1], abs=1e-12) for p in want)
    table = clusters(uri, "text", 0.7, storage_options=opts).to_pydict()
    assert dict(zip(table["_rowid"], table["cluster_id"])) == oracle_clusters(local, "text", 0.7, PARAMS)
    assert keep_flags(uri, "text", 0.7, storage_options=opts).equals(keep_flags(local, "text", 0.7, memory_limit="1GiB"))


def test_pairs_read_the_sorted_bands_in_large_ranges(s3, stores):
    clear_cache()
    s3.reset()
    _pair_set(stores["ours"], stores["opts"])
    log = s3.counts()["log"]
    band_gets = [r for m, path, r in log if m == "GET" and path.endswith("/bands.lance")]
    band_rows = N * PARAMS.num_bands
    assert band_gets, "pairs read bands.lance"
    # exact verification reads the bands in two passes (the candidate rows to shingle,
    # then the pairs), each in one large range besides the file's small metadata reads
    body = [r for r in band_gets if int(r.split("=")[1].split("-")[1]) - int(r.split("=")[1].split("-")[0]) > 100_000]
    assert len(body) == 2, f"{len(body)} large reads of bands.lance for {band_rows} band rows: {band_gets}"
    assert len(band_gets) <= 10, f"{len(band_gets)} reads of bands.lance for {band_rows} band rows: {band_gets}"


def test_query_io_bound_counted_at_the_server(s3, stores):
    """Warm queries on an open index touch no page table again; a prewarmed index answers
    from memory (no request at all with a dataset object pinned to its version)."""
    clear_cache()
    uri, opts = stores["ours"], stores["opts"]
    ds = lance.dataset(uri, storage_options=opts)
    qs = queries(stores["table"], 12)
    search_ids(ds, "text", qs[0], 10)  # opens segments, reads page tables
    s3.reset()
    search_ids(ds, "text", qs[1], 10)
    warm = s3.counts()
    assert warm["by_method"].get("HEAD", 0) == 0 and warm["by_method"].get("LIST", 0) == 0
    assert warm["requests"] <= 12, warm["by_method"]  # small files may be resident whole by now
    s3.reset()
    search_ids(ds, "text", qs[1], 10)  # the same query again: band pages and signatures kept
    assert s3.counts()["requests"] <= 2
    result = prewarm(ds, "text")
    assert result.cache_bytes > 0
    s3.reset()
    got = search_ids(ds, "text", qs[2:], 10)
    assert s3.counts()["requests"] == 0, s3.counts()["log"]
    ref = [r for q in qs[2:] for r in lance_answer(ds, q)]
    assert answers(got) == ref


def test_new_version_is_noticed_and_optimize_works_on_s3(s3, stores):
    table, opts = stores["table"], stores["opts"]
    bucket = s3.make_bucket("lms-versions")
    uri = f"s3://{bucket}/c.lance"
    write(uri, table.slice(0, 2000), opts)
    build_index(uri, "text", num_hashes=PARAMS.num_hashes, num_bands=PARAMS.num_bands, storage_options=opts)
    q = table.column("text")[2500].as_py()
    before = search(uri, "text", q, 3, storage_options=opts)
    lance.write_dataset(table.slice(2000), uri, mode="append", storage_options=opts)
    after = search(uri, "text", q, 3, storage_options=opts)  # the appended rows are scored on the fly
    assert after.column("id")[0].as_py() == 2500 and after.column("_distance")[0].as_py() == 0.0
    assert 2500 not in before.column("id").to_pylist()
    res = optimize(uri, "text", storage_options=opts)
    assert res.rows_added == 1000
    ds = lance.dataset(uri, storage_options=opts)
    for query in queries(table, 10):
        assert answers(search(uri, "text", query, 10, storage_options=opts)) == lance_answer(ds, query)


def _bad_cases(s3, stores):
    opts = stores["opts"]
    wrong = dict(opts, aws_access_key_id="lms-unknown-key", aws_secret_access_key="WRONG" + s3.SECRET_KEY[5:])
    dead = dict(opts, aws_endpoint="http://127.0.0.1:9", connect_timeout="1s", timeout="2s",
                client_max_retries="0", client_retry_timeout="1")
    return {"wrong credentials": (stores["plain"], wrong, "refused the credentials"),
            "missing bucket": ("s3://lms-absent-bucket/c.lance", opts, "does not exist"),
            "unreachable endpoint": (stores["plain"], dead, "http://127.0.0.1:9 cannot be reached")}


@pytest.mark.parametrize("case", ["wrong credentials", "missing bucket", "unreachable endpoint"])
def test_bad_store_is_a_clear_error_and_nothing_is_written(s3, stores, case):
    uri, opts, cause = _bad_cases(s3, stores)[case]
    before = keys(s3, stores["bucket"])
    calls = [lambda: build_index(uri, "text", storage_options=opts),
             lambda: search(uri, "text", "some text", 5, storage_options=opts),
             lambda: list(pairs(uri, "text", 0.8, storage_options=opts))]
    for call in calls:
        with pytest.raises(LanceMinHashError) as err:
            call()
        msg = str(err.value)
        assert uri in msg and cause in msg, msg
        assert s3.SECRET_KEY not in msg and s3.SECRET_KEY[5:] not in msg
    assert keys(s3, stores["bucket"]) == before


def test_unsupported_scheme_on_every_entry_point(stores):
    opts = stores["opts"]
    for call in (lambda u: search(u, "text", "x", 5, storage_options=opts),
                 lambda u: list(pairs(u, "text", storage_options=opts)),
                 lambda u: optimize(u, "text", storage_options=opts)):
        with pytest.raises(DatasetError, match="'gopher'"):
            call("gopher://host/c.lance")


def test_visiting_by_shared_bands_gives_the_exact_answer(s3, tmp_path, monkeypatch):
    """On a store, candidates are read level by level and the search stops early; the
    answers equal the local search, which scores every candidate: ties (fifty identical
    texts across a fragment boundary), deletions, a filter, k from 1 to 40, batches."""
    from test_search import TIE_IDS, TIE_TEXT, corpus_table, make_queries

    from lance_minhash_sql.index import entries as entries_mod

    # a slow store: signatures are never worth reading whole, every query reads by level
    monkeypatch.setattr(entries_mod, "REMOTE_READ_BYTES_PER_SECOND", 1e3)
    table = corpus_table(3000, seed=4)
    opts = s3.storage_options()
    uri = f"s3://{s3.make_bucket('lms-levels')}/c.lance"
    local = str(tmp_path / "c.lance")
    for where, o in ((uri, opts), (local, None)):
        ds = lance.write_dataset(table, where, storage_options=o, max_rows_per_file=1000)
        ds.delete("id % 29 = 3 OR id = 982")
        build_index(where, "text", num_hashes=PARAMS.num_hashes, num_bands=PARAMS.num_bands, storage_options=o)
    qs = make_queries(table, 30, seed=9)
    for k in (1, 5, 10, 40):
        clear_cache()
        got = search_ids(uri, "text", qs, k, storage_options=opts)
        assert got.equals(search_ids(local, "text", qs, k)), k
    clear_cache()
    for q in qs[:6]:
        got = search(uri, "text", q, 7, filter="score < 50", columns=["id"], storage_options=opts)
        assert got.equals(search(local, "text", q, 7, filter="score < 50", columns=["id"]))
    clear_cache()
    got = search(uri, "text", TIE_TEXT, 5, columns=["id"], storage_options=opts)
    assert got.column("id").to_pylist() == [i for i in TIE_IDS if i != 982][:5]
    (entry,) = open_index(uri, "text", opts).segment_entries()
    assert not entry.docs.full
    assert entry.stats["docs_read"] == 5  # 49 identical rows share every band; the first five by row id win
